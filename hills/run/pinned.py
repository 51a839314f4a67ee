"""The version an eval scores, as committed: its tree, its manifest (parsed
once and cached), a pristine copy of its files with their bytecode, and its
data on disk checked against the locks before it is linked into the run
folder."""

from __future__ import annotations

import os
import sys

from ..base import state
from ..base.errors import NotScored, Refused
from ..evidence import report as report_module
from ..disk import locks, verdicts
from .env import compile_bytecode

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    from ..disk.hill import Hill
    from ..disk.manifest_types import Manifest as Spec
    from .records import EvalPlan, Locks


def pinned_manifest(hill: Hill, tree_hash: str) -> Spec:
    """The manifest at a committed tree, parsed once per hills version and
    cached as JSON (a newer hills may read more keys from the same text)."""
    return pinned_version(hill, tree_hash)[0]


def pinned_version(hill: Hill, tree_hash: str, clean: bool = False) -> tuple[Spec, int | None]:
    """The manifest at a committed tree and the version of the cheat corpus
    its files passed at commit (hills-report(5), `corpus`), both cached with
    the manifest. The corpus is looked up once, by an eval of the tree
    `clean` in the working folder (so the gate's record of these files is
    the tree's), and None until then."""
    cache = os.path.join(state.state_dir(hill.name, tree_hash), "manifest.json")
    tool = report_module.tool_identity()["sha256"]
    cached = state.sealed_read(cache)
    if isinstance(cached, dict) and cached.get("tool") == tool:
        if "corpus" in cached or not clean:
            return cached["manifest"], cached.get("corpus")
        return cached["manifest"], _record_corpus(hill, cache, cached)
    text = hill.repo.show_blob(tree_hash, "hill.yaml")
    if text is None:
        raise NotScored(f"hill '{hill.name}' has no hill.yaml at tree {tree_hash[:12]}",
                        hint=f"commit the hill with hills commit {hill.name} -m MESSAGE")
    from ..disk import manifest

    spec = manifest.parse_text(text, f"hill.yaml at {tree_hash[:12]}", hill.name)
    cached = {"tool": tool, "manifest": spec}
    if clean:
        return spec, _record_corpus(hill, cache, cached)
    state.sealed_write(cache, cached)
    return spec, None


def _record_corpus(hill: Hill, cache: str, cached: dict[str, Any]) -> int | None:
    """Look the corpus version up in the gate's record and cache it."""
    cached["corpus"] = verdicts.passed_corpus(hill)
    state.sealed_write(cache, cached)
    return cached["corpus"]


def pinned_tree(hill: Hill, commit_id: str) -> str:
    """The tree hash of a commit; commits are immutable, so it is cached."""
    cache = os.path.join(state.home(), "cache", "commit-tree", commit_id)
    tree_hash = state.sealed_read(cache)
    if isinstance(tree_hash, str) and len(tree_hash) == 40:
        return tree_hash
    tree_hash = hill.repo.tree_of(commit_id)
    state.sealed_write(cache, tree_hash)
    return tree_hash


def pinned_files(hill: Hill, commit_id: str, tree_hash: str) -> tuple[str, Locks]:
    """A pristine copy of the tree's files, with their bytecode, and its
    decoded locks, made once per tree in machine state and sealed with the
    machine key: an edit of the copy is noticed and the copy made again.
    (folder, {lock: entries})."""
    root = state.state_dir(hill.name, tree_hash)
    folder = os.path.join(root, "tree")
    seal = os.path.join(root, "tree.seal.json")

    def intact() -> Locks | None:
        sealed = state.sealed_read(seal)
        if isinstance(sealed, dict) and sealed.get("bytecode") == sys.implementation.cache_tag \
                and os.path.isdir(folder) and sealed.get("signature") == state.folder_signature(folder):
            return sealed["locks"]
        return None

    expected = intact()
    if expected is not None:
        return folder, expected
    with state.file_lock(os.path.join(root, "tree.lock")):
        expected = intact()
        if expected is not None:
            return folder, expected
        import shutil

        expected = {}
        for lock_name in (locks.PRIVATE_LOCK, locks.BLOBS_LOCK):
            text = hill.repo.show_blob(commit_id, lock_name)
            expected[lock_name] = locks.decode(text, f"{lock_name} at {commit_id[:12]}") if text else {}
        staging = folder + f".tmp-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        os.makedirs(staging)
        materialize(hill, commit_id, staging)
        compile_bytecode(staging)
        shutil.rmtree(folder, ignore_errors=True)
        os.rename(staging, folder)
        state.sealed_write(seal, {"signature": state.folder_signature(folder), "locks": expected,
                                  "bytecode": sys.implementation.cache_tag})
    return folder, expected


