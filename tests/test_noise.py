"""Noise that counts the items (docs/noise.md): per-item scores checked and
resampled into the signed `noise`, `within noise` and `new best` judged by
the larger of replicates and items, a deterministic evaluator without items
labelled noise unknown, and the selection bound on the best of N."""

import json
import math
import random

import pytest

from testing.eval_fixtures import hills, make_hill, on_machine, submission
from hills.base.errors import UsageError
from hills.disk import manifest
from hills.evidence.report import Malformed, normalize_core
from hills.run import command, noise, replicates
from hills.views import attempts as attempts_view

SPEC = {"metrics": [{"name": "accuracy", "direction": "max"}]}


def core(value, items=None, instances=None, name="accuracy"):
    found = {"passed": True, "metrics": [{"name": name, "value": value, "direction": "max"}], "config": [],
             "details": {}}
    if items is not None:
        found["items"] = items
    if instances is not None:
        found["instances"] = instances
    return found


def bernoulli_items(right, count=88):
    return {f"row-{index:03d}": 1.0 if index < right else 0.0 for index in range(count)}


def scored(value, items=None, spec=SPEC, cores=None):
    """A passing, official report as the pipeline leaves it, its noise attached."""
    cores = cores or [core(value, items)]
    report = {"hill": "h", "tree_hash": "t" * 40, "status": "passing", "official": True, "params": {},
              "config": [{"name": "mode", "value": "validation", "primary": True}],
              **replicates.aggregate(cores)}
    noise.attach(report, cores, spec, final=False)
    return report


# ---------------------------------------------------------------- the items' standard error

def test_item_se_is_exact_for_a_mean_and_a_sum():
    values = [1.0, 2.0, 4.0, 7.0]
    sd = math.sqrt(sum((v - 3.5) ** 2 for v in values) / 3)
    assert noise.item_se(values, "mean") == (pytest.approx(sd / 2), "exact", None)
    assert noise.item_se(values, "sum") == (pytest.approx(sd * 2), "exact", None)


def test_the_bootstrap_is_the_same_for_the_same_values_in_any_order():
    generator = random.Random(7)
    values = [generator.gauss(0, 1) for _ in range(60)]
    first = noise.item_se(values, "rms")
    assert first[1:] == ("bootstrap", noise.RESAMPLES) and first[0] > 0
    assert noise.item_se(list(reversed(values)), "rms") == first
    median = noise.item_se(values, "median")
    assert median == noise.item_se(sorted(values), "median") and median[0] > 0
    # Other values, another draw: the seed comes from the values.
    assert noise.item_se(values[:-1] + [5.0], "rms")[0] != first[0]
    # The bootstrap of a mean is near the exact figure (a check on the resampling itself).
    assert noise.bootstrap_se(values, "mean") == pytest.approx(noise.item_se(values, "mean")[0], rel=0.1)


def test_the_88_item_noise_of_an_accuracy():
    report = scored(53 / 88, {"metric": "accuracy", "aggregate": "mean", "values": bernoulli_items(53)})
    found = report["noise"]
    p = 53 / 88
    assert found["items"]["n"] == 88 and found["items"]["method"] == "exact"
    assert found["items"]["se"] == pytest.approx(math.sqrt(p * (1 - p) * 88 / 87 / 88))
    assert found["se"] == found["items"]["se"] and found["replicates"] is None
    assert found["label"] == f"noise ±{found['se']:.3g} (items)"


def test_a_deterministic_evaluator_without_items_is_noise_unknown_never_exact():
    report = scored(0.75)
    assert report["noise"]["se"] is None and report["noise"]["items"] is None
    assert report["noise"]["label"] == "noise unknown (no per-item scores)"
    assert "exact" not in json.dumps(report["noise"])
    assert noise.report_label({"metrics": [{"name": "m", "value": 1}]}) == noise.UNKNOWN


def test_instances_are_items_only_where_hill_yaml_says_how_they_aggregate():
    instances = {"a": 1.0, "b": 2.0, "c": 6.0}
    plain = scored(9.0, spec=SPEC, cores=[core(9.0, instances=instances)])
    assert plain["noise"]["items"] is None and "declares no items" in plain["noise"]["items_reason"]
    summed = {"metrics": [{"name": "accuracy", "direction": "max", "items": "sum"}]}
    report = scored(9.0, spec=summed, cores=[core(9.0, instances=instances)])
    assert report["noise"]["items"]["aggregate"] == "sum" and report["noise"]["items"]["n"] == 3


