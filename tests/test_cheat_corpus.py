"""The cheat corpus of `hills check` (hills-check(1), CHEAT CORPUS): the
templates pass it; a weak evaluator fails it, naming the cheat that got
through and what it scored against the example; a param marked neutral
that moves the score fails it; an exploit whose expected verdict is wrong
fails it; and it leaves no run folder and no attempts-log line behind."""

import json
import math
import textwrap
from pathlib import Path

import pytest

from testing.util import write_files
from testing.eval_fixtures import hill_yaml, hills, hills_home, uncommitted_template_hill
from hills.checks import corpus


def corpus_line(result: object) -> str:
    lines = [line for line in result.out.splitlines() if line.split()[1:3] == ["cheat", "corpus"]]
    assert len(lines) == 1, result.out
    return lines[0]


def corpus_block(result: object) -> str:
    """The corpus line and the lines under it."""
    out = result.out
    return out[out.index(corpus_line(result)):]


def make_hill(name: str, files: dict[str, str], example: dict[str, str]) -> Path:
    return uncommitted_template_hill(name, files, example)


def function_eval(body: str, signature: str = "") -> str:
    """eval.py whose eval() computes `score` and `passed` in `body`."""
    return ("import json, math, os\nfrom pathlib import Path\n\n"
            f"def eval(submission, *, final=False{signature}):\n"
            "    submission = Path(submission)\n"
            + textwrap.indent(textwrap.dedent(body), "    ")
            + "    return {'passed': passed, 'metrics': [{'name': 'score', 'value': score, 'direction': 'max'}],\n"
              "            'config': [], 'details': {}}\n")


TWO_PHASES = "solution:\n  run: ['{python}', solution.py]\n  when: solution.py\n  outputs: [answer.json]\n"


def check(name: str) -> object:
    return hills("check", name, "--no-tests")


def no_trace(name: str) -> None:
    runs = hills_home() / "runs" / name
    assert not runs.exists() or not any(runs.iterdir()), list(runs.iterdir())
    state = hills_home() / "state"
    assert not (state.exists() and list(state.rglob("attempts.jsonl")))


# -- the pure parts ----------------------------------------------------------

@pytest.mark.parametrize("content, value, expected", [
    (b"[[0.1, 0.2, 3]]", math.nan, b"[[NaN, NaN, NaN]]"),
    (b'{"a": 1, "b": "2", "c": true}', None, b'{"a": null, "b": "2", "c": true}'),
    (b"42\n", math.inf, b"Infinity"),
    (b"x = 1.5e3, y = -2\n", math.nan, b"x = nan, y = nan\n"),
    (b"no numbers here\n", math.nan, None),
    (b'{"name": "x"}', math.nan, None),
])
def test_numbers_are_replaced_json_aware(content, value, expected):
    assert corpus._replace_numbers(content, value) == expected


@pytest.mark.parametrize("text, words", [
    (None, "is missing"),
    ("{", "is not valid JSON"),
    ("[]", "expected an object"),
    ('{"verdict": "failing"}', "unknown key 'verdict'"),
    ('{"status": "broken"}', "'status' must be one of passing, failing, buggy"),
    ('{"no_better_than_example": false}', "'no_better_than_example' must be true"),
])
def test_a_bad_expect_json_is_named(tmp_path, text, words):
    path = tmp_path / "expect.json"
    if text is not None:
        path.write_text(text)
    expect, problem = corpus.read_expect(str(path), "exploits/x/expect.json")
    assert problem is not None and problem.startswith("exploits/x/expect.json") and words in problem, problem


def test_a_good_expect_json_reads_and_the_rule_compares_in_its_direction(tmp_path):
    for text in ('{"status": "failing"}', '{"status": ["failing", "buggy"]}', '{"no_better_than_example": true}'):
        (tmp_path / "expect.json").write_text(text)
        assert corpus.read_expect(str(tmp_path / "expect.json"), "e") == (json.loads(text), None)
    baseline = corpus.Baseline(corpus.Score("passing", 2.0, None), "score", "max", {})
    assert baseline.beaten_by(corpus.Score("passing", 3.0, None))
    assert not baseline.beaten_by(corpus.Score("passing", 2.0 + 1e-13, None))
    assert not baseline.beaten_by(corpus.Score("failing", 9.0, None))
    assert not corpus.Baseline(corpus.Score("passing", 2.0, None), "s", "min", {}).beaten_by(
        corpus.Score("passing", 3.0, None))


# -- the templates -------------------------------------------------------------

# The templates pass the corpus: tests/test_leak_probe.py checks both lines of
# one `hills check` per template.


