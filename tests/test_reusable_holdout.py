"""`final: {mode: reusable}` through `hills eval --final`: Thresholdout's
answer is the validation score while the splits agree (no budget spent),
a noisy release when they differ (one unit spent, `release` true), a
refusal once the releases are spent; the true holdout score appears in
neither the report, the outputs nor the attempts log, where the plain
holdout shows it."""

import json
import subprocess
import time

import pytest

from hills.base.errors import UsageError
from hills.disk import manifest
from hills.run import logbook, thresholdout

from testing.eval_fixtures import attempts_log, hills, hills_home, make_hill, on_machine
from testing.util import default_signals, kill_hard

# Validation reads score.txt, the holdout split holdout.txt; it says its
# score on stdout, which -v streams.
SPLIT_EVAL = """\
    import os
    from pathlib import Path

    def eval(submission, *, final=False, **params):
        split = os.environ["HILLS_SPLIT"]
        assert final == (split == "holdout"), (final, split)
        value = float((Path(submission) / ("holdout.txt" if final else "score.txt")).read_text())
        print(f"the {split} score is {value!r}")
        return {"passed": value >= 0, "metrics": [{"name": "total", "value": value, "direction": "max"}],
                "config": [{"name": "mode", "value": split, "primary": True}],
                "details": {} if value >= 0 else {"reason": "negative score"}}
    """

# A threshold far above the noise: whether it releases is decided by the
# scores alone, not by the draw (P(Laplace noise below -1) ~ e^-250).
REUSABLE = "final:\n  mode: reusable\n  budget: 1\n  threshold: 1.0\n  sigma: 0.001\n"
CLOSE = "0.812345678"  # the holdout score within the threshold of validation's 0.5
FAR = "7.123456789"  # the holdout score far from it


def submission(tmp_path, name, holdout, validation="0.5"):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "score.txt").write_text(validation + "\n")
    (folder / "holdout.txt").write_text(holdout + "\n")
    return folder


@pytest.fixture(scope="module")
def hills_made(module_machine):
    with on_machine(module_machine):
        make_hill("reusable", SPLIT_EVAL, extra=REUSABLE)
        make_hill("plainhold", SPLIT_EVAL, extra="final:\n  budget: 5\n")
    return module_machine


def log_text(name):
    return "".join(path.read_text() for path in (hills_home() / "state").glob(f"{name}@*/attempts.jsonl"))


def test_the_reusable_holdout_answers_releases_and_refuses(hills_made, tmp_path):
    close = submission(tmp_path, "close", CLOSE)
    far = submission(tmp_path, "far", FAR)
    # The control: the plain holdout shows the true holdout scores.
    plain = hills("eval", far, "-H", "plainhold", "--final")
    assert plain.code == 0, plain.output
    assert plain.report["metrics"][0]["value"] == float(FAR) and FAR in plain.out
    assert "release" not in plain.report and "validation" not in plain.report

    for _ in range(2):  # agreement spends nothing, however often asked
        agreed = hills("eval", close, "-H", "reusable", "--final", "-v")
        assert agreed.code == 0, agreed.output
        report = agreed.report
        assert report["final"] is True and report["release"] is False
        assert report["metrics"][0]["value"] == 0.5 == report["validation"]
        # It answers for the holdout, and ranks with holdout reports, as a plain --final does.
        assert report["config"][0] == {"name": "mode", "value": "holdout", "primary": True}
        assert "the validation score is 0.5" in agreed.err  # -v streams the first pass only
        assert CLOSE not in agreed.output
        assert "answered with the validation score" in agreed.err

    described = hills("describe", "reusable", "--json")
    assert described.code == 0, described.output
    assert (json.loads(described.out)["final_mode"], json.loads(described.out)["final_used"]) == ("reusable", 0)

    released = hills("eval", far, "-H", "reusable", "--final", "-v")
    assert released.code == 0, released.output
    report = released.report
    assert report["release"] is True and report["validation"] == 0.5
    value = report["metrics"][0]["value"]
    assert value != float(FAR) and abs(value - float(FAR)) < 0.1  # Laplace(0.001) noise on the holdout score
    assert FAR not in released.output
    assert "released" in released.err
    run_dir = hills_home() / "runs" / "reusable" / report["run_id"]
    assert json.loads((run_dir / "report.json").read_text())["signature"] == report["signature"]
    assert FAR not in (run_dir / "report.json").read_text()
    log = log_text("reusable")
    assert CLOSE not in log and FAR not in log and '"release":true' in log
    entries = [json.loads(line) for line in log.splitlines()]
    started = [entry["started"] for entry in entries if "started" in entry]
    assert len(started) == 3 and all(record["final"] and record["reusable"] for record in started)
    assert sum(map(logbook.spends_holdout, entries)) == 1
    # The holdout pass ran, on the holdout split, and its files are apart.
    assert FAR in (run_dir / "stdout-holdout.log").read_text()
    assert "the validation score is 0.5" in (run_dir / "stdout.log").read_text()

    described = hills("describe", "reusable")
    assert "reusable holdout" in described.out and "budget 1 releases of the holdout score: 1 used, 0 left" \
        in described.out, described.output
    plain_described = json.loads(hills("describe", "plainhold", "--json").out)
    assert (plain_described["final_mode"], plain_described["final_used"]) == ("plain", 1)

    spent = hills("eval", close, "-H", "reusable", "--final")
    assert spent.code == 5, spent.output
    assert "the holdout budget of hill 'reusable' is spent: 1 of 1 releases of the holdout score" in spent.err
    assert "hint: " in spent.err
    assert hills("eval", close, "-H", "reusable").code == 0  # validation still scores


