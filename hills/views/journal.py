"""`hills journal`: one self-contained HTML page of a hill's climb, built
from the attempts logs of its versions, every report's signature checked:
the score over attempts with the best so far per comparable group, every
attempt's status and reason, and the best submission's instances against
the previous best. The plots are matplotlib SVG, inlined, so the page
loads nothing from anywhere."""

from __future__ import annotations

import html
import time
from dataclasses import dataclass, field

from .. import __version__
from ..evidence import signing
from . import attempts, info, numbers, picture, rank
from .picture import figure, svg

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..disk.hill import Hill
    from ..evidence.trust import Keys, Signer

# The best-so-far line of the first comparable group: a colour nothing else
# on the page uses, so a test can find the plot's pixels in a screenshot.
BEST_COLOR = "#d62728"
GROUP_COLORS = (BEST_COLOR, "#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
STATUS_MARKERS = {"failing": ("x", "#ff7f0e"), "buggy": ("v", "#555555"), "refused": ("s", "#999999"),
                  "implausible": ("D", "#7b3294"), "interrupted": ("|", "#999999")}
MAX_INSTANCES = 60  # bars in the instances plot
MAX_INSTANCE_ROWS = 500  # rows of the instances table


@dataclass
class Attempt:
    """One outcome line of an attempts log, as the journal shows it."""

    number: int
    tree_hash: str | None
    seq: object
    report: dict[str, Any]
    verified: bool
    verify_reason: str
    metric: str | None = None
    direction: str = "max"
    value: float | None = None
    group: int | None = None  # index into Journal.groups, for passing, official, verified reports
    new_best: bool = False
    vs_best: float | None = None  # the best of its group before it

    @property
    def status(self) -> str:
        status = self.report.get("status")
        return status if isinstance(status, str) else "?"


@dataclass
class Group:
    """Reports that may be compared: same version, primary config and params."""

    label: str
    metric: str | None
    direction: str
    members: list[int] = field(default_factory=list)  # attempt numbers, in order

    best: int | None = None  # the attempt holding the best
    previous_best: int | None = None  # the one it took the lead from


@dataclass
class Journal:
    hill: str
    versions: list[dict[str, Any]]
    chains: list[dict[str, Any]]
    attempts: list[Attempt]
    groups: list[Group]
    unfinished: list[dict[str, Any]]
    generated: str


def _primary_metric(report: dict[str, Any]) -> tuple[str | None, str, float | None]:
    metrics = report.get("metrics")
    if isinstance(metrics, list) and metrics and isinstance(metrics[0], dict):
        first = metrics[0]
        value = first.get("value")
        return (str(first.get("name")), "min" if first.get("direction") == "min" else "max",
                float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None)
    return None, "max", None


def _group_label(report: dict[str, Any]) -> str:
    import json

    primary = " ".join(f"{name}={json.loads(value)}" for name, value in rank.primary_tuple(report))
    apart = rank.params_apart(report) if isinstance(report.get("param_defaults"), dict) else []
    label = f"{(report.get('tree_hash') or 'working tree')[:12]}" + (f" [{primary}]" if primary else "")
    return label + (f" ranked apart: {rank.apart_text(apart)}" if apart else "")


def collect(hill: Hill, keys: Keys | None = None, allowed: list[Signer] | None = None) -> Journal:
    """The journal of every version of `hill` with an attempts log, oldest
    version first, each report's signature checked."""
    from ..evidence.trust import check_many, machine_keys, trusted

    keys = keys if keys is not None else machine_keys()
    allowed = allowed if allowed is not None else trusted()
    versions = list(reversed(info.log(hill)))
    chains: list[dict[str, Any]] = []
    found: list[tuple[str, dict[str, Any]]] = []
    unfinished: list[dict[str, Any]] = []
    seen: set[str] = set()
    for version in versions:
        tree_hash = version["tree_hash"]
        if tree_hash in seen:
            continue
        seen.add(tree_hash)
        logged = attempts.collect(hill, tree_hash=tree_hash)
        if not logged["attempts"] and not logged["unfinished"]:
            continue
        chains.append({"tree_hash": tree_hash, **logged["chain"]})
        unfinished.extend(dict(row, tree_hash=tree_hash) for row in logged["unfinished"])
        found.extend((tree_hash, attempt) for attempt in logged["attempts"])
    if len(found) > 8:
        check_many()
    journal = Journal(hill.name, versions, chains, [], [], unfinished,
                      time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    for number, (tree_hash, attempt) in enumerate(found, 1):
        report = attempt["report"]
        verdict = signing.verify(report, keys, allowed)
        metric, direction, value = _primary_metric(report)
        journal.attempts.append(Attempt(number, tree_hash, attempt["seq"], report, verdict.ok, verdict.reason,
                                        metric, direction, value))
    _group(journal)
    return journal


def _group(journal: Journal) -> None:
    """Comparable groups in order of first appearance; in each, which
    attempt set a new best and how each compares with the best before it
    (lexicographic by the metrics, as `hills rank` orders them)."""
    by_key: dict[object, int] = {}
    best_report: dict[int, dict[str, Any]] = {}
    for attempt in journal.attempts:
        report = attempt.report
        if not (attempt.verified and report.get("official") and attempt.status == "passing"):
            continue
        key = rank.group_key(report)
        if key not in by_key:
            by_key[key] = len(journal.groups)
            journal.groups.append(Group(_group_label(report), attempt.metric, attempt.direction))
        index = attempt.group = by_key[key]
        group = journal.groups[index]
        group.members.append(attempt.number)
        order = [(m["name"], m["direction"]) for m in report.get("metrics", []) if isinstance(m, dict)]
        held = best_report.get(index)
        if held is not None:
            attempt.vs_best = _primary_metric(held)[2]
        if held is None or rank.sort_key(report, order) < rank.sort_key(held, order):
            attempt.new_best = True
            group.previous_best, group.best = group.best, attempt.number
            best_report[index] = report


def main_group(journal: Journal) -> Group | None:
    """The group the page leads with: the newest version's group with the
    hill's default params and the most members."""
    if not journal.groups:
        return None
    newest = journal.attempts[-1].tree_hash if journal.attempts else None

    def weight(group: Group) -> tuple[bool, bool, int]:
        first = journal.attempts[group.members[0] - 1]
        return (first.tree_hash == newest, "ranked apart" not in group.label, len(group.members))

    return max(journal.groups, key=weight)


# ---------------------------------------------------------------- plots


def _passing_limits(journal: Journal) -> tuple[float, float] | None:
    """The score axis: the passing scores with a margin, or None (let the
    plot choose) when none passed."""
    values = [a.value for a in journal.attempts if a.status == "passing" and a.value is not None]
    if not values:
        return None
    low, high = min(values), max(values)
    margin = (high - low) * 0.15 or abs(high) * 0.01 or 1.0
    return low - margin, high + margin


def score_plot(journal: Journal) -> str | None:
    """The score over attempts: each comparable group's passing reports,
    their replicate spread as error bars and the best so far as a step
    line; other attempts marked by status (at their score when they have
    one, else along the bottom)."""
    scored = [a for a in journal.attempts if a.value is not None]
    if not journal.attempts:
        return None
    drawing = figure(10, 5.2)
    axes = drawing.add_subplot()
    metric = next((a.metric for a in scored), None) or "score"
    for index, group in enumerate(journal.groups):
        color = GROUP_COLORS[index % len(GROUP_COLORS)]
        members = [journal.attempts[n - 1] for n in group.members]
        xs = [a.number for a in members]
        ys = [a.value for a in members]
        low, high = [], []
        for attempt in members:
            spread = attempt.report.get("spread")
            one = spread.get(attempt.metric) if isinstance(spread, dict) and attempt.metric else None
            if isinstance(one, dict) and numbers.is_number(one.get("min")) and attempt.value is not None:
                low.append(max(0.0, attempt.value - one["min"]))
                high.append(max(0.0, one["max"] - attempt.value))
            else:
                low.append(0.0)
                high.append(0.0)
        name = f"group {index + 1}" + (" (params apart)" if "ranked apart" in group.label else "")
        axes.errorbar(xs, ys, yerr=[low, high], fmt="o", color=color, alpha=0.55, markersize=5,
                      capsize=3, linewidth=1, label=f"{name}: passing")
        steps_x, steps_y, best = [], [], None
        for attempt in members:
            if attempt.new_best:
                best = attempt.value
            steps_x.append(attempt.number)
            steps_y.append(best)
        steps_x.append(journal.attempts[-1].number)
        steps_y.append(best)
        axes.step(steps_x, steps_y, where="post", color=color, linewidth=2.5,
                  label=f"{name}: best so far ({group.direction})")
    bottom = axes.get_xaxis_transform()
    limits = _passing_limits(journal)
    for status, (marker, color) in STATUS_MARKERS.items():
        these = [a for a in journal.attempts if a.status == status]
        valued = [(a, a.value) for a in these if a.value is not None]
        without = [a for a in these if a.value is None]
        # A score far from the passing ones (a failing 0 beside 2.54) would
        # squash the climb flat: it is drawn on the edge it lies beyond.
        off = [(a, v) for a, v in valued if limits and not limits[0] <= v <= limits[1]]
        at_value = [a for a, v in valued if (a, v) not in off]
        if at_value:
            axes.scatter([a.number for a in at_value], [a.value for a in at_value], marker=marker, color=color,
                         s=36, label=status)
        if off and limits:
            axes.scatter([a.number for a, _ in off], [0.03 if v < limits[0] else 0.97 for _, v in off],
                         marker=marker, color=color, s=36, transform=bottom, clip_on=False,
                         label=f"{status} (off the scale)")
        if without:
            axes.scatter([a.number for a in without], [0.03] * len(without), marker=marker, color=color, s=36,
                         transform=bottom, clip_on=False, label=f"{status} (no score)" if not at_value else None)
    others = [a for a in journal.attempts if a.status == "passing" and a.group is None and a.value is not None]
    if others:
        axes.scatter([a.number for a in others], [a.value for a in others], facecolors="none", edgecolors="#777777",
                     s=36, label="passing, not ranked (unofficial or unverified)")
    if limits:
        axes.set_ylim(*limits)
    axes.set_xlabel("attempt")
    axes.set_ylabel(metric)
    axes.set_xlim(0.5, max(1.5, journal.attempts[-1].number + 0.5))
    axes.xaxis.get_major_locator().set_params(integer=True)
    axes.grid(True, alpha=0.3)
    drawing.legend(loc="outside lower center", ncols=3, fontsize=8, frameon=False)
    return svg(drawing)


def instance_rows(journal: Journal, group: Group) -> list[dict[str, Any]]:
    """The best report's instances against the previous best's, biggest
    change first: [{name, best, previous, change}]."""
    if group.best is None:
        return []
    best = journal.attempts[group.best - 1].report.get("instances")
    previous = journal.attempts[group.previous_best - 1].report.get("instances") \
        if group.previous_best is not None else None
    if not isinstance(best, dict):
        return []
    previous = previous if isinstance(previous, dict) else {}
    rows = []
    for name, value in best.items():
        if not numbers.is_number(value):
            continue
        before = previous.get(name)
        delta = value - before if numbers.is_number(before) else None
        rows.append({"name": str(name), "best": value, "previous": before if numbers.is_number(before) else None,
                     "change": delta})
    rows.sort(key=lambda row: (row["change"] is None, -abs(row["change"] or 0.0), row["name"]))
    return rows


def instance_plot(rows: list[dict[str, Any]], direction: str) -> str | None:
    """Per instance, the change from the previous best to the best:
    better in the metric's direction green, worse orange."""
    changed = [row for row in rows if row["change"] is not None][:MAX_INSTANCES]
    if not changed:
        return None
    changed.reverse()
    drawing = figure(9.5, max(2.2, 0.22 * len(changed) + 1.0))
    axes = drawing.add_subplot()
    values = [row["change"] for row in changed]
    colors = ["#2ca02c" if (v > 0) == (direction != "min") and v != 0 else "#ff7f0e" for v in values]
    axes.barh(range(len(changed)), values, color=colors)
    axes.set_yticks(range(len(changed)), [row["name"] for row in changed], fontsize=7)
    axes.axvline(0, color="#333333", linewidth=0.8)
    axes.set_xlabel(f"best - previous best (higher is {'better' if direction != 'min' else 'worse'})")
    axes.grid(True, axis="x", alpha=0.3)
    return svg(drawing)


# ---------------------------------------------------------------- the page

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 96em; color: #222; padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { font-size: 1.2em; margin-top: 2em; }
.meta { color: #555; } .plot svg { max-width: 100%; height: auto; }
table { border-collapse: collapse; font-size: 12.5px; margin: 0.5em 0; }
th, td { border-bottom: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; position: sticky; top: 0; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.passing { color: #1a7f37; } .failing { color: #b35900; } .buggy, .refused, .interrupted { color: #555; }
.implausible { color: #7b3294; } .invalid { color: #a00; font-weight: bold; } .best { font-weight: bold; }
code { font-size: 12px; } .wide { overflow-x: auto; } td.num, td.tight { white-space: nowrap; }
"""


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value))


def _table(headers: list[str], rows: list[list[str]], numeric: frozenset[int] = frozenset(),
           tight: frozenset[int] = frozenset()) -> str:
    """A table; the columns in `numeric` right-aligned, those in `numeric`
    and `tight` never wrapped; it scrolls sideways when wider than the page."""
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)

    def cell(index: int, text: str) -> str:
        kind = " class=num" if index in numeric else " class=tight" if index in tight else ""
        return f"<td{kind}>{text}</td>"

    body = "".join("<tr>" + "".join(cell(index, text) for index, text in enumerate(row)) + "</tr>" for row in rows)
    return f"<div class=wide><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"


def _spread_text(attempt: Attempt, digits: int) -> str:
    spread = attempt.report.get("spread")
    one = spread.get(attempt.metric) if isinstance(spread, dict) and attempt.metric else None
    if not isinstance(one, dict):
        return ""
    return (f"{numbers.shown(one.get('min'), digits)} … {numbers.shown(one.get('max'), digits)}"
            f" (MAD {numbers.shown(one.get('mad'), 3)}, n={_e(one.get('n'))})")


def _signature_cell(attempt: Attempt) -> str:
    return "valid" if attempt.verified else f"<span class=invalid>INVALID</span> {_e(attempt.verify_reason)}"


def _attempt_rows(journal: Journal) -> list[list[str]]:
    digits = numbers.digits_for(a.value for a in journal.attempts)
    rows = []
    for attempt in journal.attempts:
        report = attempt.report
        tests = report.get("unit_tests")
        tests_text = ("passed" if tests.get("passed") else "FAILED") if isinstance(tests, dict) else ""
        why = report.get("official_reason") or report.get("trust")
        official = "yes" if report.get("official") else f"no: {_e(why)}"
        status = attempt.status + (" (--final)" if report.get("final") else "")
        value = numbers.shown(attempt.value, digits) if attempt.value is not None else ""
        vs_best = numbers.change(attempt.value, attempt.vs_best)
        if attempt.new_best:
            vs_best = f"{vs_best} new best" if attempt.vs_best is not None else "first"
        git_ref = report.get("submission_git")
        ref = git_ref.get("ref", "") + (" (dirty)" if git_ref.get("dirty") else "") if isinstance(git_ref, dict) else ""
        group = "" if attempt.group is None else (
            f"<span style='color:{GROUP_COLORS[attempt.group % len(GROUP_COLORS)]}'>&#9632;</span> {attempt.group + 1}")
        rows.append([str(attempt.number), f"<code>{_e((attempt.tree_hash or '')[:12])}</code> #{_e(attempt.seq)}",
                     _e(report.get("timestamp")), f"<span class={_e(attempt.status)}>{_e(status)}</span>", group,
                     f"<span class=best>{_e(value)}</span>" if attempt.new_best else _e(value), _e(vs_best),
                     _e(_spread_text(attempt, digits)), _e(tests_text), official, _signature_cell(attempt),
                     _e(report.get("reason") or ""),
                     f"<code>{_e((report.get('submission_hash') or '')[:19])}</code> {_e(ref)}"])
    return rows


def _summary(journal: Journal) -> str:
    counts: dict[str, int] = {}
    for attempt in journal.attempts:
        counts[attempt.status] = counts.get(attempt.status, 0) + 1
    invalid = sum(1 for a in journal.attempts if not a.verified)
    parts = [f"{len(journal.attempts)} attempt(s)"] + [f"{n} {status}" for status, n in sorted(counts.items())]
    lines = [", ".join(parts) + "."]
    lines.append("Every report's signature is valid." if not invalid
                 else f"<span class=invalid>{invalid} report(s) with an INVALID signature</span>: "
                      "not plotted as passing, not ranked.")
    for chain in journal.chains:
        tree = f"<code>{_e((chain['tree_hash'] or '')[:12])}</code>"
        if chain["ok"]:
            lines.append(f"Log of {tree}: chain intact, {chain['count']} entries.")
        else:
            lines.append(f"Log of {tree}: <span class=invalid>chain BROKEN at line {_e(chain['break_line'])}</span>: "
                         + _e("; ".join(chain["problems"])))
    if journal.unfinished:
        lines.append(f"{len(journal.unfinished)} eval(s) without an outcome: "
                     + ", ".join(f"#{_e(row['seq'])} {_e(row['status'])}" for row in journal.unfinished) + ".")
    return "".join(f"<p>{line}</p>" for line in lines)


def _groups_section(journal: Journal) -> str:
    digits = numbers.digits_for(a.value for a in journal.attempts)
    rows = []
    for index, group in enumerate(journal.groups):
        best = journal.attempts[group.best - 1] if group.best else None
        swatch = f"<span style='color:{GROUP_COLORS[index % len(GROUP_COLORS)]}'>&#9632;</span> "
        rows.append([swatch + f"{index + 1}: " + _e(group.label), _e(group.metric), _e(group.direction),
                     str(len(group.members)), f"#{best.number}" if best else "",
                     numbers.shown(best.value, digits) if best else "",
                     _e(_spread_text(best, digits)) if best else ""])
    return _table(["comparable group", "metric", "direction", "passing", "best", "value", "replicate spread"],
                  rows, frozenset({3, 5}))


def _instances_section(journal: Journal) -> str:
    group = main_group(journal)
    if group is None or group.best is None:
        return "<p>No passing, official report yet.</p>"
    best = journal.attempts[group.best - 1]
    rows = instance_rows(journal, group)
    if not rows:
        drawn = picture.of(best.report)
        return (f"<p>The best report (attempt #{best.number}) has no per-instance scores.</p>"
                + (f"<div class=plot id=best-picture>{picture.draw(drawn)}</div>" if drawn else ""))
    if group.previous_best is None:
        intro = f"<p>Attempt #{best.number} is the only best so far of {_e(group.label)}: no previous best.</p>"
    else:
        intro = (f"<p>Attempt #{best.number}, the best of {_e(group.label)}, against attempt "
                 f"#{group.previous_best}, the best before it.</p>")
    drawn = picture.of(best.report)
    if drawn is not None:
        intro += (f"<p>The best submission, as its evaluator pictured it ({_e(picture.describe(drawn))}):</p>"
                  f"<div class=plot id=best-picture>{picture.draw(drawn)}</div>")
    plot = instance_plot(rows, group.direction)
    digits = numbers.digits_for([r["best"] for r in rows] + [r["previous"] for r in rows])
    table = _table(["instance", "best", "previous best", "change"],
                   [[_e(r["name"]), numbers.shown(r["best"], digits),
                     numbers.shown(r["previous"], digits) if r["previous"] is not None else "",
                     numbers.change(r["best"], r["previous"])] for r in rows[:MAX_INSTANCE_ROWS]],
                   frozenset({1, 2, 3}))
    more = (f"<p>… and {len(rows) - MAX_INSTANCE_ROWS} more instances, with smaller changes.</p>"
            if len(rows) > MAX_INSTANCE_ROWS else "")
    return intro + (f"<div class=plot>{plot}</div>" if plot else "") + table + more


def render(journal: Journal) -> str:
    """The page: a header, the score plot, the groups, the instances of
    the best, and every attempt."""
    plot = score_plot(journal)
    versions = ", ".join(f"<code>{_e(v['tree_hash'][:12])}</code> ({_e(v['date'])}: {_e(v['message'])})"
                         for v in journal.versions) or "none committed"
    parts = [
        "<!DOCTYPE html>", "<html lang=en><head><meta charset=utf-8>",
        "<meta name=viewport content='width=device-width, initial-scale=1'>",
        f"<title>{_e(journal.hill)}: hills journal</title><style>{STYLE}</style></head><body>",
        f"<h1>{_e(journal.hill)}</h1>",
        f"<p class=meta>hills journal, made {_e(journal.generated)} by hills {_e(__version__)} from the attempts "
        f"logs; versions: {versions}</p>",
        _summary(journal),
        "<h2>Score over attempts</h2>",
        f"<div class=plot id=score-plot>{plot}</div>" if plot else "<p>No attempts yet.</p>",
        "<h2>Comparable groups</h2>",
        _groups_section(journal) if journal.groups else "<p>No passing, official report yet.</p>",
        "<h2>The best, and against the previous best per instance</h2>",
        _instances_section(journal),
        "<h2>Every attempt</h2>",
        _table(["#", "version / seq", "time", "status", "group", "score", "vs best", "replicate spread",
                "unit tests", "official", "signature", "reason", "submission"], _attempt_rows(journal),
               frozenset({0, 5, 6}), frozenset({1, 2, 7, 12})),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def write(journal: Journal, path: str) -> None:
    from ..base.state import atomic_write

    atomic_write(path, render(journal))
