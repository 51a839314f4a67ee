"""`hills pin` (issue 5 item 5): a person approves one tree of a hill; evals
of any other tree are logged and signed but unofficial, with the reason,
and `hills rank` lists them apart. An edited approval record makes every
eval unofficial rather than trusting it."""

import json

import pytest

from testing.util import git
from testing.eval_fixtures import (SCORE_EVAL, hills, last_report, make_hill, notes_lines, on_machine, real,
                                   submission, tree_of)


@pytest.fixture(scope="module")
def approved_hill(module_machine):
    with on_machine(module_machine):
        hill_dir = make_hill("approved", SCORE_EVAL)
        first_tree = tree_of(hill_dir)
        # A second committed version: the evaluator edited by someone else.
        (hill_dir / "eval.py").write_text((hill_dir / "eval.py").read_text().replace("value >= 0", "value >= -1"))
        committed = hills("commit", "approved", "-m", "an edited evaluator")
        assert committed.code == 0, committed.output
        return hill_dir, first_tree, tree_of(hill_dir)


@pytest.fixture
def versions(approved_hill):
    """(hill_dir, first tree, second tree = HEAD); no approval before or after."""
    hills("pin", "approved", "--clear")
    yield approved_hill
    hills("pin", "approved", "--clear")


@pytest.fixture
def sub(tmp_path):
    return submission(tmp_path / "sub", {"score.txt": "5\n"})


def registry_pin():
    """The approval of hill 'approved' in machine state (kept by the hill's
    identity, not its folder), or None."""
    from hills.disk import pin

    try:
        with open(pin.pins_path(), encoding="utf-8") as handle:
            pins = json.load(handle)
    except FileNotFoundError:
        return None
    found = [entry for entry in pins.values() if entry.get("hill") == "approved"]
    assert len(found) <= 1, pins
    return found[0] if found else None


def test_pin_prints_the_head_tree(versions):
    hill_dir, _first, second = versions
    result = hills("pin", "approved")
    assert result.code == 0, result.output
    assert result.out.strip() == second
    assert registry_pin()["tree_hash"] == second
    assert "approved tree" in result.err


def test_eval_of_the_approved_tree_is_official(versions, sub):
    hills("pin", "approved")
    result = hills("eval", sub, "-H", "approved")
    assert result.code == 0, result.output
    assert result.report["official"] is True and result.report["official_reason"] is None


def test_eval_of_another_tree_is_unofficial_with_both_trees_named(versions, sub):
    hill_dir, first, second = versions
    pinned = hills("pin", "approved", first[:10])
    assert pinned.code == 0, pinned.output
    assert pinned.out.strip() == first
    result = hills("eval", sub, "-H", "approved")
    assert result.code == 0, result.output  # it passed; it just does not count
    report = result.report
    assert report["official"] is False
    assert second[:12] in report["official_reason"] and first[:12] in report["official_reason"]
    assert "approved" in report["official_reason"]
    assert last_report("approved", second)["run_id"] == report["run_id"]  # logged all the same
    assert "(unofficial)" in result.err
    # `hills rank` lists it apart, saying why.
    ranked = hills("rank", "-H", "approved", "--json")
    assert ranked.code == 0, ranked.output
    data = json.loads(ranked.out)
    apart = [entry for entry in data["apart"] if entry["report"]["run_id"] == report["run_id"]]
    assert apart and apart[0]["reason"].startswith("unofficial:") and first[:12] in apart[0]["reason"]
    assert not [e for g in data["groups"] for e in g["entries"] if e["report"]["run_id"] == report["run_id"]]
    shown = hills("rank", "-H", "approved")
    assert "not ranked:" in shown.out and "is not the approved version" in shown.out


def test_an_unofficial_report_is_not_noted_on_the_hill(versions, sub):
    hill_dir, first, _second = versions
    assert hills("eval", sub, "-H", "approved").report["official"] is True
    notes_before = notes_lines(hill_dir)
    hills("pin", "approved", first)
    assert hills("eval", sub, "-H", "approved").report["official"] is False
    assert notes_lines(hill_dir) == notes_before


def test_a_commit_id_stands_for_its_tree(versions):
    hill_dir, first, _second = versions
    first_commit = git(hill_dir, "rev-parse", "HEAD~1").out.strip()
    for given in (first_commit, first_commit[:8]):
        result = hills("pin", "approved", given)
        assert result.code == 0, result.output
        assert result.out.strip() == first


def test_clear_makes_every_version_official_again(versions, sub):
    hill_dir, first, _second = versions
    hills("pin", "approved", first)
    cleared = hills("pin", "approved", "--clear")
    assert cleared.code == 0, cleared.output
    assert registry_pin() is None
    result = hills("eval", sub, "-H", "approved")
    assert result.report["official"] is True
    misuse = hills("pin", "approved", first, "--clear")
    assert misuse.code == 2 and "--clear takes no TREE" in misuse.err


def test_an_edited_approval_record_is_not_trusted(versions, sub):
    hill_dir, first, second = versions
    hills("pin", "approved", first)

    from hills.disk import pin

    # The climber points the approval at its own version, keeping the old MAC.
    with open(pin.pins_path(), encoding="utf-8") as handle:
        pins = json.load(handle)
    [entry] = [entry for entry in pins.values() if entry.get("hill") == "approved"]
    entry["tree_hash"] = second
    with open(pin.pins_path(), "w", encoding="utf-8") as handle:
        json.dump(pins, handle)
    result = hills("eval", sub, "-H", "approved")
    assert result.code == 0, result.output
    assert result.report["official"] is False
    assert "edited outside 'hills pin'" in result.report["official_reason"]
    assert last_report("approved", second)["official"] is False


@pytest.mark.parametrize("tree, words", [
    ("0" * 40, "no tree '0000000000000000000000000000000000000000' in hill 'approved'"),
    ("abcdef12", "no tree 'abcdef12'"),
    ("not-a-hash", "'not-a-hash' is not a tree hash"),
    ("ab", "'ab' is not a tree hash"),
])
def test_pin_of_an_unknown_tree_is_a_usage_error(versions, tree, words):
    result = hills("pin", "approved", tree)
    assert result.code == 2, result.output
    assert result.out == ""
    assert f"error: {words}" in result.err
    assert registry_pin() is None


def test_pin_of_an_unknown_hill(versions):
    result = hills("pin", "no-such-hill")
    assert result.code == 2, result.output
    assert "no-such-hill" in result.err


def test_the_real_executables_agree(versions, sub):
    hill_dir, first, second = versions
    done = real("hills", "pin", "approved", first)
    assert done.code == 0 and done.out.strip() == first, done.output
    evaluated = real("hills-eval", sub, "-H", "approved")
    assert evaluated.code == 0, evaluated.output
    assert json.loads(evaluated.out)["official"] is False
    via_git = real("git", "hill", "pin", "approved", "--clear")
    assert via_git.code == 0, via_git.output
    assert registry_pin() is None
