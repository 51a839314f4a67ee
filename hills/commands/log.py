"""`hills log`: a hill's committed versions."""

import click

from ..base import errors
from ..cli.options import CONTEXT, hill_argument, json_option
from ..cli.output import emit, emit_json


@click.command("log", context_settings=CONTEXT)
@hill_argument
@json_option
def command(name: str, as_json: bool) -> int:
    """List a hill's versions: tree hash, commit, date, message, evals."""
    from ..disk import hill
    from ..views import info

    target = hill.resolve(name)
    versions = info.log(target)
    if as_json:
        emit_json(versions)
    else:
        render(target.name, versions)
    return errors.EXIT_OK


def render(hill_name: str, versions: list[dict]) -> None:
    """A table with headers, one version per line."""
    if not versions:
        emit(f"hill '{hill_name}': no commits yet")
        return
    emit(f"{'TREE':<12}  {'COMMIT':<12}  {'DATE':<25}  {'EVALS':>5}  MESSAGE")
    for version in versions:
        emit(f"{version['tree_hash'][:12]}  {version['commit'][:12]}  {version['date']:<25}  "
             f"{version['evals']:>5}  {version['message']}")
