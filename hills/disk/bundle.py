"""Hill bundles: one file holding one committed version of a hill (its
commit and the git objects of its tree, and its private and blob data by
digest), and rebuilding a hill from one, checked against the tree hash and
the locks before anything appears (docs/cluster.md)."""

from __future__ import annotations

import io
import json
import os
import tarfile

from ..base import git, state
from . import locks
from ..base.errors import Refused, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import IO, Any

    from .hill import Hill

FORMAT = "hills-bundle"
VERSION = 1
MANIFEST = "hills-bundle.json"
PACK = "objects.pack"
DATA = "data/"
BRANCH = "refs/heads/main"
_CHUNK = 1 << 20


def _damaged(source: str, what: str) -> Refused:
    return Refused(f"bundle '{source}' is damaged or was edited: {what}",
                   hint="make the bundle again with 'hills bundle NAME' on the machine that holds the hill")


class Contents:
    """What `write` put in a bundle: the hill, its commit and tree, and the
    data files by path."""

    __slots__ = ("hill", "commit", "tree_hash", "data", "size")

    def __init__(self, hill: str, commit: str, tree_hash: str, data: dict[str, dict[str, Any]], size: int) -> None:
        self.hill, self.commit, self.tree_hash, self.data, self.size = hill, commit, tree_hash, data, size

    def as_dict(self) -> dict[str, Any]:
        return {"hill": self.hill, "commit": self.commit, "tree_hash": self.tree_hash,
                "files": len(self.data), "bytes": self.size}


def head_version(hill: Hill) -> tuple[str, str]:
    """(commit, tree hash) of the hill's HEAD; refused before the first commit."""
    commit = hill.repo.head()
    if commit is None:
        raise Refused(f"hill '{hill.name}' has no commits yet",
                      hint=f"freeze it first: hills commit {hill.name} -m MESSAGE")
    return commit, hill.repo.tree_of(commit)


def _locked(repo: git.Repo, rev: str, source: str,
            lock_names: tuple[str, ...] = (locks.PRIVATE_LOCK, locks.BLOBS_LOCK)) -> dict[str, dict[str, Any]]:
    """{path: {size, digest}} of private.lock and blobs.lock at `rev`."""
    entries: dict[str, dict[str, Any]] = {}
    for lock_name in lock_names:
        text = repo.show_blob(rev, lock_name)
        if text:
            entries.update(locks.decode(text, f"{lock_name} at {source}"))
    return entries


def write(hill: Hill, target: str) -> Contents:
    """Write the bundle of the hill's HEAD to `target` (atomically). The
    private data and blobs on disk must match the locks at HEAD."""
    commit, tree_hash = head_version(hill)
    data = _locked(hill.repo, commit, commit[:12])
    cache = locks.StatCache(hill.path)
    try:
        for lock_name in (locks.PRIVATE_LOCK, locks.BLOBS_LOCK):
            text = hill.repo.show_blob(commit, lock_name)
            locks.verify_disk(hill.path, lock_name, locks.decode(text, lock_name) if text else {}, cache)
    finally:
        cache.save()
    listed = hill.repo.run("ls-tree", "-r", "-t", "-z", "--full-tree", tree_hash)
    objects = [commit, tree_hash] + [record.split("\t", 1)[0].split(" ")[2] for record in listed.split("\0") if record]
    pack = hill.repo.run("pack-objects", "--stdout", "-q", input="\n".join(objects) + "\n", binary=True)
    manifest = {"format": FORMAT, "version": VERSION, "hill": hill.name, "commit": commit, "tree_hash": tree_hash}
    folder = os.path.dirname(os.path.abspath(target))
    if not os.path.isdir(folder):
        raise UsageError(f"cannot write the bundle to '{target}': folder '{folder}' does not exist")
    fd, temp = state.private_temp(folder, "." + os.path.basename(target) + ".")
    size = 0
    try:
        with os.fdopen(fd, "wb") as handle, tarfile.open(fileobj=handle, mode="w", format=tarfile.PAX_FORMAT) as out:
            _add_bytes(out, MANIFEST, json.dumps(manifest, indent=2, sort_keys=True).encode() + b"\n")
            _add_bytes(out, PACK, pack)
            written = set()
            for rel in sorted(data):
                digest = data[rel]["digest"]
                if digest in written:
                    continue
                written.add(digest)
                info = tarfile.TarInfo(DATA + digest.removeprefix("blake3:"))
                info.size = data[rel]["size"]
                info.mode = 0o644
                with open(os.path.join(hill.path, rel), "rb") as source:
                    out.addfile(info, source)
                size += info.size
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, 0o600)  # it holds held-out data
        os.replace(temp, target)
    except BaseException:
        try:
            os.unlink(temp)
        except FileNotFoundError:
            pass
        raise
    return Contents(hill.name, commit, tree_hash, data, size + len(pack))


