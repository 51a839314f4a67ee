"""The suite runs hills the way a new user's machine would: every Python it
hands to bin/, the hook or a subprocess is the test run's own interpreter
(never the base one behind the venv), it never touches the real HOME or
HILLS_HOME, and hills run without its dependencies says which one is
missing."""

import os
import pwd
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from testing import home_guard
from testing.eval_fixtures import SCORE_EVAL, gate_skipped, make_hill
from testing.util import BIN_DIR, REPO_ROOT, run_bin, run_cli, write_python_shim
from hills.base import errors


def _prefix_of(python, env=None):
    done = subprocess.run([python, "-c", "import sys; print(sys.prefix)"], capture_output=True, text=True,
                          env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_python3_on_the_test_path_is_the_test_interpreter():
    found = shutil.which("python3", path=os.environ["PATH"])
    assert found, "no python3 on the tests' PATH"
    assert _prefix_of(found) == sys.prefix


def test_bin_hills_starts_the_python3_on_path():
    # bin/hills finds its interpreter through env: the same lookup as above.
    assert (BIN_DIR / "hills").read_text(encoding="utf-8").startswith("#!/usr/bin/env python3\n")
    done = subprocess.run(["/usr/bin/env", "python3", "-c", "import sys; print(sys.prefix)"],
                          capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == sys.prefix, done.stderr


def test_the_real_executables_have_the_dependencies():
    listed = run_bin("hills", "list")
    assert listed.code == 0, listed.output


def test_the_hook_falls_back_to_the_test_interpreter(project):
    created = run_cli("new", "hooked")
    assert created.code == 0, created.output
    hook = (Path(created.out.strip()) / ".vc" / "hooks" / "pre-commit").read_text(encoding="utf-8")
    fallback = hook.split("if [ -x '", 1)[1].split("'", 1)[0]
    assert _prefix_of(fallback) == sys.prefix


def test_no_test_resolves_the_interpreter_out_of_the_venv():
    # realpath(sys.executable) is the base interpreter, which lacks hills'
    # dependencies: the bug that hid behind packages installed system-wide.
    offenders = [path.name for path in (REPO_ROOT / "tests").rglob("*.py")
                 if "realpath(sys.executable)" in path.read_text(encoding="utf-8")
                 and path.name != "test_hermetic.py"]
    assert not offenders


# ---------------------------------------------------------------- HOME

@pytest.mark.slow
def test_the_suite_never_touches_the_real_home(tmp_path):
    """Collect the whole suite and run a few tests that evaluate, commit and
    probe bubblewrap, in a child pytest whose HOME is an empty folder and
    HILLS_HOME unset: the folder must stay empty."""
    home = tmp_path / "home"
    home.mkdir()
    env = {key: value for key, value in os.environ.items() if key not in ("HILLS_HOME", "HOME")}
    env["HOME"] = str(home)
    chosen = ["tests/test_eval.py::test_passing_eval_prints_a_signed_report_logs_it_and_notes_it",
              "tests/test_commit.py::test_commit_prints_tree_hash_and_commit"]
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           f"--basetemp={tmp_path / 'basetemp'}", *chosen],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"^2 passed", done.stdout, re.MULTILINE), done.stdout[-2000:]
    collected = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only",
                                f"--basetemp={tmp_path / 'basetemp2'}"],
                               cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert collected.returncode == 0, collected.stdout[-3000:] + collected.stderr[-3000:]
    assert sorted(os.listdir(home)) == []


def test_the_home_guard_records_writes_and_children_sent_under_the_real_home(tmp_path, monkeypatch):
    """The session's audit hook, pointed at a stand-in for the real HOME:
    a file opened for writing, a folder made, a rename and a child whose
    uv cache is there are recorded (and would fail the test); a read, and a
    write in an allowed folder inside it, are not."""
    guard = home_guard.SESSION
    assert guard is not None and guard.hook  # conftest installed it
    home = tmp_path / "real-home"
    (home / "allowed").mkdir(parents=True)
    (home / "kept.txt").write_text("kept\n")
    assert guard.take() == []  # nothing so far wrote under the real HOME
    monkeypatch.setattr(guard, "homes", [str(home.resolve())])
    monkeypatch.setattr(guard, "allowed", [str((home / "allowed").resolve())])
    assert (home / "kept.txt").read_text() == "kept\n"
    (home / "allowed" / "cache.bin").write_bytes(b"ok")
    assert guard.take() == []
    (home / "written.txt").write_text("x")
    os.mkdir(home / "made")
    os.rename(home / "written.txt", home / "moved.txt")
    subprocess.run(["true"], env={"PATH": os.environ["PATH"], "UV_CACHE_DIR": str(home / ".cache" / "uv")},
                   check=True)
    found = guard.take()
    monkeypatch.undo()
    assert found == [f"opened for writing: {home.resolve() / 'written.txt'}",
                     f"os.mkdir: {home.resolve() / 'made'}",
                     f"os.rename: {home.resolve() / 'written.txt'}",
                     f"os.rename: {home.resolve() / 'moved.txt'}",
                     f"started ['true'] with UV_CACHE_DIR={home.resolve() / '.cache' / 'uv'}"]


