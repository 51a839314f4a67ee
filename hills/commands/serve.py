"""`hills serve`: run the evaluation service in the foreground, as its own
user; the service itself is hills.service."""

from __future__ import annotations

import click

from ..cli.options import CONTEXT
from ..cli.output import say


@click.command("serve", context_settings=CONTEXT)
@click.option("--state", "state_dir", default="/var/lib/hills", show_default=True, metavar="DIR",
              help="The service's state folder, as 'hills setup service' made it.")
@click.option("--socket", "socket_path", metavar="PATH",
              help="Listen on PATH rather than the socket the state folder's config names.")
def command(state_dir: str, socket_path: str | None) -> int:
    """Run the evaluation service in the foreground, as the service user.

    Listens on the unix socket and answers each connection in a process of
    its own: admins commit and pin, climbers evaluate, tune and read
    results, each caller known by its uid (SO_PEERCRED). Refuses to run as
    root and on a state folder another user can read. Runs until SIGTERM
    or Ctrl-C; an eval under way when a client goes away runs to its end.
    """
    from ..service import server as service

    return service.serve(state_dir, socket_path, ready=lambda path: say(f"hills serve: listening on {path}"))
