"""Submissions: copy a folder into the run folder and hash it in one pass,
refusing symlinks that leave it; record git lineage when it is a checkout.

The copy reads the live folder once, through descriptors: each folder and
file is opened without following links, relative to its parent's
descriptor, and checked against what its listing said; each link's text is
read once and judged within the snapshot itself, never by resolving the
live path again. An entry that vanishes or changes while it is copied is a
refusal naming it."""

from __future__ import annotations

import errno
import os
import stat as stat_module

from ..base.errors import Refused, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

    import blake3

SKIP = {".git"}
CHUNK = 1 << 20
MAX_LINK_HOPS = 40  # as the kernel: more links than this on one path is a loop, never followed
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
# O_NONBLOCK: a fifo swapped in for a file must not block the open; a file ignores it.
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
# What opening or reading an entry raises when it vanished or became something else.
CHANGED = {errno.ENOENT, errno.ELOOP, errno.ENOTDIR, errno.EINVAL, errno.ENXIO, errno.EISDIR}


def _hasher() -> blake3.blake3:
    import blake3

    return blake3.blake3()


def _changed(rel: str) -> Refused:
    return Refused(f"submission entry '{rel}' changed while it was copied",
                   hint="leave the submission folder alone while hills evaluates it")


def _same(seen: os.stat_result, opened: os.stat_result) -> bool:
    """The entry listed is the one opened: same file, same type."""
    return (seen.st_ino == opened.st_ino and seen.st_dev == opened.st_dev
            and stat_module.S_IFMT(seen.st_mode) == stat_module.S_IFMT(opened.st_mode))


class _Tree:
    """What one pass over the live folder saw: records to hash, folders and
    files by relative path, and each link's text as it was read."""

    def __init__(self) -> None:
        self.records: list[str] = []
        self.dirs: set[str] = {""}
        self.files: set[str] = set()
        self.links: dict[str, str] = {}


def snapshot(source: Path | str, target: Path | str) -> str:
    """Copy `source` to `target` (created), hashing paths, modes and contents.

    Returns `blake3:<hex>`. The hash is over one record per entry, sorted by
    path: kind, mode bits, path, and the content (or link target) digest.
    """
    source = os.path.abspath(source)
    target = os.path.abspath(target)
    try:
        # The folder named is the user's own choice: it may be reached through a link.
        root = os.open(source, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    except (FileNotFoundError, NotADirectoryError):
        raise UsageError(f"submission '{source}' is not a folder",
                         hint="a submission is a folder; pass its path") from None
    tree = _Tree()
    os.makedirs(target, exist_ok=True)
    try:
        _copy_folder(root, "", target, tree)
    finally:
        os.close(root)
    for rel in sorted(tree.links):
        link = tree.links[rel]
        if not _stays_inside(rel, tree):
            raise Refused(f"submission symlink '{rel}' points outside the submission (to '{link}')",
                          hint="copy the file into the submission instead of linking to it")
        os.symlink(link, os.path.join(target, rel))
    total = _hasher()
    for record in sorted(tree.records, key=lambda r: r.split(" ", 2)[2]):
        total.update(record.encode("utf-8", "surrogateescape"))
    return "blake3:" + total.hexdigest()


def _copy_folder(fd: int, prefix: str, out_dir: str, tree: _Tree) -> None:
    """Copy the folder open as `fd` (at relative path `prefix`, '' or ending
    in '/') into `out_dir`, which exists."""
    for name in sorted(os.listdir(fd)):
        rel = prefix + name
        try:
            seen = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            raise _changed(rel) from None
        destination = os.path.join(out_dir, name)
        if stat_module.S_ISLNK(seen.st_mode):
            if not prefix and name in SKIP:
                continue
            try:
                link = os.readlink(name, dir_fd=fd)  # the text read once decides
            except OSError as exc:
                if exc.errno in CHANGED:
                    raise _changed(rel) from None
                raise
            digest = _hasher()
            digest.update(link.encode("utf-8", "surrogateescape"))
            tree.links[rel] = link
            tree.records.append(f"link 120000 {rel}\0{digest.hexdigest()}\n")
        elif stat_module.S_ISDIR(seen.st_mode):
            if not prefix and name in SKIP:
                continue
            child = _open(name, fd, DIR_FLAGS, seen, rel)
            try:
                os.mkdir(destination)
                tree.dirs.add(rel)
                _copy_folder(child, rel + "/", destination, tree)
            finally:
                os.close(child)
        elif stat_module.S_ISREG(seen.st_mode):
            _copy_file(name, fd, seen, rel, destination, tree)
        else:
            raise Refused(f"submission entry '{rel}' is not a regular file, folder or symlink")


def _open(name: str, fd: int, flags: int, seen: os.stat_result, rel: str) -> int:
    """Open `name` in folder `fd` without following a link; refuse when what
    opened is not what was listed (a swap between the listing and the open)."""
    try:
        opened = os.open(name, flags, dir_fd=fd)
    except OSError as exc:
        if exc.errno in CHANGED:
            raise _changed(rel) from None
        raise
    if not _same(seen, os.fstat(opened)):
        os.close(opened)
        raise _changed(rel)
    return opened


def _copy_file(name: str, fd: int, seen: os.stat_result, rel: str, destination: str, tree: _Tree) -> None:
    reader = _open(name, fd, FILE_FLAGS, seen, rel)
    try:
        before = os.fstat(reader)
        executable = bool(before.st_mode & stat_module.S_IXUSR)
        writer = os.open(destination, WRITE_FLAGS, 0o755 if executable else 0o644)
        digest = _hasher()
        try:
            os.fchmod(writer, 0o755 if executable else 0o644)
            while True:
                chunk = os.read(reader, CHUNK)
                if not chunk:
                    break
                digest.update(chunk)
                view = memoryview(chunk)
                while view:
                    view = view[os.write(writer, view):]
        finally:
            os.close(writer)
        after = os.fstat(reader)
    finally:
        os.close(reader)
    if (after.st_size, after.st_mtime_ns, after.st_mode) != (before.st_size, before.st_mtime_ns, before.st_mode):
        raise _changed(rel)
    mode = "100755" if executable else "100644"
    tree.files.add(rel)
    tree.records.append(f"file {mode} {rel}\0{digest.hexdigest()}\n")


def _stays_inside(rel: str, tree: _Tree) -> bool:
    """Whether link `rel` resolves inside the snapshot, following the links
    the snapshot holds by the text each had when it was read (never the live
    folder). A part past what the snapshot holds is taken as written."""
    parent, _, _ = rel.rpartition("/")
    where = parent.split("/") if parent else []
    pending = tree.links[rel].split("/")[::-1]
    if tree.links[rel].startswith("/"):
        return False
    hops = 0
    while pending:
        part = pending.pop()
        if part in ("", "."):
            continue
        if part == "..":
            if not where:
                return False
            where.pop()
            continue
        candidate = "/".join(where + [part])
        if candidate in tree.links:
            hops += 1
            if hops > MAX_LINK_HOPS:
                return True  # a loop: the kernel refuses to follow it, so it reaches nothing
            text = tree.links[candidate]
            if text.startswith("/"):
                return False
            pending.extend(text.split("/")[::-1])
            continue
        where.append(part)
    return True


def remove(path: Path | str) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)
