"""Append-only JSONL logs whose lines are chained by HMAC (the attempts logs).

Line format (version 1). Each entry is one line of UTF-8 bytes:

    BODY minus its final "}"  +  ,"mac":"hmac-sha256:<64 hex>"}  +  "\\n"

where BODY is the canonical JSON (see `hills.signing.canonical_json`: sorted
keys, separators "," and ":", UTF-8, finite numbers) of the caller's record
plus two fields the log owns:

    seq   0 for the first line, then +1 per line
    prev  the previous line's mac, "" on the first line

and mac is `hmac-sha256:` + HMAC-SHA256(machine key, BODY) in lowercase hex.
So `mac` is always the last key of the line (the other keys stay sorted),
every line ends with the same 87-byte shape, and the MAC is checked on the
line's own bytes with no re-encoding: BODY is the line up to `,"mac":`
followed by "}". Parsing a line, dropping `mac` and re-encoding it
canonically gives BODY again, so any JSON tool can check a line too.

Beside the log, `<log>.head` holds the newest {seq, mac}, signed with the
machine key; it is how a cleanly cut tail is noticed. `<log>.lock` is the
flock every append holds.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os

from .digests import compare_digest, hmac_sha256
from .errors import Refused, UsageError
from .records import frozen
from .signing import canonical_json
from .state import atomic_write, file_lock, write_problem

TYPE_CHECKING = False
if TYPE_CHECKING:
    import hashlib
    from collections.abc import Callable
    from typing import Any

SCHEME = "hmac-sha256:"
RESERVED = ("seq", "prev", "mac")
MAC_MARK = b',"mac":"' + SCHEME.encode("ascii")
HEX_LEN = 64
# ,"mac":"hmac-sha256:<hex>"}  (the newline is not counted)
SUFFIX_LEN = len(MAC_MARK) + HEX_LEN + 2
_TAIL_CHUNK = 65536


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
                             hint="rename the field; seq, prev and mac are written by hills")


def encode_entry(record: dict[str, Any], seq: int, prev: str, key: bytes) -> tuple[bytes, str]:
    """(line bytes with its newline, mac) for `record` at `seq` after `prev`."""
    _check_record(record)
    body = canonical_json({**record, "seq": seq, "prev": prev})
    mac = SCHEME + hmac_sha256(key, body)
    line = body[:-1] + b',"mac":"' + mac.encode("ascii") + b'"}\n'
    return line, mac


def head_path(path: str | os.PathLike[str]) -> str:
    return os.fspath(path) + ".head"


def lock_path(path: str | os.PathLike[str]) -> str:
    return os.fspath(path) + ".lock"


def _sign_head(seq: int, mac: str, key: bytes) -> str:
    # The body has no `prev`, so a head signature can never pass as a line mac.
    return SCHEME + hmac_sha256(key, canonical_json({"mac": mac, "seq": seq}))


def _split(line: bytes) -> tuple[bytes, bytes] | None:
    """(body, mac hex bytes) when `line` has the mac suffix shape, else None."""
    if (len(line) <= SUFFIX_LEN or line[-2:] != b'"}' or line[:1] != b"{"
            or line[-SUFFIX_LEN:-HEX_LEN - 2] != MAC_MARK):
        return None
    return line[:-SUFFIX_LEN] + b"}", line[-HEX_LEN - 2:-2]


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


def _read_head_file(path: str | os.PathLike[str], key: bytes | None) -> tuple[dict[str, Any] | None, str | None]:
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
    if key is not None and not compare_digest(
            _sign_head(seq, mac, key).encode("ascii"), str(signature).encode("utf-8", "replace")):
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


def _hmac_pads(key: bytes) -> tuple[Callable[[], hashlib._Hash], Callable[[], hashlib._Hash]]:
    """Copy-makers for the inner and outer SHA-256 states of HMAC (RFC 2104).

    hmac.HMAC.copy() builds a Python object per call; copying two bare hash
    states verifies a 100,000-line log about twice as fast, same result.
    A long log is read through OpenSSL's SHA-256 (hashlib), which hashes a
    line faster than the builtin one of `digests` once it is loaded.
    """
    import hashlib

    if len(key) > 64:
        key = hashlib.sha256(key).digest()
    key = key.ljust(64, b"\0")
    inner = hashlib.sha256(key.translate(bytes(byte ^ 0x36 for byte in range(256))))
    outer = hashlib.sha256(key.translate(bytes(byte ^ 0x5C for byte in range(256))))
    return inner.copy, outer.copy


class _Scan:
    """Where a scan stands: the chain state the next line must continue."""

    __slots__ = ("count", "number", "expect_seq", "expect_prev", "last_seq", "last_mac",
                 "prev_line", "head_mac", "break_line")

    def __init__(self) -> None:
        self.count = 0            # lines that passed every check
        self.number = 0           # lines looked at so far
        self.expect_seq = 0
        self.expect_prev: str | None = ""
        self.last_seq: int | None = None
        self.last_mac: str | None = None
        self.prev_line: int | None = None     # line number of the entry the chain continues from
        self.head_mac: str | None = None      # mac of the entry whose seq the head records
        self.break_line: int | None = None


def _fast_scan(data: bytes, key: bytes, head_seq: int | None, scan: _Scan) -> int:
    """Check intact lines from the start; returns the offset where it stopped.

    One pass over the bytes with no copies and no JSON parsing. prev and seq
    are found by substring. A `"prev":` right after the opening brace and a
    `"seq":N` right before `,"mac":` can only be top-level keys (the usual
    case: an attempts line is {"prev", "report", "seq"}); anywhere else,
    counting the markers in the checked part proves each line holds exactly
    one of each, so the ones found are the top-level fields (see
    `_fast_fields`). The first line that is not plainly intact stops the scan
    and the careful scan takes over from there.
    """
    inner, outer = _hmac_pads(key)
    compare = compare_digest
    view = memoryview(data)
    find = data.find
    rfind = data.rfind  # seq sorts late among keys: search from the end
    startswith = data.startswith
    close = b"}"
    mark = MAC_MARK
    tail = SUFFIX_LEN
    size = len(data)
    position = 0
    seq = 0
    expect_prev = b'"prev":""'
    given = b""
    head_mac = None
    loose = False  # a marker was found away from where only a top-level key can be
    while position < size:
        end = find(b"\n", position)
        cut = end - tail
        if cut <= position or not startswith(mark, cut) or not startswith(b'"}', end - 2):
            break
        digest = inner()
        digest.update(view[position:cut])
        digest.update(close)
        sealed = outer()
        sealed.update(digest.digest())
        mac_hex = data[end - HEX_LEN - 2:end - 2]
        if not compare(sealed.hexdigest().encode("ascii"), mac_hex):
            break
        found = find(expect_prev, position, cut)
        if found < 0:
            break
        if found != position + 1:
            loose = True
        marker = b'"seq":%d' % seq
        found = rfind(marker, position, cut)
        if found < 0 or data[found + len(marker)] not in b",}":
            break
        if found + len(marker) != cut or data[found - 1] != 44:  # not `,"seq":N,"mac"...`
            loose = True
        given = mac_hex
        if seq == head_seq:
            head_mac = given
        expect_prev = b'"prev":"' + mark[8:] + given + b'"'
        seq += 1
        position = end + 1
    if seq and loose and (data.count(b'"prev":', 0, position) != seq
                          or data.count(b'"seq":', 0, position) != seq):
        return 0  # a marker appears twice somewhere: let the careful scan decide
    if seq:
        mac = SCHEME + given.decode("ascii")
        scan.count = scan.number = seq
        scan.expect_seq, scan.expect_prev = seq, mac
        scan.last_seq, scan.last_mac, scan.prev_line = seq - 1, mac, seq
        if head_mac is not None:
            scan.head_mac = SCHEME + head_mac.decode("ascii")
    return position


def _careful_scan(lines: list[bytes], truncated: bool, key: bytes, head_seq: int | None, scan: _Scan) -> list[str]:
    """Check line by line from where `scan` stands, describing every problem."""
    inner, outer = _hmac_pads(key)
    compare = compare_digest
    problems = []
    for index, line in enumerate(lines):
        number = scan.number + 1
        scan.number = number
        found = []
        if truncated and index == len(lines) - 1:
            problems.append(f"line {number}: truncated (no newline at end of file)")
            scan.break_line = scan.break_line or number
            break
        parts = _split(line)
        fields: tuple[int | None, str | None] | None = None
        mac = None
        if parts is not None:
            body, given = parts
            digest = inner()
            digest.update(body)
            sealed = outer()
            sealed.update(digest.digest())
            if compare(sealed.hexdigest().encode("ascii"), given):
                mac = SCHEME + given.decode("ascii")
                fields = _fast_fields(body)
                if fields is None:
                    entry = _parse(line)
                    fields = _entry_fields(entry)[:2] if entry is not None else (None, None)
            else:
                entry = _parse(line)
                if entry is None:
                    found.append(f"line {number}: not valid JSON")
                else:
                    found.append(f"line {number}: mac does not match its content (edited)")
                    seq, prev, mac = _entry_fields(entry)
                    fields = (seq, prev)
        else:
            entry = _parse(line)
            if not line.strip():
                found.append(f"line {number}: empty line")
            elif entry is None:
                found.append(f"line {number}: not valid JSON")
            else:
                seq, prev, mac = _entry_fields(entry)
                if mac is None:
                    found.append(f"line {number}: no mac (not written by a hills log)")
                else:
                    found.append(f"line {number}: mac is not in the form hills writes (edited)")
                    fields = (seq, prev)

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
                if prev != scan.expect_prev:
                    if scan.prev_line:
                        found.append(f"line {number}: prev does not match the mac of line {scan.prev_line} "
                                     "(the chain is broken here)")
                    else:
                        found.append(f"line {number}: prev is not empty on the first entry "
                                     "(the lines before it were deleted)")
                # Continue from this line so one damaged spot is reported once.
                scan.last_seq, scan.last_mac, scan.prev_line = seq, mac, number
                scan.expect_seq, scan.expect_prev = seq + 1, mac
                if seq == head_seq:
                    scan.head_mac = mac
        if found:
            problems.extend(found)
            if scan.break_line is None:
                scan.break_line = number
        else:
            scan.count += 1
    return problems


def verify(path: str | os.PathLike[str], key: bytes, head: dict[str, Any] | None = None) -> ChainReport:
    """Check every line of the log at `path`; a ChainReport says where it breaks.

    `head` ({seq, mac}, e.g. a copy kept elsewhere) is checked against the
    log; without it the `.head` file beside the log is used when present. A
    missing log is an empty chain. For a cut tail, `break_line` is the line
    where the first missing entry should be.
    """
    problems = []
    head_problem = None
    if head is None:
        head, head_problem = _read_head_file(path, key)
    elif (not isinstance(head, dict) or isinstance(head.get("seq"), bool)
          or not isinstance(head.get("seq"), int) or not isinstance(head.get("mac"), str)):
        raise UsageError("a chain head must be an object with an integer seq and a string mac")
    head_seq = head["seq"] if head is not None else None
    data = _read_settled(path) or b""  # after the head: a head is never newer than the log

    scan = _Scan()
    position = _fast_scan(data, key, head_seq, scan) if data else 0
    problems.extend(_scan_rest(data, position, key, head_seq, scan))
    problems.extend(_against_head(head, head_problem, scan, problems))
    return _chain_report(scan, problems)


def _scan_rest(data: bytes, position: int, key: bytes, head_seq: int | None, scan: _Scan) -> list[str]:
    """The problems of the lines from `position` on, checked one by one
    (past where the fast scan stopped)."""
    if position >= len(data):
        return []
    lines = data[position:].split(b"\n")
    truncated = lines[-1] != b""
    if not truncated:
        lines.pop()
    return _careful_scan(lines, truncated, key, head_seq, scan)


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
        elif scan.head_mac is None:
            found.append(f"the head records seq {head_seq} but no line carries it (the log was rewritten)")
        elif scan.head_mac != head["mac"]:
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


def verify_from(path: str | os.PathLike, key: bytes, mark: dict | None = None) -> Resumed | None:
    """Check the log at `path` past `mark` ({seq, mac, end}: the entry with
    that seq and mac, whose line ends at byte `end`) as `verify` checks it
    all, the head included; with no mark, from its first line. None when
    the mark's entry is not where it says (the log was cut or rewritten
    before it). The lines before the mark are not read."""
    head, head_problem = _read_head_file(path, key)
    head_seq = head["seq"] if head is not None else None
    scan = _Scan()
    if mark is None:
        base = 0
        data = _read_settled(path) or b""  # after the head: a head is never newer than the log
        position = _fast_scan(data, key, head_seq, scan) if data else 0
    else:
        suffix = b',"mac":"' + mark["mac"].encode("ascii") + b'"}\n'
        base = mark["end"]
        if base < len(suffix):
            return None
        data = _read_settled(path, base - len(suffix)) or b""
        if not data or not data.startswith(suffix):
            return None
        data, position = data[len(suffix):], 0
        # The chain goes on from the mark's entry, line seq + 1 of an intact log.
        scan.number = scan.prev_line = mark["seq"] + 1
        scan.expect_seq, scan.expect_prev = mark["seq"] + 1, mark["mac"]
        scan.last_seq, scan.last_mac = mark["seq"], mark["mac"]
        if head_seq == mark["seq"]:
            scan.head_mac = mark["mac"]
    problems = _scan_rest(data, position, key, head_seq, scan)
    problems.extend(_against_head(head, head_problem, scan, problems))
    report = _chain_report(scan, problems)
    entries = [json.loads(line) for line in data.split(b"\n")[:-1]] if report.ok else []
    last = {"seq": scan.last_seq, "mac": scan.last_mac, "end": base + len(data)} \
        if report.ok and scan.last_seq is not None else mark
    return Resumed(report, entries, last)


def tally(path: str | os.PathLike, key: bytes, counter_path: str, counts: Callable[[dict], bool]) -> int:
    """How many entries of the log at `path` `counts`, reading only the lines
    after the ones counted last time: a sealed counter at `counter_path`
    holds {seq, mac, end, count} of the last line counted. A counter that
    is missing or edited counts the whole log again, to the same number.
    Raises Refused, naming the problem, when the lines read do not verify
    or the log no longer holds the counted entry (cut, emptied, rewritten),
    so a log cut short never lowers the count."""
    from .state import sealed_read, sealed_write

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
    resumed = verify_from(path, key, mark)
    if resumed is None:
        # Only a mark can be missed: the log no longer holds the entry counted up to.
        whole = verify(path, key)
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


def read(path: str | os.PathLike[str], key: bytes | None = None, last: int | None = None) -> list[dict[str, Any]]:
    """Every line of the log, parsed, in file order; nothing is skipped.

    A line that is not a JSON object comes back as {"_line": n, "_error": text}.
    With `key`, every entry whose line fails a check of `verify` also carries
    "_problem" (the first problem found on it). `last=N` parses only the
    final N lines (the check, with a key, still covers the whole log).
    """
    data = _read_settled(path)
    if not data:
        return []
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    first = 0 if last is None else max(0, len(lines) - last)
    flagged: dict[int, str] = {}
    if key is not None:
        report = verify(path, key)
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
    """{seq, mac} of the last well-formed line of the log, or None.

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
                if entry is not None:
                    seq, _, mac = _entry_fields(entry)
                    if seq is not None and mac is not None:
                        return {"seq": seq, "mac": mac}
            if start == 0:
                break
            wanted *= 8
        return None
    finally:
        os.close(fd)


