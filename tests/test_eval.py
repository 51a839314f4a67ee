"""`hills eval` on a well-behaved evaluator: the report, the log, the note,
params, a dirty hill, the submission snapshot and what a submission cannot
do to its own score."""

import json
import os
import stat

import pytest

from hills.run import phases

from testing.eval_fixtures import (SCORE_EVAL, attempts_log, hills, hills_home, last_report, log_entries, make_hill,
                           notes_lines, on_machine, real, submission, tree_of)

PARAMS = """\
n:
  type: int
  default: 26
  primary: true
  low: 1
  high: 100
tolerance:
  type: float
  default: 1.0e-9
  low: 0.0
  high: 1.0e-3
"""

# Runs the submission's solution.py in a subprocess, the way a real evaluator
# runs a climber's code, then scores the number it wrote to answer.txt.
RUNS_CODE_EVAL = """\
    import subprocess
    import sys
    from pathlib import Path

    def eval(submission, *, final=False, **params):
        submission = Path(submission)
        done = subprocess.run([sys.executable, "solution.py"], cwd=submission)
        value = float((submission / "answer.txt").read_text())
        return {"passed": done.returncode == 0 and value <= 10,
                "metrics": [{"name": "total", "value": value, "direction": "max"}],
                "details": {"exit": done.returncode}}
    """

# Tries every way a submission's code could place the result the report is
# built from: the fd named in env, every open fd, env, and files in its folder.
SNEAKY_SOLUTION = """\
import json, os
fake = json.dumps({"ok": True, "value": {"passed": True, "metrics": [
    {"name": "total", "value": 1e9, "direction": "max"}]}})
named = os.environ.get("HILLS_RESULT_FD")
if named:
    os.write(int(named), fake.encode())
for fd in range(3, 256):
    try:
        os.write(fd, fake.encode())
    except OSError:
        pass
os.environ["HILLS_RESULT"] = "result.json"
for name in ("result.json", "report.json", "../report.json", "../result.json"):
    try:
        with open(name, "w") as handle:
            handle.write(fake)
    except OSError:
        pass
with open("answer.txt", "w") as handle:
    handle.write("3")
"""


@pytest.fixture(scope="module")
def scored(module_machine):
    with on_machine(module_machine):
        return make_hill("scored", SCORE_EVAL, params=PARAMS)


@pytest.fixture(scope="module")
def runs_code(module_machine):
    """An evaluator that runs the submission itself, which the scoring
    guard stops and the leak probe refuses: with both out of the way
    (the guard switched off, `sandbox: none`), the submitted code inherits
    all the evaluator has, and still must not reach the result channel,
    a boundary of its own."""
    with on_machine(module_machine), pytest.MonkeyPatch.context() as patch:
        patch.setattr(phases, "SCORING_GUARD", False)
        return make_hill("runs-code", RUNS_CODE_EVAL, extra="sandbox: none\n")


def scoring(tmp_path, value, name="sub"):
    return submission(tmp_path / name, {"score.txt": f"{value}\n"})


def test_passing_eval_prints_a_signed_report_logs_it_and_notes_it(scored, tmp_path):
    tree = tree_of(scored)
    notes_before = len(notes_lines(scored)) if attempts_log("scored", tree).exists() else 0
    result = hills("eval", scoring(tmp_path, 2.5), "-H", "scored")
    assert result.code == 0, result.output
    report = result.report
    assert report["hill"] == "scored" and report["tree_hash"] == tree
    assert report["passed"] is True and report["status"] == "passing" and report["reason"] is None
    assert report["metrics"] == [{"name": "total", "value": 2.5, "direction": "max"}]
    assert report["params"] == {"n": 26, "tolerance": 1e-9}
    assert report["official"] is True and report["forced"] is False and report["final"] is False
    assert report["submission_hash"].startswith("blake3:")
    assert report["signature"].startswith("sshsig:")
    for field in ("commit", "submission_git", "config", "details", "official_reason", "trust", "tool",
                  "timestamp", "report_version"):
        assert field in report
    assert "PASSED" in result.err and "total=2.5" in result.err
    logged = last_report("scored", tree)
    assert logged == report
    notes = notes_lines(scored)
    assert len(notes) == notes_before + 1
    assert json.loads(notes[-1])["report"]["signature"] == report["signature"]
    run_dir = hills_home() / "runs" / "scored" / report["run_id"]
    assert json.loads((run_dir / "report.json").read_text()) == report
    assert (run_dir / "submission" / "score.txt").read_text() == "2.5\n"


