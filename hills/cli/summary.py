"""The summary of one report that `hills eval` prints on stderr (for each
submission, on the batch path too): the verdict and metrics, the config, the
confinement, and why it is unofficial or not scored."""

from __future__ import annotations

from ..evidence.report import summary_line
from .output import say

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


def render(report: Mapping[str, Any], submission: str, headed: bool = False) -> None:
    """The summary of a report on stderr: verdict, metrics, config, why;
    the hill and the submission unless the header said them already."""
    if not headed:
        tree = (report["tree_hash"] or "working tree")[:12]
        say(f"{report['hill']} @ {tree}" + ("" if report["official"] else "  (unofficial)"))
        say(f"  submission   {submission}")
        if report.get("submission_hash"):
            say(f"  hash         {report['submission_hash'][:27]}…")
    if report["params"]:
        say("  params       " + "  ".join(f"{k}={v}" for k, v in report["params"].items()))
    say(f"  {summary_line(report)}")
    for name, spread in (report.get("spread") or {}).items():
        say(f"  spread       {name}: min {spread['min']:.6g}  max {spread['max']:.6g}  MAD {spread['mad']:.6g}"
            f"  over {spread['n']} replicates")
    noise = report.get("noise")
    if isinstance(noise, dict) and isinstance(noise.get("label"), str):
        say(f"  {noise['label']}")
    if "release" in report:  # a --final of a reusable holdout (hills-report(5))
        validation = report.get("validation")
        shown = f"{validation:.6g}" if isinstance(validation, (int, float)) else "none"
        say("  holdout      " + (f"released the holdout score with noise (validation {shown}): one unit of the "
                                 "budget spent" if report["release"] else f"answered with the validation score "
                                 f"{shown} (the holdout agrees within the threshold): no budget spent"))
    if report.get("trial"):
        say("  knobs        " + "  ".join(f"{k}={v}" for k, v in report["trial"].items()))
    if report.get("unit_tests"):
        say(f"  unit tests   {'passed' if report['unit_tests']['passed'] else 'FAILED'}")
    for warning in report.get("warnings", []):
        say(f"  warning      {warning}")
    _render_config(report)
    _render_isolation(report.get("isolation"))
    if report.get("reason"):
        say(f"  reason       {report['reason']}")
    if report.get("forced"):
        say("  note         the hill had uncommitted changes; its last commit was scored (--force)")
    if report["official_reason"]:
        say(f"  unofficial   {report['official_reason']}")


def _render_config(report: Mapping[str, Any]) -> None:
    if report.get("config"):
        say("  config       " + "  ".join(f"{c['name']}={c['value']}{'*' if c['primary'] else ''}"
                                         for c in report["config"])
            + ("   (* = primary)" if any(c["primary"] for c in report["config"]) else ""))


def _render_isolation(isolation: dict | None) -> None:
    """One line: whether hills started submitted code, and how confined."""
    if not isolation:
        return
    runs = isolation.get("runs", 0)
    if not runs:
        text = "submitted code not started by hills"
    else:
        by = ", ".join(f"{name} {count}" if count > 1 else name
                       for name, count in isolation.get("started_by", {}).items())
        text = (f"submitted code {isolation['submitted_code']}: {runs} run{'s' if runs > 1 else ''}"
                + (f" ({by})" if by else ""))
    hits = [f"{hit['cap']} (limit {hit['limit']}, seen {hit['seen']})" for hit in isolation.get("caps_hit", [])]
    if hits:
        text += "; cap hit: " + ", ".join(hits)
    say(f"  isolation    {text}")
    overrides = isolation.get("overrides")
    if overrides:  # honoured, and able to change the score or the confinement
        say("  overrides    " + "  ".join(f"{name}={value}" for name, value in sorted(overrides.items())))
