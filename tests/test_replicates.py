"""Replicates: `--repeat N` and `replicates:` in hill.yaml run seeds 0..N-1;
metrics, instances and side metrics are per-key medians, the report carries
the spread, and `hills rank` / `hills attempts` call a gap within it noise."""

import json

import pytest

from testing.command_fixtures import candidate, make_command_hill, run_dir, seen_env
from testing.eval_fixtures import hills, make_hill, on_machine, submission
from hills.run import replicates

# With case `seed` the verifier scores 1, 3, 5, 2, 4 for seeds 0..4, plus the
# number the solution prints.
SCORES = [1.0, 3.0, 5.0, 2.0, 4.0]

# A function evaluator whose score depends on the replicate seed.
SEEDED_EVAL = """\
    import os
    from pathlib import Path

    def eval(submission, *, final=False):
        seed = int(os.environ["HILLS_REPLICATE_SEED"])
        (Path(submission) / f"seen-{seed}.txt").write_text(str(seed))
        base = float((Path(submission) / "score.txt").read_text())
        value = base + [10.0, 30.0, 20.0, 60.0][seed]
        return {
            "passed": True,
            "metrics": [{"name": "total", "value": value, "direction": "max"},
                        {"name": "cost", "value": float(seed), "direction": "min"}],
            "config": [{"name": "mode", "value": "validation", "primary": True}],
            "details": {"seed": seed},
            "instances": {"x": value, "y": -value},
            "report": {"version": 1, "overall": {"total": value, "seed": seed}},
        }
    """


@pytest.fixture(scope="module")
def reps(module_machine):
    with on_machine(module_machine):
        return make_command_hill("reps")


@pytest.fixture(scope="module")
def reps3(module_machine):
    with on_machine(module_machine):
        return make_command_hill("reps3", extra="replicates: 3\n")


@pytest.fixture(scope="module")
def noisy(module_machine):
    with on_machine(module_machine):
        return make_command_hill("noisy", extra="replicates: 3\n")


@pytest.fixture(scope="module")
def seeded(module_machine):
    with on_machine(module_machine):
        return make_hill("seeded", SEEDED_EVAL, extra="seeds: fixed\n")


def seeded_eval(hill, folder, *args):
    result = hills("eval", folder, "-H", hill, "--json", *args)
    assert result.code == 0, result.output
    return result.report


# ---------------------------------------------------------------- the core

def test_mad_and_spread_are_exact():
    assert replicates.mad([1, 3, 5, 2, 4]) == 1
    assert replicates.mad([1, 3, 5]) == 2
    assert replicates.spread_of([1.0, 3.0, 5.0]) == {"min": 1.0, "max": 5.0, "mad": 2.0, "n": 3}


def test_aggregate_takes_per_key_medians():
    cores = [{"passed": True, "metrics": [{"name": "m", "value": v, "direction": "max"}], "config": [],
              "details": {}, "instances": {"a": v, **({"b": 1.0} if v > 1 else {})},
              "side_metrics": {"t": 10 * v}, "report": {"at": v}} for v in (1.0, 9.0, 2.0)]
    combined = replicates.aggregate(cores)
    assert combined["metrics"] == [{"name": "m", "value": 2.0, "direction": "max"}]
    assert combined["spread"] == {"m": {"min": 1.0, "max": 9.0, "mad": 1.0, "n": 3}}
    # A key missing from a replicate is the median of the replicates that have it.
    assert combined["instances"] == {"a": 2.0, "b": 1.0}
    assert combined["side_metrics"] == {"t": 20.0}
    assert combined["report"] == {"at": 2.0} and combined["report_replicate"] == 2


