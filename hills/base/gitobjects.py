"""A hill's git objects and refs read and written in Python, for the one
write every logged eval makes: the note of its report (`git notes add
-f`, which replaces the note: docs/history.md). Starting git for it costs
an eval about 14 ms, more than the rest of its bookkeeping together.

Only the plain case is done here: loose objects and refs, a notes tree
without fanout, SHA-1, an identity and date git would write unchanged. For
anything else `replace_note` (and `append_note`, what notes were before)
does nothing and says so, and the caller runs git. What it writes is byte
for byte what `git notes add -f` (`git notes append`) writes: the same
blob, tree and commit, hence the same ids, and the same reflog line
(tests/test_gitobjects.py holds the two side by side)."""

from __future__ import annotations

import os
import re
import time
import zlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from hashlib import sha1
else:
    try:
        from _sha1 import sha1
    except ImportError:  # an interpreter built without it
        from hashlib import sha1

def _digest(data: bytes) -> str:
    """SHA-1 in hex: the builtin module for small objects, OpenSSL's (about
    seven times faster, but a few ms to load) for a large note."""
    if len(data) > 1 << 16:
        try:
            from _hashlib import openssl_sha1
        except ImportError:
            pass
        else:
            return openssl_sha1(data).hexdigest()
    return sha1(data).hexdigest()


NOTES_MESSAGE = "Notes added by 'git notes append'"
REPLACE_MESSAGE = "Notes added by 'git notes add'"
# More notes than this and git may fan the tree out into folders.
MAX_PLAIN_NOTES = 200
_HEX40 = re.compile(r"[0-9a-f]{40}")
# What git strips from both ends of a name or an address ("crud").
_CRUD = " \t\n.,:;<>\"\\'"


class NotPlain(Exception):
    """The repository or the note is not the plain case: let git do it."""


def append_note(git_dir: str, ref: str, target: str, text: str, env: Mapping[str, str]) -> bool:
    """Append the one-line note `text` to the note of object `target` under
    `ref`, as `git notes --ref=REF append --file=- TARGET` with `env` would;
    False (nothing changed that matters) when git must do it."""
    try:
        _write(git_dir, ref, target, lambda previous: (previous + b"\n" if previous else b"") + _line(text), env,
               NOTES_MESSAGE)
    except NotPlain:
        return False
    return True


def replace_note(git_dir: str, ref: str, target: str, make: Callable[[str | None], str],
                 env: Mapping[str, str]) -> bool:
    """Make the note of object `target` under `ref` the one line
    `make(the note there now, or None)` returns, as `git notes --ref=REF add
    -f --file=- TARGET` with `env` would; False (nothing changed that
    matters) when git must do it. The caller holds the notes' lock, so
    nothing moves the note between the read and the write."""
    try:
        _write(git_dir, ref, target, lambda previous: _line(make(None if previous is None else
                                                                  previous.decode("utf-8", "replace"))),
               env, REPLACE_MESSAGE)
    except NotPlain:
        return False
    return True


def _line(text: str) -> bytes:
    # git strips trailing space and ends the message with one newline: a
    # single line without either is the message unchanged.
    if not text or "\n" in text or "\r" in text or text != text.rstrip() or text != text.lstrip():
        raise NotPlain("the note is not one plain line")
    return text.encode("utf-8") + b"\n"


def _write(git_dir: str, ref: str, target: str, blob_of: Callable[[bytes | None], bytes], env: Mapping[str, str],
           message: str) -> None:
    """Write the note `blob_of(the note's bytes now, or None)` of `target`."""
    if not _HEX40.fullmatch(target) or not ref.startswith("refs/notes/") or ".." in ref:
        raise NotPlain("target or ref")
    log_updates = _config(git_dir)
    ref_path = os.path.join(git_dir, *ref.split("/"))
    old = _read_ref(git_dir, ref, ref_path)
    entries: dict[str, str] = {}
    previous = None
    if old is not None:
        kind, commit = _read_object(git_dir, old)
        if kind != "commit" or not commit.startswith(b"tree "):
            raise NotPlain("the notes ref is not a commit")
        kind, tree = _read_object(git_dir, commit[5:45].decode("ascii"))
        if kind != "tree":
            raise NotPlain("the notes commit has no tree")
        entries = _tree_entries(tree)
        if target in entries:
            kind, previous = _read_object(git_dir, entries[target])
            if kind != "blob" or not previous.endswith(b"\n"):
                raise NotPlain("the existing note does not end with a newline")
    if len(entries) >= MAX_PLAIN_NOTES:
        raise NotPlain("a notes tree git may fan out")
    author = _ident(env, "AUTHOR")
    committer = _ident(env, "COMMITTER")
    blob = blob_of(previous)
    entries[target] = _write_object(git_dir, "blob", blob)
    tree_data = b"".join(b"100644 " + name.encode("ascii") + b"\0" + bytes.fromhex(entries[name])
                         for name in sorted(entries))
    tree_id = _write_object(git_dir, "tree", tree_data)
    lines = [f"tree {tree_id}"] + ([f"parent {old}"] if old else []) + [
        f"author {author}", f"committer {committer}", "", message, ""]
    commit_id = _write_object(git_dir, "commit", "\n".join(lines).encode("utf-8"))
    _update_ref(git_dir, ref, ref_path, old, commit_id, committer, log_updates, message)


