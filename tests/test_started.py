"""No hidden attempts: every eval logs a signed `started` entry before its
evaluator runs, and its outcome line names it. An eval killed while its
evaluator runs (kill -9 after reading a holdout score) leaves the started
entry, shows as abandoned in `hills attempts`, and has spent its look at
the holdout."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testing.util import default_signals, kill_hard
from testing.eval_fixtures import (attempts_log, hills, hills_home, log_entries, make_hill, real, submission,
                           tree_of)
from hills.base import state
from hills.evidence import trust
from hills.run import logbook
from hills.views import attempts

NAME = "peek"
BUDGET_SPENT = f"the holdout budget of hill '{NAME}' is spent: 1 of 1"

# Scores score.txt; with a `sleep` file in the submission it prints the
# score first (what `-v` streams), marks the run folder and sleeps.
SLEEPY_EVAL = """\
    import time
    from pathlib import Path

    def eval(submission, *, final=False, **params):
        value = float((Path(submission) / "score.txt").read_text())
        if (Path(submission) / "sleep").exists():
            print(f"{'holdout' if final else 'validation'} score {value}", flush=True)
            Path("ready").write_text("scored")
            time.sleep(120)
        return {"passed": True, "metrics": [{"name": "total", "value": value, "direction": "max"}]}
"""

# `hills eval` as before started entries: the same pipeline with the
# started step taken out.
WITHOUT_STARTED = ("import sys; from hills.run import logbook; logbook.Start.__call__ = lambda self, ctx: None; "
                   "from hills.entry import main; sys.argv[0] = 'hills'; main()")


@pytest.fixture
def peek(tmp_path: Path) -> Path:
    """A hill with a holdout budget of 1 whose evaluator can be made to sleep."""
    return make_hill(NAME, SLEEPY_EVAL, timeout=60, extra="final:\n  budget: 1\n")


def folder(tmp_path: Path, name: str, sleep: bool = False) -> Path:
    files = {"score.txt": "7\n"}
    if sleep:
        files["sleep"] = ""
    return submission(tmp_path / name, files)


def started_entries(log: Path) -> list[dict]:
    """The started entries of the whole lines of the log so far."""
    if not log.exists():
        return []
    whole = log.read_bytes().rpartition(b"\n")[0]  # an append may be under way
    return [entry for entry in map(json.loads, whole.splitlines()) if "started" in entry]


def start_eval(argv: list[str]) -> subprocess.Popen:
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_signals)


def wait_until_scored(process: subprocess.Popen, log: Path, seen: int = 0) -> dict:
    """The started entry of the eval `process` runs, once its evaluator has
    printed the score and sleeps."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()
        entries = started_entries(log)
        if len(entries) > seen:
            run_dir = hills_home() / "runs" / NAME / entries[-1]["started"]["run_id"]
            if (run_dir / "ready").exists():
                return entries[-1]
        time.sleep(0.02)
    raise AssertionError("the evaluator never started")


def old_rule(entry: dict) -> bool:
    """How the holdout budget was counted before started entries."""
    report = entry.get("report")
    return isinstance(report, dict) and bool(report.get("final")) and report.get("status") != "refused"


def test_a_killed_final_eval_is_abandoned_and_has_spent_the_budget(peek: Path, tmp_path: Path) -> None:
    tree = tree_of(peek)
    log = attempts_log(NAME, tree)
    process = start_eval(["hills", "eval", str(folder(tmp_path, "a", sleep=True)), "-H", NAME, "--final", "-v"])
    started = wait_until_scored(process, log)
    # At the kill, the log holds only the started entry: counted as before,
    # the budget would be unspent.
    entries = log_entries(log)
    assert entries == [started]
    assert sum(map(old_rule, entries)) == 0 and sum(map(logbook.spends_holdout, entries)) == 1
    kill_hard(process)
    assert process.returncode == -signal.SIGKILL
    assert log_entries(log) == [started]

    record = started["started"]
    assert record["final"] is True and record["hill"] == NAME and record["tree_hash"] == tree
    assert record["pid"] == process.pid and record["host"] == os.uname().nodename
    assert record["submission_hash"].startswith("blake3:") and record["timeout_s"] == 60

    verified = real("hills-chain", "verify", log)
    assert verified.code == 0 and f"chain intact: 1 entry in {log}" in verified.out
    shown = hills("attempts", NAME)
    assert shown.code == 0, shown.output
    assert "1 attempt(s), 1 abandoned" in shown.out
    row = next(line for line in shown.out.splitlines() if "ABANDONED" in line)
    assert row.split()[0] == "#1" and record["submission_hash"][:19] in row
    assert f"pid {process.pid} on {record['host']}" in row and "holdout budget" in row
    data = json.loads(hills("attempts", NAME, "--json").out)
    assert data["attempts"] == [] and data["best"] == []
    assert [(u["seq"], u["number"], u["status"], u["run_id"]) for u in data["unfinished"]] == \
        [(0, 1, "abandoned", record["run_id"])]

    spent = hills("eval", folder(tmp_path, "b"), "-H", NAME, "--final")
    assert spent.code == 5, spent.output
    assert BUDGET_SPENT in spent.err
    assert log_entries(log) == [started]  # a refusal before anything ran logs nothing

    plain = hills("eval", folder(tmp_path, "c"), "-H", NAME)
    assert plain.code == 0, plain.output
    assert plain.report["status"] == "passing" and plain.report["final"] is False
    shown = hills("attempts", NAME)
    assert "2 attempt(s), 1 abandoned" in shown.out and "PASSED" in shown.out
    assert [line.split()[0] for line in shown.out.splitlines()[2:4]] == ["#1", "#2"]
    assert real("hills-chain", "verify", log).code == 0


