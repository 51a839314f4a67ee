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


class Result:
    def __init__(self, name: str, status: str, detail: str) -> None:
        self.name, self.status, self.detail = name, status, detail

    def as_dict(self) -> dict[str, str]:
        return {"check": self.name, "status": self.status, "detail": self.detail}


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
