"""hills.api, the Python API of docs/api.md: the command line's own
pipeline, log and signature, called from a loop's process; refusals as the
command's errors; a caller that patches hills in its own interpreter
cannot reach the signer (with the in-process pipeline as the control)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hills import api
from testing.eval_fixtures import (SCORE_EVAL, attempts_log, hills, last_report, log_entries, make_hill,
                                   submission, tree_of)

MIN_EVAL = """\
    from pathlib import Path

    def eval(submission, *, final=False, **params):
        value = float((Path(submission) / "loss.txt").read_text())
        if value > 100:
            raise RuntimeError("loss out of reach")
        return {"passed": value < 50, "metrics": [{"name": "loss", "value": value, "direction": "min"}],
                "details": {} if value < 50 else {"reason": "loss of at least 50"}}
    """


@pytest.fixture
def score_hill(project):
    return make_hill("scored", SCORE_EVAL, params="""\
        weight: {type: int, low: 1, high: 10, default: 1}
        """)


def _log_lines(name: str, hill_dir: Path) -> list[dict]:
    path = attempts_log(name, tree_of(hill_dir), hill_dir)
    return log_entries(path) if Path(path).exists() else []


def test_evaluate_returns_the_signed_report_the_log_holds(score_hill, tmp_path):
    folder = submission(tmp_path / "sub", {"score.txt": "7\n"})
    report = api.evaluate(folder, "scored", note="seven")
    assert report.status == "passing" and report.passed and report.official
    assert (report.metric, report.direction, report.score, report.fitness) == ("total", "max", 7.0, 7.0)
    assert report.metrics == {"total": 7.0} and report.data["note"] == "seven"
    # The report is the one the pipeline logged and signed, field for field.
    assert last_report("scored", tree_of(score_hill)) == report.data
    assert json.loads(report.json()) == report.data
    found = api.verify(report)
    assert found.valid and found.trust == "same-user" and "this machine" in found.signer
    # The command line agrees about the same bytes.
    path = tmp_path / "report.json"
    path.write_text(report.json() + "\n")
    checked = hills("verify", str(path))
    assert checked.code == 0 and "signature valid" in checked.out
    assert api.verify(path).valid


def test_params_and_repeat_reach_the_pipeline(score_hill, tmp_path):
    folder = submission(tmp_path / "sub", {"score.txt": "3\n"})
    report = api.evaluate(folder, "scored", params={"weight": 4}, repeat=2)
    assert report.data["params"]["weight"] == 4
    assert len(report.data["seeds"]["replicates"]) == 2


def test_a_failing_and_a_buggy_eval_are_reports_with_their_reason(project, tmp_path):
    hill_dir = make_hill("lossy", MIN_EVAL)
    failing = api.evaluate(submission(tmp_path / "f", {"loss.txt": "60"}), "lossy")
    assert failing.status == "failing" and not failing.passed
    # A min metric: the loop that maximises sees it negated.
    assert failing.score == 60.0 and failing.direction == "min" and failing.fitness == -60.0
    assert failing.reason and "at least 50" in failing.reason
    buggy = api.evaluate(submission(tmp_path / "b", {"loss.txt": "500"}), "lossy")
    assert buggy.status == "buggy" and buggy.fitness is None
    assert buggy.reason and "loss out of reach" in buggy.reason
    # Both are logged: no survivorship through the API either.
    statuses = [entry["report"]["status"] for entry in _log_lines("lossy", hill_dir) if "report" in entry]
    assert statuses == ["failing", "buggy"]


def test_a_refusal_raises_the_commands_error_and_logs_nothing(score_hill, tmp_path):
    folder = submission(tmp_path / "sub", {"score.txt": "7\n"})
    before = len(_log_lines("scored", score_hill))
    with pytest.raises(api.HillsError) as raised:
        api.evaluate(folder, "scored", params={"weight": 11})
    assert raised.value.exit_code == 2
    assert "weight" in raised.value.message and "[1, 10]" in raised.value.message
    with pytest.raises(api.HillsError) as raised:
        api.evaluate(folder, "no-such-hill")
    assert raised.value.exit_code == 2 and "no-such-hill" in raised.value.message
    with pytest.raises(api.HillsError) as raised:
        api.evaluate(tmp_path / "missing", "scored")
    assert raised.value.exit_code == 2 and "missing" in raised.value.message
    assert len(_log_lines("scored", score_hill)) == before
    # A dirty hill is refused before scoring (exit 5), as `hills eval` refuses it.
    (score_hill / "README.md").write_text("edited\n")
    with pytest.raises(api.HillsError) as raised:
        api.evaluate(folder, "scored")
    assert raised.value.exit_code == 5 and isinstance(raised.value, api.HillsError)
    assert "uncommitted" in raised.value.message


def test_bad_arguments_are_usage_errors_naming_what_was_expected(score_hill, tmp_path):
    folder = submission(tmp_path / "sub", {"score.txt": "7\n"})
    for bad, word in (({"repeat": 0}, "repeat"), ({"params": ["weight=2"]}, "params")):
        with pytest.raises(api.HillsError) as raised:
            api.evaluate(folder, "scored", **bad)
        assert raised.value.exit_code == 2 and word in raised.value.message
    with pytest.raises(api.HillsError) as raised:
        api.verify(42)
    assert raised.value.exit_code == 2 and "verify takes" in raised.value.message


def test_describe_and_attempts_are_what_the_commands_print(score_hill, tmp_path):
    api.evaluate(submission(tmp_path / "sub", {"score.txt": "5\n"}), "scored")
    described = hills("describe", "scored", "--json")
    assert described.code == 0
    assert api.describe("scored") == json.loads(described.out)
    listed = hills("attempts", "scored", "--json")
    assert listed.code == 0
    found = api.attempts("scored")
    assert found.data == json.loads(listed.out)
    assert [row["report"]["metrics"][0]["value"] for row in found] == [5]
    assert found.chain_ok and found.best[0]["report"]["metrics"][0]["value"] == 5


def test_an_edited_report_and_a_missing_file_are_invalid(score_hill, tmp_path):
    report = api.evaluate(submission(tmp_path / "sub", {"score.txt": "7\n"}), "scored")
    edited = dict(report.data, metrics=[{"name": "total", "value": 70.0, "direction": "max"}])
    found = api.verify(edited)
    assert not found.valid and "edited" in found.message
    missing = api.verify(tmp_path / "nowhere.json")
    assert not missing.valid and "nowhere.json" in missing.message


def test_importing_the_api_loads_no_pipeline_module():
    shown = subprocess.run([sys.executable, "-c", textwrap.dedent("""\
        import sys
        import hills.api
        print(sorted(name for name in sys.modules if name.startswith("hills")))
        """)], capture_output=True, text=True, check=True)
    assert json.loads(shown.stdout.replace("'", '"')) == ["hills", "hills.api", "hills.base", "hills.base.errors"]


# ------------------------------------------- the signer is out of the caller's reach

INFLATE = """\
from hills.evidence import report as report_module

