"""Re-scoring: `hills rescore` runs the submission snapshots of official
evals (kept by content hash, hills/run/kept.py) against a newer version of
the hill and lists the scores that moved, worst collapse first
(docs/verdicts.md)."""

from __future__ import annotations

import json
import math
import os

from ..base.errors import NotScored, UsageError
from ..evidence import chain
from ..run import evaluate, kept, logbook, pinned
from ..run.plan import is_dirty

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping
    from typing import Any

    from ..disk.hill import Hill

def resolve_tree(hill: Hill, text: str) -> str:
    """The tree hash named by `text`: a tree hash whose attempts log hills
    holds, or anything git names a commit by."""
    if len(text) == 40 and os.path.exists(logbook.attempts_path(hill.name, text.lower())):
        return text.lower()
    try:
        return hill.repo.tree_of(text)
    except Exception:
        raise UsageError(f"--from '{text}': not a version of hill '{hill.name}'",
                         hint=f"give a commit or tree hash; 'hills log {hill.name}' lists the versions") from None


def _moved(old: dict[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """One row: the old and new primary metric and status, and how far the
    score collapsed (positive: worse now; a report no longer passing is
    the worst)."""
    def primary(report: Mapping[str, Any]) -> tuple[str | None, str, float | None]:
        metrics = report.get("metrics") or []
        if not metrics:
            return None, "max", None
        return metrics[0].get("name"), metrics[0].get("direction", "max"), metrics[0].get("value")

    name, direction, before = primary(old)
    _, _, after = primary(new)
    if new.get("status") != "passing" and old.get("status") == "passing":
        collapse = math.inf
    elif before is None or after is None:
        collapse = 0.0 if before == after else math.inf
    else:
        collapse = (before - after) if direction == "max" else (after - before)
    return {"submission_hash": old.get("submission_hash"), "metric": name, "direction": direction,
            "old": before, "new": after, "old_status": old.get("status"), "new_status": new.get("status"),
            "collapse": collapse, "run_id": new.get("run_id"),
            "moved": before != after or old.get("status") != new.get("status")}


def _param_texts(report: dict[str, Any], declared: Iterable[str]) -> tuple[str, ...]:
    params: dict[str, Any] = report["params"] if isinstance(report.get("params"), dict) else {}
    return tuple(f"{name}={value if isinstance(value, str) else json.dumps(value)}"
                 for name, value in sorted(params.items()) if name in declared)


def rescore(hill: Hill, from_tree: str, say: Callable[[str], None]) -> dict[str, Any]:
    """Re-run each official report of version `from_tree` whose snapshot is
    kept against the hill's HEAD, as ordinary logged evals; the rows, worst
    collapse first, and the reports whose snapshot is gone."""
    head = hill.repo.head()
    if head is None:
        raise UsageError(f"hill '{hill.name}' has no commits yet")
    # Refused before any eval: each would be refused the same way, after
    # the snapshots were looked up and the first re-score begun.
    changed = is_dirty(hill)
    if changed:
        raise NotScored(f"hill '{hill.name}' has uncommitted changes ({', '.join(changed[:3])}"
                        + (", ..." if len(changed) > 3 else "") + "): rescore scores its last commit only when clean",
                        hint=f"commit them first ('hills commit {hill.name} -m MESSAGE'), or discard them "
                             f"('hills restore {hill.name}')")
    log = logbook.attempts_path(hill.name, from_tree)
    if not os.path.exists(log):
        raise UsageError(f"hill '{hill.name}' has no attempts logged at tree {from_tree[:12]}",
                         hint=f"'hills log {hill.name}' lists the versions")
    seen: set[str] = set()
    rows, missing = [], []
    spec = pinned.pinned_manifest(hill, pinned.pinned_tree(hill, head))
    for entry in chain.read(log):
        old = entry.get("report")
        if not isinstance(old, dict) or not old.get("official") or old.get("status") in ("refused", "interrupted"):
            continue
        identity = json.dumps([old.get("submission_hash"), old.get("params"), old.get("trial"), old.get("final")],
                              sort_keys=True)
        if identity in seen:
            continue
        seen.add(identity)
        folder = kept.kept(str(old.get("submission_hash")))
        if folder is None:
            missing.append(old.get("submission_hash"))
            continue
        say(f"hills: re-scoring {str(old.get('submission_hash'))[:19]}")
        request = evaluate.EvalRequest(hill, folder, _param_texts(old, spec["params"]), final=bool(old.get("final")),
                                       knobs=old.get("trial") if isinstance(old.get("trial"), dict) else None)
        outcome = evaluate.evaluate(request, say=say)
        new = outcome.report
        row = _moved(old, new)
        if new.get("submission_hash") != old.get("submission_hash"):
            row.update(moved=True, collapse=math.inf, new_status="changed",
                       note="the kept snapshot no longer hashes to the report's submission_hash")
        rows.append(row)
    rows.sort(key=lambda row: -row["collapse"] if row["collapse"] == row["collapse"] else 0)
    return {"hill": hill.name, "from_tree": from_tree, "to_tree": pinned.pinned_tree(hill, head),
            "rows": rows, "moved": [row for row in rows if row["moved"]], "missing": missing}
