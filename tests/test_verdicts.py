"""A/B verdicts: `hills eval SUB --against REF --repeat N` runs both in
turns, logs every run as a run of the A/B, and signs the paired
difference, its interval, the test and the verdict. The statistics are
tried on a synthetic evaluator of known effect with injected contention:
the false "improved" rate stays within the level; run one side after the
other instead of in turns, and the same contention makes a false record.
tests/test_verdict_simulation.py holds the rates for the other kinds of
noise; here the runs: every one logged, none a best or ranked."""

import json
import random

import pytest

from testing.eval_fixtures import (SCORE_EVAL, attempts_log, hills, log_entries, make_hill, on_machine, submission,
                                   tree_of)
from hills.many import verdict


@pytest.mark.parametrize(("reference", "candidate", "direction", "expected"), [
    ([1.0, 1.1, 0.9, 1.0, 1.0, 0.95], [2.0, 2.1, 1.9, 2.05, 2.0, 1.9], "max", "improved"),
    ([1.0, 1.1, 0.9, 1.0, 1.0, 0.95], [2.0, 2.1, 1.9, 2.05, 2.0, 1.9], "min", "worse"),
    ([1.0, 1.1, 0.9, 1.0], [1.05, 0.95, 1.0, 1.02], "max", "indistinguishable"),
    ([5.0, 5.0, 5.0], [5.0, 5.0, 5.0], "min", "indistinguishable"),
    ([5.0] * 6, [4.0] * 6, "min", "improved"),
    # Five pairs or fewer can never tell: the smallest p of 5 is 1/16.
    ([5.0] * 5, [4.0] * 5, "min", "indistinguishable"),
])
def test_decide(reference, candidate, direction, expected):
    decision = verdict.decide(reference, candidate, direction)
    assert decision.verdict == expected and decision.unit == "pair" and decision.units == len(reference)
    assert decision.low <= decision.mean <= decision.high


def test_decide_needs_two_pairs():
    with pytest.raises(ValueError, match="at least two pairs"):
        verdict.decide([1.0], [2.0], "max")


def test_items_with_the_same_keys_make_the_item_the_unit():
    reference = verdict.Side((0.5, 0.5), ({"a": 0.4, "b": 0.6}, {"a": 0.4, "b": 0.6}))
    candidate = verdict.Side((0.6, 0.6), ({"a": 0.5, "b": 0.7}, {"a": 0.5, "b": 0.7}))
    decision = verdict.decide(reference, candidate, "max")
    assert decision.unit == "item" and decision.units == 2 and decision.mean == pytest.approx(0.1)
    other_keys = verdict.Side((0.6, 0.6), ({"a": 0.5, "c": 0.7}, {"a": 0.5, "c": 0.7}))
    assert verdict.decide(reference, other_keys, "max").unit == "pair"


def test_an_rms_metric_is_tested_on_the_items_squares():
    # RMSE over items: the difference shown is the RMSE's; the test runs on
    # each item's squared error, whose mean the RMSE is the root of.
    errors = {f"p{index}": float(index % 7) for index in range(40)}
    better = {key: value * 0.5 for key, value in errors.items()}
    rmse = (sum(value * value for value in errors.values()) / 40) ** 0.5
    reference = verdict.Side((rmse, rmse), (errors, errors), "rms")
    candidate = verdict.Side((rmse / 2, rmse / 2), (better, better), "rms")
    decision = verdict.decide(reference, candidate, "min")
    assert decision.unit == "item" and decision.mean == pytest.approx(-rmse / 2)
    assert decision.verdict == "improved" and decision.high < 0


@pytest.mark.parametrize(("report", "expected"), [
    ({"instances": {"a": 1, "b": 2.5}}, ({"a": 1.0, "b": 2.5}, "mean")),
    ({"items": {"metric": "rmse", "aggregate": "rms", "values": {"a": 1}}, "instances": {"b": 2}},
     ({"a": 1.0}, "rms")),
    ({"instances": {"a": 1, "b": float("inf")}}, None),
    ({"instances": {"a": True}}, None),
    ({"instances": {"a": 1}, "noise": {"items": None}}, None),  # they do not make the metric
    # A timing metric: contention slows every item of a run at once; the pairs count it.
    ({"instances": {"a": 1}, "metrics": [{"name": "wall"}], "timing_metrics": ["wall"]}, None),
    ({"instances": {"a": 1}, "metrics": [{"name": "score"}], "timing_metrics": ["wall"]}, ({"a": 1.0}, "mean")),
    ({}, None),
])
def test_the_items_of_a_report(report, expected):
    assert verdict.items_of(report) == expected


