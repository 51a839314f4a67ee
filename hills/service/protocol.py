"""The wire format between the hills client and `hills serve`: framed,
bounded messages over a unix stream socket (hills-service(5)). Each frame
is one kind byte, a 4-byte big-endian length and the payload."""

from __future__ import annotations

import json
import os
import socket
import stat as stat_module
import struct
import time

from ..base.errors import Refused, UsageError

VERSION = 2
RECORD, DATA, STDOUT, STDERR = b"R", b"D", b"O", b"E"
KINDS = frozenset((RECORD, DATA, STDOUT, STDERR))
RECORD_CAP = 1 << 20
DATA_CAP = 1 << 20
UPLOAD_CAP = 1 << 30
ENTRIES_CAP = 100_000
# How long a connection may hold a slot of the service without progress:
# the request record whole within FIRST_DEADLINE_S of the connection, each
# later frame whole within FRAME_DEADLINE_S of the service waiting for it,
# and the whole upload within UPLOAD_BASE_S plus a second per MiB (the
# client is on this machine: a slow sender is a stalling one).
FIRST_DEADLINE_S = 5.0
FRAME_DEADLINE_S = 10.0
UPLOAD_BASE_S = 30.0
UPLOAD_RATE = 1 << 20
# Once the command runs, a client that reads nothing this long gets no more output.
IDLE_DEADLINE_S = 60.0
_HEADER = struct.Struct(">cI")
SLOW_HINT = (f"the service waits {FIRST_DEADLINE_S:g} s for a request, {FRAME_DEADLINE_S:g} s for each later "
             f"frame and {UPLOAD_BASE_S:g} s plus a second per MiB for an upload; send from a local folder")

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any


class ProtocolError(Refused):
    """A frame or record that breaks the protocol: the connection ends."""


class Closed(ProtocolError):
    """The other end went away."""


