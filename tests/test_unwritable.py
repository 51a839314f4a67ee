"""Folders hills cannot write: a read-only project, a read-only or
misplaced HILLS_HOME, a full disk. Each is exit 4 naming the path, with a
hint, and leaves nothing half-written: no hill folder, no moved ref, no
broken log line.

Root ignores permission bits, so read-only and full file systems are real
mounts (a read-only bind mount, a small tmpfs); those tests are skipped
where mounting is not possible. Failures that need exact timing are
injected at the write layer instead."""

import errno
import json
import os
import subprocess

import pytest

from testing.util import git, new_and_commit, run_bin, run_cli
from hills.base import state
from hills.disk import hill as hill_module
from hills.evidence import chain

NO_SPACE = os.strerror(errno.ENOSPC)
READ_ONLY = os.strerror(errno.EROFS)


@pytest.fixture
def mounts():
    """mount(target, size=None, read_only=False): a tmpfs of `size` (or, with
    no size, `target` bound onto itself), unmounted after the test."""
    made = []

    def mount(target, size=None, read_only=False):
        if os.geteuid() != 0:
            pytest.skip("mounting a test file system needs root")
        target.mkdir(parents=True, exist_ok=True)
        argv = ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(target)] if size \
            else ["mount", "--bind", str(target), str(target)]
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a test file system here: {done.stderr.strip()}")
        made.append(target)
        if read_only:
            options = "remount,ro" if size else "remount,bind,ro"
            done = subprocess.run(["mount", "-o", options, str(target)], capture_output=True, text=True)
            if done.returncode != 0:
                pytest.skip(f"cannot remount a test file system read-only: {done.stderr.strip()}")
        return target

    yield mount
    for target in reversed(made):
        subprocess.run(["umount", "-l", str(target)], check=False)


