"""The --json output of `hills attempts`, `log`, `rank` and `describe` is
a contract (hills-json(5)): every key they print is documented there, and
every key documented as always present is printed."""

import json
import re
from pathlib import Path

import pytest

from testing.eval_fixtures import SCORE_EVAL, hills, make_hill, on_machine, submission

PAGE = Path(__file__).resolve().parent.parent / "man" / "hills-json.5.rst"


def section(title: str) -> str:
    text = PAGE.read_text(encoding="utf-8")
    found = re.search(rf"^{title}\n=+\n(.*?)(?=^[A-Z ]+\n=+\n|\Z)", text, re.MULTILINE | re.DOTALL)
    assert found, f"hills-json(5) has no {title} section"
    return found.group(1)


def documented(title: str) -> set[str]:
    """The ``key`` literals of a section."""
    return set(re.findall(r"``([a-z_]+)``", section(title)))


def terms(title: str) -> set[str]:
    """The keys a section lists as terms of its definition list: the
    top-level keys, always present unless marked optional."""
    body = section(title)
    return {key for key, text in re.findall(r"^``([a-z_]+)``\n((?:    .*\n?)+)", body, re.MULTILINE)
            if "*optional*" not in text.split(".")[0]}


@pytest.fixture(scope="module")
def outputs(module_machine, tmp_path_factory):
    with on_machine(module_machine):
        make_hill("schema", SCORE_EVAL)
        for index, score in enumerate(["2", "3", "-1"]):
            folder = submission(tmp_path_factory.mktemp(f"s{index}"), {"score.txt": score + "\n"})
            hills("eval", folder, "-H", "schema", *(["--repeat", "2"] if score == "3" else []))
        found = {}
        for verb, argv in (("attempts", ["attempts", "schema"]), ("log", ["log", "schema"]),
                           ("rank", ["rank", "-H", "schema"]), ("describe", ["describe", "schema"])):
            result = hills(*argv, "--json")
            assert result.code == 0, result.output
            found[verb] = json.loads(result.out)
        return found


def keys(items: object) -> set[str]:
    rows = items if isinstance(items, list) else [items]
    return {key for row in rows if isinstance(row, dict) for key in row}


@pytest.mark.slow
def test_attempts(outputs) -> None:
    value, known = outputs["attempts"], documented("ATTEMPTS")
    assert terms("ATTEMPTS") <= set(value)
    assert value["attempts"] and value["best"]
    for part in (value, value["attempts"], value["best"], value["chain"], value["unfinished"]):
        assert keys(part) <= known, f"not in hills-json(5) ATTEMPTS: {keys(part) - known}"
    assert keys(value["attempts"]) == {"number", "seq", "line", "report", "best_before", "new_best", "noise"}
    assert [row["new_best"] for row in value["attempts"]] == [True, True, False]


def test_log(outputs) -> None:
    value, known = outputs["log"], documented("LOG")
    assert isinstance(value, list) and value
    assert keys(value) == terms("LOG") and keys(value) <= known


@pytest.mark.slow
def test_rank(outputs) -> None:
    value, known = outputs["rank"], documented("RANK")
    assert set(value) == {"groups", "apart"}
    groups = value["groups"]
    for part in (groups, [entry for group in groups for entry in group["entries"]], value["apart"]):
        assert keys(part) <= known, f"not in hills-json(5) RANK: {keys(part) - known}"
    assert {"hill", "tree_hash", "primary", "params_apart", "metric_order", "entries"} <= keys(groups)
    assert keys(value["apart"]) == {"source", "report", "reason"}


def test_describe(outputs) -> None:
    value, known = outputs["describe"], documented("DESCRIBE")
    assert terms("DESCRIBE") <= set(value) and set(value) <= known
    assert keys(value["submission"]) <= known
