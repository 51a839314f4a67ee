"""`hills trust`: the keys whose reports `hills verify` accepts besides
this machine's own (the allowed-signers file in machine state)."""

from __future__ import annotations

import click

from ..base import errors
from ..cli.options import CONTEXT, HillsGroup, json_option
from ..cli.output import emit, emit_json, say


@click.group("trust", context_settings=CONTEXT, cls=HillsGroup)
def command() -> None:
    """Add, remove or list the keys whose reports 'hills verify' accepts.

    The keys live in the allowed-signers file of the machine state
    ($HILLS_HOME/allowed_signers, OpenSSH's allowed_signers format, each
    key limited to the namespace hills-report), which ssh-keygen -Y verify
    reads as it is. A key added with --service also lists hills-service
    among its namespaces: it is an evaluation service's, and only such a
    key's reports may say trust 'service'.
    """


@command.command("add", context_settings=CONTEXT)
@click.argument("name", metavar="NAME")
@click.argument("key", metavar="KEY")
@click.option("--service", is_flag=True,
              help="Trust KEY as an evaluation service's key: the only role whose reports may say trust 'service'.")
def add(name: str, key: str, service: bool) -> int:
    """Trust KEY (an 'ssh-ed25519 AAAA...' line, as 'hills key' prints it) as NAME."""
    from ..evidence import trust

    signer = trust.add(name, key, service=service)
    say(f"trusted '{signer.name}' ({signer.fingerprint})" + (" as a service key" if service else ""))
    return errors.EXIT_OK


@command.command("remove", context_settings=CONTEXT)
@click.argument("name", metavar="NAME")
def remove(name: str) -> int:
    """Stop trusting the key added as NAME."""
    from ..evidence import trust

    signer = trust.remove(name)
    say(f"no longer trusted: '{signer.name}' ({signer.fingerprint})")
    return errors.EXIT_OK


@command.command("list", context_settings=CONTEXT)
@json_option
def list_(as_json: bool) -> int:
    """List the trusted keys: name, fingerprint, key and role, one per line."""
    from ..base import ed25519
    from ..evidence import trust

    signers = trust.trusted()
    if as_json:
        emit_json([{"name": signer.name, "fingerprint": signer.fingerprint,
                    "key": ed25519.public_line(signer.public), "role": signer.role} for signer in signers])
    else:
        for signer in signers:
            emit(f"{signer.name}\t{signer.fingerprint}\t{ed25519.public_line(signer.public)}\t{signer.role}")
    for problem in trust.problems():
        say(f"warning: {problem} (skipped)")
    return errors.EXIT_OK
