"""`hills list`: the hills registered on this machine."""

import os

import click

from ..base import errors, state
from ..cli.options import CONTEXT, json_option
from ..cli.output import emit, emit_json, say


@click.command("list", context_settings=CONTEXT)
@json_option
def command(as_json: bool) -> int:
    """List the hills registered on this machine, one line per hill.

    Hills of the same name in different projects each get their line; the
    path tells them apart.
    """
    from ..disk import hill
    from ..run import pinned

    rows = []
    for name, entry in state.registry_entries():
        exists = os.path.isfile(os.path.join(entry["path"], "hill.yaml"))
        tree_hash = entry.get("tree_hash")
        if exists and os.path.isdir(os.path.join(entry["path"], ".vc")):
            # HEAD, not the registry: a plain git commit moves it too.
            target = hill.Hill(entry["path"])
            head = target.repo.head()
            tree_hash = pinned.pinned_tree(target, head) if head else None
        rows.append({"name": name, "path": entry["path"], "tree_hash": tree_hash, "exists": exists})
    if as_json:
        emit_json(rows)
    else:
        render(rows)
    return errors.EXIT_OK


def render(rows: list[dict]) -> None:
    """One line per hill: name, tree, path."""
    if not rows:
        say("no hills yet; create one with 'hills new NAME'")
        return
    width = max(len(row["name"]) for row in rows)
    for row in rows:
        tree = (row["tree_hash"] or "uncommitted")[:12]
        emit(f"{row['name']:<{width}}  {tree:<12}  {row['path']}" + ("" if row["exists"] else "  (missing)"))
