"""Private data under `hills eval`: drift before the run and during it is a
hard error naming the file, and 16 concurrent evals of a hill with private
data all land in the log, the chain and the notes."""

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from testing.util import needs_bwrap
from testing.eval_fixtures import (attempts_log, hills, last_report, log_entries, make_hill, notes_lines, on_machine,
                           real, submission, tree_of)

# Scores the submission's guess against the private answer.
PRIVATE_EVAL = """\
    from pathlib import Path

    HERE = Path(__file__).resolve().parent

    def eval(submission, *, final=False, **params):
        answer = float((HERE / "private" / "answer.txt").read_text())
        guess = float((Path(submission) / "guess.txt").read_text())
        return {"passed": True, "metrics": [{"name": "error", "value": abs(answer - guess), "direction": "min"}]}
    """

# Without a sandbox an evaluator can write to private/; the check after the
# run must catch it.
DRIFTING_EVAL = """\
    from pathlib import Path

    def eval(submission, *, final=False, **params):
        with open(Path(__file__).parent / "private" / "x", "a") as handle:
            handle.write("changed during the eval\\n")
        return {"passed": True, "metrics": [{"name": "m", "value": 1.0, "direction": "max"}]}
    """

PRIVATE_FILES = {"answer.txt": "41\n", "extra/table.csv": "a,b\n1,2\n"}


@pytest.fixture(scope="module")
def secret(module_machine):
    with on_machine(module_machine):
        return make_hill("secret", PRIVATE_EVAL, private=PRIVATE_FILES)


@pytest.fixture
def guess(tmp_path):
    return submission(tmp_path / "sub", {"guess.txt": "40\n"})


def test_private_data_is_read_through_the_run_folder(secret, guess):
    result = hills("eval", guess, "-H", "secret")
    assert result.code == 0, result.output
    assert result.report["metrics"] == [{"name": "error", "value": 1.0, "direction": "min"}]


def test_edited_private_file_is_refused_by_name(secret, guess):
    answer = secret / "private" / "answer.txt"
    answer.write_text("42\n")
    try:
        result = hills("eval", guess, "-H", "secret")
        assert result.code == 5, result.output  # drift before the run: no candidate can be scored
        assert "error: 'private/answer.txt' does not match private.lock" in result.err
        refused = json.loads(result.out)  # a refusal is a report too, logged and printed
        assert refused["status"] == "refused" and "private/answer.txt" in refused["reason"]
    finally:
        answer.write_text(PRIVATE_FILES["answer.txt"])
    assert hills("eval", guess, "-H", "secret").code == 0


def test_added_and_removed_private_files_are_refused_by_name(secret, guess):
    added = secret / "private" / "new.txt"
    added.write_text("not frozen\n")
    try:
        result = hills("eval", guess, "-H", "secret")
        assert result.code == 5 and "'private/new.txt' is not listed in private.lock" in result.err
    finally:
        added.unlink()
    table = secret / "private" / "extra" / "table.csv"
    table.unlink()
    try:
        result = hills("eval", guess, "-H", "secret")
        assert result.code == 5 and "'private/extra/table.csv' is listed in private.lock but missing" in result.err
    finally:
        table.write_text(PRIVATE_FILES["extra/table.csv"])
    assert hills("eval", guess, "-H", "secret").code == 0


def test_private_file_changed_by_the_evaluator_is_an_error_naming_it(module_machine, tmp_path):
    drifter = make_hill("drifter", DRIFTING_EVAL, private={"x": "frozen\n"}, extra="sandbox: none\n")
    result = hills("eval", submission(tmp_path / "sub", {"a.txt": "1"}), "-H", "drifter")
    assert result.code == 1, result.output
    assert "error: 'private/x' does not match private.lock" in result.err
    logged = last_report("drifter", tree_of(drifter))
    assert logged["status"] == "refused" and logged["passed"] is False
    assert "private/x" in logged["reason"]
    # Found after the run, the drift voids that score (1); the next eval
    # finds it before scoring, where no candidate can get past it (5).
    again = hills("eval", submission(tmp_path / "sub2", {"a.txt": "1"}), "-H", "drifter")
    assert again.code == 5, again.output
    assert "error: 'private/x' does not match private.lock" in again.err
    assert json.loads(again.out)["status"] == "refused"


