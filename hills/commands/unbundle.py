"""`hills unbundle`: rebuild and register a hill from a bundle file."""

import click

from ..base import errors
from ..cli.options import CONTEXT, json_option
from ..cli.output import emit, emit_json, say


@click.command("unbundle", context_settings=CONTEXT)
@click.argument("bundle_file", metavar="FILE", type=click.Path(dir_okay=False, path_type=str))
@click.option("--into", "into", metavar="DIR", type=click.Path(file_okay=False, path_type=str),
              help="The project folder whose .hills/ receives the hill (default: the current folder).")
@json_option
def command(bundle_file: str, into: str | None, as_json: bool) -> int:
    """Rebuild the hill a bundle holds under .hills/ and register it.

    Checks the whole bundle before the hill appears: every git object
    against its id, the commit against the tree hash the bundle names, and
    every private file and blob against the locks at that tree; a damaged
    or edited bundle is refused naming what differs, and leaves nothing
    behind. Prints the hill's folder; its tree hash is the one 'hills log
    NAME --json' shows on the machine that made the bundle.
    """
    import os

    from ..disk import bundle

    if into is not None and not os.path.isdir(into):
        raise errors.UsageError(f"--into '{into}' is not a folder", hint="create it first, or pass an existing folder")
    result = bundle.unbundle(bundle_file, into)
    if as_json:
        emit_json(result)
    else:
        emit(result["path"])
        say(f"unbundled hill '{result['hill']}' at tree {result['tree_hash'][:12]} "
            f"(commit {result['commit'][:12]}, {result['files']} private or blob file(s))")
    return errors.EXIT_OK