def _contended_runs(rng, pairs, effect, interleaved):
    """A synthetic timing evaluator (min is better): the candidate is
    `effect` faster than the reference's 1.0 s; the machine warms up over
    the run (each run about 1% faster than the one before), has 3% noise and,
    one run in five, contention that adds up to 40%."""
    runs = verdict.order(pairs) if interleaved else \
        [(pair, "reference") for pair in range(pairs)] + [(pair, "candidate") for pair in range(pairs)]
    values = {"reference": [0.0] * pairs, "candidate": [0.0] * pairs}
    for step, (pair, side) in enumerate(runs):
        base = 1.0 - (effect if side == "candidate" else 0.0)
        drift = 1.0 - 0.01 * step
        contention = 1.0 + (rng.uniform(0, 0.4) if rng.random() < 0.2 else 0.0)
        values[side][pair] = base * drift * contention * rng.gauss(1.0, 0.03)
    return values["reference"], values["candidate"]


def _rate(effect, interleaved, trials=1500, pairs=12):
    rng = random.Random(20240612)
    improved = 0
    for _ in range(trials):
        reference, candidate = _contended_runs(rng, pairs, effect, interleaved)
        # Few resamples: the interval does not enter the verdict.
        improved += verdict.decide(reference, candidate, "min", verdict.Method(resamples=20)).verdict == "improved"
    return improved / trials


def test_no_effect_under_contention_is_rarely_called_improved():
    assert _rate(0.0, interleaved=True) <= verdict.LEVEL


def test_control_one_side_after_the_other_makes_false_records():
    assert _rate(0.0, interleaved=False) > 0.5


def test_a_real_effect_is_found():
    assert _rate(0.15, interleaved=True) > 0.8


def test_runs_alternate_which_side_goes_first():
    assert verdict.order(3) == [(0, "reference"), (0, "candidate"), (1, "candidate"), (1, "reference"),
                                (2, "reference"), (2, "candidate")]


@pytest.fixture(scope="module")
def scored(module_machine):
    with on_machine(module_machine):
        hill_dir = make_hill("abhill", SCORE_EVAL)
        yield hill_dir, tree_of(hill_dir)


def test_a_better_candidate_on_three_pairs_is_signed_and_every_run_is_logged(scored, tmp_path):
    # One score a run, no items: the unit is the pair, and three equal pairs
    # can never tell (the issue's collapsed interval once signed them improved).
    hill_dir, tree = scored
    reference = submission(tmp_path / "ref", {"score.txt": "7\n"})
    candidate = submission(tmp_path / "cand", {"score.txt": "8\n"})
    before = len(log_entries(attempts_log("abhill", tree))) if attempts_log("abhill", tree).exists() else 0
    result = hills("eval", candidate, "-H", "abhill", "--against", reference, "--repeat", "3",
                   "-o", tmp_path / "ab.json")
    assert result.code == 1, result.output
    report = json.loads(result.out)
    found = report["verdict"]
    assert found["verdict"] == "indistinguishable" and found["pairs"] == 3 and found["mean"] == 1.0
    assert found["unit"] == "pair" and found["units"] == 3 and found["p_value"] == 0.25
    assert found["candidate"]["values"] == [8.0] * 3 and found["reference"]["values"] == [7.0] * 3
    assert found["test"] == verdict.VERDICT_TEST and found["ci"] == [1.0, 1.0]
    assert report["kind"] == "ab" and report["official"] is False and report["fingerprint"]["cores"] >= 1
    assert "INDISTINGUISHABLE: total candidate minus reference +1" in result.err
    assert "3 pairs can never tell at this level" in result.err
    outcomes = [entry for entry in log_entries(attempts_log("abhill", tree))[before:] if "report" in entry]
    assert len(outcomes) == 6
    assert {entry["report"]["run_id"] for entry in outcomes} == \
        set(found["candidate"]["run_ids"]) | set(found["reference"]["run_ids"])
    assert all(entry["report"]["ab"]["id"] == report["run_id"] and entry["report"]["official"] is False
               for entry in outcomes)
    assert sorted((entry["report"]["ab"]["role"], entry["report"]["ab"]["pair"]) for entry in outcomes) == \
        [(role, pair) for role in ("candidate", "reference") for pair in (1, 2, 3)]
    checked = hills("verify", tmp_path / "ab.json")
    assert checked.code == 0, checked.output
    shown = hills("show", tmp_path / "ab.json")
    assert "  verdict      INDISTINGUISHABLE: total candidate minus reference +1 (95% CI +1 to +1" in shown.out, \
        shown.output


def test_the_same_submission_on_both_sides_is_indistinguishable(scored, tmp_path):
    folder = submission(tmp_path / "same", {"score.txt": "7\n"})
    result = hills("eval", folder, "-H", "abhill", "--against", folder, "--repeat", "2")
    assert result.code == 1, result.output
    assert json.loads(result.out)["verdict"]["verdict"] == "indistinguishable"
    assert "INDISTINGUISHABLE" in result.err


