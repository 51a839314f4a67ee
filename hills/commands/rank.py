"""`hills rank`: rank reports within comparable groups. Declared as plain
data (hills.cli.fast), so it starts without click: over a long log most of
its time is the log's."""

from __future__ import annotations

from ..base import errors
from ..cli import fast
from ..cli.output import emit, emit_json

HELP = """Rank report files (or a hill's logged reports) within comparable groups.

    Verifies each report, groups by hill tree hash, primary config and params
    (all but those the hill declares neutral), and sorts lexicographically by
    the metrics, each in its own direction. INVALID, unofficial and
    non-passing reports (implausible ones too) are listed apart, never ranked.
    """

DECLARED = fast.Declared("rank", HELP, [
    fast.Argument("reports", metavar="[REPORT...]", many=True, required=False),
    fast.Option("hill_name", "-H", "--hill", metavar="NAME", help="Rank the reports logged for this hill's HEAD."),
    fast.Option("as_json", "--json", flag=True, help="Print JSON instead of the human table."),
])

# The latest result, left to the process's exit (hills.entry leaves at once
# after this command): freeing a long log's reports one by one costs tens of ms.
_KEPT: list[object] = []


def run(reports: tuple[str, ...] = (), hill_name: str | None = None, as_json: bool = False) -> int:
    """The command: the groups (or JSON) on stdout."""
    import gc

    # A short process that makes next to no cyclic garbage: collections
    # would walk every report of a long log again and again.
    gc.disable()
    from ..evidence import signing
    from ..views import attempts, rank

    items = []
    verdicts: list[signing.Verdict | None] = []
    for path in reports:
        items.append((path, signing.load_report(path)))
        verdicts.append(None)
    if hill_name:
        from ..disk import hill

        target = hill.resolve(hill_name)
        logged, checked = attempts.logged_reports(target)
        items.extend(logged)
        verdicts.extend(checked)
    if not items:
        raise errors.UsageError("no reports to rank", hint="pass report files, or -H NAME for a hill's logged reports")
    from ..evidence.trust import machine_keys, trusted

    result = rank.rank(items, machine_keys(), trusted(), verdicts)
    if as_json:
        emit_json({"groups": [{**g, "entries": [{"position": e["position"], "source": e["source"],
                                                    "noise_label": e["noise_label"],
                                                    "noise": e["noise"], "report": e["report"]}
                                                   for e in g["entries"]]}
                              for g in result["groups"]],
                   "apart": result["apart"]})
    else:
        render(result)
    _KEPT[:] = [result]
    return errors.EXIT_OK


def _first_value(report: dict) -> object:
    metrics = report.get("metrics")
    return metrics[0].get("value") if isinstance(metrics, list) and metrics and isinstance(metrics[0], dict) else None


def render(result: dict) -> None:
    """Each comparable group, its entries in order, each with its change
    from the group's best and a mark when its gap to the one above is
    within the replicate spread (`noise`); then those not ranked."""
    from ..views import numbers
    from ..views.rank import apart_text
    from ..evidence.report import summary_line
    from ..run.noise import report_label
    from ..run.replicates import noise_se

    for group in result["groups"]:
        primary = "  ".join(f"{p['name']}={p['value']}" for p in group["primary"]) or "no primary config"
        emit(f"{group['hill']} @ {(group['tree_hash'] or '')[:12]}  [{primary}]")
        if group["params_apart"]:
            emit(f"  ranked apart: params other than the hill's defaults: {apart_text(group['params_apart'])}")
        if group.get("fingerprint"):
            machine = group["fingerprint"]
            gpus = ", ".join(str(gpu.get("model")) for gpu in machine.get("gpu") or [])
            emit(f"  timed on: {machine.get('cpu')} x{machine.get('cores')}" + (f", {gpus}" if gpus else ""))
        values = [_first_value(entry["report"]) for entry in group["entries"]]
        digits = numbers.digits_for(values)
        for entry, value in zip(group["entries"], values):
            report = entry["report"]
            noise = "  (within noise of the one above)" if entry["noise"] else ""
            behind = numbers.change(value, values[0]) if entry["position"] > 1 else "best"
            emit(f"  {entry['position']:>3}. {summary_line(report, digits)}  {behind:>9}  "
                 f"{(report.get('submission_hash') or '')[:19]}  {entry['source']}  [{report_label(report)}]"
                 f"{noise}")
        chosen = group.get("selection")
        if chosen and chosen["n"] > 1 and chosen["bound"] is not None:
            emit(f"      {chosen['label']}")
        first = group["metric_order"][0]["name"] if group["metric_order"] else ""
        if len(values) > 1 and not any(entry["report"].get("spread") or noise_se(entry["report"], first) is not None
                                       for entry in group["entries"]):
            # Without replicates or items nothing says how large noise is.
            emit("      (noise unknown: no entry has per-item scores or replicates, so no gap is judged noise; "
                 "report items, or run --repeat N where scores vary)")
    if result["apart"]:
        emit("not ranked:")
        for entry in result["apart"]:
            emit(f"  {entry['source']}: {entry['reason']}")


def __getattr__(name: str) -> object:
    # The click command is built on first use: the fast path never needs it.
    if name == "command":
        return DECLARED.click_command(run)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
