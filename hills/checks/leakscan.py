"""The answer-leak scan of `hills check`: held-out content of private/ found
in what the solution phase can see: the hill's public files and blobs, the
environment variables an eval passes to submitted code, and what is
installed where submitted code runs (the hill's environment and the hills
package, its shipped templates included). The rules are in
hills-check(1), ANSWER LEAK."""

from __future__ import annotations

import csv
import io
import json
import os
import re
from collections import Counter
from typing import NamedTuple

from ..disk import locks

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
    from typing import Any

    from .shared import Result

# Bumped when a rule below changes, so a remembered gate is judged again.
SCAN_VERSION = 2
# A file whose first SNIFF bytes hold a NUL is binary: compared by digest only.
SNIFF = 8192
# Text read from each private file for lines and values; the rest of a larger
# file is compared by digest only.
PRIVATE_READ = 8 * 1024 * 1024
# Distinctive lines and values kept in all, a bound on memory and time:
# each private file gets an equal share (at least FILE_NEEDLES), and keeps
# the first ones it holds; files in path order.
MAX_NEEDLES = 200_000
FILE_NEEDLES = 2_000
# Text read from each public file, and from all of them together.
PUBLIC_READ = 4 * 1024 * 1024
PUBLIC_TOTAL = 64 * 1024 * 1024
# A private line counts when it has LINE_MIN characters (stripped), ALNUM_MIN
# of them letters or digits, DISTINCT_MIN different ones, and does not start
# like a line any code holds by nature.
LINE_MIN = 16
LINE_MAX = 1000  # a longer line (minified JSON, say) counts by its values
ALNUM_MIN = 8
DISTINCT_MIN = 6
COMMON_STARTS = ("import ", "from ", "def ", "class ", "return", "if __name__", "#!", "print(", "except",
                 "try:", "else:", "for ", "while ", "with ", "raise ", "assert ", "<!--", "-->", "```")
# A private string value counts with VALUE_MIN characters and DISTINCT_MIN
# different ones; a number with NUMBER_DIGITS significant digits.
VALUE_MIN = 12
NUMBER_DIGITS = 6
# Sequences of numbers (a JSON list, a CSV column, a file of numbers) count
# from SEQUENCE_MIN numbers with at least 3 values and not evenly spaced;
# they are matched as windows of SEQUENCE_WINDOW numbers every
# SEQUENCE_STEP, so any stretch of SEQUENCE_WINDOW + SEQUENCE_STEP - 1
# numbers copied in order is found. A row of a private table counts by
# its numbers in order (ids and other text cells left out), its first
# ROW_MAX: a held-out input row found elsewhere is its answer's address
# in any copy of the data set that holds it with its label. A window or
# row counts only when SEQUENCE_MIN of its numbers differ from its most
# common one: a stretch of mostly zeros is found by chance in any table.
SEQUENCE_MIN = 8
SEQUENCE_WINDOW = 16
SEQUENCE_STEP = 8
MAX_WINDOWS = 1000
ROW_MAX = 64
MAX_ROWS = 50_000
# What is installed where submitted code runs: every regular file is
# compared by size, then digest, with the private files, and so is every
# member of a .gz file or a zip archive (.zip, .whl, .npz, .jar, .egg) up
# to MEMBER_READ bytes; text (and text members) is searched for the
# private sequences and rows only, INSTALLED_READ bytes of each file and
# INSTALLED_TOTAL in all, the hills package first, then the environment,
# each in path order. Lines, values and lone numbers are looked for in the
# hill's own files only: other packages' code and docs hold common ones.
# A private file shorter than COPY_MIN bytes ("42\n") is the same as some
# installed file by chance: it counts as copied in the hill's own files only.
COPY_MIN = 64
INSTALLED_READ = 4 * 1024 * 1024
INSTALLED_TOTAL = 64 * 1024 * 1024
MEMBER_READ = 64 * 1024 * 1024
ARCHIVES = (".zip", ".whl", ".npz", ".jar", ".egg")
# Substring matching: needles are indexed by their GRAM-character slices at
# offsets 0..STRIDE-1 and public text is probed every STRIDE characters;
# VALUE_MIN >= GRAM + STRIDE - 1 makes that exact.
GRAM = 8
STRIDE = VALUE_MIN - GRAM + 1
SHOWN = 10  # findings named in the check's detail

NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])")
NUMBERS_ONLY = re.compile(r"^[\s,;\[\]()\-+.eE\d]*$")
NOT_ALNUM = re.compile(r"[\W_]+")


class Finding(NamedTuple):
    """One place the submission can see that holds held-out content."""

    where: str  # a hill path, $NAME for an environment variable, or an installed file's path
    line: int | None
    private: str  # the private file it came from
    kind: str  # copy, line, value, number, sequence, row
    text: str
    member: str = ""  # the member of a .gz file or an archive that holds it
    place: str = ""  # "" for the hill's own files, else ENVIRONMENT or PACKAGE

    def describe(self) -> str:
        place = f"'{self.where}'" + (f" member '{self.member}'" if self.member else "") \
            + (f" ({self.place})" if self.place else "") + (f" line {self.line}" if self.line else "")
        if self.kind == "copy":
            return f"{place} is a copy of '{self.private}'"
        what = {"line": "a line", "value": "a value", "number": "a number",
                "sequence": "a sequence of numbers", "row": "a row"}[self.kind]
        shown = self.text if len(self.text) <= 60 else self.text[:57] + "..."
        return f"{place} holds {what} of '{self.private}': {shown!r}"


class Scan(NamedTuple):
    findings: list[Finding]
    public_files: int
    variables: int
    private_files: int
    installed_files: int = 0


ENVIRONMENT = "the hill's environment"
PACKAGE = "the hills package"


def _canonical(token: str) -> str | None:
    """A number's one spelling (1.50, 1.5 and 15e-1 agree), or None."""
    try:
        value = float(token)
    except ValueError:
        return None
    if value != value or value in (float("inf"), float("-inf")):
        return None
    if value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return repr(value)


def _significant(canonical: str) -> int:
    mantissa = canonical.lstrip("-").split("e")[0].replace(".", "")
    return len(mantissa.strip("0"))


def distinctive_line(line: str) -> bool:
    return (LINE_MIN <= len(line) <= LINE_MAX and len(set(line)) >= DISTINCT_MIN and not line.startswith(COMMON_STARTS)
            and len(NOT_ALNUM.sub("", line)) >= ALNUM_MIN)


def distinctive_value(value: str) -> bool:
    return len(value) >= VALUE_MIN and len(set(value)) >= DISTINCT_MIN and any(ch.isalnum() for ch in value)


def informative(numbers: Sequence[str]) -> bool:
    """A window or row worth looking for: SEQUENCE_MIN numbers off its most common one, 3 values at least."""
    counts = Counter(numbers)
    return len(counts) >= 3 and len(numbers) - max(counts.values()) >= SEQUENCE_MIN


def distinctive_sequence(numbers: list[str]) -> bool:
    if len(numbers) < SEQUENCE_MIN or len(set(numbers)) < 3:
        return False
    try:
        steps = {float(b) - float(a) for a, b in zip(numbers, numbers[1:])}
    except ValueError:
        return False
    return len(steps) > 1


