"""`hills commit`: gate a hill, regenerate its locks and record a commit.
Declared as plain data (hills.cli.fast): a re-commit whose gate is
remembered starts without click."""

from __future__ import annotations

from ..base import errors
from ..cli import fast
from ..cli.output import check_teller, emit, say

HELP = """Freeze a hill: gate, regenerate locks, record a commit.

    Runs every check as a gate, regenerates private.lock and blobs.lock from
    disk, builds the tree with a private index and records the commit with
    write-tree, commit-tree and a compare-and-swap update-ref. Nothing under
    private/ and no blob ever becomes a git object. Prints the tree hash and
    the commit id on stdout.
    """

DECLARED = fast.Declared("commit", HELP, [
    fast.Argument("name", metavar="NAME"),
    fast.Option("message", "-m", "--message", help="The commit message.", metavar="TEXT", required=True),
])


def run(name: str, message: str) -> int:
    """The command: gate, lock and commit; the new version on stdout."""
    from ..disk import hill
    from ..freeze import commit

    from ..base.progress import Progress, mode_for

    target = hill.resolve(name)
    with Progress(mode_for()) as shown:
        shown.phase("check 'manifest'")
        result = commit.commit(target, message, progress=check_teller(shown, say))
    render(result)
    return errors.EXIT_OK


def render(result: dict) -> None:
    """The locks and the new version on stderr; tree hash and commit id on stdout."""
    from ..disk import locks

    say(f"  private.lock  {locks.summary(result['private'])}")
    say(f"  blobs.lock    {locks.summary(result['blobs'])}")
    say()
    say(f"committed {result['hill']} {result['version']}")
    say(f"  tree hash  {result['tree_hash']}")
    say(f"  commit     {result['commit']}")
    emit(result["tree_hash"])
    emit(result["commit"])


def __getattr__(name: str) -> object:
    # The click command is built on first use: the fast path never needs it.
    if name == "command":
        return DECLARED.click_command(run)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
