"""Hermetic fixtures: every test gets its own machine state, HOME and git
config, pinned git identities and dates (so object ids can be compared), and
two ways to run hills: in-process through the error funnel, or as the real
executables from the checkout's bin/."""

import contextlib
import io
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from hills import sandbox

REPO_ROOT = Path(__file__).resolve().parent.parent
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

# Set before any test module is imported: what runs while tests are being
# collected (skipif conditions, module constants) must not reach the user's
# HOME or machine state either. Each test then gets a machine of its own.
SESSION_ROOT = Path(tempfile.mkdtemp(prefix="hills-tests-"))
for _name, _folder in (("HOME", "home"), ("HILLS_HOME", "hills-home")):
    os.environ[_name] = str(SESSION_ROOT / _folder)
os.environ["HILLS_WARM"] = "off"
(SESSION_ROOT / "home").mkdir()

# Probed without machine state, once, at collection.
BWRAP_USABLE = sandbox.probe(sandbox.bwrap_binary())
needs_bwrap = pytest.mark.skipif(not BWRAP_USABLE,
                                 reason="bubblewrap (bwrap) is missing or cannot create namespaces here "
                                        "(install the Debian package 'bubblewrap')")


def pytest_unconfigure(config):
    shutil.rmtree(SESSION_ROOT, ignore_errors=True)


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


@pytest.fixture(scope="session")
def python_bin(tmp_path_factory):
    """A folder holding only `python3`, this interpreter, so bin/hills (a
    `#!/usr/bin/env python3` script) runs where the dependencies are."""
    return write_python_shim(tmp_path_factory.mktemp("python-bin"))


@pytest.fixture(scope="session")
def uv_cache(tmp_path_factory):
    # uv's package cache holds no git state; sharing it only saves time.
    return tmp_path_factory.mktemp("uv-cache")


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


@pytest.fixture(autouse=True)
def hermetic(request, tmp_path, monkeypatch, python_bin, uv_cache):
    """The machine of this test: its own, unless the test uses a module-scoped
    shared hill, whose machine it then shares. The cwd is the machine's
    project folder, so no test can create a hill inside the checkout."""
    if "module_machine" in request.fixturenames:
        machine = request.getfixturevalue("module_machine")
    else:
        machine = Machine(tmp_path / "machine", python_bin, uv_cache)
    machine.apply(monkeypatch)
    monkeypatch.chdir(machine.project)
    return machine


@pytest.fixture(scope="session", autouse=True)
def buggy_examples_warn():
    """In-process, the gate's rule that a hill's example must not be buggy
    is off unless a test asks for it (`buggy_examples_fail`): the suite's
    hills, module-scoped ones among them, pair many an evaluator with the
    template's example, which it cannot score. The rule's own tests, and
    every `hills` run as a subprocess, hold to it."""
    from hills import corpus

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(corpus, "BUGGY_EXAMPLE_FAILS", False)
        yield


@pytest.fixture
def buggy_examples_fail(monkeypatch):
    """The gate fails a hill whose example is buggy, as outside the suite."""
    from hills import corpus

    monkeypatch.setattr(corpus, "BUGGY_EXAMPLE_FAILS", True)


@pytest.fixture
def project(hermetic):
    """The user's project folder (empty at first); the cwd of the test."""
    return hermetic.project


@pytest.fixture
def committed_hill(project):
    """`hills new circle-packing -t circle-packing`, committed once."""
    return new_and_commit()


@pytest.fixture(scope="module")
def module_machine(tmp_path_factory, python_bin, uv_cache):
    return Machine(tmp_path_factory.mktemp("machine"), python_bin, uv_cache)


@pytest.fixture(scope="module")
def shared_hill(module_machine):
    """A committed circle-packing hill shared by the tests of one module;
    tests using it must leave it as they found it."""
    with pytest.MonkeyPatch.context() as patch:
        module_machine.apply(patch)
        patch.chdir(module_machine.project)
        return new_and_commit()
