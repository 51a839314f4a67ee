"""`hills home`: where the machine state lives."""

import click

from ..base import errors, state
from ..cli.options import CONTEXT
from ..cli.output import emit


@click.command("home", context_settings=CONTEXT)
def command() -> int:
    """Print the machine state folder (HILLS_HOME, else ~/.autolab/hills)."""
    emit(state.home())
    return errors.EXIT_OK
