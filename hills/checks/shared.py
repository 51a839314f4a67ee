"""What the checks of `hills check` share: the result each gives, and the
hill's own interpreter (built from its working files) with the environment a
check runs it in, `hills.sdk` and `hills.spaces` importable as in an eval."""

from __future__ import annotations

import os

from ..disk import uvenv
from ..run.env import sdk_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


class Result:
    """One check's outcome; `tried`, where the check tries several things
    (the cheat corpus), names them, for `hills check -v` and `--json`."""

    def __init__(self, name: str, status: str, detail: str, tried: list[str] | None = None) -> None:
        self.name, self.status, self.detail = name, status, detail
        self.tried = tried

    def as_dict(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"check": self.name, "status": self.status, "detail": self.detail}
        if self.tried is not None:
            shown["tried"] = list(self.tried)
        return shown


def hill_python(hill_name: str, hill_dir: str, say: Callable[[str], object] | None = None) -> str:
    """The interpreter of the environment built from the hill's working files."""
    return uvenv.ensure(hill_name, "work-" + uvenv.env_digest(hill_dir), hill_dir, say=say)


def check_env() -> dict[str, str]:
    """The environment of checks run in a hill's interpreter: `hills.sdk`
    and `hills.spaces` importable as in an eval, and no bytecode written
    into the environment (it would break its seal)."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env["PYTHONPATH"] = sdk_path() + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env
