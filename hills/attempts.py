"""`hills attempts`: a hill version's history, its best reports, and the
state of its chained log, cross-checked against the notes in the hill."""

from __future__ import annotations

import json
import os

from . import chain, evaluate, rank, state
from .report import summary_line

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from .hill import Hill


def notes_head(hill: Hill, tree_hash: str) -> dict[str, Any] | None:
    """The newest {seq, mac} recorded in the notes of commits with `tree_hash`.

    The notes live in the hill's git dir, out of reach of an edit to the log.
    """
    out = hill.repo.run("notes", f"--ref={evaluate.NOTES_REF}", "list", ok_codes=(0, 1))
    best: dict[str, Any] | None = None
    for line in out.splitlines():
        parts = line.split()
        if len(parts) != 2:
            continue
        note_id, commit_id = parts
        if hill.repo.tree_of(commit_id) != tree_hash:
            continue
        body = hill.repo.run("cat-file", "blob", note_id)
        for record in body.splitlines():
            if not record.strip():
                continue
            try:
                attempt = json.loads(record).get("attempt")
            except ValueError:
                continue
            if attempt and (best is None or attempt["seq"] > best["seq"]):
                best = {"seq": attempt["seq"], "mac": attempt["mac"]}
    return best


def _log_path(hill: Hill, current: bool, tree_hash: str | None) -> tuple[str | None, str | None]:
    if current:
        return None, evaluate.attempts_path(hill.name, None, hill.path)
    if tree_hash is None:
        head = hill.repo.head()
        tree_hash = hill.repo.tree_of(head) if head else None
    if tree_hash is None:
        return None, None
    return tree_hash, evaluate.attempts_path(hill.name, tree_hash)


def collect(hill: Hill, current: bool = False, tree_hash: str | None = None) -> dict[str, Any]:
    from .trust import machine_keys, trusted

    key = machine_keys()
    tree_hash, path = _log_path(hill, current, tree_hash)
    result: dict[str, Any] = {"hill": hill.name, "tree_hash": tree_hash, "log": path, "attempts": [], "best": [],
              "chain": {"ok": True, "count": 0, "problems": [], "break_line": None}}
    if path is None:
        return result
    verdict = chain.verify(path, key)
    problems = list(verdict.problems)
    break_line = verdict.break_line
    if tree_hash:
        head = notes_head(hill, tree_hash)
        if head is not None:
            by_notes = chain.verify(path, key, head=head)
            for problem in by_notes.problems:
                if problem not in problems:
                    problems.append(problem + " (checked against the hill's notes)")
            if by_notes.break_line and (break_line is None or by_notes.break_line < break_line):
                break_line = by_notes.break_line
    result["chain"] = {"ok": not problems, "count": verdict.count, "problems": problems, "break_line": break_line}
    items: list[tuple[str, dict[str, Any]]] = []
    for index, entry in enumerate(chain.read(path) if os.path.exists(path) else []):
        report = entry.get("report")
        if not isinstance(report, dict):
            continue
        result["attempts"].append({"seq": entry.get("seq"), "line": index + 1, "report": report})
        items.append((f"seq {entry.get('seq')}", report))
    ranked = rank.rank(items, key, trusted())
    result["best"] = [{"primary": g["primary"], "params_apart": g["params_apart"],
                       "source": g["entries"][0]["source"],
                       "report": g["entries"][0]["report"], "candidates": len(g["entries"]),
                       "noise": len(g["entries"]) > 1 and g["entries"][1]["noise"]}
                      for g in ranked["groups"]]
    return result


def logged_reports(hill: Hill) -> list[tuple[str, dict[str, Any]]]:
    """[(source, report)] from the attempts log of the hill's HEAD."""
    tree_hash, path = _log_path(hill, False, None)
    if not path or not os.path.exists(path):
        return []
    return [(f"{hill.name} seq {entry.get('seq')}", entry["report"])
            for entry in chain.read(path) if isinstance(entry.get("report"), dict)]


def render(result: dict[str, Any], emit: Callable[[str], object]) -> None:
    tree = (result["tree_hash"] or "working tree")[:12]
    emit(f"{result['hill']} @ {tree}: {len(result['attempts'])} attempt(s)")
    if result["attempts"]:
        emit(f"  {'SEQ':>4}  {'TIMESTAMP':<20}  {'SUBMISSION':<19}  RESULT")
    for attempt in result["attempts"]:
        report = attempt["report"]
        flags = "" if report.get("official") else "  (unofficial)"
        reason = f"  - {report['reason']}" if report.get("reason") and report.get("status") != "passing" else ""
        emit(f"  {attempt['seq']!s:>4}  {report.get('timestamp', '?'):<20}  "
             f"{(report.get('submission_hash') or '-')[:19]:<19}  {summary_line(report)}{flags}{reason}")
    if result["best"]:
        emit("best:")
        for best in result["best"]:
            primary = "  ".join(f"{p['name']}={p['value']}" for p in best["primary"]) or "no primary config"
            if best.get("params_apart"):
                primary += "; ranked apart: " + rank.apart_text(best["params_apart"])
            emit(f"  [{primary}] {best['source']}: {summary_line(best['report'])} "
                 f"(of {best['candidates']} passing)"
                 + ("; its lead over the runner-up is within the replicate spread: noise" if best["noise"] else ""))
    chain_state = result["chain"]
    if chain_state["ok"]:
        emit(f"chain intact: {chain_state['count']} entr{'y' if chain_state['count'] == 1 else 'ies'}")
    else:
        emit(f"chain BROKEN at line {chain_state['break_line']} of {result['log']}")
        for problem in chain_state["problems"]:
            emit(f"  {problem}")