@pytest.mark.parametrize(("extra", "message"), [
    ((), "--against needs --repeat N (N >= 2)"),
    (("--repeat", "1"), "--against needs --repeat N with N >= 2"),
])
def test_against_without_enough_pairs_is_a_usage_error(scored, tmp_path, extra, message):
    folder = submission(tmp_path / "s", {"score.txt": "7\n"})
    result = hills("eval", folder, "-H", "abhill", "--against", folder, *extra)
    assert result.code == 2 and message in result.err, result.output


def test_a_failing_side_stops_the_run_with_its_report(scored, tmp_path):
    good = submission(tmp_path / "good", {"score.txt": "7\n"})
    bad = submission(tmp_path / "bad", {"score.txt": "-1\n"})
    result = hills("eval", bad, "-H", "abhill", "--against", good, "--repeat", "2")
    assert result.code == 1
    assert json.loads(result.out)["status"] == "failing"
    assert "the A/B run stopped" in result.err


# A command hill whose verifier scores each of 20 items as the submission's
# scores.json says, the metric their mean, the items as `items` (their
# aggregate said: `instances` alone are a breakdown, hill.yaml(5)).
ITEMS_VERIFY = r'''
import json
import os
from pathlib import Path

scores = json.loads(Path("scores.json").read_text())
Path(os.environ["HILLS_RESULT"]).write_text(json.dumps({"score": sum(scores.values()) / len(scores),
                                                         "items": {"aggregate": "mean", "values": scores}}))
'''


def _scores(tmp_path, name, shift):
    # The items differ in difficulty; the shift is the same on each.
    return submission(tmp_path / name, {"scores.json": json.dumps({f"item{index}": index % 4 + shift
                                                                    for index in range(20)}),
                                        "solution.py": "print(1)\n"})


@pytest.fixture(scope="module")
def itemized(module_machine):
    from testing.command_fixtures import make_command_hill

    with on_machine(module_machine):
        hill_dir = make_command_hill("abitems", files={"verify.py": ITEMS_VERIFY})
        yield hill_dir, tree_of(hill_dir)


def test_the_runs_of_an_ab_are_listed_but_never_a_best_nor_ranked(itemized, tmp_path):
    hill_dir, tree = itemized
    reference, candidate = _scores(tmp_path, "ref", 0.0), _scores(tmp_path, "cand", 0.5)
    plain = hills("eval", reference, "-H", "abitems", "--json")
    assert plain.code == 0, plain.output
    ordinary = json.loads(plain.out)
    assert ordinary["official"] is True and "ab" not in ordinary
    # --summary-only: no JSON on stdout, the report in FILE, the verdict on stderr.
    result = hills("eval", candidate, "-H", "abitems", "--against", reference, "--repeat", "3", "--summary-only",
                   "-o", tmp_path / "ab.json")
    assert result.code == 0, result.output
    assert result.out == ""
    report = json.loads((tmp_path / "ab.json").read_text())
    found = report["verdict"]
    assert found["unit"] == "item" and found["units"] == 20 and found["verdict"] == "improved"
    assert found["mean"] == pytest.approx(0.5) and found["p_value"] < 0.001
    assert "IMPROVED: score candidate minus reference +0.5" in result.err and "20 items over 3 seed pairs" in result.err
    runs = set(found["candidate"]["run_ids"]) | set(found["reference"]["run_ids"])
    assert len(runs) == 6

    listed = hills("attempts", "abitems", "--json")
    assert listed.code == 0, listed.output
    attempts = json.loads(listed.out)
    logged = {row["report"]["run_id"]: row for row in attempts["attempts"]}
    assert runs <= set(logged) and ordinary["run_id"] in logged
    assert all(not logged[run]["new_best"] and logged[run]["report"]["ab"]["id"] == report["run_id"]
               for run in runs)
    assert [best["report"]["run_id"] for best in attempts["best"]] == [ordinary["run_id"]]
    assert attempts["best"][0]["candidates"] == 1
    shown = hills("attempts", "abitems")
    assert shown.out.count("(A/B run: ") == 6, shown.out
    assert "(A/B run: candidate, pair 2 of 3, A/B " + report["run_id"] in shown.out

    ranked = hills("rank", "-H", "abitems", "--json")
    assert ranked.code == 0, ranked.output
    groups = json.loads(ranked.out)
    in_rank = {entry["report"]["run_id"] for group in groups["groups"] for entry in group["entries"]}
    assert in_rank == {ordinary["run_id"]}
    apart = {row["report"]["run_id"]: row["reason"] for row in groups["apart"]}
    assert runs <= set(apart) and all("a run of an A/B" in apart[run] for run in runs)


def test_summary_only_prints_no_report_when_the_verdict_is_not_improved(scored, tmp_path):
    folder = submission(tmp_path / "same", {"score.txt": "7\n"})
    result = hills("eval", folder, "-H", "abhill", "--against", folder, "--repeat", "2", "--summary-only")
    assert result.code == 1, result.output
    assert result.out == "" and "INDISTINGUISHABLE" in result.err
