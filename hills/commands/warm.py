"""`hills warm`: what the warm eval server keeps running for this user
(docs/warm.md), and stopping it."""

from __future__ import annotations

import time

import click

from ..base import errors
from ..cli.options import CONTEXT, HillsGroup, json_option
from ..cli.output import emit, emit_json, say


@click.group("warm", context_settings=CONTEXT, cls=HillsGroup)
def command() -> None:
    """Show or stop the warm eval servers that run for this user.

    After an eval, a warm server stays in the background so that the next
    eval starts with hills' code loaded; between calls it keeps a spare
    with a standby evaluator booted for the call it expects next. A server
    stops by itself after HILLS_WARM_IDLE_S seconds without a request
    (default 600), when its HILLS_HOME goes away, or when stopped here.
    HILLS_WARM=off keeps an eval cold and starts none.
    """


@command.command("status", context_settings=CONTEXT)
@json_option
def status(as_json: bool) -> int:
    """List this user's warm servers: id, pid, HILLS_HOME, age, idle time left, spare."""
    from ..warm import control

    now = time.time()
    running = control.servers()
    if as_json:
        emit_json([server.as_json(now) for server in running])
        return errors.EXIT_OK
    if not running:
        say("no warm server runs for this user")
        return errors.EXIT_OK
    for server in running:
        shown = server.as_json(now)
        emit(f"warm server {server.id[:12]} (pid {server.pid}) for HILLS_HOME '{server.hills_home}'")
        emit(f"  age          {_duration(shown['age_s'])}")
        left = shown["idle_left_s"]
        emit(f"  idle left    {_duration(left)}" + (f" of {_duration(shown['idle_s'])}" if left is not None else ""))
        spare = server.spare
        emit("  spare        " + (f"pid {spare}, waiting with a standby" if spare is not None else "none waiting"))
    return errors.EXIT_OK


@command.command("stop", context_settings=CONTEXT)
@click.argument("names", metavar="[SERVER...]", nargs=-1)
@click.option("--all", "everyone", is_flag=True, help="Stop every warm server of this user, whatever it serves.")
def stop(names: tuple[str, ...], everyone: bool) -> int:
    """Stop the warm servers named (by id or pid), else this HILLS_HOME's."""
    from ..base import state
    from ..warm import control

    chosen = control.select(list(names), everyone=everyone)
    if not chosen:
        say("no warm server runs for this user" if everyone or names
            else f"no warm server runs for HILLS_HOME '{state.home()}'")
        return errors.EXIT_OK
    late = control.stop(chosen)
    for server in chosen:
        if server not in late:
            say(f"stopped warm server {server.id[:12]} (pid {server.pid}) for HILLS_HOME '{server.hills_home}'")
    if late:
        names_late = ", ".join(f"{server.id[:12]} (pid {server.pid})" for server in late)
        raise errors.Refused(f"warm server {names_late} was asked to stop and has not ended within "
                             f"{control.STOP_WAIT_S:.0f} s",
                             hint="it ends once its running evals are done; 'hills warm status' shows it until then")
    return errors.EXIT_OK


def _duration(seconds: float | None) -> str:
    """`1h 02m`, `9m 48s`, `12s`; `unknown` without a figure."""
    if seconds is None:
        return "unknown"
    whole = int(seconds)
    if whole >= 3600:
        return f"{whole // 3600}h {whole % 3600 // 60:02d}m"
    if whole >= 60:
        return f"{whole // 60}m {whole % 60:02d}s"
    return f"{whole}s"
