"""`hills journal`: a hill's climb as one self-contained HTML page."""

from __future__ import annotations

import click

from ..base import errors
from ..cli.options import CONTEXT, hill_argument
from ..cli.output import emit, say


@click.command("journal", context_settings=CONTEXT)
@hill_argument
@click.option("-o", "--output", metavar="FILE", help="Write the page to FILE instead of standard output.")
def command(name: str, output: str | None) -> int:
    """Write a hill's climb as one HTML page: plots, attempts, reasons, the best.

    Reads the attempts log of every version of the hill, checks each
    report's signature, and draws the score over attempts, numbered as
    `hills attempts` numbers them, with the best so far per comparable
    group inside its noise band (new best only beyond noise), the holdout
    as its own series and the --final budget left, then lists every
    attempt with its change in words (its -m note or commit subject), its
    verdict, noise, status, reason, unit tests, officialness and
    signature, and the best submission's instances against the previous
    best. The page loads nothing: its plots are inline SVG. Exits 1 when a
    report's signature is INVALID or a log's chain is broken (the page
    still says so).
    """
    import os

    from ..disk import hill
    from ..views import journal

    target = hill.resolve(name)
    if output is not None:
        folder = os.path.dirname(os.path.abspath(output))
        if not os.path.isdir(folder):
            raise errors.UsageError(f"cannot write the journal to '{output}': folder '{folder}' does not exist")
    import gc

    # No collection while the logs are read and judged (each would walk every
    # report read so far); then what was read is left out of the collections
    # the plots' cyclic garbage needs (frozen objects are still freed).
    gc.disable()
    found = journal.collect(target)
    gc.freeze()
    gc.enable()
    page = journal.render(found)
    if output is None:
        emit(page.rstrip("\n"))
    else:
        from ..base.state import atomic_write

        atomic_write(output, page)
        say(f"{target.name}: {len(found.attempts)} attempt(s) written to {output}")
    broken = [c for c in found.chains if not c["ok"]]
    invalid = [a for a in found.attempts if not a.verified]
    for chain in broken:
        say(f"warning: the attempts log of {(chain['tree_hash'] or '')[:12]} is broken at line {chain['break_line']}")
    if invalid:
        say(f"warning: {len(invalid)} report(s) with an INVALID signature: "
            + ", ".join(found.name(a) for a in invalid[:10]))
    return errors.EXIT_NO if broken or invalid else errors.EXIT_OK
