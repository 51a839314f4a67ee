"""`hills attempts`: a hill version's history, its best reports, and the
state of its chained log, cross-checked against the notes in the hill; an
eval whose `started` entry has no outcome is running or abandoned."""

from __future__ import annotations

import os
import time

from ..base import state
from ..evidence import chain, signing
from ..evidence.checked import report_verdicts
from ..run import logbook, noise
from . import numbers, rank
from ..run.replicates import within_noise
from ..evidence.report import summary_line

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

    from ..disk.hill import Hill
    from ..evidence.trust import Keys, Signer

# How long past its watchdog's limit (the started entry's `timeout_s`) an
# eval with no outcome may still be finishing: copying, signing, a busy machine.
ABANDON_MARGIN_S = 60


def _started_at(started: dict[str, Any]) -> float | None:
    import calendar

    try:
        return calendar.timegm(time.strptime(str(started.get("timestamp")), "%Y-%m-%dT%H:%M:%SZ"))
    except ValueError:
        return None


def _run_in_use(started: dict[str, Any]) -> bool | None:
    """Whether the eval's run folder is still locked by its eval (held from
    before the started entry to after the outcome line, and let go when its
    process dies, kill -9 included); None when the folder is gone."""
    import fcntl

    run_id, hill = started.get("run_id"), started.get("hill")
    if not (isinstance(run_id, str) and isinstance(hill, str) and run_id.replace("-", "").isalnum()
            and hill and "/" not in hill and not hill.startswith(".")):
        return None
    try:
        fd = os.open(os.path.join(state.runs_dir(hill), run_id, ".in-use"), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return None
    finally:
        os.close(fd)
    return False


def still_running(started: dict[str, Any], now: float | None = None) -> bool:
    """Whether the hills process that wrote a `started` entry may still log
    its outcome: the entry is younger than its watchdog's limit plus a
    margin and, on this machine, the eval still holds its run folder's lock
    (or, with the folder gone, its process lives: the same pid and start
    time, not a zombie). From another machine only the age tells."""
    began = _started_at(started)
    limit = started.get("timeout_s")
    limit = limit if isinstance(limit, (int, float)) and not isinstance(limit, bool) else 0
    now = time.time() if now is None else now
    if began is None or now - began > limit + ABANDON_MARGIN_S:
        return False
    if started.get("host") != os.uname().nodename:
        return True
    in_use = _run_in_use(started)
    if in_use is not None:
        return in_use
    pid = started.get("pid")
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        return False
    found = logbook.process_start(pid)
    if found is None:
        return False
    process_state, began_ticks = found
    return process_state not in ("Z", "X") and started.get("pid_start") in (None, began_ticks)


def _without_outcome(entries: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """(line index, entry) of each `started` entry that no outcome line
    names, by its run id or by the outcome's `start`."""
    run_ids, seqs = set(), set()
    for entry in entries:
        report = entry.get("report")
        if isinstance(report, dict):
            run_ids.add(report.get("run_id"))
            start = entry.get("start")
            if isinstance(start, dict):
                seqs.add(start.get("seq"))
    found = []
    for index, entry in enumerate(entries):
        started = entry.get("started")
        if isinstance(started, dict) and entry.get("seq") not in seqs \
                and (started.get("run_id") is None or started.get("run_id") not in run_ids):
            found.append((index, entry))
    return found


def unfinished(entries: list[dict[str, Any]], now: float | None = None) -> list[dict[str, Any]]:
    """The evals of a log whose `started` entry has no outcome: [{seq, line,
    run_id, status, started}], status `running` while its hills process may
    still log the outcome, else `abandoned` (killed, or its machine went
    down); at a cluster head, `lost`, `rejected` or `failed` with the
    `cluster` entry that says so."""
    # A cluster head notes how an eval it sent ended without a report it
    # accepted (`cluster` entries naming the started entry): that, not abandoned.
    noted: dict[Any, dict[str, Any]] = {}
    for entry in entries:
        note = entry.get("cluster")
        if isinstance(note, dict) and isinstance(note.get("start"), dict):
            noted[note["start"].get("seq")] = note
    rows = []
    for index, entry in _without_outcome(entries):
        note = noted.get(entry.get("seq"))
        status = str(note.get("event")) if note is not None else \
            "running" if still_running(entry["started"], now) else "abandoned"
        row = {"seq": entry.get("seq"), "line": index + 1, "run_id": entry["started"].get("run_id"),
               "status": status, "started": entry["started"]}
        if note is not None:
            row["cluster"] = note
        rows.append(row)
    return rows


def numbered(entries: list[dict[str, Any]]) -> dict[int, int]:
    """The attempt number of each eval of a log, by the index of its lines
    (its started entry and its outcome get the same number): evals counted
    1, 2, 3... in the order of their first line, the `started` entry, or
    the outcome itself for an eval stopped before one was logged (and for
    logs from before started entries). The one numbering of `attempts`,
    `rank -H` and the journal (docs/noise.md): an eval's number is fixed
    when it starts, so a running one keeps it once it ends, and the log's
    `seq`, which counts started entries and notes too, never shows as one."""
    starts = {entry.get("seq"): index for index, entry in enumerate(entries)
              if isinstance(entry.get("started"), dict)}
    firsts = set(starts.values())
    owner: dict[int, int] = {}  # outcome line -> the first line of its eval
    for index, entry in enumerate(entries):
        if not isinstance(entry.get("report"), dict):
            continue
        start = entry.get("start")
        begun = starts.get(start.get("seq")) if isinstance(start, dict) else None
        # No started entry in the log (stopped before one, an older log): the outcome is the eval's first line.
        owner[index] = begun if begun is not None and begun < index else index
        firsts.add(owner[index])
    number = {index: count for count, index in enumerate(sorted(firsts), 1)}
    return {**{index: number[index] for index in starts.values()},
            **{index: number[first] for index, first in owner.items()}}


def notes_head(hill: Hill, tree_hash: str) -> dict[str, Any] | None:
    """The newest {seq, mac} recorded in the notes of commits with `tree_hash`
    (either layout of a note: logbook.note_summary).

    The notes live in the hill's git dir, out of reach of an edit to the log.
    """
    out = hill.repo.run("notes", f"--ref={logbook.NOTES_REF}", "list", ok_codes=(0, 1))
    best: dict[str, Any] | None = None
    for line in out.splitlines():
        parts = line.split()
        if len(parts) != 2:
            continue
        note_id, commit_id = parts
        if hill.repo.tree_of(commit_id) != tree_hash:
            continue
        newest = logbook.note_summary(hill.repo.run("cat-file", "blob", note_id))[1]
        if newest is not None and (best is None or newest["seq"] > best["seq"]):
            best = newest
    return best


def _log_path(hill: Hill, current: bool, tree_hash: str | None) -> tuple[str | None, str | None]:
    if current:
        return None, logbook.attempts_path(hill.name, None, hill.path)
    if tree_hash is None:
        head = hill.repo.head()
        tree_hash = hill.repo.tree_of(head) if head else None
    if tree_hash is None:
        return None, None
    return tree_hash, logbook.attempts_path(hill.name, tree_hash)


def collect(hill: Hill, current: bool = False, tree_hash: str | None = None) -> dict[str, Any]:
    """A version's attempts, best reports, unfinished evals and the state
    of its log's chain (`hills attempts --json`)."""
    return checked(hill, current, tree_hash)[0]


def checked(hill: Hill, current: bool = False, tree_hash: str | None = None, keys: Keys | None = None,
            allowed: Sequence[Signer] | None = None) -> tuple[dict[str, Any], list[signing.Verdict]]:
    """`collect`, and the verdict on each attempt's signature (in the order
    of its `attempts`): one walk of the log checks its chain against its
    head and the notes' head and parses it, and each report's signature is
    checked once (hills.evidence.checked), for the ranking and the journal."""
    from ..evidence.trust import machine_keys, trusted

    key = keys if keys is not None else machine_keys()
    allowed = allowed if allowed is not None else trusted()
    tree_hash, path = _log_path(hill, current, tree_hash)
    result: dict[str, Any] = {"hill": hill.name, "tree_hash": tree_hash, "log": path, "attempts": [], "best": [],
              "finals": [], "unfinished": [], "chain": {"ok": True, "count": 0, "problems": [], "break_line": None}}
    if path is None:
        return result, []
    walked = chain.walk(path, key, notes_head(hill, tree_hash) if tree_hash else None)
    verdict = walked.report
    problems = list(verdict.problems) + [problem + " (checked against the hill's notes)" for problem in walked.also]
    result["chain"] = {"ok": not problems, "count": verdict.count, "problems": problems,
                       "break_line": verdict.break_line}
    items: list[tuple[str, dict[str, Any]]] = []
    entries = walked.entries
    verdicts = report_verdicts(path, walked, key, allowed)
    # A started entry is not a report: it shows only while no outcome names it.
    result["unfinished"] = unfinished(entries)
    if any(row["status"] == "abandoned" for row in result["unfinished"]):
        # An eval lets go of its run folder once its outcome is logged: read
        # again, so one that finished meanwhile is not called abandoned.
        again = chain.read(path)
        still = {entry.get("seq") for _, entry in _without_outcome(again)}
        result["unfinished"] = [row for row in result["unfinished"] if row["seq"] in still]
    number = numbered(entries)
    for row in result["unfinished"]:
        row["number"] = number.get(row["line"] - 1)
    said = []
    for index, entry in enumerate(entries):
        report = entry.get("report")
        if not isinstance(report, dict):
            continue
        result["attempts"].append({"number": number[index], "seq": entry.get("seq"), "line": index + 1,
                                   "report": report})
        items.append((f"#{number[index]}", report))
        said.append(verdicts[index])
    known: dict[int, Any] = {}  # each report's group key, worked out once
    against_best(result["attempts"], known)
    ranked = rank.rank(items, key, allowed, said, known)
    result["best"] = [{"primary": g["primary"], "params_apart": g["params_apart"],
                       "source": g["entries"][0]["source"],
                       "report": g["entries"][0]["report"], "candidates": len(g["entries"]),
                       "noise": len(g["entries"]) > 1 and g["entries"][1]["noise"],
                       "noise_label": noise.report_label(g["entries"][0]["report"]),
                       "selection": g["selection"]}
                      for g in ranked["groups"]]
    result["finals"] = finals_beside_validation(result["attempts"])
    return result, said


def _mode(report: dict[str, Any]) -> object:
    return next((c.get("value") for c in report.get("config") or [] if isinstance(c, dict)
                 and c.get("name") == "mode"), None)


def finals_beside_validation(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each passing, official `--final` attempt beside the validation score
    of the same submission (its latest before it), else the best validation
    score of its comparable group so far, each with its 95% interval:
    [{number, seq, final, validation, validation_number, validation_seq,
    same_submission}]."""
    found = []
    latest: dict[object, dict[str, Any]] = {}
    for row in rows:
        report = row["report"]
        if report.get("status") != "passing" or not report.get("official"):
            continue
        if not report.get("final"):
            latest[report.get("submission_hash")] = row
            continue
        beside = latest.get(report.get("submission_hash"))
        same = beside is not None
        if beside is None:
            # The group the same eval would have had on validation: the key without its mode.
            wanted = _without_mode(report)
            order = [(m["name"], m["direction"]) for m in report.get("metrics", []) if isinstance(m, dict)]
            candidates = [r for r in latest.values() if _without_mode(r["report"]) == wanted]
            beside = min(candidates, key=lambda r: rank.sort_key(r["report"], order)) if candidates else None
        found.append({"number": row.get("number"), "seq": row["seq"], "final": noise.interval(report),
                      "validation": noise.interval(beside["report"]) if beside else None,
                      "validation_number": beside.get("number") if beside else None,
                      "validation_seq": beside["seq"] if beside else None, "same_submission": same})
    return found


def _without_mode(report: dict[str, Any]) -> object:
    key = rank.group_key(report)
    return (key[0], key[1], tuple(entry for entry in key[2] if entry[0] != "mode"), key[3], key[4])


def against_best(rows: list[dict[str, Any]], known: dict[int, Any] | None = None) -> None:
    """Set each row's `best_before` (the first metric of the best passing,
    official report of its comparable group before it, or None), `noise`
    (its gap to that best is within noise: hills.run.replicates.within_noise)
    and `new_best` (it ranks above all of those, beyond noise), in log
    order. The best to beat moves only on a new best, as in the journal: a
    report above it within noise is no new best and leaves it where it is,
    so lucky draws cannot creep it upward, and a gain that adds up beyond
    noise is one. A second eval of the best's own submission is never a
    new best."""
    best: dict[object, dict[str, Any]] = {}
    for row in rows:
        report = row["report"]
        row["best_before"], row["new_best"], row["noise"] = None, False, False
        if report.get("status") != "passing" or not report.get("official"):
            continue
        key = rank.group_key(report, known)
        order = [(m["name"], m["direction"]) for m in report.get("metrics", []) if isinstance(m, dict)]
        held = best.get(key)
        if held is not None:
            first = (held.get("metrics") or [{}])[0]
            row["best_before"] = first.get("value") if isinstance(first, dict) else None
            row["noise"] = bool(order) and within_noise(held, report, order[0][0])
        again = bool(report.get("submission_hash")) and report.get("submission_hash") == (held or {}).get(
            "submission_hash")
        if held is None or (rank.sort_key(report, order) < rank.sort_key(held, order) and not row["noise"]
                            and not again):
            row["new_best"] = True
            best[key] = report


def _first_value(report: dict[str, Any]) -> object:
    metrics = report.get("metrics")
    first = metrics[0] if isinstance(metrics, list) and metrics else None
    return first.get("value") if isinstance(first, dict) else None


def _versus(attempt: dict[str, Any]) -> str:
    """The VS BEST column: the change from the best before it, `first`
    for a group's first passing report, `*` marking a new best (beyond
    noise) and `~` a gap within noise."""
    before = attempt.get("best_before")
    if before is None:
        return "first" if attempt.get("new_best") else ""
    return (numbers.change(_first_value(attempt["report"]), before) + (" *" if attempt.get("new_best") else "")
            + (" ~" if attempt.get("noise") else ""))


def logged_reports(hill: Hill) -> tuple[list[tuple[str, dict[str, Any]]], list[signing.Verdict]]:
    """[(source, report)] from the attempts log of the hill's HEAD, and the
    verdict on each one's signature, each checked once
    (hills.evidence.checked)."""
    from ..evidence.trust import machine_keys, trusted

    tree_hash, path = _log_path(hill, False, None)
    if not path or not os.path.exists(path):
        return [], []
    key = machine_keys()
    walked = chain.walk(path, key)
    verdicts = report_verdicts(path, walked, key, trusted())
    entries = walked.entries
    number = numbered(entries)
    indexes = [index for index, entry in enumerate(entries) if isinstance(entry.get("report"), dict)]
    return ([(f"{hill.name} #{number[index]}", entries[index]["report"]) for index in indexes],
            [verdicts[index] for index in indexes])


def bests(hill: Hill) -> list[dict[str, Any]]:
    """The best official report of each comparable group of the HEAD's
    log, for `hills describe --json`: [{primary, params_apart, source,
    metric, value, candidates, noise_label, selection}]."""
    from ..evidence.trust import machine_keys, trusted

    found = []
    items, verdicts = logged_reports(hill)
    for group in rank.rank(items, machine_keys(), trusted(), verdicts)["groups"]:
        top = group["entries"][0]
        first = _first_value(top["report"])
        found.append({"primary": group["primary"], "params_apart": group["params_apart"], "source": top["source"],
                      "metric": group["metric_order"][0]["name"] if group["metric_order"] else None,
                      "value": first, "candidates": len(group["entries"]), "noise_label": top["noise_label"],
                      "selection": group["selection"]})
    return found


def _attempt_row(attempt: dict[str, Any], digits: int = numbers.LEAST_DIGITS) -> str:
    report = attempt["report"]
    flags = "" if report.get("official") else "  (unofficial)"
    ab = report.get("ab")
    if isinstance(ab, dict):  # a run of an A/B: one draw of its side, never a best (hills/many/verdict.py)
        flags = f"  (A/B run: {ab.get('role')}, pair {ab.get('pair')} of {ab.get('of')}, A/B {ab.get('id')})"
    reason = f"  - {report['reason']}" if report.get("reason") and report.get("status") != "passing" else ""
    from ..run.measures import audit_flag

    flag = audit_flag(report)
    return (f"  {'#' + str(attempt['number']):>4}  {report.get('timestamp', '?'):<20}  "
            f"{(report.get('submission_hash') or '-')[:19]:<19}  {_versus(attempt):>12}  "
            f"{summary_line(report, digits)}{flags}{reason}"
            + (f"  ! {flag}" if flag else ""))


def _unfinished_row(row: dict[str, Any]) -> str:
    started = row["started"]
    final = "" if started.get("final") is not True else (
        " (--final, reusable holdout: spends nothing without a release)" if started.get("reusable") is True
        else " (--final: counts toward the holdout budget)")
    where = f"pid {started.get('pid')} on {started.get('host')}"
    said = (f"ABANDONED{final}  - started by {where}, which ended without logging an outcome (killed?)"
            if row["status"] == "abandoned" else f"RUNNING{final}  - {where} has not logged its outcome yet")
    note = row.get("cluster")
    if isinstance(note, dict):  # sent to a cluster, which gave no report the head accepted
        said = f"{row['status'].upper()}{final}  - on the cluster: {note.get('reason') or '?'}"
    return (f"  {'#' + str(row.get('number')):>4}  {str(started.get('timestamp', '?')):<20}  "
            f"{str(started.get('submission_hash') or '-')[:19]:<19}  {'':>12}  {said}")


def render(result: dict[str, Any], emit: Callable[[str], object]) -> None:
    tree = (result["tree_hash"] or "working tree")[:12]
    unfinished_rows = result.get("unfinished", [])
    # As many digits as tell every two scores apart: a gain of 1e-6 is not a tie.
    digits = numbers.digits_for(_first_value(attempt["report"]) for attempt in result["attempts"])
    abandoned = sum(1 for row in unfinished_rows if row["status"] == "abandoned")
    emit(f"{result['hill']} @ {tree}: {len(result['attempts']) + len(unfinished_rows)} attempt(s)"
         + (f", {abandoned} abandoned" if abandoned else ""))
    if result["attempts"] or unfinished_rows:
        emit(f"  {'#':>4}  {'TIMESTAMP':<20}  {'SUBMISSION':<19}  {'VS BEST':>12}  RESULT")
    rows = [(attempt["line"], _attempt_row(attempt, digits)) for attempt in result["attempts"]]
    rows += [(row["line"], _unfinished_row(row)) for row in unfinished_rows]
    for _, row in sorted(rows, key=lambda pair: pair[0]):
        emit(row)
    if any(attempt.get("best_before") is not None for attempt in result["attempts"]):
        emit("  (VS BEST: * a new best, beyond noise; ~ within noise of the best before it)")
    if result["best"]:
        emit("best:")
        for best in result["best"]:
            primary = "  ".join(f"{p['name']}={p['value']}" for p in best["primary"]) or "no primary config"
            if best.get("params_apart"):
                primary += "; ranked apart: " + rank.apart_text(best["params_apart"])
            emit(f"  [{primary}] {best['source']}: {summary_line(best['report'], digits)} "
                 f"(of {best['candidates']} passing); {best.get('noise_label') or noise.UNKNOWN}"
                 + ("; its lead over the runner-up is within noise" if best["noise"] else ""))
            chosen = best.get("selection")
            if chosen and chosen["n"] > 1:
                emit(f"      {chosen['label']}")
    for final in result.get("finals") or []:
        beside = (f"; validation {final['validation']} (#{final['validation_number']}, "
                  + ("the same submission)" if final["same_submission"] else "the best validation score)")) \
            if final["validation"] else "; no validation score to set it beside"
        emit(f"  --final #{final['number']}: holdout {final['final']}{beside}")
    chain_state = result["chain"]
    if chain_state["ok"]:
        emit(f"chain intact: {chain_state['count']} entr{'y' if chain_state['count'] == 1 else 'ies'}")
    else:
        emit(f"chain BROKEN at line {chain_state['break_line']} of {result['log']}")
        for problem in chain_state["problems"]:
            emit(f"  {problem}")
