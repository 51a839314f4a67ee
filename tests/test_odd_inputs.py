"""Inputs no evaluator would make but a person or a submission might: odd
file names, reports of any shape, text that is not valid Unicode. Each gets
a clear answer and a log line, never a crash."""

import json
import os

from conftest import new_and_commit, run_bin, run_cli
from eval_fixtures import last_report, make_hill, notes_lines, submission, tree_of


def test_a_file_name_that_is_not_utf8_is_refused_by_name_and_logged(project):
    new_and_commit()
    submission = project / "odd"
    submission.mkdir()
    os.symlink("/etc/passwd", os.path.join(os.fsencode(submission), b"\xff"))
    result = run_bin("hills", "eval", submission, "-H", "circle-packing")
    assert result.code == 1, result.output
    assert result.error_lines == ["error: submission symlink '\\udcff' points outside the submission "
                                  "(to '/etc/passwd')"]
    report = json.loads(result.out)
    assert report["status"] == "refused" and "\\udcff" in report["reason"]
    attempts = json.loads(run_cli("attempts", "circle-packing", "--json").out)
    assert [a["report"]["status"] for a in attempts["attempts"]] == ["refused"]
    assert attempts["chain"]["ok"]
    assert run_bin("hills", "verify", "-", input=result.out).code == 0


def test_hills_sign_refuses_text_that_is_not_unicode(project):
    result = run_bin("hills-sign", input='{"note": "\\ud800"}')
    assert result.code == 2, result.output
    assert result.error_lines == ["error: value holds text that is not valid Unicode (a lone surrogate)"]


def test_any_signed_object_verifies_and_shows(project, tmp_path):
    odd = '{"metrics": 5, "instances": [1], "report": {"zones": 5}, "spread": 3, "config": "x"}'
    signed = run_bin("hills-sign", input=odd)
    assert signed.code == 0, signed.output
    path = tmp_path / "odd.json"
    path.write_text(signed.out)
    verified = run_bin("hills", "verify", path)
    assert verified.code == 0, verified.output
    assert verified.out.startswith("signature valid: ")
    shown = run_cli("show", str(path))
    assert shown.code == 0, shown.output
    assert shown.out.startswith("signature valid\n")


def _log_of(project):
    attempts = json.loads(run_cli("attempts", "circle-packing", "--json").out)
    return attempts["log"]


def test_a_broken_log_refuses_the_eval_before_the_evaluator_runs(project):
    new_and_commit()
    example = project / ".hills" / "circle-packing" / "examples" / "grid"
    assert run_cli("eval", str(example), "-H", "circle-packing").code == 0
    log = _log_of(project)
    with open(log, "rb") as handle:
        data = handle.read()
    with open(log, "wb") as handle:
        handle.write(data[:-20])  # a torn last line
    runs = os.path.join(os.environ["HILLS_HOME"], "runs", "circle-packing")
    before = sorted(os.listdir(runs))
    refused = run_cli("eval", str(example), "-H", "circle-packing")
    assert refused.code == 1, refused.output
    assert "truncated" in refused.err or "broken" in refused.err
    assert sorted(os.listdir(runs)) == before  # nothing ran


def test_holdout_evals_of_an_unapproved_version_count_against_the_budget(project):
    hill = new_and_commit()
    with open(hill / "hill.yaml", "a", encoding="utf-8") as handle:
        handle.write("\nfinal:\n  budget: 1\n")
    assert run_cli("pin", "circle-packing").code == 0  # approves the version without a budget
    assert run_cli("commit", "circle-packing", "-m", "budget").code == 0
    example = hill / "examples" / "grid"
    first = run_cli("eval", str(example), "-H", "circle-packing", "--final")
    assert first.code == 0, first.output
    assert json.loads(first.out)["official"] is False
    second = run_cli("eval", str(example), "-H", "circle-packing", "--final")
    assert second.code == 1, second.output
    assert "the holdout budget of hill 'circle-packing' is spent: 1 of 1" in second.err


# ---------------------------------------------------------------- a report larger than one argument

BIG_DETAILS_EVAL = """\
    def eval(submission, *, final=False, **params):
        return {"passed": True, "metrics": [{"name": "total", "value": 1.0, "direction": "max"}],
                "config": [], "details": {"log": "x" * 140000}}
    """


def test_a_report_larger_than_a_command_line_argument_is_printed_logged_and_noted(project):
    hill_dir = make_hill("big-report", BIG_DETAILS_EVAL)
    submitted = submission(project / "sub", {"score.txt": "1\n"})
    result = run_cli("eval", submitted, "-H", "big-report")
    assert result.code == 0, result.err
    report = json.loads(result.out)
    assert report["official"] and len(report["details"]["log"]) == 140000
    assert last_report("big-report", tree_of(hill_dir))["signature"] == report["signature"]
    [note] = notes_lines(hill_dir)
    assert json.loads(note)["report"]["signature"] == report["signature"]
    [version] = json.loads(run_cli("log", "big-report", "--json").out)
    assert version["evals"] == 1
