"""private.lock and blobs.lock: content hashes of what git must not hold,
their canonical TOML encoding, and the stat cache that makes re-checking
unchanged data cost one stat per file."""

from __future__ import annotations

import fnmatch
import json
import os
import stat as stat_module

from ..base import state
from ..base.digests import compare_digest, hmac_sha256, sha256
from ..base.errors import Refused, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from pathlib import Path
    from typing import Any

LOCK_VERSION = 1
PRIVATE_LOCK = "private.lock"
BLOBS_LOCK = "blobs.lock"
PRIVATE_DIR = "private"


def file_digest(path: Path | str) -> str:
    """`blake3:<hex>` of a file's bytes, memory-mapped and multi-threaded."""
    import blake3

    hasher = blake3.blake3(max_threads=blake3.blake3.AUTO)
    if os.path.getsize(path):
        hasher.update_mmap(path)
    return "blake3:" + hasher.hexdigest()


def encode(entries: Mapping[str, Mapping[str, Any]]) -> str:
    """Canonical TOML for a lock: `version` first, then files sorted by path."""
    import tomli_w

    document = {"version": LOCK_VERSION,
                "files": {path: {"size": entries[path]["size"], "digest": entries[path]["digest"]}
                          for path in sorted(entries)}}
    return tomli_w.dumps(document)


def decode(text: str, source: str) -> dict[str, dict[str, Any]]:
    """Parse a lock's TOML into {path: {size, digest}}; errors name the file."""
    import tomllib

    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"'{source}': not valid TOML: {exc}")
    if document.get("version") != LOCK_VERSION:
        raise UsageError(f"'{source}': key 'version': expected {LOCK_VERSION}, got {document.get('version')!r}")
    unknown = set(document) - {"version", "files"}
    if unknown:
        raise UsageError(f"'{source}': unknown key '{sorted(unknown)[0]}'", hint="a lock holds only version and files")
    files = document.get("files", {})
    entries: dict[str, dict[str, Any]] = {}
    for path, entry in files.items():
        if (not isinstance(entry, dict) or not isinstance(entry.get("size"), int)
                or not str(entry.get("digest", "")).startswith("blake3:")):
            raise UsageError(f"'{source}': key 'files.\"{path}\"': expected size (integer) and digest ('blake3:...')")
        entries[path] = {"size": entry["size"], "digest": entry["digest"]}
    return entries


def walk_private(hill_dir: Path | str, links: list[str] | None = None) -> list[str]:
    """Relative paths of every file under private/. Symbolic links are
    refused, or, when `links` is a list, put there instead."""
    root = os.path.join(hill_dir, PRIVATE_DIR)
    found = []
    for current, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files) + [d for d in dirs if os.path.islink(os.path.join(current, d))]:
            full = os.path.join(current, name)
            rel = os.path.relpath(full, hill_dir).replace(os.sep, "/")
            mode = os.lstat(full).st_mode
            if stat_module.S_ISLNK(mode):
                if links is not None:
                    links.append(rel)
                    continue
                raise UsageError(f"'{rel}' is a symbolic link",
                                 hint="private/ holds plain files only; copy the data in")
            if not stat_module.S_ISREG(mode):
                raise UsageError(f"'{rel}' is not a regular file")
            found.append(rel)
    return found


def is_blob(rel_path: str, size: int, rules: Mapping[str, Any]) -> bool:
    """Whether a (non-private) hill file is kept out of git by the blob rules."""
    if size >= rules["threshold"]:
        return True
    base = rel_path.rsplit("/", 1)[-1]
    for pattern in rules["track"]:
        if fnmatch.fnmatchcase(rel_path, pattern) or ("/" not in pattern and fnmatch.fnmatchcase(base, pattern)):
            return True
        if pattern.endswith("/**") and rel_path.startswith(pattern[:-2]):
            return True
    return False


