"""Machine state outside every project: home folder, key, registry, locks."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os

from .errors import EnvironmentProblem, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterator
    from pathlib import Path
    from typing import Any, Literal, overload


def home() -> str:
    """The machine state folder (`HILLS_HOME`, else ~/.autolab/hills)."""
    configured = os.environ.get("HILLS_HOME")
    if configured:
        return os.path.abspath(os.path.expanduser(configured))
    return os.path.join(os.path.expanduser("~"), ".autolab", "hills")


def ensure_home() -> bool:
    """Create the machine state folder and key if missing; True when created."""
    root = home()
    created = not os.path.isdir(root)
    if created and os.path.lexists(root):
        raise EnvironmentProblem(f"machine state folder '{root}' is a file, not a folder",
                                 hint="point HILLS_HOME at a folder (or unset it to use ~/.autolab/hills)")
    os.makedirs(root, mode=0o700, exist_ok=True)
    _ensure_key()
    return created


def key_path() -> str:
    """The machine's Ed25519 private key (PKCS8 PEM, mode 0600)."""
    return os.path.join(home(), "key")


def legacy_key_path() -> str:
    """The HMAC secret of a machine from before Ed25519 keys, kept so its
    old reports and log lines still verify here."""
    return os.path.join(home(), "key.hmac")


def allowed_signers_path() -> str:
    """The keys `hills trust` added (OpenSSH allowed_signers format)."""
    return os.path.join(home(), "allowed_signers")


PEM_BEGIN = b"-----BEGIN PRIVATE KEY-----"
PEM_END = b"-----END PRIVATE KEY-----"
# The DER of a PKCS8 Ed25519 private key (RFC 8410) is this, then the 32-byte seed.
PKCS8_ED25519 = bytes.fromhex("302e020100300506032b657004220420")


def key_pem(seed: bytes) -> bytes:
    """The PKCS8 PEM text of the Ed25519 private key with `seed`."""
    import binascii

    der = binascii.b2a_base64(PKCS8_ED25519 + seed, newline=False)
    return PEM_BEGIN + b"\n" + der + b"\n" + PEM_END + b"\n"


def _read_key_file(path: str) -> tuple[str, bytes] | None:
    """("ed25519", seed) or ("hmac", secret) for the key file at `path`,
    None when there is none."""
    try:
        with open(path, "rb") as handle:
            data = handle.read().strip()
    except (FileNotFoundError, NotADirectoryError):
        return None
    if data.startswith(PEM_BEGIN):
        import binascii

        body = data[len(PEM_BEGIN):]
        body = body[:body.find(PEM_END)] if PEM_END in body else b""
        try:
            der = binascii.a2b_base64(b"".join(body.split()))
        except binascii.Error:
            der = b""
        if len(der) != 48 or not der.startswith(PKCS8_ED25519):
            raise EnvironmentProblem(f"machine key '{path}' is not an Ed25519 private key (PKCS8 PEM)",
                                     hint="restore it from a backup; a new key invalidates every report signed so far")
        return "ed25519", der[16:]
    if len(data) < 32:
        raise EnvironmentProblem(f"machine key '{path}' is truncated or empty",
                                 hint="restore it from a backup; a new key invalidates every report signed so far")
    return "hmac", data


def _link_new_key(path: str, replace: bool) -> None:
    # Write a private temp file, then hard-link it into place (or rename it
    # over an old HMAC secret already kept as key.hmac): a reader never sees
    # a half-written key.
    with named_os_errors(path):
        fd, tmp = private_temp(os.path.dirname(path), ".key-")
        try:
            with os.fdopen(fd, "wb") as handle:
                os.fchmod(handle.fileno(), 0o600)
                handle.write(key_pem(os.urandom(32)))
                handle.flush()
                os.fsync(handle.fileno())
            if replace:
                os.replace(tmp, path)
            else:
                try:
                    os.link(tmp, path)
                except FileExistsError:
                    pass
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)


def _ensure_key() -> None:
    """Make the Ed25519 key if there is none; on a machine whose `key` is an
    old HMAC secret, keep that as `key.hmac` first (docs/decisions.md
    D-046, "An old machine keeps its HMAC secret")."""
    path = key_path()
    found = _read_key_file(path)
    if found is not None and found[0] == "ed25519":
        return
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    if found is None:
        _link_new_key(path, replace=False)  # a link never replaces: racing creators keep the first key
        return
    with file_lock(path + ".lock"):
        found = _read_key_file(path)  # another process may have replaced it meanwhile
        if found is not None and found[0] == "hmac":
            legacy = legacy_key_path()
            with named_os_errors(legacy):
                try:
                    os.link(path, legacy)
                except FileExistsError:
                    if _read_key_file(legacy) != found:
                        raise EnvironmentProblem(
                            f"machine key '{path}' is an old HMAC secret, but '{legacy}' holds another one",
                            hint=f"keep the right one as '{legacy}' and remove '{path}'") from None
            _link_new_key(path, replace=True)


