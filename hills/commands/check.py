"""`hills check`: run the checks a hill must pass before a commit."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from .. import errors
from .options import CONTEXT, hill_argument, json_option
from .output import check_line, emit, emit_json

if TYPE_CHECKING:
    from ..check import Result


@click.command("check", context_settings=CONTEXT)
@hill_argument
@click.option("--no-tests", is_flag=True, help="Skip the hill's own tests/.")
@json_option
def command(name: str, no_tests: bool, as_json: bool) -> int:
    """Run the checks a hill must pass before it can be committed.

    One line per check: manifest schema, layout, the README, the answer
    leak scan (held-out content of private/ in a public file, a blob or a
    variable an eval passes on), uv.lock up to date, the
    evaluator contract binding in the hill's own uv environment, the
    hill's tests/ passing in that environment, the sandbox starting, and
    the leak probe: the example submission, its code carrying a payload
    that tries every way to reach private data, evaluated unlogged.
    Exits 1 when any fails.
    """
    from .. import check, hill

    target = hill.resolve(name)
    results = check.run_checks(target.path, tests=not no_tests)
    failed = [r for r in results if r.status == "fail"]
    if as_json:
        emit_json({"hill": target.name, "passed": not failed, "checks": [r.as_dict() for r in results]})
    else:
        render(target.name, results)
    return errors.EXIT_NO if failed else errors.EXIT_OK


def render(hill_name: str, results: list[Result]) -> None:
    """One line per check, then the verdict."""
    failed = [r for r in results if r.status == "fail"]
    for result in results:
        emit(check_line(result))
    emit()
    emit(f"{hill_name}: " + ("all checks passed" if not failed else f"{len(failed)} check(s) failed"))