def test_without_the_started_entry_a_killed_eval_left_the_budget_unspent(peek: Path, tmp_path: Path) -> None:
    log = attempts_log(NAME, tree_of(peek))
    process = start_eval([sys.executable, "-c", WITHOUT_STARTED, "eval", str(folder(tmp_path, "a", sleep=True)),
                          "-H", NAME, "--final", "-v"])
    run_dirs = hills_home() / "runs" / NAME
    deadline = time.monotonic() + 120
    while not list(run_dirs.glob("*/ready")):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.02)
    out = kill_hard(process)
    assert "holdout score 7.0" in out  # the look was had
    assert not log.exists() or log_entries(log) == []
    again = hills("eval", folder(tmp_path, "b"), "-H", NAME, "--final")
    assert again.code == 0, again.output  # the hole the started entry closes


def test_an_interrupted_eval_logs_its_outcome_after_its_started_entry(tmp_path: Path) -> None:
    hill_dir = make_hill(NAME, SLEEPY_EVAL, timeout=60, extra="final:\n  budget: 2\n")
    tree = tree_of(hill_dir)
    log = attempts_log(NAME, tree)
    process = start_eval(["hills", "eval", str(folder(tmp_path, "a", sleep=True)), "-H", NAME, "--final"])
    started = wait_until_scored(process, log)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, out + err
    first, outcome = log_entries(log)
    assert first == started
    assert outcome["report"]["status"] == "interrupted" and outcome["report"]["run_id"] == started["started"]["run_id"]
    assert outcome["start"] == {"seq": started["seq"], "mac": outcome["prev"]}  # prev: the started line's link
    assert real("hills-chain", "verify", log).code == 0
    shown = hills("attempts", NAME)
    assert shown.code == 0 and "1 attempt(s)" in shown.out and "ABANDONED" not in shown.out
    assert "INTERRUPTED" in shown.out
    assert json.loads(hills("attempts", NAME, "--json").out)["unfinished"] == []
    # The started entry and its outcome are one eval: one look spent, one left.
    assert logbook.final_count(NAME, tree, trust.machine_keys(for_signing=True)) == 1
    assert hills("eval", folder(tmp_path, "b"), "-H", NAME, "--final").code == 0
    spent = hills("eval", folder(tmp_path, "c"), "-H", NAME, "--final")
    assert spent.code == 5 and f"the holdout budget of hill '{NAME}' is spent: 2 of 2" in spent.err


