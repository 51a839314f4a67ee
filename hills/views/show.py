"""`hills show`: one report rendered for a person: verdict, metrics with
their spread, the report block worst segment first, and the instances."""

from __future__ import annotations

from .rank import apart_text, params_apart
from ..evidence.report import subject_line, summary_line

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any


def _number(value: object) -> str:
    return f"{value:.6g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)


def _noise_line(report: dict[str, Any]) -> str:
    """The report's noise label, and what it comes from (hills-report(5), `noise`)."""
    from ..run.noise import report_label

    line = report_label(report)
    noise = report.get("noise")
    if not isinstance(noise, dict):
        return line
    items, reps = noise.get("items"), noise.get("replicates")
    parts = []
    if isinstance(items, dict):
        parts.append(f"items: {items.get('n')} by {items.get('aggregate')}, se {_number(items.get('se'))}"
                     f" ({items.get('method')})")
    elif noise.get("items_reason"):
        parts.append(f"items: none ({noise['items_reason']})")
    if isinstance(reps, dict):
        parts.append(f"replicates: {reps.get('n')}, se {_number(reps.get('se'))}")
    return line + (f"  [{'; '.join(parts)}]" if parts else "")


def _detail(value: object, width: int = 100) -> str:
    """A details value on one line: a number as the metrics are, a string
    as it is, anything else as compact JSON, cut at `width`."""
    if isinstance(value, str):
        text = value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        text = _number(value)
    else:
        import json

        text = json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 1] + "…"


def _worst_first(rows: list[Any], key: str, direction: str) -> list[Any]:
    numeric = [r for r in rows if isinstance(r, dict) and isinstance(r.get(key), (int, float))]
    others = [r for r in rows if r not in numeric]
    return sorted(numeric, key=lambda r: r[key], reverse=direction == "min") + others


def _shaped(report: dict[str, Any]) -> dict[str, Any]:
    """The report with every section the renderer reads in the shape it
    expects (hills-sign signs any JSON object; show must not crash on one)."""
    shaped = dict(report)

    def mapping(value: object) -> dict[Any, Any]:
        return value if isinstance(value, dict) else {}

    def rows(value: object, keys: Iterable[str]) -> list[dict[Any, Any]]:
        return [row for row in value if isinstance(row, dict) and all(k in row for k in keys)] \
            if isinstance(value, list) else []

    shaped["metrics"] = [m for m in rows(report.get("metrics"), ("name", "value"))
                         if isinstance(m["value"], (int, float)) and not isinstance(m["value"], bool)]
    for metric in shaped["metrics"]:
        metric.setdefault("direction", "max")
    shaped["config"] = rows(report.get("config"), ("name", "value"))
    shaped["spread"] = {k: v for k, v in mapping(report.get("spread")).items()
                        if isinstance(v, dict) and {"min", "max", "mad", "n"} <= set(v)}
    for key in ("params", "trial", "side_metrics", "details", "unit_tests", "submission_git"):
        shaped[key] = mapping(report.get(key))
    shaped["instances"] = {k: v for k, v in mapping(report.get("instances")).items()
                           if isinstance(v, (int, float)) and not isinstance(v, bool)}
    shaped["warnings"] = [w for w in report.get("warnings", []) if isinstance(w, str)] \
        if isinstance(report.get("warnings"), list) else []
    return shaped


