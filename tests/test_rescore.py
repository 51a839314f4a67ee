"""Re-scoring: official evals keep their snapshot by content hash, within a
size budget (the oldest that no passing report names go first); `hills
rescore NAME --from TREE` re-runs them against HEAD and lists the scores
that moved, worst collapse first."""

import json
from pathlib import Path

import pytest

from testing.eval_fixtures import SCORE_EVAL, hills, hills_home, make_hill, submission, tree_of
from hills.run import kept

# The fixed evaluator: a score above 5 was a hack (it reads score.txt only).
FIXED_EVAL = SCORE_EVAL.replace('value = float(text)',
                                'value = float(text)\n        value = value if value <= 5 else 0.5')


@pytest.mark.slow
def test_a_fixed_evaluator_collapses_the_hacked_score_first(tmp_path):
    hill_dir = make_hill("res", SCORE_EVAL)
    old_tree = tree_of(hill_dir)
    for name, score in (("hack", "9"), ("honest", "4"), ("small", "2")):
        folder = submission(tmp_path / name, {"score.txt": score + "\n"})
        assert hills("eval", folder, "-H", "res").code == 0
    assert len([p for p in (hills_home() / "snapshots").iterdir() if p.is_dir()]) == 3
    (hill_dir / "eval.py").write_text(__import__("textwrap").dedent(FIXED_EVAL))
    assert hills("commit", "res", "-m", "fixed").code == 0
    result = hills("rescore", "res", "--from", old_tree)
    assert result.code == 1, result.output
    lines = result.out.splitlines()
    assert lines[0].startswith(f"res: 3 submission(s) of {old_tree[:12]} re-scored at") and lines[0].endswith("1 moved")
    assert lines[2].split()[1:4] == ["9", "0.5", "-8.5"]
    shown = json.loads(hills("rescore", "res", "--from", old_tree, "--json").out)
    assert [row["old"] for row in shown["rows"]] == [9.0, 4.0, 2.0]
    assert shown["rows"][0]["collapse"] == 8.5 and shown["moved"][0]["new"] == 0.5
    assert shown["to_tree"] == tree_of(hill_dir) and shown["missing"] == []


def test_unknown_versions_are_named(tmp_path):
    make_hill("res2", SCORE_EVAL)
    result = hills("rescore", "res2", "--from", "not-a-version")
    assert result.code == 2 and "--from 'not-a-version': not a version of hill 'res2'" in result.err


def _report(submission_hash, status):
    return {"submission_hash": submission_hash, "status": status, "hill": "h"}


def test_the_budget_drops_unreferenced_snapshots_first(tmp_path, monkeypatch):
    monkeypatch.setenv("HILLS_SNAPSHOT_BUDGET", "2500")
    folders = {}
    for name in ("a", "b", "c"):
        folders[name] = submission(tmp_path / name, {"f.bin": "x" * 1000})
    kept.keep(str(folders["a"]), _report("blake3:aa", "passing"))
    kept.keep(str(folders["b"]), _report("blake3:bb", "failing"))
    kept.keep(str(folders["c"]), _report("blake3:cc", "passing"))
    # Over budget: the failing one goes though it is newer than the passing "a".
    assert kept.kept("blake3:aa") and kept.kept("blake3:cc") and not kept.kept("blake3:bb")
    assert Path(kept.kept("blake3:aa"), "f.bin").read_text() == "x" * 1000
    monkeypatch.setenv("HILLS_SNAPSHOT_BUDGET", "1500")
    kept.keep(str(folders["b"]), _report("blake3:bb", "passing"))
    assert not kept.kept("blake3:aa") and not kept.kept("blake3:cc") and kept.kept("blake3:bb")


@pytest.mark.parametrize("text", ["lots", "-1", "5XB"])
def test_a_bad_budget_is_named(monkeypatch, text):
    from hills.base.errors import UsageError

    monkeypatch.setenv("HILLS_SNAPSHOT_BUDGET", text)
    with pytest.raises(UsageError) as caught:
        kept.budget()
    assert f"$HILLS_SNAPSHOT_BUDGET is '{text}'" in caught.value.message


@pytest.mark.parametrize(("text", "size"), [("500MB", 500_000_000), ("2GiB", 2 * 1024 ** 3), ("1234", 1234)])
def test_budget_sizes(monkeypatch, text, size):
    monkeypatch.setenv("HILLS_SNAPSHOT_BUDGET", text)
    assert kept.budget() == size


def test_a_store_that_cannot_keep_the_snapshot_warns_and_the_eval_stands(tmp_path, monkeypatch):
    make_hill("res3", SCORE_EVAL)
    monkeypatch.setenv("HILLS_SNAPSHOT_BUDGET", "lots")
    result = hills("eval", submission(tmp_path / "s", {"score.txt": "3\n"}), "-H", "res3")
    assert result.code == 0, result.output
    assert "warning: the submission snapshot was not kept for hills rescore: $HILLS_SNAPSHOT_BUDGET is 'lots'" \
        in result.err