def _config(git_dir: str) -> bool:
    """Whether ref updates are logged (core.logAllRefUpdates); NotPlain for
    a repository whose config changes how objects or files are written."""
    try:
        with open(os.path.join(git_dir, "config"), encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError):
        raise NotPlain("no readable config")
    section, log_updates = "", False
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].split(";", 1)[0].strip().lower()
        if line.startswith("["):
            section = line.strip("[] ")
            continue
        key, _, value = (part.strip() for part in line.partition("="))
        if key in ("objectformat", "sharedrepository", "compression", "loosecompression", "fsync",
                   "fsyncmethod", "fsyncobjectfiles", "refstorage", "precomposeunicode"):
            raise NotPlain(f"config {section}.{key}")
        if section == "core" and key == "logallrefupdates":
            log_updates = value in ("true", "yes", "on", "1", "always", "")
        if section.startswith("extensions"):
            raise NotPlain("a repository extension")
    return log_updates


def _read_ref(git_dir: str, ref: str, ref_path: str, locked_by_us: bool = False) -> str | None:
    try:
        with open(ref_path, encoding="ascii") as handle:
            value = handle.read().strip()
    except FileNotFoundError:
        value = None
    except (OSError, UnicodeDecodeError):
        raise NotPlain("an unreadable ref")
    if value is not None:
        if not _HEX40.fullmatch(value):
            raise NotPlain("a symbolic or odd ref")
        return value
    if not locked_by_us and os.path.exists(ref_path + ".lock"):
        raise NotPlain("the ref is being updated")
    try:
        with open(os.path.join(git_dir, "packed-refs"), encoding="utf-8") as handle:
            if any(line.rstrip("\n").endswith(" " + ref) for line in handle):
                raise NotPlain("a packed ref")
    except FileNotFoundError:
        pass
    except (OSError, UnicodeDecodeError):
        raise NotPlain("unreadable packed-refs")
    return None


def _object_path(git_dir: str, object_id: str) -> str:
    return os.path.join(git_dir, "objects", object_id[:2], object_id[2:])


def _read_object(git_dir: str, object_id: str) -> tuple[str, bytes]:
    """(type, content) of a loose object; NotPlain when it is packed."""
    try:
        with open(_object_path(git_dir, object_id), "rb") as handle:
            raw = zlib.decompress(handle.read())
    except (OSError, zlib.error):
        raise NotPlain(f"object {object_id} is not loose")
    header, _, content = raw.partition(b"\0")
    kind, _, size = header.decode("ascii", "replace").partition(" ")
    # Only the small objects are hashed again: git trusts a loose object's
    # name when it reads it, and a note grows with every eval.
    if not size.isdigit() or int(size) != len(content) or (kind != "blob" and _digest(raw) != object_id):
        raise NotPlain(f"object {object_id} does not match its id")
    return kind, content


def _tree_entries(tree: bytes) -> dict[str, str]:
    """{name: blob id} of a notes tree without fanout; NotPlain otherwise."""
    entries: dict[str, str] = {}
    at = 0
    while at < len(tree):
        space = tree.index(b" ", at)
        nul = tree.index(b"\0", space)
        mode, name = tree[at:space], tree[space + 1:nul].decode("ascii", "replace")
        if mode != b"100644" or not _HEX40.fullmatch(name):
            raise NotPlain("a notes tree with folders or other entries")
        entries[name] = tree[nul + 1:nul + 21].hex()
        at = nul + 21
    return entries


