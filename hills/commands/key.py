"""`hills key`: the machine's public key, for another machine to trust."""

import click

from .. import errors
from .options import CONTEXT, json_option
from .output import emit, emit_json


@click.command("key", context_settings=CONTEXT)
@json_option
def command(as_json: bool) -> int:
    """Print this machine's public key as one OpenSSH line.

    The line is 'ssh-ed25519 AAAA... hills@HOST', the key every report and
    attempts log of this machine is signed with. On another machine,
    'hills trust add NAME LINE' makes its 'hills verify' accept those
    reports. Creates the key if the machine has none yet.
    """
    from .. import ed25519, trust

    keys = trust.machine_keys(for_signing=True)
    assert keys.public is not None
    line = ed25519.public_line(keys.public, trust.comment())
    if as_json:
        emit_json({"key": line, "fingerprint": keys.fingerprint})
    else:
        emit(line)
    return errors.EXIT_OK
