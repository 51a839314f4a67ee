"""`hills home`: where the machine state lives."""

import click

from .. import errors, state
from .options import CONTEXT
from .output import emit


@click.command("home", context_settings=CONTEXT)
def command() -> int:
    """Print the machine state folder (HILLS_HOME, else ~/.autolab/hills)."""
    emit(state.home())
    return errors.EXIT_OK