def test_items_that_do_not_aggregate_to_the_metric_give_no_item_noise_and_say_why():
    report = scored(0.5, {"metric": "accuracy", "aggregate": "mean", "values": bernoulli_items(53)})
    assert report["noise"]["items"] is None and report["noise"]["se"] is None
    assert "items' mean is 0.6022727273, not the value of metric 'accuracy', 0.5" in report["noise"]["items_reason"]
    # Within 1e-9 relative is agreement: a sum in another order differs in its last bits.
    close = scored(53 / 88 * (1 + 1e-12), {"metric": "accuracy", "aggregate": "mean", "values": bernoulli_items(53)})
    assert close["noise"]["items"] is not None


def test_replicates_and_items_the_larger_wins():
    items = {"metric": "accuracy", "aggregate": "mean", "values": bernoulli_items(44)}
    report = scored(0.5, cores=[core(0.5, items), core(0.5, items), core(0.5, items)])
    assert report["noise"]["replicates"] == {"n": 3, "sd": 0.0, "se": 0.0}
    assert report["noise"]["se"] == report["noise"]["items"]["se"] > 0
    spread = [core(v) for v in (0.1, 0.5, 0.9)]
    report = scored(0.5, cores=spread)
    assert report["noise"]["se"] == pytest.approx(0.4 / math.sqrt(3))
    assert report["noise"]["label"].endswith("(replicates)")


def test_a_holdout_report_keeps_the_noise_of_its_items_not_their_values():
    items = {"metric": "accuracy", "aggregate": "mean", "values": bernoulli_items(53)}
    cores = [core(53 / 88, items)]
    report = {**replicates.aggregate(cores)}
    noise.attach(report, cores, SPEC, final=True)
    assert "items" not in report and report["noise"]["items"]["n"] == 88


# ---------------------------------------------------------------- within noise and new best

def test_the_best_to_beat_moves_only_on_a_new_best():
    """Gains within noise leave the best where it is, so two of them that
    add up beyond noise make a new best; a re-measure of the best's own
    submission is never one, however it scores."""
    def at(right, submission):
        return {**scored(right / 88, {"metric": "accuracy", "aggregate": "mean", "values": bernoulli_items(right)}),
                "submission_hash": submission}

    rows = [{"seq": 1, "report": at(53, "blake3:a")}, {"seq": 3, "report": at(60, "blake3:b")},
            {"seq": 5, "report": at(67, "blake3:c")}]
    attempts_view.against_best(rows)
    assert [row["new_best"] for row in rows] == [True, False, True]
    assert rows[1]["noise"] is True and rows[2]["noise"] is False
    # Held against the first (53), not the within-noise 60: a gain of 14 patients.
    assert rows[2]["best_before"] == pytest.approx(53 / 88)
    again = [{"seq": 1, "report": at(53, "blake3:a")}, {"seq": 3, "report": at(80, "blake3:a")}]
    attempts_view.against_best(again)
    assert again[1]["noise"] is False and again[1]["new_best"] is False


def test_the_88_item_deterministic_case_is_within_noise_and_no_new_best():
    """Validation went from 53/88 to 54/88 right: one patient, far less
    than the items' noise (about 0.05): within noise, not a new best."""
    before = scored(53 / 88, {"metric": "accuracy", "aggregate": "mean", "values": bernoulli_items(53)})
    after = scored(54 / 88, {"metric": "accuracy", "aggregate": "mean", "values": bernoulli_items(54)})
    assert replicates.within_noise(after, before, "accuracy")
    rows = [{"seq": 1, "report": before}, {"seq": 3, "report": after}]
    attempts_view.against_best(rows)
    assert rows[0]["new_best"] is True
    assert rows[1]["noise"] is True and rows[1]["new_best"] is False
    # A gain of twenty patients is beyond it: a new best.
    far = scored(73 / 88, {"metric": "accuracy", "aggregate": "mean", "values": bernoulli_items(73)})
    rows.append({"seq": 5, "report": far})
    attempts_view.against_best(rows)
    assert rows[2]["noise"] is False and rows[2]["new_best"] is True
    # Without items the same one-patient gain is no noise hills can see: a new best, as before.
    plain = [{"seq": 1, "report": scored(53 / 88)}, {"seq": 3, "report": scored(54 / 88)}]
    attempts_view.against_best(plain)
    assert plain[1]["noise"] is False and plain[1]["new_best"] is True


