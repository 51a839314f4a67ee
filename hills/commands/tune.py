"""`hills tune`: tune the knobs a submission declares."""

import click

from ..base import errors
from ..cli.options import CONTEXT, json_option
from ..cli.output import emit, emit_json, say


@click.command("tune", context_settings=CONTEXT)
@click.argument("submission", metavar="DIR", type=click.Path(file_okay=False, path_type=str))
@click.option("-H", "--hill", "hill_name", metavar="NAME", required=True, help="The hill to score against.")
@click.option("--budget", type=int, required=True, metavar="N", help="Number of trials (evaluator runs), at least 1.")
@click.option("--tuner", type=click.Choice(["random", "optuna"]), default="random", show_default=True,
              help="How trial values are chosen; optuna needs the hills[optuna] extra.")
@click.option("--parallel", type=int, default=1, show_default=True, metavar="K", help="Trials run at once.")
@click.option("-p", "--param", "params", metavar="NAME=VALUE", multiple=True,
              help="Set a hill param for every trial (repeatable), as for 'hills eval'.")
@click.option("--seed", type=int, metavar="SEED", help="Seed of the tuner's own random choices.")
@click.option("--on", "on", metavar="ray[://ADDRESS]",
              help="Run each trial on a Ray cluster, in a worker on one of its nodes (the hills[ray] extra); "
                   "see docs/cluster.md.")
@click.option("--workers", type=click.IntRange(min=1), metavar="N",
              help="With --on: trials in flight at once (default: the cluster's CPUs, or GPUs for a GPU hill).")
@json_option
def command(submission: str, hill_name: str, budget: int, tuner: str, parallel: int, params: tuple[str, ...],
            seed: int | None, on: str | None, workers: int | None, as_json: bool) -> int:
    """Tune the knobs a submission declares in params.json.

    Runs BUDGET trials, each a full 'hills eval' with its own knob values:
    a signed, logged report like any other. Trial 0 uses the declared
    defaults. The candidate's score is its best passing trial; its knob
    values are written beside DIR as DIR.best-params.json. Exits 1 when no
    trial passed, 5 when the first trial's eval was refused before scoring.
    With --on, each trial runs on a Ray cluster node and its report, signed
    by that node, is verified and logged here.
    """
    from ..disk import hill
    from ..many import tune

    if workers is not None and on is None:
        raise errors.UsageError("--workers needs --on", hint="for example --on ray --workers 4")
    from ..base.progress import LINES, Progress, mode_for

    target = hill.resolve(hill_name)
    if on is None:
        with Progress(mode_for(elsewhere=LINES)) as shown:
            shown.phase(f"trial 0 of {budget} running (the declared defaults)")
            result = tune.tune(target, submission, budget, tuner, parallel, params, seed=seed, progress=shown)
    else:
        result = _tune_on_cluster(target, submission, budget, tuner, workers, params, seed, on)
    if as_json:
        emit_json(result)
    else:
        render(result)
    return errors.EXIT_OK if result["best"] else errors.EXIT_NO


def _tune_on_cluster(target: object, submission: str, budget: int, tuner: str, workers: int | None,
                     params: tuple[str, ...], seed: int | None, on: str) -> dict:
    """`tune.tune` with each trial a job of a cluster session."""
    from collections.abc import Mapping
    from typing import Any

    from .. import cluster
    from ..many import tune
    from ..disk.hill import Hill

    assert isinstance(target, Hill)
    session = cluster.Session(target, on, say)

    def runner(values: Mapping[str, Any]) -> tune.TrialEval:
        done = session.run(cluster.Job(submission, params, dict(values)))
        return tune.TrialEval(done.report, done.message, done.hint, refused=done.exit_code == errors.EXIT_NOT_SCORED)

    try:
        return tune.tune(target, submission, budget, tuner, workers or session.slots(), params, seed=seed,
                         progress=say, runner=runner)
    finally:
        session.close()


def render(result: dict) -> None:
    """The best trial: its metrics, its knobs, where they were written."""
    best = result["best"]
    if not best:
        emit("no trial passed")
        return
    emit(f"best trial {best['trial']}: " + "  ".join(f"{m['name']}={m['value']:.6g} ({m['direction']})"
                                                      for m in best["metrics"]))
    emit("  knobs  " + "  ".join(f"{k}={v}" for k, v in best["knobs"].items()))
    if not best["official"]:
        emit(f"  unofficial: {best['official_reason']}")
    emit(f"  written to {result['best_params_file']}")
