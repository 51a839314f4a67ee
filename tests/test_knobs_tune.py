"""Knobs a submission declares in params.json: the declaration format,
`spaces.params()` inside the hill's environment (where hills is not
installed), `-k NAME=VALUE` on `hills eval`, and `hills tune`."""

import json
import os
import sys

import pytest

from testing.command_fixtures import candidate, make_command_hill, run_dir, seen_env
from testing.eval_fixtures import attempts_log, hills, hills_home, log_entries, on_machine, tree_of
from hills import spaces

HILL = "knobs"
DECLARATION = {
    "scale": {"type": "float", "low": 0.5, "high": 2.0, "default": 1.0},
    "n": {"type": "int", "low": 1, "high": 64, "log": True, "default": 8},
    "mode": {"type": "categorical", "choices": ["a", "b"], "default": "a"},
}
# Reads its knobs the documented way and records what it saw.
KNOB_SOLUTION = """\
import json
from hills import spaces

P = spaces.params()
with open("knobs-seen.json", "w") as handle:
    json.dump({"params": P, "module": spaces.__file__}, handle)
print(P.get("scale", 1.0) * 3.0 + P.get("n", 0) + (10 if P.get("mode") == "b" else 0))
"""


@pytest.fixture(scope="module")
def knobs_hill(module_machine):
    with on_machine(module_machine):
        return make_command_hill(HILL)


def knob_sub(root, declaration=DECLARATION):
    text = declaration if isinstance(declaration, str) else json.dumps(declaration)
    return candidate(root, solution=KNOB_SOLUTION, files={"params.json": text})


def seen_knobs(report):
    return json.loads((run_dir(HILL, report) / "submission" / "knobs-seen.json").read_text())


# ---------------------------------------------------------------- the declaration

def test_validate_types_the_defaults_and_keeps_the_space():
    checked = spaces.validate({**DECLARATION, "lr": {"type": "float", "low": 1e-4, "high": 0.1, "log": True,
                                                     "default": 0.01},
                               "k": {"type": "int", "low": 0, "high": 10, "step": 2, "default": 4},
                               "w": {"type": "float", "low": 0, "high": 1, "step": 0.25, "default": 1}})
    assert checked["n"] == {"type": "int", "low": 1, "high": 64, "log": True, "default": 8}
    assert checked["k"]["step"] == 2 and checked["w"]["default"] == 1.0
    assert isinstance(checked["w"]["default"], float)
    assert checked["mode"] == {"type": "categorical", "choices": ["a", "b"], "default": "a"}
    assert spaces.defaults(checked) == {"scale": 1.0, "n": 8, "mode": "a", "lr": 0.01, "k": 4, "w": 1.0}


@pytest.mark.parametrize("declaration, words", [
    ([], "expected a non-empty JSON object"),
    ({}, "expected a non-empty JSON object"),
    ({"x": 3}, "knob 'x': expected an object"),
    ({"x": {"type": "bool", "default": True}}, "key 'type': expected int, float or categorical"),
    ({"x": {"type": "int", "low": 1, "high": 2}}, "knob 'x': missing key 'default'"),
    ({"x": {"type": "int", "low": 1, "high": 2, "default": 1, "choices": [1]}}, "unknown key 'choices'"),
    ({"x": {"type": "int", "low": 3, "high": 2, "default": 2}}, "key 'low' (3) is above 'high' (2)"),
    ({"x": {"type": "int", "low": 0.5, "high": 2, "default": 1}}, "expected integers for an int knob"),
    ({"x": {"type": "float", "low": "0", "high": 2, "default": 1}}, "expected finite numbers"),
    ({"x": {"type": "float", "low": 0, "high": 2, "log": True, "default": 1}}, "a log-scaled knob needs low > 0"),
    ({"x": {"type": "float", "low": 1, "high": 2, "log": "yes", "default": 1}}, "key 'log': expected true or false"),
    ({"x": {"type": "int", "low": 1, "high": 8, "step": 0, "default": 1}}, "key 'step': expected a positive int"),
    ({"x": {"type": "int", "low": 1, "high": 8, "step": 1.5, "default": 1}}, "key 'step': expected a positive int"),
    ({"x": {"type": "float", "low": 1, "high": 8, "step": 1, "log": True, "default": 1}}, "cannot be combined"),
    ({"x": {"type": "int", "low": 1, "high": 8, "default": 9}}, "key 'default': knob 'x' must be in [1, 8], got 9"),
    ({"x": {"type": "categorical", "choices": [], "default": 1}}, "key 'choices': expected a non-empty list"),
    ({"x": {"type": "categorical", "choices": ["a"], "default": "b"}}, "key 'default': knob 'x' must be one of"),
])
def test_a_malformed_declaration_names_the_knob_and_key(declaration, words):
    with pytest.raises(spaces.DeclarationError) as caught:
        spaces.validate(declaration)
    assert words in str(caught.value)
    assert str(caught.value).startswith("params.json")


