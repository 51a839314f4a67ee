"""`hills status`: what changed in a hill since its last commit."""

import click

from ..base import errors
from ..cli.options import CONTEXT, hill_argument, json_option
from ..cli.output import emit, emit_json


@click.command("status", context_settings=CONTEXT)
@hill_argument
@click.option("--exit-code", "exit_code", is_flag=True,
              help="Exit 1 when anything changed since the last commit (files or lock drift).")
@json_option
def command(name: str, exit_code: bool, as_json: bool) -> int:
    """Show what changed in a hill since its last commit.

    Lists added, modified and deleted files, and lock drift: a file under
    private/ or a blob added, changed or removed since HEAD's locks. Exits 0
    either way, unless --exit-code is given; use --json for a
    machine-readable form.
    """
    from ..disk import hill
    from ..disk.manifest import ManifestError
    from ..views import info

    target = hill.resolve(name)
    try:
        result = info.status(target)
    except ManifestError as exc:
        raise exc.refused(target.name) from None
    changes = result["files"] + result["private"] + result["blobs"]
    if as_json:
        emit_json(result)
    else:
        render(target.name, result)
    return errors.EXIT_NO if exit_code and changes else errors.EXIT_OK


def render(hill_name: str, result: dict) -> None:
    """The hill's HEAD, then one line per change."""
    if not result["head"]:
        emit(f"hill '{hill_name}': no commits yet")
    else:
        emit(f"hill '{hill_name}' at {result['head'][:12]}")
    if not result["files"] + result["private"] + result["blobs"]:
        emit("nothing changed since the last commit")
        return
    for change, path in result["files"]:
        emit(f"  {change:<10} {path}")
    for lock_name in ("private", "blobs"):
        for change, path in result[lock_name]:
            emit(f"  {change:<10} {path}  ({lock_name}.lock)")