def test_the_threshold_noise_is_sealed_per_version(hills_made, tmp_path):
    with on_machine(hills_made):
        make_hill("sealed", SPLIT_EVAL, extra=REUSABLE)
    answered = hills("eval", submission(tmp_path, "one", CLOSE), "-H", "sealed", "--final")
    assert answered.code == 0 and answered.report["release"] is False, answered.output
    tree = answered.report["tree_hash"]
    assert attempts_log("sealed", tree).exists()
    path = thresholdout.state_path("sealed", tree)
    from hills.base import state

    kept = state.sealed_read(path)
    assert isinstance(kept, dict) and isinstance(kept["gamma"], float)
    assert str(kept["gamma"]) not in answered.output
    # An edited file is not believed: a fresh noise is drawn and sealed.
    text = json.loads(open(path).read())
    text["value"]["gamma"] = -5.0
    open(path, "w").write(json.dumps(text))
    assert thresholdout.held_gamma("sealed", tree, 0.001) != -5.0
    assert state.sealed_read(path)["gamma"] != -5.0


def test_statuses_of_the_two_passes(hills_made, tmp_path):
    with on_machine(hills_made):
        make_hill("statuses", SPLIT_EVAL, extra=REUSABLE)
    # Failing on validation: the holdout is not run, nothing is spent.
    unfit = hills("eval", submission(tmp_path, "unfit", CLOSE, validation="-0.5"), "-H", "statuses", "--final")
    assert unfit.code == 1, unfit.output
    assert unfit.report["status"] == "failing" and unfit.report["release"] is False
    assert unfit.report["validation"] == -0.5 == unfit.report["metrics"][0]["value"]
    run_dir = hills_home() / "runs" / "statuses" / unfit.report["run_id"]
    assert (run_dir / "stdout.log").exists() and not (run_dir / "stdout-holdout.log").exists()
    # Failing on the holdout only: the status is a release, and spends the unit.
    split = hills("eval", submission(tmp_path, "split", "-3.123456789"), "-H", "statuses", "--final")
    assert split.code == 1, split.output
    report = split.report
    assert report["status"] == "failing" and report["reason"] == "negative score" and report["release"] is True
    assert report["validation"] == 0.5 and abs(report["metrics"][0]["value"] + 3.123456789) < 0.1
    assert "3.123456789" not in split.output and "3.123456789" not in log_text("statuses")
    spent = hills("eval", submission(tmp_path, "after", CLOSE), "-H", "statuses", "--final")
    assert spent.code == 5 and "is spent: 1 of 1 releases" in spent.err, spent.output


