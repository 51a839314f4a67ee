"""A re-commit whose gate inputs did not change: the gate's verdict is
remembered by content (files, environment, hills version), the locks are
still regenerated and the leak audit still runs, on the objects new since
the last audit, or on everything when a private file is new."""

from pathlib import Path

import blake3
import pytest

from conftest import Result, git, run_cli
from hills import report

MARKER_TEST = """\
import os


def test_marks_each_run():
    with open(os.environ["GATE_MARKER"], "a") as handle:
        handle.write("ran\\n")
    assert not os.environ.get("GATE_FAIL"), "asked to fail"
"""


@pytest.fixture
def hill(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A committed circle-packing hill whose tests note each run in the file
    $GATE_MARKER (outside the hill, so no run changes what is committed)."""
    monkeypatch.setenv("GATE_MARKER", str(tmp_path / "gate-runs.txt"))
    assert run_cli("new", "circle-packing", "-t", "circle-packing").code == 0
    hill_dir = project / ".hills" / "circle-packing"
    (hill_dir / "tests" / "test_marker.py").write_text(MARKER_TEST)
    (hill_dir / "private").mkdir()
    (hill_dir / "private" / "answers.txt").write_text("the first answers\n")
    first = run_cli("commit", "circle-packing", "-m", "first")
    assert first.code == 0, first.output
    assert runs(tmp_path) == 1
    return hill_dir


def runs(tmp_path: Path) -> int:
    marker = tmp_path / "gate-runs.txt"
    return len(marker.read_text().splitlines()) if marker.exists() else 0


def commit(message: str) -> Result:
    return run_cli("commit", "circle-packing", "-m", message)


def committed_lock(hill_dir: Path) -> str:
    return git(hill_dir, "show", "HEAD:private.lock").out


def test_unchanged_gate_inputs_skip_the_tests_but_not_the_locks(hill: Path, tmp_path: Path) -> None:
    (hill / "private" / "answers.txt").write_text("new held-out answers\n")
    again = commit("new held-out data")
    assert again.code == 0, again.output
    assert runs(tmp_path) == 1
    assert "ok    tests" in again.err and "(remembered)" in again.err
    # The verdict was remembered; the private data was hashed again all the same.
    assert "blake3:" + blake3.blake3(b"new held-out answers\n").hexdigest() in committed_lock(hill)


@pytest.mark.parametrize("change", ["a test file", "uv.lock", "the hills version"])
def test_a_changed_gate_input_runs_the_gate_again(hill: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   change: str) -> None:
    (hill / "private" / "answers.txt").write_text("answers, second edition\n")
    if change == "a test file":
        (hill / "tests" / "test_marker.py").write_text(MARKER_TEST + "\n\ndef test_more():\n    pass\n")
    elif change == "uv.lock":
        with open(hill / "uv.lock", "a") as handle:
            handle.write("\n# locked again\n")
    else:
        monkeypatch.setattr(report, "_TOOL_HASH", "0" * 64)
    again = commit(f"after changing {change}")
    assert again.code == 0, again.output
    assert runs(tmp_path) == 2
    assert "(remembered)" not in again.err


def test_a_failed_gate_is_never_remembered(hill: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (hill / "README.md").write_text((hill / "README.md").read_text() + "\nA failing revision.\n")
    monkeypatch.setenv("GATE_FAIL", "1")
    for attempt in (2, 3):
        refused = commit("fails")
        assert refused.code == 1, refused.output
        assert refused.error_lines[0].startswith("error: hill 'circle-packing' failed check 'tests'")
        assert runs(tmp_path) == attempt
    monkeypatch.delenv("GATE_FAIL")
    passed = commit("passes")
    assert passed.code == 0, passed.output
    assert runs(tmp_path) == 4


def test_the_hook_remembers_the_verdict_of_hills_commit(hill: Path, tmp_path: Path) -> None:
    """A plain git commit after new private data: the hook regenerates the
    lock and refuses until it is staged, without running the tests again."""
    (hill / "private" / "answers.txt").write_text("answers through plain git\n")
    done = git(hill, "commit", "--allow-empty", "-m", "through git")
    assert done.code != 0
    assert "private.lock did not match the files on disk and was regenerated" in done.err
    assert git(hill, "add", "private.lock").code == 0
    done = git(hill, "commit", "-m", "through git, lock staged")
    assert done.code == 0, done.output
    assert runs(tmp_path) == 1


def test_hills_check_always_runs_the_tests(hill: Path, tmp_path: Path) -> None:
    checked = run_cli("check", "circle-packing")
    assert checked.code == 0, checked.output
    assert runs(tmp_path) == 2 and "(remembered)" not in checked.out
