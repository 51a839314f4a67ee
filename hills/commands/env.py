"""`hills env`: the locked environment of a hill's committed version, the
one its evals run in: its interpreter, activation lines, or a shell."""

from __future__ import annotations

import os
import shlex

import click

from ..base import errors
from ..cli.options import CONTEXT, hill_argument, json_option
from ..cli.output import emit, emit_json, say

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..disk.hill import Hill


@click.command("env", context_settings=CONTEXT)
@hill_argument
@click.option("--shell", "start_shell", is_flag=True,
              help="Start $SHELL (else /bin/sh) with the environment first on PATH; exit it to leave.")
@click.option("--activate", is_flag=True,
              help="Print export lines for a POSIX shell: eval \"$(hills env NAME --activate)\".")
@json_option
def command(name: str, start_shell: bool, activate: bool, as_json: bool) -> int:
    """Print the interpreter of the hill's locked environment.

    The environment is the one evals of the hill's committed version run
    in, built by uv from its pyproject.toml and uv.lock; where it is not
    built yet (or changed since it was built), it is built as the next
    eval would build it. The environment is sealed:
    nothing here writes into it, and a file added to it or changed breaks
    its seal, so that the next eval builds it again before it scores.
    """
    from ..base.progress import Progress, mode_for
    from ..run import devrun

    if sum((start_shell, activate, as_json)) > 1:
        raise errors.UsageError("--shell, --activate and --json cannot be combined",
                                hint="pick one: a shell, the lines for one, or JSON")
    target = local_hill(name, "env")
    with Progress(mode_for(elsewhere="lines")) as shown:
        found = devrun.locked_env(target, say=shown)
    if found.dirty:
        say(f"hills: hill '{found.hill}' has uncommitted changes: this is the environment of its last commit "
            f"(tree {found.tree_hash[:12]})")
    if as_json:
        emit_json(found.as_dict())
        return errors.EXIT_OK
    if activate:
        for key, value in found.variables("").items():
            # PATH: the environment's bin/ before whatever PATH the shell has.
            emit(f"export {key}={shlex.quote(value)}" + ('"$PATH"' if key == "PATH" else ""))
        return errors.EXIT_OK
    if start_shell:
        import subprocess

        shell = os.environ.get("SHELL") or "/bin/sh"
        say(f"hills: a shell in the environment of hill '{found.hill}' (tree {found.tree_hash[:12]}), "
            f"python {found.python}; exit to leave")
        env = dict(os.environ, **found.variables(os.environ.get("PATH", os.defpath)))
        return subprocess.run([shell], env=env).returncode
    emit(found.python)
    return errors.EXIT_OK


def local_hill(name: str, verb: str) -> Hill:
    """The hill `name` on this machine, for a verb the evaluation service
    does not answer (a dev run, the environment): where this CLI uses a
    service and no hill here has that name, the error says why, not only
    that the name is unknown."""
    from ..disk import hill

    try:
        return hill.resolve(name)
    except errors.UsageError:
        from ..service import client

        socket_path = client.service_socket()
        if socket_path is None:
            raise
        raise errors.UsageError(
            f"'hills {verb}' works on this machine's own hills, and none here is named '{name}'",
            hint=f"the hills service at '{socket_path}' keeps its hills where climbers cannot read them and "
                 f"takes no '{verb}'; run it where the hill is, or ask the service's admin") from None
