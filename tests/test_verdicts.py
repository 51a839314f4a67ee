"""A/B verdicts: `hills eval SUB --against REF --repeat N` runs both in
turns, logs every run, and signs the paired difference, its confidence
interval, the test and the verdict. The statistics are tried on a
synthetic evaluator of known effect with injected contention: the false
"improved" rate stays within the level; run one side after the other
instead of in turns, and the same contention makes a false record."""

import json
import random

import pytest

from testing.eval_fixtures import (SCORE_EVAL, attempts_log, hills, log_entries, make_hill, on_machine, submission,
                                   tree_of)
from hills.many import verdict


def test_t_quantiles_and_p_values_match_the_tables():
    assert verdict.t_quantile(0.975, 10) == pytest.approx(2.228, abs=1e-3)
    assert verdict.t_quantile(0.975, 1) == pytest.approx(12.706, abs=1e-2)
    assert verdict.t_quantile(0.995, 30) == pytest.approx(2.750, abs=1e-3)
    assert verdict.t_two_sided_p(2.228, 10) == pytest.approx(0.05, abs=1e-3)


@pytest.mark.parametrize(("reference", "candidate", "direction", "expected"), [
    ([1.0, 1.1, 0.9, 1.0], [2.0, 2.1, 1.9, 2.05], "max", "improved"),
    ([1.0, 1.1, 0.9, 1.0], [2.0, 2.1, 1.9, 2.05], "min", "worse"),
    ([1.0, 1.1, 0.9, 1.0], [1.05, 0.95, 1.0, 1.02], "max", "indistinguishable"),
    ([5.0, 5.0, 5.0], [5.0, 5.0, 5.0], "min", "indistinguishable"),
    ([5.0, 5.0, 5.0], [4.0, 4.0, 4.0], "min", "improved"),
])
def test_decide(reference, candidate, direction, expected):
    decision = verdict.decide(reference, candidate, direction)
    assert decision.verdict == expected
    assert decision.low <= decision.mean <= decision.high


def test_decide_needs_two_pairs():
    with pytest.raises(ValueError, match="at least two pairs"):
        verdict.decide([1.0], [2.0], "max")


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
        improved += verdict.decide(reference, candidate, "min").verdict == "improved"
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


def test_an_improved_candidate_gets_a_signed_verdict_and_every_run_is_logged(scored, tmp_path):
    hill_dir, tree = scored
    reference = submission(tmp_path / "ref", {"score.txt": "7\n"})
    candidate = submission(tmp_path / "cand", {"score.txt": "8\n"})
    before = len(log_entries(attempts_log("abhill", tree))) if attempts_log("abhill", tree).exists() else 0
    result = hills("eval", candidate, "-H", "abhill", "--against", reference, "--repeat", "3",
                   "-o", tmp_path / "ab.json")
    assert result.code == 0, result.output
    report = json.loads(result.out)
    found = report["verdict"]
    assert found["verdict"] == "improved" and found["pairs"] == 3 and found["mean"] == 1.0
    assert found["candidate"]["values"] == [8.0] * 3 and found["reference"]["values"] == [7.0] * 3
    assert found["test"] == verdict.VERDICT_TEST and found["ci"] == [1.0, 1.0]
    assert report["kind"] == "ab" and report["official"] is False and report["fingerprint"]["cores"] >= 1
    assert "IMPROVED: total candidate minus reference +1" in result.err
    outcomes = [entry for entry in log_entries(attempts_log("abhill", tree))[before:] if "report" in entry]
    assert len(outcomes) == 6
    assert {entry["report"]["run_id"] for entry in outcomes} == \
        set(found["candidate"]["run_ids"]) | set(found["reference"]["run_ids"])
    checked = hills("verify", tmp_path / "ab.json")
    assert checked.code == 0, checked.output
    shown = hills("show", tmp_path / "ab.json")
    assert "  verdict      IMPROVED: total candidate minus reference +1 (95% CI +1 to +1" in shown.out, shown.output


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
