"""Approved versions: the tree hash of a hill that a person approved with
`hills pin`. Evals of any other tree of that hill are unofficial."""

from __future__ import annotations

from ..base import state
from ..base.digests import compare_digest, hmac_sha256
from ..base.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .hill import Hill


def _mac(name: str, tree_hash: str, key: bytes) -> str:
    return hmac_sha256(key, f"pin\0{name}\0{tree_hash}".encode())


def set_pin(hill: Hill, tree_hash: str) -> str:
    key = state.load_key()
    if len(tree_hash) < 4 or any(c not in "0123456789abcdef" for c in tree_hash):
        raise UsageError(f"'{tree_hash}' is not a tree hash", hint="pass a tree hash from 'hills log NAME'")
    # A commit id (short or full) stands for its tree, as a short tree id does.
    resolved = hill.repo.run("rev-parse", "--verify", "-q", f"{tree_hash}^{{tree}}", ok_codes=(0, 1, 128)).strip()
    if not resolved:
        raise UsageError(f"no tree '{tree_hash}' in hill '{hill.name}'", hint="see 'hills log " + hill.name + "'")
    tree_hash = resolved

    def record(registry: dict[str, Any]) -> None:
        entry = state.registry_entry(registry, hill.name, hill.path, add=True)
        entry["pinned"] = {"tree_hash": tree_hash, "mac": _mac(hill.name, tree_hash, key)}

    state.update_registry(record)
    return tree_hash


def clear_pin(hill: Hill) -> None:
    def record(registry: dict[str, Any]) -> None:
        (state.registry_entry(registry, hill.name, hill.path) or {}).pop("pinned", None)

    state.update_registry(record)


def pinned(hill: Hill) -> tuple[str | None, str | None]:
    """(tree_hash or None, problem or None): the approved tree of `hill`.
    An approval belongs to one hill folder, not to its name: another
    project's hill of the same name has its own."""
    name = hill.name
    entry = state.registry_entry(state.load_registry(), name, hill.path) or {}
    pin = entry.get("pinned")
    if not pin:
        return None, None
    tree_hash = pin.get("tree_hash", "")
    if not compare_digest(str(pin.get("mac", "")), _mac(name, tree_hash, state.load_key())):
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
