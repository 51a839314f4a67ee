"""`hills hook`: the entry point of the hook in each hill's .vc/hooks/."""

import os

import click

from ..base import errors
from ..cli.options import CONTEXT


@click.command("hook", context_settings=CONTEXT, hidden=True)
@click.argument("which", type=click.Choice(["pre-commit"]))
def command(which: str) -> int:
    """Entry point of the hook installed in each hill's .vc/hooks/."""
    from ..freeze import hook

    hook.pre_commit(os.getcwd())
    return errors.EXIT_OK
