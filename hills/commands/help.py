"""`hills help`: the manual of a command, or of hills itself."""

import click

from ..cli.options import CONTEXT
from ..cli.output import emit


@click.command("help", context_settings=CONTEXT)
@click.argument("words", metavar="[VERB [SUBCOMMAND] | FORMAT]", nargs=-1)
@click.option("-m", "--man", "force_man", is_flag=True,
              help="Open the man page even when standard output is not a terminal.")
@click.pass_context
def command(ctx: click.Context, words: tuple[str, ...], force_man: bool) -> int:
    """Show the manual of a command, or of hills itself.

    In a terminal, opens the man page (hills-VERB(1), or hills(1) and
    git-hill(1) without a verb) when man finds it; otherwise, or when it
    does not, prints the same text as 'VERB --help' on stdout. FORMAT, a
    file hills reads or writes (hill.yaml, report, json, lock,
    hills-service), shows its page of section 5: through man in a
    terminal, else as man prints it to a pipe.
    """
    from ..cli import manual

    return manual.show(list(words), ctx.find_root(), force_man=force_man, echo=emit)
