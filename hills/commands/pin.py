"""`hills pin`: approve one version of a hill."""

import click

from ..base import errors
from ..cli.options import CONTEXT, hill_argument
from ..cli.output import emit, say


@click.command("pin", context_settings=CONTEXT)
@hill_argument
@click.argument("tree", required=False, metavar="[TREE]")
@click.option("--clear", is_flag=True, help="Remove the approval: every committed version scores officially again.")
def command(name: str, tree: str | None, clear: bool) -> int:
    """Approve one version of a hill; evals of any other are unofficial.

    Records TREE (default: the tree of HEAD) in machine state, sealed with
    the machine key, as the version a person approved. From then on an eval
    of another tree of the hill is logged and signed but unofficial, with
    the reason stated, so a climber that re-commits an edited evaluator
    cannot produce official scores. Prints the approved tree hash.
    """
    from ..disk import hill, pin

    target = hill.resolve(name)
    if clear:
        if tree:
            raise errors.UsageError("--clear takes no TREE")
        pin.clear_pin(target)
        say(f"hill '{target.name}': approval cleared; every committed version scores officially")
        return errors.EXIT_OK
    if not tree:
        head = target.repo.head()
        if not head:
            raise errors.Refused(f"hill '{target.name}' has no commits yet", hint=f"hills commit {name} -m MESSAGE")
        tree = target.repo.tree_of(head)
    approved = pin.set_pin(target, tree)
    render(target.name, approved)
    return errors.EXIT_OK


def render(hill_name: str, approved: str) -> None:
    """The approved tree hash on stdout, what it means on stderr."""
    emit(approved)
    say(f"hill '{hill_name}': approved tree {approved[:12]}; evals of other versions are unofficial")
