"""The signatures of a log's reports, each checked once: a sealed record
beside the log says up to which entry (its seq and link) every report
signed by this machine's key was found valid, so `hills attempts`, `rank
-H` and the journal check only the reports logged after it.

Why that is sound: the record is sealed with the machine's secret (an edit
voids it), it names the machine key it was made with, and it is used only
on a log whose chain is intact from its first line through that entry, so
the lines it covers are byte for byte the ones checked then (each line's
link is the SHA-256 of its bytes, and the next line holds it). A report
whose verdict can change without its bytes changing is never recorded as
checked but checked again each time (`recheck`): one signed by another key
(`hills trust remove` may take its trust away), an old HMAC report, one
whose trust claims `service` (valid only in the service's own process),
and one that failed."""

from __future__ import annotations

import os

from . import signing

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from .chain import Walk
    from .trust import Keys, Signer

VERSION = 1
FILE = "reports-checked.json"


def record_path(log_path: str) -> str:
    """Where the record of a log's checked reports lives: beside the log."""
    return os.path.join(os.path.dirname(os.path.abspath(log_path)), FILE)


def _kept(path: str, walk: Walk, keys: Keys) -> tuple[int, set[int]]:
    """(entries covered, indexes to check again) from the record, or (0,
    set()) when there is none that holds for this log as it is now."""
    from ..base.state import sealed_read

    if not walk.report.ok or walk.also or keys.public is None:
        return 0, set()
    kept = sealed_read(path)
    if not (isinstance(kept, dict) and kept.get("version") == VERSION and kept.get("signer") == keys.fingerprint):
        return 0, set()
    covered, recheck = kept.get("entries"), kept.get("recheck")
    if isinstance(covered, bool) or not isinstance(covered, int) or not 0 < covered <= len(walk.entries) \
            or not isinstance(recheck, list) or not all(isinstance(i, int) for i in recheck):
        return 0, set()
    last = walk.entries[covered - 1]
    if last.get("seq") != kept.get("seq") or last.get("mac") != kept.get("mac"):
        return 0, set()  # not the log the record was made for
    return covered, set(recheck)


def report_verdicts(log_path: str, walk: Walk, keys: Keys,
                    allowed: Sequence[Signer] | None) -> dict[int, signing.Verdict]:
    """{entry index: verdict} for each entry of `walk` that holds a report,
    each signature checked at most once across calls (see the module)."""
    path = record_path(log_path)
    covered, recheck = _kept(path, walk, keys)
    indexes = [index for index, entry in enumerate(walk.entries) if isinstance(entry.get("report"), dict)]
    todo = [index for index in indexes if index >= covered or index in recheck]
    if len(todo) > 8:
        from .trust import check_many

        check_many()  # a few ms per check in plain Python: many reports pay for the import
    verdicts: dict[int, signing.Verdict] = {}
    again = {index for index in recheck if index < covered}
    for index in indexes:
        if index < covered and index not in recheck:
            verdicts[index] = signing.Verdict(True, "signature valid", signing.LOCAL, keys.public, False)
            continue
        report: dict[str, Any] = walk.entries[index]["report"]
        verdict = signing.verify(report, keys, allowed)
        verdicts[index] = verdict
        if index >= covered and not (verdict.ok and verdict.signer == signing.LOCAL
                                     and report.get("trust") != signing.SERVICE):
            again.add(index)
    if walk.report.ok and not walk.also and keys.public is not None and walk.entries \
            and len(walk.entries) > covered:
        last = walk.entries[-1]
        _save(path, {"version": VERSION, "signer": keys.fingerprint, "entries": len(walk.entries),
                     "seq": last.get("seq"), "mac": last.get("mac"), "recheck": sorted(again)})
    return verdicts


def _save(path: str, value: dict[str, Any]) -> None:
    from ..base.state import sealed_write

    try:
        sealed_write(path, value)
    except OSError:
        pass  # a record that cannot be written costs a longer check next time, never a wrong verdict
