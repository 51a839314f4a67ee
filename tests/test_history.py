"""Flat in history (docs/history.md): the note of a version's commit holds
its newest report and the chain head, so what an eval adds to `.vc` does
not grow with the version's history; a log cut or rewritten at its tail is
still caught against the notes' head, an old hill's notes (one line per
report) are still read, and each report's signature is checked once."""

import json
import os
import shutil

import pytest

from testing.util import lines_of, write_lines
from testing.eval_fixtures import hills, notes_lines, on_machine, real, submission, three_evals

REF = "refs/notes/hills/reports"


@pytest.fixture(scope="module")
def noted(module_machine, tmp_path_factory):
    """A hill with three logged evals, and copies of its log, head and notes ref."""
    with on_machine(module_machine):
        hill_dir, log, saved = three_evals("noted", tmp_path_factory)
        ref = git(hill_dir, "rev-parse", REF)
        return hill_dir, log, saved, ref


def git(hill_dir, *argv, input=None):
    done = real("git", "--git-dir=.vc", *argv, cwd=hill_dir, input=input)
    assert done.code == 0, done.output
    return done.out.strip()


@pytest.fixture
def hill(noted):
    """The hill, its log, head and notes restored before and after each test."""
    hill_dir, log, saved, ref = noted

    def restore():
        shutil.copy(saved / "log", log)
        shutil.copy(saved / "head", str(log) + ".head")
        git(hill_dir, "update-ref", REF, ref)

    restore()
    yield hill_dir, log
    restore()


def test_the_note_holds_the_newest_report_and_the_count(hill):
    hill_dir, log = hill
    shown = git(hill_dir, "notes", f"--ref={REF}", "show", "HEAD").splitlines()
    assert len(shown) == 1
    record = json.loads(shown[0])
    outcomes = [json.loads(line) for line in lines_of(log) if b'"report":' in line]
    assert len(outcomes) == 3
    assert record["noted"] == 3
    assert record["attempt"]["seq"] == outcomes[-1]["seq"]
    assert record["report"]["signature"] == outcomes[-1]["report"]["signature"]
    # Each report stays in the notes' history, one notes commit each.
    assert [json.loads(line)["report"]["signature"] for line in notes_lines(hill_dir)] == \
        [entry["report"]["signature"] for entry in outcomes]
    counts = hills("log", "noted", "--json")
    assert counts.code == 0, counts.output
    assert [version["evals"] for version in json.loads(counts.out)] == [3]


def cut_tail(log):
    """The attack: the last eval's outcome cut off the log, and the head
    file that would say so removed with it."""
    write_lines(log, lines_of(log)[:-1])
    os.unlink(str(log) + ".head")


def test_a_cut_tail_is_caught_against_the_notes_head(hill):
    hill_dir, log = hill
    cut_tail(log)
    result = hills("attempts", "noted")
    assert result.code == 1, result.output
    assert "1 line(s) missing at the end (checked against the hill's notes)" in result.out


def test_control_without_the_notes_the_cut_tail_passes(hill):
    hill_dir, log = hill
    cut_tail(log)
    git(hill_dir, "update-ref", "-d", REF)
    result = hills("attempts", "noted")
    assert result.code == 0, result.output
    assert "chain intact: 5 entries" in result.out


def rewrite_tail(log, home):
    """The attack by someone holding the machine key: the last outcome
    replaced by another one signed anew, the log and its head consistent."""
    from hills.evidence import chain, trust

    lines = lines_of(log)
    entry = json.loads(lines[-1])
    write_lines(log, lines[:-1])
    os.unlink(str(log) + ".head")
    os.environ["HILLS_HOME"] = home
    entry["report"]["metrics"][0]["value"] = 99.0
    record = {name: value for name, value in entry.items() if name not in ("seq", "prev", "sig")}
    chain.append(str(log), record, trust.machine_keys(for_signing=True))


def test_a_rewritten_tail_is_caught_against_the_notes_head(hill):
    hill_dir, log = hill
    rewrite_tail(log, os.environ["HILLS_HOME"])
    assert real("hills-chain", "verify", log).code == 0  # the log and its head agree
    result = hills("attempts", "noted")
    assert result.code == 1, result.output
    assert "does not match the head's mac (the log was rewritten) (checked against the hill's notes)" in result.out


def test_control_without_the_notes_the_rewritten_tail_passes(hill):
    hill_dir, log = hill
    rewrite_tail(log, os.environ["HILLS_HOME"])
    git(hill_dir, "update-ref", "-d", REF)
    result = hills("attempts", "noted")
    assert result.code == 0, result.output


def old_layout(hill_dir, log):
    """The note as hills wrote it before: every report of the version, one
    line each, with its attempt and no count."""
    outcomes = [json.loads(line) for line in lines_of(log) if b'"report":' in line]
    text = "".join(json.dumps({"report": entry["report"], "attempt": {"seq": entry["seq"], "mac": link}},
                              sort_keys=True, separators=(",", ":")) + "\n"
                   for entry, link in zip(outcomes, links_of(log, outcomes)))
    git(hill_dir, "notes", f"--ref={REF}", "add", "-f", "--file=-", "HEAD", input=text)
    assert len(git(hill_dir, "notes", f"--ref={REF}", "show", "HEAD").splitlines()) == 3


