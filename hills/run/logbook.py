"""An eval's entries in the attempts log: the `started` entry before
anything submitted runs, the signed outcome that names it, the git note of
an official report and its snapshot kept for `hills rescore`; and the
holdout budget, counted from the log under its lock."""

from __future__ import annotations

import contextlib
import json
import os

from ..base import state
from ..base.errors import NotScored, Refused
from ..evidence import chain, report as report_module, signing
from . import kept

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, ContextManager

    from ..base.git import Repo
    from ..evidence.report_types import Report
    from ..evidence.trust import Keys
    from .records import EvalContext, EvalPlan


NOTES_REF = "refs/notes/hills/reports"


def note_summary(text: str) -> tuple[int, dict[str, Any] | None]:
    """(official reports noted, the newest {seq, mac} noted) of the note of
    a commit, in either layout (docs/history.md): one record whose `noted`
    counts the reports and whose `attempt` (or `head`, when an eval noted
    before it ended later in the log) is the newest; or, as hills wrote
    notes before, one line per report, each with its `attempt`."""
    records = []
    for line in text.splitlines():
        if line.strip():
            try:
                record = json.loads(line)
            except ValueError:
                record = None
            records.append(record if isinstance(record, dict) else {})
    newest: dict[str, Any] | None = None
    for record in records:
        for attempt in (record.get("attempt"), record.get("head")):
            if isinstance(attempt, dict) and isinstance(attempt.get("seq"), int) \
                    and not isinstance(attempt.get("seq"), bool) and isinstance(attempt.get("mac"), str) \
                    and (newest is None or attempt["seq"] > newest["seq"]):
                newest = {"seq": attempt["seq"], "mac": attempt["mac"]}
    noted = records[0].get("noted") if len(records) == 1 else None
    count = noted if isinstance(noted, int) and not isinstance(noted, bool) and noted > 0 else len(records)
    return count, newest


def note_record(envelope: Mapping[str, Any], attempt: Mapping[str, Any], previous: str | None) -> str:
    """The note of a commit after one more official report: that report,
    its log entry's {seq, mac} (`attempt`), the count of reports noted on
    the commit (`noted`), and `head`, the newest entry noted, when an
    earlier-started eval noted after a later one. One line whose size does
    not grow with the version's history."""
    count, newest = note_summary(previous) if previous else (0, None)
    record: dict[str, Any] = {"report": envelope, "attempt": {"seq": attempt["seq"], "mac": attempt["mac"]},
                              "noted": count + 1}
    if newest is not None and newest["seq"] > attempt["seq"]:
        record["head"] = newest
    return json.dumps(record, sort_keys=True, separators=(",", ":"))


def add_note(repo: Repo, commit: str, envelope: Mapping[str, Any], entry: Mapping[str, Any]) -> None:
    """Note an official report on the hill commit it scored: the note of
    the commit becomes `note_record` (the report noted before it stays in
    the notes ref's history), under the notes' lock."""
    with state.file_lock(os.path.join(repo.git_dir, "hills-notes.lock")):
        repo.replace_note(NOTES_REF, commit, lambda previous: note_record(envelope, entry, previous))


def attempts_path(name: str, tree_hash: str | None, hill_path: str | None = None) -> str:
    """The attempts log of a version; the working tree's (`tree_hash` None)
    is the hill folder's own."""
    return os.path.join(state.state_dir(name, tree_hash, hill_path), "attempts.jsonl")


def spends_holdout(entry: Mapping[str, Any]) -> bool:
    """Whether an entry of an attempts log spends a look at the holdout: the
    `started` entry of a --final eval, whether an outcome followed it or
    not (a killed eval spends its look). An outcome line names its started
    entry, or null when the eval stopped before anything ran (`start`), and
    adds nothing, so each eval counts once. A --final outcome from before
    started entries counts unless it was refused. Under a reusable holdout
    (its started entry says `reusable`) only a release spends: the outcome
    whose report says `release: true`."""
    started = entry.get("started")
    if isinstance(started, dict):
        return started.get("final") is True and started.get("reusable") is not True
    report = entry.get("report")
    if "start" in entry:
        return isinstance(report, dict) and report.get("release") is True
    return isinstance(report, dict) and bool(report.get("final")) and report.get("status") != "refused"


def final_count(name: str, tree_hash: str, key: Keys) -> int:
    """Holdout evals already spent on a version, official or not (a look at
    the holdout is a look): each eval whose `started` entry is logged, so
    one killed while its evaluator ran too; refusals before anything ran
    are not counted. The log must verify:
    a log cut short must not hand the budget back. A sealed counter beside
    the log (`final-count.json`, written under the budget lock the caller
    holds) keeps the count up to a line, so only the lines after it are
    read; without it the whole log is counted again, to the same number."""
    counter = os.path.join(state.state_dir(name, tree_hash), "final-count.json")
    try:
        return chain.tally(attempts_path(name, tree_hash), key, counter, spends_holdout)
    except Refused as exc:
        raise NotScored(f"the attempts log of hill '{name}' at tree {tree_hash[:12]} is broken "
                        f"({exc.message}): its holdout evals cannot be counted",
                        hint=f"see 'hills attempts {name}'") from None


