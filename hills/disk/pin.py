"""Approved versions: the tree hash of a hill that a person approved with
`hills pin`. Evals of any other tree of that hill are unofficial."""

from __future__ import annotations

from ..base import state
from ..base.digests import compare_digest, hmac_sha256
from ..base.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from .hill import Hill


# Approvals keyed by the hill's identity (identity()), so a hill keeps
# its approval when its project moves or is renamed; an approval from
# before, kept in the registry entry of the hill's folder, is still read.
PINS_FILE = "pins.json"


def _mac(name: str, tree_hash: str, key: bytes) -> str:
    return hmac_sha256(key, f"pin\0{name}\0{tree_hash}".encode())


def pins_path() -> str:
    import os

    return os.path.join(state.home(), PINS_FILE)


def identity(hill: Hill) -> str | None:
    """What a hill is whatever folder it lies in: its first commit (the
    oldest of its roots, where histories were joined); None without one."""
    roots = hill.repo.run("rev-list", "--max-parents=0", "HEAD", ok_codes=(0, 128)).split()
    return min(roots) if roots else None


def _read_pins() -> dict[str, Any]:
    import json

    try:
        with open(pins_path(), encoding="utf-8") as handle:
            pins = json.load(handle)
    except (OSError, ValueError):
        return {}
    return pins if isinstance(pins, dict) else {}


def _update_pins(change: Callable[[dict[str, Any]], None]) -> None:
    import json

    state.ensure_home()
    with state.file_lock(pins_path() + ".lock"):
        pins = _read_pins()
        change(pins)
        state.atomic_write(pins_path(), json.dumps(pins, indent=2, sort_keys=True) + "\n", mode=0o600)


def set_pin(hill: Hill, tree_hash: str) -> str:
    key = state.load_key()
    if len(tree_hash) < 4 or any(c not in "0123456789abcdef" for c in tree_hash):
        raise UsageError(f"'{tree_hash}' is not a tree hash", hint="pass a tree hash from 'hills log NAME'")
    # A commit id (short or full) stands for its tree, as a short tree id does.
    resolved = hill.repo.run("rev-parse", "--verify", "-q", f"{tree_hash}^{{tree}}", ok_codes=(0, 1, 128)).strip()
    if not resolved:
        raise UsageError(f"no tree '{tree_hash}' in hill '{hill.name}'", hint="see 'hills log " + hill.name + "'")
    tree_hash = resolved
    hill_id = identity(hill)
    if hill_id is None:
        raise UsageError(f"hill '{hill.name}' has no commits yet", hint=f"commit it first: hills commit {hill.name}")

    def record(pins: dict[str, Any]) -> None:
        pins[hill_id] = {"hill": hill.name, "tree_hash": tree_hash, "mac": _mac(hill_id, tree_hash, key)}

    _update_pins(record)
    _clear_legacy(hill)
    return tree_hash


def clear_pin(hill: Hill) -> None:
    hill_id = identity(hill)
    if hill_id is not None and hill_id in _read_pins():
        _update_pins(lambda pins: pins.pop(hill_id, None))
    _clear_legacy(hill)


def _clear_legacy(hill: Hill) -> None:
    def record(registry: dict[str, Any]) -> None:
        (state.registry_entry(registry, hill.name, hill.path) or {}).pop("pinned", None)

    if (state.registry_entry(state.load_registry(), hill.name, hill.path) or {}).get("pinned"):
        state.update_registry(record)


def pinned(hill: Hill) -> tuple[str | None, str | None]:
    """(tree_hash or None, problem or None): the approved tree of `hill`.
    An approval belongs to the hill (its identity), wherever its folder
    lies: another project's hill of the same name has its own."""
    pins = _read_pins()  # no git call where nothing is approved: the eval path reads this
    hill_id = identity(hill) if pins else None
    pin = pins.get(hill_id) if hill_id is not None else None
    if isinstance(pin, dict):
        tree_hash = str(pin.get("tree_hash", ""))
        if not compare_digest(str(pin.get("mac", "")), _mac(hill_id or "", tree_hash, state.load_key())):
            return None, "the approval record of this hill was edited outside 'hills pin'"
        return tree_hash, None
    name = hill.name
    entry = state.registry_entry(state.load_registry(), name, hill.path) or {}
    legacy = entry.get("pinned")
    if not legacy:
        return None, None
    tree_hash = legacy.get("tree_hash", "")
    if not compare_digest(str(legacy.get("mac", "")), _mac(name, tree_hash, state.load_key())):
        return None, "the approval record of this hill was edited outside 'hills pin'"
    return tree_hash, None


def official_status(hill: Hill, tree_hash: str) -> tuple[bool, str | None]:
    """(official, reason) for an eval of `tree_hash` given the approval."""
    name = hill.name
    approved, problem = pinned(hill)
    if problem:
        return False, problem + "; approve a version again with 'hills pin " + name + "'"
    if approved and approved != tree_hash:
        return False, (f"tree {tree_hash[:12]} is not the approved version of hill '{name}' "
                       f"(approved: {approved[:12]}); a person approves a version with 'hills pin {name} TREE'")
    return True, None
