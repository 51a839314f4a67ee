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
from ..run import noise
from ..run.replicates import Z95, noise_se, within_noise  # Z95: the band and intervals are 95%, as within_noise
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

    position: int  # 1..N over the page, in the order shown: the plot's x, the index into Journal.attempts
    number: int  # the attempt's number in its version's log, as `hills attempts` prints it
    version: int  # index into Journal.chains
    tree_hash: str | None
    seq: object
    report: dict[str, Any]
    verified: bool
    verify_reason: str
    metric: str | None = None
    direction: str = "max"
    value: float | None = None
    group: int | None = None  # index into Journal.groups, for passing, official, verified validation reports
    new_best: bool = False  # beyond the noise of the best before it (or the first of its group)
    verdict: str = ""  # new best, within noise, same submission as #N, or empty
    vs_best: float | None = None  # the first metric of the best of its group before it
    best_before: int | None = None  # that best's position

    @property
    def status(self) -> str:
        status = self.report.get("status")
        return status if isinstance(status, str) else "?"

    @property
    def holdout(self) -> bool:
        return bool(self.report.get("final"))

    @property
    def ab(self) -> bool:
        """A run of an A/B (`hills eval --against`): drawn apart, never a best."""
        return isinstance(self.report.get("ab"), dict)


@dataclass
class Group:
    """Validation reports that may be compared: same version, primary config and params."""

    label: str
    metric: str | None
    direction: str
    members: list[int] = field(default_factory=list)  # positions, in order

    best: int | None = None  # the position of the best, the last gain beyond noise
    previous_best: int | None = None  # the best it took the lead from (another submission)
    top: int | None = None  # the highest score, when a gain within noise put it above the best


@dataclass
class Journal:
    hill: str
    versions: list[dict[str, Any]]
    chains: list[dict[str, Any]]
    attempts: list[Attempt]
    groups: list[Group]
    unfinished: list[dict[str, Any]]
    generated: str
    budget: dict[str, Any] | None = None  # the newest version's holdout budget: {tree_hash, budget, used}

    def name(self, attempt: Attempt) -> str:
        """How the page names an attempt: `#N`, as `hills attempts` does,
        with its version when the page shows more than one."""
        if len(self.chains) > 1:
            return f"{(attempt.tree_hash or 'working tree')[:7]} #{attempt.number}"
        return f"#{attempt.number}"

    def at(self, position: int) -> Attempt:
        return self.attempts[position - 1]


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


def change_text(report: dict[str, Any]) -> tuple[str, str]:
    """(what the attempt changed, in words; where the words come from): the
    note given with -m, else the subject of the submission's git commit,
    else the start of its hash."""
    note = report.get("note")
    if isinstance(note, str) and note:
        return note, "note"
    lineage = report.get("submission_git")
    if isinstance(lineage, dict) and isinstance(lineage.get("subject"), str) and lineage["subject"]:
        return lineage["subject"] + (" (uncommitted changes on top)" if lineage.get("dirty") else ""), "commit"
    return str(report.get("submission_hash") or "no submission read")[:19], "hash"


def _budget(hill: Hill, tree_hash: str | None, keys: Keys) -> dict[str, Any] | None:
    """The holdout budget of a version: {tree_hash, budget (None: no limit),
    used, problem}; None for the working tree."""
    if tree_hash is None:
        return None
    from ..base.errors import HillsError
    from ..run import logbook, pinned

    try:
        budget = pinned.pinned_manifest(hill, tree_hash)["final"]["budget"]
        used: int | None = logbook.final_count(hill.name, tree_hash, keys)
        problem = None
    except HillsError as exc:
        budget, used, problem = None, None, exc.message
    return {"tree_hash": tree_hash, "budget": budget, "used": used, "problem": problem}


