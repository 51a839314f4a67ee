"""`hills export`: a hill's committed version written in another tool's
task format, one subcommand per format (`harbor` for now), each a thin
shell over its core in the freeze layer."""

from __future__ import annotations

import click

from ..base import errors
from ..cli.options import CONTEXT, HillsGroup, hill_argument, json_option
from ..cli.output import emit, emit_json, say


@click.group("export", context_settings=CONTEXT, cls=HillsGroup)
def command() -> None:
    """Write a hill's committed version as another tool's task.

    'hills export harbor NAME -o DIR' writes a Harbor task folder whose
    verifier runs in a container of its own, with the held-out data.
    """


@command.command("harbor", context_settings=CONTEXT)
@hill_argument
@click.option("-o", "--output", "output", metavar="DIR", required=True,
              type=click.Path(file_okay=False, path_type=str),
              help="The task folder to write: new or empty, unless --force.")
@click.option("--force", is_flag=True, help="Replace what DIR holds.")
@click.option("--example", metavar="NAME",
              help="The example submission the agent starts from (default: the first under examples/).")
@click.option("--split", type=click.Choice(["holdout", "validation"]), default="holdout", show_default=True,
              help="The split the verifier scores: holdout is 'hills eval --final'.")
@click.option("--failed-reward", "failed_reward", type=float, default=0.0, show_default=True,
              help="The reward of a submission that fails or is buggy (0 unless given).")
@click.option("--base-image", "base_image", metavar="IMAGE", default="python:3.12-slim", show_default=True,
              help="The Docker image both containers start from.")
@json_option
def harbor_command(name: str, output: str, force: bool, example: str | None, split: str, failed_reward: float,
                   base_image: str, as_json: bool) -> int:
    """Write the committed version of a hill as a Harbor task folder.

    The task uses Harbor's separate-verifier mode: the agent's container
    holds the hill's committed public files and a copy of an example
    submission to improve, never its private/ data; the verifier's
    container holds hills, the hill as a bundle with its held-out data,
    and tests/test.sh, which scores the agent's submission with 'hills
    eval' and writes Harbor's reward file. A hill with uncommitted edits
    exports its last commit. See docs/harbor.md.
    """
    import math

    from ..disk import hill
    from ..freeze import harbor

    if not math.isfinite(failed_reward):
        raise errors.UsageError(f"--failed-reward must be a finite number, got '{failed_reward}'")
    request = harbor.HarborRequest(hill.resolve(name), output, force=force, example=example, split=split,
                                   failed_reward=failed_reward, base_image=base_image)
    exported = harbor.export(request)
    if as_json:
        emit_json(exported.as_dict())
    else:
        emit(exported.path)
        say(f"exported hill '{exported.hill}' at tree {exported.tree_hash[:12]} (commit {exported.commit[:12]}) "
            f"as a Harbor task: {exported.private_files} private file(s) on the verifier's side only")
    return errors.EXIT_OK
