"""Helpers for the tests of the key tables (hill.yaml, problem.yaml): every
key path of a table, a value of the wrong type for a key, and a document
with one value put at a key path."""

import re
from collections.abc import Iterator
from typing import Any

from hills.disk import schema

# Where the keys of a table inside a list or a mapping of names sit in a test document.
ITEM_PATHS = {"params": "params.n", "metrics": "metrics[0]"}


def key_paths(table: schema.Table, prefix: str = "") -> Iterator[tuple[str, schema.Key]]:
    """(key path, key) for every key of `table` and of the tables inside it."""
    for key in table.keys:
        path = prefix + key.name
        yield path, key
        inner = key.table()
        if inner is not None:
            yield from key_paths(inner, ITEM_PATHS.get(path, path) + ".")


def wrong_type(key: schema.Key) -> Any:
    """A list for a key that holds a mapping, a mapping for any other key."""
    holds_mapping = isinstance(key.default, dict) or (
        key.table() is not None and not isinstance(key.check, schema.ListOf))
    return ["x"] if holds_mapping else {"x": 1}


def put(document: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """`document` with `value` at `path` (`a.b`, `a[0].b`), mappings made on the way."""
    parts = re.findall(r"\[\d+\]|[^.\[\]]+", path)
    target: Any = document
    for part in parts[:-1]:
        target = target[int(part[1:-1])] if part.startswith("[") else target.setdefault(part, {})
    target[parts[-1]] = value
    return document
