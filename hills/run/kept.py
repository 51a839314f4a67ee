"""The snapshots of official evals, kept by content hash within a size
budget (HILLS_SNAPSHOT_BUDGET) for `hills rescore` (hills/many/rescore.py),
which runs them against a newer version of the hill."""

from __future__ import annotations

import math
import os
import time

from ..base import state
from ..base.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

DEFAULT_BUDGET = 1024 ** 3
BUDGET_ENV = "HILLS_SNAPSHOT_BUDGET"
_UNITS = {"": 1, "k": 1000, "m": 1000 ** 2, "g": 1000 ** 3, "t": 1000 ** 4,
          "kib": 1024, "mib": 1024 ** 2, "gib": 1024 ** 3, "tib": 1024 ** 4}


def store_dir() -> str:
    return os.path.join(state.home(), "snapshots")


def _folder(submission_hash: str) -> str:
    algorithm, _, digest = submission_hash.partition(":")
    if not digest or not digest.isalnum() or not algorithm.isalnum():
        raise ValueError(f"not a submission hash: {submission_hash!r}")
    return os.path.join(store_dir(), f"{algorithm}-{digest}")


def budget() -> int:
    """The store's size budget in bytes: $HILLS_SNAPSHOT_BUDGET (a number of
    bytes, or with k, M, G, T or KiB, MiB, GiB, TiB), else 1 GiB."""
    text = os.environ.get(BUDGET_ENV, "").strip()
    if not text:
        return DEFAULT_BUDGET
    number = text.rstrip("kKmMgGtTiIbB")
    unit = text[len(number):].strip().lower()
    unit = unit[:-1] if unit.endswith("b") and unit not in ("kib", "mib", "gib", "tib") else unit
    try:
        value = float(number)
    except ValueError:
        value = math.nan
    if unit not in _UNITS or not math.isfinite(value) or value < 0:
        raise UsageError(f"${BUDGET_ENV} is '{text}': expected a size such as 500MB, 2GiB or a number of bytes")
    return int(value * _UNITS[unit])


def _size(folder: str) -> int:
    total = 0
    for current, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(current, name)).st_size
            except OSError:
                pass
    return total


def _index_path() -> str:
    return os.path.join(store_dir(), "index.json")


def _read_index() -> dict[str, Any]:
    index = state.sealed_read(_index_path())
    return index if isinstance(index, dict) else {}


def keep(source_dir: str, report: Mapping[str, Any]) -> None:
    """Keep the snapshot of an official eval (hard links where the file
    system allows, copies elsewhere), note which hill used it and whether it
    passed, and prune the store to its budget: first the oldest snapshots
    that no passing report names, then the oldest of the rest. The eval is
    logged by then: a store that cannot take it is a warning on stderr,
    never the eval's failure."""
    from ..base.errors import HillsError

    try:
        _keep(source_dir, report)
    except (OSError, HillsError) as exc:
        import sys

        said = exc.message if isinstance(exc, HillsError) else str(exc)
        sys.stderr.write(f"hills: warning: the submission snapshot was not kept for hills rescore: {said}\n")


def _keep(source_dir: str, report: Mapping[str, Any]) -> None:
    submission_hash = report.get("submission_hash")
    if not isinstance(submission_hash, str) or not os.path.isdir(source_dir):
        return
    target = _folder(submission_hash)
    os.makedirs(store_dir(), exist_ok=True)
    with state.file_lock(os.path.join(store_dir(), "index.lock")):
        index = _read_index()
        entry = index.get(submission_hash)
        if entry is None or not os.path.isdir(target):
            staging = target + f".tmp-{os.getpid()}"
            if os.path.lexists(staging):
                import shutil

                shutil.rmtree(staging, ignore_errors=True)
            _link_or_copy(source_dir, staging)
            os.rename(staging, target)
            entry = {"size": _size(target), "stored": time.time(), "passing": False, "hills": []}
        entry["last_used"] = time.time()
        entry["passing"] = bool(entry.get("passing")) or report.get("status") == "passing"
        if report.get("hill") not in entry["hills"]:
            entry["hills"] = sorted([*entry["hills"], report.get("hill")])[:100]
        index[submission_hash] = entry
        _prune(index, budget(), keep_hash=submission_hash)
        state.sealed_write(_index_path(), index)


def _link_or_copy(source: str, target: str) -> None:
    """Copy the tree `source` to `target` with os calls only (shutil costs an
    eval its compressors' imports): files hard-linked where the file system
    allows, else copied; links as links."""
    os.mkdir(target)
    for current, dirs, files in os.walk(source):
        rel = os.path.relpath(current, source)
        into = target if rel == "." else os.path.join(target, rel)
        for name in list(dirs):
            path = os.path.join(current, name)
            if os.path.islink(path):
                os.symlink(os.readlink(path), os.path.join(into, name))
                dirs.remove(name)
            else:
                os.mkdir(os.path.join(into, name))
        for name in files:
            path, copy = os.path.join(current, name), os.path.join(into, name)
            if os.path.islink(path):
                os.symlink(os.readlink(path), copy)
                continue
            try:
                os.link(path, copy)
            except OSError:
                with open(path, "rb") as reader, open(copy, "xb") as writer:
                    while chunk := reader.read(1 << 20):
                        writer.write(chunk)
                os.chmod(copy, os.stat(path).st_mode & 0o777)


def _prune(index: dict[str, Any], limit: int, keep_hash: str | None = None) -> list[str]:
    """Remove snapshots until the store fits `limit`; returns the hashes removed."""
    total = sum(int(entry.get("size", 0)) for entry in index.values())
    order = sorted((name for name in index if name != keep_hash),
                   key=lambda name: (bool(index[name].get("passing")), index[name].get("last_used", 0)))
    removed = []
    for name in order:
        if total <= limit:
            break
        import shutil

        total -= int(index[name].get("size", 0))
        shutil.rmtree(_folder(name), ignore_errors=True)
        del index[name]
        removed.append(name)
    return removed


def kept(submission_hash: str) -> str | None:
    """The kept snapshot of `submission_hash`, or None."""
    try:
        folder = _folder(submission_hash)
    except ValueError:
        return None
    return folder if submission_hash in _read_index() and os.path.isdir(folder) else None
