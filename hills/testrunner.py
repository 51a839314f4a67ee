"""Run a hill's own checks (tests/test_*.py) with nothing but the standard library.

`hills check` runs this file with the hill environment's interpreter, where
neither hills nor pytest is installed, so it must stay self-contained and
Python 3.9 compatible:

    python testrunner.py [--list] HILL_DIR

Tests are plain `test_*` functions using bare `assert`; the only fixture is
`tmp_path`, a fresh temporary folder (a pathlib.Path) removed afterwards.
The last line of output is always `N passed, M failed in S.SSs`, with
`, K errors` added when a module fails to import or a test asks for a
fixture that does not exist. Exit status: 0 all passed (at least one ran),
1 something failed or errored, 5 nothing was collected, 2 bad usage.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import inspect
import io
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from types import TracebackType

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_NO_TESTS = 5
FIXTURES = ("tmp_path",)
TRACEBACK_FRAMES = 3
CAPTURE_LIMIT = 4000
RUNNER_FILE = os.path.abspath(__file__)


class Outcome:
    def __init__(self) -> None:
        self.passed = 0
        self.failed = 0
        self.errors = 0


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in text.rstrip("\n").splitlines())


def _describe(exc: BaseException, tb: TracebackType | None) -> str:
    """`Type: message`; a bare `assert` has no message, so show its source line."""
    message = str(exc)
    if not message and isinstance(exc, AssertionError):
        frames = traceback.extract_tb(tb)
        if frames and frames[-1].line:
            message = frames[-1].line.strip()
    name = type(exc).__name__
    return f"{name}: {message}" if message else name


def _frames(tb: TracebackType | None, limit: int | None) -> str:
    """The last `limit` frames, never the runner's own or importlib's."""
    kept = [frame for frame in traceback.extract_tb(tb)
            if os.path.abspath(frame.filename) != RUNNER_FILE and not frame.filename.startswith("<frozen ")]
    if limit is not None:
        kept = kept[-limit:]
    return "".join(traceback.format_list(kept))


def _report(kind: str, test_id: str, exc: BaseException, tb: TracebackType | None, limit: int | None,
            captured: str = "") -> None:
    lines = _describe(exc, tb).splitlines() or [type(exc).__name__]
    print(f"{kind} {test_id} - {lines[0]}")
    if lines[1:]:
        print(_indent("\n".join(lines[1:])))
    frames = _frames(tb, limit)
    if frames:
        print(_indent(frames, "  "))
    if captured:
        if len(captured) > CAPTURE_LIMIT:
            captured = "..." + captured[-CAPTURE_LIMIT:]
        print("    captured output:")
        print(_indent(captured, "      "))


def collect(hill_dir: Path, outcome: Outcome) -> list[tuple[str, Callable[..., object]]]:
    """Import tests/test_*.py in sorted order; return [(test_id, function)]."""
    tests_dir = hill_dir / "tests"
    collected: list[tuple[str, Callable[..., object]]] = []
    if not tests_dir.is_dir():
        return collected
    for path in sorted(tests_dir.glob("test_*.py")):
        rel = path.relative_to(hill_dir).as_posix()
        name = path.stem
        try:
            spec = importlib.util.spec_from_file_location(name, str(path))
            if spec is None or spec.loader is None:
                raise ImportError(f"{rel} cannot be loaded as a Python module")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        except BaseException as exc:  # noqa: BLE001 - a broken test module is reported, not fatal
            if isinstance(exc, KeyboardInterrupt):
                raise
            sys.modules.pop(name, None)
            outcome.errors += 1
            _report("ERROR", rel, exc, exc.__traceback__, None)
            continue
        for attr, value in list(vars(module).items()):
            if attr.startswith("test_") and inspect.isfunction(value):
                collected.append((f"{rel}::{attr}", value))
    return collected


def _arguments(function: Callable[..., object]) -> tuple[set[str], str | None]:
    """The fixtures a test asks for, or the name of a parameter nobody provides."""
    wanted = set()
    for param in inspect.signature(function).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or param.default is not param.empty:
            continue
        if param.name not in FIXTURES:
            return set(), param.name
        wanted.add(param.name)
    return wanted, None


def run_one(test_id: str, function: Callable[..., object], hill_dir: Path, outcome: Outcome) -> None:
    try:
        wanted, unknown = _arguments(function)
    except (TypeError, ValueError) as exc:
        wanted, unknown = set(), f"<unreadable signature: {exc}>"
    if unknown is not None:
        outcome.errors += 1
        print(f"ERROR {test_id} - fixture '{unknown}' not found (available: {', '.join(FIXTURES)})")
        return
    tmp_dir = None
    kwargs: dict[str, Path] = {}
    if "tmp_path" in wanted:
        tmp_dir = tempfile.mkdtemp(prefix="hills-test-")
        kwargs["tmp_path"] = Path(tmp_dir)
    captured = io.StringIO()
    try:
        with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
            function(**kwargs)
    except BaseException as exc:  # noqa: BLE001 - any exception, SystemExit included, fails the test
        if isinstance(exc, KeyboardInterrupt):
            raise
        outcome.failed += 1
        _report("FAILED", test_id, exc, exc.__traceback__, TRACEBACK_FRAMES, captured.getvalue())
    else:
        outcome.passed += 1
    finally:
        os.chdir(hill_dir)
        if tmp_dir is not None:
            shutil.rmtree(tmp_dir, ignore_errors=True)


def summary(outcome: Outcome, seconds: float) -> str:
    line = f"{outcome.passed} passed, {outcome.failed} failed"
    if outcome.errors:
        line += f", {outcome.errors} errors"
    return f"{line} in {seconds:.2f}s"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="testrunner.py", description="Run a hill's tests/test_*.py without pytest.")
    parser.add_argument("hill_dir", metavar="HILL_DIR", help="the hill's folder")
    parser.add_argument("--list", action="store_true", help="only print the collected test ids")
    args = parser.parse_args(argv)

    hill_dir = Path(args.hill_dir).resolve()
    if not hill_dir.is_dir():
        print(f"error: hill folder '{args.hill_dir}' does not exist", file=sys.stderr)
        return EXIT_USAGE
    # Checking a hill must not leave __pycache__ in it: that would make the hill dirty.
    sys.dont_write_bytecode = True
    # The runner's own folder (the hills package) must not shadow the hill's modules.
    runner_dirs = {os.path.dirname(RUNNER_FILE), os.path.dirname(os.path.realpath(RUNNER_FILE))}
    sys.path[:] = [entry for entry in sys.path if os.path.realpath(entry or os.curdir) not in runner_dirs
                   and os.path.abspath(entry or os.curdir) not in runner_dirs]
    # As under pytest, tests/ is importable too, so helper modules beside the tests work.
    sys.path[:0] = [str(hill_dir), str(hill_dir / "tests")]
    os.chdir(hill_dir)

    started = time.perf_counter()
    outcome = Outcome()
    tests = collect(hill_dir, outcome)
    if args.list:
        for test_id, _ in tests:
            print(test_id)
        if outcome.errors:
            return EXIT_FAILED
        return EXIT_OK if tests else EXIT_NO_TESTS
    for test_id, function in tests:
        run_one(test_id, function, hill_dir, outcome)
    if not tests and not outcome.errors:
        print("no tests collected: expected test_* functions in tests/test_*.py")
    print(summary(outcome, time.perf_counter() - started))
    sys.stdout.flush()
    if outcome.failed or outcome.errors:
        return EXIT_FAILED
    return EXIT_OK if outcome.passed else EXIT_NO_TESTS


if __name__ == "__main__":
    sys.exit(main())
