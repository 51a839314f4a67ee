"""The pre-commit hook: the same gate and lock regeneration as `hills commit`
for a plain `git --git-dir=.vc --work-tree=. commit`."""

from __future__ import annotations

import os

from ..disk import hill as hill_module, locks
from . import commit, gate
from ..base.errors import Refused, UsageError


def pre_commit(work_tree: str) -> None:
    hill_dir = os.path.abspath(work_tree)
    if not os.path.isfile(os.path.join(hill_dir, "hill.yaml")):
        raise UsageError(f"'{hill_dir}' is not a hill folder (no hill.yaml)",
                         hint="the hills pre-commit hook runs from a hill's work tree")
    target = hill_module.Hill(hill_dir)
    # The index being committed is the one git handed to the hook.
    index = os.environ.get("GIT_INDEX_FILE")
    if index and not os.path.isabs(index):
        index = os.path.join(hill_dir, index)
    index_env = {"GIT_INDEX_FILE": index} if index else None
    # The gate checks the working tree; git commits the index. They must agree.
    unstaged = [rel for rel in target.repo.run("diff-files", "--name-only", "-z", env=index_env).split("\0")
                if rel and rel not in (locks.PRIVATE_LOCK, locks.BLOBS_LOCK)]
    if unstaged:
        raise Refused(f"'{unstaged[0]}' differs between the index and the working tree: the gate checks the "
                      "working tree, so it would not vouch for what git commits; nothing was committed",
                      hint="stage the changes (git --git-dir=.vc --work-tree=. add -A), or set them aside")
    cache = locks.StatCache(hill_dir)
    verdict = gate.run(target, cache)
    failed = verdict.failed
    if failed:
        first_line = (failed[0].detail.splitlines() or ["no detail"])[0]
        raise Refused(f"hill '{target.name}' failed check '{failed[0].name}': {first_line}",
                      hint=f"run 'hills check {target.name}'; nothing was committed")
    private_entries, blob_entries, _regular, _changed = commit.regenerate_locks(target, cache, verdict.listing)
    staged = target.repo.run("ls-files", "-z", "--cached", env=index_env).split("\0")
    for rel in staged:
        if rel.startswith("private/") or rel in blob_entries:
            raise Refused(f"'{rel}' is staged, but it must never enter git "
                          f"({'held-out data' if rel.startswith('private/') else 'a blob'})",
                          hint=f"unstage it: git --git-dir=.vc rm --cached -- '{rel}'")
    commit.audit_leaks(target, private_entries)
    commit.audit_copies(target, private_entries, _staged_blobs(target, index_env))
    stale = []
    for lock_name in (locks.PRIVATE_LOCK, locks.BLOBS_LOCK):
        with open(os.path.join(hill_dir, lock_name), encoding="utf-8") as handle:
            on_disk = handle.read()
        if lock_name not in staged or target.repo.show_blob("", lock_name, env=index_env) != on_disk:
            stale.append(lock_name)
    hill_module.write_excludes(hill_dir, list(blob_entries))
    if stale:
        raise Refused(", ".join(stale) + " did not match the files on disk and "
                      + ("was" if len(stale) == 1 else "were") + " regenerated; nothing was committed",
                      hint="stage the regenerated lock(s) and commit again: git --git-dir=.vc --work-tree=. add "
                      + " ".join(stale))


def _staged_blobs(target: hill_module.Hill, index_env: dict[str, str] | None) -> dict[str, tuple[str, int]]:
    """{path: (blob id, size)} of what the index being committed holds."""
    ids = {path: object_id for path, (mode, object_id) in target.repo.ls_index(index_env).items()
           if mode.startswith("100")}
    sizes = target.repo.object_sizes(ids.values())
    return {path: (object_id, sizes.get(object_id, ("", -1))[1]) for path, object_id in ids.items()}
