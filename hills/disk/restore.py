"""`hills restore`'s core: a hill's files put back as its last commit holds
them, through the hill's own git."""

from __future__ import annotations

import os

from ..base.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from .hill import Hill


def changed_files(hill: Hill) -> list[str]:
    """The files of HEAD that differ from it in the working tree (edited,
    deleted, or staged), hill-relative, sorted."""
    out = hill.repo.run("diff", "--name-only", "-z", "--no-renames", "HEAD", "--")
    return sorted(path for path in out.split("\0") if path)


def restore(hill: Hill, paths: Sequence[str] = ()) -> list[str]:
    """Put each of `paths` (hill-relative or absolute, all of HEAD's changed
    files when none is given) back as HEAD has it; the files restored. A
    path HEAD does not hold is refused, naming it, before any is touched."""
    head = hill.repo.head()
    if head is None:
        raise UsageError(f"hill '{hill.name}' has no commits yet: there is nothing to restore",
                         hint=f"freeze it first: hills commit {hill.name} -m MESSAGE")
    committed = hill.repo.ls_tree(head)
    changed = set(changed_files(hill))
    wanted = []
    for given in paths:
        rel = _relative(hill, given)
        if rel not in committed:
            raise UsageError(f"'{given}' is not a file of the last commit of hill '{hill.name}'",
                             hint=f"'hills status {hill.name}' lists what changed; a file added since is yours "
                                  "to remove")
        wanted.append(rel)
    chosen = sorted(set(wanted) & changed) if paths else sorted(changed)
    if chosen:
        hill.repo.run("checkout", head, "--", *chosen)
    return chosen


def _relative(hill: Hill, given: str) -> str:
    full = os.path.abspath(given if os.path.isabs(given) else os.path.join(hill.path, given))
    root = os.path.abspath(hill.path)
    if os.path.commonpath([full, root]) != root or full == root:
        raise UsageError(f"'{given}' is not a file of hill '{hill.name}'", hint=f"give a path inside '{root}'")
    return os.path.relpath(full, root).replace(os.sep, "/")