def load_key() -> bytes:
    """The secret that seals machine state (caches, counters, pins); the
    machine key is created on first use."""
    found = _read_key_file(key_path())
    if found is None or found[0] != "ed25519":
        ensure_home()
    data = existing_key()
    if data is None:
        raise EnvironmentProblem(f"machine key '{key_path()}' vanished as it was created",
                                 hint="another process removed it: run the command again")
    return data


def existing_key() -> bytes | None:
    """The secret that seals machine state, or None when this machine has
    no key yet: the old HMAC secret where there is one (so what it sealed
    stays valid), else one derived from the Ed25519 key. Never creates a
    key: checking a signature must leave no trace."""
    legacy = _read_key_file(legacy_key_path())
    if legacy is not None and legacy[0] == "hmac":
        return legacy[1]
    found = _read_key_file(key_path())
    if found is None:
        return None
    if found[0] == "hmac":
        return found[1]
    from .ed25519 import sha256

    return sha256(b"hills machine state seal\0" + found[1]).hexdigest().encode("ascii")


def signing_seed() -> bytes | None:
    """The seed of the machine's Ed25519 key, or None when it has none yet
    (never creates it)."""
    found = _read_key_file(key_path())
    return found[1] if found is not None and found[0] == "ed25519" else None


def legacy_secret() -> bytes | None:
    """The old HMAC secret (key.hmac, or a `key` not yet replaced), or None."""
    for path in (legacy_key_path(), key_path()):
        found = _read_key_file(path)
        if found is not None and found[0] == "hmac":
            return found[1]
    return None


def private_temp(directory: str, prefix: str) -> tuple[int, str]:
    """A new file only this user can read, opened for writing, as
    tempfile.mkstemp makes it (exclusive, no link followed), without the
    imports tempfile costs every command: (fd, path)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    while True:
        path = os.path.join(directory, prefix + os.urandom(6).hex())
        try:
            return os.open(path, flags, 0o600), path
        except FileExistsError:
            continue


def atomic_write(path: Path | str, data: bytes | str, mode: int = 0o644) -> None:
    """Write bytes or text to `path` through a temp file and rename."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    with named_os_errors(path):
        fd, tmp = private_temp(directory, "." + os.path.basename(path) + ".")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, mode)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise


def copy_tree(source: Path | str, target: Path | str, **options: Any) -> object:
    """shutil.copytree, but its first error is raised as itself (a full disk
    with its errno and the file it was writing) rather than folded into a
    list of texts. A plain copy (no option but `symlinks` and `into`) is
    made with os calls: importing shutil loads its compressors, a few ms of
    every eval. `into=True` copies into `target`, an empty folder that
    exists (one already bound into a sandbox, say), instead of creating it."""
    if not set(options) - {"symlinks", "into"}:
        _copy_folder(os.fspath(source), os.fspath(target), bool(options.get("symlinks")),
                     into=bool(options.get("into")))
        return target
    assert not options.get("into"), "into= is for plain copies"
    import shutil

    first: list[OSError] = []

    def copy(src: str, dst: str, *, follow_symlinks: bool = True) -> object:
        try:
            return shutil.copy2(src, dst, follow_symlinks=follow_symlinks)
        except OSError as exc:
            first.append(exc)
            raise

    try:
        return shutil.copytree(source, target, copy_function=copy, **options)
    except shutil.Error:
        if first:
            raise first[0] from None
        raise


def _copy_folder(source: str, target: str, symlinks: bool, into: bool = False) -> None:
    """What shutil.copytree(source, target, symlinks=symlinks) copies, with
    the data, mode, times and extended attributes shutil.copy2 keeps; a
    link is copied as a link under `symlinks`, else what it leads to.
    `into`: `target` is an empty folder already there."""
    with os.scandir(source) as scan:
        entries = list(scan)
    if into:
        if os.listdir(target):
            raise OSError(errno.ENOTEMPTY, "a folder to copy into must be empty", target)
    else:
        os.makedirs(target)
    for entry in entries:
        destination = os.path.join(target, entry.name)
        if entry.is_symlink() and symlinks:
            os.symlink(os.readlink(entry.path), destination)
            _copy_stat(entry.path, destination, follow_symlinks=False)
        elif entry.is_dir():
            _copy_folder(entry.path, destination, symlinks)
        elif entry.is_file():
            _copy_file(entry.path, destination)
        else:  # shutil refuses a named pipe; a device or socket is no file to copy either
            raise OSError(errno.EINVAL, "not a regular file, folder or link", entry.path)
    _copy_stat(source, target)


