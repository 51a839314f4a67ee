"""The command shape: a hillclimb-style verifier run with cwd = the
submission snapshot and the HILLS_*/HILLCLIMB_* environment, whose result
file is checked key by key. Every broken result is a logged `buggy` report
with its own precise reason."""

import json
import os

import pytest

from hills.run import command
from hills.evidence.report import Malformed

from testing.command_fixtures import candidate, make_command_hill, run_dir, seen_env
from testing.eval_fixtures import attempts_log, hills, hills_home, log_entries, on_machine, tree_of

HILL = "cmd"


@pytest.fixture(scope="module")
def cmd(module_machine):
    with on_machine(module_machine):
        return make_command_hill(HILL)


def last_logged(hill_dir):
    return log_entries(attempts_log(HILL, tree_of(hill_dir)))[-1]["report"]


@pytest.mark.slow
def test_the_verifier_score_and_side_metrics(cmd, tmp_path):
    result = hills("eval", candidate(tmp_path / "sub"), "-H", HILL)
    assert result.code == 0, result.output
    report = result.report
    assert report["status"] == "passing" and report["passed"] is True
    assert report["metrics"] == [{"name": "score", "value": 42.0, "direction": "max"}]
    assert {"name": "mode", "value": "validation", "primary": True} in report["config"]
    # Finite numbers are kept; strings, booleans, NaN, infinity and objects are dropped and named.
    assert report["side_metrics"] == {"runtime_s": 0.25, "n_items": 3}
    assert report["details"]["side_metrics_dropped"] == ["flag", "huge", "label", "nested", "worse"]
    assert "PASSED" in result.err and "score=42" in result.err
    assert last_logged(cmd)["signature"] == report["signature"]


@pytest.mark.slow
def test_a_bare_number_is_a_score(cmd, tmp_path):
    result = hills("eval", candidate(tmp_path / "sub", case="bare"), "-H", HILL)
    assert result.code == 0, result.output
    assert result.report["metrics"] == [{"name": "score", "value": 7.5, "direction": "max"}]
    assert "side_metrics" not in result.report


@pytest.mark.parametrize("case, words", [
    ("nan", ["'score' is NaN", "finite number"]),
    ("inf", ["'score' is +infinity", "finite number"]),
    ("-inf", ["'score' is -infinity", "finite number"]),
    ("bool", ["'score' must be a finite number", "a boolean", "true"]),
    ("string", ["'score' must be a finite number", "a string", '"12"']),
    ("huge-int", ["'score'", "too large"]),
    ("missing", ["no 'score' key"]),
    ("unparsable", ["not valid JSON"]),
    ("empty", ["the result file is empty"]),
    ("instances-list", ["'instances' must be an object", "a list"]),
    ("list", ["the result must be a finite number", "a list"]),
    ("noresult", ["exited 0 without writing", "contract violation"]),
    # The verifier's last word on stderr is the reason it gives.
    ("exit3", ["the verifier failed (exit code 3): the verifier gives up; see stderr.log"]),
])
def test_each_bad_result_is_buggy_with_its_own_reason(cmd, tmp_path, case, words):
    result = hills("eval", candidate(tmp_path / "sub", case=case), "-H", HILL)
    assert result.code == 1, result.output
    report = result.report
    assert report["status"] == "buggy" and report["passed"] is False
    assert report["metrics"] == []
    for word in words:
        assert word in report["reason"], report["reason"]
    assert "BUGGY" in result.err
    assert last_logged(cmd)["reason"] == report["reason"]
    assert hills("verify", run_dir(HILL, report) / "report.json").code == 0