# -- weak evaluators ---------------------------------------------------------------

@pytest.mark.slow
def test_an_evaluator_scoring_the_length_of_the_output_fails(project):
    body = "score = float(len((submission / 'answer.json').read_bytes()))\npassed = True\n"
    make_hill("by-length", {"eval.py": function_eval(body), "hill.yaml": hill_yaml("by-length", extra=TWO_PHASES)},
              example={"answer.json": "[1, 2, 3]\n"})
    checked = check("by-length")
    assert checked.code == 1, checked.output
    line = corpus_line(checked)
    assert line.split()[:3] == ["FAIL", "cheat", "corpus"], checked.out
    block = corpus_block(checked)
    assert "oversized output scored passing, score 52428800, the example passing, score 10" in block, block
    assert "NaN values scored passing" in block  # "[NaN, NaN, NaN]" is longer than "[1, 2, 3]\n"
    assert "hint: make the evaluator reject these submissions" in block
    no_trace("by-length")


@pytest.mark.slow
def test_an_evaluator_accepting_nan_fails(project):
    # `value > 1 or value < 0` is false for NaN: every NaN counts as valid.
    body = ("values = json.loads((submission / 'answer.json').read_text())\n"
            "score = float(sum(1 for value in values if not (value > 1 or value < 0)))\npassed = True\n")
    make_hill("takes-nan", {"eval.py": function_eval(body), "hill.yaml": hill_yaml("takes-nan", extra=TWO_PHASES)},
              example={"answer.json": "[0.5, 0.7, 3.0]\n"})
    checked = check("takes-nan")
    assert checked.code == 1, checked.output
    block = corpus_block(checked)
    assert "NaN values scored passing, score 3, the example passing, score 2" in block, block
    assert "inf values" not in block and "copy of the example" not in block
    no_trace("takes-nan")


def test_an_evaluator_passing_an_empty_folder_fails(project):
    body = ("answer = submission / 'answer.txt'\n"
            "score = float(answer.read_text()) if answer.is_file() else 1.0\npassed = True\n")
    make_hill("takes-empty", {"eval.py": function_eval(body), "hill.yaml": hill_yaml("takes-empty")},
              example={"answer.txt": "0.5\n"})
    checked = check("takes-empty")
    assert checked.code == 1, checked.output
    block = corpus_block(checked)
    assert "empty folder scored passing, score 1, the example passing, score 0.5" in block, block
    assert "no-op scored passing" in block
    no_trace("takes-empty")


def test_a_param_marked_neutral_that_moves_the_score_fails(project):
    body = "score = float((submission / 'answer.txt').read_text()) * scale\npassed = True\n"
    params = "scale: {type: float, default: 1.0, low: 0.5, high: 2.0, neutral: true}\n"
    make_hill("not-neutral", {"eval.py": function_eval(body, ", scale=1.0"),
                              "hill.yaml": hill_yaml("not-neutral", params=params)},
              example={"answer.txt": "3\n"})
    checked = check("not-neutral")
    assert checked.code == 1, checked.output
    block = corpus_block(checked)
    assert ("neutral param scale=0.5 (low) scored passing, score 1.5, the example at default params passing, "
            "score 3: the param is not neutral") in block, block
    assert "neutral param scale=2.0 (high) scored passing, score 6" in block


def test_a_truly_neutral_param_passes(project):
    body = "score = float((submission / 'answer.txt').read_text())\npassed = True\n"
    params = "seed: {type: int, default: 0, low: 0, high: 9, neutral: true}\n"
    make_hill("neutral", {"eval.py": function_eval(body, ", seed=0"), "hill.yaml": hill_yaml("neutral", params=params)},
              example={"answer.txt": "3\n"})
    checked = check("neutral")
    line = corpus_line(checked)
    assert line.split()[:3] == ["ok", "cheat", "corpus"], checked.out


# -- exploits/ -----------------------------------------------------------------------

