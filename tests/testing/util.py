"""The suite's helpers, importable by any test module (`from testing.util
import run_cli`): the hermetic machine, the two ways to run hills (in-process
through the error funnel, or as the real executables from the checkout's
bin/), pinned git identities and dates, and small file helpers. The fixtures
that use them live in tests/conftest.py."""

import contextlib
import io
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from hills.run import sandbox

REPO_ROOT = Path(__file__).resolve().parents[2]
BIN_DIR = REPO_ROOT / "bin"
PINNED_DATE = "2026-01-01T00:00:00Z"
IDENTITY = {
    "GIT_AUTHOR_NAME": "Hills Test",
    "GIT_AUTHOR_EMAIL": "test@hills.invalid",
    "GIT_COMMITTER_NAME": "Hills Test",
    "GIT_COMMITTER_EMAIL": "test@hills.invalid",
    "GIT_AUTHOR_DATE": PINNED_DATE,
    "GIT_COMMITTER_DATE": PINNED_DATE,
}
# Inherited variables that would point git or hills somewhere else.
SCRUBBED = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_CEILING_DIRECTORIES",
            "GIT_CONFIG", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_NAMESPACE",
            "HILLS_UV", "HILLS_PYTHON_BASE", "VIRTUAL_ENV", "XDG_CONFIG_HOME")

# Downloads that outlive a run (the packages uv installs into the nanogpt
# and hillclimb hills, hillclimb's wheel) are kept in the checkout, ignored
# by git, never under the real HOME: HILLS_TEST_CACHE moves them, and a
# UV_CACHE_DIR the suite is started with is uv's cache as it is (a CI
# machine may share one between runs).
TEST_CACHE = Path(os.environ.get("HILLS_TEST_CACHE") or REPO_ROOT / ".test-cache")
UV_CACHE = os.environ.get("UV_CACHE_DIR") or str(TEST_CACHE / "uv")

# `make test` spreads the suite over processes (pytest-xdist, --dist
# loadfile; the scheduler in tests/conftest.py): each test module runs
# whole in one of them, so its module-scoped hills are made once. The
# modules that share something of the whole machine (system users made
# with useradd, which locks /etc/passwd; a Ray head and its workers, which
# the cluster tests find by scanning /proc) run one after another in one
# process. The tests of a module in SPREAD are long and independent: they
# are spread one by one.
MACHINE_WIDE = frozenset({"test_cluster.py", "test_every_surface.py", "test_service.py", "test_service_fair.py",
                          "test_service_setup.py", "test_warm.py", "test_warm_context.py"})
SPREAD = frozenset({"test_hillclimb_catalog.py"})

# Probed without machine state, once, at collection.
BWRAP_USABLE = sandbox.probe(sandbox.bwrap_binary())
needs_bwrap = pytest.mark.skipif(not BWRAP_USABLE,
                                 reason="bubblewrap (bwrap) is missing or cannot create namespaces here "
                                        "(install the Debian package 'bubblewrap')")


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def output(self):
        return self.out + self.err

    @property
    def error_lines(self):
        return [line for line in self.err.splitlines() if line.startswith("error: ")]

    @property
    def report(self) -> dict:
        """The JSON report printed on stdout."""
        return json.loads(self.out)