def budget_lock(plan: EvalPlan) -> ContextManager[object]:
    """Held from the count to the log line, so concurrent --final evals
    cannot overspend the holdout budget."""
    if plan.budget is None:
        return contextlib.nullcontext()
    return state.file_lock(os.path.join(state.state_dir(plan.hill.name, plan.tree_hash), "final.lock"))


def guard_budget(plan: EvalPlan, run_dir: str) -> None:
    """Refuse a --final eval whose version has spent its holdout budget;
    nothing is logged for it (a refusal does not count)."""
    if plan.budget is None:
        return
    assert plan.tree_hash is not None  # resolve() refused --final --current under a budget
    used = final_count(plan.hill.name, plan.tree_hash, plan.key)
    if used >= plan.budget:
        import shutil

        shutil.rmtree(run_dir, ignore_errors=True)
        spent = "releases of the holdout score (reusable holdout)" if plan.reusable else "--final evals"
        raise NotScored(f"the holdout budget of hill '{plan.hill.name}' is spent: {used} of "
                        f"{plan.budget} {spent} used for tree {plan.tree_hash[:12]}",
                        hint="evals without --final still score on the validation split; "
                             "a new committed version starts a new budget")


def process_start(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks after boot) of process
    `pid`, from /proc; None where it has no entry there. The start time
    tells a process from a later one given the same pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        return fields[0].decode("ascii", "replace"), int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


class Start:
    """The `started` entry of a logged eval, appended once, just before
    its first process (the solution phase or the evaluator) runs anything
    of the hill or the submission (an evaluator boots meanwhile), the
    refusals of the hill and the submission behind it: an eval killed from
    then on (kill -9 after reading a holdout score) is in the log, and
    counts toward the holdout budget. `link` ({seq, mac}) is what the
    outcome line names."""

    __slots__ = ("plan", "envelope", "link")

    def __init__(self, plan: EvalPlan, envelope: Report) -> None:
        self.plan, self.envelope = plan, envelope
        self.link: dict[str, Any] | None = None

    def __call__(self, ctx: EvalContext) -> None:
        if self.link is not None:
            return
        plan, envelope, spec = self.plan, self.envelope, ctx.spec
        pid = os.getpid()
        own = process_start(pid)
        # The longest the watchdog lets the run take: past it (and a margin)
        # an entry with no outcome is abandoned, on any machine.
        passes = 2 if plan.reusable else 1  # a reusable --final runs both splits
        runs = passes * ctx.repeat * (2 if spec["solution"] else 1) + (1 if spec["unit_tests"] else 0)
        record = {"run_id": envelope["run_id"], "hill": plan.hill.name, "tree_hash": envelope["tree_hash"],
                  "final": envelope["final"], "submission_hash": envelope["submission_hash"],
                  "timestamp": report_module.timestamp(), "pid": pid, "host": os.uname().nodename,
                  "pid_start": own[1] if own else None, "timeout_s": spec["timeout"] * runs}
        if plan.request.note is not None:
            record["note"] = plan.request.note
        if plan.reusable:
            record["reusable"] = True
        path = attempts_path(plan.hill.name, plan.log_tree, plan.hill.path)
        entry = chain.append(path, {"started": signing.clean_text(record)}, plan.key)
        self.link = {"seq": entry["seq"], "mac": entry["mac"]}


def finish(plan: EvalPlan, envelope: Report, start: dict[str, Any] | None = None) -> None:
    """Sign, append to the attempts log, and note official reports. The
    line names the eval's `started` entry ({seq, mac}), or null when it
    stopped before one was logged."""
    hill = plan.hill
    envelope.pop("signature", None)
    # Names from the submission and text from the evaluator may hold lone
    # surrogates; the report is UTF-8, so they become visible escapes.
    cleaned = signing.clean_text(envelope)
    plain: Any = envelope  # emptied and refilled in place: the callers hold this dict
    plain.clear()
    plain.update(cleaned)
    envelope["signer"] = plan.key.fingerprint
    envelope["signature"] = signing.sign(envelope, plan.key)
    path = attempts_path(hill.name, plan.log_tree, hill.path)
    entry = chain.append(path, {"report": envelope, "start": start}, plan.key)
    run_dir = os.path.join(state.runs_dir(hill.name), envelope["run_id"])
    if os.path.isdir(run_dir):
        state.atomic_write(os.path.join(run_dir, "report.json"), json.dumps(envelope, indent=2) + "\n")
    if envelope["official"] and plan.head:
        add_note(hill.repo, plan.head, envelope, entry)
        if envelope.get("status") in ("passing", "failing", "implausible"):
            # Kept by content hash, for `hills rescore` against a later version.
            kept.keep(os.path.join(run_dir, "source"), envelope)