@pytest.mark.parametrize("name, value, words", [
    ("scale", 2.5, "knob 'scale' must be in [0.5, 2.0], got 2.5"),
    ("scale", "x", "knob 'scale' must be a float in [0.5, 2.0], got 'x'"),
    ("scale", float("nan"), "must be a float in [0.5, 2.0]"),
    ("n", 0, "knob 'n' must be in [1, 64], got 0"),
    ("n", 2.5, "knob 'n' must be an int in [1, 64], got 2.5"),
    ("n", True, "knob 'n' must be an int in [1, 64], got True"),
    ("mode", "c", "knob 'mode' must be one of ['a', 'b'], got 'c'"),
    ("depth", 1, "unknown knob 'depth' (declared: mode, n, scale)"),
])
def test_check_value_refuses_with_the_range(name, value, words):
    with pytest.raises(spaces.ValueRefused) as caught:
        spaces.check_value(spaces.validate(DECLARATION), name, value)
    assert words in str(caught.value)


def test_check_value_types_what_fits():
    declaration = spaces.validate(DECLARATION)
    assert spaces.check_value(declaration, "n", 4.0) == 4 and isinstance(spaces.check_value(declaration, "n", 4.0), int)
    assert spaces.check_value(declaration, "scale", 1) == 1.0
    assert spaces.check_value(declaration, "mode", "b") == "b"


def test_a_categorical_value_is_the_choice_itself():
    declaration = spaces.validate({"flag": {"type": "categorical", "choices": [True, False], "default": True},
                                   "k": {"type": "categorical", "choices": [1, 2, "3"], "default": 1}})
    with pytest.raises(spaces.ValueRefused):
        spaces.check_value(declaration, "flag", 1)  # 1 == True in Python, but it is not the choice
    with pytest.raises(spaces.ValueRefused):
        spaces.check_value(declaration, "k", True)
    assert spaces.check_value(declaration, "flag", False) is False
    assert type(spaces.check_value(declaration, "k", 2.0)) is int


def test_resolve_knobs_reads_json_but_keeps_text_choices(tmp_path):
    from types import SimpleNamespace

    from hills.run import plan

    (tmp_path / "params.json").write_text(json.dumps({
        "level": {"type": "categorical", "choices": ["1", "2", "high"], "default": "1"},
        "n": {"type": "int", "low": 1, "high": 9, "default": 2}}))
    request = SimpleNamespace(submission=str(tmp_path), knobs=["level=2", "n=3"])
    _, trial, warning = plan.resolve_knobs(request)
    assert trial == {"level": "2", "n": 3} and warning is None
    request.knobs = ["level=high"]
    assert plan.resolve_knobs(request)[1] == {"level": "high", "n": 2}


def test_sample_stays_on_a_step_grid_that_does_not_reach_high():
    import random

    declaration = spaces.validate({"k": {"type": "int", "low": 0, "high": 9, "step": 2, "default": 0}})
    values = {spaces.sample(declaration, random.Random(seed))["k"] for seed in range(200)}
    assert values == {0, 2, 4, 6, 8}


def test_sample_stays_in_the_space():
    import random

    declaration = spaces.validate({**DECLARATION,
                                   "k": {"type": "int", "low": 0, "high": 10, "step": 2, "default": 4},
                                   "lr": {"type": "float", "low": 1e-4, "high": 0.1, "log": True,
                                          "default": 0.01}})
    rng = random.Random(7)
    points = [spaces.sample(declaration, rng) for _ in range(300)]
    for point in points:
        for name, value in point.items():
            assert spaces.check_value(declaration, name, value) == value
        assert point["k"] % 2 == 0 and isinstance(point["n"], int)
    # Log-uniform: about half the draws fall below the geometric middle.
    below = sum(1 for point in points if point["lr"] < (1e-4 * 0.1) ** 0.5)
    assert 100 < below < 200
    assert {point["mode"] for point in points} == {"a", "b"}


def test_params_reads_the_trial_else_the_declared_defaults(tmp_path, monkeypatch):
    (tmp_path / "params.json").write_text(json.dumps(DECLARATION))
    monkeypatch.delenv("HILLS_PARAMS", raising=False)
    monkeypatch.setenv("HILLS_SUBMISSION", str(tmp_path))
    assert spaces.params() == {"scale": 1.0, "n": 8, "mode": "a"}
    monkeypatch.setenv("HILLS_PARAMS", json.dumps({"scale": 2.0, "n": 3, "mode": "b"}))
    assert spaces.params() == {"scale": 2.0, "n": 3, "mode": "b"}
    monkeypatch.delenv("HILLS_PARAMS")
    (tmp_path / "params.json").write_text("{broken")
    assert spaces.params() == {}
    assert "not valid JSON" in spaces.load(str(tmp_path))[1]