def _copy_file(source: str, target: str) -> None:
    with open(source, "rb") as reader, open(target, "wb") as writer:
        size = os.fstat(reader.fileno()).st_size
        offset = 0
        try:
            while True:
                sent = os.sendfile(writer.fileno(), reader.fileno(), offset, max(size - offset, 1 << 23))
                if not sent:
                    break
                offset += sent
        except OSError as exc:
            if offset or exc.errno not in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
                raise
            while chunk := reader.read(1 << 20):  # a file system sendfile cannot read
                writer.write(chunk)
    _copy_stat(source, target)


def _copy_stat(source: str, target: str, follow_symlinks: bool = True) -> None:
    """shutil.copystat: times, extended attributes, then mode (a link's own
    mode cannot be set on Linux)."""
    st = os.stat(source, follow_symlinks=follow_symlinks)
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=follow_symlinks)
    try:
        names = os.listxattr(source, follow_symlinks=follow_symlinks)
    except OSError as exc:
        if exc.errno not in (errno.ENOTSUP, errno.ENODATA, errno.EINVAL):
            raise
        names = []
    for name in names:
        try:
            os.setxattr(target, name, os.getxattr(source, name, follow_symlinks=follow_symlinks),
                        follow_symlinks=follow_symlinks)
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.ENODATA, errno.EINVAL, errno.EACCES):
                raise
    if follow_symlinks:
        import stat as stat_module

        os.chmod(target, stat_module.S_IMODE(st.st_mode))


# What a folder or a disk does to a write: refuse it (read-only, not ours),
# run out of room, or hold a file where a folder should be.
WRITE_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.ENOTDIR})


@contextlib.contextmanager
def named_os_errors(path: Path | str) -> Iterator[None]:
    """Name `path` in a write error that names no file or only a temp file
    beside it (a buffered write, a mkstemp), so the user sees what failed."""
    path = os.fspath(path)
    try:
        yield
    except OSError as exc:
        named = os.fsdecode(exc.filename) if exc.filename else None
        temp_beside = named and os.path.dirname(named) == os.path.dirname(path) \
            and os.path.basename(named).startswith(".")
        if exc.errno not in WRITE_ERRNOS or named and not temp_beside:
            raise
        raise OSError(exc.errno, exc.strerror, path) from exc


@contextlib.contextmanager
def write_errors_as_problems(folder: Path | str | None = None) -> Iterator[None]:
    """Turn a write error (see WRITE_ERRNOS) into the EnvironmentProblem
    that names its path; one without a path is named by `folder`, where
    the work inside was writing."""
    try:
        yield
    except OSError as exc:
        if folder is not None and exc.errno in WRITE_ERRNOS and not exc.filename:
            exc = OSError(exc.errno, exc.strerror, folder)
        problem = write_problem(exc)
        if problem is None:
            raise
        raise problem from exc