@pytest.mark.parametrize("final, problem", [
    ({"mode": "reusable"}, "key 'final.budget': expected an integer >= 0 under mode reusable"),
    ({"mode": "reusable", "budget": None}, "key 'final.budget': expected an integer >= 0 under mode reusable"),
    ({"mode": "reusable", "budget": -1}, "key 'final.budget': expected an integer >= 0, got -1"),
    ({"mode": "plain", "threshold": 0.1}, "key 'final.threshold': expected no value under mode plain"),
    ({"mode": "reusable", "budget": 2, "sigma": 0}, "key 'final.sigma': expected a number greater than 0, got 0"),
    ({"mode": "reusable", "budget": 2, "threshold": "big"}, "key 'final.threshold': expected a number greater than 0"),
    ({"mode": "thresholdout", "budget": 2}, "key 'final.mode': expected plain or reusable, got 'thresholdout'"),
])
def test_bad_final_keys_are_named(final, problem):
    raw = {"spec": 1, "name": "h", "version": "1", "evaluator": {"shape": "function"}, "final": final}
    with pytest.raises(UsageError) as caught:
        manifest.validate(raw, "hill.yaml")
    assert caught.value.exit_code == 2 and problem in caught.value.message and "'hill.yaml'" in caught.value.message


def test_the_defaults_are_the_papers_experiment():
    raw = {"spec": 1, "name": "h", "version": "1", "evaluator": {"shape": "function"}}
    assert manifest.validate(raw, "hill.yaml")["final"] == {"budget": None}
    raw["final"] = {"mode": "reusable", "budget": 3}
    assert manifest.validate(raw, "hill.yaml")["final"] == {"mode": "reusable", "budget": 3, "threshold": 0.04,
                                                            "sigma": 0.01}
    raw["final"] = {"mode": "reusable", "budget": 3, "threshold": 2.0}
    assert manifest.validate(raw, "hill.yaml")["final"]["sigma"] == 0.5


def test_only_releases_spend_a_reusable_budget():
    plain_started = {"started": {"final": True}}
    reusable_started = {"started": {"final": True, "reusable": True}}
    start = {"seq": 0, "mac": "x"}
    assert logbook.spends_holdout(plain_started) is True  # a look is a look, killed or not
    assert logbook.spends_holdout(reusable_started) is False  # killed before its answer: nothing shown
    assert logbook.spends_holdout({"report": {"final": True, "release": True}, "start": start}) is True
    assert logbook.spends_holdout({"report": {"final": True, "release": False}, "start": start}) is False
    assert logbook.spends_holdout({"report": {"final": True}, "start": start}) is False  # plain: its start counted
    assert logbook.spends_holdout({"report": {"final": True, "status": "passing"}}) is True  # before started entries


# SPLIT_EVAL, but the holdout run of a submission holding `sleep` marks its
# run folder and sleeps, to be killed there.
SLEEPY_EVAL = SPLIT_EVAL.replace(
    '        print(f"the {split} score is {value!r}")\n',
    '        print(f"the {split} score is {value!r}")\n'
    '        if final and (Path(submission) / "sleep").exists():\n'
    '            Path("ready").write_text("scored")\n'
    '            import time; time.sleep(120)\n')


def test_a_reusable_final_killed_before_its_answer_spends_nothing(hills_made, tmp_path):
    with on_machine(hills_made):
        make_hill("sleepy", SLEEPY_EVAL, timeout=60, extra=REUSABLE)
    assert "time.sleep(120)" in SLEEPY_EVAL  # the evaluator does wait to be killed
    folder = submission(tmp_path, "slow", FAR)
    (folder / "sleep").write_text("")
    process = subprocess.Popen(["hills", "eval", str(folder), "-H", "sleepy", "--final"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, preexec_fn=default_signals)
    runs = hills_home() / "runs" / "sleepy"
    deadline = time.monotonic() + 120
    while not any(runs.glob("*/ready")):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.05)
    assert FAR not in kill_hard(process)
    entries = [json.loads(line) for line in log_text("sleepy").splitlines()]
    assert len(entries) == 1 and "started" in entries[0], entries  # killed before its outcome
    assert entries[0]["started"]["reusable"] is True and sum(map(logbook.spends_holdout, entries)) == 0
    shown = hills("attempts", "sleepy")
    assert "ABANDONED (--final, reusable holdout: spends nothing without a release)" in shown.out, shown.output
    # Its one unit is still there to spend.
    released = hills("eval", submission(tmp_path, "quick", FAR), "-H", "sleepy", "--final")
    assert released.code == 0 and released.report["release"] is True, released.output