class Needles:
    """What counts as held-out content, indexed for the public scan."""

    def __init__(self) -> None:
        self.texts: list[tuple[str, str, str]] = []  # (text, private, kind)
        self.seen: set[str] = set()
        self.grams: dict[str, list[tuple[int, int]]] = {}  # slice -> [(offset, needle)]
        self.numbers: dict[str, str] = {}
        # anchor -> [(its offset in the window, window, private, kind)]; the
        # anchor is SEQUENCE_MIN numbers from the window's first one off
        # its most common, so the common stretches of a text (zeros) look
        # up little
        self.windows: dict[tuple[str, ...], list[tuple[int, tuple[str, ...], str, str]]] = {}
        self.rows = 0
        self.stop = MAX_NEEDLES

    def share(self, files_left: int) -> None:
        """Give the next file its share of what is left."""
        kept = len(self.texts) + len(self.numbers)
        self.stop = min(MAX_NEEDLES, kept + max((MAX_NEEDLES - kept) // max(files_left, 1), FILE_NEEDLES))

    @property
    def full(self) -> bool:
        return len(self.texts) + len(self.numbers) >= self.stop

    def add_text(self, text: str, private: str, kind: str) -> None:
        if text in self.seen or self.full:
            return
        self.seen.add(text)
        index = len(self.texts)
        self.texts.append((text, private, kind))
        for offset in range(STRIDE):
            self.grams.setdefault(text[offset:offset + GRAM], []).append((offset, index))

    def add_number(self, token: str, private: str) -> None:
        if token not in self.numbers and not self.full and _significant(token) >= NUMBER_DIGITS:
            self.numbers[token] = private

    def add_sequence(self, numbers: list[str], private: str) -> None:
        if not distinctive_sequence(numbers):
            return
        starts = range(0, max(len(numbers) - SEQUENCE_WINDOW, 0) + 1, SEQUENCE_STEP)
        for start in list(starts)[:MAX_WINDOWS]:
            self.add_window(tuple(numbers[start:start + SEQUENCE_WINDOW]), private, "sequence")

    def add_row(self, numbers: list[str], private: str) -> None:
        if len(numbers) >= SEQUENCE_MIN and self.rows < MAX_ROWS:
            self.rows += self.add_window(tuple(numbers[:ROW_MAX]), private, "row")

    def add_window(self, window: tuple[str, ...], private: str, kind: str) -> bool:
        if not informative(window):
            return False
        common = Counter(window).most_common(1)[0][0]
        offset = min(next(index for index, token in enumerate(window) if token != common),
                     len(window) - SEQUENCE_MIN)
        self.windows.setdefault(window[offset:offset + SEQUENCE_MIN], []).append((offset, window, private, kind))
        return True


def _read_text(path: str, limit: int) -> str | None:
    """The first `limit` bytes of a text file as text (whole lines when cut), or None when binary."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError:
        return None
    if b"\0" in data[:SNIFF]:
        return None
    if len(data) > limit:
        data = data[:limit]
        data = data[:data.rfind(b"\n") + 1] or data
    return data.decode("utf-8", errors="replace")


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _walk_json(value: Any, private: str, needles: Needles) -> None:
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, str):
        if distinctive_value(value.strip()):
            needles.add_text(value.strip(), private, "value")
    elif isinstance(value, (int, float)):
        if isinstance(value, int) and -100_000 < value < 100_000:
            return  # fewer than NUMBER_DIGITS digits
        token = _canonical(repr(value))
        if token:
            needles.add_number(token, private)
    elif isinstance(value, dict):
        for item in value.values():
            if needles.full:
                break
            _walk_json(item, private, needles)
    elif isinstance(value, list):
        if value and all(_is_number(item) for item in value[:SEQUENCE_WINDOW]):
            head = value[:SEQUENCE_STEP * MAX_WINDOWS + SEQUENCE_WINDOW]
            tokens = [_canonical(repr(item)) for item in head if _is_number(item)]
            needles.add_sequence([token for token in tokens if token], private)
            value = head  # its numbers beyond the windows are not looked at one by one
        for item in value:
            if needles.full:
                break
            _walk_json(item, private, needles)


def _add_table(text: str, delimiter: str, private: str, needles: Needles) -> None:
    rows = csv.reader(io.StringIO(text), delimiter=delimiter)
    next(rows, None)  # the header names columns, which public files name too
    columns: dict[int, list[str]] = {}
    for number, row in enumerate(rows):
        if needles.full and number > SEQUENCE_STEP * MAX_WINDOWS + SEQUENCE_WINDOW:
            break
        numbers = []
        for column, cell in enumerate(row):
            cell = cell.strip()
            token = _canonical(cell) if cell else None
            if token is not None:
                needles.add_number(token, private)
                columns.setdefault(column, []).append(token)
                numbers.append(token)
            elif distinctive_value(cell):
                needles.add_text(cell, private, "value")
        needles.add_row(numbers, private)
    for numbers in columns.values():
        needles.add_sequence(numbers, private)


def add_private(hill_dir: str, rel: str, needles: Needles) -> None:
    """The distinctive lines, values and sequences of one private file."""
    text = _read_text(os.path.join(hill_dir, rel), PRIVATE_READ)
    if text is None:
        return
    extension = os.path.splitext(rel)[1].lower()
    lines = text.splitlines()
    structured = extension in (".json", ".jsonl", ".csv", ".tsv")
    stop = needles.stop
    if structured:  # half the file's share for its lines, half for its values
        needles.stop = (len(needles.texts) + len(needles.numbers) + stop) // 2
    for number, line in enumerate(lines):
        if needles.full:
            break
        line = line.strip()
        if distinctive_line(line) and not (number == 0 and extension in (".csv", ".tsv")):
            needles.add_text(line, rel, "line")
    needles.stop = stop
    if extension == ".json":
        try:
            _walk_json(json.loads(text), rel, needles)
        except ValueError:
            pass
    elif extension == ".jsonl":
        for line in lines:
            try:
                _walk_json(json.loads(line), rel, needles)
            except ValueError:
                continue
    elif extension in (".csv", ".tsv"):
        _add_table(text, "\t" if extension == ".tsv" else ",", rel, needles)
    elif all(NUMBERS_ONLY.match(line) for line in lines):
        tokens = [_canonical(token) for token in NUMBER.findall(text)]
        needles.add_sequence([token for token in tokens if token], rel)
        for token in tokens:
            if token:
                needles.add_number(token, rel)


def scan_text(where: str, text: str, needles: Needles) -> Iterator[Finding]:
    """Every needle found in one public text, once each."""
    found: set[tuple[str, int]] = set()

    def line_of(position: int) -> int:
        return text.count("\n", 0, position) + 1

    grams, texts = needles.grams, needles.texts
    for position in range(0, max(len(text) - GRAM, 0) + 1, STRIDE):
        for offset, index in grams.get(text[position:position + GRAM], ()):
            needle, private, kind = texts[index]
            start = position - offset
            if start >= 0 and ("text", index) not in found and text.startswith(needle, start):
                found.add(("text", index))
                yield Finding(where, line_of(start), private, kind, needle)
    matches = list(NUMBER.finditer(text))
    tokens = [_canonical(match.group()) or "" for match in matches]
    for match, token in zip(matches, tokens):
        source = needles.numbers.get(token)
        if source is not None and ("number", hash(token)) not in found:
            found.add(("number", hash(token)))
            yield Finding(where, line_of(match.start()), source, "number", token)
    yield from _scan_windows(where, tokens, lambda index: line_of(matches[index].start()), needles)


def scan_numbers(where: str, text: str, needles: Needles) -> Iterator[Finding]:
    """The private sequences and rows found in one installed text, once each."""
    if not needles.windows:
        return
    spelled = NUMBER.findall(text)
    canonical = {token: _canonical(token) or "" for token in set(spelled)}
    tokens = [canonical[token] for token in spelled]

    starts: list[int] = []

    def line_of(index: int) -> int:  # only for a finding: the text is read again, once
        if not starts:
            starts.extend(match.start() for match in NUMBER.finditer(text))
        return text.count("\n", 0, starts[index]) + 1

    yield from _scan_windows(where, tokens, line_of, needles)


def _scan_windows(where: str, tokens: list[str], line_of: Callable[[int], int],
                  needles: Needles) -> Iterator[Finding]:
    found: set[int] = set()
    windows = needles.windows
    for start in range(len(tokens) - SEQUENCE_MIN + 1):
        hits = windows.get(tuple(tokens[start:start + SEQUENCE_MIN]))
        for offset, window, private, kind in hits or ():
            begin = start - offset
            if begin >= 0 and id(window) not in found and tuple(tokens[begin:begin + len(window)]) == window:
                found.add(id(window))
                yield Finding(where, line_of(begin), private, kind, ", ".join(window))


def environment() -> dict[str, str]:
    """The variables an eval passes on to submitted code from the caller's environment."""
    from ..run.env import ENV_ALLOW

    return {name: os.environ[name] for name in ENV_ALLOW if name in os.environ}


class Private(NamedTuple):
    """The private files as the scan compares them: whole, and by needles."""

    digests: dict[tuple[int, str], str]  # (size, digest) -> the first private file with them
    needles: Needles
    files: int


def read_private(hill_dir: str, cache: locks.StatCache) -> Private:
    private = locks.walk_private(hill_dir, links=[])
    digests: dict[tuple[int, str], str] = {}
    for rel in private:
        full = os.path.join(hill_dir, rel)
        st = os.stat(full)
        if st.st_size:
            digests.setdefault((st.st_size, cache.digest(full, st)), rel)
    needles = Needles()
    for count, rel in enumerate(private):
        needles.share(len(private) - count)
        add_private(hill_dir, rel, needles)
    return Private(digests, needles, len(private))


def _blake3(data: bytes) -> str:
    import blake3

    return "blake3:" + blake3.blake3(data).hexdigest()


def _members(full: str, sizes: set[int], read_text: int) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) of the members of a .gz file or zip archive
    worth reading: every one whose size is a private file's (whole), and,
    while `read_text` bytes are left, those under MEMBER_READ bytes. A
    file that is not what its name says yields nothing."""
    import gzip
    import zipfile
    import zlib

    name = full.lower()
    try:
        if name.endswith(".gz"):
            with open(full, "rb") as raw:
                raw.seek(-4, os.SEEK_END)
                # The trailer's size of the data, modulo 2**32: a cheap
                # look before the decompression.
                size = int.from_bytes(raw.read(4), "little")
            if size not in {known % 2 ** 32 for known in sizes} and not size <= read_text:
                return
            with gzip.open(full, "rb") as handle:
                data = handle.read(MEMBER_READ + 1)
            if len(data) <= MEMBER_READ:
                yield os.path.basename(full)[:-3], data
        elif name.endswith(ARCHIVES):
            with zipfile.ZipFile(full) as archive:
                for info in archive.infolist():
                    if info.is_dir() or info.file_size > MEMBER_READ:
                        continue
                    if info.file_size in sizes or info.file_size <= read_text:
                        data = archive.read(info)
                        read_text -= len(data)
                        yield info.filename, data
    except (OSError, EOFError, zipfile.BadZipFile, zlib.error, NotImplementedError, RuntimeError):
        return


def _text_of(data: bytes) -> str | None:
    return None if b"\0" in data[:SNIFF] else data.decode("utf-8", errors="replace")


def scan(hill_dir: str, public: Iterable[str], variables: Mapping[str, str],
         cache: locks.StatCache | None = None, installed: Sequence[tuple[str, str]] = ()) -> Scan:
    """Held-out content in the `public` files (paths relative to the hill),
    in `variables`, and in the `installed` folders ((place, path): the
    hill's environment, the hills package)."""
    cache = cache or locks.StatCache(hill_dir)
    held = read_private(hill_dir, cache)
    needles, private_digests = held.needles, held.digests
    sizes = {size for size, _ in private_digests}
    findings: list[Finding] = []
    public = sorted(public)
    budget = PUBLIC_TOTAL
    for rel in public:
        full = os.path.join(hill_dir, rel)
        st = os.stat(full)
        if st.st_size in sizes:
            copied = private_digests.get((st.st_size, cache.digest(full, st)))
            if copied is not None:
                findings.append(Finding(rel, None, copied, "copy", ""))
                continue
        if budget <= 0:
            continue
        if rel.lower().endswith((".gz", *ARCHIVES)):
            for member, data in _members(full, sizes, budget):
                copied = private_digests.get((len(data), _blake3(data))) if len(data) in sizes else None
                if copied is not None:
                    findings.append(Finding(rel, None, copied, "copy", "", member))
                    continue
                text = _text_of(data[:PUBLIC_READ])
                if text is not None and budget > 0:
                    budget -= len(text)
                    findings.extend(finding._replace(member=member) for finding in scan_text(rel, text, needles))
            continue
        text = _read_text(full, min(PUBLIC_READ, budget))
        if text is not None:
            budget -= len(text)
            findings.extend(scan_text(rel, text, needles))
    for name, value in sorted(variables.items()):
        findings.extend(finding._replace(line=None) for finding in scan_text("$" + name, value, needles))
    counted = 0
    if held.files:
        budget = INSTALLED_TOTAL
        for place, folder in installed:
            for full, st in _installed_files(folder):
                counted += 1
                found, budget = _scan_installed(full, st, place, held, sizes, budget)
                findings.extend(found)
    cache.save()
    return Scan(findings, len(public), len(variables), held.files, counted)


def _installed_files(folder: str) -> Iterator[tuple[str, os.stat_result]]:
    """Every regular file under `folder`, in path order; links not followed."""
    import stat as stat_module

    for current, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(current, name)
            try:
                st = os.lstat(full)
            except OSError:
                continue
            if stat_module.S_ISREG(st.st_mode):
                yield full, st


def _scan_installed(full: str, st: os.stat_result, place: str, held: Private, sizes: set[int],
                    budget: int) -> tuple[list[Finding], int]:
    """What one installed file holds of the private files, and the text budget left."""
    findings: list[Finding] = []
    if st.st_size in sizes and st.st_size >= COPY_MIN:
        from ..disk.locks import file_digest

        copied = held.digests.get((st.st_size, file_digest(full)))
        if copied is not None:
            return [Finding(full, None, copied, "copy", "", "", place)], budget
    compressed = full.lower().endswith((".gz", *ARCHIVES))
    text_budget = budget if held.needles.windows else 0  # nothing to look for in text: copies only
    for member, data in _members(full, sizes, text_budget) if compressed else ():
        copied = held.digests.get((len(data), _blake3(data))) if len(data) in sizes and len(data) >= COPY_MIN \
            else None
        if copied is not None:
            findings.append(Finding(full, None, copied, "copy", "", member, place))
            continue
        text = _text_of(data[:INSTALLED_READ]) if budget > 0 and held.needles.windows else None
        if text is not None:
            budget -= len(text)
            findings.extend(finding._replace(member=member, place=place)
                            for finding in scan_numbers(full, text, held.needles))
    if budget > 0 and held.needles.windows and not compressed:
        text = _read_text(full, min(INSTALLED_READ, budget))
        if text is not None:
            budget -= len(text)
            findings.extend(finding._replace(place=place) for finding in scan_numbers(full, text, held.needles))
    return findings, budget


def installed_places(env_dir: str | None) -> list[tuple[str, str]]:
    """(place, folder) of what is installed where submitted code runs: the
    hills package with the folders it ships (in a checkout, beside it),
    then the hill's environment when it is built."""
    import pathlib

    from ..disk import hill as hill_module

    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    places = [(PACKAGE, package)]
    for folder in ("examples", "hooks", "skills"):
        shipped = hill_module.shipped(folder)
        if isinstance(shipped, pathlib.Path) and not str(shipped).startswith(package + os.sep):
            places.append((PACKAGE, str(shipped)))
    if env_dir is not None:
        places.append((ENVIRONMENT, env_dir))
    return places


def visible_files(hill_dir: str) -> list[str]:
    """What an eval materialises of the hill: the files of its tree and its blobs."""
    from ..disk import hill as hill_module

    regular, blobs = hill_module.list_tree_files(hill_module.Hill(hill_dir))
    return regular + blobs


def verdict_key(hill_dir: str, cache: locks.StatCache, public: Iterable[str]) -> str:
    """The digest of everything the scan's verdict depends on: the rules,
    each public and private file (path and content, through the stat
    cache) and the variables passed to submitted code. Not the two locks:
    they say only what the private files' names and digests say."""
    import hashlib

    def digests(rels: Iterable[str]) -> dict[str, str]:
        found = {}
        for rel in rels:
            full = os.path.join(hill_dir, rel)
            found[rel] = cache.digest(full, os.stat(full))
        return found

    from ..disk import uvenv
    from ..evidence import report

    public = [rel for rel in public if rel not in (locks.PRIVATE_LOCK, locks.BLOBS_LOCK)]
    # The environment as its lock builds it (a built one is rebuilt when
    # it changed), and the hills package by the digest of its sources.
    inputs = {"version": SCAN_VERSION, "hill": os.path.realpath(hill_dir), "public": digests(public),
              "private": digests(locks.walk_private(hill_dir, links=[])), "variables": environment(),
              "environment": uvenv.env_digest(hill_dir), "hills": report.tool_identity()["sha256"],
              "installed": [folder for _, folder in installed_places(None)]}
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


KEPT = 8  # passing verdicts kept per hill folder


def _verdicts_path(hill_dir: str) -> str:
    import hashlib

    from ..base import state

    folder = hashlib.sha256(os.path.realpath(hill_dir).encode("utf-8", "surrogateescape")).hexdigest()[:24]
    return os.path.join(state.home(), "cache", "leak", folder + ".json")


def refresh(hill_dir: str, cache: locks.StatCache, listing: tuple[list[str], list[str]] | None,
            results: list[Result]) -> list[Result]:
    """`results` of a remembered gate with its `answer leak` line judged
    now: looked up by verdict_key among the passing scans kept, or run."""
    from ..base import state
    from ..base.errors import EnvironmentProblem, HillsError

    try:
        public = listing[0] + listing[1] if listing is not None else visible_files(hill_dir)
        key = verdict_key(hill_dir, cache, public)
    except EnvironmentProblem:
        raise
    except (HillsError, OSError):
        key = None
    path = _verdicts_path(hill_dir)
    kept = state.sealed_read(path)
    kept = [entry for entry in kept if isinstance(entry, dict)] if isinstance(kept, list) else []
    fresh = next((entry["result"] for entry in kept if entry.get("key") == key and key is not None
                  and isinstance(entry.get("result"), dict)), None)
    from .shared import Result as CheckResult

    if fresh is not None:
        current = CheckResult("answer leak", "ok", str(fresh.get("detail", "")) + " (remembered)")
    else:
        try:
            env_dir = work_env(hill_dir)
        except EnvironmentProblem:
            raise
        except HillsError as exc:
            env_dir = None
            current = CheckResult("answer leak", "fail", "the hill's environment, which the scan reads, cannot be "
                                                        "built: " + exc.message.splitlines()[0])
        if env_dir is not None:
            current = leak_check(hill_dir, cache, env_dir)
        if current.status == "ok" and key is not None:
            remember(hill_dir, key, current, kept)
    replaced = [current if result.name == "answer leak" else result for result in results]
    return replaced if current in replaced else [*replaced, current]


def remember(hill_dir: str, key: str, result: Result, kept: list[dict[str, Any]] | None = None) -> None:
    """Keep a passing scan's `result` under its verdict_key `key`, beside
    the `kept` verdicts (read anew when not given), KEPT at most."""
    from ..base import state

    path = _verdicts_path(hill_dir)
    if kept is None:
        read = state.sealed_read(path)
        kept = [entry for entry in read if isinstance(entry, dict)] if isinstance(read, list) else []
    entry = {"key": key, "result": result.as_dict()}
    try:
        state.sealed_write(path, [entry, *[e for e in kept if e.get("key") != key]][:KEPT])
    except OSError:
        pass  # scanned again next time


HINT = ("hint: submitted code can read every public file, blob and these variables: remove the held-out "
        "content, keep it under private/, or unset the variable before checking")
INSTALLED_HINT = ("hint: submitted code can read what is installed where it runs: make the held-out data "
                  "fresh, drawn at 'hills new' and kept only in private/ (see the templates' make_data.py), "
                  "or drop the package that holds a copy from pyproject.toml")


def work_env(hill_dir: str) -> str:
    """The folder of the environment `hills check` builds from the hill's working files."""
    from .shared import hill_python

    return os.path.dirname(os.path.dirname(hill_python(os.path.basename(hill_dir), hill_dir)))


def leak_check(hill_dir: str, cache: locks.StatCache | None = None, env_dir: str | None = None) -> Result:
    """The `answer leak` line of `hills check`: `env_dir` is the hill's
    built environment, scanned with the hills package."""
    from .shared import Result
    from ..base.errors import EnvironmentProblem, HillsError

    try:
        result = scan(hill_dir, visible_files(hill_dir), environment(), cache, installed_places(env_dir))
    except EnvironmentProblem:
        raise  # git missing, say: exit 4, not a failed check
    except HillsError as exc:
        return Result("answer leak", "fail", exc.message)
    counted = (f"{result.public_files} public files, {result.variables} environment variables and "
               f"{result.installed_files} installed files scanned against {result.private_files} private files")
    if not result.findings:
        return Result("answer leak", "ok", counted)
    shown = [finding.describe() for finding in result.findings[:SHOWN]]
    more = len(result.findings) - len(shown)
    lines = [f"held-out content where submitted code can see it: {shown[0]}", *shown[1:]]
    if more:
        lines.append(f"and {more} more")
    if any(not finding.place for finding in result.findings):
        lines.append(HINT)
    if any(finding.place for finding in result.findings):
        lines.append(INSTALLED_HINT)
    return Result("answer leak", "fail", "\n        ".join(lines))
