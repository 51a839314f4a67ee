"""`hills setup`: one-time installs on a machine. Each thing it sets up is
a subcommand in its own module (`setup_service`, `setup_skill`), added to
the group below."""

from __future__ import annotations

import click

from ..cli.options import CONTEXT, HillsGroup


@click.group("setup", context_settings=CONTEXT, cls=HillsGroup)
def command() -> None:
    """Set up what hills needs once per machine or project.

    'hills setup service' (as root) makes hills an evaluation service under
    its own user; 'hills setup skill' installs the agent skill shipped with
    this hills.
    """


from .setup_skill import command as skill_command  # noqa: E402  (after the group it joins)
command.add_command(skill_command)
from .setup_service import command as service_command  # noqa: E402
command.add_command(service_command)
from .setup_mcp import command as mcp_command  # noqa: E402
command.add_command(mcp_command)
from .setup_loop import command as loop_command  # noqa: E402
command.add_command(loop_command)
