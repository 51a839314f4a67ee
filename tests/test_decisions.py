"""docs/decisions.md: every decision has an id and a status, the index at
its top lists them as they are, and every id the code, the tests, the docs
and the man pages cite exists, so a citation cannot point at nothing."""

import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DECISIONS = REPO_ROOT / "docs" / "decisions.md"
# Where a decision may be cited (the rendered man pages are made from man/*.rst).
CITING = [("hills", "*.py"), ("tests", "*.py"), ("docs", "*.md"), ("man", "*.rst"), (".", "README.md")]

HEADING = re.compile(r"^### (?P<id>D-\d{3}) (?P<title>\S.*)$")
IDS = r"D-\d{3}(?: and D-\d{3})*"
STATUS = re.compile(rf"^\*\*Status:\*\* (?P<status>accepted|accepted, amended by {IDS}|superseded by {IDS})"
                    r"(?: · \d{4}-\d{2}-\d{2})?\.(?: |$)")
INDEX_ROW = re.compile(r"^\| \[(?P<id>D-\d{3})\]\(#(?P<anchor>[^)]+)\) \| (?P<title>.+) \| (?P<topic>.+) \| "
                       r"(?P<status>[^|]+) \|$")
CITED = re.compile(r"\bD-\d{3}\b")
# `D-042, "Title"` or `D-042 ("Title")`: the title must be that decision's.
CITED_WITH_TITLE = re.compile(r'\b(D-\d{3})(?:,\s*|\s*\(\s*)"([^"]+)"')


def _anchor(heading):
    """The anchor GitHub gives a heading: lower case, punctuation but `-`
    and `_` dropped, spaces as `-`."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def _decisions(text):
    """(id, title, status, line number) of each `### ` heading, and the
    problems found in the headings and their status lines."""
    lines = text.split("\n")
    found, problems = [], []
    section, holds = None, True  # the `## ` section read, and whether a `### ` heading is in it
    for number, line in enumerate(lines + ["## "], 1):
        if line.startswith("## "):
            if not holds:
                problems.append(f"section {section!r}: no decision in it (a section appended without"
                                f" '### D-NNN Title' and a status line)")
            section, holds = line[3:], line == "## Index" or number > len(lines)
            continue
        holds = holds or line.startswith("### ")
        if line.startswith("- **") and found:
            problems.append(f"line {number}: a decision written as a bullet, without an id: "
                            f"make it '### D-NNN Title' with a status line")
        if not line.startswith("### "):
            continue
        heading = HEADING.match(line)
        if heading is None:
            problems.append(f"line {number}: heading without an id: {line!r}")
            continue
        following = next((other for other in lines[number:] if other.strip()), "")
        status = STATUS.match(following)
        if status is None:
            problems.append(f"{heading['id']}: no status line after its heading (expected '**Status:** accepted'"
                            f" or '... superseded by D-NNN'), found {following[:60]!r}")
            continue
        found.append((heading["id"], heading["title"], status["status"], number))
    return found, problems


def problems_of(text):
    """Everything wrong with a decisions document, as one line each."""
    found, problems = _decisions(text)
    ids = [decision_id for decision_id, _, _, _ in found]
    for position, decision_id in enumerate(ids, 1):
        if decision_id != f"D-{position:03d}":
            problems.append(f"{decision_id}: ids run D-001, D-002... in order, without a gap or a repeat;"
                            f" expected D-{position:03d} here")
            break
    known = set(ids)
    for decision_id, _, status, _ in found:
        for named in re.findall(r"D-\d{3}", status):
            if named not in known:
                problems.append(f"{decision_id}: its status names {named}, which does not exist")
            elif int(named[2:]) <= int(decision_id[2:]):
                problems.append(f"{decision_id}: its status names {named}, which is not a later decision")
    rows = [INDEX_ROW.match(line) for line in text.split("\n") if line.startswith("| [D-")]
    listed = [(row["id"], row["title"].replace("\\|", "|"), row["status"]) for row in rows if row]
    if len(listed) != len(rows):
        problems.append("index: a row is not '| [D-NNN](#anchor) | title | topic | status |'")
    if listed != [(decision_id, title, status) for decision_id, title, status, _ in found]:
        problems.append("index: its rows differ from the decisions' ids, titles or statuses")
    for row in filter(None, rows):
        title = row["title"].replace("\\|", "|")
        if row["anchor"] != _anchor(f"{row['id']} {title}"):
            problems.append(f"index: the link of {row['id']} leads nowhere (#{row['anchor']})")
    return problems


def citation_problems(text, where, titles):
    """Ids cited in `text` that no decision has, and ids cited with a title
    that is not theirs; `titles` maps each id to its title."""
    problems = [f"{where}: cites {cited}, which docs/decisions.md does not hold"
                for cited in sorted(set(CITED.findall(text))) if cited not in titles]
    # Comment markers and line breaks out of the way, so a title can wrap.
    flat = " ".join(line.strip().lstrip("#").strip() for line in text.split("\n"))
    for cited, title in CITED_WITH_TITLE.findall(flat):
        if cited in titles and " ".join(title.split()) != titles[cited]:
            problems.append(f"{where}: cites {cited} as {title!r}, but {cited} is {titles[cited]!r}")
    return problems


def _titles():
    found, _ = _decisions(DECISIONS.read_text(encoding="utf-8"))
    return {decision_id: title for decision_id, title, _, _ in found}


def test_every_decision_has_an_id_a_status_and_an_index_row():
    text = DECISIONS.read_text(encoding="utf-8")
    found, _ = _decisions(text)
    assert len(found) >= 189, "the decisions were not found: is each one a '### D-NNN Title' heading?"
    assert problems_of(text) == []


def test_the_superseded_decisions_name_what_replaced_them():
    """The entries contradicted by later ones or by the code are marked, the
    eval's `git status` and `git notes append` among them."""
    found, _ = _decisions(DECISIONS.read_text(encoding="utf-8"))
    status = {title: state for _, title, state, _ in found}
    assert status["Kept as they were"] == "superseded by D-136 and D-137"
    assert status["The note without git"] == status["Clean without `git status`"] == "accepted"
    assert status["Levels"].startswith("superseded by")


