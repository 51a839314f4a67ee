"""Append-only JSONL logs whose lines are signed and chained (the attempts logs).

Line format (version 2). Each entry is one line of UTF-8 bytes:

    BODY minus its final "}"  +  ,"sig":"ed25519:<128 hex>"}  +  "\\n"

where BODY is the canonical JSON (see `hills.evidence.signing.canonical_json`: sorted
keys, separators "," and ":", UTF-8, finite numbers) of the caller's record
plus two fields the log owns:

    seq   0 for the first line, then +1 per line
    prev  the previous line's link, "" on the first line

sig is the Ed25519 signature of BODY by the machine's key, in lowercase
hex, and a line's link is `sha256:` + SHA-256 of the line's bytes without
its newline. So `sig` is always the last key of the line (the other keys
stay sorted), every line ends with the same 147-byte shape, and the
signature is checked on the line's own bytes with no re-encoding: BODY is
the line up to `,"sig":` followed by "}". Any JSON tool and the public key
(`hills key`) can check a line too.

Because each line holds the link of the one before, a line whose signature
holds vouches for every line linked before it: a check hashes each line
and verifies the signature of the last line of each linked run (and of
the head), not of every line, so a long log verifies at hashing speed.

A log from before Ed25519 holds version 1 lines, which end in
`,"mac":"hmac-sha256:<64 hex>"}` (HMAC-SHA256 of BODY with that machine's
old secret, kept as key.hmac) and whose link is that mac; version 2 lines
may follow them, chained on.

Beside the log, `<log>.head` holds the newest {seq, mac} (mac: the link)
signed with the machine key; it is how a cleanly cut tail is noticed.
`<log>.lock` is the flock every append holds.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import gc
import json
import os

from ..base.ed25519 import sha256
from ..base.errors import Refused, UsageError
from ..base.records import frozen
from .signing import canonical_json
from ..base.state import atomic_write, file_lock, write_problem

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any

    from .trust import Keys

SCHEME = "ed25519:"
LINK = "sha256:"
LEGACY_SCHEME = "hmac-sha256:"
RESERVED = ("seq", "prev", "mac", "sig")
SIG_MARK = b',"sig":"' + SCHEME.encode("ascii")
SIG_HEX = 128
# ,"sig":"ed25519:<hex>"}  (the newline is not counted)
SUFFIX_LEN = len(SIG_MARK) + SIG_HEX + 2
LEGACY_MARK = b',"mac":"' + LEGACY_SCHEME.encode("ascii")
LEGACY_HEX = 64
LEGACY_SUFFIX_LEN = len(LEGACY_MARK) + LEGACY_HEX + 2
_TAIL_CHUNK = 65536
# Past this many signatures to check, loading `cryptography` pays for itself.
_MANY = 8


class ChainReport:
    """The outcome of checking a log: `ok`, valid line `count`, `problems`, `break_line`."""

    __slots__ = ("ok", "count", "problems", "break_line", "lines", "last_seq", "last_mac")

    def __init__(self, ok: bool, count: int, problems: list[str], break_line: int | None, lines: int = 0,
                 last_seq: int | None = None, last_mac: str | None = None) -> None:
        self.ok = ok
        self.count = count
        self.problems = problems
        self.break_line = break_line
        self.lines = lines
        self.last_seq = last_seq
        self.last_mac = last_mac

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}

    def __repr__(self) -> str:
        return (f"ChainReport(ok={self.ok}, count={self.count}, "
                f"break_line={self.break_line}, problems={self.problems!r})")



def _check_record(record: object) -> None:
    if not isinstance(record, dict):
        raise UsageError("a log record must be a JSON object")
    for name in RESERVED:
        if name in record:
            raise UsageError(f"record field '{name}' is reserved by the log",
                             hint="rename the field; seq, prev, mac and sig are written by hills")


def link_of(line: bytes) -> str:
    """The link of a version 2 line (with or without its newline)."""
    return LINK + sha256(line[:-1] if line.endswith(b"\n") else line).hexdigest()


def encode_entry(record: dict[str, Any], seq: int, prev: str, keys: Keys) -> tuple[bytes, str]:
    """(line bytes with its newline, link) for `record` at `seq` after `prev`."""
    _check_record(record)
    body = canonical_json({**record, "seq": seq, "prev": prev})
    signature = keys.sign(body).hex()
    line = body[:-1] + SIG_MARK + signature.encode("ascii") + b'"}\n'
    return line, link_of(line)


def head_path(path: str | os.PathLike[str]) -> str:
    return os.fspath(path) + ".head"


def lock_path(path: str | os.PathLike[str]) -> str:
    return os.fspath(path) + ".lock"


def _head_body(seq: int, mac: str) -> bytes:
    # The body has no `prev`, so a head signature can never pass as a line's.
    return canonical_json({"mac": mac, "seq": seq})


def _sign_head(seq: int, mac: str, keys: Keys) -> str:
    return SCHEME + keys.sign(_head_body(seq, mac)).hex()


def _legacy_mac(secret: bytes, body: bytes) -> str:
    import hashlib
    import hmac

    return hmac.new(secret, body, hashlib.sha256).hexdigest()


def _head_signed(seq: int, mac: str, signature: str, keys: Keys) -> bool:
    scheme, _, given = signature.partition(":")
    if scheme + ":" == SCHEME:
        try:
            raw = bytes.fromhex(given)
        except ValueError:
            return False
        return keys.verify_local(_head_body(seq, mac), raw)
    if scheme + ":" == LEGACY_SCHEME and keys.legacy is not None:
        import hmac

        return hmac.compare_digest(_legacy_mac(keys.legacy, _head_body(seq, mac)).encode("ascii"),
                                   given.encode("utf-8", "replace"))
    return False


def _split(line: bytes) -> tuple[bytes, bytes] | None:
    """(body, sig hex bytes) when `line` has the version 2 suffix shape, else None."""
    if (len(line) <= SUFFIX_LEN or line[-2:] != b'"}' or line[:1] != b"{"
            or line[-SUFFIX_LEN:-SIG_HEX - 2] != SIG_MARK):
        return None
    return line[:-SUFFIX_LEN] + b"}", line[-SIG_HEX - 2:-2]


def _split_legacy(line: bytes) -> tuple[bytes, bytes] | None:
    """(body, mac hex bytes) when `line` has the version 1 suffix shape, else None."""
    if (len(line) <= LEGACY_SUFFIX_LEN or line[-2:] != b'"}' or line[:1] != b"{"
            or line[-LEGACY_SUFFIX_LEN:-LEGACY_HEX - 2] != LEGACY_MARK):
        return None
    return line[:-LEGACY_SUFFIX_LEN] + b"}", line[-LEGACY_HEX - 2:-2]


def _signed(body: bytes, signature_hex: bytes, keys: Keys) -> bool:
    try:
        raw = bytes.fromhex(signature_hex.decode("ascii"))
    except ValueError:
        return False
    return keys.verify_local(body, raw)


def _line_link(line: bytes) -> str | None:
    """The link of a line of either version, None when it has neither shape."""
    if _split(line) is not None:
        return link_of(line)
    parts = _split_legacy(line)
    return LEGACY_SCHEME + parts[1].decode("ascii") if parts is not None else None


def _fast_fields(body: bytes) -> tuple[int, str] | None:
    """(seq, prev) read straight from an authentic body, or None to parse it.

    Inside a JSON string every quote is escaped, so `"seq":` can only be a key
    (or follow an escaped quote); when each marker occurs exactly once it is
    the top-level field the writer put there.
    """
    if body.count(b'"seq":') != 1 or body.count(b'"prev":') != 1:
        return None
    start = body.find(b'"prev":"')
    if start < 0:
        return None
    start += 8
    end = body.find(b'"', start)
    prev = body[start:end]
    start = body.find(b'"seq":') + 6
    end = start
    while end < len(body) and 48 <= body[end] <= 57:
        end += 1
    if end == start or body[end:end + 1] not in (b",", b"}"):
        return None
    return int(body[start:end]), prev.decode("ascii", "replace")


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    return entry if isinstance(entry, dict) else None


def _entry_fields(entry: dict[str, Any]) -> tuple[int | None, str | None, str | None]:
    """(seq, prev, mac) of a parsed entry, None for each that is missing or malformed."""
    seq = entry.get("seq")
    if isinstance(seq, bool) or not isinstance(seq, int):
        seq = None
    prev = entry.get("prev")
    mac = entry.get("mac")
    return seq, prev if isinstance(prev, str) else None, mac if isinstance(mac, str) else None


def _read_head_file(path: str | os.PathLike[str], keys: Keys | None) -> tuple[dict[str, Any] | None, str | None]:
    """(head dict or None, problem or None) from `<path>.head`."""
    target = head_path(path)
    try:
        with open(target, "rb") as handle:
            raw = handle.read()
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"head file '{target}' cannot be read: {exc.strerror}"
    try:
        stored = json.loads(raw)
        seq, mac, signature = stored["seq"], stored["mac"], stored["signature"]
    except (ValueError, KeyError, TypeError):
        return None, f"head file '{target}' is damaged (not a JSON object with seq, mac and signature)"
    if isinstance(seq, bool) or not isinstance(seq, int) or not isinstance(mac, str):
        return None, f"head file '{target}' is damaged (seq or mac has the wrong type)"
    if keys is not None and not _head_signed(seq, mac, str(signature), keys):
        return None, f"head file '{target}' has an INVALID signature (edited, or written with another machine's key)"
    return {"seq": seq, "mac": mac}, None


def _read_all(path: str | os.PathLike[str], offset: int = 0) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            if offset:
                handle.seek(offset)
            return handle.read()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise UsageError(f"log '{os.fspath(path)}' is a folder, not a file")
    except OSError as exc:
        raise UsageError(f"cannot read log '{os.fspath(path)}': {exc.strerror}")


def _read_settled(path: str | os.PathLike[str], offset: int = 0) -> bytes | None:
    """The log's bytes from `offset`; if they end mid-line, re-read once under the append lock."""
    data = _read_all(path, offset)
    if data and not data.endswith(b"\n") and os.path.exists(lock_path(path)):
        # An append in flight may be half visible; its writer holds the lock.
        fd = os.open(lock_path(path), os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            data = _read_all(path, offset)
        finally:
            os.close(fd)
    return data


class _Scan:
    """Where a scan stands: the chain state the next line must continue."""

    __slots__ = ("count", "number", "expect_seq", "expect_prev", "last_seq", "last_mac",
                 "prev_line", "wanted", "links", "break_line", "forged_end", "entries")

    def __init__(self) -> None:
        self.count = 0            # lines that passed every check
        self.number = 0           # lines looked at so far
        self.expect_seq = 0
        self.expect_prev: str | None = ""     # None: after an edited line, whose link is unknown
        self.last_seq: int | None = None
        self.last_mac: str | None = None
        self.prev_line: int | None = None     # line number of the entry the chain continues from
        self.wanted: frozenset[int] = frozenset()  # the seqs the heads record
        self.links: dict[int, str] = {}       # the link of the entry with each wanted seq
        self.break_line: int | None = None
        self.forged_end = 0                   # offset up to which the lines are known forged
        # Each line parsed (its link as "mac"), while every line so far was
        # plainly intact; None when not asked for, or once one was not.
        self.entries: list[dict[str, Any]] | None = None


def _fast_scan(data: bytes, position: int, keys: Keys, scan: _Scan) -> tuple[int, bool]:
    """Check plainly intact version 2 lines from `position` on; returns
    (the offset where it stopped, whether to leave all the rest to the
    careful scan).

    One pass over the bytes: each line's shape, its seq and prev, and its
    SHA-256 link. A `"prev":` right after the opening brace and a
    `"seq":N` right before `,"sig":` can only be top-level keys; a line
    holding one marker of each holds them as top-level fields (see
    `_fast_fields`); any other line (an outcome names its started entry's
    seq too) is parsed, and its own top-level fields decide. Then the
    signature of the last line checked vouches for all of them; when it
    fails, the run is walked back to the last line whose own signature
    holds. Lines are parsed all the same when the scan collects entries.
    """
    start = position
    if keys.public is None:
        return start, True  # nothing to check a signature with: each line says so
    # OpenSSL's SHA-256 hashes a line faster than the builtin one, once
    # loaded (about 6 ms): worth it for a long log only.
    if len(data) - position > 1 << 20:
        from hashlib import sha256 as line_hash
    else:
        line_hash = sha256
    find = data.find
    rfind = data.rfind  # seq sorts late among keys: search from the end
    startswith = data.startswith
    view = memoryview(data)
    mark = SIG_MARK
    tail = SUFFIX_LEN
    size = len(data)
    seq = first_seq = scan.expect_seq
    expect_prev = None if scan.expect_prev is None else b'"prev":"' + scan.expect_prev.encode("ascii") + b'"'
    want_prev = scan.expect_prev  # the same as text, for a parsed line
    link = ""
    wanted, found_links = scan.wanted, {}
    collect: list[dict[str, Any]] | None = [] if scan.entries is not None else None
    last_start = -1
    while position < size:
        end = find(b"\n", position)
        cut = end - tail
        if cut <= position or not startswith(mark, cut) or not startswith(b'"}', end - 2):
            break
        loose = False
        if collect is None:  # else the parse below decides
            if expect_prev is None:
                found = find(b'"prev":"', position, cut)
            else:
                found = find(expect_prev, position, cut)
            if found < 0:
                break
            loose = found != position + 1
            marker = b'"seq":%d' % seq
            found = rfind(marker, position, cut)
            if found < 0 or data[found + len(marker)] not in b",}":
                break
            if found + len(marker) != cut or data[found - 1] != 44:  # not `,"seq":N,"sig"...`
                loose = True
        entry = None
        if collect is not None or (loose and (data.count(b'"prev":', position, cut) != 1
                                              or data.count(b'"seq":', position, cut) != 1)):
            try:
                # What json.loads does with bytes that open with `{"`, less its guess at the encoding.
                entry = json.loads(data[position:end].decode("utf-8", "surrogatepass"))
            except ValueError:
                break
            if not isinstance(entry, dict):
                break
            fields = _entry_fields(entry)
            if fields[0] != seq or fields[1] is None or (want_prev is not None and fields[1] != want_prev):
                break
        link = LINK + line_hash(view[position:end]).hexdigest()
        want_prev = link
        if collect is not None and entry is not None:
            entry["mac"] = link
            collect.append(entry)
        if seq in wanted:
            found_links[seq] = link
        expect_prev = b'"prev":"' + link.encode("ascii") + b'"'
        last_start = position
        seq += 1
        position = end + 1
    count = seq - first_seq
    if not count:
        return start, False
    last_parts = _split(data[last_start:position - 1])
    if last_parts is None or not _signed(last_parts[0], last_parts[1], keys):
        # Some line of the run was forged with its links made anew: keep
        # the run up to the last line whose own signature holds; the lines
        # after it are forged, one problem each (`_scan_rest`).
        kept = _last_signed(data, start, last_start, keys)
        scan.forged_end = position
        if kept == start:
            return start, False
        return _fast_scan(data[:kept], start, keys, scan)[0], False
    scan.count += count
    scan.number += count
    scan.expect_seq, scan.expect_prev = seq, link
    scan.last_seq, scan.last_mac, scan.prev_line = seq - 1, link, scan.number
    scan.links.update(found_links)
    if collect is not None and scan.entries is not None:
        scan.entries.extend(collect)
    return position, False


def _last_signed(data: bytes, start: int, last_start: int, keys: Keys) -> int:
    """The offset just past the last line between `start` and `last_start`
    (both line starts, the lines linked, the one at `last_start` not
    signed) whose own signature holds; `start` when none does. Within a
    linked run a line that holds vouches for all before it, so the lines
    that hold are a prefix: a binary search finds its end."""
    starts = [start]
    while starts[-1] < last_start:
        starts.append(data.index(b"\n", starts[-1]) + 1)

    def holds(index: int) -> bool:
        line = data[starts[index]:data.index(b"\n", starts[index])]
        parts = _split(line)
        return parts is not None and _signed(parts[0], parts[1], keys)

    if len(starts) > _MANY:
        from .trust import check_many

        check_many()
    low, high = -1, len(starts) - 1  # holds(low) (or low is -1), not holds(high)
    while high - low > 1:
        middle = (low + high) // 2
        if holds(middle):
            low = middle
        else:
            high = middle
    return start if low < 0 else data.index(b"\n", starts[low]) + 1


def _check_line(line: bytes, number: int,
                keys: Keys) -> tuple[list[str], str | None, tuple[int | None, str | None] | None]:
    """(problems, link, (seq, prev)) of one line on its own: its shape and its signature or mac."""
    parts = _split(line)
    if parts is not None:
        body, given = parts
        if keys.public is None:
            return [f"line {number}: signed with an Ed25519 key, and this machine has none to check it with"], \
                link_of(line), None
        if _signed(body, given, keys):
            fields: tuple[int | None, str | None] | None = _fast_fields(body)
            if fields is None:
                entry = _parse(line)
                fields = _entry_fields(entry)[:2] if entry is not None else (None, None)
            return [], link_of(line), fields
        entry = _parse(line)
        if entry is None:
            return [f"line {number}: not valid JSON"], None, None
        return [f"line {number}: signature does not match its content (edited)"], None, None
    legacy = _split_legacy(line)
    if legacy is not None:
        body, given = legacy
        mac = LEGACY_SCHEME + given.decode("ascii")
        entry = _parse(line)
        if entry is None:
            return [f"line {number}: not valid JSON"], None, None
        seq, prev, _ = _entry_fields(entry)
        if keys.legacy is None:
            return [f"line {number}: its mac was made with an old HMAC secret this machine does not have "
                    "(key.hmac)"], mac, (seq, prev)
        import hmac

        if hmac.compare_digest(_legacy_mac(keys.legacy, body).encode("ascii"), given):
            return [], mac, (seq, prev)
        return [f"line {number}: mac does not match its content (edited)"], mac, (seq, prev)
    entry = _parse(line)
    if not line.strip():
        return [f"line {number}: empty line"], None, None
    if entry is None:
        return [f"line {number}: not valid JSON"], None, None
    seq, prev, _ = _entry_fields(entry)
    if "sig" not in entry and "mac" not in entry:
        return [f"line {number}: no signature (not written by a hills log)"], None, None
    return [f"line {number}: signature is not in the form hills writes (edited)"], None, (seq, prev)


def _careful_scan(lines: list[bytes], truncated: bool, keys: Keys, scan: _Scan) -> list[str]:
    """Check line by line from where `scan` stands, describing every problem."""
    problems = []
    scan.entries = None  # parsed by `read`, which says what each odd line is
    if len(lines) > _MANY:
        from .trust import check_many

        check_many()
    for index, line in enumerate(lines):
        number = scan.number + 1
        scan.number = number
        if truncated and index == len(lines) - 1:
            problems.append(f"line {number}: truncated (no newline at end of file)")
            scan.break_line = scan.break_line or number
            break
        found, mac, fields = _check_line(line, number, keys)
        edited = bool(found) and mac is None and fields is None and "edited" in found[0]
        if fields is not None:
            seq, prev = fields
            if seq is None or prev is None:
                found.append(f"line {number}: missing or malformed seq or prev")
            else:
                if seq != scan.expect_seq:
                    if scan.last_seq is None:
                        found.append(f"line {number}: seq {seq} where the log should start at seq 0 "
                                     "(lines were deleted or moved)")
                    elif seq > scan.expect_seq:
                        found.append(f"line {number}: seq {seq} follows seq {scan.last_seq} "
                                     "(a line was deleted or moved)")
                    else:
                        found.append(f"line {number}: seq {seq} follows seq {scan.last_seq} "
                                     "(a line was moved or repeated)")
                if scan.expect_prev is not None and prev != scan.expect_prev:
                    if scan.prev_line:
                        found.append(f"line {number}: prev does not match the link of line {scan.prev_line} "
                                     "(the chain is broken here)")
                    else:
                        found.append(f"line {number}: prev is not empty on the first entry "
                                     "(the lines before it were deleted)")
                # Continue from this line so one damaged spot is reported once.
                scan.last_seq, scan.last_mac, scan.prev_line = seq, mac, number
                scan.expect_seq, scan.expect_prev = seq + 1, mac
                if seq in scan.wanted and mac is not None:
                    scan.links[seq] = mac
        elif edited:
            # Its own link is unknown: the next line may hold any prev; seq goes on.
            scan.last_seq = scan.expect_seq
            scan.expect_seq += 1
            scan.expect_prev, scan.prev_line = None, number
        if found:
            problems.extend(found)
            if scan.break_line is None:
                scan.break_line = number
        else:
            scan.count += 1
    return problems


def verify(path: str | os.PathLike[str], keys: Keys, head: dict[str, Any] | None = None) -> ChainReport:
    """Check every line of the log at `path`; a ChainReport says where it breaks.

    `head` ({seq, mac}, e.g. a copy kept elsewhere) is checked against the
    log; without it the `.head` file beside the log is used when present. A
    missing log is an empty chain. For a cut tail, `break_line` is the line
    where the first missing entry should be.
    """
    head_problem = None
    if head is None:
        head, head_problem = _read_head_file(path, keys)
    else:
        _check_head_shape(head)
    data = _read_settled(path) or b""  # after the head: a head is never newer than the log
    scan = _Scan()
    scan.wanted = frozenset([head["seq"]] if head is not None else [])
    problems = _scan_rest(data, 0, keys, scan)
    problems.extend(_against_head(head, head_problem, scan, problems))
    return _chain_report(scan, problems)


def _check_head_shape(head: object) -> None:
    if (not isinstance(head, dict) or isinstance(head.get("seq"), bool)
            or not isinstance(head.get("seq"), int) or not isinstance(head.get("mac"), str)):
        raise UsageError("a chain head must be an object with an integer seq and a string mac")


@frozen
class Walk:
    """A log checked and read in one pass: its report (against its `.head`
    file), the problems against a second head kept elsewhere (`also`), and
    every line parsed (as `read` gives them)."""

    report: ChainReport
    also: list[str]
    entries: list[dict[str, Any]]


def walk(path: str | os.PathLike[str], keys: Keys, also: dict[str, Any] | None = None) -> Walk:
    """`verify` and `read` of the log at `path` in one pass, each line hashed
    and parsed once and one signature checked per linked run: the report
    checks the log against its `.head` file, and `also` ({seq, mac}, the
    head the hill's notes record) against the same scan. The break line
    is the earlier of the two."""
    if also is not None:
        _check_head_shape(also)
    with _parsing():
        return _walk(path, keys, also)


@contextlib.contextmanager
def _parsing() -> Iterator[None]:
    """No cyclic garbage collection while a log is parsed: otherwise each
    full collection walks every entry read so far, and reading 10,000
    reports costs as N². (Nothing is frozen here: this runs inside
    hills.api callers' processes too; the commands settle that themselves.)"""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _walk(path: str | os.PathLike[str], keys: Keys, also: dict[str, Any] | None) -> Walk:
    head, head_problem = _read_head_file(path, keys)
    data = _read_settled(path) or b""
    scan = _Scan()
    scan.wanted = frozenset(h["seq"] for h in (head, also) if h is not None)
    scan.entries = []
    problems = _scan_rest(data, 0, keys, scan)
    lines = list(problems)
    problems.extend(_against_head(head, head_problem, scan, problems))
    # Against the second head as if it were the only one (`verify` with it):
    # its own problems, the break where that check would put it.
    own_break = scan.break_line
    scan.break_line = None if not lines else own_break
    found = _against_head(also, None, scan, lines) if also is not None else []
    if own_break is not None and (scan.break_line is None or own_break < scan.break_line):
        scan.break_line = own_break
    report = _chain_report(scan, problems)
    # Every line parsed in the scan, or (a damaged log) by `read`, which says what each odd line is.
    entries = scan.entries if scan.entries is not None and len(scan.entries) == scan.number else read(path)
    return Walk(report, [problem for problem in found if problem not in problems], entries)


def _scan_rest(data: bytes, position: int, keys: Keys, scan: _Scan) -> list[str]:
    """The problems of the lines from `position` on: plainly intact runs by
    the fast scan, each line that is not by the careful one."""
    problems: list[str] = []
    while position < len(data):
        if position < scan.forged_end:
            position = _forged_line(data, position, scan, problems)
            continue
        position, careful_rest = _fast_scan(data, position, keys, scan)
        if position < scan.forged_end:
            continue
        if position >= len(data):
            break
        end = data.find(b"\n", position)
        if careful_rest or end < 0:
            lines = data[position:].split(b"\n")
            truncated = lines[-1] != b""
            if not truncated:
                lines.pop()
            problems.extend(_careful_scan(lines, truncated, keys, scan))
            break
        problems.extend(_careful_scan([data[position:end]], False, keys, scan))
        position = end + 1
    return problems


def _forged_line(data: bytes, position: int, scan: _Scan, problems: list[str]) -> int:
    """Report the line at `position`, one the fast scan found linked but
    not signed; returns where the next line starts."""
    number = scan.number = scan.number + 1
    scan.entries = None  # parsed by `read`, as in the careful scan
    problems.append(f"line {number}: signature does not match its content (edited)")
    scan.break_line = scan.break_line or number
    # Its seq was checked; its own link is not to be trusted.
    scan.last_seq, scan.expect_seq = scan.expect_seq, scan.expect_seq + 1
    scan.expect_prev, scan.prev_line = None, number
    return data.index(b"\n", position) + 1


def _chain_report(scan: _Scan, problems: list[str]) -> ChainReport:
    return ChainReport(not problems, scan.count, problems, scan.break_line,
                       scan.number, scan.last_seq, scan.last_mac)


def _against_head(head: dict | None, head_problem: str | None, scan: _Scan, problems: list[str]) -> list[str]:
    """The problems of a scanned log against its head (`problems`: those
    found so far, which also decide where the break is reported)."""
    found = [head_problem] if head_problem else []
    if head is not None:
        head_seq = head["seq"]
        last_seq = scan.last_seq
        ended = "the log has no entries" if last_seq is None else f"the log ends at seq {last_seq}"
        if last_seq is None or head_seq > last_seq:
            missing = head_seq - (last_seq if last_seq is not None else -1)
            found.append(f"{ended} but its head records seq {head_seq}: "
                         f"{missing} line(s) missing at the end")
        elif head_seq not in scan.links:
            found.append(f"the head records seq {head_seq} but no line carries it (the log was rewritten)")
        elif scan.links[head_seq] != head["mac"]:
            found.append(f"the entry with seq {head_seq} does not match the head's mac "
                         "(the log was rewritten)")
        if (problems or found) and scan.break_line is None:
            scan.break_line = scan.number + 1
    return found


@frozen
class Resumed:
    """A check of the lines of a log past a mark: its report, those lines
    parsed, and the mark of the last of them ({seq, mac, end})."""

    report: ChainReport
    entries: list[dict]
    mark: dict | None


def _line_ending_at(path: str | os.PathLike, end: int) -> bytes | None:
    """The line of the log whose newline is the byte before `end`, or None."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        chunk = _TAIL_CHUNK
        while True:
            start = max(0, end - chunk)
            data = os.pread(fd, end - start, start)
            if len(data) != end - start or not data.endswith(b"\n"):
                return None
            cut = data.rfind(b"\n", 0, len(data) - 1)
            if cut >= 0:
                return data[cut + 1:-1]
            if start == 0:
                return data[:-1]
            chunk *= 4
    finally:
        os.close(fd)


def verify_from(path: str | os.PathLike, keys: Keys, mark: dict | None = None) -> Resumed | None:
    """Check the log at `path` past `mark` ({seq, mac, end}: the entry with
    that seq and link, whose line ends at byte `end`) as `verify` checks it
    all, the head included; with no mark, from its first line. None when
    the mark's entry is not where it says (the log was cut or rewritten
    before it). The lines before the mark are not read."""
    head, head_problem = _read_head_file(path, keys)
    scan = _Scan()
    scan.wanted = frozenset([head["seq"]] if head is not None else [])
    if mark is None:
        base = 0
        data = _read_settled(path) or b""  # after the head: a head is never newer than the log
    else:
        base = mark["end"]
        marked = _line_ending_at(path, base) if base > 0 else None
        if marked is None or _line_link(marked) != mark["mac"]:
            return None
        data = _read_settled(path, base) or b""
        # The chain goes on from the mark's entry, line seq + 1 of an intact log.
        scan.number = scan.prev_line = mark["seq"] + 1
        scan.expect_seq, scan.expect_prev = mark["seq"] + 1, mark["mac"]
        scan.last_seq, scan.last_mac = mark["seq"], mark["mac"]
        scan.links[mark["seq"]] = mark["mac"]
    problems = _scan_rest(data, 0, keys, scan)
    problems.extend(_against_head(head, head_problem, scan, problems))
    report = _chain_report(scan, problems)
    entries = [_with_link(line) for line in data.split(b"\n")[:-1]] if report.ok else []
    last = {"seq": scan.last_seq, "mac": scan.last_mac, "end": base + len(data)} \
        if report.ok and scan.last_seq is not None else mark
    return Resumed(report, entries, last)


def _with_link(line: bytes) -> dict[str, Any]:
    entry = json.loads(line)
    if isinstance(entry, dict) and "sig" in entry:
        entry["mac"] = link_of(line)
    return entry


def tally(path: str | os.PathLike, keys: Keys, counter_path: str, counts: Callable[[dict], bool]) -> int:
    """How many entries of the log at `path` `counts`, reading only the lines
    after the ones counted last time: a sealed counter at `counter_path`
    holds {seq, mac, end, count} of the last line counted. A counter that
    is missing or edited counts the whole log again, to the same number.
    Raises Refused, naming the problem, when the lines read do not verify
    or the log no longer holds the counted entry (cut, emptied, rewritten),
    so a log cut short never lowers the count."""
    from ..base.state import sealed_read, sealed_write

    kept = sealed_read(counter_path)
    if not (isinstance(kept, dict) and kept.get("version") == 1
            and all(isinstance(kept.get(name), int) and not isinstance(kept.get(name), bool)
                    for name in ("seq", "end", "count"))
            and isinstance(kept.get("mac"), str) and kept["mac"].isascii()):
        kept = None
    if not os.path.exists(path):
        if kept is not None:
            raise Refused(f"the log is missing, but a count of {kept['count']} was taken from it "
                          f"up to seq {kept['seq']}")
        return 0
    mark = {name: kept[name] for name in ("seq", "mac", "end")} if kept is not None else None
    resumed = verify_from(path, keys, mark)
    if resumed is None:
        # Only a mark can be missed: the log no longer holds the entry counted up to.
        whole = verify(path, keys)
        counted_up_to = mark["seq"] if mark is not None else None
        raise Refused(whole.problems[0] if not whole.ok else
                      f"the entry with seq {counted_up_to} that was counted up to is gone "
                      "(the log was cut or rewritten)")
    if not resumed.report.ok:
        raise Refused(resumed.report.problems[0])
    total = (kept["count"] if kept is not None else 0) + sum(1 for entry in resumed.entries if counts(entry))
    if resumed.mark is not None and resumed.mark != mark:
        try:
            sealed_write(counter_path, {"version": 1, "count": total, **resumed.mark})
        except OSError:
            pass  # a counter that cannot be written costs a longer read next time, never a wrong count
    return total


def read(path: str | os.PathLike[str], keys: Keys | None = None, last: int | None = None) -> list[dict[str, Any]]:
    """Every line of the log, parsed, in file order; nothing is skipped.
    Each version 2 entry also carries its link as "mac" (what the next
    line's prev holds).

    A line that is not a JSON object comes back as {"_line": n, "_error": text}.
    With `keys`, every entry whose line fails a check of `verify` also carries
    "_problem" (the first problem found on it). `last=N` parses only the
    final N lines (the check, with keys, still covers the whole log).
    """
    data = _read_settled(path)
    if not data:
        return []
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    first = 0 if last is None else max(0, len(lines) - last)
    flagged: dict[int, str] = {}
    if keys is not None:
        report = verify(path, keys)
        for problem in report.problems:
            if problem.startswith("line "):
                number = int(problem[5:problem.index(":")])
                flagged.setdefault(number, problem)
    entries = []
    for index in range(first, len(lines)):
        line = lines[index]
        number = index + 1
        entry = _parse(line)
        if entry is None:
            text = "empty line" if not line.strip() else "not valid JSON"
            entry = {"_line": number, "_error": text}
        elif "sig" in entry and _split(line) is not None:
            entry["mac"] = link_of(line)
        if number in flagged:
            entry["_problem"] = flagged[number]
        entries.append(entry)
    return entries


def _tail(fd: int, size: int, lines_wanted: int) -> tuple[bytes, int]:
    """The last bytes of the file holding at least `lines_wanted` newlines (or all of it)."""
    chunk = _TAIL_CHUNK
    while True:
        start = max(0, size - chunk)
        data = os.pread(fd, size - start, start)
        # One more newline than lines wanted marks where the earliest one begins.
        if start == 0 or data.count(b"\n", 0, len(data) - 1) >= lines_wanted:
            return data, start
        chunk *= 4


def _complete_lines(data: bytes, start: int) -> list[bytes]:
    """The complete lines in a tail read (the first piece may be partial)."""
    pieces = data.split(b"\n")
    pieces.pop()  # after the final newline (or a partial last line)
    if start > 0:
        pieces = pieces[1:]
    return pieces


def head(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """{seq, mac} (mac: the link) of the last well-formed line of the log, or None.

    Reads only the end of the file. Without the key this is not a proof: use
    `verify` for that.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        size = os.fstat(fd).st_size
        wanted = 1
        while size:
            data, start = _tail(fd, size, wanted)
            for line in reversed(_complete_lines(data, start)):
                entry = _parse(line)
                link = _line_link(line)
                if entry is not None and link is not None:
                    seq = _entry_fields(entry)[0]
                    if seq is not None:
                        return {"seq": seq, "mac": link}
            if start == 0:
                break
            wanted *= 8
        return None
    finally:
        os.close(fd)


def _line_count(fd: int) -> int:
    size = os.fstat(fd).st_size
    return os.pread(fd, size, 0).count(b"\n") if size else 0


def _last_entry(fd: int, path: str, keys: Keys | None) -> tuple[int, str, str] | None:
    """(seq, link, prev) of the last line after checking it (its signature
    too, given `keys`), or None for an empty log."""
    size = os.fstat(fd).st_size
    if size == 0:
        return None
    shown = os.fspath(path)
    hint = f"run 'hills-chain verify {shown}' to see where the log breaks"
    if os.pread(fd, 1, size - 1) != b"\n":
        number = _line_count(fd) + 1
        raise Refused(f"log '{shown}' line {number}: truncated (no newline at end of file); "
                      "refusing to extend a broken chain", hint=hint)
    data, start = _tail(fd, size, 1)
    line = _complete_lines(data, start)[-1]
    if keys is not None:
        problems, link, fields = _check_line(line, 0, keys)
    else:
        entry = _parse(line)
        link = _line_link(line)
        problems, fields = [], _entry_fields(entry)[:2] if entry is not None else None
    if not problems and link is not None and fields is not None:
        seq, prev = fields
        if seq is not None and prev is not None:
            return seq, link, prev
    number = _line_count(fd)
    raise Refused(f"log '{shown}' line {number}: the last line does not carry a valid signature "
                  "(edited, damaged, or written with another machine's key); "
                  "refusing to extend a broken chain", hint=hint)


def _check_against_head(path: str, last: tuple[int, str, str] | None, keys: Keys | None) -> None:
    stored, problem = _read_head_file(path, keys)
    shown = os.fspath(path)
    hint = f"run 'hills-chain verify {shown}' for details"
    if problem:
        raise Refused(problem + "; refusing to extend the log", hint=hint)
    if stored is None:
        return
    if last is None:
        raise Refused(f"log '{shown}' has no entries but its head records seq {stored['seq']}: "
                      "the log was deleted or emptied",
                      hint=f"restore the log, or remove '{head_path(path)}' too to start a fresh chain")
    seq, mac, prev = last
    if stored["seq"] == seq and stored["mac"] == mac:
        return
    if stored["seq"] == seq - 1 and stored["mac"] == prev:
        return  # the last append stopped between its line and its head
    if stored["seq"] > seq:
        raise Refused(f"log '{shown}' ends at seq {seq} but its head records seq {stored['seq']}: "
                      f"{stored['seq'] - seq} line(s) missing at the end", hint=hint)
    raise Refused(f"log '{shown}' does not match its head (seq {stored['seq']}): the log was rewritten",
                  hint=hint)


def check_appendable(path: str | os.PathLike[str], keys: Keys) -> None:
    """Raise Refused, as `append` would, when the log's tail is broken: a
    caller about to do expensive work checks first, so that work is not
    lost for want of a place to record it. The signatures of the last line
    and the head are left to `append`, under its lock: checking them here
    would put an Ed25519 check before the evaluator starts, for the rare
    log someone edited."""
    path = os.fspath(path)
    if not os.path.exists(path):
        return
    # Under the appenders' lock: read between another eval's line and its
    # head, the tail and the head would seem not to match.
    with file_lock(lock_path(os.path.abspath(path))):
        fd = os.open(path, os.O_RDONLY)
        try:
            last = _last_entry(fd, path, None)
            try:
                _check_against_head(path, last, None)
            except Refused:
                # Say which line was edited, when one was: the signatures tell.
                _check_against_head(path, _last_entry(fd, path, keys), keys)
                raise
        finally:
            os.close(fd)


def append(path: str | os.PathLike[str], record: dict[str, Any], keys: Keys) -> dict[str, Any]:
    """Append `record` as the next entry of the log at `path`; returns the
    entry written, its link as "mac"."""
    _check_record(record)
    path = os.fspath(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with file_lock(lock_path(os.path.abspath(path))):
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            last = _last_entry(fd, path, keys)
            _check_against_head(path, last, keys)
            seq = 0 if last is None else last[0] + 1
            prev = "" if last is None else last[1]
            line, link = encode_entry(record, seq, prev, keys)
            head_record = {"mac": link, "seq": seq, "signature": _sign_head(seq, link, keys)}
            _append_whole(fd, path, line, canonical_json(head_record) + b"\n")
        finally:
            os.close(fd)
    sig = line[-SIG_HEX - 3:-3].decode("ascii")
    return {**record, "seq": seq, "prev": prev, "sig": SCHEME + sig, "mac": link}


def _append_whole(fd: int, path: str, line: bytes, head_text: bytes) -> None:
    """Write `line` at the end of the log and then its head, all or nothing
    (the caller holds the lock): a disk that fills up midway leaves the log
    as it was, never half a line for the next writer to build on."""
    size = os.fstat(fd).st_size
    try:
        written = 0
        while written < len(line):
            count = os.write(fd, line[written:])
            if count == 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            written += count
        os.fsync(fd)
        atomic_write(head_path(path), head_text)
    except OSError as exc:
        os.ftruncate(fd, size)
        problem = write_problem(exc if exc.filename else OSError(exc.errno, exc.strerror, path))
        if problem is None:
            raise
        raise problem from exc

