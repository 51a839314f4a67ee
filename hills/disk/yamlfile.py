"""Reading the YAML files hills parses (hill.yaml, problem.yaml) within fixed
bounds: the size is checked before parsing, aliases are refused, and nesting
depth and the number of values are capped (docs/decisions.md D-010,
"Bounded YAML", and D-011, "Why these caps")."""

from __future__ import annotations

import os
import stat

from ..base.errors import UsageError

# ruamel.yaml's pure-Python loader takes about 70 us a value and 0.4 us a
# byte of scalar text on a slow machine: these caps keep the worst file under
# a second, and are far above any real manifest (a few kilobytes, a few
# hundred values, five levels).
MAX_BYTES = 256 * 1024
MAX_VALUES = 5000
MAX_DEPTH = 32

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from ruamel.yaml.composer import Composer


class _Refusal(Exception):
    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.message, self.hint = message, hint


def too_large(source: Path | str) -> UsageError:
    return UsageError(f"'{source}': larger than {MAX_BYTES // 1024} KiB ({MAX_BYTES} bytes)",
                      hint="a hill.yaml or problem.yaml is a few kilobytes; keep data in files of its own")


def read_text(path: Path | str) -> str:
    """The UTF-8 text of the file at `path`, refused unread when it is larger
    than MAX_BYTES or not a regular file (a FIFO would block the read).
    FileNotFoundError and other OSErrors are the caller's to word."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with open(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(f"'{path}': not a regular file", hint="replace it with a plain YAML file")
        data = handle.read(MAX_BYTES + 1) if info.st_size <= MAX_BYTES else b""
    if info.st_size > MAX_BYTES or len(data) > MAX_BYTES:
        raise too_large(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"'{path}': expected UTF-8 text")


def load(text: str, source: Path | str, typ: str = "rt") -> Any:
    """Parse YAML `text` (named `source` in errors) with ruamel.yaml's loader
    of type `typ`; every refusal and syntax error is a UsageError."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    if len(text) > MAX_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise too_large(source)
    yaml = YAML(typ=typ, pure=True)
    yaml.Composer = _bounded_composer()
    try:
        return yaml.load(text)
    except _Refusal as exc:
        raise UsageError(f"'{source}': {exc.message}", hint=exc.hint) from None
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UsageError(f"'{source}': not valid YAML{where}: {problem}") from None


_COMPOSER: type[Composer] | None = None


def _bounded_composer() -> type[Composer]:
    """A ruamel Composer that refuses aliases and counts values and depth as
    it builds each node, so a refusal comes before the rest is even read."""
    global _COMPOSER
    if _COMPOSER is not None:
        return _COMPOSER
    from ruamel.yaml.composer import Composer
    from ruamel.yaml.events import AliasEvent

    class BoundedComposer(Composer):
        hills_values = 0
        hills_depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            event = self.parser.peek_event()
            where = f"line {event.start_mark.line + 1}, column {event.start_mark.column + 1}"
            if isinstance(event, AliasEvent):
                # A few bytes of aliases expand to billions of values.
                raise _Refusal(f"alias '*{event.anchor}' at {where}: YAML aliases are not allowed",
                               "write the value out in full where it is used (no '*name' and no '<<' merge keys)")
            self.hills_values += 1
            if self.hills_values > MAX_VALUES:
                raise _Refusal(f"more than {MAX_VALUES} values at {where}",
                               "a hill.yaml or problem.yaml holds a few hundred values; keep data in files of its own")
            self.hills_depth += 1
            if self.hills_depth > MAX_DEPTH:
                raise _Refusal(f"nested deeper than {MAX_DEPTH} levels at {where}",
                               "a hill.yaml or problem.yaml needs a few levels of nesting")
            try:
                return super().compose_node(parent, index)
            finally:
                self.hills_depth -= 1

    _COMPOSER = BoundedComposer
    return _COMPOSER
