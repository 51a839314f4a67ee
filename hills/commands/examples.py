"""`hills examples`: the templates `hills new -t` accepts."""

import click

from ..base import errors
from ..cli.options import CONTEXT, json_option
from ..cli.output import emit, emit_json


@click.command("examples", context_settings=CONTEXT)
@json_option
def command(as_json: bool) -> int:
    """List the templates that 'hills new -t' accepts."""
    from ..disk import hill

    found = hill.templates()
    if as_json:
        emit_json(found)
    else:
        render(found)
    return errors.EXIT_OK


def render(found: dict[str, str]) -> None:
    """One line per template: its name and what it is."""
    width = max(len(name) for name in found)
    for name, description in found.items():
        emit(f"{name:<{width}}  {description}")