def collect(hill: Hill, keys: Keys | None = None, allowed: list[Signer] | None = None) -> Journal:
    """The journal of every version of `hill` with an attempts log, oldest
    version first, each report's signature checked."""
    from ..evidence.trust import machine_keys, trusted

    keys = keys if keys is not None else machine_keys()
    allowed = allowed if allowed is not None else trusted()
    versions = list(reversed(info.log(hill)))
    chains: list[dict[str, Any]] = []
    found: list[tuple[int, str, dict[str, Any], signing.Verdict]] = []
    unfinished: list[dict[str, Any]] = []
    seen: set[str] = set()
    for version in versions:
        tree_hash = version["tree_hash"]
        if tree_hash in seen:
            continue
        seen.add(tree_hash)
        logged, said = attempts.checked(hill, tree_hash=tree_hash, keys=keys, allowed=allowed)
        if not logged["attempts"] and not logged["unfinished"]:
            continue
        chains.append({"tree_hash": tree_hash, **logged["chain"]})
        unfinished.extend(dict(row, tree_hash=tree_hash) for row in logged["unfinished"])
        found.extend((len(chains) - 1, tree_hash, attempt, verdict)
                     for attempt, verdict in zip(logged["attempts"], said))
    journal = Journal(hill.name, versions, chains, [], [], unfinished,
                      time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    for position, (version, tree_hash, attempt, verdict) in enumerate(found, 1):
        report = attempt["report"]
        metric, direction, value = _primary_metric(report)
        journal.attempts.append(Attempt(position, attempt["number"], version, tree_hash, attempt["seq"], report,
                                        verdict.ok, verdict.reason, metric, direction, value))
    if chains:
        journal.budget = _budget(hill, chains[-1]["tree_hash"], keys)
    _group(journal)
    return journal


def _group(journal: Journal) -> None:
    """Comparable groups of validation reports in order of first appearance
    (a --final report is the holdout's, an A/B run the A/B's: neither is
    grouped); in each, how each attempt compares with the best before it.
    The best moves only on a gain beyond the noise of both (within_noise):
    a higher score within it is "within noise", a second eval of the best's
    own submission "same submission", never a new best."""
    by_key: dict[object, int] = {}
    best_report: dict[int, dict[str, Any]] = {}
    top_report: dict[int, dict[str, Any]] = {}
    for attempt in journal.attempts:
        report = attempt.report
        if not (attempt.verified and report.get("official") and attempt.status == "passing") \
                or attempt.holdout or attempt.ab:
            continue
        key = rank.group_key(report)
        if key not in by_key:
            by_key[key] = len(journal.groups)
            journal.groups.append(Group(_group_label(report), attempt.metric, attempt.direction))
        index = attempt.group = by_key[key]
        group = journal.groups[index]
        group.members.append(attempt.position)
        order = [(m["name"], m["direction"]) for m in report.get("metrics", []) if isinstance(m, dict)]
        held = best_report.get(index)
        if held is None:
            attempt.new_best, attempt.verdict = True, "first"
            group.best = group.top = attempt.position
            best_report[index] = top_report[index] = report
            continue
        assert group.best is not None
        attempt.vs_best, attempt.best_before = _primary_metric(held)[2], group.best
        if rank.sort_key(report, order) < rank.sort_key(top_report[index], order):
            group.top, top_report[index] = attempt.position, report
        if report.get("submission_hash") and report.get("submission_hash") == held.get("submission_hash"):
            attempt.verdict = f"same submission as {journal.name(journal.at(group.best))}"
            continue
        if not rank.sort_key(report, order) < rank.sort_key(held, order):
            continue
        if order and within_noise(report, held, order[0][0]):
            attempt.verdict = "within noise"
        else:
            attempt.new_best, attempt.verdict = True, "new best"
            group.previous_best, group.best = group.best, attempt.position
            best_report[index] = top_report[index] = report
            group.top = attempt.position
    for group in journal.groups:
        if group.top == group.best:
            group.top = None


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


HOLDOUT_COLOR = "#111111"


def interval(report: dict[str, Any], metric: str | None, value: float | None) -> tuple[float, float] | None:
    """The report's score interval: value ± 1.96 se where its `noise` gives
    an se; else its replicates' range; None where its noise is unknown."""
    if metric is None or value is None:
        return None
    se = noise_se(report, metric)
    if se is not None:
        return value - Z95 * se, value + Z95 * se
    spread = report.get("spread")
    one = spread.get(metric) if isinstance(spread, dict) else None
    if isinstance(one, dict) and numbers.is_number(one.get("min")) and numbers.is_number(one.get("max")) \
            and one.get("n", 0) > 1:
        return min(one["min"], value), max(one["max"], value)
    return None


def noise_text(report: dict[str, Any], metric: str | None, digits: int) -> str:
    """The report's noise in words: its signed `noise` label; for a report
    from before it, its replicates' range, else unknown (never "exact")."""
    noise = report.get("noise")
    if isinstance(noise, dict) and isinstance(noise.get("label"), str) and noise.get("metric") == metric:
        return str(noise["label"])
    spread = report.get("spread")
    one = spread.get(metric) if isinstance(spread, dict) and metric else None
    if isinstance(one, dict) and one.get("n", 0) > 1:
        return (f"replicate range {numbers.shown(one.get('min'), digits)} … {numbers.shown(one.get('max'), digits)}"
                f" (n={one.get('n')})")
    return "noise unknown (no per-item scores)" if not report.get("instances") else \
        "noise not measured (a report without its noise field)"


def _passing_limits(journal: Journal) -> tuple[float, float] | None:
    """The score axis: the passing scores and their intervals with a
    margin, or None (let the plot choose) when none passed."""
    values = []
    for a in journal.attempts:
        if a.status == "passing" and a.value is not None:
            values.append(a.value)
            band = interval(a.report, a.metric, a.value) if a.group is not None or a.holdout else None
            if band:
                values.extend(band)
    if not values:
        return None
    low, high = min(values), max(values)
    margin = (high - low) * 0.15 or abs(high) * 0.01 or 1.0
    return low - margin, high + margin


def _best_steps(journal: Journal, group: Group) -> tuple[list[float], list[float], list[float], list[float]]:
    """The best-so-far line of a group and its noise band, as step points:
    (x, best, band low, band high), the band NaN where the best's noise is
    unknown; from its first member to its version's last attempt."""
    xs: list[float] = []
    ys: list[float] = []
    lows: list[float] = []
    highs: list[float] = []
    best: Attempt | None = None
    for position in group.members:
        attempt = journal.at(position)
        if attempt.new_best:
            best = attempt
        assert best is not None and best.value is not None
        band = interval(best.report, best.metric, best.value)
        xs.append(position)
        ys.append(best.value)
        lows.append(band[0] if band else float("nan"))
        highs.append(band[1] if band else float("nan"))
    # To the last attempt of the group's version: a later version's climb is another line.
    version = journal.at(group.members[0]).version
    xs.append(max(a.position for a in journal.attempts if a.version == version) + 0.5)
    ys.append(ys[-1])
    lows.append(lows[-1])
    highs.append(highs[-1])
    return xs, ys, lows, highs


def _errors(members: list[Attempt]) -> list[list[float]]:
    """Error bars for matplotlib: each attempt's interval below and above its score."""
    low, high = [], []
    for attempt in members:
        band = interval(attempt.report, attempt.metric, attempt.value)
        value = attempt.value if attempt.value is not None else 0.0
        low.append(max(0.0, value - band[0]) if band else 0.0)
        high.append(max(0.0, band[1] - value) if band else 0.0)
    return [low, high]


def score_plot(journal: Journal) -> str | None:
    """The score over attempts: each comparable group's passing validation
    reports with their intervals, the best so far as a step line inside its
    noise band (95%), gains within noise hollow; the holdout (--final) as
    its own series with its interval; A/B runs apart; other attempts marked
    by status (at their score when they have one, else along the bottom).
    The x axis is the attempts' numbers, as `hills attempts` prints them."""
    if not journal.attempts:
        return None
    scored = [a for a in journal.attempts if a.value is not None]
    drawing = figure(10, 5.6)
    axes = drawing.add_subplot()
    metric = next((a.metric for a in scored), None) or "score"
    for index, group in enumerate(journal.groups):
        color = GROUP_COLORS[index % len(GROUP_COLORS)]
        members = [journal.at(n) for n in group.members]
        name = (f"{group.label[:12]}" if len(journal.groups) > 1 else "validation") \
            + (" (params apart)" if "ranked apart" in group.label else "")
        again = [a for a in members if a.verdict.startswith("same submission")]
        kinds = (("new best", [a for a in members if a.new_best], "o", color),
                 ("gain within noise", [a for a in members if a.verdict == "within noise"], "o", "none"),
                 ("the best's submission again", again, "s", "none"),
                 ("no gain", [a for a in members if not a.new_best and not a.verdict], "o", color))
        for kind, these, marker, face in kinds:
            if these:
                axes.errorbar([a.position for a in these], [a.value for a in these], yerr=_errors(these),
                              fmt=marker, color=color, markerfacecolor=face, alpha=0.9 if kind == "new best" else 0.5,
                              markersize=5 if kind in ("gain within noise", "no gain") else 7, capsize=3, linewidth=1,
                              label=f"{name}: {kind}")
        xs, ys, lows, highs = _best_steps(journal, group)
        if any(low == low for low in lows):  # NaN where the best's noise is unknown
            axes.fill_between(xs, lows, highs, step="post", color=color, alpha=0.15, linewidth=0,
                              label=f"{name}: noise band of the best (95%)")
        axes.step(xs, ys, where="post", color=color, linewidth=2.5,
                  label=f"{name}: best so far ({group.direction})")
    holdout = [a for a in journal.attempts if a.holdout and a.status == "passing" and a.value is not None]
    if holdout:
        axes.errorbar([a.position for a in holdout], [a.value for a in holdout], yerr=_errors(holdout), fmt="*",
                      color=HOLDOUT_COLOR, markersize=11, capsize=4, linewidth=1.2,
                      label="holdout (--final)" + (", 95% interval" if any(_errors(holdout)[1]) else ""))
    ab_runs = [a for a in journal.attempts if a.ab and a.status == "passing" and a.value is not None]
    if ab_runs:
        axes.scatter([a.position for a in ab_runs], [a.value for a in ab_runs], marker="^", color="#bbbbbb",
                     s=30, label="A/B run (not a best)")
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
            axes.scatter([a.position for a in at_value], [a.value for a in at_value], marker=marker, color=color,
                         s=36, label=status)
        if off and limits:
            axes.scatter([a.position for a, _ in off], [0.03 if v < limits[0] else 0.97 for _, v in off],
                         marker=marker, color=color, s=36, transform=bottom, clip_on=False,
                         label=f"{status} (off the scale)")
        if without:
            axes.scatter([a.position for a in without], [0.03] * len(without), marker=marker, color=color, s=36,
                         transform=bottom, clip_on=False, label=f"{status} (no score)" if not at_value else None)
    others = [a for a in journal.attempts if a.status == "passing" and a.group is None and a.value is not None
              and not a.holdout and not a.ab]
    if others:
        axes.scatter([a.position for a in others], [a.value for a in others], facecolors="none", edgecolors="#777777",
                     s=36, label="passing, not ranked (unofficial or unverified)")
    if limits:
        axes.set_ylim(*limits)
    _version_marks(journal, axes)
    axes.set_xlabel("attempt (#, as hills attempts numbers them)")
    axes.set_ylabel(metric)
    axes.set_xlim(0.5, max(1.5, journal.attempts[-1].position + 0.5))
    axes.grid(True, alpha=0.3)
    drawing.legend(loc="outside lower center", ncols=3, fontsize=8, frameon=False)
    return svg(drawing)


def _version_marks(journal: Journal, axes: Any) -> None:
    """Ticks at attempts, labelled with their numbers (which restart with
    each version), and a line where each later version's attempts begin."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator

    count = len(journal.attempts)
    ticks = [t for t in MaxNLocator(nbins=min(count, 20), integer=True).tick_values(1, count) if 1 <= t <= count]
    axes.xaxis.set_major_locator(FixedLocator(ticks))
    axes.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"#{journal.at(int(x)).number}"
                                                 if float(x).is_integer() and 1 <= x <= count else ""))
    if len(journal.chains) < 2:
        return
    for version in range(1, len(journal.chains)):
        first = next((a for a in journal.attempts if a.version == version), None)
        if first is not None:
            axes.axvline(first.position - 0.5, color="#888888", linewidth=0.8, linestyle="--")
            axes.text(first.position - 0.4, 0.98, (first.tree_hash or "")[:7], transform=axes.get_xaxis_transform(),
                      fontsize=7, color="#555555", va="top")


def instance_rows(journal: Journal, group: Group) -> list[dict[str, Any]]:
    """The best report's instances against the previous best's, biggest
    change first: [{name, best, previous, change}]."""
    if group.best is None:
        return []
    best_report = journal.at(group.best).report
    best = best_report.get("instances")
    previous_report = journal.at(group.previous_best).report if group.previous_best is not None else {}
    previous = previous_report.get("instances")
    if previous_report.get("submission_hash") == best_report.get("submission_hash"):
        previous = None  # a submission against itself shows only its noise
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
.verdict.new { color: #1a7f37; font-weight: bold; } .verdict.within, .verdict.same { color: #777; font-style: italic; }
.change-hash { font-family: monospace; font-size: 12px; color: #555; }
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
        status = attempt.status + (" (--final)" if attempt.holdout else "") + (" (A/B run)" if attempt.ab else "")
        value = numbers.shown(attempt.value, digits) if attempt.value is not None else ""
        vs_best = numbers.change(attempt.value, attempt.vs_best) if attempt.vs_best is not None else ""
        if attempt.best_before is not None and attempt.verdict != "first":
            vs_best += f" vs {journal.name(journal.at(attempt.best_before))}"
        verdict = f"<span class='verdict {_e(attempt.verdict.split()[0] if attempt.verdict else '')}'>" \
                  f"{_e(attempt.verdict)}</span>" if attempt.verdict else ""
        if attempt.holdout:
            verdict = "holdout: never a best"
        elif attempt.ab:
            verdict = "A/B run: never a best"
        words, source = change_text(report)
        change = f"<span class=change-{source}>{_e(words)}</span>"
        group = "" if attempt.group is None else (
            f"<span style='color:{GROUP_COLORS[attempt.group % len(GROUP_COLORS)]}'>&#9632;</span> {attempt.group + 1}")
        noise = noise_text(report, attempt.metric, digits) if attempt.status == "passing" else ""
        rows.append([f"<span class=number>{_e(journal.name(attempt))}</span>", change,
                     _e(report.get("timestamp")), f"<span class={_e(attempt.status)}>{_e(status)}</span>", group,
                     f"<span class=best>{_e(value)}</span>" if attempt.new_best else _e(value), _e(vs_best), verdict,
                     _e(noise), _e(tests_text), official, _signature_cell(attempt), _e(report.get("reason") or ""),
                     f"<code>{_e((report.get('submission_hash') or '')[:19])}</code> seq {_e(attempt.seq)}"])
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
                     + ", ".join(f"#{_e(row.get('number'))} {_e(row['status'])}" for row in journal.unfinished) + ".")
    lines.append(f"<span id=budget>{budget_text(journal.budget)}</span>")
    lines.append("Attempts are numbered as <code>hills attempts</code> numbers them: the evals of a version's log "
                 "in the order they began, each once.")
    return "".join(f"<p>{line}</p>" for line in lines)


def budget_text(budget: dict[str, Any] | None) -> str:
    """The newest version's remaining --final budget, in words (HTML)."""
    if budget is None:
        return "Holdout budget: no committed version with attempts."
    tree = f"<code>{_e(budget['tree_hash'][:12])}</code>"
    if budget["problem"]:
        return f"Holdout budget of {tree}: <span class=invalid>unknown</span>: {_e(budget['problem'])}"
    if budget["budget"] is None:
        return (f"Holdout budget of {tree}: no limit (hill.yaml sets no final.budget); "
                f"{budget['used']} --final eval(s) run.")
    left = max(0, budget["budget"] - budget["used"])
    return (f"Holdout budget of {tree}: <b>{left} of {budget['budget']} --final eval(s) left</b> "
            f"({budget['used']} used).")


def _groups_section(journal: Journal) -> str:
    digits = numbers.digits_for(a.value for a in journal.attempts)
    rows = []
    for index, group in enumerate(journal.groups):
        best = journal.at(group.best) if group.best else None
        swatch = f"<span style='color:{GROUP_COLORS[index % len(GROUP_COLORS)]}'>&#9632;</span> "
        top = ""
        if group.top is not None:
            above = journal.at(group.top)
            top = (f"{journal.name(above)} scored {numbers.shown(above.value, digits)}, within the noise of the best"
                   if above.value is not None else "")
        rows.append([swatch + f"{index + 1}: " + _e(group.label), _e(group.metric), _e(group.direction),
                     str(len(group.members)), _e(journal.name(best)) if best else "",
                     numbers.shown(best.value, digits) if best else "",
                     _e(noise_text(best.report, best.metric, digits)) if best else "",
                     _e(change_text(best.report)[0]) if best else "", _e(top), _selection_cell(journal, group)])
    return _table(["comparable group", "metric", "direction", "passing", "best", "value", "noise of the best",
                   "its change", "higher, within noise", "chance alone"], rows, frozenset({3, 5}))


def _selection_cell(journal: Journal, group: Group) -> str:
    """What picking the best of the group's N evals gives by chance alone
    (noise.selection: the lead over the first that N tries of equal
    submissions reach at this noise), flagged when the best's lead is
    within it."""
    chosen = noise.selection([journal.at(position).report for position in group.members])
    if chosen is None or chosen["n"] < 2:
        return ""
    text = _e(chosen["label"])
    return f"<span class='verdict within'>{text}</span>" if chosen["within"] else text


def _holdout_section(journal: Journal) -> str:
    """Each --final score beside the validation best of its version at the
    time, both with their intervals, and the budget left."""
    digits = numbers.digits_for(a.value for a in journal.attempts)
    finals = [a for a in journal.attempts if a.holdout]
    text = f"<p>{budget_text(journal.budget)}</p>"
    if not finals:
        return text + "<p>No --final eval yet: the holdout is untouched.</p>"

    def shown(attempt: Attempt) -> str:
        band = interval(attempt.report, attempt.metric, attempt.value)
        value = numbers.shown(attempt.value, digits) if attempt.value is not None else "no score"
        return value + (f" (95%: {numbers.shown(band[0], digits)} … {numbers.shown(band[1], digits)})" if band
                        else f" ({noise_text(attempt.report, attempt.metric, digits)})")

    rows = []
    for attempt in finals:
        before = [a for a in journal.attempts[:attempt.position - 1]
                  if a.new_best and a.version == attempt.version and a.group is not None]
        validation = before[-1] if before else None
        rows.append([_e(journal.name(attempt)), _e(change_text(attempt.report)[0]),
                     f"<span class={_e(attempt.status)}>{_e(attempt.status)}</span>", _e(shown(attempt)),
                     _e(f"{journal.name(validation)}: {shown(validation)}") if validation else "none yet",
                     _e(numbers.change(attempt.value, validation.value)) if validation and attempt.value is not None
                     else ""])
    return text + _table(["#", "change", "status", "holdout score", "validation best then", "holdout - validation"],
                         rows, frozenset({5}), frozenset({3, 4}))


def _instances_section(journal: Journal) -> str:
    group = main_group(journal)
    if group is None or group.best is None:
        return "<p>No passing, official report yet.</p>"
    best = journal.at(group.best)
    rows = instance_rows(journal, group)
    drawn = picture.of(best.report)
    pictured = (f"<p>The best submission, as its evaluator pictured it ({_e(picture.describe(drawn))}):</p>"
                f"<div class=plot id=best-picture>{picture.draw(drawn)}</div>") if drawn is not None else ""
    if not rows:
        return (f"<p>The best report (attempt {_e(journal.name(best))}: {_e(change_text(best.report)[0])}) has no "
                "per-instance scores, or none to compare with another submission's.</p>" + pictured)
    previous = journal.at(group.previous_best) if group.previous_best is not None else None
    if previous is None or not any(r["previous"] is not None for r in rows):
        intro = (f"<p>Attempt {_e(journal.name(best))} ({_e(change_text(best.report)[0])}) is the only best so far "
                 f"of {_e(group.label)}: no other submission to compare it with.</p>")
    else:
        intro = (f"<p>Attempt {_e(journal.name(best))} ({_e(change_text(best.report)[0])}), the best of "
                 f"{_e(group.label)}, against attempt {_e(journal.name(previous))} "
                 f"({_e(change_text(previous.report)[0])}), the best before it.</p>")
    plot = instance_plot(rows, group.direction) if previous is not None else None
    digits = numbers.digits_for([r["best"] for r in rows] + [r["previous"] for r in rows])
    table = _table(["instance", "best", "previous best", "change"],
                   [[_e(r["name"]), numbers.shown(r["best"], digits),
                     numbers.shown(r["previous"], digits) if r["previous"] is not None else "",
                     numbers.change(r["best"], r["previous"])] for r in rows[:MAX_INSTANCE_ROWS]],
                   frozenset({1, 2, 3}))
    more = (f"<p>… and {len(rows) - MAX_INSTANCE_ROWS} more instances, with smaller changes.</p>"
            if len(rows) > MAX_INSTANCE_ROWS else "")
    return intro + pictured + (f"<div class=plot>{plot}</div>" if plot else "") + table + more


def _plot_caption(journal: Journal) -> str:
    """What the score plot shows, and where the noise of its bests is unknown."""
    text = ("The best so far moves only on a gain beyond noise; its band is the best's 95% interval (from the "
            "report's noise, else its replicates' range). A higher score within it is hollow, \"within noise\"; "
            "a second eval of the best's submission a hollow square. The holdout (--final) is its own series; "
            "A/B runs are never a best.")
    unknown = [group for group in journal.groups if group.best is not None
               and interval(journal.at(group.best).report, group.metric, journal.at(group.best).value) is None]
    if unknown:
        said = noise_text(journal.at(unknown[0].best or 0).report, unknown[0].metric, 6)
        text += (f" <b>The noise of the best is unknown</b>: {_e(said)}. No band is drawn, and every gain counts "
                 "as a new best; see hills-report(5), noise.")
    return f"<p class=meta id=plot-caption>{text}</p>"


def render(journal: Journal) -> str:
    """The page: a header, the score plot, the groups, the holdout, the
    instances of the best, and every attempt."""
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
        _plot_caption(journal),
        f"<div class=plot id=score-plot>{plot}</div>" if plot else "<p>No attempts yet.</p>",
        "<h2>Comparable groups</h2>",
        _groups_section(journal) if journal.groups else "<p>No passing, official report yet.</p>",
        "<h2 id=holdout>The holdout (--final)</h2>",
        _holdout_section(journal),
        "<h2>The best, and against the previous best per instance</h2>",
        _instances_section(journal),
        "<h2>Every attempt</h2>",
        _table(["#", "change", "time", "status", "group", "score", "vs best", "verdict", "noise",
                "unit tests", "official", "signature", "reason", "submission"], _attempt_rows(journal),
               frozenset({0, 5, 6}), frozenset({2, 13})),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def write(journal: Journal, path: str) -> None:
    from ..base.state import atomic_write

    atomic_write(path, render(journal))