def test_every_eval_logs_started_then_its_outcome_and_readers_list_reports_only(peek: Path,
                                                                               tmp_path: Path) -> None:
    tree = tree_of(peek)
    log = attempts_log(NAME, tree)
    result = hills("eval", folder(tmp_path, "a"), "-H", NAME)
    assert result.code == 0, result.output
    started, outcome = log_entries(log)
    record, report = started["started"], outcome["report"]
    assert set(record) == {"run_id", "hill", "tree_hash", "final", "submission_hash", "timestamp", "pid", "host",
                           "pid_start", "timeout_s"}
    assert record["run_id"] == report["run_id"] and record["submission_hash"] == report["submission_hash"]
    assert record["final"] is False and record["tree_hash"] == tree == report["tree_hash"]
    assert record["pid"] == os.getpid()  # run in this process
    assert outcome["start"] == {"seq": 0, "mac": outcome["prev"]}
    assert report == result.report

    shown = hills("attempts", NAME)
    assert shown.code == 0 and "1 attempt(s)" in shown.out and "abandoned" not in shown.out
    assert "chain intact: 2 entries" in shown.out
    assert [a["seq"] for a in json.loads(hills("attempts", NAME, "--json").out)["attempts"]] == [1]
    ranked = hills("rank", "-H", NAME, "--json")
    assert ranked.code == 0, ranked.output
    assert [e["source"] for g in json.loads(ranked.out)["groups"] for e in g["entries"]] == [f"{NAME} #1"]
    chained = real("hills-chain", "show", log, "--json")
    assert chained.code == 0
    assert [("started" in e, "report" in e) for e in json.loads(chained.out)] == [(True, False), (False, True)]
    logged = hills("log", NAME, "--json")
    assert logged.code == 0 and json.loads(logged.out)[0]["evals"] == 1
    assert hills("status", NAME).code == 0
    report_file = tmp_path / "report.json"
    report_file.write_text(result.out)
    assert hills("show", report_file).code == 0


def test_a_refusal_before_anything_ran_logs_no_started_entry_and_spends_nothing(tmp_path: Path) -> None:
    hill_dir = make_hill(NAME, SLEEPY_EVAL, extra="final:\n  budget: 1\n", private={"answers.txt": "42\n"})
    tree = tree_of(hill_dir)
    (hill_dir / "private" / "answers.txt").write_text("43\n")
    refused = hills("eval", folder(tmp_path, "a"), "-H", NAME, "--final")
    assert refused.code == 5, refused.output
    (entry,) = log_entries(attempts_log(NAME, tree))
    assert entry["report"]["status"] == "refused" and entry["start"] is None
    assert logbook.final_count(NAME, tree, trust.machine_keys(for_signing=True)) == 0


@pytest.mark.parametrize("entry, spends", [
    ({"started": {"final": True}}, True),
    ({"started": {"final": False}}, False),
    ({"report": {"final": True, "status": "passing"}, "start": {"seq": 0, "mac": "sha256:0"}}, False),
    ({"report": {"final": True, "status": "buggy"}, "start": None}, False),
    # Logged before started entries: a --final outcome counts unless refused.
    ({"report": {"final": True, "status": "interrupted"}}, True),
    ({"report": {"final": True, "status": "refused"}}, False),
    ({"report": {"final": False, "status": "passing"}}, False),
    ({"_line": 3, "_error": "not valid JSON"}, False),
])
def test_what_spends_a_look_at_the_holdout(entry: dict, spends: bool) -> None:
    assert logbook.spends_holdout(entry) is spends


def test_when_an_unfinished_eval_is_abandoned() -> None:
    now = time.time()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
    own = logbook.process_start(os.getpid())
    assert own is not None
    here = {"timestamp": stamp, "timeout_s": 10, "host": os.uname().nodename, "pid": os.getpid(),
            "pid_start": own[1]}
    assert attempts.still_running(here, now)
    assert not attempts.still_running(dict(here, pid_start=own[1] + 1), now)  # the pid was given again
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert not attempts.still_running(dict(here, pid=gone.pid, pid_start=None), now)
    late = now + 10 + attempts.ABANDON_MARGIN_S + 1
    assert not attempts.still_running(here, late)
    elsewhere = dict(here, host=here["host"] + "-elsewhere", pid=1)
    assert attempts.still_running(elsewhere, now) and not attempts.still_running(elsewhere, late)
    assert not attempts.still_running(dict(here, timestamp="yesterday"), now)
    # On this machine, a run folder that its eval no longer holds is the
    # answer, whatever lives at the pid (kill -9 lets go of the lock too).
    held = dict(here, hill=NAME, run_id="20260101T000000-0a1b2c3d")
    lock = hills_home() / "runs" / NAME / held["run_id"] / ".in-use"
    with state.file_lock(lock):
        assert attempts.still_running(held, now)
    assert not attempts.still_running(held, now)

    entries = [{"seq": 0, "started": dict(here, run_id="a")},
               {"seq": 1, "started": dict(here, run_id="b", pid=gone.pid)},
               {"seq": 2, "report": {"run_id": "a"}, "start": {"seq": 0, "mac": "sha256:0"}},
               {"seq": 3, "started": dict(here, run_id="c")}]
    assert [(row["seq"], row["status"]) for row in attempts.unfinished(entries, now)] == \
        [(1, "abandoned"), (3, "running")]
