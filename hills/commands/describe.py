"""`hills describe`: what a climber needs to know about a hill."""

import click

from ..base import errors
from ..cli.options import CONTEXT, hill_argument, json_option
from ..cli.output import emit, emit_json


@click.command("describe", context_settings=CONTEXT)
@hill_argument
@json_option
def command(name: str, as_json: bool) -> int:
    """Print what a climber needs: the task, params, contract and metrics."""
    from ..disk import hill
    from ..disk.manifest import ManifestError
    from ..views import info

    target = hill.resolve(name)
    try:
        described = info.describe(target)
    except ManifestError as exc:
        raise exc.refused(target.name) from None
    if as_json:
        emit_json(described)
    else:
        render(described)
    return errors.EXIT_OK


def _holdout_line(described: dict) -> str:
    """What --final costs and what is left of its budget."""
    reusable = described["final_mode"] == "reusable"
    unit = "releases of the holdout score" if reusable else "--final evals"
    budget, used = described["final_budget"], described["final_used"]
    line = ("- --final: reusable holdout (the validation score unless the holdout differs; "
            "only releases count)" if reusable else "- --final: holdout split")
    if budget is None:
        return line + ", no budget"
    spent = f"{used} used, {max(budget - used, 0)} left" if used is not None else "not counted yet"
    return line + f", budget {budget} {unit}: {spent}"


def render(described: dict) -> None:
    """The description as Markdown: contract, params, metrics, task."""
    emit(f"# {described['hill']} {described['version']}"
         + (f"  (tree {described['tree_hash'][:12]})" if described["tree_hash"] else "  (not committed yet)"))
    if described["description"]:
        emit(described["description"])
    emit()
    emit("## Submission contract")
    for key in ("what", "command", "params", "symlinks", "unit_tests"):
        if key in described["submission"]:
            emit(f"- {described['submission'][key]}")
    if described["examples"]:
        emit(f"- example submissions: {', '.join('examples/' + e for e in described['examples'])} "
             f"(under {described['path']})")
    emit(f"- evaluator: {described['evaluator']} shape, watchdog {described['timeout']}s")
    dev_run, env = described["dev_run"], described["env"]
    emit(f"- dev run: {dev_run['command']}: {dev_run['what']}" if dev_run["available"]
         else f"- dev run: none ({dev_run['what']})")
    emit(f"- environment: {env['command']} prints the interpreter evals run in"
         + (f" ({env['python']})" if env["python"] and env["built"] else ""))
    emit(_sandbox_line(described.get("sandbox", "auto")))
    emit(_holdout_line(described))
    emit()
    emit("## Params")
    if not described["params"]:
        emit("(none)")
    for param_name, param in described["params"].items():
        emit(_param_line(param_name, param))
    emit()
    emit("## Metrics")
    if not described["metrics"]:
        emit("(declared by the evaluator in each report; ranked in the order given)")
    for metric in described["metrics"]:
        emit(f"- {metric['name']}: {'higher' if metric['direction'] == 'max' else 'lower'} is better "
             f"({metric['direction']})" + _bounds_text(metric) + _timing_text(metric))
    for best in described.get("best") or []:
        primary = "  ".join(f"{p['name']}={p['value']}" for p in best["primary"]) or "no primary config"
        value = f"{best['value']:.6g}" if isinstance(best["value"], (int, float)) else best["value"]
        emit(f"- best so far [{primary}]: {best['metric']} {value} ({best['source']}, of "
             f"{best['candidates']}); {best['noise_label']}")
        if best["selection"] and best["selection"]["n"] > 1:
            emit(f"  {best['selection']['label']}")
    emit()
    emit("## Task")
    emit(described["readme"].rstrip())


def _sandbox_line(level: str) -> str:
    """What `sandbox:` means for a climber: confined, or declared unconfined."""
    if level == "none":
        return ("- sandbox: none (declared by the hill's author: submitted code runs unconfined, and its "
                "reports rank apart from confined ones)")
    return (f"- sandbox: {level} (submitted code runs under bubblewrap; without a usable one an eval is "
            "refused, never run unconfined)")


def _param_line(param_name: str, param: dict) -> str:
    bounds = ""
    if "low" in param or "high" in param:
        bounds = f" in [{param.get('low', '-inf')}, {param.get('high', 'inf')}]"
    if "choices" in param:
        bounds = " one of " + ", ".join(map(str, param["choices"]))
    if param.get("neutral"):
        compared = " (neutral: reports compare whatever its value)"
    else:
        compared = f" ({'primary: ' if param['primary'] else ''}reports compare only with equal values)"
    return (f"- {param_name}: {param['type']}{bounds}, default {param['default']}" + compared
            + (f": {param['description']}" if param.get("description") else ""))


def _timing_text(metric: dict) -> str:
    """`; a claimed wall time, held against the one hills measures` for a
    timing metric: a climber should know their timer is checked."""
    if metric.get("claimed"):
        return (f"; a claimed {metric['claimed']} time, held against the one hills measures "
                f"(tolerance {metric.get('claim_tolerance', 0.5)}, slack {metric.get('claim_slack', 0.1)} s)")
    return "; a timing metric: ranked per machine" if metric.get("timing") else ""


def _bounds_text(metric: dict) -> str:
    """`; implausible below 0, above 10, or beyond best known 2.6 by more than 1e-06 (for n=26)`."""
    parts = [f"{word} {metric[key]}" for key, word in (("floor", "below"), ("ceiling", "above")) if key in metric]
    if "best_known" in metric:
        parts.append(f"beyond best known {metric['best_known']} by more than {metric.get('max_gain', 0)}")
    if not parts:
        return ""
    scope = metric.get("for_params") or {}
    return ("; implausible " + ", ".join(parts)
            + (" (for " + ", ".join(f"{k}={v}" for k, v in scope.items()) + ")" if scope else ""))
