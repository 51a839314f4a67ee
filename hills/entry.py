"""The console-script entry: picks the command from the name this process
was started as (`hills`, `git-hill`, `hills-eval`...), sends an ordinary
`hills eval`, `hills verify` or `hills commit` down its fast path (no click,
no YAML), and
is the one place the process exits."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

# Verbs declared as plain data (hills.commands.fast), and the standalone
# name of each that has one.
FAST = {"eval": "hills-eval", "verify": None, "commit": "hills-commit"}


def main() -> None:
    program = os.path.basename(sys.argv[0]) if sys.argv else "hills"
    if program.endswith(".py"):  # python -m hills, or a script by path
        program = "hills"
    sys.exit(run(program, sys.argv[1:]))


def run(program: str, args: list[str]) -> int:
    """The exit code of `program` run on `args`."""
    fast = _fast_path(program, args)
    if fast is not None:
        return fast
    from . import commands

    try:
        from . import cli
    except ModuleNotFoundError as exc:  # click, say, is not installed
        return commands.run(_raising(exc))
    return cli.main(program, args)


def _fast_path(program: str, args: list[str]) -> int | None:
    """The exit code of a call its fast path takes, or None for one it
    leaves to click (help, a mistake, another verb)."""
    standalone = {name: verb for verb, name in FAST.items() if name}
    if program in ("hills", "git-hill") and args[:1] and args[0] in FAST:
        verb, prog, rest = args[0], ("git hill" if program == "git-hill" else "hills") + " " + args[0], args[1:]
    elif program in standalone:
        verb, prog, rest = standalone[program], program, args
    else:
        return None
    import importlib

    from . import commands

    module = importlib.import_module(f"{commands.__name__}.{verb}")
    parsed = module.DECLARED.parse(rest)
    if parsed is None:
        return None
    return commands.run(lambda: module.run(**parsed), hint=lambda: f"see '{prog} --help'")


def _raising(exc: BaseException) -> Callable[[], int]:
    """A call that fails as the import did, for the funnel to explain."""
    def call() -> int:
        raise exc

    return call


if __name__ == "__main__":
    main()
