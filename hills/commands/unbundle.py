"""`hills unbundle`: rebuild and register a hill from a bundle file."""

import click

from ..base import errors
from ..cli.options import CONTEXT, json_option
from ..cli.output import emit, emit_json, say


@click.command("unbundle", context_settings=CONTEXT)
@click.argument("bundle_file", metavar="FILE", type=click.Path(dir_okay=False, path_type=str))
@click.option("--into", "into", metavar="DIR", type=click.Path(file_okay=False, path_type=str),
              help="The project folder whose .hills/ receives the hill (default: the current folder); "
                   "created if missing.")
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

    created = _make_folder(into) if into is not None else []
    try:
        result = bundle.unbundle(bundle_file, into)
    except BaseException:
        for folder in created:  # deepest first; a refused bundle leaves nothing behind
            try:
                os.rmdir(folder)
            except OSError:
                break
        raise
    if as_json:
        emit_json(result)
    else:
        emit(result["path"])
        say(f"unbundled hill '{result['hill']}' at tree {result['tree_hash'][:12]} "
            f"(commit {result['commit'][:12]}, {result['files']} private or blob file(s))")
    return errors.EXIT_OK


def _make_folder(into: str) -> list[str]:
    """Create the folder `into` and the parents it lacks, as `git clone`
    does; the folders created, deepest first."""
    import os

    if os.path.lexists(into) and not os.path.isdir(into):
        raise errors.UsageError(f"--into '{into}' is not a folder", hint="pass a folder, or a path where none is yet")
    created = []
    folder = os.path.abspath(into)
    while not os.path.lexists(folder):
        created.append(folder)
        folder = os.path.dirname(folder)
    from ..base import state

    for path in reversed(created):
        with state.named_os_errors(path):
            os.mkdir(path)
    return created
