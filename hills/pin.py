"""Approved versions: the tree hash of a hill that a person approved with
`hills pin`. Evals of any other tree of that hill are unofficial."""

import hashlib
import hmac

from . import state
from .errors import UsageError


def _mac(name, tree_hash, key):
    return hmac.new(key, f"pin\0{name}\0{tree_hash}".encode(), hashlib.sha256).hexdigest()


def set_pin(hill, tree_hash):
    key = state.load_key()
    if len(tree_hash) < 4 or any(c not in "0123456789abcdef" for c in tree_hash):
        raise UsageError(f"'{tree_hash}' is not a tree hash", hint="pass a tree hash from 'hills log NAME'")
    # A commit id (short or full) stands for its tree, as a short tree id does.
    resolved = hill.repo.run("rev-parse", "--verify", "-q", f"{tree_hash}^{{tree}}", ok_codes=(0, 1, 128)).strip()
    if not resolved:
        raise UsageError(f"no tree '{tree_hash}' in hill '{hill.name}'", hint="see 'hills log " + hill.name + "'")
    tree_hash = resolved

    def record(registry):
        entry = state.registry_entry(registry, hill.name, hill.path, add=True)
        entry["pinned"] = {"tree_hash": tree_hash, "mac": _mac(hill.name, tree_hash, key)}

    state.update_registry(record)
    return tree_hash


def clear_pin(hill):
    def record(registry):
        (state.registry_entry(registry, hill.name, hill.path) or {}).pop("pinned", None)

    state.update_registry(record)


def pinned(hill):
    """(tree_hash or None, problem or None): the approved tree of `hill`.
    An approval belongs to one hill folder, not to its name: another
    project's hill of the same name has its own."""
    name = hill.name
    entry = state.registry_entry(state.load_registry(), name, hill.path) or {}
    pin = entry.get("pinned")
    if not pin:
        return None, None
    tree_hash = pin.get("tree_hash", "")
    if not hmac.compare_digest(str(pin.get("mac", "")), _mac(name, tree_hash, state.load_key())):
        return None, "the approval record of this hill was edited outside 'hills pin'"
    return tree_hash, None


def official_status(hill, tree_hash):
    """(official, reason) for an eval of `tree_hash` given the approval."""
    name = hill.name
    approved, problem = pinned(hill)
    if problem:
        return False, problem + "; approve a version again with 'hills pin " + name + "'"
    if approved and approved != tree_hash:
        return False, (f"tree {tree_hash[:12]} is not the approved version of hill '{name}' "
                       f"(approved: {approved[:12]}); a person approves a version with 'hills pin {name} TREE'")
    return True, None
