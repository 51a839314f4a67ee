"""What hills itself saw of the submitted code, for the report: the times
and memory hills.sdk measured from outside it (`measured`), the times the
evaluator took from it held against them (`claimed`), what it tried and was
denied (`audit`, docs/audit.md), and the machine it ran on (`fingerprint`)."""

from __future__ import annotations

import json
import os

from ..evidence import report as report_module

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from typing import Any

    from ..evidence.report_types import Report

EVENTS_CAP = 4 * 1024 * 1024
# Starts of submitted code whose cost is the submission's (the frozen unit
# tests are the hill's).
NOT_MEASURED = ("unit_tests",)
DEFAULT_TOLERANCE = 0.5
DEFAULT_SLACK = 0.1
FIRST_ATTEMPTS = 10
# Attempts that are never an honest program's: reaching another process,
# the network, a socket or a path outside the view.
SUSPICIOUS = ("read", "write", "proc", "exec", "network", "socket", "link", "garbled")


def read_events(path: str) -> list[dict[str, Any]]:
    """The `measured` and `audit` events hills.sdk wrote to the run
    folder's record (where submitted code cannot write), in order."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return []
    with open(fd, "rb") as handle:
        raw = handle.read(EVENTS_CAP)
    events = []
    for line in raw.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("event") in ("measured", "audit") \
                and event.get("by") not in NOT_MEASURED:
            events.append(event)
    return events


def _median(values: Iterable[float]) -> float:
    """The median (statistics costs an eval the import of random and fractions)."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _number(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def measured(events: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The report's `measured`: totals over every start of submitted code,
    and the median per replicate that claims are held against."""
    runs = [event for event in events if event.get("event") == "measured"]
    if not runs:
        return None
    per: dict[str, list[float]] = {}
    for event in runs:
        slot = per.setdefault(str(event.get("replicate")), [0.0, 0.0])
        slot[0] += _number(event.get("wall_s"))
        slot[1] += _number(event.get("cpu_s"))
    return {"by": "hills.sdk, outside the submitted code", "runs": len(runs),
            "wall_s": round(sum(_number(e.get("wall_s")) for e in runs), 6),
            "cpu_s": round(sum(_number(e.get("cpu_s")) for e in runs), 6),
            "peak_rss_bytes": int(max(_number(e.get("peak_rss_bytes")) for e in runs)),
            "replicate_wall_s": round(_median(slot[0] for slot in per.values()), 6),
            "replicate_cpu_s": round(_median(slot[1] for slot in per.values()), 6),
            "gpu_s": None}


def claims(metrics: Sequence[Mapping[str, Any]], declared: Sequence[Mapping[str, Any]],
           measure: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The report's `claimed`: each metric hill.yaml declares `claimed`,
    with the measured figure it is held against and whether they agree."""
    values = {metric.get("name"): metric.get("value") for metric in metrics}
    found = []
    for bounds in declared:
        kind = bounds.get("claimed")
        if kind not in ("wall", "cpu") or bounds.get("name") not in values:
            continue
        tolerance = bounds.get("claim_tolerance", DEFAULT_TOLERANCE)
        slack = bounds.get("claim_slack", DEFAULT_SLACK)
        value = values[bounds["name"]]
        seen = measure.get(f"replicate_{kind}_s") if measure else None
        entry: dict[str, Any] = {"metric": bounds["name"], "value": value, "measure": f"{kind}_s",
                                 "measured": seen, "tolerance": tolerance, "slack_s": slack}
        if isinstance(seen, (int, float)) and isinstance(value, (int, float)):
            low, high = seen * (1 - tolerance) - slack, seen * (1 + tolerance) + slack
            entry["agrees"] = low <= value <= high
        else:
            entry["agrees"] = None  # no submitted code ran where hills could time it
        found.append(entry)
    return found


def disagreement(claimed: Sequence[Mapping[str, Any]]) -> str | None:
    """Why the claims make a report unofficial, or None."""
    for entry in claimed:
        if entry.get("agrees") is False:
            return (f"claimed {entry['metric']} {entry['value']:.6g} s disagrees with the {entry['measure']} "
                    f"hills measured, {entry['measured']:.6g} s (tolerance {entry['tolerance']:g}, slack "
                    f"{entry['slack_s']:g} s)")
    return None


