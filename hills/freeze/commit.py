"""Freezing a hill: the gate, lock regeneration, and a commit built with a
private index, write-tree, commit-tree and a compare-and-swap update-ref."""

from __future__ import annotations

import contextlib
import os
import stat as stat_module
from typing import TYPE_CHECKING, Any

from ..base import state
from ..disk import hill as hill_module, locks
from . import gate as gate_module
from ..base.errors import Refused, UsageError

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..checks.shared import Result
    from ..disk import verdicts

BRANCH = "refs/heads/main"
ZERO = "0" * 40


def regenerate_locks(hill: hill_module.Hill, cache: locks.StatCache | None = None,
                     listing: verdicts.Listing | None = None
                     ) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]], list[str], list[str]]:
    """Hash private/ and the blobs; write both lock files when they changed.
    `listing` is the hill's (regular, blobs) files when already listed.

    Returns (private_entries, blob_entries, regular_paths, changed_lock_names).
    """
    regular, blobs = (list(listing[0]), list(listing[1])) if listing is not None \
        else hill_module.list_tree_files(hill)
    cache = cache or locks.StatCache(hill.path)
    private_entries = locks.hash_files(hill.path, locks.walk_private(hill.path), cache)
    blob_entries = locks.hash_files(hill.path, blobs, cache)
    cache.save()
    changed = []
    for lock_name, entries in ((locks.PRIVATE_LOCK, private_entries), (locks.BLOBS_LOCK, blob_entries)):
        text = locks.encode(entries)
        path = os.path.join(hill.path, lock_name)
        try:
            with open(path, encoding="utf-8") as handle:
                current = handle.read()
        except FileNotFoundError:
            current = None
        if current != text:
            state.atomic_write(path, text)
            changed.append(lock_name)
        if lock_name not in regular:
            regular.append(lock_name)
    return private_entries, blob_entries, sorted(regular), changed


def build_tree(hill: hill_module.Hill, regular: list[str]) -> str:
    """Write the blobs of `regular` and a tree of them through a private index."""
    repo = hill.repo
    if not regular:
        raise Refused(f"hill '{hill.name}' has no files to commit")
    ids = repo.run("hash-object", "-w", "--no-filters", "--stdin-paths",
                   input="\n".join(regular) + "\n").split()
    if len(ids) != len(regular):
        raise Refused(f"git hashed {len(ids)} of {len(regular)} files of hill '{hill.name}'")
    records = []
    for rel, object_id in zip(regular, ids):
        mode = os.stat(os.path.join(hill.path, rel)).st_mode
        records.append(f"{'100755' if mode & stat_module.S_IXUSR else '100644'} {object_id}\t{rel}")
    index = os.path.join(repo.git_dir, f"hills-index-{os.getpid()}-{os.urandom(4).hex()}")
    try:
        env = {"GIT_INDEX_FILE": index}
        repo.run("update-index", "--add", "-z", "--index-info", input="\0".join(records) + "\0", env=env)
        return repo.run("write-tree", env=env).strip()
    finally:
        for leftover in (index, index + ".lock"):
            if os.path.exists(leftover):
                os.unlink(leftover)


