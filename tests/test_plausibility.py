"""Params cannot buy score, and a score past what is possible does not rank.

Every param but the neutral ones decides which reports compare, so a report
scored with a loosened param ranks only with reports that used the same
values; a passing result past a metric's bounds (hill.yaml `floor`,
`ceiling`, `best_known` with `max_gain`, scoped by `for_params`) is
`implausible`: signed, logged, never ranked, exit 1. The circle-packing
template's own hole is replayed: `-p tolerance=0.001` with every radius
grown by 4e-4."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from testing.util import new_and_commit, run_cli
from testing.eval_fixtures import GRID_EXAMPLE, REPO_ROOT, hills, submission
from hills.disk import manifest
from hills.evidence import report, trust
from hills.views import rank
from hills.base.errors import UsageError

# A valid packing of 26 circles, summing to about 2.62945 (a local optimum,
# short of the best known 2.6359830849).
NEAR_RECORD = json.loads((Path(__file__).parent / "fixtures" / "circle-packing" / "near-record-26.json").read_text())
GROWTH = 4e-4
LOOSE = "tolerance=0.001"


def grown(circles: list[list[float]], by: float = GROWTH) -> list[list[float]]:
    return [[x, y, r + by] for x, y, r in circles]


def packing(root: Path, circles: list[list[float]]) -> Path:
    return submission(root, {"circles.json": json.dumps(circles)})


def sum_of(result_report: dict[str, Any]) -> float:
    return result_report["metrics"][0]["value"]


# ---------------------------------------------------------------- hill.yaml's new keys

VALID: dict[str, Any] = {
    "spec": 1, "name": "demo", "version": "1", "evaluator": {"shape": "function"},
    "params": {"n": {"type": "int", "default": 26, "primary": True, "low": 1, "high": 100},
               "seed": {"type": "int", "default": 0, "neutral": True}},
    "metrics": [{"name": "sum_radii", "direction": "max", "best_known": 2.6359830849, "max_gain": 1e-6,
                 "for_params": {"n": 26}}],
}


def validated(edit: Any = None) -> dict[str, Any]:
    raw = copy.deepcopy(VALID)
    if edit is not None:
        edit(raw)
    return manifest.validate(raw, "demo/hill.yaml", "demo")


def metric(raw: dict[str, Any]) -> dict[str, Any]:
    return raw["metrics"][0]


def test_valid_bounds_and_a_neutral_param_are_kept() -> None:
    spec = validated()
    assert spec["params"]["seed"]["neutral"] is True and spec["params"]["n"]["neutral"] is False
    assert spec["metrics"][0] == {"name": "sum_radii", "direction": "max", "best_known": 2.6359830849,
                                  "max_gain": 1e-6, "for_params": {"n": 26}}


BAD_KEYS = [
    ("floor-not-a-number", lambda raw: metric(raw).update(floor="low"),
     "key 'metrics[0].floor': expected a finite number, got 'low'"),
    ("ceiling-a-boolean", lambda raw: metric(raw).update(ceiling=True),
     "key 'metrics[0].ceiling': expected a finite number, got true"),
    ("floor-above-ceiling", lambda raw: metric(raw).update(floor=3, ceiling=2),
     "key 'metrics[0].floor': expected a value not above ceiling (2), got 3"),
    ("best-known-above-ceiling", lambda raw: metric(raw).update(ceiling=2.5),
     "key 'metrics[0].best_known': expected a value not above ceiling (2.5), got 2.6359830849"),
    ("best-known-below-floor", lambda raw: metric(raw).update(floor=3),
     "key 'metrics[0].best_known': expected a value not below floor (3), got 2.6359830849"),
    ("negative-max-gain", lambda raw: metric(raw).update(max_gain=-1),
     "key 'metrics[0].max_gain': expected a finite number >= 0, got -1"),
    ("max-gain-alone", lambda raw: metric(raw).pop("best_known"),
     "key 'metrics[0].max_gain': expected best_known beside it"),
    ("for-params-not-a-mapping", lambda raw: metric(raw).update(for_params=26),
     "key 'metrics[0].for_params': expected a non-empty mapping of param name to value, got 26"),
    ("for-params-unknown-param", lambda raw: metric(raw).update(for_params={"m": 26}),
     "key 'metrics[0].for_params': expected one of the hill's params (n, seed), got 'm'"),
    ("for-params-value-out-of-bounds", lambda raw: metric(raw).update(for_params={"n": 500}),
     "key 'metrics[0].for_params.n': expected a valid value (param 'n' must be in [1, 100], got 500), got 500"),
    ("for-params-without-bounds", lambda raw: raw.update(metrics=[{"name": "s", "direction": "max",
                                                                   "for_params": {"n": 26}}]),
     "key 'metrics[0].for_params': expected floor, ceiling or best_known beside it"),
    ("neutral-not-a-boolean", lambda raw: raw["params"]["seed"].update(neutral="yes"),
     "key 'params.seed.neutral': expected true or false, got 'yes'"),
    ("neutral-and-primary", lambda raw: raw["params"]["n"].update(neutral=True),
     "key 'params.n.neutral': expected false for a primary param"),
]


@pytest.mark.parametrize("case, edit, words", BAD_KEYS, ids=[case for case, _, _ in BAD_KEYS])
def test_a_bad_bound_or_neutral_names_the_key_and_what_was_expected(case: str, edit: Any, words: str) -> None:
    with pytest.raises(UsageError) as caught:
        validated(edit)
    assert caught.value.message.startswith("'demo/hill.yaml': key 'params.") or \
        caught.value.message.startswith("'demo/hill.yaml': key 'metrics[0].")
    assert words in caught.value.message
    assert caught.value.exit_code == 2


@pytest.mark.slow
def test_hills_check_fails_a_bad_bound_with_exit_1(project: Path) -> None:
    hill_dir = new_and_commit("packing")
    path = hill_dir / "hill.yaml"
    path.write_text(path.read_text().replace("max_gain: 1.0e-6", "max_gain: -0.5"))
    checked = run_cli("check", "packing")
    assert checked.code == 1, checked.output
    fail = [line for line in checked.out.splitlines() if line.strip().startswith("FAIL ")]
    assert len(fail) == 1 and "key 'metrics[0].max_gain': expected a finite number >= 0, got -0.5" in fail[0]


# ---------------------------------------------------------------- the judgement, as a pure function

BOUNDS = [{"name": "score", "direction": "max", "floor": 0.0, "ceiling": 10.0},
          {"name": "loss", "direction": "min", "best_known": 1.0, "max_gain": 0.1, "for_params": {"n": 26}}]


@pytest.mark.parametrize("score, loss, params, words", [
    (5.0, 1.0, {"n": 26}, None),
    (10.0, 0.9, {"n": 26}, None),  # on the limits: plausible
    (-0.5, 1.0, {"n": 26}, "score -0.5 is below its floor 0.0 (hill.yaml metrics[0])"),
    (10.5, 1.0, {"n": 26}, "score 10.5 is above its ceiling 10.0 (hill.yaml metrics[0])"),
    (5.0, 0.5, {"n": 26}, "loss 0.5 beats best_known 1.0 by 0.5, more than max_gain 0.1 (hill.yaml metrics[1] "
                          "for n=26)"),
    (5.0, 0.5, {"n": 27}, None),  # the best known holds for n=26 only
])
def test_implausibility(score: float, loss: float, params: dict[str, Any], words: str | None) -> None:
    metrics = [{"name": "score", "value": score, "direction": "max"},
               {"name": "loss", "value": loss, "direction": "min"}]
    assert report.implausibility(metrics, BOUNDS, params) == words


def test_judge_marks_only_a_passing_report() -> None:
    spec = {"params": {"n": {"type": "int", "default": 26}, "seed": {"type": "int", "default": 0, "neutral": True}},
            "metrics": BOUNDS}
    passing = {"status": "passing", "passed": True, "reason": None, "params": {"n": 26, "seed": 3},
               "metrics": [{"name": "score", "value": 11.0, "direction": "max"}]}
    report.judge(passing, spec)
    assert passing["status"] == "implausible" and passing["passed"] is False
    assert passing["reason"].startswith("score 11 is above its ceiling 10.0")
    assert passing["param_defaults"] == {"n": 26, "seed": 0} and passing["neutral_params"] == ["seed"]
    failing = {"status": "failing", "passed": False, "reason": "bad", "params": {"n": 26, "seed": 0},
               "metrics": [{"name": "score", "value": 11.0, "direction": "max"}]}
    report.judge(failing, spec)
    assert failing["status"] == "failing" and failing["reason"] == "bad"


# ---------------------------------------------------------------- rank's grouping, on plain reports

KEYS = trust.Keys(None, None, b"p" * 32, can_sign=True)


def signed(value: float, params: dict[str, Any], **extra: Any) -> dict[str, Any]:
    from hills.evidence import signing

    body = {"hill": "h", "tree_hash": "t" * 40, "official": True, "status": "passing", "passed": True,
            "config": [{"name": "mode", "value": "validation", "primary": True}],
            "metrics": [{"name": "score", "value": value, "direction": "max"}], "params": params,
            "param_defaults": {"tolerance": 1e-9, "seed": 0}, "neutral_params": ["seed"], **extra}
    signing.seal(body, KEYS)
    return body


def test_a_neutral_param_ranks_together_and_any_other_ranks_apart() -> None:
    items = [("default", signed(1.0, {"tolerance": 1e-9, "seed": 0})),
             ("other-seed", signed(2.0, {"tolerance": 1e-9, "seed": 7})),
             ("loose", signed(9.0, {"tolerance": 1e-3, "seed": 0}))]
    groups = rank.rank(items, KEYS)["groups"]
    assert [[e["source"] for e in g["entries"]] for g in groups] == [["other-seed", "default"], ["loose"]]
    assert groups[0]["params_apart"] == []
    assert groups[1]["params_apart"] == [{"name": "tolerance", "value": 1e-3, "default": 1e-9}]
    assert rank.apart_text(groups[1]["params_apart"]) == "tolerance=0.001 (default 1e-09)"


def test_a_report_without_defaults_still_ranks_by_its_params() -> None:
    old = signed(9.0, {"tolerance": 1e-3, "seed": 0})
    for name in ("param_defaults", "neutral_params"):
        old.pop(name)
    from hills.evidence import signing

    signing.seal(old, KEYS)
    groups = rank.rank([("new", signed(1.0, {"tolerance": 1e-9, "seed": 0})), ("old", old)], KEYS)["groups"]
    assert len(groups) == 2
    assert groups[1]["params_apart"] == [{"name": "seed", "value": 0, "default": None},
                                         {"name": "tolerance", "value": 1e-3, "default": None}]
    assert "(default not recorded)" in rank.apart_text(groups[1]["params_apart"])


# ---------------------------------------------------------------- the attack on the template

def test_the_template_declares_the_bound_for_26_circles_only() -> None:
    text = (REPO_ROOT / "examples" / "circle-packing" / "hill.yaml").read_text().replace("{{name}}", "packing")
    spec = manifest.parse_text(text, "hill.yaml", "packing")
    assert spec["metrics"][0]["best_known"] == 2.6359830849
    assert spec["metrics"][0]["for_params"] == {"n": 26}
    assert spec["params"]["tolerance"]["neutral"] is False


@pytest.fixture
def attack(project: Path, tmp_path: Path) -> dict[str, Path]:
    """The packing hill and the submissions: the near-record packing, the
    same with every radius grown by 4e-4 (valid only with tolerance 1e-3),
    and the grid example grown the same way."""
    new_and_commit("packing")
    return {"honest": packing(tmp_path / "honest", NEAR_RECORD),
            "grown": packing(tmp_path / "grown", grown(NEAR_RECORD)),
            "grown-grid": packing(tmp_path / "grown-grid",
                                  grown(json.loads((GRID_EXAMPLE / "circles.json").read_text())))}


def evaluated(sub: Path, *params: str, expect: int = 0) -> dict[str, Any]:
    args = [item for param in params for item in ("-p", param)]
    result = hills("eval", sub, "-H", "packing", *args)
    assert result.code == expect, result.output
    return result.report


@pytest.mark.slow
def test_the_loosened_tolerance_attack_no_longer_ranks_first(attack: dict[str, Path]) -> None:
    honest = evaluated(attack["honest"])
    assert honest["status"] == "passing" and 2.629 < sum_of(honest) < 2.6359830849
    # The grown packing breaks the default tolerance...
    assert evaluated(attack["grown"], expect=1)["status"] == "failing"
    # ... and with tolerance 1e-3 it would beat the best known: implausible, exit 1.
    cheat = evaluated(attack["grown"], LOOSE, expect=1)
    assert cheat["status"] == "implausible" and cheat["passed"] is False and cheat["official"] is True
    assert sum_of(cheat) > 2.6359830849 + 1e-3
    assert re.fullmatch(r"sum_radii 2\.639849831 beats best_known 2\.6359830849 by 0\.00387, more than max_gain "
                        r"1e-06 \(hill\.yaml metrics\[0\] for n=26\)", cheat["reason"]), cheat["reason"]
    assert cheat["param_defaults"] == {"n": 26, "tolerance": 1e-9} and cheat["neutral_params"] == []
    # Below the bound, a loosened tolerance passes but ranks only beside its like.
    loose = evaluated(attack["grown-grid"], LOOSE)
    assert loose["status"] == "passing" and sum_of(loose) == pytest.approx(2.5414 + 26 * GROWTH, abs=1e-4)

    ranked = hills("rank", "--json", "-H", "packing")
    assert ranked.code == 0, ranked.output
    data = json.loads(ranked.out)
    default_group, loose_group = data["groups"]
    assert default_group["params_apart"] == []
    assert [sum_of(e["report"]) for e in default_group["entries"]] == [sum_of(honest)]
    assert loose_group["params_apart"] == [{"name": "tolerance", "value": 0.001, "default": 1e-9}]
    assert [e["report"]["submission_hash"] for e in loose_group["entries"]] == [loose["submission_hash"]]
    apart = [entry["reason"] for entry in data["apart"]]
    assert any(reason.startswith("status implausible: sum_radii 2.639849831 beats") for reason in apart), apart

    table = hills("rank", "-H", "packing").out.splitlines()
    assert table[0].startswith("packing @ ") and table[1].lstrip().startswith("1. PASSED   sum_radii=2.62945")
    assert table[3] == "  ranked apart: params other than the hill's defaults: tolerance=0.001 (default 1e-09)"
    assert any("status implausible: sum_radii 2.639849831" in line for line in table)

    shown = hills("attempts", "packing").out
    assert "IMPLAUSIBLE sum_radii=2.63985 (max)  - sum_radii 2.639849831 beats" in shown
    assert "; ranked apart: tolerance=0.001 (default 1e-09)] #" in shown


@pytest.mark.slow
def test_show_gives_the_reason_and_what_sets_a_report_apart(attack: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "cheat.json"
    result = hills("eval", attack["grown"], "-H", "packing", "-p", LOOSE, "-o", out)
    assert result.code == 1, result.output
    shown = hills("show", out)
    assert shown.code == 0, shown.output
    assert "  status       IMPLAUSIBLE sum_radii=2.63985 (max)" in shown.out
    assert "  reason       sum_radii 2.639849831 beats" in shown.out and "beats best_known 2.6359830849" in shown.out
    assert "  ranks apart  tolerance=0.001 (default 1e-09): only with reports that used the same values" in shown.out


@pytest.mark.slow
def test_control_without_the_bound_and_under_the_old_rule_the_attack_ranks_first(
        attack: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The same attack on a hill without the bound: it passes, and with the
    rank's old key (primary config only) it would rank first, above the
    honest packing; the rule on params is what puts it apart."""
    path = Path(run_cli("new", "unbounded", "-t", "circle-packing").out.strip()) / "hill.yaml"
    path.write_text(re.sub(r"    (best_known|max_gain|for_params): .*\n", "", path.read_text()))
    assert run_cli("commit", "unbounded", "-m", "no bound").code == 0
    for sub, params in ((attack["honest"], ()), (attack["grown"], ("-p", LOOSE))):
        result = hills("eval", sub, "-H", "unbounded", *params)
        assert result.code == 0 and result.report["status"] == "passing", result.output
    cheat_score = 2.6294498309618897 + 26 * GROWTH

    def top(groups: list[dict[str, Any]]) -> float:
        return sum_of(groups[0]["entries"][0]["report"])

    data = json.loads(hills("rank", "--json", "-H", "unbounded").out)
    assert [len(g["entries"]) for g in data["groups"]] == [1, 1]
    assert top(data["groups"]) == pytest.approx(2.6294498309618897)

    monkeypatch.setattr(rank, "param_tuple", lambda report: ())  # the old rule: primary config only
    old = json.loads(hills("rank", "--json", "-H", "unbounded").out)
    assert len(old["groups"]) == 1 and len(old["groups"][0]["entries"]) == 2
    assert top(old["groups"]) == pytest.approx(cheat_score) and cheat_score > 2.6359830849