def test_within_noise_compares_the_gap_to_the_replicate_range():
    def report(value, low, high):
        return {"metrics": [{"name": "m", "value": value, "direction": "max"}],
                "spread": {"m": {"min": low, "max": high, "mad": 0, "n": 3}}}

    assert replicates.within_noise(report(4, 2, 6), report(3, 1, 5), "m")
    assert not replicates.within_noise(report(103, 101, 105), report(4, 2, 6), "m")
    plain = {"metrics": [{"name": "m", "value": 3.5, "direction": "max"}]}
    assert not replicates.within_noise(plain, {"metrics": [{"name": "m", "value": 3, "direction": "max"}]}, "m")
    assert replicates.within_noise(plain, report(3, 1, 5), "m")


# ---------------------------------------------------------------- command verifiers

@pytest.fixture(scope="module")
def five(reps, module_machine, tmp_path_factory):
    """One eval of the `seed` case with --repeat 5: (report, stderr)."""
    with on_machine(module_machine):
        sub = candidate(tmp_path_factory.mktemp("five") / "sub", case="seed", solution="print(0)\n")
        result = hills("eval", sub, "-H", "reps", "--repeat", "5")
        assert result.code == 0, result.output
        return result.report, result.err


@pytest.mark.slow
def test_repeat_runs_seeds_0_to_n_minus_1(five):
    report, _ = five
    assert report["replicates"] == 5
    folder = run_dir("reps", report)
    for seed in range(5):
        assert (folder / f"submission-{seed}" / f"seen-seed-{seed}.txt").read_text() == str(seed)
        env = seen_env("reps", report, f"-{seed}")["env"]
        assert env["HILLS_REPLICATE_SEED"] == env["HILLCLIMB_REPLICATE_SEED"] == str(seed)
        assert env["HILLCLIMB_TRIAL_SEED"] == str(seed)
        # Each replicate runs on its own fresh copy of the snapshot.
        assert sorted(p.name for p in (folder / f"submission-{seed}").glob("seen-seed-*")) == [
            f"seen-seed-{seed}.txt"]


def test_medians_and_spread_are_exact(five):
    report, err = five
    assert report["metrics"] == [{"name": "score", "value": 3.0, "direction": "max"}]
    assert report["spread"] == {"score": {"min": 1.0, "max": 5.0, "mad": 1.0, "n": 5}}
    assert report["instances"] == {"a": 2.0, "b": 8.0}
    assert report["side_metrics"] == {"runtime_s": 1.0}
    # The report block is the one of the replicate at the median (seed 1 scored 3).
    assert report["report_replicate"] == 1
    assert report["report"]["overall"] == {"score": 3.0, "seed": 1}
    assert "spread       score: min 1  max 5  MAD 1  over 5 replicates" in err
    assert hills("verify", run_dir("reps", report) / "report.json").code == 0


@pytest.mark.slow
def test_hill_yaml_replicates_and_repeat_overrides_it(reps3, tmp_path):
    sub = candidate(tmp_path / "sub", case="seed", solution="print(0)\n")
    report = seeded_eval("reps3", sub)
    assert report["replicates"] == 3
    assert report["metrics"][0]["value"] == 3.0
    assert report["spread"]["score"] == {"min": 1.0, "max": 5.0, "mad": 2.0, "n": 3}
    two = seeded_eval("reps3", sub, "--repeat", "2")
    assert two["replicates"] == 2 and two["metrics"][0]["value"] == 2.0
    assert two["spread"]["score"] == {"min": 1.0, "max": 3.0, "mad": 1.0, "n": 2}
    one = seeded_eval("reps3", sub, "--repeat", "1")
    assert one["replicates"] == 1 and one["metrics"][0]["value"] == 1.0
    assert "spread" not in one
    assert (run_dir("reps3", one) / "submission").is_dir()


@pytest.mark.slow
@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_repeat_must_be_a_positive_integer(reps, tmp_path, value):
    result = hills("eval", candidate(tmp_path / "sub"), "-H", "reps", "--repeat", value)
    assert result.code == 2, result.output
    assert "error: invalid value for '--repeat'" in result.err