def audit(events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The report's `audit`: what submitted code tried outside its view,
    counted by kind, and the first attempts with their paths."""
    runs = [event for event in events if event.get("event") == "audit"]
    counts: dict[str, int] = {}
    first: list[dict[str, str]] = []
    for event in runs:
        for kind, count in (event.get("counts") or {}).items():
            if isinstance(count, int):
                counts[str(kind)] = counts.get(str(kind), 0) + count
        for attempt in event.get("first") or []:
            if len(first) < FIRST_ATTEMPTS and isinstance(attempt, dict):
                first.append({"kind": str(attempt.get("kind")), "path": str(attempt.get("path"))})
    return {"runs": len(runs), "denied": bool(runs) and all(event.get("denied") for event in runs),
            "attempts": sum(counts.values()), "counts": dict(sorted(counts.items())), "first": first,
            "suspicious": any(counts.get(kind) for kind in SUSPICIOUS)}


def attach(envelope: Report, events_path: str, spec: Mapping[str, Any]) -> None:
    """Add `measured`, `claimed`, `audit`, `fingerprint` and `timing_metrics`
    to a report; a claim that disagrees makes it unofficial, with the reason."""
    events = read_events(events_path)
    measure = measured(events)
    envelope["measured"] = measure
    envelope["audit"] = audit(events)
    envelope["fingerprint"] = fingerprint()
    declared = spec.get("metrics") or []
    timing = [bounds["name"] for bounds in declared if bounds.get("timing") or bounds.get("claimed")]
    if timing:
        envelope["timing_metrics"] = timing
    claimed = claims(envelope.get("metrics") or [], declared, measure)
    if not claimed:
        return
    envelope["claimed"] = claimed
    reason = disagreement(claimed)
    if reason and envelope.get("official"):
        envelope.update({"official": False, "official_reason": reason})
    elif reason:
        envelope["official_reason"] = "; ".join(r for r in (envelope.get("official_reason"), reason) if r)


_FINGERPRINT: dict[str, Any] | None = None


def fingerprint() -> dict[str, Any]:
    """The machine, as far as timings depend on it: CPU model and cores,
    GPU models and driver where an NVIDIA driver is loaded. Read from
    /proc, no program run."""
    global _FINGERPRINT
    if _FINGERPRINT is None:
        _FINGERPRINT = {"cpu": _cpu_model(), "cores": os.cpu_count(), "machine": os.uname().machine,
                        "gpu": _gpus()}
    return dict(_FINGERPRINT)


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                name, _, value = line.partition(":")
                if name.strip() in ("model name", "Model", "cpu model", "Processor"):
                    return value.strip() or None
    except OSError:
        pass
    return None


def _gpus() -> list[dict[str, Any]] | None:
    root = "/proc/driver/nvidia"
    try:
        with open(os.path.join(root, "version"), encoding="utf-8", errors="replace") as handle:
            first = handle.readline()
        boards = sorted(os.listdir(os.path.join(root, "gpus")))
    except OSError:
        return None
    words = first.split()
    driver = next((word for word in words if word[:1].isdigit() and "." in word), None)
    found = []
    for board in boards:
        model = None
        try:
            with open(os.path.join(root, "gpus", board, "information"), encoding="utf-8", errors="replace") as handle:
                for line in handle:
                    name, _, value = line.partition(":")
                    if name.strip() == "Model":
                        model = value.strip()
        except OSError:
            pass
        found.append({"model": model, "driver": driver})
    return found or None


def same_machine_key(report: Mapping[str, Any]) -> str | None:
    """What `rank` adds to a group's key for a hill with timing metrics:
    the fingerprint; None for other hills (and reports before fingerprints)."""
    if not report.get("timing_metrics"):
        return None
    return json.dumps(report.get("fingerprint"), sort_keys=True)


def audit_flag(report: Mapping[str, Any]) -> str | None:
    """`SUSPICIOUS: ...` for a report whose audit holds attempts outside the
    view, whatever it scored; None otherwise."""
    entry = report.get("audit")
    if not isinstance(entry, dict) or not entry.get("suspicious"):
        return None
    counts: dict[str, Any] = entry["counts"] if isinstance(entry.get("counts"), dict) else {}
    first: list[Any] = entry["first"] if isinstance(entry.get("first"), list) else []
    named = ", ".join(f"{kind} {count}" for kind, count in counts.items())
    shown = f"; first: {first[0].get('kind')} {first[0].get('path')}" if first and isinstance(first[0], dict) else ""
    verb = "tried and was denied" if entry.get("denied") else "tried outside its view"
    return f"SUSPICIOUS: submitted code {verb} {entry.get('attempts')} time(s) ({named}){shown}"


def show_lines(report: Mapping[str, Any]) -> list[str]:
    """What `hills show` says of `measured`, `claimed`, `audit`, `seeds`
    and `fingerprint`."""
    lines = []
    measure = report.get("measured")
    if isinstance(measure, dict):
        lines.append(f"  measured     wall {measure.get('wall_s')} s  cpu {measure.get('cpu_s')} s  peak memory "
                     f"{_mib(measure.get('peak_rss_bytes'))}  over {measure.get('runs')} run(s) (by hills, outside "
                     "the submitted code)")
    claimed = report.get("claimed")
    for claim in claimed if isinstance(claimed, list) else []:
        if isinstance(claim, dict):
            said = {True: "agrees", False: "DISAGREES", None: "not checked: nothing was measured"}.get(
                claim.get("agrees"), "?")
            lines.append(f"  claimed      {claim.get('metric')} {claim.get('value')} s against measured "
                         f"{claim.get('measure')} {claim.get('measured')} s: {said}")
    entry = report.get("audit")
    if isinstance(entry, dict) and entry.get("runs"):
        flag = audit_flag(report)
        lines.append("  audit        " + (flag or f"nothing outside the view over {entry['runs']} run(s)"))
        attempts: list[Any] = entry["first"] if isinstance(entry.get("first"), list) else []
        for attempt in attempts[:5] if flag else []:
            if isinstance(attempt, dict):
                lines.append(f"                 {attempt.get('kind'):<8} {attempt.get('path')}")
    verdict = report.get("verdict")
    if isinstance(verdict, dict):
        try:
            lines.append("  verdict      " + report_module.verdict_line(report))
        except (TypeError, ValueError, KeyError):
            lines.append("  verdict      (malformed)")
    machine = report.get("fingerprint")
    if isinstance(machine, dict):
        gpus = ", ".join(f"{gpu.get('model')} (driver {gpu.get('driver')})" for gpu in machine.get("gpu") or []
                         if isinstance(gpu, dict))
        lines.append(f"  machine      {machine.get('cpu')}, {machine.get('cores')} cores"
                     + (f"; {gpus}" if gpus else ""))
    return lines


def _mib(value: object) -> str:
    return f"{value / (1024 * 1024):.1f} MiB" if isinstance(value, (int, float)) else "?"
