"""`hills setup service`: make this machine an evaluation service under
its own user (as root, once); the work is hills.service.setup's."""

from __future__ import annotations

import click

from ..base import errors
from ..cli.options import CONTEXT
from ..cli.output import emit, say


@click.command("service", context_settings=CONTEXT)
@click.option("--user", default="hills", show_default=True, metavar="USER",
              help="The service's own user; created when missing.")
@click.option("--state", "state_dir", default="/var/lib/hills", show_default=True, metavar="DIR",
              help="The service's state folder (key, vault, hills, logs); made 0700, the service user's.")
@click.option("--socket", "socket_path", default="/run/hills/hills.sock", show_default=True, metavar="PATH",
              help="The unix socket the CLI reaches the service on.")
@click.option("--admin", "admins", multiple=True, metavar="USER", help="A user who may commit and pin (repeatable).")
@click.option("--climber", "climbers", multiple=True, metavar="USER",
              help="A user who may evaluate, tune and read results (repeatable).")
@click.option("--ray", "ray_address", metavar="ray://HOST:PORT",
              help="The Ray cluster 'hills eval --on ray' uses through the service (its config's ray_address); "
                   "without it, --on is refused there.")
def command(user: str, state_dir: str, socket_path: str, admins: tuple[str, ...], climbers: tuple[str, ...],
            ray_address: str | None) -> int:
    """Make this machine an evaluation service under its own user (as root).

    Creates the service user if missing, its state folder (0700, owned by
    it), the socket's folder, the service's config of admins and climbers,
    the client config naming the socket, and a systemd unit where systemd
    runs; elsewhere prints the command that starts the service. Every input
    is checked before anything is written, and a failed step leaves
    nothing behind. Prints the socket path.
    """
    from ..service import setup as service_setup

    setup = service_setup.ServiceSetup(user=user, state_dir=state_dir, socket=socket_path,
                                       admins=tuple(admins), climbers=tuple(climbers), ray_address=ray_address)
    render(service_setup.set_up(setup))
    return errors.EXIT_OK


def render(result: object) -> None:
    """What was set up on stderr, the socket on stdout."""
    from ..service.setup import SetupResult

    assert isinstance(result, SetupResult)
    setup = result.setup
    say(f"service user  {setup.user}" + ("  (created)" if result.created_user else "  (existing)"))
    say(f"state folder  {setup.state_dir}  (0700, {setup.user}'s)")
    say(f"socket        {setup.socket}")
    say(f"admins        {', '.join(sorted(setup.admins))}")
    say(f"climbers      {', '.join(sorted(setup.climbers))}")
    if setup.ray_address:
        say(f"ray cluster   {setup.ray_address}")
    say(f"config        {result.config}")
    say(f"client config {result.client_config}")
    if result.unit:
        say(f"systemd unit  {result.unit}")
        say(f"hint: start it: {result.start}")
    else:
        say("systemd is not running here; start the service with:")
        say(f"  {result.start}")
    emit(setup.socket)
