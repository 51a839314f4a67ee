"""Commands declared as plain data, for the fast paths (`hills eval`,
`hills verify`, `hills commit`): one declaration builds the click command when click is
needed (help, a mistake, completion) and parses an ordinary argv without
importing click. The parse accepts only what it can decide exactly as click
would; for anything else it answers None, and click parses and explains."""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    import click

_UNDECIDED = object()


class PathKind:
    """What click.Path(file_okay, dir_okay) accepts; readable, not resolved."""

    def __init__(self, *, file_okay: bool = True, dir_okay: bool = True) -> None:
        self.file_okay = file_okay
        self.dir_okay = dir_okay

    def convert(self, value: str) -> object:
        """`value` as click.Path returns it, or _UNDECIDED where click would
        refuse it (and so should say why)."""
        try:
            st = os.stat(value)
        except (OSError, ValueError):
            return value
        if (not self.file_okay and stat.S_ISREG(st.st_mode)) or (not self.dir_okay and stat.S_ISDIR(st.st_mode)) \
                or not os.access(value, os.R_OK):
            return _UNDECIDED
        return value

    def click_type(self) -> click.ParamType:
        import click

        return click.Path(file_okay=self.file_okay, dir_okay=self.dir_okay, path_type=str)


class AtLeast:
    """What click.IntRange(min=minimum) accepts, written in plain digits."""

    def __init__(self, minimum: int) -> None:
        self.minimum = minimum

    def convert(self, value: str) -> object:
        if not (value.isascii() and value.isdigit()) or int(value) < self.minimum:
            return _UNDECIDED
        return int(value)

    def click_type(self) -> click.ParamType:
        import click

        return click.IntRange(min=self.minimum)


class Argument:
    """A positional argument: one value, or with `many` all that remain."""

    def __init__(self, dest: str, *, metavar: str, many: bool = False, required: bool = True,
                 kind: PathKind | None = None) -> None:
        self.dest, self.metavar, self.many, self.required, self.kind = dest, metavar, many, required, kind

    def default(self) -> object:
        return () if self.many else None

    def click_param(self) -> click.Parameter:
        import click

        return click.Argument([self.dest], metavar=self.metavar, nargs=-1 if self.many else 1,
                              required=self.required, type=self.kind.click_type() if self.kind else None)


class Option:
    """An option: a flag, or one value (with `multiple`, repeatable, and
    then a tuple)."""

    def __init__(self, dest: str, *names: str, help: str, metavar: str | None = None, flag: bool = False,
                 multiple: bool = False, required: bool = False, kind: PathKind | AtLeast | None = None) -> None:
        self.dest, self.names, self.help, self.metavar = dest, names, help, metavar
        self.flag, self.multiple, self.required, self.kind = flag, multiple, required, kind

    def default(self) -> object:
        return False if self.flag else (() if self.multiple else None)

    def click_param(self) -> click.Parameter:
        import click

        if self.flag:
            return click.Option([*self.names, self.dest], is_flag=True, help=self.help)
        return click.Option([*self.names, self.dest], metavar=self.metavar, multiple=self.multiple,
                            required=self.required, help=self.help,
                            type=self.kind.click_type() if self.kind else None)


class Declared:
    """A command's name, help and parameters, in the order --help lists them."""

    def __init__(self, name: str, help: str, params: Sequence[Argument | Option]) -> None:
        self.name, self.help, self.params = name, help, list(params)
        self.options = {name: param for param in self.params if isinstance(param, Option) for name in param.names}
        self._command: click.Command | None = None

    def click_command(self, callback: Callable[..., int]) -> click.Command:
        """The click command, built once."""
        if self._command is None:
            import click

            from .options import CONTEXT

            self._command = click.Command(self.name, callback=callback, help=self.help, context_settings=CONTEXT,
                                          params=[param.click_param() for param in self.params])
        return self._command

    def parse(self, args: Sequence[str]) -> dict[str, object] | None:
        """The keyword arguments click would call the command with, or None
        for an argv this parse leaves to click: help, `--`, a cluster of
        short flags, an unknown or incomplete option, a value click would
        refuse, a missing or extra argument."""
        values = {param.dest: param.default() for param in self.params}
        repeated: dict[str, list[object]] = {}
        given, positional = set(), []
        index = 0
        while index < len(args):
            token = args[index]
            index += 1
            if not token.startswith("-") or token == "-":
                positional.append(token)
                continue
            option, value = self._match(token)
            if option is None or (option.flag and value is not None):
                return None
            given.add(option.dest)
            if option.flag:
                values[option.dest] = True
                continue
            if value is None:
                if index == len(args) or args[index].startswith("-"):
                    return None
                value = args[index]
                index += 1
            converted = option.kind.convert(value) if option.kind else value
            if converted is _UNDECIDED:
                return None
            if option.multiple:
                repeated.setdefault(option.dest, []).append(converted)
            else:
                values[option.dest] = converted
        values.update((dest, tuple(items)) for dest, items in repeated.items())
        if any(isinstance(param, Option) and param.required and param.dest not in given for param in self.params):
            return None
        return values if self._place(positional, values) else None

    def _match(self, token: str) -> tuple[Option | None, str | None]:
        """The option `token` names and the value attached to it (`--name=V`,
        `-nV`), or (None, None)."""
        if token in self.options:
            return self.options[token], None
        if token.startswith("--"):
            name, equals, value = token.partition("=")
            option = self.options.get(name) if equals else None
            return (option, value) if option is not None else (None, None)
        option = self.options.get(token[:2])
        if option is None or option.flag:
            return None, None
        return option, token[2:]

    def _place(self, positional: list[str], values: dict[str, object]) -> bool:
        """Give the positional values to the arguments, in order; False when
        one is missing or one is left over."""
        remaining = list(positional)
        for param in self.params:
            if not isinstance(param, Argument):
                continue
            taken = remaining if param.many else remaining[:1]
            remaining = [] if param.many else remaining[1:]
            if param.required and not taken:
                return False
            if param.kind is not None and any(param.kind.convert(value) is _UNDECIDED for value in taken):
                return False
            if param.many:
                values[param.dest] = tuple(taken)
            elif taken:
                values[param.dest] = taken[0]
        return not remaining
