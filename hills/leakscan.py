"""The answer-leak scan of `hills check`: held-out content of private/ found
in what the solution phase can see (the hill's public files and blobs, and
the environment variables an eval passes to submitted code)."""

from __future__ import annotations

import csv
import io
import json
import os
import re
from typing import NamedTuple

from . import locks

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping
    from typing import Any

    from .check import Result

# Bumped when a rule below changes, so a remembered gate is judged again.
SCAN_VERSION = 1
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
# numbers copied in order is found.
SEQUENCE_MIN = 8
SEQUENCE_WINDOW = 16
SEQUENCE_STEP = 8
MAX_WINDOWS = 1000
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

    where: str  # a hill path, or $NAME for an environment variable
    line: int | None
    private: str  # the private file it came from
    kind: str  # copy, line, value, number, sequence
    text: str

    def describe(self) -> str:
        place = f"'{self.where}'" + (f" line {self.line}" if self.line else "")
        if self.kind == "copy":
            return f"{place} is a copy of '{self.private}'"
        what = {"line": "a line", "value": "a value", "number": "a number",
                "sequence": "a sequence of numbers"}[self.kind]
        shown = self.text if len(self.text) <= 60 else self.text[:57] + "..."
        return f"{place} holds {what} of '{self.private}': {shown!r}"


class Scan(NamedTuple):
    findings: list[Finding]
    public_files: int
    variables: int
    private_files: int


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
        self.windows: dict[tuple[str, ...], list[tuple[tuple[str, ...], str]]] = {}
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
            window = tuple(numbers[start:start + SEQUENCE_WINDOW])
            self.windows.setdefault(window[:SEQUENCE_MIN], []).append((window, private))


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
        for column, cell in enumerate(row):
            cell = cell.strip()
            token = _canonical(cell) if cell else None
            if token is not None:
                needles.add_number(token, private)
                columns.setdefault(column, []).append(token)
            elif distinctive_value(cell):
                needles.add_text(cell, private, "value")
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
    if needles.windows:
        for start in range(len(tokens) - SEQUENCE_MIN + 1):
            for window, private in needles.windows.get(tuple(tokens[start:start + SEQUENCE_MIN]), ()):
                if tuple(tokens[start:start + len(window)]) == window and ("sequence", hash(window)) not in found:
                    found.add(("sequence", hash(window)))
                    yield Finding(where, line_of(matches[start].start()), private, "sequence",
                                  ", ".join(window))


def environment() -> dict[str, str]:
    """The variables an eval passes on to submitted code from the caller's environment."""
    from .evaluate import ENV_ALLOW

    return {name: os.environ[name] for name in ENV_ALLOW if name in os.environ}


def scan(hill_dir: str, public: Iterable[str], variables: Mapping[str, str],
         cache: locks.StatCache | None = None) -> Scan:
    """Held-out content in the `public` files (paths relative to the hill) and `variables`."""
    cache = cache or locks.StatCache(hill_dir)
    private = locks.walk_private(hill_dir, links=[])
    private_digests: dict[tuple[int, str], str] = {}
    sizes = set()
    for rel in private:
        full = os.path.join(hill_dir, rel)
        st = os.stat(full)
        if st.st_size:
            sizes.add(st.st_size)
            private_digests.setdefault((st.st_size, cache.digest(full, st)), rel)
    needles = Needles()
    for count, rel in enumerate(private):
        needles.share(len(private) - count)
        add_private(hill_dir, rel, needles)
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
        text = _read_text(full, min(PUBLIC_READ, budget))
        if text is not None:
            budget -= len(text)
            findings.extend(scan_text(rel, text, needles))
    for name, value in sorted(variables.items()):
        findings.extend(finding._replace(line=None) for finding in scan_text("$" + name, value, needles))
    cache.save()
    return Scan(findings, len(public), len(variables), len(private))


def visible_files(hill_dir: str) -> list[str]:
    """What an eval materialises of the hill: the files of its tree and its blobs."""
    from . import hill as hill_module

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

    public = [rel for rel in public if rel not in (locks.PRIVATE_LOCK, locks.BLOBS_LOCK)]
    inputs = {"version": SCAN_VERSION, "hill": os.path.realpath(hill_dir), "public": digests(public),
              "private": digests(locks.walk_private(hill_dir, links=[])), "variables": environment()}
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


KEPT = 8  # passing verdicts kept per hill folder


def _verdicts_path(hill_dir: str) -> str:
    import hashlib

    from . import state

    folder = hashlib.sha256(os.path.realpath(hill_dir).encode("utf-8", "surrogateescape")).hexdigest()[:24]
    return os.path.join(state.home(), "cache", "leak", folder + ".json")


def refresh(hill_dir: str, cache: locks.StatCache, listing: tuple[list[str], list[str]] | None,
            results: list[Result]) -> list[Result]:
    """`results` of a remembered gate with its `answer leak` line judged
    now: looked up by verdict_key among the passing scans kept, or run."""
    from . import state
    from .errors import EnvironmentProblem, HillsError

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
    if fresh is not None:
        from .check import Result as CheckResult

        current = CheckResult("answer leak", "ok", str(fresh.get("detail", "")) + " (remembered)")
    else:
        current = leak_check(hill_dir, cache)
        if current.status == "ok" and key is not None:
            entry = {"key": key, "result": current.as_dict()}
            try:
                state.sealed_write(path, [entry, *[e for e in kept if e.get("key") != key]][:KEPT])
            except OSError:
                pass  # scanned again next time
    replaced = [current if result.name == "answer leak" else result for result in results]
    return replaced if current in replaced else [*replaced, current]


HINT = ("hint: submitted code can read every public file, blob and these variables: remove the held-out "
        "content, keep it under private/, or unset the variable before checking")


def leak_check(hill_dir: str, cache: locks.StatCache | None = None) -> Result:
    """The `answer leak` line of `hills check`."""
    from .check import Result
    from .errors import EnvironmentProblem, HillsError

    try:
        result = scan(hill_dir, visible_files(hill_dir), environment(), cache)
    except EnvironmentProblem:
        raise  # git missing, say: exit 4, not a failed check
    except HillsError as exc:
        return Result("answer leak", "fail", exc.message)
    counted = (f"{result.public_files} public files and {result.variables} environment variables "
               f"scanned against {result.private_files} private files")
    if not result.findings:
        return Result("answer leak", "ok", counted)
    shown = [finding.describe() for finding in result.findings[:SHOWN]]
    more = len(result.findings) - len(shown)
    lines = [f"held-out content where submitted code can see it: {shown[0]}", *shown[1:]]
    if more:
        lines.append(f"and {more} more")
    lines.append(HINT)
    return Result("answer leak", "fail", "\n        ".join(lines))
