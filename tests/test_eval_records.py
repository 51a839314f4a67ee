"""The records of the eval pipeline: the frozen request, the process
outcome, and the Outcome `evaluate()` returns on every path once the
attempts log is open, with its exit code and the report it logged."""

import dataclasses

import pytest

from hills.base import errors
from hills.run import evaluate, runner
from hills.disk import hill as hill_module

from testing.eval_fixtures import (SCORE_EVAL, attempts_log, hills, last_report, log_entries, make_hill, on_machine,
                                   submission, tree_of)

HILL = "records"


@pytest.fixture(scope="module")
def records(module_machine):
    with on_machine(module_machine):
        return make_hill(HILL, SCORE_EVAL, private={"secret.txt": "kept\n"})


def request(tmp_path, value=None, **asks):
    """An EvalRequest for a submission scoring `value` (None: no score.txt,
    so the evaluator raises)."""
    files = {} if value is None else {"score.txt": f"{value}\n"}
    folder = submission(tmp_path / "sub", files)
    return evaluate.EvalRequest(hill_module.resolve(HILL), str(folder), **asks)


def logged(hill_dir):
    return last_report(HILL, tree_of(hill_dir))


def test_a_request_is_frozen_and_holds_no_caller_list():
    texts, knobs = ["n=1"], ["a=1"]
    req = evaluate.EvalRequest(object(), "sub", texts, knobs=knobs)
    with pytest.raises(dataclasses.FrozenInstanceError):
        req.final = True
    texts.append("n=2")
    knobs.append("b=2")
    assert req.param_texts == ("n=1",) and req.knobs == ("a=1",)
    values = {"a": 1}
    typed = evaluate.EvalRequest(object(), "sub", knobs=values)
    values["a"] = 2
    assert typed.knobs == {"a": 1}
    with pytest.raises(TypeError):
        typed.knobs["a"] = 3


@pytest.mark.parametrize("code, words", [
    (None, "did not exit"),
    (0, "exit code 0"),
    (-9, "killed by SIGKILL"),
    (137, "exit code 137: killed by SIGKILL"),
])
def test_a_process_outcome_is_frozen_and_says_how_it_ended(code, words):
    ended = runner.ProcessOutcome(exit_code=code)
    assert ended.describe_exit() == words
    with pytest.raises(dataclasses.FrozenInstanceError):
        ended.exit_code = 1


@pytest.mark.parametrize("value, code, status", [
    (2.5, errors.EXIT_OK, "passing"),
    (-1, errors.EXIT_NO, "failing"),
    (None, errors.EXIT_NO, "buggy"),
])
def test_a_scored_eval_returns_its_verdict_as_logged(records, tmp_path, value, code, status):
    outcome = evaluate.evaluate(request(tmp_path, value))
    assert isinstance(outcome, evaluate.Outcome)
    assert outcome.scored and not outcome.crashed and outcome.message is None and outcome.error is None
    assert outcome.exit_code == code and outcome.report["status"] == status
    assert logged(records) == outcome.report


def test_lock_drift_is_refused_before_scoring_with_exit_5_and_logged(records, tmp_path):
    secret = records / "private" / "secret.txt"
    secret.write_text("changed\n")
    try:
        outcome = evaluate.evaluate(request(tmp_path, 1))
    finally:
        secret.write_text("kept\n")
    assert outcome.exit_code == errors.EXIT_NOT_SCORED and not outcome.scored
    assert isinstance(outcome.error, errors.NotScored) and outcome.error.message == outcome.message
    assert outcome.report["status"] == "refused" and outcome.report["reason"] == outcome.message
    assert "secret.txt" in outcome.message and outcome.hint
    assert logged(records) == outcome.report


def test_ctrl_c_during_the_run_is_an_outcome_with_exit_130(records, tmp_path, monkeypatch):
    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "run", stopped)
    outcome = evaluate.evaluate(request(tmp_path, 1))
    assert outcome.exit_code == errors.EXIT_INTERRUPTED and outcome.message == "interrupted"
    assert isinstance(outcome.error, KeyboardInterrupt) and not outcome.crashed
    assert outcome.report["status"] == "interrupted"
    assert outcome.report["reason"] == "interrupted by the user (Ctrl-C)"
    assert logged(records) == outcome.report


def test_a_stop_signal_the_runner_saw_is_named_in_the_outcome(records, tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "run", lambda *args, **kwargs: runner.ProcessOutcome(interrupted=True,
                                                                                    stop_signal="SIGTERM"))
    outcome = evaluate.evaluate(request(tmp_path, 1))
    assert outcome.exit_code == errors.EXIT_INTERRUPTED
    assert outcome.report["status"] == "interrupted" and outcome.report["reason"] == "interrupted by SIGTERM"
    assert logged(records) == outcome.report


def test_a_bug_in_hills_is_logged_and_handed_back(records, tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(evaluate.snapshot, "snapshot", broken)
    outcome = evaluate.evaluate(request(tmp_path, 1))
    assert outcome.exit_code == errors.EXIT_BUG and outcome.crashed and isinstance(outcome.error, RuntimeError)
    assert outcome.report["status"] == "buggy"
    assert outcome.report["reason"] == outcome.message == "internal error in hills: RuntimeError: boom"
    assert logged(records) == outcome.report


def test_a_refusal_before_the_log_is_opened_raises_and_logs_nothing(records, tmp_path):
    before = len(log_entries(attempts_log(HILL, tree_of(records))))
    with pytest.raises(errors.UsageError, match="cannot be combined"):
        evaluate.evaluate(request(tmp_path, 1, current=True, force=True))
    assert len(log_entries(attempts_log(HILL, tree_of(records)))) == before


def test_the_command_prints_an_interrupted_report_and_exits_130(records, tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "run", lambda *args, **kwargs: runner.ProcessOutcome(interrupted=True))
    result = hills("eval", submission(tmp_path / "sub", {"score.txt": "1\n"}), "-H", HILL)
    assert result.code == errors.EXIT_INTERRUPTED
    assert result.err.strip() == "error: interrupted"
    assert result.report == logged(records) and result.report["status"] == "interrupted"


def test_the_command_hands_a_bug_to_the_funnel_and_prints_no_report(records, tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(evaluate.snapshot, "snapshot", broken)
    result = hills("eval", submission(tmp_path / "sub", {"score.txt": "1\n"}), "-H", HILL)
    assert result.code == errors.EXIT_BUG and result.out == ""
    assert "error: internal error in hills: RuntimeError: boom" in result.err
    assert logged(records)["reason"] == "internal error in hills: RuntimeError: boom"


def test_the_command_prints_a_refused_report_then_the_error(records, tmp_path):
    secret = records / "private" / "secret.txt"
    secret.write_text("changed\n")
    try:
        result = hills("eval", submission(tmp_path / "sub", {"score.txt": "1\n"}), "-H", HILL)
    finally:
        secret.write_text("kept\n")
    assert result.code == errors.EXIT_NOT_SCORED
    assert result.report == logged(records) and result.report["status"] == "refused"
    lines = result.err.splitlines()
    assert lines[0] == f"error: {result.report['reason']}" and lines[1].startswith("hint: ") and len(lines) == 2