class StatCache:
    """(size, mtime_ns, ctime_ns, inode) -> digest, per absolute path.

    The file lives in machine state and carries an HMAC with the machine key,
    so an edited cache cannot vouch for a changed file: it is simply ignored.
    """

    def __init__(self, hill_dir: Path | str) -> None:
        hill_key = sha256(os.path.realpath(hill_dir).encode()).hexdigest()[:24]
        self.path = os.path.join(state.home(), "cache", "stat", hill_key + ".json")
        self.entries: dict[str, list[Any]] = {}
        self.dirty = False
        self._key: bytes | None = None
        try:
            with open(self.path, "rb") as handle:
                raw = handle.read()
        except FileNotFoundError:
            return
        try:
            document = json.loads(raw)
            body = json.dumps(document["entries"], sort_keys=True, separators=(",", ":")).encode()
            if compare_digest(document["mac"], self._mac(body)):
                self.entries = document["entries"]
        except (ValueError, KeyError, TypeError):
            self.entries = {}

    def _mac(self, body: bytes) -> str:
        if self._key is None:
            self._key = state.load_key()
        return hmac_sha256(self._key, body)

    def digest(self, full_path: str, st: os.stat_result) -> str:
        signature = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
        cached = self.entries.get(full_path)
        if cached and cached[:4] == signature:
            return cached[4]
        digest = file_digest(full_path)
        self.entries[full_path] = signature + [digest]
        self.dirty = True
        return digest

    def save(self) -> None:
        if not self.dirty:
            return
        body = json.dumps(self.entries, sort_keys=True, separators=(",", ":")).encode()
        document = {"entries": self.entries, "mac": self._mac(body)}
        state.atomic_write(self.path, json.dumps(document, separators=(",", ":")), 0o600)
        self.dirty = False


def hash_files(hill_dir: Path | str, rel_paths: Iterable[str],
               cache: StatCache | None = None) -> dict[str, dict[str, Any]]:
    """{rel_path: {size, digest}} through the stat cache."""
    own_cache = cache is None
    cache = cache or StatCache(hill_dir)
    entries: dict[str, dict[str, Any]] = {}
    for rel in rel_paths:
        full = os.path.join(hill_dir, rel)
        st = os.stat(full)
        entries[rel] = {"size": st.st_size, "digest": cache.digest(full, st)}
    if own_cache:
        cache.save()
    return entries


def summary(entries: Mapping[str, Mapping[str, Any]]) -> str:
    total = sum(entry["size"] for entry in entries.values())
    return f"{len(entries)} file(s), {total} bytes"


def compare(expected: Mapping[str, object], actual: Mapping[str, object]) -> list[tuple[str, str]]:
    """Differences between a lock and disk: list of (change, path)."""
    changes = []
    for path in sorted(set(expected) | set(actual)):
        if path not in actual:
            changes.append(("removed", path))
        elif path not in expected:
            changes.append(("added", path))
        elif expected[path] != actual[path]:
            changes.append(("changed", path))
    return changes


def verify_disk(hill_dir: Path | str, lock_name: str, expected: Mapping[str, Mapping[str, Any]],
                cache: StatCache) -> None:
    """Raise Refused naming the first file whose disk content left the lock.

    Checks exactly the locked paths plus, for private/, any file added since.
    """
    actual: dict[str, dict[str, Any]] = {}
    for rel in expected:
        full = os.path.join(hill_dir, rel)
        try:
            # lstat: a link in place of a locked file is drift, whatever it
            # points at (its target can change after the check).
            st = os.lstat(full)
        except FileNotFoundError:
            raise Refused(f"'{rel}' is listed in {lock_name} but missing on disk",
                          hint="restore the file, or commit the hill again to record its removal")
        if stat_module.S_ISLNK(st.st_mode):
            raise Refused(f"'{rel}' is listed in {lock_name} but is now a symbolic link",
                          hint="put the plain file back in its place: a hill holds no links")
        if not stat_module.S_ISREG(st.st_mode):
            raise Refused(f"'{rel}' is listed in {lock_name} but is not a regular file",
                          hint="put the plain file back in its place, or commit the hill again")
        actual[rel] = {"size": st.st_size, "digest": cache.digest(full, st)}
        if actual[rel] != expected[rel]:
            raise Refused(f"'{rel}' does not match {lock_name} (its content changed since the hill was committed)",
                          hint="restore the file, or commit the hill again to freeze the new content")
    if lock_name == PRIVATE_LOCK:
        try:
            present = walk_private(hill_dir)
        except UsageError as exc:  # a link or a special file added to private/: drift too
            raise Refused(exc.message, hint=exc.hint or "remove it: private/ holds plain files only") from None
        for rel in present:
            if rel not in expected:
                raise Refused(f"'{rel}' is not listed in {lock_name} (added since the hill was committed)",
                              hint="remove it, or commit the hill again to freeze it")
