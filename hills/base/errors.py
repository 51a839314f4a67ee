"""The one exception hierarchy of hills, the exit code each kind maps to,
and the one funnel that turns what a command raised into its exit code."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import NoReturn

    Explainer = Callable[[BaseException], "HillsError | None"]

EXIT_OK = 0
EXIT_NO = 1
EXIT_USAGE = 2
EXIT_BUG = 3
EXIT_ENVIRONMENT = 4
EXIT_NOT_SCORED = 5
EXIT_INTERRUPTED = 130
# From the mildest to the worst: what a command that ran many things (several
# submissions, say) exits with is the worst of their codes.
SEVERITY = (EXIT_OK, EXIT_NO, EXIT_NOT_SCORED, EXIT_USAGE, EXIT_ENVIRONMENT, EXIT_BUG, EXIT_INTERRUPTED)


def worst(codes: Iterable[int]) -> int:
    """The worst of exit codes, by SEVERITY (an unknown code ranks as a bug)."""
    rank = {code: index for index, code in enumerate(SEVERITY)}
    return max(codes, key=lambda code: rank.get(code, rank[EXIT_BUG]), default=EXIT_OK)


class HillsError(Exception):
    """A problem the user can act on; `hint` says how. Raise a kind below:
    the base names no kind, so it exits as a bug would (3), never as a
    usage error a caller might retry with other arguments."""

    exit_code = EXIT_BUG

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class UsageError(HillsError):
    """Bad input: a name, a flag value, a file the user pointed at."""

    exit_code = EXIT_USAGE


class Refused(HillsError):
    """A clear "no": a failed check, a refused submission, a broken chain."""

    exit_code = EXIT_NO


class NotScored(Refused):
    """An eval refused before scoring for a reason on the hill's side (no
    commit, uncommitted changes, lock drift, a spent holdout budget, a broken
    attempts log): no submission would get a verdict until it is dealt with,
    so a loop stops rather than count a failed candidate."""

    exit_code = EXIT_NOT_SCORED


class EnvironmentProblem(HillsError):
    """Something outside hills is missing or broken: git, uv, a busy device."""

    exit_code = EXIT_ENVIRONMENT


class CommandFailed(EnvironmentProblem):
    """A subprocess failed; the message carries its argv, exit code and stderr."""

    def __init__(self, argv: Iterable[object], exit_code: int, stderr: str, hint: str | None = None) -> None:
        shown = " ".join(str(a) for a in argv)
        text = stderr.strip()
        message = f"command failed with exit code {exit_code}: {shown}"
        if text:
            message += "\n" + text
        super().__init__(message, hint)
        self.argv = list(argv)
        self.returncode = exit_code
        self.stderr = stderr


# Import name -> the distribution that provides it: the runtime dependencies
# of pyproject.toml (a guard test keeps the two in step).
DEPENDENCIES = {
    "click": "click",
    "ruamel": "ruamel.yaml",
    "blake3": "blake3",
    "tomli_w": "tomli-w",
    "uv": "uv",
    "cryptography": "cryptography",
}


def leave_now(code: int) -> NoReturn:
    """The end of a process no command returns from: a connection the
    service forked, a child that works half of the cheat corpus
    (hills.base.halves) or does an eval's housekeeping after it exits
    (the parent's stack, its `finally` blocks and exit handlers must not
    run twice), or a cluster worker whose Ray is gone. It leaves at once.
    (hills/entry.py's `main` is the other way out.)"""
    os._exit(code)


def missing_dependency(exc: BaseException) -> EnvironmentProblem | None:
    """The EnvironmentProblem for an import of a dependency that failed, or
    None when `exc` is about some other module (then it is a bug)."""
    if not isinstance(exc, ModuleNotFoundError):
        return None
    top = (exc.name or "").split(".")[0]
    if top not in DEPENDENCIES:
        return None
    return _missing(DEPENDENCIES[top])


def first_missing_dependency() -> EnvironmentProblem | None:
    """The EnvironmentProblem for the first dependency this interpreter
    cannot find, without importing any: a fast path that would meet one
    only midway asks up front, as the click path does by importing click."""
    import importlib.util

    for module, package in DEPENDENCIES.items():
        try:
            found = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            found = None
        if found is None:
            return _missing(package)
    return None


def _missing(package: str) -> EnvironmentProblem:
    checkout = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if os.path.isfile(os.path.join(checkout, "pyproject.toml")):
        hint = (f"run 'make quickstart' in '{checkout}' (it installs hills into .venv/ there), "
                f"then put '{os.path.join(checkout, '.venv', 'bin')}' first on PATH")
    else:
        hint = f"reinstall hills with its dependencies: '{sys.executable} -m pip install --force-reinstall hills'"
    return EnvironmentProblem(
        f"hills needs the Python package '{package}', which '{sys.executable}' cannot import", hint=hint)


# ---------------------------------------------------------------- the funnel

def funnel(call: Callable[[], int], *, hint: Callable[[], str | None] | None = None,
           explainers: Iterable[Explainer] = (), crash_dir: Callable[[], str] | None = None) -> int:
    """Run `call` and return its exit code, deciding in this one place
    between the three outcomes of a command that did not finish: an
    expected error (a HillsError: its message and hint on stderr, its exit
    code), an interrupt (130) and a bug (the traceback to a crash log in
    `crash_dir()`, one line to the user, 3). `hint()` stands in for the hint
    of an error that brings none; each explainer may name an unexpected exception as
    the user's problem (a full disk, say) instead of a bug, as
    `missing_dependency` always does for a dependency that is not there."""
    try:
        return call()
    except HillsError as exc:
        return _tell(exc, hint)
    except KeyboardInterrupt:
        _write("error: interrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`hills log | head`): nothing left to say,
        # and nothing more to write, at exit either (its flush would fail
        # again, loudly).
        _quiet_stdout()
        return EXIT_OK
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (EXIT_OK if exc.code is None else EXIT_NO)
    except Exception as exc:  # the one place a bug becomes a one-line message
        for explain in (missing_dependency, *explainers):
            problem = explain(exc)
            if problem is not None:
                return _tell(problem, hint)
        return _bug(exc, crash_dir)


def _quiet_stdout() -> None:
    # Only a pipe or a socket whose reader left: a caller's own stream (a
    # file, a test's capture) is never replaced.
    import stat

    try:
        fd = sys.stdout.fileno()
        if not (stat.S_ISFIFO(os.fstat(fd).st_mode) or stat.S_ISSOCK(os.fstat(fd).st_mode)):
            return
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)
    except (AttributeError, OSError, ValueError):  # no stdout, or one without a descriptor
        pass


def _tell(exc: HillsError, hint: Callable[[], str | None] | None) -> int:
    shown = exc.hint
    if not shown and hint is not None:
        try:
            shown = hint()
        except Exception:  # a hint must never turn an answer into a crash
            shown = None
    _write(f"error: {exc.message}\n" + (f"hint: {shown}\n" if shown else ""))
    return exc.exit_code


def _bug(exc: BaseException, crash_dir: Callable[[], str] | None) -> int:
    path = _crash_log(exc, crash_dir)
    detail = str(exc).encode("utf-8", "backslashreplace").decode("utf-8")
    _write(f"error: internal error in hills: {type(exc).__name__}: {detail}\n"
           + (f"hint: the traceback is saved in {path}; please report it\n" if path else ""))
    return EXIT_BUG


def _crash_log(exc: BaseException, crash_dir: Callable[[], str] | None) -> str | None:
    """Write the traceback of a bug where it can be reported from; the
    path, or None when there is nowhere to write it."""
    if crash_dir is None:
        return None
    import time
    import traceback

    from .. import __version__

    try:
        folder = crash_dir()
        path = os.path.join(folder, f"crash-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.log")
        os.makedirs(folder, exist_ok=True)
        with open(path, "w", encoding="utf-8", errors="backslashreplace") as handle:
            handle.write(f"hills {__version__}\nargv: {sys.argv!r}\n\n")
            handle.write("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
        return path
    except Exception:  # the crash log must never be a second crash
        return None


def _write(text: str) -> None:
    # Looked up per call: a caller may have redirected the streams. What
    # the command printed comes first, as it happened.
    for stream, data in ((sys.stdout, None), (sys.stderr, text)):
        if stream is None:
            continue
        try:
            if data:
                stream.write(data)
            stream.flush()
        except (OSError, ValueError):
            pass
