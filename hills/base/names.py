"""The rule for a hill's name: safe as a folder, as part of a git ref and
as a key of machine state. A module of its own, so that finding a hill by
name, as every eval does, loads no manifest parser."""

from __future__ import annotations

import re

from .errors import UsageError

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")


def validate_name(name: object) -> str:
    """Refuse names that are not safe as a folder, a git ref part and a state key."""
    if not isinstance(name, str) or not NAME_RE.match(name) or ".." in name or name.endswith((".", ".lock")):
        raise UsageError(
            f"invalid hill name '{name}'",
            hint="use 1-63 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit",
        )
    return name