def test_a_buggy_replicate_stops_the_eval(reps, tmp_path):
    # A solution that crashes on seed 1 only.
    sub = candidate(tmp_path / "sub", solution="import os, sys\n"
                    "if os.environ['HILLS_REPLICATE_SEED'] == '1':\n    sys.exit(5)\nprint(1)\n")
    result = hills("eval", sub, "-H", "reps", "--repeat", "3")
    assert result.code == 1, result.output
    report = result.report
    assert report["status"] == "buggy" and "exit code 5" in report["reason"]
    assert report["replicates"] == 1
    assert not (run_dir("reps", report) / "submission-2").exists()


# ---------------------------------------------------------------- noise in rank and attempts

@pytest.mark.slow
def test_rank_and_attempts_label_a_gap_within_the_spread_as_noise(noisy, tmp_path):
    low = seeded_eval("noisy", candidate(tmp_path / "low", case="seed", solution="print(0)\n"))
    high = seeded_eval("noisy", candidate(tmp_path / "high", case="seed", solution="print(1)\n"))
    assert low["metrics"][0]["value"] == 3.0 and high["metrics"][0]["value"] == 4.0
    assert high["spread"]["score"]["max"] - high["spread"]["score"]["min"] == 4.0

    attempts = json.loads(hills("attempts", "noisy", "--json").out)
    assert attempts["best"][0]["report"]["signature"] == high["signature"]
    assert attempts["best"][0]["noise"] is True
    shown = hills("attempts", "noisy")
    assert "its lead over the runner-up is within noise" in shown.out

    ranked = json.loads(hills("rank", "-H", "noisy", "--json").out)
    entries = ranked["groups"][0]["entries"]
    assert [e["report"]["signature"] for e in entries] == [high["signature"], low["signature"]]
    assert [e["noise"] for e in entries] == [False, True]
    assert "(within noise of the one above)" in hills("rank", "-H", "noisy").out

    # A gain far beyond the spread is no longer noise.
    best = seeded_eval("noisy", candidate(tmp_path / "best", case="seed", solution="print(100)\n"))
    attempts = json.loads(hills("attempts", "noisy", "--json").out)
    assert attempts["best"][0]["report"]["signature"] == best["signature"]
    assert attempts["best"][0]["noise"] is False
    assert "runner-up is within noise" not in hills("attempts", "noisy").out
    ranked = json.loads(hills("rank", "-H", "noisy", "--json").out)
    assert [e["noise"] for e in ranked["groups"][0]["entries"]] == [False, False, True]
    lines = [line for line in hills("rank", "-H", "noisy").out.splitlines() if "PASSED" in line]
    assert ["within noise" in line for line in lines] == [False, False, True]


# ---------------------------------------------------------------- function evaluators

def test_function_evaluators_get_the_seed_and_are_aggregated_the_same_way(seeded, tmp_path):
    sub = submission(tmp_path / "sub", {"score.txt": "1"})
    result = hills("eval", sub, "-H", "seeded", "--repeat", "4")
    assert result.code == 0, result.output
    report = result.report
    folder = run_dir("seeded", report)
    for seed in range(4):
        assert (folder / f"submission-{seed}" / f"seen-{seed}.txt").read_text() == str(seed)
    # totals 11, 31, 21, 61: median 26; costs 0..3: median 1.5.
    assert report["metrics"] == [{"name": "total", "value": 26.0, "direction": "max"},
                                 {"name": "cost", "value": 1.5, "direction": "min"}]
    assert report["spread"] == {"total": {"min": 11.0, "max": 61.0, "mad": 10.0, "n": 4},
                                "cost": {"min": 0.0, "max": 3.0, "mad": 1.0, "n": 4}}
    assert report["instances"] == {"x": 26.0, "y": -26.0}
    # Nearest the median 26: seed 1 (31) and seed 2 (21) tie; the first wins.
    assert report["report_replicate"] == 1 and report["report"]["overall"] == {"total": 31.0, "seed": 1}
    assert report["details"] == {"seed": 0}