def fill(folder):
    """Write into `folder` until its file system is full."""
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        chunk = 1 << 20
        while chunk:
            try:
                os.write(fd, b"\0" * chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
                chunk //= 2
    finally:
        os.close(fd)
    return folder / "filler"


def no_space(path):
    return OSError(errno.ENOSPC, NO_SPACE, str(path))


def assert_environment_problem(result, path, reason):
    assert result.code == 4, result.output
    assert result.error_lines[0] == f"error: cannot write '{path}': {reason}", result.output
    assert "hint: " in result.err
    assert "Traceback" not in result.err and "internal error" not in result.err


# ---------------------------------------------------------------- HILLS_HOME

def test_a_hills_home_whose_parent_is_a_file(project, tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    home = blocker / "hills"
    monkeypatch.setenv("HILLS_HOME", str(home))
    result = run_bin("hills", "new", "demo")
    assert result.code == 4, result.output
    assert result.error_lines == [f"error: cannot write '{home}': '{blocker}' is a file, not a folder"]
    assert f"hint: machine state lives in '{home}' (HILLS_HOME)" in result.err
    assert "Traceback" not in result.err
    assert os.listdir(project) == []
    listed = run_cli("list")
    assert listed.code == 4 and f"'{blocker}' is a file, not a folder" in listed.err


def test_a_hills_home_that_is_a_file(project, tmp_path, monkeypatch):
    home = tmp_path / "a-file"
    home.write_text("not a folder\n")
    monkeypatch.setenv("HILLS_HOME", str(home))
    result = run_cli("new", "demo")
    assert result.code == 4, result.output
    assert result.error_lines == [f"error: machine state folder '{home}' is a file, not a folder"]
    assert "HILLS_HOME" in result.err
    assert os.listdir(project) == []
    assert home.read_text() == "not a folder\n"


def test_a_read_only_hills_home(project, hermetic, mounts):
    home = mounts(hermetic.hills_home, read_only=True)
    result = run_bin("hills", "new", "demo")
    assert_environment_problem(result, home / "key", READ_ONLY)
    assert f"hint: machine state lives in '{home}' (HILLS_HOME)" in result.err
    assert os.listdir(project) == []
    assert os.listdir(home) == []


@pytest.mark.slow
def test_a_full_hills_home_keeps_the_log_whole(project, hermetic, mounts):
    home = mounts(hermetic.hills_home, size="64m")
    hill = new_and_commit()
    example = hill / "examples" / "grid"
    assert run_cli("eval", str(example), "-H", "circle-packing").code == 0
    filler = fill(home)
    result = run_cli("eval", str(example), "-H", "circle-packing")
    assert result.code == 4, result.output
    assert NO_SPACE in result.error_lines[0] and f"'{home}" in result.error_lines[0]
    assert "hint: " in result.err and "internal error" not in result.err
    filler.unlink()
    attempts = json.loads(run_cli("attempts", "circle-packing", "--json").out)
    assert attempts["chain"]["ok"], attempts["chain"]
    assert [a["report"]["status"] for a in attempts["attempts"]] == ["passing"]
    again = run_cli("eval", str(example), "-H", "circle-packing")
    assert again.code == 0, again.output
    verified = run_bin("hills-chain", "verify", attempts["log"])
    assert verified.code == 0 and "chain intact: 4 entries" in verified.out  # two evals, started and outcome each


# ---------------------------------------------------------------- the project folder

def test_a_read_only_project_folder(project, hermetic, mounts, monkeypatch):
    mounts(project, read_only=True)
    monkeypatch.chdir(project)
    result = run_bin("hills", "new", "demo")
    assert_environment_problem(result, project / ".hills", READ_ONLY)
    assert f"'{project}'" in result.err.split("hint: ", 1)[1]
    assert os.listdir(project) == []
    registry = hermetic.hills_home / "registry.json"
    assert not registry.exists() or "demo" not in json.loads(registry.read_text())["hills"]


def test_a_full_project_disk_leaves_no_hill_folder(project, hermetic, mounts, monkeypatch):
    mounts(project, size="1m")
    monkeypatch.chdir(project)
    fill(project)
    result = run_cli("new", "demo")
    assert result.code == 4, result.output
    assert result.error_lines[0].startswith(f"error: cannot write '{project / '.hills'}")
    assert result.error_lines[0].endswith(f": {NO_SPACE}")
    assert "hint: free space on the disk holding" in result.err
    assert os.listdir(project) == ["filler"]
    registry = hermetic.hills_home / "registry.json"
    assert not registry.exists() or "demo" not in json.loads(registry.read_text())["hills"]


# ---------------------------------------------------------------- failures at one step, injected

def test_new_whose_registration_fails_leaves_no_folder(project, hermetic, monkeypatch):
    def full(change):
        raise no_space(state.registry_path())

    monkeypatch.setattr(state, "update_registry", full)
    result = run_cli("new", "demo")
    assert_environment_problem(result, hermetic.hills_home / "registry.json", NO_SPACE)
    assert "hint: free space on the disk holding" in result.err
    assert os.listdir(project) == []


@pytest.mark.slow
def test_a_commit_whose_registration_fails_moves_no_ref(project, hermetic, monkeypatch):
    created = run_cli("new", "demo", "-t", "circle-packing")
    assert created.code == 0, created.output
    hill = project / ".hills" / "demo"

    def full(change):
        raise no_space(state.registry_path())

    monkeypatch.setattr(state, "update_registry", full)
    result = run_cli("commit", "demo", "-m", "first")
    assert_environment_problem(result, hermetic.hills_home / "registry.json", NO_SPACE)
    assert git(hill, "rev-parse", "--verify", "-q", "refs/heads/main").code != 0
    assert not [name for name in os.listdir(hill / ".vc") if name.startswith("hills-index-")]


@pytest.mark.slow
def test_a_commit_that_fails_after_its_ref_moved_puts_it_back(project, monkeypatch):
    hill = new_and_commit()
    before = git(hill, "rev-parse", "HEAD").out.strip()
    with open(hill / "README.md", "a", encoding="utf-8") as handle:
        handle.write("\nMore about the task.\n")
    exclude = hill / ".vc" / "info" / "exclude"

    def full(hill_dir, blob_paths=()):
        raise no_space(exclude)

    with monkeypatch.context() as patch:
        patch.setattr(hill_module, "write_excludes", full)
        result = run_cli("commit", "circle-packing", "-m", "second")
    assert_environment_problem(result, exclude, NO_SPACE)
    assert git(hill, "rev-parse", "HEAD").out.strip() == before
    status = json.loads(run_cli("status", "circle-packing", "--json").out)
    assert status["files"] == [["modified", "README.md"]]


def test_a_log_append_that_fails_leaves_the_log_as_it_was(tmp_path, monkeypatch):
    log = tmp_path / "log.jsonl"
    from hills.evidence import trust

    key = trust.Keys(None, None, b"k" * 32, can_sign=True)
    chain.append(log, {"n": 1}, key)
    before = log.read_bytes()
    real_write = os.write

    def half_then_full(fd, data):
        if os.readlink(f"/proc/self/fd/{fd}") == str(log):
            real_write(fd, data[: len(data) // 2])
            raise OSError(errno.ENOSPC, NO_SPACE)
        return real_write(fd, data)

    with monkeypatch.context() as patch, pytest.raises(state.EnvironmentProblem) as failed:
        patch.setattr(os, "write", half_then_full)
        chain.append(log, {"n": 2}, key)
    assert failed.value.message == f"cannot write '{log}': {NO_SPACE}"
    assert failed.value.hint
    assert log.read_bytes() == before
    assert chain.verify(log, key).ok


# ---------------------------------------------------------------- the mapping itself

def test_only_the_errors_of_a_folder_or_disk_are_environment_problems(tmp_path):
    assert state.write_problem(OSError(errno.EIO, os.strerror(errno.EIO), str(tmp_path))) is None
    assert state.write_problem(ValueError("x")) is None
    unnamed = state.write_problem(OSError(errno.ENOSPC, NO_SPACE))
    assert unnamed.exit_code == 4 and unnamed.message == f"a write failed: {NO_SPACE}"
    assert state.home() in unnamed.hint


def test_a_copy_that_runs_out_of_room_names_the_file_it_was_writing(tmp_path):
    problem = state.write_problem(OSError(errno.ENOSPC, NO_SPACE, "/src/big.bin", None, str(tmp_path / "big.bin")))
    assert problem.message == f"cannot write '{tmp_path / 'big.bin'}': {NO_SPACE}"
    assert problem.hint == f"free space on the disk holding '{tmp_path}', then run the command again"


def test_a_file_in_the_way_is_named(tmp_path):
    (tmp_path / "plain").write_text("x")
    target = tmp_path / "plain" / "a" / "b"
    problem = state.write_problem(OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(target)))
    assert problem.message == f"cannot write '{target}': '{tmp_path / 'plain'}' is a file, not a folder"
    assert problem.hint == "move that file aside, or work in another folder"


def test_an_error_in_machine_state_points_at_hills_home(hermetic):
    path = hermetic.hills_home / "runs" / "x"
    problem = state.write_problem(OSError(errno.EROFS, READ_ONLY, str(path)))
    assert problem.message == f"cannot write '{path}': {READ_ONLY}"
    assert problem.hint.startswith(f"machine state lives in '{hermetic.hills_home}' (HILLS_HOME)")
