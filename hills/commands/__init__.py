"""The commands, one module per verb: each parses its options, calls the
core and returns an exit code; its `render` prints the human output.
`run` is how every one of them is run: through the one error funnel, with
crash logs in the machine state."""

from __future__ import annotations

import os

from ..base import errors

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


def run(call: Callable[[], int], *, hint: Callable[[], str | None] | None = None) -> int:
    """errors.funnel, knowing where hills keeps crash logs and which
    failed writes are the user's to fix."""
    return errors.funnel(call, hint=hint, explainers=(_write_problem, _folder_gone), crash_dir=_crash_dir)


def _write_problem(exc: BaseException) -> errors.HillsError | None:
    # A read-only or full file system, or a file where a folder should
    # be: the user's to fix, named, not a bug.
    if not isinstance(exc, OSError):
        return None
    from ..base import state

    return state.write_problem(exc)


def _folder_gone(exc: BaseException) -> errors.HillsError | None:
    # A command started in a folder removed since: the user's to fix.
    if not isinstance(exc, FileNotFoundError):
        return None
    try:
        os.getcwd()
    except FileNotFoundError:
        return errors.EnvironmentProblem("the current folder no longer exists (it was removed after this shell "
                                         "entered it)", hint="cd to a folder that exists and run the command again")
    return None


def _crash_dir() -> str:
    from ..base import state

    return os.path.join(state.home(), "logs")