def test_failing_eval_exits_1_and_is_logged(scored, tmp_path):
    result = hills("eval", scoring(tmp_path, -1), "-H", "scored")
    assert result.code == 1, result.output
    assert result.report["status"] == "failing" and result.report["passed"] is False
    assert result.report["reason"] == "negative score"
    assert "FAILED" in result.err and "negative score" in result.err
    assert last_report("scored", tree_of(scored))["status"] == "failing"


def test_same_files_hash_the_same_and_a_mode_change_does_not(scored, tmp_path):
    first = hills("eval", scoring(tmp_path, 1, "a"), "-H", "scored", "--json")
    second = hills("eval", scoring(tmp_path, 1, "b"), "-H", "scored", "--json")
    assert first.report["submission_hash"] == second.report["submission_hash"]
    assert first.err == "" and len(first.out.strip().splitlines()) == 1
    os.chmod(tmp_path / "b" / "score.txt", 0o755)
    third = hills("eval", tmp_path / "b", "-H", "scored", "--json")
    assert third.report["submission_hash"] != first.report["submission_hash"]


def test_machine_key_is_created_once_with_mode_0600(scored, tmp_path):
    key = hills_home() / "key"
    before = key.read_bytes()
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert hills("eval", scoring(tmp_path, 1), "-H", "scored").code == 0
    assert key.read_bytes() == before
    assert stat.S_IMODE(key.stat().st_mode) == 0o600


def test_params_are_typed_and_passed(scored, tmp_path):
    result = hills("eval", scoring(tmp_path, 1), "-H", "scored", "-p", "n=7", "-p", "tolerance=0.0001")
    assert result.code == 0, result.output
    assert result.report["params"] == {"n": 7, "tolerance": 0.0001}


@pytest.mark.parametrize("param, words", [
    ("bogus=1", ["unknown param 'bogus'", "allowed params: n, tolerance"]),
    ("n=101", ["param 'n' must be in [1, 100]", "got 101"]),
    ("n=0", ["param 'n' must be in [1, 100]"]),
    ("tolerance=1", ["param 'tolerance' must be in"]),
    ("n=seven", ["param 'n' expects an int", "'seven'"]),
    ("n=2.5", ["-p 'n=2.5': param 'n' expects an int", "hint: 'hills describe scored' lists the params"]),
    ("tolerance=much", ["param 'tolerance' expects a float"]),
    ("n", ["-p 'n': expected NAME=VALUE", "hint: for example -p n=VALUE"]),
])
def test_bad_params_are_usage_errors(scored, tmp_path, param, words):
    log = attempts_log("scored", tree_of(scored))
    lines_before = len(log_entries(log)) if log.exists() else 0
    result = hills("eval", scoring(tmp_path, 1), "-H", "scored", "-p", param)
    assert result.code == 2, result.output
    assert result.out == ""
    for word in words:
        assert word in result.err
    assert len(result.err.splitlines()) == 2 and result.err.splitlines()[1].startswith("hint: ")
    assert (len(log_entries(log)) if log.exists() else 0) == lines_before


@pytest.mark.parametrize("prog, words", [("hills", "hills eval"), ("hills-eval", "hills-eval")])
def test_an_option_without_its_value_hints_at_the_help(scored, tmp_path, prog, words):
    args = ("eval",) if prog == "hills" else ()
    result = hills(*args, scoring(tmp_path, 1), "-H", "scored", "-p", prog=prog)
    assert result.code == 2, result.output
    assert result.err.splitlines() == ["error: option '-p' requires an argument", f"hint: see '{words} --help'"]


