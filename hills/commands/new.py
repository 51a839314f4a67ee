"""`hills new`: create a hill from a template or a hillclimb problem."""

import os

import click

from ..base import errors, state
from ..cli.options import CONTEXT
from ..cli.output import emit, say


@click.command("new", context_settings=CONTEXT)
@click.argument("name")
@click.option("-t", "--template", metavar="TEMPLATE", default="default", show_default=True,
              help="Template to start from (see 'hills examples').")
@click.option("--from-hillclimb", "hillclimb_dir", metavar="DIR",
              help="Import the hillclimb problem folder DIR instead of a template.")
def command(name: str, template: str, hillclimb_dir: str | None) -> int:
    """Create the hill NAME under .hills/ in the current folder.

    Creates .hills/.gitignore (so the folder hides itself from your project's
    git), the hill folder from TEMPLATE, its own git dir .vc with the
    pre-commit hook installed, and registers the hill in machine state. No
    file of yours is touched; a refused name or a failed step leaves nothing.
    With --from-hillclimb, the hill is converted from a hillclimb problem
    folder instead (see docs/hillclimb.md); its held-out inputs go to private/.
    """
    from ..disk import hill

    if hillclimb_dir is not None:
        from ..disk import hillclimb

        if template != "default":
            raise errors.UsageError("--template and --from-hillclimb cannot be combined")
        created = hillclimb.new_hill(name, hillclimb_dir, warn=say)
        template = f"hillclimb problem {created['import']['problem']} ({created['import']['shape']})"
    else:
        created = hill.create(name, template)
    render(created, name, template)
    return errors.EXIT_OK


def render(created: dict, name: str, template: str) -> None:
    """The new hill's path on stdout; what was made, and what next, on stderr."""
    from ..checks.check import readme_check

    if created["home_created"]:
        say(f"hills: created machine state at {state.home()}")
    emit(created["path"])
    say(f"created {os.path.relpath(created['path'])}")
    say(f"  template         {template}")
    say(f"  version control  {os.path.relpath(created['path'])}/.vc (nothing committed yet)")
    if readme_check(created["path"]).status == "fail":
        say(f"hint: write the task in {os.path.relpath(created['path'])}/README.md, replacing the note "
            "for the hill's author")
    say(f"hint: run 'hills check {name}', then 'hills commit {name} -m MESSAGE' to freeze it")