# The result parser itself, on every shape of broken result (no eval needed).
BROKEN = {
    '{"score": NaN}': "'score' is NaN; it must be a finite number",
    '{"score": Infinity}': "'score' is +infinity; it must be a finite number",
    '{"score": -Infinity}': "'score' is -infinity; it must be a finite number",
    '{"score": 1e400}': "'score' is +infinity; it must be a finite number",
    '{"score": true}': "'score' must be a finite number, got a boolean (true)",
    '{"score": "12"}': "'score' must be a finite number, got a string (\"12\")",
    '{"score": null}': "'score' must be a finite number, got null (null)",
    '{"score": [1]}': "'score' must be a finite number, got a list ([1])",
    '{"score": 1' + "0" * 400 + "}": "'score' must be a finite number, got an int too large for a float",
    '{"points": 3}': "the result has no 'score' key",
    '{"score": 1,': "the result file is not valid JSON",
    "": "the result file is empty",
    " \n\t": "the result file is empty",
    '{"score": 1, "instances": [1, 2]}': "'instances' must be an object of name to number, got a list",
    '{"score": 1, "instances": {"a": NaN}}': "instances['a'] is NaN",
    '{"score": 1, "instances": {"a": "x"}}': "instances['a'] must be a finite number, got a string",
    '{"score": 1, "report": [1]}': "'report' must be an object, got a list",
    '"7.5"': "the result must be a finite number, got a string",
    "NaN": "the result is NaN",
    "-Infinity": "the result is -infinity",
    "[1, 2]": "the result must be a finite number, got a list",
    "null": "the result must be a finite number, got null",
    "false": "the result must be a finite number, got a boolean",
}


@pytest.mark.parametrize("text", list(BROKEN), ids=range(len(BROKEN)))
def test_parse_result_names_what_is_wrong(tmp_path, text):
    path = tmp_path / "result.json"
    path.write_text(text)
    with pytest.raises(Malformed) as caught:
        command.parse_result(str(path))
    assert BROKEN[text] in str(caught.value)


def test_parse_result_messages_are_all_different(tmp_path):
    messages = set()
    for index, text in enumerate(BROKEN):
        path = tmp_path / f"result-{index}.json"
        path.write_text(text)
        with pytest.raises(Malformed) as caught:
            command.parse_result(str(path))
        messages.add(str(caught.value))
    missing = tmp_path / "absent.json"
    with pytest.raises(Malformed) as caught:
        command.parse_result(str(missing))
    assert "contract violation" in str(caught.value)
    messages.add(str(caught.value))
    # Only the same fault (1e400 and Infinity; empty and blank) reads the same.
    assert len(messages) == len(set(BROKEN.values())) + 1


def test_parse_result_keeps_finite_side_metrics_and_names_the_rest(tmp_path):
    path = tmp_path / "result.json"
    path.write_text(json.dumps({"score": 2, "a": 1, "b": 0.5, "c": "x", "d": True, "e": None, "f": [1],
                                "g": float("nan"), "h": 10 ** 400, "instances": {"i": 1},
                                "report": {"overall": {"score": float("nan")}}}))
    score, side, dropped, instances, block, _items = command.parse_result(str(path))
    assert score == 2 and side == {"a": 1, "b": 0.5} and sorted(dropped) == list("cdefgh")
    assert instances == {"i": 1}
    # One NaN inside the report block costs the block's number, not the eval.
    assert block == {"overall": {"score": None}}


def test_the_verifier_stderr_is_kept_in_the_run_folder(cmd, tmp_path):
    report = hills("eval", candidate(tmp_path / "sub", case="exit3"), "-H", HILL).report
    assert "the verifier gives up" in (run_dir(HILL, report) / "stderr.log").read_text()


def test_a_huge_side_metric_is_dropped_not_a_crash(cmd, tmp_path):
    result = hills("eval", candidate(tmp_path / "sub", case="huge-side"), "-H", HILL)
    assert result.code == 0, result.output
    assert result.report["details"]["side_metrics_dropped"] == ["big"]
    assert "side_metrics" not in result.report


# ---------------------------------------------------------------- environment and layout