def write_python_shim(folder, flags=()):
    """Write `folder/python3`, a shell stub that execs this very interpreter.

    Not a symlink: Python finds its venv from the path it was started as,
    so a link to `.venv/bin/python` (let alone its realpath) would start the
    base interpreter, which lacks hills' dependencies."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    shim = folder / "python3"
    command = " ".join(shlex.quote(word) for word in [sys.executable, *flags])
    shim.write_text(f"#!/bin/sh\nexec {command} \"$@\"\n", encoding="utf-8")
    shim.chmod(0o755)
    return folder


class Machine:
    """One simulated machine: HOME, HILLS_HOME, an empty global git config and
    a project folder, all under `root`."""

    def __init__(self, root, python_bin, uv_cache):
        self.root = Path(root)
        self.home = self.root / "home"
        self.hills_home = self.root / "hills-home"
        self.gitconfig = self.root / "gitconfig"
        self.project = self.root / "project"
        self.python_bin = python_bin
        self.uv_cache = uv_cache
        for folder in (self.home, self.project):
            folder.mkdir(parents=True, exist_ok=True)
        self.gitconfig.touch()

    def apply(self, patch):
        for name in SCRUBBED:
            patch.delenv(name, raising=False)
        patch.setenv("HOME", str(self.home))
        patch.setenv("HILLS_HOME", str(self.hills_home))
        patch.setenv("GIT_CONFIG_NOSYSTEM", "1")
        patch.setenv("GIT_CONFIG_GLOBAL", str(self.gitconfig))
        patch.setenv("UV_CACHE_DIR", str(self.uv_cache))
        # Same-user mode, whatever evaluation service this machine runs.
        patch.setenv("HILLS_SERVICE", "off")
        # Every eval cold, unless a test of the warm server says otherwise.
        patch.setenv("HILLS_WARM", "off")
        for name, value in IDENTITY.items():
            patch.setenv(name, value)
        # The hook calls `hills` from PATH: the checkout's bin/ comes first.
        patch.setenv("PATH", os.pathsep.join([str(BIN_DIR), str(self.python_bin), os.environ.get("PATH", "")]))


def run_cli(*args, prog="hills"):
    """Run a command in-process through hills.entry.run (the fast paths,
    the click layer and the error funnel, as the executables run them) and
    return its exit code and output."""
    from hills import entry

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = entry.run(prog, [str(a) for a in args])
    return Result(code, out.getvalue(), err.getvalue())


def run_bin(*argv: object, cwd: str | os.PathLike | None = None, env: dict[str, str] | None = None,
            input: str | None = None, timeout: float = 120) -> Result:
    """Run a real executable (`hills`, `hills-commit`, `git`...) found on the
    PATH of `env` (default: the current, hermetic os.environ)."""
    env = dict(os.environ if env is None else env)
    program = shutil.which(str(argv[0]), path=env.get("PATH", "")) or str(argv[0])
    done = subprocess.run([program, *[str(a) for a in argv[1:]]], cwd=cwd, env=env, input=input,
                          capture_output=True, text=True, timeout=timeout)
    return Result(done.returncode, done.stdout, done.stderr)


def git(hill_dir, *args, **kwargs):
    """A plain git command on a hill, the way a user types it."""
    return run_bin("git", "--git-dir=.vc", "--work-tree=.", *args, cwd=hill_dir, **kwargs)


def new_and_commit(name="circle-packing", template="circle-packing", message="first version"):
    created = run_cli("new", name, "-t", template)
    assert created.code == 0, created.output
    committed = run_cli("commit", name, "-m", message)
    assert committed.code == 0, committed.output
    return Path(created.out.strip())


def write_files(root: str | os.PathLike, files: dict[str, str | bytes]) -> Path:
    """Write {relative path: text or bytes} under `root`, making folders as
    needed; returns `root` as a Path."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    for rel, content in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return root


def lines_of(path: Path) -> list[bytes]:
    """A file's lines, each with its line ending (an attempts log, say)."""
    return path.read_bytes().splitlines(keepends=True)


def write_lines(path: Path, lines: list[bytes]) -> None:
    path.write_bytes(b"".join(lines))


def digest_of(data: bytes) -> str:
    """The content hash hills writes into its lock files."""
    import blake3

    return "blake3:" + blake3.blake3(data).hexdigest()


# The stop signals a test sends. A suite started in the background
# (`nohup make test &`) inherits SIGHUP and SIGINT ignored, and an ignored
# signal stays ignored across exec: a process the test means to stop with
# one would never see it.
STOP_SIGNALS = (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGQUIT)


def default_signals() -> None:
    """A `preexec_fn` for a process a test sends signals to: it starts with
    the default disposition of each stop signal, as from a terminal,
    whatever the suite was started with."""
    for number in STOP_SIGNALS:
        signal.signal(number, signal.SIG_DFL)


def descendants(pid: int) -> list[int]:
    """Every process below `pid`, from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_hard(process: subprocess.Popen) -> str:
    """kill -9 the hills process, then what it left running; its output so far."""
    below = descendants(process.pid)
    process.kill()
    out, err = process.communicate(timeout=30)
    for pid in below:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return out + err