def test_a_locked_file_replaced_by_a_symlink_is_drift_like_any_other(secret, guess, tmp_path):
    answer = secret / "private" / "answer.txt"
    copy = tmp_path / "answer-copy.txt"
    copy.write_text(PRIVATE_FILES["answer.txt"])  # the same bytes: the link itself is the drift
    answer.unlink()
    answer.symlink_to(copy)
    try:
        result = hills("eval", guess, "-H", "secret")
        assert result.code == 5, result.output
        assert "error: 'private/answer.txt' is listed in private.lock but is now a symbolic link" in result.err
        assert "hint: put the plain file back" in result.err
        refused = json.loads(result.out)
        assert refused["status"] == "refused" and "symbolic link" in refused["reason"]
        assert last_report("secret", tree_of(secret))["run_id"] == refused["run_id"]
        status = hills("status", "secret", "--exit-code")
        assert status.code == 1, status.output
        assert "  symlink    private/answer.txt  (private.lock)" in status.out.splitlines()
    finally:
        answer.unlink()
        answer.write_text(PRIVATE_FILES["answer.txt"])
    link = secret / "private" / "extra" / "more.csv"
    link.symlink_to(secret / "private" / "extra" / "table.csv")
    try:
        result = hills("eval", guess, "-H", "secret")
        assert result.code == 5, result.output
        assert "error: 'private/extra/more.csv' is a symbolic link" in result.err
    finally:
        link.unlink()
    assert hills("eval", guess, "-H", "secret").code == 0


@pytest.mark.slow
def test_sixteen_concurrent_evals_all_land(module_machine, tmp_path):
    crowd = make_hill("crowd", PRIVATE_EVAL, private=PRIVATE_FILES)
    folders = [submission(tmp_path / f"sub{i}", {"guess.txt": f"{i}\n"}) for i in range(16)]
    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(lambda folder: real("hills", "eval", folder, "-H", "crowd", "--json"), folders))
    for result in results:
        assert result.code == 0, result.output
    errors = sorted(result.report["metrics"][0]["value"] for result in results)
    assert errors == sorted(abs(41 - i) for i in range(16))

    tree = tree_of(crowd)
    log = attempts_log("crowd", tree)
    entries = log_entries(log)
    assert len(entries) == 32  # each eval's started entry, then its outcome
    assert [entry["seq"] for entry in entries] == list(range(32))
    outcomes = [entry for entry in entries if "report" in entry]
    assert {entry["report"]["signature"] for entry in outcomes} == {r.report["signature"] for r in results}
    started = {entry["seq"]: entry["started"]["run_id"] for entry in entries if "started" in entry}
    assert {started[entry["start"]["seq"]] for entry in outcomes} == {entry["report"]["run_id"] for entry in outcomes}
    assert len(started) == 16 and all(entry["start"]["seq"] < entry["seq"] for entry in outcomes)

    verified = real("hills-chain", "verify", log)
    assert verified.code == 0, verified.output
    assert "chain intact: 32 entries" in verified.out

    notes = notes_lines(crowd)
    assert len(notes) == 16
    assert sorted(json.loads(note)["attempt"]["seq"] for note in notes) == [entry["seq"] for entry in outcomes]

    shown = hills("log", "crowd", "--json")
    assert shown.code == 0, shown.output
    assert [version["evals"] for version in json.loads(shown.out)] == [16]
    header, version = hills("log", "crowd").out.splitlines()
    assert header.split() == ["TREE", "COMMIT", "DATE", "EVALS", "MESSAGE"]
    assert version.split()[3] == "16"

    attempts = hills("attempts", "crowd")
    assert attempts.code == 0 and "chain intact: 32 entries" in attempts.out
    assert "16 attempt(s)\n" in attempts.out


@needs_bwrap
def test_a_sandboxed_evaluator_cannot_change_private_data(module_machine, tmp_path):
    guarded = make_hill("guarded", DRIFTING_EVAL, private={"x": "frozen\n"})
    result = hills("eval", submission(tmp_path / "sub", {"a.txt": "1"}), "-H", "guarded")
    assert result.code == 1, result.output
    assert result.report["status"] == "buggy" and "Read-only file system" in result.report["reason"]
    assert {"name": "isolation", "value": "bwrap", "primary": True} in result.report["config"]
    assert (guarded / "private" / "x").read_text() == "frozen\n"