def links_of(log, outcomes):
    from hills.evidence import chain

    by_seq = {entry["seq"]: entry.get("mac") for entry in chain.read(str(log))}
    return [by_seq[entry["seq"]] for entry in outcomes]


def test_an_old_layout_note_is_still_read(hill):
    hill_dir, log = hill
    old_layout(hill_dir, log)
    counts = hills("log", "noted", "--json")
    assert [version["evals"] for version in json.loads(counts.out)] == [3]
    assert hills("attempts", "noted").code == 0
    cut_tail(log)
    result = hills("attempts", "noted")
    assert result.code == 1, result.output
    assert "1 line(s) missing at the end (checked against the hill's notes)" in result.out


def test_an_eval_after_an_old_layout_note_counts_on(hill, tmp_path):
    hill_dir, log = hill
    old_layout(hill_dir, log)
    result = hills("eval", submission(tmp_path / "four", {"score.txt": "4"}), "-H", "noted")
    assert result.code == 0, result.output
    shown = git(hill_dir, "notes", f"--ref={REF}", "show", "HEAD").splitlines()
    assert len(shown) == 1 and json.loads(shown[0])["noted"] == 4
    counts = hills("log", "noted", "--json")
    assert [version["evals"] for version in json.loads(counts.out)] == [4]
    assert hills("attempts", "noted").code == 0


def vc_files(git_dir):
    """{path: size} of every file under a git dir."""
    found = {}
    for root, _, files in os.walk(git_dir):
        for name in files:
            path = os.path.join(root, name)
            found[os.path.relpath(path, git_dir)] = os.path.getsize(path)
    return found


def test_what_a_note_adds_to_vc_does_not_grow(hill):
    """Sixty notes of one report on one commit: each adds three objects
    (blob, tree, commit) and a reflog line, and the bytes the sixtieth adds
    are those the second added, give or take the digits of its count."""
    from hills.base.git import Repo
    from hills.run import logbook

    hill_dir, log = hill
    repo = Repo(hill_dir)
    commit = git(hill_dir, "rev-parse", "HEAD")
    report = json.loads(lines_of(log)[-1])["report"]
    added = []
    for seq in range(100, 160):
        before = vc_files(repo.git_dir)
        logbook.add_note(repo, commit, report, {"seq": seq, "mac": "sha256:" + f"{seq:064x}"})
        after = vc_files(repo.git_dir)
        new = [path for path in after if path not in before]
        assert len([path for path in new if path.startswith("objects/")]) == 3, new
        added.append(sum(after.values()) - sum(before.values()))
    assert added[-1] <= added[1] + 16, added
    assert json.loads(git(hill_dir, "notes", f"--ref={REF}", "show", commit))["noted"] == 3 + 60


def test_each_report_signature_is_checked_once(hill, monkeypatch, tmp_path):
    """One `attempts` checks each report once; the next checks none but
    those logged since (the sealed record beside the log); a record edited
    checks them all again."""
    from hills.disk import hill as hill_module
    from hills.evidence import checked, signing
    from hills.views import attempts

    hill_dir, log = hill
    calls = []
    real_verify = signing.verify
    monkeypatch.setattr(signing, "verify", lambda report, *rest: calls.append(report) or real_verify(report, *rest))
    record = checked.record_path(str(log))
    if os.path.exists(record):
        os.unlink(record)
    target = hill_module.resolve("noted")
    result, verdicts = attempts.checked(target)
    assert result["chain"]["ok"] and len(result["attempts"]) == 3
    assert len(calls) == 3 and all(verdict.ok for verdict in verdicts)
    calls.clear()
    result, verdicts = attempts.checked(target)
    assert calls == [] and [verdict.ok for verdict in verdicts] == [True] * 3
    with open(record) as handle:
        kept = json.load(handle)
    assert kept["value"]["entries"] == 6 and kept["value"]["recheck"] == []
    kept["value"]["recheck"] = [5]  # alone, one report checked again: but its seal no longer holds
    with open(record, "w") as handle:
        json.dump(kept, handle)
    attempts.checked(target)
    assert len(calls) == 3


def test_a_forged_report_is_checked_every_time(hill):
    """A report whose signature fails, appended with the machine's key
    (hills-chain append signs any line), is INVALID in every listing, the
    record beside the log notwithstanding."""
    hill_dir, log = hill
    outcome = json.loads(lines_of(log)[-1])
    report = dict(outcome["report"], run_id="forged")
    report["metrics"] = [dict(report["metrics"][0], value=1000.0)]
    appended = real("hills-chain", "append", log, input=json.dumps({"report": report, "start": None}))
    assert appended.code == 0, appended.output
    for _ in range(2):
        ranked = hills("rank", "-H", "noted", "--json")
        assert ranked.code == 0, ranked.output
        apart = json.loads(ranked.out)["apart"]
        assert [entry["report"]["run_id"] for entry in apart] == ["forged"]
        assert "edited after it was signed" in apart[0]["reason"]