class Connection:
    """One end of a connection: frames out and in, within the bounds."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.peer_gone = False

    def send(self, kind: bytes, payload: bytes) -> None:
        """Send one frame; raises Closed when the other end is gone."""
        try:
            self.sock.sendall(_HEADER.pack(kind, len(payload)) + payload if len(payload) < 65536 else
                              _HEADER.pack(kind, len(payload)))
            if len(payload) >= 65536:
                self.sock.sendall(payload)
        except (OSError, socket.timeout) as exc:
            self.peer_gone = True
            raise Closed(f"the other end of the hills service connection went away ({exc})") from None

    def record(self, value: dict[str, Any]) -> None:
        body = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogateescape")
        if len(body) > RECORD_CAP:
            raise ProtocolError(f"a record of {len(body)} bytes is over the protocol's {RECORD_CAP}-byte bound")
        self.send(RECORD, body)

    def data(self, payload: bytes) -> None:
        for start in range(0, len(payload), DATA_CAP):
            self.send(DATA, payload[start:start + DATA_CAP])

    def receive(self, deadline: float | None = None) -> tuple[bytes, bytes]:
        """The next frame (kind, payload); `deadline` is a time.monotonic()
        by which the whole frame must have arrived."""
        header = self._exactly(_HEADER.size, deadline)
        kind, length = _HEADER.unpack(header)
        if kind not in KINDS:
            raise ProtocolError(f"unknown frame kind {kind!r}")
        cap = RECORD_CAP if kind == RECORD else DATA_CAP
        if length > cap:
            raise ProtocolError(f"a frame of {length} bytes is over the protocol's {cap}-byte bound")
        return kind, self._exactly(length, deadline)

    def receive_record(self, deadline: float | None = None) -> dict[str, Any]:
        kind, payload = self.receive(deadline)
        if kind != RECORD:
            raise ProtocolError(f"expected a record frame, got a {kind.decode()} frame")
        return parse_record(payload)

    def _exactly(self, count: int, deadline: float | None) -> bytes:
        chunks, got = [], 0
        while got < count:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ProtocolError("the request was too slow: a frame did not arrive in time", hint=SLOW_HINT)
                self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(min(count - got, 1 << 20))
            except socket.timeout:
                raise ProtocolError("the request was too slow: a frame did not arrive in time",
                                    hint=SLOW_HINT) from None
            except OSError as exc:
                raise Closed(f"the connection broke ({exc})") from None
            if not chunk:
                raise Closed("the other end closed the connection")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)


def parse_record(payload: bytes) -> dict[str, Any]:
    try:
        value = json.loads(payload.decode("utf-8", "surrogateescape"))
    except ValueError as exc:
        raise ProtocolError(f"a record that is not JSON: {exc}") from None
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise ProtocolError("a record must be a JSON object with a 'type'")
    return value


def send_folder(conn: Connection, folder: str) -> None:
    """Stream a folder: one `entry` record per folder, file or link below
    it (files followed by their data frames), then `end`. Nothing is
    followed through a link; special files are skipped, named."""
    for current, dirs, files in os.walk(folder):
        dirs.sort()
        rel_dir = os.path.relpath(current, folder)
        for name in sorted(dirs) + sorted(files):
            path = os.path.join(current, name)
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            if rel == ".git" or rel.startswith(".git/"):
                continue
            _send_entry(conn, path, rel)
        dirs[:] = [name for name in dirs if not os.path.islink(os.path.join(current, name))
                   and not (rel_dir == "." and name == ".git")]
    conn.record({"type": "end"})


def send_file(conn: Connection, path: str) -> None:
    """Stream one file (the content of `path`, or stdin for '-')."""
    if path == "-":
        import sys

        payload = sys.stdin.buffer.read()
        conn.record({"type": "entry", "path": "-", "kind": "file", "mode": 0o644, "size": len(payload)})
        conn.data(payload)
    else:
        _send_entry(conn, path, os.path.basename(path) or "file")
    conn.record({"type": "end"})


def _send_entry(conn: Connection, path: str, rel: str) -> None:
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise UsageError(f"cannot send '{path}': {exc.strerror or exc}",
                         hint="the client sends what you can read; the service opens no path a caller names") from None
    if stat_module.S_ISDIR(info.st_mode):
        conn.record({"type": "entry", "path": rel, "kind": "dir", "mode": stat_module.S_IMODE(info.st_mode)})
    elif stat_module.S_ISLNK(info.st_mode):
        conn.record({"type": "entry", "path": rel, "kind": "link", "target": os.readlink(path)})
    elif stat_module.S_ISREG(info.st_mode):
        try:
            handle = open(path, "rb")
        except OSError as exc:
            raise UsageError(f"cannot send '{path}': {exc.strerror or exc}",
                             hint="the client sends what you can read; the service opens no path a caller "
                                  "names") from None
        with handle:
            size = os.fstat(handle.fileno()).st_size
            conn.record({"type": "entry", "path": rel, "kind": "file",
                         "mode": stat_module.S_IMODE(info.st_mode), "size": size})
            sent = 0
            while sent < size:
                chunk = handle.read(min(DATA_CAP, size - sent))
                if not chunk:
                    raise Refused(f"'{path}' shrank while it was being sent",
                                  hint="leave the folder alone while hills sends it")
                conn.data(chunk)
                sent += len(chunk)


class Upload:
    """The bounds one request's uploads share: bytes and entries, and the
    deadlines that bound how long it may take. The service's own upload
    (hills.service) adds the caller's share and the free-space floor
    through `admit` and `landed`."""

    def __init__(self, *, first_wait_s: float | None = None) -> None:
        self.bytes = 0
        self.entries = 0
        self.started = time.monotonic()
        # The first frame may be waited for longer (an admin's commit runs
        # the gate before its bundle comes).
        self.first_wait_s = first_wait_s

    def deadline(self) -> float:
        """When the next frame must have arrived whole."""
        now = time.monotonic()
        if self.first_wait_s is not None:
            wait, self.first_wait_s = self.first_wait_s, None
            self.started = now + wait
            return now + wait
        whole = self.started + UPLOAD_BASE_S + self.bytes / UPLOAD_RATE
        return min(now + FRAME_DEADLINE_S, whole)

    def admit(self, size: int) -> None:
        """Take a file of `size` bytes into the upload, or refuse it."""
        self.bytes += size
        if self.bytes > UPLOAD_CAP:
            raise ProtocolError(f"the upload is over the protocol's {UPLOAD_CAP}-byte bound")

    def landed(self, count: int) -> None:
        """`count` more bytes were written (the service checks its disk here)."""


def receive_into(conn: Connection, target: str, upload: Upload) -> None:
    """Write one streamed placeholder into the fresh folder `target`:
    relative paths only, no `..`, no link that leaves it, no special
    files, within the upload's bounds. Files are created, never opened
    through something already there."""
    os.mkdir(target, 0o700)
    links: set[str] = set()
    while True:
        entry = conn.receive_record(upload.deadline())
        if entry["type"] == "end":
            return
        if entry["type"] != "entry":
            raise ProtocolError(f"expected an entry or end record, got '{entry['type']}'")
        upload.entries += 1
        if upload.entries > ENTRIES_CAP:
            raise ProtocolError(f"the upload holds more than {ENTRIES_CAP} entries")
        rel = _checked_path(entry.get("path"))
        parts = rel.split("/")
        # Nothing is written through a link: a folder reached through one
        # could be anywhere the service may write.
        if any("/".join(parts[:count]) in links for count in range(1, len(parts))):
            raise ProtocolError(f"entry '{rel}' lies beneath a link of the upload")
        path = os.path.join(target, rel)
        kind = entry.get("kind")
        if kind == "dir":
            os.mkdir(path, 0o700)
        elif kind == "link":
            link = entry.get("target")
            # A link may only lead down from its folder: with `..` or `.`
            # in it, one link through another could lead out.
            if not isinstance(link, str) or not link or os.path.isabs(link) \
                    or any(part in ("", ".", "..") for part in link.split("/")):
                raise ProtocolError(f"the link '{rel}' leaves the folder it was sent in: a link through the "
                                    "service may only lead down from its own folder")
            os.symlink(link, path)
            links.add(rel)
        elif kind == "file":
            _receive_file(conn, path, rel, entry, upload)
        else:
            raise ProtocolError(f"entry '{rel}': unknown kind {kind!r}")


def _receive_file(conn: Connection, path: str, rel: str, entry: dict[str, Any], upload: Upload) -> None:
    size, mode = entry.get("size"), entry.get("mode", 0o644)
    if not isinstance(size, int) or size < 0 or not isinstance(mode, int):
        raise ProtocolError(f"entry '{rel}': size and mode must be non-negative integers")
    upload.admit(size)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as out:
        got = 0
        while got < size:
            kind, payload = conn.receive(upload.deadline())
            if kind != DATA or got + len(payload) > size:
                raise ProtocolError(f"entry '{rel}': its data frames do not add up to its size {size}")
            out.write(payload)
            got += len(payload)
            upload.landed(len(payload))
    os.chmod(path, (mode & 0o755) | 0o600)


def _checked_path(rel: object) -> str:
    if not isinstance(rel, str) or not rel or "\0" in rel:
        raise ProtocolError("an entry without a path")
    if rel == "-":
        return "stdin"
    parts = rel.split("/")
    if os.path.isabs(rel) or any(part in ("", ".", "..") for part in parts):
        raise ProtocolError(f"entry path '{rel}' is not a plain relative path")
    return rel


def frames(conn: Connection) -> Iterator[tuple[bytes, bytes]]:
    """The frames of a reply, until the other end closes."""
    while True:
        try:
            yield conn.receive()
        except Closed:
            return