def test_within_noise_adds_the_two_errors_in_quadrature():
    def report(value, se):
        return {"metrics": [{"name": "m", "value": value, "direction": "max"}],
                "noise": {"metric": "m", "se": se}}

    # 1.96 * sqrt(3^2 + 4^2) = 9.8
    assert replicates.within_noise(report(9.8, 3.0), report(0.0, 4.0), "m")
    assert not replicates.within_noise(report(9.9, 3.0), report(0.0, 4.0), "m")
    # Noise of another metric says nothing of this one.
    other = {"metrics": [{"name": "m", "value": 1.0, "direction": "max"}], "noise": {"metric": "x", "se": 9.0}}
    assert not replicates.within_noise(other, report(0.0, None), "m")


# ---------------------------------------------------------------- bad items

@pytest.mark.parametrize("items, words", [
    ([1, 2], "'items' must be an object"),
    ({"metric": "accuracy", "values": {"a": 1}, "weights": {}}, "unknown key 'weights' in 'items'"),
    ({"metric": "loss", "values": {"a": 1}}, "'items'.metric must name one of the result's metrics (accuracy)"),
    ({"metric": "accuracy", "aggregate": "max", "values": {"a": 1}},
     "'items'.aggregate must be one of mean, sum, rms, median, got 'max'"),
    ({"metric": "accuracy", "values": {}}, "'items'.values must be a non-empty object of item key to number, got "
                                           "an empty object"),
    ({"metric": "accuracy", "values": [1, 2]}, "'items'.values must be a non-empty object"),
    ({"metric": "accuracy", "values": {"a": float("nan")}}, "'items'.values['a'] must be a finite number"),
    ({"metric": "accuracy", "values": {"a": "1"}}, "'items'.values['a'] must be a finite number, got str"),
])
def test_bad_items_of_a_function_evaluator_are_refused_naming_the_key(items, words):
    with pytest.raises(Malformed) as caught:
        normalize_core(core(1.0, items))
    assert words in str(caught.value)


@pytest.mark.parametrize("items, words", [
    ({"metric": "score", "values": {"a": 1}}, "the result's 'items'.metric must name one of the result's metrics "
                                              "(bins), got 'score'"),
    ({"metric": "bins", "values": {"a": True}}, "the result's 'items'.values['a'] must be a finite number"),
    ("mean", "the result's 'items' must be an object"),
])
def test_bad_items_of_a_command_verifier_are_refused_naming_the_key(tmp_path, items, words):
    path = tmp_path / "result.json"
    path.write_text(json.dumps({"score": 1, "items": items}))
    with pytest.raises(Malformed) as caught:
        command.parse_result(str(path), "bins")
    assert words in str(caught.value)


def test_a_command_verifier_s_items_reach_the_core(tmp_path):
    path = tmp_path / "result.json"
    path.write_text(json.dumps({"score": 1.5, "items": {"metric": "bins", "values": {"a": 1, "b": 2}}}))
    parsed = command.parse_result(str(path), "bins")
    spec = {"metrics": [{"name": "bins", "direction": "min", "items": "mean"}], "params": {}}
    found = command.core_from_result(spec, {}, False, parsed)
    assert found["items"] == {"metric": "bins", "values": {"a": 1, "b": 2}}
    assert "items" not in found.get("side_metrics", {})
    assert noise.noise_of([found], spec)["items"]["aggregate"] == "mean"


@pytest.mark.parametrize("value", ["average", "max", "1", "[mean]"])
def test_a_bad_items_key_in_hill_yaml_names_the_key(value):
    text = ("spec: 1\nname: demo\nversion: '1'\nevaluator: {shape: function, entry: eval.py}\n"
            f"metrics: [{{name: m, direction: max, items: {value}}}]\n")
    with pytest.raises(UsageError) as caught:
        manifest.parse_text(text, "demo/hill.yaml", "demo")
    assert "'demo/hill.yaml': key 'metrics[0].items': expected mean, sum, rms or median" in caught.value.message
    good = text.replace(f"items: {value}", "items: rms")
    assert manifest.parse_text(good, "demo/hill.yaml", "demo")["metrics"][0]["items"] == "rms"


# ---------------------------------------------------------------- the selection bound

