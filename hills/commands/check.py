"""`hills check`: run the checks a hill must pass before a commit."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ..base import errors
from ..cli.options import CONTEXT, hill_argument, json_option
from ..cli.output import check_line, check_teller, emit, emit_json

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..base.progress import Progress
    from ..checks.shared import Result


@click.command("check", context_settings=CONTEXT)
@hill_argument
@click.option("--no-tests", is_flag=True, help="Skip the hill's own tests/.")
@click.option("-v", "--verbose", is_flag=True, help="Name each cheat the cheat corpus tried, a line each.")
@click.option("--fresh", is_flag=True,
              help="Run the leak probe and the cheat corpus again, not their results recorded for this tree.")
@json_option
def command(name: str, no_tests: bool, verbose: bool, fresh: bool, as_json: bool) -> int:
    """Run the checks a hill must pass before it can be committed.

    One line per check: manifest schema, layout, the README, the answer
    leak scan (held-out content of private/ in a public file, a blob or a
    variable an eval passes on), uv.lock up to date, the
    evaluator contract binding in the hill's own uv environment, the
    hill's tests/ passing in that environment, the sandbox starting, and
    the leak probe: the example submission, its code carrying a payload
    that tries every way to reach private data, evaluated unlogged; and
    the cheat corpus. The leak probe's and the cheat corpus's passing
    results are recorded for the hill's tree and environment and reused
    while neither changes (--fresh runs them again); a passing check with
    the tests is remembered for `hills commit`. Exits 1 when any fails.
    """
    from ..disk import hill
    from ..freeze import gate
    from ..base.progress import Progress, mode_for

    target = hill.resolve(name)
    # Each check's line on stdout as it finishes; on a terminal, the check
    # running on a live line on stderr. --json prints only at the end.
    with Progress(mode_for()) as shown:
        shown.phase("check 'manifest'")
        tell = None if as_json else check_teller(shown, emit)
        if tell is not None and verbose:
            tell = _naming_what_was_tried(tell, shown)
        results = gate.checked(target, tests=not no_tests, tell=tell, say=shown, fresh=fresh)
    failed = [r for r in results if r.status == "fail"]
    if as_json:
        emit_json({"hill": target.name, "passed": not failed, "checks": [r.as_dict() for r in results]})
    else:
        render(target.name, results, told=True)
    return errors.EXIT_NO if failed else errors.EXIT_OK


def _naming_what_was_tried(tell: Callable[[Result], None], shown: Progress) -> Callable[[Result], None]:
    """`tell`, and after a check that tried several things, a line each."""
    def told(result: Result) -> None:
        tell(result)
        for name in result.tried or ():
            shown.write(emit, f"        tried  {name}")

    return told


def render(hill_name: str, results: list[Result], told: bool = False) -> None:
    """One line per check (unless each was told as it finished), then the verdict."""
    failed = [r for r in results if r.status == "fail"]
    for result in results if not told else ():
        emit(check_line(result))
    emit()
    emit(f"{hill_name}: " + ("all checks passed" if not failed else f"{len(failed)} check(s) failed"))