@pytest.mark.slow
def test_exploits_add_cases_and_a_wrong_verdict_fails(project):
    created = hills("new", "packing", "-t", "circle-packing")
    hill_dir = Path(created.out.strip())
    grid = (hill_dir / "examples" / "grid" / "circles.json").read_text()
    grown = json.dumps([[x, y, r + 4e-4] for x, y, r in json.loads(grid)])
    write_files(hill_dir, {"exploits/grown/circles.json": grown,
                           "exploits/grown/expect.json": '{"status": "failing"}',
                           "exploits/same/circles.json": grid,
                           "exploits/same/expect.json": '{"no_better_than_example": true}'})
    plain = check("packing")
    line = corpus_line(plain)
    assert line.split()[:3] == ["ok", "cheat", "corpus"], plain.out
    count = int(line.split()[3])
    # An exploit that is scored as the example, but said to fail: its author's verdict is wrong.
    (hill_dir / "exploits" / "same" / "expect.json").write_text('{"status": ["failing", "buggy"]}')
    (hill_dir / "exploits" / "extra").mkdir()
    (hill_dir / "exploits" / "extra" / "circles.json").write_text(grid)
    checked = check("packing")
    assert checked.code == 1, checked.output
    block = corpus_block(checked)
    assert corpus_line(checked).split()[:3] == ["FAIL", "cheat", "corpus"]
    assert f"2 of {count + 1} got through" in block, block
    assert "exploits/extra/expect.json is missing" in block
    assert "exploit same got passing, sum_radii 2.541421356, expected status failing or buggy" in block
    assert "exploit grown" not in block
    no_trace("packing")


def test_the_gate_digest_covers_the_corpus(project, monkeypatch):
    from hills.disk import locks
    from hills.disk import verdicts
    from hills.freeze import gate
    from hills.disk.hill import Hill

    created = hills("new", "digest", "-t", "default")
    hill = Hill(created.out.strip())
    cache = locks.StatCache(hill.path)
    before = gate.gate_key(hill, cache, verdicts.listing_of(hill))
    monkeypatch.setattr(corpus, "VERSION", corpus.VERSION + 1)
    assert gate.gate_key(hill, cache, verdicts.listing_of(hill)) != before
    monkeypatch.undo()
    write_files(Path(hill.path), {"exploits/x/answer.txt": "1\n", "exploits/x/expect.json": "{}"})
    assert gate.gate_key(hill, cache, verdicts.listing_of(hill)) != before


# -- the report names the corpus ------------------------------------------------------

@pytest.mark.slow
def test_an_official_report_names_the_corpus_its_hill_passed(committed_hill):
    example = str(committed_hill / "examples" / "grid")
    scored = hills("eval", example, "-H", "circle-packing")
    assert scored.code == 0, scored.output
    assert json.loads(scored.out)["corpus"] == corpus.VERSION
    again = hills("eval", example, "-H", "circle-packing")  # from the version's cache
    assert json.loads(again.out)["corpus"] == corpus.VERSION
    current = hills("eval", example, "-H", "circle-packing", "--current")
    assert json.loads(current.out)["corpus"] is None


def test_a_version_committed_without_the_gate_names_no_corpus(project):
    from hills.freeze import commit
    from hills.disk.hill import Hill

    created = hills("new", "ungated", "-t", "circle-packing")
    hill_dir = Path(created.out.strip())
    commit.commit(Hill(str(hill_dir)), "first", gate=False)
    scored = hills("eval", str(hill_dir / "examples" / "grid"), "-H", "ungated")
    assert scored.code == 0, scored.output
    assert json.loads(scored.out)["corpus"] is None


def test_an_example_that_does_not_pass_is_a_warning(project):
    body = "score = 1.0\npassed = False\n"
    make_hill("no-pass", {"eval.py": function_eval(body), "hill.yaml": hill_yaml("no-pass")},
              example={"answer.txt": "1\n"})
    checked = check("no-pass")
    assert checked.code == 0, checked.output
    line = corpus_line(checked)
    assert line.split()[:3] == ["warn", "cheat", "corpus"], checked.out
    assert "the example does not pass (failing" in line and "so no cheat was tried" in line


def test_an_example_that_is_buggy_fails_the_gate(project, buggy_examples_fail):
    """A hill whose own example cannot be scored is not frozen: check
    fails naming the example and why, and so does the commit."""
    body = "score = float((submission / 'score.txt').read_text())\npassed = True\n"
    make_hill("buggy-example", {"eval.py": function_eval(body), "hill.yaml": hill_yaml("buggy-example")},
              example={"answer.txt": "1\n"})
    checked = check("buggy-example")
    assert checked.code == 1, checked.output
    line = corpus_line(checked)
    assert line.split()[:3] == ["FAIL", "cheat", "corpus"], checked.out
    assert "the example 'examples/basic' is buggy: eval() raised FileNotFoundError" in line, line
    assert "hint: fix the evaluator or the example until 'hills eval --current examples/basic' passes" in checked.out
    committed = hills("commit", "buggy-example", "-m", "first")
    assert committed.code == 1
    assert committed.error_lines[0].startswith("error: hill 'buggy-example' failed check 'cheat corpus': the example "
                                               "'examples/basic' is buggy"), committed.error_lines
