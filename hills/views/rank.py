"""Ranking reports: verify, group by hill tree, primary config and params
(all but the neutral ones), sort lexicographically by metrics in their own
directions."""

from __future__ import annotations

import json
from json.encoder import INFINITY as _INF, encode_basestring_ascii

from ..evidence import signing
from ..run import noise
from ..run.replicates import within_noise

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Any

    from ..evidence.trust import Keys, Signer

    GroupKey = tuple[Any, Any, tuple[tuple[str, str], ...], tuple[tuple[str, str], ...], str | None]


def _text(value: object) -> str:
    """`json.dumps(value, sort_keys=True)`, the common scalars without
    building an encoder: a ranking of 10,000 reports writes 100,000 of them."""
    if type(value) is str:
        return encode_basestring_ascii(value)
    if type(value) is int:
        return int.__repr__(value)
    if type(value) is float and value == value and value not in (_INF, -_INF):
        return float.__repr__(value)
    if value is None or type(value) is bool:
        return "null" if value is None else "true" if value else "false"
    return json.dumps(value, sort_keys=True)


def primary_tuple(report: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """The config entries that decide comparability: the primary ones, and
    `isolation` whatever its flag (reports made before it was primary say
    false), so a report made unconfined never ranks beside a confined one."""
    return tuple((c["name"], _text(c.get("value")))
                 for c in report.get("config", []) if c.get("primary") or c.get("name") == "isolation")


def param_tuple(report: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """The param values that decide comparability: every param but those the
    hill declares neutral, so that a loosened param never ranks beside the
    default (a report that names no neutral params has none)."""
    params, neutral = report.get("params"), report.get("neutral_params")
    if not isinstance(params, dict):
        return ()
    skip = neutral if isinstance(neutral, list) else []
    return tuple(sorted((name, _text(value)) for name, value in params.items() if name not in skip))


def group_key(report: dict[str, Any], known: dict[int, GroupKey] | None = None) -> GroupKey:
    """Reports rank together with the same hill version, primary config and
    params; for a hill with timing metrics, on the same hardware too.
    `known`: the keys worked out already in this call, by the report
    object's id (the caller keeps the reports alive meanwhile)."""
    if known is not None:
        found = known.get(id(report))
        if found is not None:
            return found
    from ..run.measures import same_machine_key

    key = (report.get("hill"), report.get("tree_hash"), primary_tuple(report), param_tuple(report),
           same_machine_key(report))
    if known is not None:
        known[id(report)] = key
    return key


def params_apart(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The params by which a report ranks apart from the hill's defaults:
    `{name, value, default}` for each param, not neutral, whose value is not
    its default; every such param, default null, when the report names no
    defaults (one made before reports carried them)."""
    defaults = report.get("param_defaults")
    apart = []
    for name, value_text in param_tuple(report):
        default = defaults.get(name) if isinstance(defaults, dict) else None
        if isinstance(defaults, dict) and name in defaults and json.dumps(default, sort_keys=True) == value_text:
            continue
        apart.append({"name": name, "value": json.loads(value_text), "default": default})
    return apart


def apart_text(apart: Sequence[dict[str, Any]]) -> str:
    """`params_apart` for a person: `tolerance=0.001 (default 1e-09)`."""
    return "  ".join(f"{p['name']}={p['value']} "
                     + (f"(default {p['default']})" if p["default"] is not None else "(default not recorded)")
                     for p in apart)


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


def rank(items: Iterable[tuple[str, dict[str, Any]]], keys: Keys, allowed: Sequence[Signer] | None = None,
         verdicts: Sequence[signing.Verdict | None] | None = None,
         known: dict[int, GroupKey] | None = None) -> dict[str, list[dict[str, Any]]]:
    """items: [(source, report)]. Returns {"groups": [...], "apart": [...]}.

    Only reports with a valid signature, official and passing are ranked;
    everything else is listed apart with the reason. `verdicts`, in the
    order of `items`, are those already checked (a None is checked here).
    """
    groups: dict[GroupKey, list[tuple[str, dict[str, Any]]]] = {}
    apart = []
    items = list(items)
    given = list(verdicts) if verdicts is not None else [None] * len(items)
    if len(items) != len(given):
        raise ValueError("rank: one verdict per item")
    if sum(1 for verdict in given if verdict is None) > 8:
        from ..evidence.trust import check_many

        check_many()  # a few ms per check in plain Python: many reports pay for the import
    for (source, report), said in zip(items, given):
        ok, reason = said if said is not None else signing.verify(report, keys, allowed)
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
        groups.setdefault(group_key(report, known), []).append((source, report))
    ranked = []
    for (hill, tree_hash, primary, _params, machine), members in groups.items():
        order = [(m["name"], m["direction"]) for m in members[0][1].get("metrics", [])]
        # In the order given (a log's order for -H): the first is the baseline.
        chosen = noise.selection([report for _, report in members])
        members.sort(key=lambda item: sort_key(item[1], order))
        ranked.append({"hill": hill, "tree_hash": tree_hash,
                       "primary": [{"name": n, "value": json.loads(v)} for n, v in primary],
                       "params_apart": params_apart(members[0][1]),
                       "metric_order": [{"name": n, "direction": d} for n, d in order],
                       "fingerprint": json.loads(machine) if machine else None,
                       "selection": chosen, "entries": _entries(members, order)})
    # The hill's defaults first: the groups with other params are the exceptions.
    ranked.sort(key=lambda g: (g["hill"] or "", g["tree_hash"] or "", json.dumps(g["primary"]),
                               bool(g["params_apart"]), json.dumps(g["params_apart"], sort_keys=True)))
    return {"groups": ranked, "apart": apart}


def _entries(members: Sequence[tuple[str, dict[str, Any]]],
             order: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """Ranked entries; `noise` marks a report whose gap to the one above it is
    within noise (hills.run.replicates.within_noise), so the order between
    them is noise; `noise_label` says how large its noise is."""
    entries = []
    for index, (source, report) in enumerate(members):
        entry: dict[str, Any] = {"position": index + 1, "source": source, "report": report, "noise": False,
                                 "noise_label": noise.report_label(report)}
        if index and order:
            entry["noise"] = within_noise(members[index - 1][1], report, order[0][0])
        entries.append(entry)
    return entries
