"""What the click commands share: their context settings, the `--json` and
hill-name decorators, and the group class of `hills` and `hills chain`."""

from collections.abc import Callable
from typing import Any, TypeVar

import click

from ..base import errors

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
F = TypeVar("F", bound=Callable[..., object])


def json_option(function: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of the human table.")(function)


def hill_argument(function: F) -> F:
    return click.argument("name", metavar="NAME")(function)


class HillsGroup(click.Group):
    """A group that lists its commands in the order they were registered,
    each with its first sentence whole, and answers no command with its
    help (exit 2). Its `summaries` may stand in for the commands' own short
    help (None for a hidden one), so a lazy group lists its verbs without
    importing them."""

    def __init__(self, *args: Any, summaries: dict[str, str | None] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.summaries = summaries or {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # No command: the help, as --help prints it, not an "error: usage:"
        # wrapped around it; still exit 2, as no command was given.
        if not args and self.no_args_is_help and not ctx.resilient_parsing:
            click.echo(ctx.get_help(), color=ctx.color)
            ctx.exit(errors.EXIT_USAGE)
        return super().parse_args(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Each command's first sentence whole, wrapped to the terminal
        rather than cut to fit one line."""
        rows: list[tuple[str, str]] = []
        for name in self.list_commands(ctx):
            if name in self.summaries:
                summary = self.summaries[name]
                if summary is not None:
                    rows.append((name, summary))
                continue
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=1000)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