def _add_bytes(out: tarfile.TarFile, name: str, payload: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(payload)
    info.mode = 0o644
    out.addfile(info, io.BytesIO(payload))


class _Reader:
    """The members of a bundle file, read once, in order: the manifest,
    the pack, then the data files."""

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            self.archive = tarfile.open(path, mode="r:")
        except FileNotFoundError:
            raise UsageError(f"no bundle file '{path}'") from None
        except IsADirectoryError:
            raise UsageError(f"bundle '{path}' is a folder, not a file") from None
        except (tarfile.TarError, OSError) as exc:
            raise _damaged(path, f"not a bundle file ({exc})") from None

    def members(self) -> Iterator[tarfile.TarInfo]:
        try:
            for member in self.archive:
                if not member.isfile():
                    raise _damaged(self.path, f"member '{member.name}' is not a plain file")
                yield member
        except tarfile.TarError as exc:
            raise _damaged(self.path, f"the file is cut short or garbled ({exc})") from None

    def read(self, member: tarfile.TarInfo) -> _Member:
        handle = self.archive.extractfile(member)
        assert handle is not None  # a plain file, checked by members()
        return _Member(self.path, member.name, handle)

    def close(self) -> None:
        self.archive.close()


class _Member:
    """One member's bytes; a file cut short inside it refuses the bundle."""

    def __init__(self, path: str, name: str, handle: IO[bytes]) -> None:
        self.path, self.name, self.handle = path, name, handle

    def read(self, size: int = -1) -> bytes:
        try:
            return self.handle.read(size)
        except (tarfile.TarError, OSError) as exc:
            raise _damaged(self.path, f"the file is cut short inside '{self.name}' ({exc})") from None


def _manifest(reader: _Reader, member: tarfile.TarInfo | None) -> dict[str, Any]:
    if member is None or member.name != MANIFEST:
        raise _damaged(reader.path, f"it does not start with {MANIFEST}")
    try:
        manifest = json.loads(reader.read(member).read(1 << 16))
    except ValueError as exc:
        raise _damaged(reader.path, f"{MANIFEST} is not valid JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise _damaged(reader.path, f"{MANIFEST} is not a hills bundle manifest")
    if manifest.get("version") != VERSION:
        raise UsageError(f"bundle '{reader.path}' has format version {manifest.get('version')!r}; "
                         f"this hills reads version {VERSION}", hint="unbundle it with the hills that made it")
    for key in ("hill", "commit", "tree_hash"):
        if not isinstance(manifest.get(key), str) or not manifest[key]:
            raise _damaged(reader.path, f"{MANIFEST} has no '{key}'")
    from ..base.names import validate_name

    validate_name(manifest["hill"])
    return manifest


def read_manifest(path: str) -> dict[str, Any]:
    """The manifest of a bundle file: hill, commit, tree_hash."""
    reader = _Reader(path)
    try:
        return _manifest(reader, next(reader.members(), None))
    finally:
        reader.close()


def unbundle(path: str, project_dir: str | None = None, register: bool = True,
             expected_tree: str | None = None) -> dict[str, Any]:
    """Rebuild the hill of bundle `path` as `PROJECT/.hills/NAME`, checked
    whole before it appears there (and, with `register`, in the registry):
    nothing is left behind by a bundle that is refused. `expected_tree`,
    when given, is the tree hash the caller asked for."""
    import shutil

    from .hill import HILLS_DIR, install_hook, staging_folder, write_excludes

    reader = _Reader(path)
    project_dir = os.path.abspath(project_dir or os.getcwd())
    hills_dir = os.path.join(project_dir, HILLS_DIR)
    created_hills_dir = not os.path.isdir(hills_dir)
    workdir = None
    try:
        members = reader.members()
        manifest = _manifest(reader, next(members, None))
        name, tree_hash = manifest["hill"], manifest["tree_hash"]
        if expected_tree is not None and tree_hash != expected_tree:
            raise _damaged(path, f"it holds tree {tree_hash[:12]}, not the tree {expected_tree[:12]} asked for")
        target = os.path.join(hills_dir, name)
        if os.path.lexists(target):
            raise UsageError(f"hill '{name}' already exists at '{target}'",
                             hint="unbundle into another folder with --into DIR, or remove that hill first")
        workdir, staging = staging_folder(hills_dir, name, "unbundle")
        os.makedirs(staging)
        # Its files come from the bundle: git runs with no config but the
        # one `init` writes here.
        repo = git.Repo(staging, neutral=True)
        repo.init()
        repo.run("symbolic-ref", "HEAD", BRANCH)
        pack = next(members, None)
        if pack is None or pack.name != PACK:
            raise _damaged(path, f"{PACK} does not follow {MANIFEST}")
        data = _restore_objects(reader, pack, repo, manifest)
        _restore_data(reader, members, staging, data)
        repo.run("read-tree", manifest["commit"])
        repo.run("checkout-index", "-a", "-f")
        # The files' stat data into the index (checkout-index leaves it
        # empty): an eval then knows the hill clean without git
        # (gitobjects.clean_by_stat), as after a commit.
        repo.run("update-index", "-q", "--refresh", ok_codes=(0, 1))
        write_excludes(staging, [rel for rel in data if not rel.startswith(locks.PRIVATE_DIR + "/")])
        install_hook(staging)
        os.rename(staging, target)
    except BaseException:
        if created_hills_dir:
            shutil.rmtree(hills_dir, ignore_errors=True)
        raise
    finally:
        reader.close()
        if workdir and os.path.isdir(workdir):
            shutil.rmtree(workdir, ignore_errors=True)
    if register:
        try:
            register_unbundled(name, target, tree_hash)
        except BaseException:
            shutil.rmtree(target, ignore_errors=True)
            raise
    return {"hill": name, "path": target, "commit": manifest["commit"], "tree_hash": tree_hash,
            "files": len(data)}


def register_unbundled(name: str, target: str, tree_hash: str) -> None:
    def record(registry: dict[str, Any]) -> None:
        entry = state.registry_entry(registry, name, target, add=True)
        entry["tree_hash"] = tree_hash

    state.update_registry(record)


def _restore_objects(reader: _Reader, pack: tarfile.TarInfo, repo: git.Repo,
                     manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Index the pack into `repo` (git checks each object against its id),
    check that the commit has the tree the manifest names and that every
    object of that tree is there; point the branch at the commit and
    return what the locks at that tree list."""
    from ..base.errors import CommandFailed

    source, commit, tree_hash = reader.path, manifest["commit"], manifest["tree_hash"]
    try:
        repo.run("index-pack", "--stdin", "--fsck-objects", input=reader.read(pack).read(), binary=True)
    except CommandFailed as exc:
        detail = (exc.stderr.strip().splitlines() or ["git refused it"])[-1]
        raise _damaged(source, f"its git objects do not check out ({detail})") from None
    found = repo.batch_check([commit])[0]
    if found is None or found[1] != "commit":
        raise _damaged(source, f"it does not hold the commit {commit[:12]} its manifest names")
    body = repo.run("cat-file", "commit", commit)
    parents = [line.split(" ", 1)[1] for line in body.split("\n\n", 1)[0].splitlines() if line.startswith("parent ")]
    if parents:
        # The commit's history stays on the machine that made it: a shallow
        # repository holds a commit without its parents.
        state.atomic_write(os.path.join(repo.git_dir, "shallow"), commit + "\n")
    actual_tree = repo.tree_of(commit)
    if actual_tree != tree_hash:
        raise _damaged(source, f"its commit holds tree {actual_tree[:12]}, not the tree {tree_hash[:12]} "
                               f"its manifest names")
    try:
        listed = repo.run("ls-tree", "-r", "-z", "--full-tree", tree_hash)
    except CommandFailed:
        raise _damaged(source, f"a folder of tree {tree_hash[:12]} is missing from its git objects") from None
    entries = [record.split("\t", 1) for record in listed.split("\0") if record]
    for meta, rel in entries:
        # A hill's tree never holds a git dir: checked out, a `.vc/config`
        # or a `.git/config` there would run code in a later git call.
        inside = git_dir_part(rel)
        if inside is not None:
            raise _damaged(source, f"its tree holds '{rel}', inside a git dir ('{inside}')")
        if meta.split(" ")[0] not in ("100644", "100755"):
            raise _damaged(source, f"its tree holds '{rel}', which is not a plain file (a hill holds no links)")
    answers = repo.batch_check([meta.split(" ")[2] for meta, _ in entries])
    for (_, rel), answer in zip(entries, answers):
        if answer is None:
            raise _damaged(source, f"'{rel}' of tree {tree_hash[:12]} is missing from its git objects")
    repo.run("update-ref", BRANCH, commit)
    tracked = {rel_path for _, rel_path in entries}
    data: dict[str, dict[str, Any]] = {}
    for lock_name in (locks.PRIVATE_LOCK, locks.BLOBS_LOCK):
        in_lock = _locked(repo, commit, f"tree {tree_hash[:12]}", (lock_name,))
        for rel in in_lock:
            inside = git_dir_part(rel)
            if inside is not None:
                raise _damaged(source, f"{lock_name} lists '{rel}', inside a git dir ('{inside}'), "
                                       "where hills writes no data file")
            parts = rel.split("/")
            if rel.startswith("/") or any(part in ("", ".", "..") for part in parts) or rel in tracked:
                raise _damaged(source, f"{lock_name} lists '{rel}', which is no place for a data file of the hill")
        data.update(in_lock)
    return data


# Folders no bundle may write into: a repository's git dir (`.git`), and a
# hill's (`.vc`), at any depth. Matched without case and without the
# trailing dots and spaces Windows drops: a bundle made here may be
# unbundled on a file system that folds `.GIT` into `.git`.
GIT_DIRS = (".git", ".vc")


def git_dir_part(rel: str) -> str | None:
    """The component of the relative path `rel` that names a git dir, or None."""
    for part in rel.split("/"):
        if part.rstrip(". ").casefold() in GIT_DIRS:
            return part
    return None


def _restore_data(reader: _Reader, members: Iterator[tarfile.TarInfo], staging: str,
                  data: dict[str, dict[str, Any]]) -> None:
    """Write each private file and blob the locks list from the bundle's
    `data/` members, each checked against its size and digest; a member no
    lock lists, or a listed file with no member, refuses the bundle."""
    import blake3

    by_digest: dict[str, list[str]] = {}
    for rel, entry in data.items():
        by_digest.setdefault(entry["digest"].removeprefix("blake3:"), []).append(rel)
    seen: set[str] = set()
    for member in members:
        digest = member.name.removeprefix(DATA)
        if not member.name.startswith(DATA) or digest not in by_digest:
            raise _damaged(reader.path, f"it holds '{member.name}', which no lock of its tree lists")
        if digest in seen:
            raise _damaged(reader.path, f"it holds '{member.name}' twice")
        seen.add(digest)
        paths = sorted(by_digest[digest])
        first = os.path.join(staging, paths[0])
        os.makedirs(os.path.dirname(first), exist_ok=True)
        hasher = blake3.blake3()
        size = 0
        source = reader.read(member)
        with open(first, "xb") as out:
            while chunk := source.read(_CHUNK):
                hasher.update(chunk)
                size += len(chunk)
                out.write(chunk)
        expected = data[paths[0]]
        lock_name = locks.PRIVATE_LOCK if paths[0].startswith(locks.PRIVATE_DIR + "/") else locks.BLOBS_LOCK
        if size != expected["size"] or "blake3:" + hasher.hexdigest() != expected["digest"]:
            raise _damaged(reader.path, f"the data of '{paths[0]}' does not match {lock_name} "
                                        f"(expected {expected['size']} bytes, {expected['digest'][:23]}…; "
                                        f"found {size} bytes, blake3:{hasher.hexdigest()[:16]}…)")
        for rel in paths[1:]:
            os.makedirs(os.path.dirname(os.path.join(staging, rel)), exist_ok=True)
            with open(first, "rb") as reader_handle, open(os.path.join(staging, rel), "xb") as out:
                while chunk := reader_handle.read(_CHUNK):
                    out.write(chunk)
    for rel in sorted(data):
        if data[rel]["digest"].removeprefix("blake3:") not in seen:
            lock_name = locks.PRIVATE_LOCK if rel.startswith(locks.PRIVATE_DIR + "/") else locks.BLOBS_LOCK
            raise _damaged(reader.path, f"it lacks the data of '{rel}', which {lock_name} lists")
