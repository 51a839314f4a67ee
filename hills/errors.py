"""The one exception hierarchy of hills and the exit code each kind maps to."""

import os
import sys

EXIT_OK = 0
EXIT_NO = 1
EXIT_USAGE = 2
EXIT_BUG = 3
EXIT_ENVIRONMENT = 4
EXIT_NOT_SCORED = 5
EXIT_INTERRUPTED = 130


class HillsError(Exception):
    """A problem the user can act on; `hint` says how."""

    exit_code = EXIT_USAGE

    def __init__(self, message, hint=None):
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

    def __init__(self, argv, exit_code, stderr, hint=None):
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
}


def missing_dependency(exc):
    """The EnvironmentProblem for an import of a dependency that failed, or
    None when `exc` is about some other module (then it is a bug)."""
    top = (getattr(exc, "name", None) or "").split(".")[0]
    if top not in DEPENDENCIES:
        return None
    package = DEPENDENCIES[top]
    checkout = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if os.path.isfile(os.path.join(checkout, "pyproject.toml")):
        hint = (f"run 'make quickstart' in '{checkout}' (it installs hills into .venv/ there), "
                f"then put '{os.path.join(checkout, '.venv', 'bin')}' first on PATH")
    else:
        hint = f"reinstall hills with its dependencies: '{sys.executable} -m pip install --force-reinstall hills'"
    return EnvironmentProblem(
        f"hills needs the Python package '{package}', which '{sys.executable}' cannot import", hint=hint)