def test_the_session_guard_watches_the_home_the_suite_was_started_with():
    guard = home_guard.SESSION
    assert guard is not None
    assert os.path.realpath(pwd.getpwuid(os.getuid()).pw_dir) in guard.homes
    assert str(REPO_ROOT) in guard.allowed or any(str(REPO_ROOT).startswith(root + "/") for root in guard.allowed)
    assert os.environ["HOME"] not in guard.homes  # this test's HOME is its own


# ---------------------------------------------------------------- the gate of the suite's hills

FAILING_TEST = "def test_the_hill_is_broken():\n    assert False, 'broken on purpose'\n"


def test_hills_made_for_tests_skip_the_gate_in_this_process_only(project):
    """make_hill commits without the gate's checks; that is a stub of
    hills.freeze.gate.run in this process (gate_skipped), which neither the real
    executable nor an in-process commit outside the block sees."""
    hill_dir = make_hill("gateless", SCORE_EVAL)
    (hill_dir / "tests" / "test_eval.py").write_text(FAILING_TEST)
    with gate_skipped():
        real_commit = run_bin("hills", "commit", "gateless", "-m", "broken")
    assert real_commit.code == 1, real_commit.output
    assert "hill 'gateless' failed check" in real_commit.err and "nothing was committed" in real_commit.err
    in_process = run_cli("commit", "gateless", "-m", "broken")
    assert in_process.code == 1 and "hill 'gateless' failed check" in in_process.err, in_process.output
    with gate_skipped():
        skipped = run_cli("commit", "gateless", "-m", "broken")
    assert skipped.code == 0, skipped.output


def test_make_hill_with_the_gate_runs_its_checks(project):
    with pytest.raises(AssertionError, match="failed check"):
        make_hill("gated", SCORE_EVAL, gate=True, extra="params: [not, a, mapping]\n")
    assert make_hill("gated-ok", SCORE_EVAL, gate=True).is_dir()


# ---------------------------------------------------------------- missing dependencies

def test_dependency_table_matches_pyproject():
    declared = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    names = {entry.split(">")[0].split("=")[0].split("<")[0].strip().lower() for entry in declared}
    assert names == set(errors.DEPENDENCIES.values())


@pytest.fixture
def bare_python(tmp_path):
    """A `python3` that starts this interpreter without site-packages: hills'
    own sources are importable (bin/hills puts the checkout on sys.path),
    its dependencies are not."""
    return write_python_shim(tmp_path / "bare-python", flags=["-S"])


@pytest.mark.parametrize("argv", [["hills", "list"], ["hills-eval", "sub", "-H", "x"], ["hills", "verify", "--help"],
                                  ["git-hill", "status", "x"]])
def test_bin_without_dependencies_exits_4_naming_the_package(bare_python, argv):
    env = dict(os.environ, PATH=os.pathsep.join([str(BIN_DIR), str(bare_python), "/usr/bin", "/bin"]))
    done = run_bin(*argv, env=env)
    assert done.code == 4, done.output
    assert done.error_lines == [f"error: hills needs the Python package 'click', which '{sys.executable}' "
                                f"cannot import"], done.output
    assert "Traceback" not in done.err
    assert f"hint: run 'make quickstart' in '{REPO_ROOT}'" in done.err
    assert str(REPO_ROOT / ".venv" / "bin") in done.err


@pytest.mark.parametrize("module, package", [("ruamel.yaml", "ruamel.yaml"), ("blake3", "blake3")])
def test_a_dependency_missing_inside_a_command_exits_4(project, monkeypatch, module, package):
    created = run_cli("new", "lacking", "-t", "circle-packing")
    assert created.code == 0, created.output
    (Path(created.out.strip()) / "private").mkdir(exist_ok=True)
    (Path(created.out.strip()) / "private" / "answers.txt").write_text("42\n", encoding="utf-8")
    for name in list(sys.modules):
        if name == module or name.startswith(module + "."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, module, None)
    done = run_cli("commit", "lacking", "-m", "first")
    assert done.code == 4, done.output
    assert done.error_lines == [f"error: hills needs the Python package '{package}', which '{sys.executable}' "
                                f"cannot import"]
    assert "hint: " in done.err


def test_another_missing_module_is_still_a_bug():
    problem = errors.missing_dependency(ModuleNotFoundError("No module named 'nosuch'", name="nosuch"))
    assert problem is None
    found = errors.missing_dependency(ModuleNotFoundError("No module named 'ruamel'", name="ruamel"))
    assert found.exit_code == 4 and "'ruamel.yaml'" in found.message