def test_every_cited_decision_exists():
    titles = _titles()
    problems = []
    cited = 0
    for folder, pattern in CITING:
        for path in sorted((REPO_ROOT / folder).rglob(pattern) if folder != "." else [REPO_ROOT / pattern]):
            if path in (DECISIONS, Path(__file__).resolve()) or ".venv" in path.parts:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            cited += len(CITED.findall(text))
            problems += citation_problems(text, str(path.relative_to(REPO_ROOT)), titles)
    assert cited > 0, "no file cites a decision by id: the scan looked in the wrong places"
    assert problems == []


BROKEN = """# Decisions

## Index

| id | decision | topic | status |
|---|---|---|---|
| [D-001](#d-001-first) | First | Topic | superseded by D-003 |
| [D-002](#d-002-second) | Second | Topic | accepted |

## Topic

### D-001 First

**Status:** superseded by D-003 · 2026-11-30.

### D-002 Second

Text, and no status.

- **An appended decision.** Without an id.

### A heading without an id

## A section appended as prose

Its text, and no heading with an id.
"""


def test_a_broken_document_is_named_what_is_wrong():
    """The checks can fail: a status that names a decision that does not
    exist, a missing status line, a bullet without an id, a heading without
    one, a section with no decision in it, and an index that no longer matches are each reported."""
    problems = problems_of(BROKEN)
    assert any("D-001: its status names D-003, which does not exist" in p for p in problems), problems
    assert any(p.startswith("D-002: no status line") for p in problems), problems
    assert any("a decision written as a bullet" in p for p in problems), problems
    assert any("heading without an id" in p for p in problems), problems
    assert any(p.startswith("section 'A section appended as prose': no decision") for p in problems), problems
    assert any(p.startswith("index: its rows differ") for p in problems), problems


def test_a_citation_of_a_missing_id_or_under_another_title_is_reported():
    titles = {"D-001": "Names", "D-002": "Finding a hill by name"}
    assert citation_problems('# see docs/decisions.md D-002, "Finding a hill\n# by name"', "x.py", titles) == []
    problems = citation_problems('docs/decisions.md D-009; D-001 ("Finding a hill by name")', "x.md", titles)
    assert problems == ["x.md: cites D-009, which docs/decisions.md does not hold",
                        "x.md: cites D-001 as 'Finding a hill by name', but D-001 is 'Names'"]