@pytest.mark.slow
def test_a_command_verifier_is_judged_alike(project: Path, tmp_path: Path) -> None:
    """The score of a command verifier meets the same bounds: below the
    ceiling it passes, above it it is implausible (exit 1), both logged."""
    from testing.command_fixtures import candidate, command_yaml, make_command_hill

    yaml = command_yaml("bounded").replace("  - {name: score, direction: max}\n",
                                           "  - {name: score, direction: max, floor: 0, ceiling: 100}\n")
    make_command_hill("bounded", files={"hill.yaml": yaml})
    ok = hills("eval", candidate(tmp_path / "ok", solution="print(42)\n"), "-H", "bounded")
    assert ok.code == 0 and ok.report["status"] == "passing", ok.output
    high = hills("eval", candidate(tmp_path / "high", solution="print(1000)\n"), "-H", "bounded")
    assert high.code == 1, high.output
    assert high.report["status"] == "implausible"
    assert high.report["reason"] == "score 1000 is above its ceiling 100 (hill.yaml metrics[0])"
    logged = hills("attempts", "bounded")
    assert "IMPLAUSIBLE score=1000 (max)  - score 1000 is above its ceiling 100" in logged.out


def test_a_neutral_param_ranks_beside_the_default_end_to_end(project: Path, tmp_path: Path) -> None:
    from testing.eval_fixtures import SCORE_EVAL, make_hill

    make_hill("seeded", SCORE_EVAL, params="""\
        seed: {type: int, default: 0, neutral: true}
        level: {type: int, default: 1}
        """)
    for label, value, params in (("a", 1, ()), ("b", 2, ("-p", "seed=5")), ("c", 3, ("-p", "level=2"))):
        result = hills("eval", submission(tmp_path / label, {"score.txt": str(value)}), "-H", "seeded", *params)
        assert result.code == 0, result.output
    assert result.report["neutral_params"] == ["seed"]
    data = json.loads(hills("rank", "--json", "-H", "seeded").out)
    assert [[sum_of(e["report"]) for e in g["entries"]] for g in data["groups"]] == [[2.0, 1.0], [3.0]]
    assert data["groups"][1]["params_apart"] == [{"name": "level", "value": 2, "default": 1}]
