"""The gate's remembered verdicts of a hill folder (hills/freeze/gate.py
keeps them): where they are, the digest of the files a verdict judged, and
the version of the cheat corpus a passing verdict recorded, which an eval of
a clean committed tree reads for its report's `corpus`."""

import json
import os
import stat as stat_module

from ..base import state
from ..base.digests import sha256
from ..base.errors import HillsError
from . import hill as hill_module, locks
from .hill import Hill

# A hill's files as hill.list_tree_files lists them: (regular, blobs).
Listing = tuple[list[str], list[str]]


def listing_of(hill: Hill) -> Listing | None:
    """hill.list_tree_files, or None when it refuses (the checks then say why)."""
    try:
        return hill_module.list_tree_files(hill)
    except HillsError:
        return None


def files_digest(hill: Hill, cache: locks.StatCache, listing: Listing | None) -> str | None:
    """The digest of the hill's files as a commit holds them (path,
    executable bit, content through the stat cache), the two locks aside,
    or None when a file cannot be read: an eval of a clean committed tree
    finds the verdict its files passed by it (passed_corpus)."""
    if listing is None:
        return None
    regular, blobs = listing
    entries = file_entries(hill, cache, regular + blobs)
    if entries is None:
        return None
    digest = sha256()
    for entry in entries:
        digest.update(json.dumps(entry).encode() + b"\n")
    return digest.hexdigest()


def file_entries(hill: Hill, cache: locks.StatCache, names: list[str]) -> list[list[object]] | None:
    """[path, executable bit, content digest] of each file, sorted, the two
    locks aside; None when one cannot be read."""
    entries: list[list[object]] = []
    for rel in sorted(names):
        if rel in (locks.PRIVATE_LOCK, locks.BLOBS_LOCK):
            continue
        full = os.path.join(hill.path, rel)
        try:
            st = os.stat(full)
        except OSError:
            return None
        entries.append([rel, bool(st.st_mode & stat_module.S_IXUSR), cache.digest(full, st)])
    return entries


def passed_corpus(hill: Hill) -> int | None:
    """The version of the cheat corpus a passing gate recorded for the
    hill's files as they are now, or None when none did."""
    cache = locks.StatCache(hill.path)
    files = files_digest(hill, cache, listing_of(hill))
    kept = state.sealed_read(verdicts_path(hill))
    for entry in kept if isinstance(kept, list) and files else []:
        if isinstance(entry, dict) and entry.get("files") == files and isinstance(entry.get("corpus"), int):
            return entry["corpus"]
    return None


def verdicts_path(hill: Hill) -> str:
    """Where the verdicts of one hill folder are kept, sealed."""
    folder = sha256(os.path.realpath(hill.path).encode("utf-8", "surrogateescape")).hexdigest()[:24]
    return os.path.join(state.home(), "cache", "gate", folder + ".json")