# ---------------------------------------------------------------- hills eval -k

@pytest.mark.slow
def test_defaults_are_the_trial_without_knobs(knobs_hill, tmp_path):
    result = hills("eval", knob_sub(tmp_path / "sub"), "-H", HILL)
    assert result.code == 0, result.output
    report = result.report
    assert report["trial"] == {"scale": 1.0, "n": 8, "mode": "a"}
    assert report["metrics"][0]["value"] == 11.0
    seen = seen_knobs(report)
    assert seen["params"] == report["trial"]
    # `from hills import spaces` came from the tool's SDK folder, not an install in the hill env.
    assert os.path.realpath(seen["module"]).startswith(os.path.realpath(hills_home() / "sdk"))


def test_knobs_reach_the_submission_through_spaces_params(knobs_hill, tmp_path):
    result = hills("eval", knob_sub(tmp_path / "sub"), "-H", HILL, "-k", "scale=1.5", "--knob", "mode=b")
    assert result.code == 0, result.output
    report = result.report
    assert report["trial"] == {"scale": 1.5, "n": 8, "mode": "b"}
    assert report["metrics"][0]["value"] == 22.5
    assert seen_knobs(report)["params"] == report["trial"]
    env = seen_env(HILL, report)["env"]
    assert json.loads(env["HILLS_PARAMS"]) == report["trial"]
    assert env["HILLCLIMB_PARAMS"] == env["HILLS_PARAMS"]
    assert "knobs        scale=1.5  n=8  mode=b" in result.err


@pytest.mark.slow
@pytest.mark.parametrize("knob, words", [
    ("scale=5", "refused: knob 'scale' must be in [0.5, 2.0], got 5"),
    ("n=0", "refused: knob 'n' must be in [1, 64], got 0"),
    ("n=2.5", "refused: knob 'n' must be an int in [1, 64], got 2.5"),
    ("mode=c", "refused: knob 'mode' must be one of ['a', 'b'], got 'c'"),
    ("depth=3", "refused: unknown knob 'depth' (declared: mode, n, scale)"),
    ("scale", "--knob 'scale': expected NAME=VALUE"),
])
def test_a_knob_outside_its_range_is_refused_with_the_range(knobs_hill, tmp_path, knob, words):
    before = len(log_entries(attempts_log(HILL, tree_of(knobs_hill))))
    result = hills("eval", knob_sub(tmp_path / "sub"), "-H", HILL, "-k", knob)
    assert result.code == 2, result.output
    assert f"error: {words}" in result.err
    assert "\nhint: " in result.err
    assert result.out == ""
    assert len(log_entries(attempts_log(HILL, tree_of(knobs_hill)))) == before


def test_a_malformed_declaration_is_scored_on_the_defaults_with_a_warning(knobs_hill, tmp_path):
    broken = {"scale": {"type": "float", "low": 3, "high": 2, "default": 1.0}}
    result = hills("eval", knob_sub(tmp_path / "sub", broken), "-H", HILL)
    assert result.code == 0, result.output
    report = result.report
    assert report["status"] == "passing" and "trial" not in report
    # The solution's own defaults (scale 1.0, no n, mode a).
    assert report["metrics"][0]["value"] == 3.0
    assert report["warnings"] == ["params.json: knob 'scale': key 'low' (3) is above 'high' (2); "
                                  "scored on the submission's own defaults"]
    assert "warning      params.json: knob 'scale'" in result.err
    knobbed = hills("eval", knob_sub(tmp_path / "sub2", "{not json"), "-H", HILL, "-k", "scale=1")
    assert knobbed.code == 2 and "malformed params.json" in knobbed.err and "not valid JSON" in knobbed.err


def test_knobs_without_a_declaration_are_refused(knobs_hill, tmp_path):
    result = hills("eval", candidate(tmp_path / "sub"), "-H", HILL, "-k", "scale=1")
    assert result.code == 2, result.output
    assert "has no params.json declaring knobs" in result.err


# ---------------------------------------------------------------- hills tune

@pytest.mark.slow
def test_tune_logs_every_trial_and_writes_the_best_params(knobs_hill, tmp_path):
    sub = knob_sub(tmp_path / "cand")
    log = attempts_log(HILL, tree_of(knobs_hill))
    before = len(log_entries(log)) if log.exists() else 0
    result = hills("tune", sub, "-H", HILL, "--budget", "5", "--parallel", "2", "--seed", "3")
    assert result.code == 0, result.output
    entries = log_entries(log)[before:]
    assert len(entries) == 10  # each trial's started entry, then its outcome
    trials = [entry["report"] for entry in entries if "report" in entry]
    assert len(trials) == 5
    assert all(report["status"] == "passing" and report["official"] for report in trials)
    assert {"scale": 1.0, "n": 8, "mode": "a"} in [report["trial"] for report in trials]
    best = max(trials, key=lambda report: report["metrics"][0]["value"])
    written = tmp_path / "cand.best-params.json"
    assert json.loads(written.read_text()) == best["trial"]
    assert f"written to {written}" in result.out
    assert result.out.startswith("best trial ")
    assert f"score={best['metrics'][0]['value']:.6g} (max)" in result.out
    assert result.err.count("passing") == 5 and "trial   0" in result.err
    assert hills("attempts", HILL).code == 0