def test_unknown_hill_and_missing_submission_are_usage_errors(scored, tmp_path):
    result = hills("eval", scoring(tmp_path, 1), "-H", "no-such-hill")
    assert result.code == 2 and "no hill named 'no-such-hill'" in result.err
    result = hills("eval", tmp_path / "missing", "-H", "scored")
    assert result.code == 2 and "is not a folder" in result.err and "missing" in result.err
    result = hills("eval", scoring(tmp_path, 1), "-H", "scored", "-o", tmp_path / "nowhere" / "r.json")
    assert result.code == 2 and "does not exist" in result.err and "nowhere" in result.err


def test_output_file_holds_the_same_report(scored, tmp_path):
    target = tmp_path / "report.json"
    result = hills("eval", scoring(tmp_path, 4), "-H", "scored", "-o", target)
    assert result.code == 0, result.output
    assert json.loads(target.read_text()) == result.report


def test_dirty_hill_is_refused_force_scores_head_and_current_is_unofficial(scored, tmp_path):
    readme = scored / "README.md"
    original = readme.read_text()
    tree = tree_of(scored)
    readme.write_text(original + "\nan uncommitted line\n")
    try:
        refused = hills("eval", scoring(tmp_path, 1), "-H", "scored")
        assert refused.code == 5, refused.output  # refused before scoring: no verdict on the candidate
        assert "error: hill 'scored' has uncommitted changes (README.md)" in refused.err
        assert "--force" in refused.err and "--current" in refused.err

        forced = hills("eval", scoring(tmp_path, 1), "-H", "scored", "--force")
        assert forced.code == 0, forced.output
        assert forced.report["forced"] is True and forced.report["official"] is True
        assert forced.report["tree_hash"] == tree
        assert "--force" in forced.err

        current = hills("eval", scoring(tmp_path, 1), "-H", "scored", "--current")
        assert current.code == 0, current.output
        report = current.report
        assert report["official"] is False and report["tree_hash"] is None and report["commit"] is None
        assert "--current" in report["official_reason"]
        assert "unofficial" in current.err
        assert log_entries(attempts_log("scored", None, scored))[-1]["report"] == report
        assert last_report("scored", tree)["signature"] != report["signature"]
        assert not any(json.loads(line)["report"]["signature"] == report["signature"]
                       for line in notes_lines(scored))

        both = hills("eval", scoring(tmp_path, 1), "-H", "scored", "--current", "--force")
        assert both.code == 2 and "cannot be combined" in both.err
    finally:
        readme.write_text(original)
    assert hills("eval", scoring(tmp_path, 1), "-H", "scored").code == 0


@pytest.mark.parametrize("kind", ["relative", "absolute"])
def test_symlink_leaving_the_submission_is_refused_by_name_and_logged(scored, tmp_path, kind):
    outside = tmp_path / "outside.txt"
    outside.write_text("5\n")
    folder = submission(tmp_path / "sub", {"notes.txt": "hello"})
    os.symlink("../outside.txt" if kind == "relative" else str(outside), folder / "score.txt")
    result = hills("eval", folder, "-H", "scored")
    assert result.code == 1, result.output
    assert "submission symlink 'score.txt' points outside the submission" in result.err
    logged = last_report("scored", tree_of(scored))
    assert logged["status"] == "refused" and logged["passed"] is False
    assert "score.txt" in logged["reason"]


def test_symlink_inside_the_submission_is_kept(scored, tmp_path):
    folder = submission(tmp_path / "sub", {"data/value.txt": "6\n"})
    os.symlink("data/value.txt", folder / "score.txt")
    result = hills("eval", folder, "-H", "scored")
    assert result.code == 0, result.output
    assert result.report["metrics"][0]["value"] == 6.0


def test_a_nested_symlink_climbing_out_is_refused(scored, tmp_path):
    folder = submission(tmp_path / "sub", {"score.txt": "1\n", "deep/keep.txt": "x"})
    os.symlink("../../outside", folder / "deep" / "escape")
    result = hills("eval", folder, "-H", "scored")
    assert result.code == 1 and "'deep/escape' points outside the submission" in result.err