def _ident(env: Mapping[str, str], role: str) -> str:
    """`NAME <EMAIL> SECONDS ZONE` as git writes it from `env`."""
    name, email = env.get(f"GIT_{role}_NAME", ""), env.get(f"GIT_{role}_EMAIL", "")
    for value in (name, email):
        if not value or value != value.strip(_CRUD) or any(char in value for char in "<>\n\0"):
            raise NotPlain("an identity git would clean up")
    return f"{name} <{email}> {_date(env.get(f'GIT_{role}_DATE'))}"


def _date(given: str | None) -> str:
    """`SECONDS ZONE` for GIT_*_DATE (the forms hills and its tests use),
    or now in the local zone."""
    if not given:
        now = int(time.time())
        return f"{now} {_zone(time.localtime(now).tm_gmtoff)}"
    match = re.fullmatch(r"@?(\d+) ([+-]\d{4})", given.strip())
    if match:
        return f"{int(match.group(1))} {match.group(2)}"
    match = re.fullmatch(r"(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(Z|[+-]\d\d:?\d\d)", given.strip())
    if not match:
        raise NotPlain("a date form left to git")
    import calendar

    *fields, zone = match.groups()
    seconds = calendar.timegm(tuple(int(field) for field in fields) + (0, 0, 0))
    offset = 0 if zone == "Z" else (1 if zone[0] == "+" else -1) * (int(zone[1:3]) * 60 + int(zone[-2:])) * 60
    return f"{seconds - offset} {_zone(offset)}"


def _zone(offset: int) -> str:
    sign = "-" if offset < 0 else "+"
    minutes = abs(offset) // 60
    return f"{sign}{minutes // 60:02d}{minutes % 60:02d}"


def _write_object(git_dir: str, kind: str, content: bytes) -> str:
    """Write a loose object (if it is not there yet); its id."""
    raw = f"{kind} {len(content)}".encode("ascii") + b"\0" + content
    object_id = _digest(raw)
    path = _object_path(git_dir, object_id)
    if os.path.exists(path):
        return object_id
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    staged = os.path.join(folder, f"tmp_obj_{os.getpid()}_{os.urandom(4).hex()}")
    fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(zlib.compress(raw))
            handle.flush()
            os.fsync(handle.fileno())
        os.rename(staged, path)
    except BaseException:
        try:
            os.unlink(staged)
        except OSError:
            pass
        raise
    return object_id