def test_z_n_is_the_95_point_of_the_largest_of_n_normals():
    assert noise.best_of_z(1) == pytest.approx(1.6449, abs=1e-4)
    assert noise.best_of_z(18) == pytest.approx(2.7647, abs=1e-3)
    assert noise.selection_bound(18, 1.0) == pytest.approx(noise.best_of_z(18) * math.sqrt(2))
    assert noise.selection_bound(18, None) is None


def _climb(generator, count, se, gain=0.0):
    """`count` reports of equal submissions (the last `gain` better), each
    measured with standard error `se`."""
    reports = []
    for index in range(count):
        value = generator.gauss(0.0, se) + (gain if index == count - 1 else 0.0)
        reports.append({"metrics": [{"name": "rmse", "value": value, "direction": "min"}],
                        "noise": {"metric": "rmse", "se": se}})
    return reports


def _within_rate(count, z):
    """P(max over the others minus the first <= z sqrt(2)) for N standard
    normals: the integral of phi(x) Phi(x + z sqrt(2))^(N-1), by the
    midpoint rule (the chance a climb of equal submissions is flagged)."""
    phi = lambda x: math.exp(-x * x / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda x: 0.5 * (1 + math.erf(x / math.sqrt(2)))  # noqa: E731
    step = 0.001
    return sum(phi(x) * cdf(x + z * math.sqrt(2)) ** (count - 1) * step
               for x in (-8 + step * (i + 0.5) for i in range(int(16 / step))))


def test_the_best_of_18_equal_draws_is_flagged_within_the_bound():
    generator = random.Random(2024)
    chosen = noise.selection(_climb(generator, 18, 1.0))
    assert chosen["n"] == 18 and chosen["direction"] == "min" and chosen["lead"] >= 0
    assert chosen["bound"] == pytest.approx(noise.selection_bound(18, 1.0))
    assert chosen["within"] is True
    assert chosen["label"].startswith("best of 18 within what 18 tries of equal submissions give")


def test_the_selection_flag_rate_over_many_climbs_is_within_binomial_bounds():
    generator = random.Random(11)
    trials = 2000
    flagged = sum(bool(noise.selection(_climb(generator, 18, 0.7))["within"]) for _ in range(trials))
    expected = _within_rate(18, noise.best_of_z(18))
    assert expected >= 0.95  # the bound holds at least 95% of the time (Slepian: the pairs are correlated)
    spread = 3 * math.sqrt(expected * (1 - expected) / trials)
    assert abs(flagged / trials - expected) <= spread, (flagged, expected)
    # A real gain of five standard errors of the difference is seen most of the time.
    seen = sum(not noise.selection(_climb(generator, 18, 0.7, gain=-5 * 0.7 * math.sqrt(2)))["within"]
               for _ in range(500))
    assert seen / 500 > 0.8


def test_the_selection_bound_is_unknown_without_noise():
    reports = [{"metrics": [{"name": "m", "value": float(v), "direction": "max"}]} for v in (1, 3, 2)]
    chosen = noise.selection(reports)
    assert chosen["best"] == 3.0 and chosen["lead"] == 2.0
    assert chosen["bound"] is None and chosen["within"] is None
    assert "selection bound unknown" in chosen["label"] and noise.UNKNOWN in chosen["label"]


# ---------------------------------------------------------------- end to end

ITEMS_EVAL = """\
    from pathlib import Path

    def eval(submission, *, final=False, **params):
        right = int((Path(submission) / "right.txt").read_text())
        values = {f"row-{i:03d}": 1.0 if i < right else 0.0 for i in range(88)}
        result = {
            "passed": True,
            "metrics": [{"name": "accuracy", "value": right / 88, "direction": "max"}],
            "config": [{"name": "mode", "value": "holdout" if final else "validation", "primary": True}],
            "details": {},
        }
        if (Path(submission) / "items").exists():
            result["items"] = {"metric": "accuracy", "aggregate": "mean", "values": values}
        if (Path(submission) / "bad").exists():
            result["items"] = {"metric": "accuracy", "aggregate": "mean", "values": {"row-000": "right"}}
        return result
    """


@pytest.fixture(scope="module")
def counted(module_machine):
    with on_machine(module_machine):
        return make_hill("counted", ITEMS_EVAL)


@pytest.mark.slow
def test_an_eval_signs_its_noise_and_the_views_say_it(counted, tmp_path):
    plain = hills("eval", submission(tmp_path / "plain", {"right.txt": "20"}), "-H", "counted")
    assert plain.code == 0, plain.output
    assert plain.report["noise"]["label"] == noise.UNKNOWN
    first = hills("eval", submission(tmp_path / "a", {"right.txt": "53", "items": ""}), "-H", "counted")
    second = hills("eval", submission(tmp_path / "b", {"right.txt": "54", "items": ""}), "-H", "counted")
    assert first.code == 0 and second.code == 0, second.output
    assert second.report["noise"]["items"]["n"] == 88 and second.report["noise"]["label"].endswith("(items)")
    assert "values" in second.report["items"]

    listed = json.loads(hills("attempts", "counted", "--json").out)
    rows = [row for row in listed["attempts"]]
    assert [row["new_best"] for row in rows] == [True, True, False]
    assert rows[2]["noise"] is True
    best = listed["best"][0]
    assert best["noise_label"].endswith("(items)") and best["selection"]["n"] == 3
    # 20 right to 54 is far beyond what three tries of equal submissions give.
    assert best["selection"]["within"] is False and best["selection"]["lead"] == pytest.approx(34 / 88)
    table = hills("attempts", "counted").out
    assert "~" in table and "best of 3 beyond what 3 tries of equal submissions give" in table

    ranked = json.loads(hills("rank", "-H", "counted", "--json").out)
    assert ranked["groups"][0]["selection"]["within"] is False
    assert ranked["groups"][0]["entries"][0]["noise_label"].endswith("(items)")
    assert "noise ±" in hills("rank", "-H", "counted").out

    described = json.loads(hills("describe", "counted", "--json").out)
    assert described["best"][0]["selection"]["n"] == 3 and described["best"][0]["noise_label"].endswith("(items)")

    out = tmp_path / "report.json"
    out.write_text(json.dumps(second.report))
    shown = hills("show", out).out
    assert "noise ±" in shown and "items: 88 by mean" in shown

    final = hills("eval", submission(tmp_path / "again", {"right.txt": "54", "items": ""}), "-H", "counted",
                  "--final")
    assert final.code == 0, final.output
    assert "items" not in final.report and final.report["noise"]["items"]["n"] == 88
    table = hills("attempts", "counted").out
    assert "--final #" in table and "; validation " in table and "the same submission" in table


@pytest.mark.slow
def test_an_eval_with_malformed_items_is_buggy_and_names_the_key(counted, tmp_path):
    result = hills("eval", submission(tmp_path / "bad", {"right.txt": "3", "bad": ""}), "-H", "counted")
    assert result.code == 1, result.output
    assert result.report["status"] == "buggy"
    assert "'items'.values['row-000'] must be a finite number, got str" in result.report["reason"]


# ---------------------------------------------------------------- the evaluator-contract check

def test_the_contract_check_warns_of_an_infinity_for_a_min_metric(tmp_path):
    from hills.checks import check

    (tmp_path / "eval.py").write_text("import math\n\ndef eval(submission, *, final=False):\n"
                                      "    # a comment naming float('inf') is no infinity\n"
                                      "    return {'metrics': [{'value': float('inf')}]}\n")
    spec = {"metrics": [{"name": "rmse", "direction": "min"}], "evaluator": {"shape": "function",
                                                                             "entry": "eval.py"}}
    said = check.infinite_failure(spec, str(tmp_path))
    assert said is not None and said.startswith("eval.py:5 writes an infinity")
    assert "min metric 'rmse' needs a finite value" in said
    # A max metric's failing result may be anything finite or not: a zero is the usual one.
    assert check.infinite_failure({**spec, "metrics": [{"name": "acc", "direction": "max"}]}, str(tmp_path)) is None
    (tmp_path / "eval.py").write_text("def eval(submission, *, final=False):\n    return {'value': 1e308}\n")
    assert check.infinite_failure(spec, str(tmp_path)) is None
    # A command verifier: the script and the hill's Python files it runs.
    (tmp_path / "verifier.sh").write_text('exec "$HILLS_SCORING_PYTHON" problem/score.py\n')
    (tmp_path / "score.py").write_text("import math\nscore = math.inf\n")
    command_spec = {"metrics": [{"name": "bins", "direction": "min"}],
                    "evaluator": {"shape": "command", "entry": ["bash", "problem/verifier.sh"]}}
    said = check.infinite_failure(command_spec, str(tmp_path))
    assert said is not None and said.startswith("score.py:2 writes an infinity")
