"""`hills run`: a dev run of a submission through the hill's solution phase,
as an eval runs it, on the public inputs, unlogged and unsigned. (The
module is not named after its verb: `hills.commands.run` is the funnel
every command runs through.)"""

from __future__ import annotations

import click

from ..base import errors
from ..cli.options import CONTEXT, json_option
from .env import local_hill
from ..cli.output import emit, emit_json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..run.devrun import DevRun, Written


@click.command("run", context_settings=CONTEXT)
@click.argument("submission", metavar="DIR", type=click.Path(file_okay=False))
@click.option("-H", "--hill", "hill_name", metavar="NAME", required=True, help="The hill whose solution phase runs.")
@click.option("-p", "--param", "params", metavar="NAME=VALUE", multiple=True,
              help="Set a param declared in hill.yaml (repeatable); typed and bounded, as for eval.")
@click.option("-k", "--knob", "knobs", metavar="NAME=VALUE", multiple=True,
              help="Set a knob the submission declares in params.json (repeatable); refused outside its range.")
@click.option("-o", "--output", metavar="DIR", type=click.Path(file_okay=False),
              help="Copy the declared outputs, as the scorer would get them, into DIR (new or empty).")
@click.option("--queue", is_flag=True, help="Wait for the hill's exclusive resource instead of failing.")
@click.option("-q", "--quiet", is_flag=True, help="Do not stream the solution's output to stderr.")
@json_option
def command(submission: str, hill_name: str, params: tuple[str, ...], knobs: tuple[str, ...], output: str | None,
            queue: bool, quiet: bool, as_json: bool) -> int:
    """Run a submission through the hill's solution phase, unlogged.

    The solution phase of the hill's committed version runs on DIR as the
    first replicate of 'hills eval' runs it: the same command, confined
    by the same sandbox, in the hill's locked environment, with the same
    caps and time limit, on the validation split's public inputs. Nothing
    is logged, signed or counted, and no report is made; the run folder
    is removed. The solution's output streams to stderr; stdout lists the
    declared outputs (what the scorer would get) and the files the run
    wrote. A hill without a solution phase is refused: its evaluator runs
    the submission itself, with the held-out data in sight.
    """
    from ..base.progress import LINES, Progress, mode_for
    from ..run import devrun

    target = local_hill(hill_name, "run")
    request = devrun.DevRunRequest(hill=target, submission=submission, param_texts=params,
                                   knobs=knobs or None, queue=queue, stream=not quiet, output=output)
    with Progress(mode_for(quiet, verbose=not quiet, elsewhere=LINES), at_once=True, quiet_messages=quiet) as shown:
        shown(f"hills: dev run of '{submission}' on hill '{target.name}': its solution phase, as an eval runs it, "
              "on the public inputs; nothing is logged or signed")
        ran = devrun.dev_run(request, say=shown)
        if ran.isolation == "none":
            shown(f"hills: hill '{target.name}' declares 'sandbox: none': the solution ran unconfined, as it does "
                  "in every eval of this hill")
    if ran.status == "interrupted":
        raise KeyboardInterrupt(ran.reason or "interrupted")
    if as_json:
        emit_json(ran.as_dict())
    else:
        render(ran)
    return errors.EXIT_OK if ran.status == "ok" else errors.EXIT_NO


def render(ran: DevRun) -> None:
    """The dev run for a person: the verdict, then the outputs and the files written."""
    where = f"tree {ran.tree_hash[:12]}" + (", the last commit: the hill has uncommitted changes" if ran.dirty else "")
    if not ran.ran:
        emit(f"solution phase: skipped ({where}): the submission holds no '{ran.when}' (hill.yaml "
             "solution.when), so an eval scores its declared outputs as they are")
    else:
        took = f"{ran.duration_s:.2f}s, exit code {ran.exit_code}" if ran.exit_code is not None else \
            f"{ran.duration_s:.2f}s"
        emit(f"solution phase: {ran.status} ({where}; {took}; isolation {ran.isolation})")
    if ran.reason:
        emit(f"reason: {ran.reason}")
    for hit in ran.caps_hit:
        emit(f"stopped at its cap: {hit['cap']} (limit {hit['limit']}, seen {hit.get('seen')})")
    _files("outputs (what the scorer would get)", ran.outputs)
    if ran.ran:
        _files("written (new or changed in the submission's folder)", ran.written)
    if ran.copied_to:
        emit(f"copied to: {ran.copied_to}")
    emit("not logged, not signed: score it with 'hills eval'")


def _files(title: str, items: tuple[Written, ...]) -> None:
    emit(f"{title}:" + ("" if items else " none"))
    for item in items:
        emit(f"  {item.path}  {item.size} bytes" + ("" if item.kind == "file" else f" ({item.kind})"))
