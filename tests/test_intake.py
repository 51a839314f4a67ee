"""The intake while the evaluator boots (docs/warm.md, "The intake"): the
evaluator's process starts before the hill and the submission are copied into the run folder, and gets
its key only once they are there. Its report is the one the plain order
gives; a refusal or a stop signal during the intake leaves no process and
no started entry; a solution phase the submission does not take still keeps
the snapshot out of the scorer's sight."""

import os
import signal

import pytest

from testing.util import BWRAP_USABLE
from hills.base import errors
from hills.evidence import trust
from hills.run import evaluate, phases, records, runner, snapshot
from hills.disk import hill as hill_module

from testing.eval_fixtures import SCORE_EVAL, log_entries, attempts_log, make_hill, on_machine, submission, tree_of

# Scores score.txt, and says what it saw of the run folder's copies of the
# submission (the snapshot and the replicate's folder) next to its own.
PEEKING_EVAL = """\
    import os
    from pathlib import Path

    def eval(submission, *, final=False, **params):
        run = Path(submission).parent
        seen = sorted(f"{name}/{entry}" for name in ("source", "submission") if (run / name).is_dir()
                      for entry in os.listdir(run / name))
        value = float((Path(submission) / "score.txt").read_text())
        return {"passed": True, "metrics": [{"name": "total", "value": value, "direction": "max"}],
                "details": {"seen": seen}}
    """

SKIPPED_PHASE = """\
    solution:
      run: ["{python}", solution.py]
      when: solution.py
      outputs: [score.txt]
    """


@pytest.fixture(scope="module")
def hills_made(module_machine):
    trust.load_library()  # as a warm server does before it forks
    with on_machine(module_machine):
        made = {"plain": make_hill("intake", SCORE_EVAL), "phased": make_hill("phased", PEEKING_EVAL,
                                                                              extra=SKIPPED_PHASE)}
        for name in ("intake", "phased"):  # the first eval builds the environment: no intake then
            folder = submission(module_machine.root / f"first-{name}", {"score.txt": "1\n"})
            assert evaluate.evaluate(request(name, folder)).exit_code == errors.EXIT_OK
        return made


@pytest.fixture
def taken_in(monkeypatch):
    """Which evals went through the intake: the run folder's path for each."""
    seen = []
    original = evaluate._run_taking_in

    def spy(ctx, *args, **kwargs):
        seen.append(ctx.run_dir)
        return original(ctx, *args, **kwargs)

    monkeypatch.setattr(evaluate, "_run_taking_in", spy)
    return seen


@pytest.fixture
def before_children():
    """This process's children before the test: none of the eval's may outlive it."""
    return frozenset(runner._children())


def request(name, folder, **asks):
    return evaluate.EvalRequest(hill_module.resolve(name), str(folder), **asks)


def last_entry(name, hill_dir):
    return log_entries(attempts_log(name, tree_of(hill_dir)))[-1]


def comparable(report):
    return {key: report.get(key) for key in ("status", "passed", "reason", "metrics", "submission_hash",
                                             "submission_git", "replicates", "solution_phase", "params")}


@pytest.mark.slow
def test_the_evaluator_boots_while_the_submission_is_copied_and_scores_the_same(hills_made, tmp_path, taken_in,
                                                                                monkeypatch, before_children):
    folder = submission(tmp_path / "sub", {"score.txt": "2.5\n", "notes/a.txt": "a\n"})
    booted_during = []
    original = snapshot.snapshot

    def watched(source, target):
        booted_during.append(bool(runner._children() - before_children))  # the evaluator's process is there
        return original(source, target)

    monkeypatch.setattr(snapshot, "snapshot", watched)
    taken = evaluate.evaluate(request("intake", folder))
    assert taken.exit_code == errors.EXIT_OK, taken.report
    assert len(taken_in) == 1 and booted_during == [True]
    monkeypatch.setattr(evaluate, "takes_in_while_booting", lambda plan, start: False)
    plain = evaluate.evaluate(request("intake", folder))
    assert len(taken_in) == 1 and booted_during == [True, False]
    assert comparable(taken.report) == comparable(plain.report)
    assert taken.report["metrics"][0]["value"] == 2.5
    entries = log_entries(attempts_log("intake", tree_of(hills_made["plain"])))
    assert ["started" in entry for entry in entries[-4:]] == [True, False, True, False]
    assert entries[-1]["start"] is not None and entries[-3]["start"] is not None


