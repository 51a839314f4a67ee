"""`hills rank`: verified, grouped by tree and primary config, sorted by the
metrics in their own directions; INVALID, unofficial and failing reports
are listed apart, never ranked."""

import json

import pytest

from testing.eval_fixtures import SCORE_EVAL, hills, make_hill, on_machine, submission
from hills.evidence import signing, trust
from hills.views import rank

KEY = trust.Keys(None, None, b"k" * 32, can_sign=True)


@pytest.fixture(scope="module")
def reports(module_machine, tmp_path_factory):
    """Report files: three passing (1, 3, 2), one tampered, one unofficial, one failing."""
    with on_machine(module_machine):
        make_hill("ranked", SCORE_EVAL)
        folder = tmp_path_factory.mktemp("reports")
        files = {}

        def scored(label, value, *flags):
            sub = submission(folder / f"sub-{label}", {"score.txt": str(value)})
            files[label] = folder / f"{label}.json"
            result = hills("eval", sub, "-H", "ranked", "-o", files[label], *flags)
            assert result.code in (0, 1), result.output

        scored("one", 1)
        scored("three", 3)
        scored("two", 2)
        scored("unofficial", 100, "--current")
        scored("failing", -5)
        scored("tampered", 2.5)
        report = json.loads(files["tampered"].read_text())
        report["metrics"][0]["value"] = 250.0
        files["tampered"].write_text(json.dumps(report))
        return files


def ranked_json(*args):
    result = hills("rank", "--json", *args)
    assert result.code == 0, result.output
    return json.loads(result.out)


def test_rank_files_orders_and_lists_the_rest_apart(reports):
    order = ["failing", "one", "tampered", "three", "unofficial", "two"]
    data = ranked_json(*(reports[label] for label in order))
    assert len(data["groups"]) == 1
    group = data["groups"][0]
    assert group["hill"] == "ranked"
    # The isolation level is primary too: confined reports rank only with confined ones.
    assert group["primary"] == [{"name": "mode", "value": "validation"}, {"name": "isolation", "value": "bwrap"}]
    assert group["metric_order"] == [{"name": "total", "direction": "max"}]
    assert [entry["source"] for entry in group["entries"]] == [
        str(reports["three"]), str(reports["two"]), str(reports["one"])]
    assert [entry["position"] for entry in group["entries"]] == [1, 2, 3]
    apart = {entry["source"]: entry["reason"] for entry in data["apart"]}
    assert set(apart) == {str(reports[label]) for label in ("failing", "tampered", "unofficial")}
    assert "INVALID" in apart[str(reports["tampered"])]
    assert apart[str(reports["unofficial"])].startswith("unofficial: ")
    assert "--current" in apart[str(reports["unofficial"])]
    assert apart[str(reports["failing"])].startswith("status failing")


def test_rank_human_table(reports):
    result = hills("rank", *(reports[label] for label in ("one", "two", "three", "tampered")))
    assert result.code == 0, result.output
    lines = result.out.splitlines()
    assert lines[0].startswith("ranked @ ") and "[mode=validation  isolation=bwrap]" in lines[0]
    assert lines[1].lstrip().startswith("1. PASSED") and "total=3" in lines[1] and " best " in lines[1]
    # Each below the best with its change from it.
    assert "total=2 " in lines[2] and " -1 " in lines[2] and "total=1 " in lines[3] and " -2 " in lines[3]
    assert lines[4] == ("      (noise unknown: no entry has per-item scores or replicates, so no gap is judged noise; "
                        "report items, or run --repeat N where scores vary)")
    assert lines[1].endswith("[noise unknown (no per-item scores)]")
    assert lines[5] == "not ranked:"
    assert str(reports["tampered"]) in lines[6] and "INVALID" in lines[6]


def test_rank_logged_reports_of_a_hill(reports):
    data = ranked_json("-H", "ranked")
    values = [entry["report"]["metrics"][0]["value"] for entry in data["groups"][0]["entries"]]
    assert values == [3.0, 2.5, 2.0, 1.0]  # the log holds the untampered 2.5
    assert [entry["report"]["status"] for entry in data["apart"]] == ["failing"]
    assert all(entry["source"].startswith("ranked #") for entry in data["groups"][0]["entries"])


def test_rank_usage_errors(reports, tmp_path):
    result = hills("rank")
    assert result.code == 2 and "no reports to rank" in result.err
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    result = hills("rank", reports["one"], bad)
    assert result.code == 2 and f"report '{bad}' is not valid JSON" in result.err
    result = hills("rank", tmp_path / "gone.json")
    assert result.code == 2 and "does not exist" in result.err
    result = hills("rank", "-H", "no-such-hill")
    assert result.code == 2 and "no hill named 'no-such-hill'" in result.err


def signed(metrics, primary=(), hill="h", tree="t1", **extra):
    report = {"hill": hill, "tree_hash": tree, "passed": True, "status": "passing", "official": True,
              "config": [{"name": n, "value": v, "primary": True} for n, v in primary],
              "metrics": [{"name": n, "value": v, "direction": d} for n, v, d in metrics], **extra}
    signing.seal(report, KEY)
    return report


def test_lexicographic_with_each_metric_in_its_own_direction():
    items = [
        ("a", signed([("score", 2, "max"), ("time", 5, "min")])),
        ("b", signed([("score", 3, "max"), ("time", 9, "min")])),
        ("c", signed([("score", 2, "max"), ("time", 1, "min")])),
        ("d", signed([("score", 3, "max"), ("time", 4, "min")])),
    ]
    result = rank.rank(items, KEY)
    assert [entry["source"] for entry in result["groups"][0]["entries"]] == ["d", "b", "c", "a"]
    assert result["apart"] == []


def test_groups_by_tree_and_primary_config_never_across():
    items = [
        ("n10-low", signed([("loss", 0.5, "min")], primary=[("n", 10)])),
        ("n20", signed([("loss", 0.1, "min")], primary=[("n", 20)])),
        ("n10-high", signed([("loss", 0.9, "min")], primary=[("n", 10)])),
        ("other-tree", signed([("loss", 0.0, "min")], primary=[("n", 10)], tree="t2")),
    ]
    result = rank.rank(items, KEY)
    groups = {(g["tree_hash"], g["primary"][0]["value"]): [e["source"] for e in g["entries"]]
              for g in result["groups"]}
    assert groups == {("t1", 10): ["n10-low", "n10-high"], ("t1", 20): ["n20"], ("t2", 10): ["other-tree"]}


def test_apart_reasons():
    forged = signed([("score", 9, "max")])
    forged["metrics"][0]["value"] = 99
    unsigned = signed([("score", 1, "max")])
    del unsigned["signature"]
    other_key = signed([("score", 1, "max")])
    signing.seal(other_key, trust.Keys(None, None, b"x" * 32, can_sign=True))
    buggy = signed([], status="buggy", passed=False, reason="timed out")
    self_reported = signing.self_reported({"hill": "h", "metrics": []}, KEY)
    result = rank.rank([("forged", forged), ("unsigned", unsigned), ("other-key", other_key),
                        ("buggy", buggy), ("self", self_reported)], KEY)
    assert result["groups"] == []
    reasons = {entry["source"]: entry["reason"] for entry in result["apart"]}
    assert "INVALID" in reasons["forged"] and "INVALID" in reasons["other-key"]
    assert reasons["unsigned"] == "no signature"
    assert reasons["buggy"] == "status buggy: timed out"
    assert reasons["self"].startswith("unofficial: ") and "hills-sign" in reasons["self"]