def write_problem(exc: BaseException) -> EnvironmentProblem | None:
    """The EnvironmentProblem (exit 4) for an OSError of WRITE_ERRNOS,
    naming the path and saying what to do; None for any other error,
    which stays a bug."""
    if not isinstance(exc, OSError) or exc.errno not in WRITE_ERRNOS:
        return None
    full_disk = exc.errno in (errno.ENOSPC, errno.EDQUOT)
    # A copy that runs out of room names its source first and the file it
    # was writing second.
    named = exc.filename2 if full_disk and exc.filename2 else exc.filename
    if not named:
        return EnvironmentProblem(f"a write failed: {exc.strerror}",
                                  hint=f"free space on the disks holding the machine state ('{home()}') and "
                                       "the current folder, or make them writable, then run the command again")
    path = os.path.abspath(os.fsdecode(named))
    reason = exc.strerror
    if exc.errno == errno.ENOTDIR:
        blocker = _file_in_the_way(path)
        if blocker:
            reason = f"'{blocker}' is a file, not a folder"
    if _within(path, home()) or _within(home(), path):
        if full_disk:
            hint = f"free space on the disk holding '{home()}', or point HILLS_HOME at another disk"
        else:
            hint = f"machine state lives in '{home()}' (HILLS_HOME): make it a writable folder, or point " \
                   "HILLS_HOME at one you own"
    elif full_disk:
        hint = f"free space on the disk holding '{os.path.dirname(path)}', then run the command again"
    elif exc.errno == errno.ENOTDIR:
        hint = "move that file aside, or work in another folder"
    else:
        hint = f"'{os.path.dirname(path)}' is not writable: run hills in a folder you can write, or fix its permissions"
    # The same errnos come from reading a file that is not the user's.
    verb = "read" if exc.errno in (errno.EACCES, errno.EPERM) and os.path.isfile(path) \
        and not os.access(path, os.R_OK) else "write"
    return EnvironmentProblem(f"cannot {verb} '{path}': {reason}", hint=hint)


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _file_in_the_way(path: str) -> str | None:
    """The nearest existing ancestor of `path` that is not a folder."""
    current = os.path.dirname(path)
    while current and current != os.path.dirname(current):
        if os.path.lexists(current):
            return None if os.path.isdir(current) else current
        current = os.path.dirname(current)
    return None