def render(report: dict[str, Any], verdict_line: str, emit: Callable[[str], object],
           signed_by: str | None = None) -> None:
    """Emit the report's lines, `verdict_line` first; `signed_by` names the
    signer when the signature holds (hills.evidence.verify.signer_text)."""
    from ..evidence.verify import trust_text

    report = _shaped(report)
    emit(verdict_line)
    why = report.get("official_reason") or report.get("trust")
    emit(f"{subject_line(report)}  {report.get('timestamp', '')}"
         + ("" if report.get("official") else f"  (unofficial: {why})"))
    emit(f"  status       {summary_line(report)}")
    emit(f"  trust        {trust_text(report)}")
    if signed_by is not None:
        emit(f"  signer       {signed_by}")
    if report.get("reason"):
        emit(f"  reason       {report['reason']}")
    if report.get("submission_hash"):
        emit(f"  submission   {report['submission_hash']}")
    lineage = report.get("submission_git")
    if lineage:
        emit(f"  git          {lineage.get('ref')}{' (dirty)' if lineage.get('dirty') else ''}")
    if report.get("params"):
        emit("  params       " + "  ".join(f"{k}={_number(v)}" for k, v in report["params"].items()))
        apart = params_apart(report) if isinstance(report.get("param_defaults"), dict) else []
        if apart:
            emit(f"  ranks apart  {apart_text(apart)}: only with reports that used the same values")
    if report.get("trial"):
        emit("  trial        " + "  ".join(f"{k}={_number(v)}" for k, v in report["trial"].items()))
    for warning in report.get("warnings") or []:
        emit(f"  warning      {warning}")
    if report.get("config"):
        emit("  config       " + "  ".join(f"{c['name']}={_number(c['value'])}{'*' if c.get('primary') else ''}"
                                         for c in report["config"])
             + ("   (* = primary)" if any(c.get("primary") for c in report["config"]) else ""))
    spread = report.get("spread") or {}
    direction = "max"
    if report.get("metrics"):
        emit("metrics:")
        direction = report["metrics"][0].get("direction", "max")
        for metric in report["metrics"]:
            line = f"  {metric['name']:<20} {_number(metric['value']):>12}  ({metric['direction']})"
            if metric["name"] in spread:
                s = spread[metric["name"]]
                line += (f"  spread min {_number(s['min'])} max {_number(s['max'])} MAD {_number(s['mad'])}"
                         f" over {s['n']}")
            emit(line)
    if report.get("metrics"):
        emit("  " + _noise_line(report))
    if report.get("side_metrics"):
        emit("side metrics (recorded, not ranked):")
        for name, value in report["side_metrics"].items():
            emit(f"  {name:<20} {_number(value):>12}")
    if report.get("details"):
        emit("details:")
        for name, value in report["details"].items():
            emit(f"  {str(name):<20} {_detail(value)}")
    from ..run.measures import show_lines

    for line in show_lines(report):
        emit(line)
    if report.get("unit_tests"):
        tests = report["unit_tests"]
        emit(f"unit tests:  {'passed' if tests.get('passed') else 'FAILED'}"
             + (f" (exit code {tests.get('exit_code')})" if not tests.get("passed") else ""))
    block = report.get("report")
    if isinstance(block, dict):
        notes = []
        if report.get("trust") == "self-reported":
            notes.append("self-reported")
        if report.get("report_replicate") is not None:
            notes.append(f"from replicate {report['report_replicate']}, the one nearest the median")
        emit("report" + (f" ({'; '.join(notes)})" if notes else "") + ":")
        overall = block.get("overall")
        if isinstance(overall, dict):
            emit("  overall      " + "  ".join(f"{k}={_number(v)}" for k, v in overall.items()))
        label = block.get("segment_label") or "segment"
        zones = block.get("zones")
        if isinstance(zones, list) and zones:
            emit(f"  by {label} (worst first):")
            for zone in _worst_first(zones, "score", direction):
                if isinstance(zone, dict):
                    name = zone.get("zone", "?")
                    rest = "  ".join(f"{k}={_number(v)}" for k, v in zone.items() if k != "zone")
                    emit(f"    {name:<18} {rest}")
        for section in ("horizons", "quantiles", "worst_origins"):
            rows = block.get(section)
            if isinstance(rows, list) and rows:
                emit(f"  {section.replace('_', ' ')}:")
                for row in rows[:20]:
                    if isinstance(row, dict):
                        emit("    " + "  ".join(f"{k}={_number(v)}" for k, v in row.items()))
        for key, value in block.items():
            if key in ("overall", "segment_label", "zones", "horizons", "quantiles", "worst_origins", "version",
                       "picture"):
                continue
            if value is not None:
                emit(f"  {key}: {value}")
        from . import picture

        drawn = picture.of(report)
        if drawn is not None:
            emit(f"  picture: {picture.describe(drawn)} (hills show --picture FILE draws it)")
    instances = report.get("instances")
    if instances:
        ordered = sorted(instances.items(), key=lambda item: item[1], reverse=direction == "min")
        emit(f"instances ({len(ordered)}, worst first):")
        for name, value in ordered[:50]:
            emit(f"  {name:<20} {_number(value):>12}")
        if len(ordered) > 50:
            emit(f"  ... {len(ordered) - 50} more")
