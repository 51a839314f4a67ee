"""`hills commit`: gate a hill, regenerate its locks and record a commit."""

import click

from .. import errors
from .check import check_line
from .options import CONTEXT, hill_argument
from .output import emit, say


@click.command("commit", context_settings=CONTEXT)
@hill_argument
@click.option("-m", "--message", required=True, help="The commit message.")
def command(name: str, message: str) -> int:
    """Freeze a hill: gate, regenerate locks, record a commit.

    Runs every check as a gate, regenerates private.lock and blobs.lock from
    disk, builds the tree with a private index and records the commit with
    write-tree, commit-tree and a compare-and-swap update-ref. Nothing under
    private/ and no blob ever becomes a git object. Prints the tree hash and
    the commit id on stdout.
    """
    from .. import commit, hill

    target = hill.resolve(name)
    result = commit.commit(target, message, progress=lambda r: say(check_line(r)))
    render(result)
    return errors.EXIT_OK


def render(result: dict) -> None:
    """The locks and the new version on stderr; tree hash and commit id on stdout."""
    from .. import locks

    say(f"  private.lock  {locks.summary(result['private'])}")
    say(f"  blobs.lock    {locks.summary(result['blobs'])}")
    say()
    say(f"committed {result['hill']} {result['version']}")
    say(f"  tree hash  {result['tree_hash']}")
    say(f"  commit     {result['commit']}")
    emit(result["tree_hash"])
    emit(result["commit"])
