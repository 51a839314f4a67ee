"""A re-commit whose gate inputs did not change: the gate's verdict is
remembered by content (files, environment, hills version), the locks are
still regenerated and the leak audit still runs, on the objects new since
the last audit, or on everything when a private file is new."""

import json
import os
from pathlib import Path

import blake3
import pytest

from testing.util import Result, git, run_cli
from hills.evidence import report
from hills.freeze import commit as commit_module

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


@pytest.mark.slow
def test_unchanged_gate_inputs_skip_the_tests_but_not_the_locks(hill: Path, tmp_path: Path) -> None:
    (hill / "private" / "answers.txt").write_text("new held-out answers\n")
    again = commit("new held-out data")
    assert again.code == 0, again.output
    assert runs(tmp_path) == 1
    assert "ok    tests" in again.err and "(remembered)" in again.err
    # The verdict was remembered; the private data was hashed again all the same.
    assert "blake3:" + blake3.blake3(b"new held-out answers\n").hexdigest() in committed_lock(hill)


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_hills_check_always_runs_the_tests(hill: Path, tmp_path: Path) -> None:
    checked = run_cli("check", "circle-packing")
    assert checked.code == 0, checked.output
    assert runs(tmp_path) == 2 and "(remembered)" not in checked.out


# ------------------------------------------------------------------ the leak audit

@pytest.fixture
def audits(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The whole-history audits run from now on, one entry each."""
    calls: list[str] = []
    whole = commit_module._audit_all

    def counted(*args: object) -> set[str]:
        calls.append("all")
        return whole(*args)

    monkeypatch.setattr(commit_module, "_audit_all", counted)
    return calls


def plumb(hill_dir: Path, *args: str, input: str | None = None) -> str:
    done = git(hill_dir, *args, input=input)
    assert done.code == 0, done.output
    return done.out.strip()


def edit_readme(hill_dir: Path, text: str) -> None:
    (hill_dir / "README.md").write_text((hill_dir / "README.md").read_text() + f"\n{text}\n")


@pytest.mark.slow
def test_a_recommit_audits_only_new_objects(hill: Path, audits: list[str]) -> None:
    assert (hill / ".vc" / commit_module.AUDIT_STATE).is_file()
    edit_readme(hill, "Nothing private changed.")
    assert commit("readme").code == 0
    # New held-out bytes that git holds no object of: still only the new objects.
    (hill / "private" / "answers.txt").write_text("answers nobody has seen\n")
    assert commit("new held-out data").code == 0
    assert audits == []


@pytest.mark.slow
def test_new_private_bytes_that_git_holds_audit_everything(hill: Path, audits: list[str]) -> None:
    """Unreachable, so no leak; but only the whole audit can tell."""
    plumb(hill, "hash-object", "-w", "--stdin", input="answers once staged by mistake\n")
    (hill / "private" / "answers.txt").write_text("answers once staged by mistake\n")
    assert commit("held-out data once staged").code == 0
    assert audits == ["all"]


@pytest.mark.slow
def test_the_new_objects_still_hold_no_copy_of_private_data(hill: Path, audits: list[str]) -> None:
    secret = plumb(hill, "hash-object", "-w", "--", "private/answers.txt")
    tree = plumb(hill, "mktree", input=f"100644 blob {secret}\tnotes.txt\n")
    side = plumb(hill, "commit-tree", tree, "-p", plumb(hill, "rev-parse", "HEAD"), "-m", "side")
    plumb(hill, "update-ref", "refs/heads/side", side)
    edit_readme(hill, "After a side branch.")
    refused = commit("after a leak")
    assert refused.code == 1, refused.output
    assert "the content of 'private/answers.txt' is reachable" in refused.error_lines[0]
    assert "nothing was committed" in refused.error_lines[0]
    assert audits == []  # found by the audit of the new objects alone


@pytest.mark.slow
def test_a_new_private_file_is_audited_against_all_history(hill: Path, audits: list[str]) -> None:
    """Bytes committed as a public file, later moved into private/: the old
    commit was audited when those bytes were not private, so a new private
    digest audits the whole history again."""
    (hill / "table.csv").write_text("id,label\n1,cat\n")
    assert commit("a public table").code == 0
    (hill / "table.csv").rename(hill / "private" / "table.csv")
    refused = commit("the table is held out now")
    assert refused.code == 1, refused.output
    assert "the content of 'private/table.csv' is reachable" in refused.error_lines[0]
    assert audits == ["all"]


@pytest.mark.slow
def test_an_old_tree_moved_under_private_is_found(hill: Path, audits: list[str]) -> None:
    """A tree audited under backup/ and then put at private/ by a new
    commit is not listed again as a new object; the new commit is asked
    for its private/ itself."""
    (hill / "backup").mkdir()
    (hill / "backup" / "x.txt").write_text("an old table\n")
    assert commit("a backup folder").code == 0
    head = plumb(hill, "rev-parse", "HEAD")
    backup = plumb(hill, "rev-parse", "HEAD:backup")
    tree = plumb(hill, "mktree", input=f"040000 tree {backup}\tprivate\n")
    plumb(hill, "update-ref", "refs/heads/moved", plumb(hill, "commit-tree", tree, "-p", head, "-m", "moved"))
    edit_readme(hill, "After the move.")
    refused = commit("after the move")
    assert refused.code == 1, refused.output
    assert "'private/x.txt' is in the history of hill 'circle-packing'" in refused.error_lines[0]


@pytest.mark.slow
def test_a_new_ref_to_an_old_tree_holding_private_is_found(hill: Path, audits: list[str]) -> None:
    """backup/private/ is an ordinary folder; a ref to the backup/ tree puts
    it at the top, where the audit of the whole history does not look."""
    (hill / "backup" / "private").mkdir(parents=True)
    (hill / "backup" / "private" / "x.txt").write_text("kept under backup/\n")
    assert commit("a backup folder").code == 0
    plumb(hill, "update-ref", "refs/tags/backup", plumb(hill, "rev-parse", "HEAD:backup"))
    edit_readme(hill, "After the tag.")
    refused = commit("after the tag")
    assert refused.code == 1, refused.output
    assert "'private' is in the history of hill 'circle-packing'" in refused.error_lines[0]


@pytest.mark.slow
def test_an_edited_audit_record_audits_everything(hill: Path, audits: list[str]) -> None:
    record = hill / ".vc" / commit_module.AUDIT_STATE
    document = json.loads(record.read_text())
    document["value"]["private"] = []
    record.write_text(json.dumps(document))
    edit_readme(hill, "After an edit of the record.")
    assert commit("readme").code == 0
    assert audits == ["all"]
    assert os.path.getsize(record) > 0
