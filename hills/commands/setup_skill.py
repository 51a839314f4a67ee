"""`hills setup skill`: install the agent skill shipped with this hills, or
say whether installed copies are stale."""

from __future__ import annotations

import click

from ..base import errors
from ..cli.options import CONTEXT
from ..cli.output import emit, emit_json, say

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..disk.skill import Installed


@click.command("skill", context_settings=CONTEXT)
@click.option("--dir", "folder", metavar="DIR", help="Install into the skills folder DIR (as DIR/hills).")
@click.option("--agent", "agents", metavar="NAME", multiple=True,
              help="Install where the agent CLI NAME reads skills (repeatable); see AGENTS in hills-setup(1).")
@click.option("--project", is_flag=True,
              help="Install into the project around the current folder, not the home folder.")
@click.option("--check", is_flag=True, help="Install nothing: say whether each copy is current; exit 1 if not.")
@click.option("--force", is_flag=True, help="Replace a folder named hills that hills did not install.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of the human lines.")
def command(folder: str | None, agents: tuple[str, ...], project: bool, check: bool, force: bool,
            as_json: bool) -> int:
    """Install the agent skill shipped with this hills, stamped with its version.

    Without --agent or --dir, the skill goes where each agent CLI found on
    this machine reads skills (its folder in the home exists), or into the
    generic layout ~/.agents/skills when none is found; --project puts it
    in the project instead. The installed SKILL.md names this hills'
    version; --check compares each copy with the one this hills ships.
    """
    from ..disk import skill

    if folder is not None and project:
        raise errors.UsageError("--dir and --project are exclusive", hint="--dir names the skills folder itself")
    chosen = skill.targets(agents, folder=folder, project=project)
    results = skill.check_all(chosen) if check else [skill.install(target, force=force) for target in chosen]
    if as_json:
        emit_json([{"folder": r.target.folder, "agents": list(r.target.agents), "state": r.state,
                    "version": r.version, "detail": r.detail} for r in results])
    else:
        render(results, check)
    if check and any(r.state != "current" for r in results):
        return errors.EXIT_NO
    return errors.EXIT_OK


def render(results: list[Installed], check: bool) -> None:
    """The folders on stdout, one a line; what happened on stderr."""
    for result in results:
        emit(result.target.folder)
        who = f" ({', '.join(result.target.agents)})" if result.target.agents else ""
        if check:
            say(f"{result.state}: {result.target.folder}{who}: {result.detail}")
        else:
            say(f"installed: {result.target.folder}{who}: {result.detail}")
    if check and any(r.state in ("stale", "missing") for r in results):
        say("hint: run 'hills setup skill' with the same options to install this hills' skill")
