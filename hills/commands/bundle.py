"""`hills bundle`: one committed version of a hill as one file."""

import os

import click

from ..base import errors
from ..cli.options import CONTEXT, hill_argument, json_option
from ..cli.output import emit, emit_json, say


@click.command("bundle", context_settings=CONTEXT)
@hill_argument
@click.option("-o", "--output", metavar="FILE", type=click.Path(dir_okay=False, path_type=str),
              help="Write the bundle to FILE (default: NAME-TREE.hillbundle in the current folder).")
@json_option
def command(name: str, output: str | None, as_json: bool) -> int:
    """Write the committed version of a hill as one file, for another machine.

    The file holds the hill's HEAD commit and the git objects of its tree,
    and its private files and locked blobs, each once, by digest. The data
    on disk must match the locks at HEAD. 'hills unbundle FILE' rebuilds the
    hill elsewhere, checked against the tree hash and the locks. The file
    holds the held-out data: it is written readable by its owner only.
    """
    from ..disk import bundle, hill

    target = hill.resolve(name)
    _, tree_hash = bundle.head_version(target)
    path = output or f"{target.name}-{tree_hash[:12]}.hillbundle"
    contents = bundle.write(target, path)
    result = dict(contents.as_dict(), path=os.path.abspath(path))
    if as_json:
        emit_json(result)
    else:
        emit(result["path"])
        say(f"bundled hill '{contents.hill}' at tree {contents.tree_hash[:12]} (commit {contents.commit[:12]}): "
            f"{len(contents.data)} private or blob file(s), {contents.size} bytes")
    return errors.EXIT_OK
