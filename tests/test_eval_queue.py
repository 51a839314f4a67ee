"""Exclusive resources (`exclusive: gpu`): busy is a clear error without
--queue, a wait that says so with it; run folders in use are never pruned."""

import fcntl
import json
import os
import subprocess

import pytest

from testing.eval_fixtures import SCORE_EVAL, hills, hills_home, make_hill, on_machine, submission


@pytest.fixture(scope="module")
def gpu_hill(module_machine):
    with on_machine(module_machine):
        return make_hill("on-gpu", SCORE_EVAL, exclusive="gpu")


@pytest.fixture
def sub(tmp_path):
    return submission(tmp_path / "sub", {"score.txt": "1\n"})


class HeldResource:
    """The resource lock, held by this test the way another eval holds it."""

    def __init__(self, name):
        path = hills_home() / "locks" / f"resource-{name}.lock"
        path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def release(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


@pytest.fixture
def held(gpu_hill):
    resource = HeldResource("gpu")
    yield resource
    resource.release()


@pytest.mark.slow
def test_free_resource_is_taken_and_given_back(gpu_hill, sub):
    assert hills("eval", sub, "-H", "on-gpu").code == 0
    assert hills("eval", sub, "-H", "on-gpu").code == 0


def test_busy_resource_without_queue_is_an_environment_error(held, sub):
    result = hills("eval", sub, "-H", "on-gpu")
    assert result.code == 4, result.output
    assert "error: resource 'gpu' is busy" in result.err
    assert "hint: pass --queue" in result.err
    refused = json.loads(result.out)
    assert refused["status"] == "refused" and "busy" in refused["reason"]


def test_queue_waits_its_turn_and_says_so(held, sub):
    process = subprocess.Popen(["hills", "eval", str(sub), "-H", "on-gpu", "--queue"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = process.stderr.readline()
        assert "resource 'gpu' is busy" in first and "waiting" in first and "--queue" in first
        assert process.poll() is None
    finally:
        held.release()
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, first + err
    assert "resource 'gpu' acquired" in err
    assert '"status": "passing"' in out


def test_hill_without_exclusive_ignores_the_resource_lock(module_machine, tmp_path):
    make_hill("on-cpu", SCORE_EVAL)
    resource = HeldResource("gpu")
    try:
        result = hills("eval", submission(tmp_path / "s", {"score.txt": "2"}), "-H", "on-cpu")
        assert result.code == 0, result.output
    finally:
        resource.release()


def test_prune_keeps_a_run_folder_in_use(gpu_hill, tmp_path):
    from hills.base import state
    from hills.run import folders

    root = hills_home() / "runs" / "pruned"
    names = [f"20000101T0000{index:02d}-aaaaaaaa" for index in range(30)]
    long_ago = 946684800  # runs from 2000: old enough to prune
    for name in names:
        (root / name).mkdir(parents=True)
    fresh = names[1]  # just made, its lock maybe not yet taken: spared too
    with state.file_lock(str(root / names[0] / ".in-use")) as held:
        assert held
        for name in names:
            if name != fresh:
                os.utime(root / name, (long_ago, long_ago))
        folders.prune_runs("pruned", keep=5)
    left = sorted(os.listdir(root))
    assert left == [names[0], fresh] + names[-5:]