original = report_module.normalize_core

def inflated(value, declared=()):
    core = original(value, declared)
    for metric in core["metrics"]:
        metric["value"] = 1000.0
    return core

report_module.normalize_core = inflated
"""


def test_a_caller_that_patches_hills_in_its_own_process_does_not_change_the_report(score_hill, tmp_path):
    folder = submission(tmp_path / "sub", {"score.txt": "7\n"})
    namespace: dict = {}
    exec(INFLATE, namespace)  # the caller's interpreter now inflates every score it builds
    from hills.evidence import report as report_module

    try:
        assert report_module.normalize_core is namespace["inflated"]
        scored = api.evaluate(folder, "scored")
    finally:
        report_module.normalize_core = namespace["original"]
    assert scored.score == 7.0 and api.verify(scored).valid


def test_control_the_same_patch_reaches_a_pipeline_run_in_the_callers_process(score_hill, tmp_path):
    """Without the boundary (the pipeline called in the caller's own
    interpreter), the patch signs 1000 as an official, valid score."""
    from hills.disk import hill
    from hills.run import evaluate
    from hills.run.records import EvalRequest

    folder = submission(tmp_path / "sub", {"score.txt": "7\n"})
    namespace: dict = {}
    exec(INFLATE, namespace)
    from hills.evidence import report as report_module

    try:
        outcome = evaluate.evaluate(EvalRequest(hill.resolve("scored"), str(folder), ()))
    finally:
        report_module.normalize_core = namespace["original"]
    assert outcome.report["metrics"][0]["value"] == 1000.0
    assert outcome.report["official"] and api.verify(outcome.report).valid


def test_the_readme_example_runs(committed_hill):
    """The README's "From Python" block, as a reader copies it, in a
    project holding the circle-packing hill."""
    from testing import readme_examples

    code = readme_examples.example("python")
    assert committed_hill.name == "circle-packing" and ".hills/circle-packing/examples/grid" in code
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    assert first.startswith("passing sum_radii ") and second == "1 attempts"