@contextlib.contextmanager
def file_lock(path: Path | str, blocking: bool = True) -> Iterator[bool]:
    """An exclusive flock on `path` (created if needed); yields True if held."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    # O_NOFOLLOW: a link planted where a lock goes (say, by an evaluator in
    # its run folder) must not make hills create files elsewhere.
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        if os.path.islink(path):
            raise EnvironmentProblem(f"lock file '{path}' is a symbolic link; refusing to follow it") from exc
        raise
    try:
        flags = fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB
        try:
            fcntl.flock(fd, flags)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def registry_path() -> str:
    return os.path.join(home(), "registry.json")


REGISTRY_VERSION = 2
REGISTRY_HINT = ("repair it, or move it aside: 'hills new' and 'hills commit' register hills again "
                 "(approvals made with 'hills pin' are then lost)")


def load_registry() -> dict[str, Any]:
    """{"version": 2, "hills": {name: [entry, ...]}}: the hills of this
    machine, several under one name when projects each hold one. An entry
    has `path` and, once known, `tree_hash`, `template` and `pinned`. The
    first format, one entry per name, reads as a list of one."""
    path = registry_path()
    try:
        with open(path, encoding="utf-8") as handle:
            registry = json.load(handle)
    except FileNotFoundError:
        return {"version": REGISTRY_VERSION, "hills": {}}
    except ValueError as exc:
        raise EnvironmentProblem(f"registry '{path}' is not valid JSON: {exc}")
    return _upgraded(registry, path)


def _upgraded(registry: object, path: str) -> dict[str, Any]:
    if not isinstance(registry, dict) or not isinstance(registry.get("hills", {}), dict):
        raise EnvironmentProblem(f"registry '{path}' is not a JSON object holding a 'hills' object",
                                 hint=REGISTRY_HINT)
    hills: dict[str, list[dict[str, Any]]] = {}
    for name, entries in registry.get("hills", {}).items():
        if isinstance(entries, dict):
            entries = [entries]
        if not isinstance(entries, list) or not all(isinstance(entry, dict) and isinstance(entry.get("path"), str)
                                                    for entry in entries):
            raise EnvironmentProblem(f"registry '{path}': the entry of hill '{name}' is not a list of objects "
                                     "with a 'path'", hint=REGISTRY_HINT)
        hills[name] = entries
    return {**registry, "version": REGISTRY_VERSION, "hills": hills}


def same_path(first: Path | str, second: Path | str) -> bool:
    return os.path.realpath(first) == os.path.realpath(second)


def registry_entries(registry: dict[str, Any] | None = None) -> list[tuple[str, dict[str, Any]]]:
    """[(name, entry)] for every registered hill, by name, then in the order
    they were registered."""
    registry = load_registry() if registry is None else registry
    return [(name, entry) for name in sorted(registry["hills"]) for entry in registry["hills"][name]]


if TYPE_CHECKING:
    @overload
    def registry_entry(registry: dict[str, Any], name: str, path: Path | str,
                       add: Literal[True]) -> dict[str, Any]: ...

    @overload
    def registry_entry(registry: dict[str, Any], name: str, path: Path | str,
                       add: bool = False) -> dict[str, Any] | None: ...


def registry_entry(registry: dict[str, Any], name: str, path: Path | str,
                   add: bool = False) -> dict[str, Any] | None:
    """The entry of the hill named `name` at `path`; with `add`, one is
    added when there is none, else None."""
    entries = registry["hills"].get(name, [])
    for entry in entries:
        if same_path(entry["path"], path):
            return entry
    if not add:
        return None
    entry = {"path": os.path.abspath(path)}
    registry["hills"].setdefault(name, []).append(entry)
    return entry


def update_registry(change: Callable[[dict[str, Any]], object]) -> dict[str, Any]:
    """Apply `change(registry)` under the registry lock and write it atomically."""
    ensure_home()
    with file_lock(os.path.join(home(), "locks", "registry.lock")):
        registry = load_registry()
        change(registry)
        atomic_write(registry_path(), json.dumps(registry, indent=2, sort_keys=True) + "\n", 0o600)
    return registry


def state_dir(name: str, tree_hash: str | None, hill_path: Path | str | None = None) -> str:
    """Per hill-version state: attempts log and caches. A committed version
    is its tree, whichever folder holds it: the same tree is the same files
    and, by digest, the same held-out data, so same-named hills with one
    tree share it (and their holdout budget). The working tree (`tree_hash`
    None) belongs to the folder at `hill_path` alone."""
    if tree_hash:
        return os.path.join(home(), "state", f"{name}@{tree_hash}")
    if hill_path is None:
        raise TypeError("the state of a working tree needs the hill's folder")
    from .digests import sha256

    folder = sha256(os.path.realpath(hill_path).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return os.path.join(home(), "state", f"{name}@current-{folder}")


# Housekeeping a command may leave until its caller has the exit code (old
# run folders to remove): a warm worker (hills.warm) collects it here and
# runs it once it has replied; anywhere else it runs at once.
deferred: list[Callable[[], None]] | None = None


def housekeeping(call: Callable[[], None]) -> None:
    """Run `call` now, or after the reply in a warm worker."""
    if deferred is None:
        call()
    else:
        deferred.append(call)


def runs_dir(name: str) -> str:
    return os.path.join(home(), "runs", name)


def envs_dir(name: str) -> str:
    return os.path.join(home(), "envs", name)


def check_writable_home() -> None:
    root = home()
    if os.path.exists(root) and not os.access(root, os.W_OK):
        raise UsageError(f"machine state folder '{root}' is not writable",
                         hint="set HILLS_HOME to a folder you own")


def _seal_mac(path: Path | str, body: bytes, secret: bytes | None = None) -> str:
    from .digests import hmac_sha256

    return hmac_sha256(secret or load_key(), os.path.abspath(path).encode() + b"\0" + body)


def sealed_write(path: Path | str, value: object, mode: int = 0o600) -> None:
    """Write JSON with an HMAC over its content and its own path: a cache an
    edit cannot vouch for."""
    body = json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    atomic_write(path, json.dumps({"value": value, "mac": _seal_mac(path, body)}), mode)


def sealed_read(path: Path | str) -> Any:
    """The value written by sealed_write, or None when missing or edited
    (or when the machine has no key yet: reading creates none)."""
    from .digests import compare_digest

    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
        secret = existing_key()
        if secret is None:
            return None
        body = json.dumps(document["value"], sort_keys=True, separators=(",", ":")).encode()
        if compare_digest(str(document["mac"]), _seal_mac(path, body, secret)):
            return document["value"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def folder_signature(folder: Path | str, skip: Collection[str] = ()) -> dict[str, list[str | int]]:
    """{relative path: [kind, size, mtime_ns, ctime_ns, inode]} of everything
    in `folder`, links not followed. ctime cannot be set back by a user, so
    an edited or added file always shows. One lstat an entry, its kind from
    the folder listing: a large environment (10,000 files and more) is read
    at every eval."""
    entries: dict[str, list[str | int]] = {}
    pending = [(os.fspath(folder), "")]
    while pending:
        current, prefix = pending.pop()
        try:
            listing = os.scandir(current)
        except OSError:  # as os.walk: a folder that cannot be listed holds nothing
            continue
        with listing:
            for entry in listing:
                rel = prefix + entry.name
                try:
                    st = entry.stat(follow_symlinks=False)
                    kind = "l" if entry.is_symlink() else ("d" if entry.is_dir(follow_symlinks=False) else "f")
                except OSError:
                    continue
                if kind == "d":
                    pending.append((entry.path, rel + "/"))
                if rel in skip:
                    continue
                entries[rel] = [kind, st.st_size if kind != "d" else 0, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
    return entries
