"""`hills key`: the machine's public key, for another machine to trust."""

import click

from ..base import errors
from ..cli.options import CONTEXT, json_option
from ..cli.output import emit, emit_json


@click.command("key", context_settings=CONTEXT)
@json_option
def command(as_json: bool) -> int:
    """Print this machine's public key as one OpenSSH line.

    The line is 'ssh-ed25519 AAAA... hills@HOST', the key every report and
    attempts log of this machine is signed with. On another machine,
    'hills trust add NAME LINE' makes its 'hills verify' accept those
    reports. Through the evaluation service it prints the service's key
    (and, with --json, "role": "service"): add it with 'hills trust add
    --service NAME LINE', the role a report saying trust 'service' needs.
    Creates the key if the machine has none yet.
    """
    from ..base import ed25519
    from ..evidence import trust

    from ..evidence.caller import not_the_service
    from ..cli.output import say

    keys = trust.machine_keys(for_signing=True)
    assert keys.public is not None
    line = ed25519.public_line(keys.public, trust.comment())
    # The service's own process says so: the climber who fetches this key
    # trusts it as a service's, and its service reports then verify.
    role = "machine" if not_the_service() else "service"
    if as_json:
        emit_json({"key": line, "fingerprint": keys.fingerprint, "role": role})
    else:
        emit(line)
        if role == "service":
            say("hint: this is the hills service's key; to check its reports offline, "
                "hills trust add --service NAME 'LINE' (the line above)")
    return errors.EXIT_OK
