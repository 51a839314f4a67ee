"""Submissions: copy a folder into the run folder and hash it in one pass,
refusing symlinks that leave it; record git lineage when it is a checkout."""

from __future__ import annotations

import os
import shutil
import stat as stat_module

from .errors import Refused, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

    import blake3

SKIP = {".git"}


def _hasher() -> blake3.blake3:
    import blake3

    return blake3.blake3()


def snapshot(source: Path | str, target: Path | str) -> str:
    """Copy `source` to `target` (created), hashing paths, modes and contents.

    Returns `blake3:<hex>`. The hash is over one record per entry, sorted by
    path: kind, mode bits, path, and the content (or link target) digest.
    """
    source = os.path.abspath(source)
    if not os.path.isdir(source):
        raise UsageError(f"submission '{source}' is not a folder",
                         hint="a submission is a folder; pass its path")
    real_root = os.path.realpath(source)
    records: list[str] = []
    os.makedirs(target, exist_ok=True)
    for current, dirs, files in os.walk(source):
        dirs[:] = sorted(d for d in dirs if d not in SKIP or current != source)
        rel_dir = os.path.relpath(current, source)
        out_dir = target if rel_dir == "." else os.path.join(target, rel_dir)
        for name in sorted(files) + [d for d in dirs if os.path.islink(os.path.join(current, d))]:
            full = os.path.join(current, name)
            rel = os.path.normpath(os.path.join(rel_dir, name)).replace(os.sep, "/")
            st = os.lstat(full)
            destination = os.path.join(out_dir, name)
            if stat_module.S_ISLNK(st.st_mode):
                link = os.readlink(full)
                resolved = os.path.realpath(full)
                if os.path.isabs(link) or not (resolved == real_root or resolved.startswith(real_root + os.sep)):
                    raise Refused(f"submission symlink '{rel}' points outside the submission (to '{link}')",
                                  hint="copy the file into the submission instead of linking to it")
                os.symlink(link, destination)
                digest = _hasher()
                digest.update(link.encode("utf-8", "surrogateescape"))
                records.append(f"link 120000 {rel}\0{digest.hexdigest()}\n")
            elif stat_module.S_ISREG(st.st_mode):
                digest = _hasher()
                with open(full, "rb") as reader, open(destination, "wb") as writer:
                    while True:
                        chunk = reader.read(1 << 20)
                        if not chunk:
                            break
                        digest.update(chunk)
                        writer.write(chunk)
                mode = "100755" if st.st_mode & stat_module.S_IXUSR else "100644"
                os.chmod(destination, 0o755 if mode == "100755" else 0o644)
                records.append(f"file {mode} {rel}\0{digest.hexdigest()}\n")
            else:
                raise Refused(f"submission entry '{rel}' is not a regular file, folder or symlink")
        for name in dirs:
            if not os.path.islink(os.path.join(current, name)):
                os.makedirs(os.path.join(out_dir, name), exist_ok=True)
    total = _hasher()
    for record in sorted(records, key=lambda r: r.split(" ", 2)[2]):
        total.update(record.encode("utf-8", "surrogateescape"))
    return "blake3:" + total.hexdigest()


def remove(path: Path | str) -> None:
    shutil.rmtree(path, ignore_errors=True)