def test_hills_and_hillclimb_variables_agree_with_the_contract(cmd, tmp_path, monkeypatch):
    monkeypatch.setenv("SECRET_TOKEN", "do-not-pass")
    result = hills("eval", candidate(tmp_path / "sub"), "-H", HILL)
    assert result.code == 0, result.output
    seen = seen_env(HILL, result.report)
    env = seen["env"]
    names = ("RESULT", "SUBMISSION", "SOLUTION", "SPLIT", "REPLICATE_SEED", "HILL")
    for name in names:
        assert env["HILLS_" + name] == env["HILLCLIMB_" + name], name
    # Both interpreters are confined; HILLCLIMB_PYTHON trusts a script of the hill itself.
    assert os.path.basename(env["HILLS_PYTHON"]) == "python"
    assert os.path.basename(env["HILLCLIMB_PYTHON"]) == "hillclimb-python"
    assert os.path.dirname(env["HILLS_PYTHON"]) == os.path.dirname(env["HILLCLIMB_PYTHON"])
    scoring_env = os.path.realpath(os.path.dirname(os.path.dirname(env["HILLS_SCORING_PYTHON"])))
    assert scoring_env.startswith(os.path.realpath(hills_home() / "envs" / HILL))
    assert env["HILLCLIMB_TRIAL_SEED"] == env["HILLS_REPLICATE_SEED"] == "0"
    assert env["HILLS_SPLIT"] == "validation"
    submission_dir = run_dir(HILL, result.report) / "submission"
    assert os.path.realpath(env["HILLS_SUBMISSION"]) == os.path.realpath(submission_dir)
    assert os.path.realpath(seen["cwd"]) == os.path.realpath(submission_dir)
    assert env["HILLS_SOLUTION"] == os.path.join(env["HILLS_SUBMISSION"], "solution.py")
    # The result path is fresh and outside the submission, where it cannot plant one.
    assert not os.path.realpath(env["HILLS_RESULT"]).startswith(os.path.realpath(submission_dir) + os.sep)
    # HILLS_PYTHON runs the hill's own environment; ./problem is the hill, ./data its data.
    assert os.path.realpath(seen["python_prefix"]).startswith(os.path.realpath(hills_home() / "envs" / HILL))
    assert seen["hill_manifest"] is True
    assert seen["problem"] == os.path.realpath(env["HILLS_HILL"])
    assert seen["data"] == "the hill's data\n"
    assert "HILLS_PARAMS" not in env and "HILLCLIMB_PARAMS" not in env
    assert seen["leaked"] == []


def test_final_runs_the_holdout_split(cmd, tmp_path):
    result = hills("eval", candidate(tmp_path / "sub"), "-H", HILL, "--final")
    assert result.code == 0, result.output
    env = seen_env(HILL, result.report)["env"]
    assert env["HILLS_SPLIT"] == env["HILLCLIMB_SPLIT"] == "holdout"
    assert {"name": "mode", "value": "holdout", "primary": True} in result.report["config"]


def test_a_submission_cannot_shadow_the_hills_verifier(cmd, tmp_path):
    rogue = 'echo \'{"score": 1000000000}\' > "$HILLS_RESULT"\n'
    sub = candidate(tmp_path / "sub", files={"verifier.sh": rogue, "verify.py": "raise SystemExit(0)\n"})
    result = hills("eval", sub, "-H", HILL)
    assert result.code == 0, result.output
    assert result.report["metrics"][0]["value"] == 42.0
    assert seen_env(HILL, result.report)["env"]["HILLS_RESULT"]


@pytest.mark.parametrize("name", ["problem", "data"])
def test_a_submission_holding_a_reserved_name_is_refused(cmd, tmp_path, name):
    result = hills("eval", candidate(tmp_path / "sub", files={f"{name}/verify.py": "x = 1\n"}), "-H", HILL)
    assert result.code == 1, result.output
    assert f"error: the submission holds '{name}', a name reserved for the hill" in result.err
    logged = last_logged(cmd)
    assert logged["status"] == "refused" and name in logged["reason"]
    assert result.report["signature"] == logged["signature"]


# ---------------------------------------------------------------- the result file

def test_a_result_planted_before_a_replicate_is_deleted_first(cmd, tmp_path):
    # Replicate 0 plants a score where replicate 1 writes its result; replicate
    # 1 writes nothing, so its exit 0 must be a contract violation, not 999.
    result = hills("eval", candidate(tmp_path / "sub", case="plant"), "-H", HILL, "--repeat", "2")
    assert result.code == 1, result.output
    report = result.report
    assert report["status"] == "buggy" and "contract violation" in report["reason"]
    assert 999 not in [m["value"] for m in report["metrics"]]


def test_a_result_file_shipped_in_the_submission_is_ignored(cmd, tmp_path):
    planted = '{"score": 999}'
    sub = candidate(tmp_path / "sub", case="noresult",
                    files={"result.json": planted, "result-0.json": planted, "result": planted})
    result = hills("eval", sub, "-H", HILL)
    assert result.code == 1, result.output
    assert result.report["status"] == "buggy" and "contract violation" in result.report["reason"]