def commit(hill: hill_module.Hill, message: str, gate: bool = True,
           progress: Callable[[Result], object] | None = None) -> dict[str, Any]:
    """Gate, lock, build and record a commit. Returns a dict for the CLI."""
    if not message or not message.strip():
        raise UsageError("empty commit message", hint="pass -m MESSAGE")
    with state.file_lock(os.path.join(hill.repo.git_dir, "hills-commit.lock")):
        cache = locks.StatCache(hill.path)
        listing = None
        if gate:
            # Each check's line as it finishes: a slow hill's tests take minutes.
            verdict = gate_module.run(hill, cache, tell=progress)
            failed, listing = verdict.failed, verdict.listing
            if failed:
                # Same words as the pre-commit hook, so both paths name the broken key or file.
                raise Refused(f"hill '{hill.name}' failed check '{failed[0].name}': "
                              f"{(failed[0].detail.splitlines() or ['no detail'])[0]}",
                              hint="run 'hills check " + hill.name + "' and fix what it reports; nothing was committed")
        # Loaded after the gate: a broken hill.yaml is a failed check (exit 1), as in the hook.
        spec = hill.manifest()
        private_entries, blob_entries, regular, _changed = regenerate_locks(hill, cache, listing)
        audit_leaks(hill, private_entries)
        # Before any blob is written: a copy of private data under another name.
        audit_copies(hill, private_entries, {rel: _worktree_blob(hill, rel) for rel in regular})
        tree_hash = build_tree(hill, regular)
        parent = hill.repo.head()
        if parent and hill.repo.tree_of(parent) == tree_hash:
            raise Refused(f"nothing to commit: hill '{hill.name}' is unchanged since {parent[:12]}",
                          hint=f"change the hill first; 'hills status {hill.name}' shows what changed")
        args = ["commit-tree", tree_hash, "-m", message]
        if parent:
            args[2:2] = ["-p", parent]
        commit_id = hill.repo.run(*args).strip()

        def record(registry: dict[str, Any]) -> None:
            entry = state.registry_entry(registry, hill.name, hill.path, add=True)
            entry["tree_hash"] = tree_hash

        # Before the ref moves: a registry that cannot be written fails the
        # commit with nothing recorded ('hills list' reads HEAD, so a tree
        # hash noted for a commit that then loses the race misleads no one).
        state.update_registry(record)
        try:
            hill.repo.run("update-ref", "-m", "hills commit: " + message.splitlines()[0],
                          BRANCH, commit_id, parent or ZERO)
        except Exception as exc:
            raise Refused(f"hill '{hill.name}' moved while committing; nothing was recorded",
                          hint="run the commit again") from exc
        _sync_or_undo(hill, blob_entries, commit_id, parent)
    return {"hill": hill.name, "version": spec["version"], "tree_hash": tree_hash, "commit": commit_id,
            "private": private_entries, "blobs": blob_entries}


def _sync_or_undo(hill: hill_module.Hill, blob_entries: dict[str, dict[str, Any]], commit_id: str,
                  parent: str | None) -> None:
    """sync_index after the ref moved; when it fails (a full disk, say), the
    ref goes back to `parent` and the index and excludes as they were, so a
    failed commit leaves the hill as it found it."""
    exclude = os.path.join(hill.repo.git_dir, "info", "exclude")
    try:
        with open(exclude, "rb") as handle:
            old_exclude = handle.read()
    except FileNotFoundError:
        old_exclude = None
    try:
        sync_index(hill, blob_entries)
    except BaseException:
        # Compare-and-swap: only our own commit is taken back.
        if parent:
            hill.repo.run("update-ref", BRANCH, parent, commit_id, ok_codes=(0, 1, 128))
        else:
            hill.repo.run("update-ref", "-d", BRANCH, commit_id, ok_codes=(0, 1, 128))
        with contextlib.suppress(Exception):
            hill.repo.run("read-tree", *([parent] if parent else ["--empty"]))
        if old_exclude is not None:
            with contextlib.suppress(Exception):
                state.atomic_write(exclude, old_exclude)
        raise


def sync_index(hill: hill_module.Hill, blob_entries: dict[str, dict[str, Any]]) -> None:
    """Make `.vc/index` and the excludes match the new HEAD, so plain git
    commands see a clean hill and a fast status works during evals."""
    hill_module.write_excludes(hill.path, list(blob_entries))
    hill.repo.run("read-tree", "HEAD")
    hill.repo.run("update-index", "-q", "--refresh", ok_codes=(0, 1))


def _git_blob_id(path: str, size: int) -> str:
    import hashlib

    digest = hashlib.sha1(b"blob %d\0" % size)
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


AUDIT_STATE = "hills-audit.json"
# New private bytes read to ask git for their blob id instead of auditing
# the whole history again; more than this audits the whole history.
FRESH_READ_LIMIT = 64 * 1024 * 1024
HISTORY_HINT = ("drop the commits, stashes, tags or notes that hold it, then run: "
                "git --git-dir=.vc reflog expire --expire-unreachable=now --all && git --git-dir=.vc gc --prune=now")