def _line_count(fd: int) -> int:
    size = os.fstat(fd).st_size
    return os.pread(fd, size, 0).count(b"\n") if size else 0


def _last_entry(fd: int, path: str, key: bytes) -> tuple[int, str, str] | None:
    """(seq, mac, prev) of the last line after checking it, or None for an empty log."""
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
    parts = _split(line)
    if parts is not None:
        body, given = parts
        if compare_digest(hmac_sha256(key, body).encode("ascii"), given):
            entry = _parse(line)
            seq, prev, mac = _entry_fields(entry) if entry is not None else (None, None, None)
            if seq is not None and prev is not None and mac is not None:
                return seq, mac, prev
    number = _line_count(fd)
    raise Refused(f"log '{shown}' line {number}: the last line does not carry a valid mac "
                  "(edited, damaged, or written with another machine's key); "
                  "refusing to extend a broken chain", hint=hint)


def _check_against_head(path: str, last: tuple[int, str, str] | None, key: bytes) -> None:
    stored, problem = _read_head_file(path, key)
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


def check_appendable(path: str | os.PathLike[str], key: bytes) -> None:
    """Raise Refused, as `append` would, when the log's tail is broken: a
    caller about to do expensive work checks first, so that work is not
    lost for want of a place to record it."""
    path = os.fspath(path)
    if not os.path.exists(path):
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        last = _last_entry(fd, path, key)
    finally:
        os.close(fd)
    _check_against_head(path, last, key)


def append(path: str | os.PathLike[str], record: dict[str, Any], key: bytes) -> dict[str, Any]:
    """Append `record` as the next entry of the log at `path`; returns the entry written."""
    _check_record(record)
    path = os.fspath(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with file_lock(lock_path(os.path.abspath(path))):
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            last = _last_entry(fd, path, key)
            _check_against_head(path, last, key)
            seq = 0 if last is None else last[0] + 1
            prev = "" if last is None else last[1]
            line, mac = encode_entry(record, seq, prev, key)
            head_record = {"mac": mac, "seq": seq, "signature": _sign_head(seq, mac, key)}
            _append_whole(fd, path, line, canonical_json(head_record) + b"\n")
        finally:
            os.close(fd)
    return {**record, "seq": seq, "prev": prev, "mac": mac}


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