def test_tune_json_names_each_trial_and_the_best(knobs_hill, tmp_path):
    sub = knob_sub(tmp_path / "cand")
    result = hills("tune", sub, "-H", HILL, "--budget", "2", "--json")
    assert result.code == 0, result.output
    data = json.loads(result.out)
    assert data["tuner"] == "random" and data["budget"] == 2
    assert [trial["trial"] for trial in data["trials"]] == [0, 1]
    assert data["trials"][0]["knobs"] == {"scale": 1.0, "n": 8, "mode": "a"}
    assert data["best_params_file"] == str(tmp_path / "cand.best-params.json")
    best_value = max(trial["metrics"][0]["value"] for trial in data["trials"])
    assert data["best"]["metrics"][0]["value"] == best_value
    assert data["best"]["report"]["signature"].startswith("sshsig:")


def test_tune_spends_no_trial_when_the_hill_allows_no_score(knobs_hill, tmp_path):
    readme = knobs_hill / "README.md"
    original = readme.read_text()
    log = attempts_log(HILL, tree_of(knobs_hill))
    before = len(log_entries(log)) if log.exists() else 0
    readme.write_text(original + "\nAn uncommitted line.\n")
    try:
        result = hills("tune", knob_sub(tmp_path / "cand"), "-H", HILL, "--budget", "5")
    finally:
        readme.write_text(original)
    assert result.code == 5, result.output
    assert result.error_lines == [f"error: hill '{HILL}' has uncommitted changes (README.md)"]
    assert "hint: commit them" in result.err and "trial " not in result.err
    assert (len(log_entries(log)) if log.exists() else 0) == before
    assert not (tmp_path / "cand.best-params.json").exists()


def test_tune_needs_a_declaration(knobs_hill, tmp_path):
    result = hills("tune", candidate(tmp_path / "sub"), "-H", HILL, "--budget", "2")
    assert result.code == 2, result.output
    assert "has no params.json declaring knobs" in result.err and "hint: declare knobs" in result.err


@pytest.mark.parametrize("args, words", [
    (["--budget", "0"], "--budget expects at least 1 trial, got 0"),
    (["--budget", "2", "--parallel", "0"], "--parallel expects at least 1, got 0"),
])
def test_tune_refuses_bad_counts(knobs_hill, tmp_path, args, words):
    result = hills("tune", knob_sub(tmp_path / "sub"), "-H", HILL, *args)
    assert result.code == 2, result.output
    assert words in result.err


def test_tune_with_optuna_missing_is_a_clear_environment_error(knobs_hill, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna", None)  # as if not installed, installed or not
    log = attempts_log(HILL, tree_of(knobs_hill))
    before = len(log_entries(log)) if log.exists() else 0
    result = hills("tune", knob_sub(tmp_path / "sub"), "-H", HILL, "--budget", "2", "--tuner", "optuna")
    assert result.code == 4, result.output
    assert "error: the optuna tuner needs optuna, which is not installed" in result.err
    assert "hint: pip install 'hills[optuna]'" in result.err
    after = len(log_entries(log)) if log.exists() else 0
    assert after == before, "no trial is spent before the tuner is known to work"


@pytest.mark.slow
def test_tune_with_optuna_logs_every_trial_and_keeps_the_best(knobs_hill, tmp_path):
    pytest.importorskip("optuna")
    log = attempts_log(HILL, tree_of(knobs_hill))
    before = len(log_entries(log)) if log.exists() else 0
    submission = knob_sub(tmp_path / "sub")
    result = hills("tune", submission, "-H", HILL, "--budget", "4", "--tuner", "optuna", "--seed", "7", "--json")
    assert result.code == 0, result.output
    summary = json.loads(result.out)
    assert summary["tuner"] == "optuna" and len(summary["trials"]) == 4
    assert len(log_entries(log)) == before + 8  # each trial's started entry, then its outcome
    best = summary["best"]
    passing = [t for t in summary["trials"] if t["status"] == "passing"]
    direction = best["metrics"][0]["direction"]
    values = [t["metrics"][0]["value"] for t in passing]
    assert best["metrics"][0]["value"] == (max(values) if direction == "max" else min(values))
    with open(summary["best_params_file"], encoding="utf-8") as handle:
        assert json.load(handle) == best["knobs"]