def audit_leaks(hill: hill_module.Hill, private_entries: dict[str, dict]) -> None:
    """Refuse, naming the path, when private content is reachable in `.vc`:
    a path under private/ anywhere in its history, or the exact bytes of a
    private file as a blob reachable from any ref or reflog (commits, tags,
    stashes, notes). Only private files whose size matches a reachable blob
    are read.

    `.vc/hills-audit.json` (sealed with the machine key) records the ref
    tips audited and the private digests they were audited against; only
    objects not reachable from those tips are looked at. A private file
    whose digest is new to the record may already sit anywhere in the
    history: its git blob id is asked for in the object store, and when
    git holds that object (or the new files are too large to read for the
    question), everything is audited again."""
    digests = sorted({_digest_of(entry) for entry in private_entries.values()})
    state_path = os.path.join(hill.repo.git_dir, AUDIT_STATE)
    # Read before the audit: a tip is recorded only when the audit saw it.
    tips = hill.repo.ref_tips()
    audited = _audited(state_path)
    listed: set[str] | None = None
    before: set[str] = set()
    if audited is not None:
        known = set(audited["private"])
        fresh = {rel: entry for rel, entry in private_entries.items()
                 if entry["size"] and _digest_of(entry) not in known}
        if sum(entry["size"] for entry in fresh.values()) <= FRESH_READ_LIMIT:
            listed, before = _audit_new(hill, private_entries, tips, audited["tips"], fresh), set(audited["tips"])
    if listed is None:
        listed, before = _audit_all(hill, private_entries), set()
    kept = sorted({tip for tip in tips if tip in listed or tip in before})
    record = {"version": 1, "private": digests, "tips": kept}
    if record == audited:
        return
    try:
        state.sealed_write(state_path, record)
    except OSError:
        pass  # without a record, the next audit looks at everything again


def _digest_of(entry: dict) -> str:
    return f"{entry['size']}:{entry['digest']}"


def _audited(state_path: str) -> dict | None:
    """The last audit's record, or None when missing, edited or of another form."""
    audited = state.sealed_read(state_path)
    if (not isinstance(audited, dict) or audited.get("version") != 1
            or not isinstance(audited.get("private"), list) or not isinstance(audited.get("tips"), list)
            or not all(isinstance(tip, str) and len(tip) == 40 and all(c in "0123456789abcdef" for c in tip)
                       for tip in audited["tips"])):
        return None
    return audited


def _audit_all(hill: hill_module.Hill, private_entries: dict[str, dict]) -> set[str]:
    """The whole audit over everything reachable; returns what it listed."""
    repo = hill.repo
    listing = repo.run("rev-list", "--all", "--reflog", "--objects", ok_codes=(0, 128))
    reachable = []
    for line in listing.splitlines():
        object_id, _, path = line.partition(" ")
        reachable.append(object_id)
        if path == "private" or path.startswith("private/"):
            raise _in_history(hill, path, f"object {object_id[:12]}")
    if not reachable:
        return set()
    # rev-list names each object once, by the first path it meets: a tree
    # also stored under another name (backup/ beside private/) would hide
    # the private/ one. Ask the history for the path itself.
    touched = repo.run("log", "--all", "--reflog", "--full-history", "--no-renames", "--name-only",
                       "--format=@%H", "--", "private", ok_codes=(0, 128))
    commit_id = ""
    for line in touched.splitlines():
        if line.startswith("@"):
            commit_id = line[1:]
        elif line.strip():
            raise _in_history(hill, line.strip(), f"commit {commit_id[:12]}")
    if private_entries:
        _refuse_private_blobs(hill, private_entries,
                              {object_id: size for object_id, (kind, size) in repo.object_sizes(reachable).items()
                               if kind == "blob"})
    return set(reachable)