def test_a_refusal_during_the_intake_leaves_no_process_and_no_started_entry(
        hills_made, tmp_path, taken_in, before_children):
    folder = submission(tmp_path / "sub", {"score.txt": "1\n"})
    os.symlink("/etc/hostname", folder / "outside")
    before = len(log_entries(attempts_log("intake", tree_of(hills_made["plain"]))))
    outcome = evaluate.evaluate(request("intake", folder))
    assert outcome.exit_code == errors.EXIT_NO  # the submission's fault, not the hill's
    assert outcome.message == "submission symlink 'outside' points outside the submission (to '/etc/hostname')"
    assert len(taken_in) == 1 and runner._children() <= before_children
    entries = log_entries(attempts_log("intake", tree_of(hills_made["plain"])))
    assert len(entries) == before + 1  # the refused report only
    assert entries[-1]["start"] is None and entries[-1]["report"]["status"] == "refused"


@pytest.mark.slow
def test_a_stop_signal_during_the_intake_interrupts_it_before_anything_runs(hills_made, tmp_path, taken_in,
                                                                            monkeypatch, before_children):
    folder = submission(tmp_path / "sub", {"score.txt": "1\n"})
    original = evaluate.lineage

    def interrupted(path):
        os.kill(os.getpid(), signal.SIGTERM)
        return original(path)

    monkeypatch.setattr(evaluate, "lineage", interrupted)
    before = len(log_entries(attempts_log("intake", tree_of(hills_made["plain"]))))
    outcome = evaluate.evaluate(request("intake", folder))
    assert outcome.exit_code == errors.EXIT_INTERRUPTED
    assert outcome.report["status"] == "interrupted" and outcome.report["reason"] == "interrupted by SIGTERM"
    assert len(taken_in) == 1 and runner._children() <= before_children
    entries = log_entries(attempts_log("intake", tree_of(hills_made["plain"])))
    assert len(entries) == before + 1 and entries[-1]["start"] is None
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # the runner put the handlers back


def test_a_skipped_solution_phase_goes_through_the_intake_with_its_outputs(hills_made, tmp_path, taken_in):
    folder = submission(tmp_path / "sub", {"score.txt": "3\n"})
    outcome = evaluate.evaluate(request("phased", folder))
    assert outcome.exit_code == errors.EXIT_OK, outcome.report
    assert len(taken_in) == 1
    assert outcome.report["metrics"][0]["value"] == 3.0
    assert outcome.report["solution_phase"] == {"runs": 0, "duration_s": 0.0}


@pytest.mark.skipif(not BWRAP_USABLE, reason="bubblewrap (bwrap) is missing or cannot create namespaces here "
                                             "(install the Debian package 'bubblewrap')")
def test_the_scorer_cannot_see_the_snapshot_and_can_with_hiding_switched_off(hills_made, tmp_path, taken_in,
                                                                             monkeypatch):
    folder = submission(tmp_path / "sub", {"score.txt": "3\n", "mine.txt": "kept from the scorer\n"})
    hidden = evaluate.evaluate(request("phased", folder))
    assert hidden.exit_code == errors.EXIT_OK, hidden.report
    assert hidden.report["details"]["seen"] == []
    original = phases.scoring_replicate

    def unhidden(ctx, rep, outputs_dir):
        return records.Replicate(**{**vars_of(original(ctx, rep, outputs_dir)), "hidden": ()})

    monkeypatch.setattr(phases, "scoring_replicate", unhidden)
    shown = evaluate.evaluate(request("phased", folder))
    assert len(taken_in) == 2
    assert "source/mine.txt" in shown.report["details"]["seen"]
    assert "submission/mine.txt" in shown.report["details"]["seen"]


def vars_of(rep):
    return {name: getattr(rep, name) for name in ("seed", "tag", "submission_dir", "env", "hidden", "secret")}


def test_outputs_missing_from_a_skipped_phase_are_buggy_after_a_started_entry(
        hills_made, tmp_path, taken_in, before_children):
    folder = submission(tmp_path / "sub", {"other.txt": "no score\n"})
    outcome = evaluate.evaluate(request("phased", folder))
    assert outcome.exit_code == errors.EXIT_NO
    assert outcome.report["status"] == "buggy"
    assert outcome.report["reason"] == "the submission holds neither 'solution.py' nor 'score.txt' " \
                                       "(hill.yaml solution.outputs)"
    assert len(taken_in) == 1 and runner._children() <= before_children
    assert last_entry("phased", hills_made["phased"])["start"] is not None


def test_a_when_file_that_appears_during_the_intake_is_refused(
        hills_made, tmp_path, taken_in, monkeypatch, before_children):
    folder = submission(tmp_path / "sub", {"score.txt": "3\n"})
    original = snapshot.snapshot

    def written_meanwhile(source, target):
        (folder / "solution.py").write_text("print('late')\n")
        return original(source, target)

    monkeypatch.setattr(snapshot, "snapshot", written_meanwhile)
    outcome = evaluate.evaluate(request("phased", folder))
    assert outcome.exit_code == errors.EXIT_NO
    assert outcome.message == "submission entry 'solution.py' appeared while the submission was copied"
    assert len(taken_in) == 1 and runner._children() <= before_children
    assert last_entry("phased", hills_made["phased"])["start"] is None