def _update_ref(git_dir: str, ref: str, ref_path: str, old: str | None, new: str, committer: str,
                log_updates: bool, message: str) -> None:
    """Move `ref` from `old` to `new` under git's own lock file, with its
    reflog line; NotPlain, ref untouched, when someone else holds the lock
    or moved the ref."""
    lock = ref_path + ".lock"
    os.makedirs(os.path.dirname(ref_path), exist_ok=True)
    try:
        fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except FileExistsError:
        raise NotPlain("the ref is locked")
    try:
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write(new + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        if _read_ref(git_dir, ref, ref_path, locked_by_us=True) != old:
            raise NotPlain("the ref moved")
        log = os.path.join(git_dir, "logs", *ref.split("/"))
        if log_updates or os.path.exists(log):
            os.makedirs(os.path.dirname(log), exist_ok=True)
            line = f"{old or '0' * 40} {new} {committer}\tnotes: {message}\n"
            with open(log, "a", encoding="utf-8") as handle:
                handle.write(line)
        os.rename(lock, ref_path)
    except BaseException:
        try:
            os.unlink(lock)
        except OSError:
            pass
        raise


# -- a clean work tree, from the index's stat data ---------------------------

# The excludes every hill's `.vc/info/exclude` starts with (hill.BASE_EXCLUDES),
# as rules: folders skipped at the top, folders skipped anywhere, file names
# skipped anywhere, file suffixes skipped anywhere.
TOP_FOLDERS = (".vc", "private")
ANY_FOLDERS = ("__pycache__", ".pytest_cache", ".DS_Store")
ANY_FILES = (".DS_Store",)
ANY_SUFFIXES = (".pyc", ".pyo", ".pyd")


class _Entry:
    __slots__ = ("ctime", "mtime", "dev", "ino", "mode", "uid", "gid", "size", "object_id")

    def __init__(self, fields: tuple[int, ...], object_id: str) -> None:
        (ctime_s, ctime_ns, mtime_s, mtime_ns, self.dev, self.ino, self.mode, self.uid, self.gid,
         self.size) = fields
        self.ctime = ctime_s * 1_000_000_000 + ctime_ns
        self.mtime = mtime_s * 1_000_000_000 + mtime_ns
        self.object_id = object_id


def clean_by_stat(git_dir: str, work_tree: str, tree_id: str, ignored: frozenset[str]) -> bool:
    """True when `git status` of the work tree would list nothing: the
    index is the tree `tree_id` (its cache tree says so), every file of the
    work tree is in the index with the very stat data recorded there, none
    is racily clean, and no other file is there but those the fixed
    excludes and `ignored` (the committed blobs) leave out. False means
    "ask git": it is never a verdict of dirty."""
    index = os.path.join(git_dir, "index")
    try:
        with open(index, "rb") as handle:
            data = handle.read()
            written = os.fstat(handle.fileno()).st_mtime_ns
    except OSError:
        return False
    entries = _index_entries(data, tree_id)
    if entries is None:
        return False
    # Racily clean: written in the second the index was (a commit writes its
    # lock files just before the index), so an edit in that second may not
    # show in the stat data; such a file is compared by content, as git does.
    racy = {name for name, entry in entries.items() if entry.mtime // 1_000_000_000 >= written // 1_000_000_000}
    for root, folders, files in os.walk(work_tree):
        top = root == work_tree
        rel_root = "" if top else os.path.relpath(root, work_tree) + "/"
        for folder in list(folders):
            if (top and folder in TOP_FOLDERS) or folder in ANY_FOLDERS:
                folders.remove(folder)
            elif os.path.islink(os.path.join(root, folder)):
                return False
        for name in files:
            if name == ".gitignore" or name == ".gitattributes":
                return False  # rules of its own, even ones that un-ignore
            rel = rel_root + name
            if name in ANY_FILES or name.endswith(ANY_SUFFIXES) or rel in ignored:
                continue
            entry = entries.pop(rel, None)
            if entry is None:
                return False  # untracked
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:
                return False
            if (st.st_mode & 0o170000) != 0o100000 or st.st_mtime_ns != entry.mtime or st.st_ctime_ns != entry.ctime \
                    or st.st_ino & 0xFFFFFFFF != entry.ino or st.st_size & 0xFFFFFFFF != entry.size \
                    or st.st_uid != entry.uid or st.st_gid != entry.gid \
                    or bool(st.st_mode & 0o100) != (entry.mode == 0o100755):
                return False
            if rel in racy and not _same_content(os.path.join(root, name), entry):
                return False
    return not entries  # a tracked file not found is a deletion


def _same_content(path: str, entry: _Entry) -> bool:
    """Whether the file holds the blob the index entry names."""
    if entry.size > 1 << 24:
        return False
    try:
        with open(path, "rb") as handle:
            content = handle.read()
    except OSError:
        return False
    return _digest(b"blob %d\0" % len(content) + content) == entry.object_id


def _index_entries(data: bytes, tree_id: str) -> dict[str, _Entry] | None:
    """{path: stat data} of an index (versions 2 and 3) whose cache tree is
    `tree_id`, with no entry git treats specially; None otherwise."""
    if len(data) < 32 or data[:4] != b"DIRC":
        return None
    version = int.from_bytes(data[4:8], "big")
    if version not in (2, 3):
        return None
    count = int.from_bytes(data[8:12], "big")
    entries: dict[str, _Entry] = {}
    at = 12
    try:
        for _ in range(count):
            fields = tuple(int.from_bytes(data[at + i:at + i + 4], "big") for i in range(0, 40, 4))
            flags = int.from_bytes(data[at + 60:at + 62], "big")
            if flags & 0xF000:  # assume-valid, extended, or a merge stage
                return None
            mode = fields[6]
            if mode not in (0o100644, 0o100755):
                return None
            end = data.index(b"\0", at + 62)
            name = data[at + 62:end].decode("utf-8")
            entries[name] = _Entry(fields, data[at + 40:at + 60].hex())
            at += (62 + len(name.encode("utf-8")) + 8) // 8 * 8
        # The cache tree extension: its root names the tree the index is.
        while at + 8 <= len(data) - 20:
            signature, size = data[at:at + 4], int.from_bytes(data[at + 4:at + 8], "big")
            body = data[at + 8:at + 8 + size]
            if signature == b"TREE":
                if not body.startswith(b"\0"):
                    return None
                newline = body.index(b"\n")
                counts = body[1:newline].split(b" ")
                if int(counts[0]) != count:
                    return None  # invalidated (-1) or not the whole index
                return entries if body[newline + 1:newline + 21].hex() == tree_id else None
            at += 8 + size
    except (ValueError, IndexError, UnicodeDecodeError):
        return None
    return None
