"""`hills restore`: discard edits of a hill's files since its last commit."""

import click

from ..base import errors
from ..cli.options import CONTEXT, hill_argument
from ..cli.output import emit, say


@click.command("restore", context_settings=CONTEXT)
@hill_argument
@click.argument("paths", metavar="[PATH]...", nargs=-1)
def command(name: str, paths: tuple[str, ...]) -> int:
    """Put a hill's files back as its last commit holds them, discarding edits.

    Restores each PATH of the hill (relative to the hill's folder), or,
    without one, every file of the last commit that was edited or deleted
    since: hill.yaml, the evaluator, its tests, the locks. Files added since
    are left alone ('hills status' lists them), and so are private/ and the
    blobs, which git does not hold. Prints each file restored.
    """
    from ..disk import hill, restore

    target = hill.resolve(name)
    restored = restore.restore(target, paths)
    for rel in restored:
        emit(rel)
    if restored:
        say(f"restored {len(restored)} file(s) of hill '{target.name}' as its last commit holds them")
    else:
        say(f"nothing to restore: hill '{target.name}' has no edited or deleted file of its last commit"
            + (" among those given" if paths else ""))
    return errors.EXIT_OK