def _audit_new(hill: hill_module.Hill, private_entries: dict[str, dict], tips: list[str], audited_tips: list[str],
               fresh: dict[str, dict]) -> set[str] | None:
    """The audit of what is reachable now but not from `audited_tips`;
    returns what it listed, or None when the whole audit must run instead:
    an audited tip is gone from the object store, or git holds the bytes of
    a `fresh` private file (one the audited tips were not checked against)."""
    repo = hill.repo
    listing = repo.run("rev-list", "--objects", "--all", "--reflog", "--stdin",
                       input="".join(f"^{tip}\n" for tip in audited_tips), ok_codes=(0, 128))
    if repo.last_exit_code != 0:
        return None
    listed, roots = [], []
    for line in listing.splitlines():
        object_id, _, path = line.partition(" ")
        listed.append(object_id)
        if not path:
            roots.append(object_id)  # a commit, or the tree or blob a ref or a commit points at
        elif path == "private" or path.startswith("private/"):
            raise _in_history(hill, path, f"object {object_id[:12]}")
    # An old tree, held under backup/ say, is not listed again when a new
    # commit or a new ref puts it at the top: ask each new top for its
    # private/ itself.
    old, seen = set(audited_tips), set(roots)
    roots += [tip for tip in tips if tip not in old and tip not in seen]
    objects = sorted(listed) if private_entries else []
    fresh_ids = [_git_blob_id(os.path.join(hill.path, rel), entry["size"]) for rel, entry in sorted(fresh.items())]
    queries = objects + [f"{root}:private" for root in roots] + fresh_ids
    answers = repo.batch_check(queries)
    for root, answer in zip(roots, answers[len(objects):len(objects) + len(roots)]):
        if answer is not None:
            _audit_all(hill, private_entries)  # names the file, as the whole audit words it
            raise _in_history(hill, "private", f"object {root[:12]}")
    if any(answer is not None for answer in answers[len(objects) + len(roots):]):
        return None  # stored already: whether any ref reaches it is the whole audit's question
    if private_entries:
        _refuse_private_blobs(hill, private_entries,
                              {object_id: answer[2] for object_id, answer in zip(objects, answers)
                               if answer is not None and answer[1] == "blob"})
    return set(listed)


def _in_history(hill: hill_module.Hill, path: str, where: str) -> Refused:
    return Refused(f"'{path}' is in the history of hill '{hill.name}' ({where}): "
                   "held-out data must never enter git; nothing was committed", hint=HISTORY_HINT)


def _refuse_private_blobs(hill: hill_module.Hill, private_entries: dict[str, dict], blobs: dict[str, int]) -> None:
    """Refuse when a private file's bytes are one of `blobs` ({blob id: size})."""
    sizes = set(blobs.values())
    for rel, entry in sorted(private_entries.items()):
        if not entry["size"] or entry["size"] not in sizes:
            continue
        object_id = _git_blob_id(os.path.join(hill.path, rel), entry["size"])
        if object_id in blobs:
            raise Refused(f"the content of '{rel}' is reachable in the git objects of hill '{hill.name}' "
                          f"(blob {object_id[:12]}): held-out data must never enter git; nothing was committed",
                          hint="find what holds it (git --git-dir=.vc log --all --find-object=" + object_id[:12]
                               + "), drop it, then run: git --git-dir=.vc reflog expire --expire-unreachable=now "
                               "--all && git --git-dir=.vc gc --prune=now")


def _worktree_blob(hill: hill_module.Hill, rel: str) -> tuple[str, int]:
    full = os.path.join(hill.path, rel)
    size = os.path.getsize(full)
    return _git_blob_id(full, size), size


def audit_copies(hill: hill_module.Hill, private_entries: dict[str, dict[str, Any]],
                 files: dict[str, tuple[str, int]]) -> None:
    """Refuse when a file about to be committed (`files`: {path: (blob id,
    size)}) holds the exact bytes of a private file."""
    by_size: dict[int, list[tuple[str, str]]] = {}
    for rel, (object_id, size) in files.items():
        by_size.setdefault(size, []).append((rel, object_id))
    for private_rel, entry in sorted(private_entries.items()):
        if not entry["size"] or entry["size"] not in by_size:
            continue
        private_id = _git_blob_id(os.path.join(hill.path, private_rel), entry["size"])
        for rel, object_id in by_size[entry["size"]]:
            if object_id == private_id:
                raise Refused(f"'{rel}' holds the same bytes as '{private_rel}': held-out data must never "
                              "enter git; nothing was committed",
                              hint=f"remove or change '{rel}', or keep it under private/")