def materialize(hill: Hill, rev: str, run_hill_dir: str) -> None:
    """Write the files of `rev` into `run_hill_dir` (git archive, extracted)."""
    import io
    import tarfile

    data = hill.repo.run("archive", "--format=tar", rev, binary=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        # The "data" filter exists from Python 3.11.4; the archive is our own
        # git tree, which never holds links or special files, so without it
        # the extraction is the same.
        options: dict[str, Any] = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        archive.extractall(run_hill_dir, **options)


def _link_locked(hill: Hill, run_hill_dir: str, entries: Iterable[str]) -> None:
    for rel in entries:
        target = os.path.join(run_hill_dir, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.symlink(os.path.join(hill.path, rel), target)


def check_locks(hill: Hill, expected: Locks, cache: locks.StatCache) -> None:
    """Verify the hill's private data and public blobs against their locks."""
    try:
        for lock_name in (locks.PRIVATE_LOCK, locks.BLOBS_LOCK):
            locks.verify_disk(hill.path, lock_name, expected[lock_name], cache)
    finally:
        cache.save()


def checked_pin(plan: EvalPlan, cache: locks.StatCache) -> tuple[str, Locks]:
    """The pinned tree's pristine copy and its lock entries (pinned_files),
    once the hill's data on disk is checked against them."""
    hill = plan.hill
    assert plan.head is not None and plan.tree_hash is not None  # resolve() refused an uncommitted hill
    pristine, expected = pinned_files(hill, plan.head, plan.tree_hash)
    try:
        check_locks(hill, expected, cache)
    except Refused as exc:
        # Drift found before the run is the hill's, not the submission's:
        # no candidate can be scored until the data is restored.
        raise NotScored(exc.message, hint=exc.hint) from None
    return pristine, expected


def copy_hill(plan: EvalPlan, run_hill_dir: str, pristine: str, expected: Locks, into: bool = False) -> None:
    """The pristine tree into `run_hill_dir` (an empty folder there, `into`),
    with links to its private data and its locked blobs."""
    hill = plan.hill
    state.copy_tree(pristine, run_hill_dir, into=into)
    if expected[locks.PRIVATE_LOCK]:
        os.symlink(os.path.join(hill.path, locks.PRIVATE_DIR), os.path.join(run_hill_dir, locks.PRIVATE_DIR))
    _link_locked(hill, run_hill_dir, expected[locks.BLOBS_LOCK])


def copy_public(hill: Hill, run_hill_dir: str, pristine: str, expected: Locks) -> None:
    """The pristine tree into `run_hill_dir` (made) with links to its locked
    blobs, and no link to private/: the hill as a dev run (run/devrun.py)
    or a build of its environment gets it, with nothing held out in it."""
    state.copy_tree(pristine, run_hill_dir)
    _link_locked(hill, run_hill_dir, expected[locks.BLOBS_LOCK])


def prepare_hill(plan: EvalPlan, run_hill_dir: str, cache: locks.StatCache) -> Locks:
    """Write the hill into the run folder: the pinned tree, its private
    data and locked blobs linked once verified, or under --current the
    working tree. Returns the lock entries the data must still match."""
    hill = plan.hill
    if plan.request.current:
        import shutil

        state.copy_tree(hill.path, run_hill_dir, symlinks=True,
                        ignore=shutil.ignore_patterns(".vc", "private", "__pycache__"))
        if os.path.isdir(os.path.join(hill.path, locks.PRIVATE_DIR)):
            os.symlink(os.path.join(hill.path, locks.PRIVATE_DIR), os.path.join(run_hill_dir, locks.PRIVATE_DIR))
        return {}
    pristine, expected = checked_pin(plan, cache)
    copy_hill(plan, run_hill_dir, pristine, expected)
    return expected
