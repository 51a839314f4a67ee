"""Key tables for the YAML files hills reads: each key declared once with its
check, default and documentation, and the one walk that validates a mapping
against its table with errors naming the file and the key."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NoReturn

from ..base.errors import UsageError


class _Absent:
    """The default of a key that is left out of the result when absent."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()


def null(value: Any) -> bool:
    """A null value reads as an absent key."""
    return value is None


def empty(value: Any) -> bool:
    """Any empty value (null, 0, false, '', [], {}) reads as an absent key:
    for keys whose empty value has always meant "use the default"."""
    return not value


def show(value: Any) -> str:
    """A value as an error message quotes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "nothing"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return repr(value) if isinstance(value, str) else str(value)


@dataclass(frozen=True)
class At:
    """Where a value sits: the file and the key path that every error names,
    and how its errors quote a value."""

    source: str
    key: str = ""
    quote: Callable[[Any], str] = show

    @property
    def name(self) -> str:
        """The last part of the key path: `n` of `params.n`."""
        return self.key.rpartition(".")[2]

    def child(self, name: str) -> At:
        return At(self.source, f"{self.key}.{name}" if self.key else name, self.quote)

    def item(self, index: int) -> At:
        return At(self.source, f"{self.key}[{index}]", self.quote)

    def fail(self, expected: str, got: Any, *, hint: str | None = None) -> NoReturn:
        raise KeyProblem(f"'{self.source}': key '{self.key}': expected {expected}, got {self.quote(got)}",
                         hint=hint, key=self.key)

    def missing(self, expected: str, *, hint: str | None = None) -> NoReturn:
        raise KeyProblem(f"'{self.source}': missing key '{self.key}': expected {expected}", hint=hint,
                         key=self.key.rpartition(".")[0])

    def unknown(self, allowed: Iterable[str]) -> NoReturn:
        import difflib

        names = sorted(allowed)
        close = difflib.get_close_matches(self.name, names, n=1, cutoff=0.6)
        raise KeyProblem(f"'{self.source}': unknown key '{self.key}'",
                         hint=(f"did you mean '{close[0]}'? " if close else "") + "allowed keys: " + ", ".join(names),
                         key=self.key)


class KeyProblem(UsageError):
    """A value refused at a key path (`key`, `a.b[0].c`; the mapping that
    lacks a missing key): the file's reader can add the line it sits on."""

    def __init__(self, message: str, hint: str | None = None, key: str = "") -> None:
        super().__init__(message, hint)
        self.key = key


# A check takes a value and where it sits, and returns the value as stored
# (a shorthand expanded, a size in bytes) or fails naming the key.
Check = Callable[[Any, At], Any]


def scalar(expected: str, accept: Callable[[Any], bool], *, convert: Callable[[Any], Any] | None = None,
           hint: str | None = None) -> Check:
    """A check that refuses what `accept` refuses, saying what was expected;
    `convert` first turns an accepted shorthand into the stored form."""
    def check(value: Any, at: At) -> Any:
        stored = convert(value) if convert is not None else value
        if not accept(stored):
            at.fail(expected, value, hint=hint)
        return stored
    return check


def anything(value: Any, at: At) -> Any:
    """The check of a key whose value only a rule between keys can judge."""
    return value


@dataclass(frozen=True)
class Maybe:
    """`check`, with null allowed (and kept as null)."""

    check: Check

    def __call__(self, value: Any, at: At) -> Any:
        return None if value is None else self.check(value, at)


