"""A guard over the real HOME: an audit hook (PEP 578) that records every
path under the HOME the suite was started with (and the account's home
from the password database) which this process opens for writing, creates,
renames, removes or changes, and every subprocess it starts whose
environment points a HOME, cache or state folder there. conftest installs
one for the session and fails the test during which anything was recorded.

A subprocess's own writes are not seen (audit hooks are per process): what
is checked for them is where their environment sends them."""

import os
import pwd
import sys
from pathlib import Path

# The events that write a path, and which of their arguments are paths.
WRITING_EVENTS = {
    "os.mkdir": (0,), "os.rename": (0, 1), "os.remove": (0,), "os.rmdir": (0,), "shutil.rmtree": (0,),
    "os.symlink": (1,), "os.link": (1,), "os.truncate": (0,), "os.chmod": (0,), "os.chown": (0,),
    "os.utime": (0,), "shutil.copyfile": (1,), "shutil.move": (1,),
}
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
# Where a child's environment can send its writes.
WRITING_VARIABLES = ("HOME", "HILLS_HOME", "UV_CACHE_DIR", "PIP_CACHE_DIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME",
                     "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR", "TMPDIR", "GIT_CONFIG_GLOBAL",
                     "HILLS_TEST_CACHE")


def real_homes() -> list[str]:
    """The HOME of the environment as it is now (call it before the suite
    replaces it) and the account's home."""
    homes = [os.environ.get("HOME") or "", pwd.getpwuid(os.getuid()).pw_dir]
    spelled = {os.path.abspath(home) for home in homes if home}  # as paths name them, and where they lead
    return sorted(home for home in spelled | {os.path.realpath(home) for home in spelled} if home != "/")


def _inside(path: str, roots: list[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


class HomeGuard:
    """What was written under `homes`, outside the `allowed` folders (the
    checkout, the interpreter, the temporary folder: a checkout may well
    sit under HOME)."""

    def __init__(self, homes: list[str], allowed: list[str]) -> None:
        self.homes = homes
        self.allowed = sorted({os.path.realpath(path) for path in allowed if path})
        self.found: list[str] = []
        self._busy = False

    def install(self) -> None:
        sys.addaudithook(self.hook)

    def take(self) -> list[str]:
        """What was recorded since the last call."""
        found, self.found = self.found, []
        return found

    def offending(self, path: object) -> str | None:
        """`path`, resolved, when it lies under a real HOME and in no allowed folder."""
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, (str, os.PathLike)):
            return None  # a file descriptor
        # Resolved only when it is spelled under a home (a write of many files
        # stays cheap): a link elsewhere that leads into HOME goes unseen.
        full = os.path.abspath(os.fspath(path))
        if not _inside(full, self.homes):
            return None
        full = os.path.realpath(full)
        if _inside(full, self.homes) and not _inside(full, self.allowed):
            return full
        return None

    def hook(self, event: str, args: tuple) -> None:
        if event != "open" and event not in WRITING_EVENTS and event != "subprocess.Popen":
            return
        if self._busy:  # realpath below may raise events of its own
            return
        self._busy = True
        try:
            self._check(event, args)
        finally:
            self._busy = False

    def _check(self, event: str, args: tuple) -> None:
        if event == "open":
            path, mode, flags = args
            writes = any(letter in mode for letter in "wax+") if isinstance(mode, str) else bool(flags & WRITE_FLAGS)
            offending = self.offending(path) if writes else None
            if offending:
                self.found.append(f"opened for writing: {offending}")
        elif event == "subprocess.Popen":
            _executable, argv, _cwd, env = args
            env = os.environ if env is None else env
            for name in WRITING_VARIABLES:
                value = env.get(name) if isinstance(env, (dict, os._Environ)) else None
                offending = self.offending(value) if isinstance(value, (str, bytes)) and value else None
                if offending:
                    self.found.append(f"started {list(argv)[:3]!r} with {name}={offending}")
        else:
            for index in WRITING_EVENTS[event]:
                offending = self.offending(args[index]) if len(args) > index else None
                if offending:
                    self.found.append(f"{event}: {offending}")


# The session's guard, once conftest installed it.
SESSION: HomeGuard | None = None


def install_session_guard(repo_root: Path, allowed: list[str]) -> HomeGuard:
    """Install the guard of this test session; call it before HOME is replaced."""
    import tempfile

    global SESSION
    SESSION = HomeGuard(real_homes(), [str(repo_root), sys.prefix, sys.base_prefix, tempfile.gettempdir(),
                                       *allowed])
    SESSION.install()
    return SESSION
