"""Inputs no evaluator would make but a person or a submission might: odd
file names, reports of any shape, text that is not valid Unicode. Each gets
a clear answer and a log line, never a crash."""

import contextlib
import json
import os
import signal

import pytest

from testing.util import new_and_commit, run_bin, run_cli
from testing.command_fixtures import command_yaml
from testing.eval_fixtures import last_report, make_hill, notes_lines, on_machine, submission, tree_of
from hills import spaces
from hills.disk import manifest
from hills.base.errors import UsageError


@pytest.mark.slow
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


@pytest.mark.slow
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
    assert refused.code == 5, refused.output
    assert "truncated" in refused.err or "broken" in refused.err
    assert sorted(os.listdir(runs)) == before  # nothing ran


@pytest.mark.slow
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
    assert second.code == 5, second.output
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


# ---------------------------------------------------------------- hostile YAML and JSON

def billion_laughs():
    """Nine levels of nine aliases each: a few hundred bytes that expand to
    nine to the ninth strings."""
    lines = ["lol0: &l0 [" + ", ".join(["lol"] * 9) + "]"]
    for level in range(1, 10):
        lines.append(f"lol{level}: &l{level} [" + ", ".join([f"*l{level - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


# The size cap is checked before anything is parsed: the large files are
# sparse (a header, then zeros), the large texts built only when used.
LARGE = 50_000_000
HOSTILE_YAML = {
    "aliases": (billion_laughs(), "alias '*l0' at line 2, column 12: YAML aliases are not allowed"),
    "deep": ("a: " + "[" * 10000 + "]" * 10000 + "\n", "nested deeper than 32 levels at line 1, column 35"),
    "large": ("description: '", "larger than 256 KiB (262144 bytes)"),
    "many-values": ("a: [" + "1, " * 20000 + "1]\n", "more than 5000 values at line 1, column 14996"),
}


def hostile_text(cases, case):
    text, _words = cases[case]
    return text + "x" * LARGE if case == "large" else text


def write_hostile(path, cases, case):
    path.write_text(cases[case][0])
    if case == "large":
        os.truncate(path, LARGE)


@contextlib.contextmanager
def safety_net(seconds=60):
    """Stop a test whose parser ran away, instead of hanging the suite. Not a
    measurement: each refusal below is bounded by construction (the size is
    checked before parsing, aliases are refused, depth and count are capped)."""
    def expired(signum, frame):
        raise TimeoutError(f"not refused within {seconds}s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("case", sorted(HOSTILE_YAML))
def test_a_hostile_hill_yaml_is_refused_naming_the_file_and_the_limit(project, case):
    words = HOSTILE_YAML[case][1]
    created = run_cli("new", "hostile")
    assert created.code == 0, created.output
    path = project / ".hills" / "hostile" / "hill.yaml"
    write_hostile(path, HOSTILE_YAML, case)
    with safety_net():
        result = run_cli("describe", "hostile")
    # A broken manifest is the hill's error, as `hills check` says it: exit 1.
    assert result.code == 1, result.output
    assert result.error_lines == [f"error: '{path}': {words}"]
    assert "hint: " in result.err


@pytest.mark.parametrize("case", sorted(HOSTILE_YAML))
def test_a_hostile_hill_yaml_from_git_is_refused_before_parsing(case):
    text, words = hostile_text(HOSTILE_YAML, case), HOSTILE_YAML[case][1]
    with safety_net(), pytest.raises(UsageError) as refused:
        manifest.parse_text(text, "hill.yaml at 0123456789ab")
    assert refused.value.message == f"'hill.yaml at 0123456789ab': {words}"


@pytest.mark.parametrize("case", sorted(HOSTILE_YAML))
def test_a_hostile_problem_yaml_is_refused_and_nothing_is_left(project, tmp_path, case):
    words = HOSTILE_YAML[case][1]
    source = tmp_path / "problem"
    source.mkdir()
    write_hostile(source / "problem.yaml", HOSTILE_YAML, case)
    for rel, content in {"description.md": "# Task\n", "verifier.sh": "#!/bin/sh\n",
                         "baseline.py": "print(1)\n"}.items():
        (source / rel).write_text(content)
    with safety_net():
        result = run_cli("new", "imported", "--from-hillclimb", source)
    assert result.code == 2, result.output
    assert result.error_lines == [f"error: '{source / 'problem.yaml'}': {words}"]
    assert "hint: " in result.err
    assert not (project / ".hills" / "imported").exists()


HOSTILE_JSON = {
    "deep": ('{"n": ' + "[" * 10000 + "]" * 10000 + "}", "params.json is nested deeper than 32 levels"),
    "deep-but-parsable": ('{"n": ' + "[" * 40 + "]" * 40 + "}", "params.json is nested deeper than 32 levels"),
    "large": ('{"n": {"type": "categorical", "choices": ["', "params.json is larger than 256 KiB (262144 bytes)"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_JSON))
def test_a_hostile_params_json_is_refused_naming_the_file_and_the_limit(tmp_path, case):
    words = HOSTILE_JSON[case][1]
    write_hostile(tmp_path / "params.json", HOSTILE_JSON, case)
    with safety_net():
        declaration, warning = spaces.load(str(tmp_path))
    assert declaration is None
    assert warning == f"{words}; scored on the submission's own defaults"


@pytest.mark.slow
def test_a_hostile_params_json_with_knobs_exits_2_before_anything_runs(committed_hill, tmp_path):
    submitted = submission(tmp_path / "sub", {"params.json": HOSTILE_JSON["deep"][0]})
    with safety_net():
        result = run_cli("eval", submitted, "-H", "circle-packing", "-k", "n=1")
    assert result.code == 2, result.output
    assert "malformed params.json: params.json is nested deeper than 32 levels" in result.err
    assert not os.path.isdir(os.path.join(os.environ["HILLS_HOME"], "runs", "circle-packing"))


def test_a_params_json_that_is_not_a_file_is_never_opened_for_reading(tmp_path):
    os.mkfifo(tmp_path / "params.json")  # reading it would block for ever
    with safety_net():
        declaration, warning = spaces.load(str(tmp_path))
    assert declaration is None
    assert warning == "params.json is not a regular file; scored on the submission's own defaults"


# ---------------------------------------------------------------- metrics other than the declared ones

# A function evaluator that reports the metrics the submission's metrics.json
# lists, on a hill whose hill.yaml declares `total` (max) then `time` (min).
LISTED_METRICS_EVAL = """\
    import json
    from pathlib import Path

    def eval(submission, *, final=False, **params):
        metrics = json.loads((Path(submission) / "metrics.json").read_text())
        return {"passed": True, "metrics": metrics, "config": [], "details": {}}
    """
DECLARED = "metrics:\n  - {name: total, direction: max}\n  - {name: time, direction: min}\n"
TOTAL, TIME = ({"name": "total", "value": 1.0, "direction": "max"},
               {"name": "time", "value": 2.0, "direction": "min"})
METRIC_CASES = {
    "renamed": ([{**TOTAL, "name": "score"}, TIME],
                "metrics[0] is 'score', but hill.yaml declares 'total' there (declared: total, time)"),
    "reordered": ([TIME, TOTAL], "metrics[0] is 'time', but hill.yaml declares 'total' there (declared: total, time)"),
    "flipped": ([TOTAL, {**TIME, "direction": "max"}],
                "metrics[1] 'time' has direction 'max', but hill.yaml declares 'min'"),
    "missing": ([TOTAL], "the result has 1 metric(s), but hill.yaml declares 2 (total, time)"),
    "extra": ([TOTAL, TIME, {**TIME, "name": "memory"}],
              "the result has 3 metric(s), but hill.yaml declares 2 (total, time)"),
    "empty": ([], "'metrics' is empty: a result reports at least one {name, value, direction}"),
}


@pytest.fixture(scope="module")
def declared_metrics_hill(module_machine):
    with on_machine(module_machine):
        return make_hill("declared", LISTED_METRICS_EVAL, extra=DECLARED)


@pytest.mark.parametrize("case", sorted(METRIC_CASES))
def test_a_result_whose_metrics_are_not_the_declared_ones_is_buggy_with_the_reason(declared_metrics_hill,
                                                                                  tmp_path, case):
    metrics, reason = METRIC_CASES[case]
    submitted = submission(tmp_path / "sub", {"metrics.json": json.dumps(metrics)})
    result = run_cli("eval", submitted, "-H", "declared")
    assert result.code == 1, result.output
    report = json.loads(result.out)
    assert report["status"] == "buggy" and report["metrics"] == []
    assert report["reason"] == f"malformed result: {reason}"
    assert last_report("declared", tree_of(declared_metrics_hill))["signature"] == report["signature"]


def test_a_result_with_the_declared_metrics_passes(declared_metrics_hill, tmp_path):
    submitted = submission(tmp_path / "sub", {"metrics.json": json.dumps([TOTAL, TIME])})
    result = run_cli("eval", submitted, "-H", "declared")
    assert result.code == 0, result.output
    assert [m["name"] for m in json.loads(result.out)["metrics"]] == ["total", "time"]


def test_an_empty_metrics_list_is_buggy_when_the_hill_declares_none(project):
    make_hill("undeclared", LISTED_METRICS_EVAL)
    submitted = submission(project / "sub", {"metrics.json": "[]"})
    result = run_cli("eval", submitted, "-H", "undeclared")
    assert result.code == 1, result.output
    assert json.loads(result.out)["reason"] == f"malformed result: {METRIC_CASES['empty'][1]}"


@pytest.mark.parametrize("metrics, got", [
    ("metrics: []\n", "list"),
    ("metrics:\n  - {name: score, direction: max}\n  - {name: runtime_s, direction: min}\n", "list"),
])
def test_a_command_hill_must_declare_exactly_one_metric(project, metrics, got):
    created = run_cli("new", "scored")
    assert created.code == 0, created.output
    path = project / ".hills" / "scored" / "hill.yaml"
    path.write_text(command_yaml("scored").replace("metrics:\n  - {name: score, direction: max}\n", metrics))
    said = (f"error: '{path}': key 'metrics': expected exactly one {{name, direction}} "
            f"for a command evaluator (its result is one score), got {got}")
    # Both with the line of hill.yaml; describe exits as `hills check` does, the eval refuses its usage.
    for command, code in ((["describe", "scored"], 1), (["eval", project, "-H", "scored", "--current"], 2)):
        result = run_cli(*command)
        assert result.code == code, result.output
        assert result.error_lines == [said + " (line 10)"]


@pytest.mark.slow
def test_a_submission_that_holds_the_machine_state_is_refused_before_anything_runs(project, monkeypatch):
    # The snapshot of such a folder would copy the run folder into itself.
    new_and_commit()
    from hills.base import state

    home = project / "work" / "state"
    monkeypatch.setenv("HILLS_HOME", str(home))
    new_and_commit("inner", "circle-packing")
    result = run_cli("eval", project / "work", "-H", "inner")
    assert result.code == 2, result.output
    assert result.error_lines[0] == (f"error: submission '{project / 'work'}' holds the machine state "
                                     f"'{os.path.realpath(home)}', where its run folder would be")
    assert not os.path.exists(os.path.join(state.home(), "runs", "inner"))