def is_number(value: Any) -> bool:
    """A finite int or float, booleans excluded."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def is_count(value: Any, least: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def one_of(*choices: str) -> Check:
    """A check for one of a few words, written "a, b or c" in the error."""
    words = ", ".join(choices[:-1]) + " or " + choices[-1]
    return scalar(words, lambda value: isinstance(value, str) and value in choices)


@dataclass(frozen=True)
class Key:
    """One key of a mapping: how its value is checked, the default filled in
    when it is absent (checked like a given value; ABSENT leaves it out), and
    its documentation. `absent` says which given values count as absent
    (see `null` and `empty`). `note` replaces the manual's default text when the
    default alone does not say it."""

    name: str
    check: Check
    doc: str = ""
    kind: str = ""
    default: Any = ABSENT
    required: bool = False
    missing: str | Callable[[dict[str, Any]], str] = ""
    absent: Callable[[Any], bool] | None = None
    note: str = ""

    def label(self) -> str:
        """The manual's parenthesis: the kind, then required or the default."""
        if self.required:
            when = "required"
        elif self.note:
            when = self.note
        elif self.default is ABSENT:
            when = ""
        elif isinstance(self.default, bool):
            when = "default " + ("true" if self.default else "false")
        elif self.default is None:
            when = "default none"
        elif self.default == "":
            when = "default empty"
        else:
            when = f"default {self.default}"
        return ", ".join(part for part in (self.kind, when) if part)

    def table(self) -> Table | None:
        """The table a mapping value is walked with: this key's own, or that
        of each item of a list or of a mapping of names."""
        check = self.check.check if isinstance(self.check, Maybe) else self.check
        if isinstance(check, (ListOf, MapOf)):
            check = check.item
        return check if isinstance(check, Table) else None

    def is_absent(self, mapping: dict[str, Any]) -> bool:
        """Missing, or a value `absent` reads as missing (null, say)."""
        return self.name not in mapping or (self.absent is not None and self.absent(mapping[self.name]))


@dataclass(frozen=True)
class Table:
    """A mapping with these keys: unknown keys are an error (or, with
    `strict=False`, left to the caller); `rule` judges what only several
    keys together can say, after every key is checked, and may fill in
    values; the result lists the keys in the table's order."""

    expected: str
    keys: tuple[Key, ...]
    rule: Callable[[dict[str, Any], At], None] | None = None
    strict: bool = True

    def names(self) -> list[str]:
        return [key.name for key in self.keys]

    def __getitem__(self, name: str) -> Key:
        for key in self.keys:
            if key.name == name:
                return key
        raise KeyError(name)

    def __call__(self, value: Any, at: At) -> dict[str, Any]:
        if not isinstance(value, dict):
            at.fail(self.expected, value)
        names = self.names()
        if self.strict:
            for name in value:
                if name not in names:
                    at.child(name).unknown(names)
        out: dict[str, Any] = {}
        for key in self.keys:
            here = at.child(key.name)
            if not key.is_absent(value):
                out[key.name] = key.check(value[key.name], here)
            elif key.required:
                here.missing(key.missing(out) if callable(key.missing) else key.missing)
            elif key.default is not ABSENT:
                out[key.name] = key.check(copy.deepcopy(key.default), here)
        if self.rule is not None:
            self.rule(out, at)
        return {name: out[name] for name in names if name in out}


@dataclass(frozen=True)
class ListOf:
    """A list whose every item is checked by `item`, named `key[index]`."""

    expected: str
    item: Check

    def __call__(self, value: Any, at: At) -> list[Any]:
        if not isinstance(value, list):
            at.fail(self.expected, value)
        return [self.item(entry, at.item(index)) for index, entry in enumerate(value)]


@dataclass(frozen=True)
class MapOf:
    """A mapping of names the caller chooses, each name checked by `name`
    and each value by `item`, named `key.name`."""

    expected: str
    name: Check
    item: Check

    def __call__(self, value: Any, at: At) -> dict[str, Any]:
        if not isinstance(value, dict):
            at.fail(self.expected, value)
        out = {}
        for name, entry in value.items():
            here = at.child(str(name))
            name = self.name(name, here)
            out[name] = self.item(entry, here)
        return out


def docs(table: Table) -> dict[str, tuple[str, str]]:
    """Each key of `table`, in order: its manual label and its documentation."""
    return {key.name: (key.label(), " ".join(key.doc.split())) for key in table.keys}
