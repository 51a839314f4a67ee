"""The one exception hierarchy of hills and the exit code each kind maps to."""

EXIT_OK = 0
EXIT_NO = 1
EXIT_USAGE = 2
EXIT_BUG = 3
EXIT_ENVIRONMENT = 4
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
    """A clear "no": a failed check, a dirty hill, a broken chain."""

    exit_code = EXIT_NO


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
