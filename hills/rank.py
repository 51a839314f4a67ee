"""Ranking reports: verify, group by hill tree and primary config, sort
lexicographically by metrics in their own directions."""

from __future__ import annotations

import json

from . import signing
from .replicates import within_noise

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Any

    from .trust import Keys, Signer


def primary_tuple(report: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple((c["name"], json.dumps(c.get("value"), sort_keys=True))
                 for c in report.get("config", []) if c.get("primary"))


def group_key(report: dict[str, Any]) -> tuple[Any, Any, tuple[tuple[str, str], ...]]:
    return (report.get("hill"), report.get("tree_hash"), primary_tuple(report))


def sort_key(report: dict[str, Any], order: Sequence[tuple[str, str]]) -> list[tuple[int, float]]:
    """Lexicographic by the group's metric order; max metrics negated; a
    missing metric sorts last."""
    values = {m["name"]: m for m in report.get("metrics", [])}
    key: list[tuple[int, float]] = []
    for name, direction in order:
        metric = values.get(name)
        if metric is None:
            key.append((1, 0.0))
        else:
            key.append((0, -metric["value"] if direction == "max" else metric["value"]))
    return key


def rank(items: Iterable[tuple[str, dict[str, Any]]], keys: Keys,
         allowed: Sequence[Signer] | None = None) -> dict[str, list[dict[str, Any]]]:
    """items: [(source, report)]. Returns {"groups": [...], "apart": [...]}.

    Only reports with a valid signature, official and passing are ranked;
    everything else is listed apart with the reason.
    """
    groups: dict[tuple[Any, Any, tuple[tuple[str, str], ...]], list[tuple[str, dict[str, Any]]]] = {}
    apart = []
    items = list(items)
    if len(items) > 8:
        from .trust import check_many

        check_many()  # a few ms per check in plain Python: many reports pay for the import
    for source, report in items:
        ok, reason = signing.verify(report, keys, allowed)
        if not ok:
            apart.append({"source": source, "report": report, "reason": reason})
            continue
        if not report.get("official", False):
            apart.append({"source": source, "report": report,
                          "reason": "unofficial: " + (report.get("official_reason") or report.get("trust") or "")})
            continue
        if report.get("status", "passing" if report.get("passed") else "failing") != "passing":
            apart.append({"source": source, "report": report,
                          "reason": f"status {report.get('status')}: " + (report.get("reason") or "not passed")})
            continue
        groups.setdefault(group_key(report), []).append((source, report))
    ranked = []
    for (hill, tree_hash, primary), members in groups.items():
        order = [(m["name"], m["direction"]) for m in members[0][1].get("metrics", [])]
        members.sort(key=lambda item: sort_key(item[1], order))
        ranked.append({"hill": hill, "tree_hash": tree_hash,
                       "primary": [{"name": n, "value": json.loads(v)} for n, v in primary],
                       "metric_order": [{"name": n, "direction": d} for n, d in order],
                       "entries": _entries(members, order)})
    ranked.sort(key=lambda g: (g["hill"] or "", g["tree_hash"] or "", json.dumps(g["primary"])))
    return {"groups": ranked, "apart": apart}


def _entries(members: Sequence[tuple[str, dict[str, Any]]],
             order: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """Ranked entries; `noise` marks a report whose gap to the one above it is
    within the replicate spread of either, so the order between them is noise."""
    entries = []
    for index, (source, report) in enumerate(members):
        entry: dict[str, Any] = {"position": index + 1, "source": source, "report": report, "noise": False}
        if index and order:
            entry["noise"] = within_noise(members[index - 1][1], report, order[0][0])
        entries.append(entry)
    return entries