def test_result_files_in_the_submission_do_not_make_the_report(scored, tmp_path):
    fake = json.dumps({"passed": True, "metrics": [{"name": "total", "value": 1e9, "direction": "max"}],
                       "score": 1e9, "signature": "hmac-sha256:" + "0" * 64})
    folder = submission(tmp_path / "sub", {"score.txt": "1\n", "result.json": fake, "report.json": fake,
                                           "hills_result.json": fake})
    result = hills("eval", folder, "-H", "scored")
    assert result.code == 0, result.output
    assert result.report["metrics"] == [{"name": "total", "value": 1.0, "direction": "max"}]


def test_submission_code_cannot_write_the_result(runs_code, tmp_path, monkeypatch):
    monkeypatch.setattr(phases, "SCORING_GUARD", False)
    folder = submission(tmp_path / "sub", {"solution.py": SNEAKY_SOLUTION})
    result = hills("eval", folder, "-H", "runs-code")
    assert result.code == 0, result.output
    assert result.report["status"] == "passing"
    assert result.report["metrics"] == [{"name": "total", "value": 3.0, "direction": "max"}]
    assert result.report["details"] == {"exit": 0}


def test_the_three_names_give_the_same_result(scored, tmp_path):
    folder = scoring(tmp_path, 1.5)
    fields = ("hill", "tree_hash", "commit", "passed", "status", "metrics", "config", "params",
              "submission_hash", "official", "forced", "final")
    results = [real("hills", "eval", folder, "-H", "scored"),
               real("hills-eval", folder, "-H", "scored"),
               real("git", "hill", "eval", folder, "-H", "scored")]
    for result in results:
        assert result.code == 0, result.output
        assert "PASSED" in result.err
    reports = [result.report for result in results]
    assert all({f: r[f] for f in fields} == {f: reports[0][f] for f in fields} for r in reports)
    assert len({r["run_id"] for r in reports}) == 3


def test_git_lineage_of_a_checkout_is_recorded(scored, tmp_path):
    folder = scoring(tmp_path, 1)
    for argv in (["init", "-q", "-b", "trunk"], ["add", "score.txt"], ["commit", "-q", "-m", "x"]):
        assert real("git", *argv, cwd=folder).code == 0
    sha = real("git", "rev-parse", "HEAD", cwd=folder).out.strip()
    clean = hills("eval", folder, "-H", "scored")
    assert clean.code == 0, clean.output
    assert clean.report["submission_git"] == {"ref": f"trunk@{sha}", "dirty": False, "subject": "x"}
    (folder / "score.txt").write_text("2\n")
    dirty = hills("eval", folder, "-H", "scored")
    assert dirty.report["submission_git"] == {"ref": f"trunk@{sha}", "dirty": True, "subject": "x"}
    run_dir = hills_home() / "runs" / "scored" / dirty.report["run_id"]
    assert not (run_dir / "submission" / ".git").exists()
    plain = hills("eval", scoring(tmp_path, 1, "plain"), "-H", "scored")
    assert plain.report["submission_git"] is None


def test_final_evals_are_counted_against_the_budget(module_machine, tmp_path):
    make_hill("holdout", SCORE_EVAL, extra="final:\n  budget: 2\n")
    folder = scoring(tmp_path, 1)
    for _ in range(2):
        result = hills("eval", folder, "-H", "holdout", "--final")
        assert result.code == 0, result.output
        assert result.report["final"] is True
        assert result.report["config"][0] == {"name": "mode", "value": "holdout", "primary": True}
    spent = hills("eval", folder, "-H", "holdout", "--final")
    assert spent.code == 5, spent.output
    assert "the holdout budget of hill 'holdout' is spent: 2 of 2" in spent.err
    assert "hint: evals without --final still score" in spent.err
    assert hills("eval", folder, "-H", "holdout").code == 0
    # A look at the holdout is a look: --current cannot go around the budget.
    current = hills("eval", folder, "-H", "holdout", "--final", "--current")
    assert current.code == 5, current.output
    assert "--final needs a committed version, not --current" in current.err and "hint: " in current.err
