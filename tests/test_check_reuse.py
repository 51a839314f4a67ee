"""`hills check` of an unchanged hill reuses the leak probe's and the cheat
corpus's results recorded for its tree and environment (sealed in machine
state, hills.checks.recorded); any change to what they read runs them
again; a forged or edited record is not trusted; and `hills commit` right
after a passing check of the same tree runs no check again."""

import json
import os
from pathlib import Path

import pytest

from testing.eval_fixtures import hill_yaml, hills_home, uncommitted_template_hill
from testing.util import needs_bwrap, run_cli
from hills.base import state
from hills.checks import check, corpus, probe, recorded
from hills.disk import locks, uvenv
from hills.evidence import report

pytestmark = [needs_bwrap, pytest.mark.usefixtures("short_temp")]

RECORDED = "(recorded for this tree on "


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many times the leak probe and the cheat corpus really ran, and run_checks."""
    counted = {"probe": 0, "corpus": 0, "checks": 0}

    def counting(name, function):
        def wrapped(*args, **kwargs):
            counted[name] += 1
            return function(*args, **kwargs)
        return wrapped

    monkeypatch.setattr(probe, "leak_probe", counting("probe", probe.leak_probe))
    monkeypatch.setattr(corpus, "cheat_corpus", counting("corpus", corpus.cheat_corpus))
    monkeypatch.setattr(check, "run_checks", counting("checks", check.run_checks))
    return counted


@pytest.fixture
def hill(project: Path) -> Path:
    created = run_cli("new", "reused", "-t", "circle-packing")
    assert created.code == 0, created.output
    return Path(created.out.strip())


def lines_of(result, name: str) -> list[str]:
    found = [line for line in result.out.splitlines() if line[8:8 + len(name)] == name]
    assert len(found) == 1, result.output
    return found


def checked(*options: str):
    result = run_cli("check", "reused", *options)
    assert result.code == 0, result.output
    return result


def reused(result) -> bool:
    """Whether both the probe's and the corpus's lines say they were recorded (and neither only one)."""
    said = [RECORDED in lines_of(result, name)[0] for name in (probe.NAME, corpus.NAME)]
    assert said[0] == said[1], result.out
    return said[0]


def test_an_unchanged_hill_reuses_the_recorded_results(hill: Path, runs: dict[str, int]) -> None:
    first = checked("--no-tests")
    assert not reused(first) and runs["probe"] == runs["corpus"] == 1
    second = checked("--no-tests")
    assert reused(second), second.out
    assert runs["probe"] == runs["corpus"] == 1
    line = lines_of(second, probe.NAME)[0]
    assert line.startswith("  ok    leak probe") and "paths tried, none reached" in line
    # The record's words aside, the line is the first check's.
    assert recorded.plain(check.Result(probe.NAME, "ok", line)).detail == lines_of(first, probe.NAME)[0]
    again = checked("--no-tests", "--fresh")
    assert not reused(again) and runs["probe"] == runs["corpus"] == 2


def _env_dir(hill: Path) -> str:
    return os.path.join(state.envs_dir("reused"), "work-" + uvenv.env_digest(str(hill)))


def change(hill: Path, what: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Change one input of the probe and the corpus."""
    if what == "evaluator":
        with open(hill / "eval.py", "a") as handle:
            handle.write("\n# edited\n")
    elif what == "tests":
        (hill / "tests" / "test_more.py").write_text("def test_more():\n    pass\n")
    elif what == "example":
        example = next(path for path in sorted((hill / "examples").rglob("*")) if path.is_file())
        example.write_text(example.read_text() + "\n")  # circles.json, still valid JSON
    elif what == "manifest":
        (hill / "hill.yaml").write_text((hill / "hill.yaml").read_text().replace("0.1.0", "0.1.1", 1))
    elif what == "locks":
        with open(hill / "uv.lock", "a") as handle:
            handle.write("\n# locked again\n")
    elif what == "private":
        (hill / "private").mkdir(exist_ok=True)
        (hill / "private" / "answers.txt").write_text("held out\n")
    elif what == "environment":
        # A file of the built environment edited: its seal breaks, the
        # check builds it again, and the rebuilt one is another environment.
        env = _env_dir(hill)
        # A file of its own, not one shared with uv's cache (which other tests build from).
        target = next(os.path.join(root, name) for root, _, names in os.walk(env) for name in sorted(names)
                      if name.endswith(".py") and os.lstat(os.path.join(root, name)).st_nlink == 1)
        with open(target, "a") as handle:
            handle.write("\n")
        assert uvenv.changed_since_built(env) is not None
    elif what == "hills version":
        monkeypatch.setattr(report, "_TOOL_HASH", "0" * 64)
    else:
        raise AssertionError(what)


@pytest.mark.slow
@pytest.mark.parametrize("what", ["evaluator", "tests", "example", "manifest", "locks", "private", "environment",
                                  "hills version"])
def test_a_changed_input_runs_them_again(hill: Path, runs: dict[str, int], monkeypatch: pytest.MonkeyPatch,
                                         what: str) -> None:
    checked("--no-tests")
    assert reused(checked("--no-tests")) and runs["probe"] == 1  # the precondition: it is reused unchanged
    change(hill, what, monkeypatch)
    again = checked("--no-tests")
    assert not reused(again), again.out
    assert runs["probe"] == runs["corpus"] == 2
    assert reused(checked("--no-tests")) and runs["probe"] == 2  # and recorded anew


CLEAN = """\
def eval(submission, *, final=False):
    return {"passed": True, "metrics": [{"name": "score", "value": 1.0, "direction": "max"}],
            "config": [], "details": {}}
"""
# The same, but it runs the example's code in its own process: the probe fails it.
IMPORTER = CLEAN.replace("    return", """\
    import importlib.util, os
    spec = importlib.util.spec_from_file_location("run", os.path.join(submission, "run.py"))
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    return""", 1)


def leaking_hill() -> Path:
    """A hill without a solution phase whose evaluator imports the example's run.py."""
    return uncommitted_template_hill("reused", {"eval.py": IMPORTER, "hill.yaml": hill_yaml("reused"),
                                                "private/answers.txt": "held out\n"},
                                     {"run.py": "print('the example ran')\n"})


def forge(hill: Path, python: str, document: dict | None = None) -> str:
    """Write a record saying the probe and the corpus passed for this very
    tree: with no valid seal (`document` None) or as given."""
    key = recorded.key(str(hill), python, locks.StatCache(str(hill)))
    assert key is not None
    passed = [{"check": name, "status": "ok", "detail": "forged", "at": 0} for name in recorded.RECORDED]
    value = [{"key": key, "results": passed}]
    path = recorded.records_path(str(hill))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        json.dump(document if document is not None else {"value": value, "mac": "0" * 64}, handle)
    return key


def trusting_every_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """The control: the record's seal not checked."""
    def unsealed(path):
        with open(path) as handle:
            kept = json.load(handle)["value"]
        return [entry for entry in kept if isinstance(entry, dict)]

    monkeypatch.setattr(recorded, "_read", unsealed)


def probe_fails(result) -> bool:
    return lines_of(result, probe.NAME)[0].startswith("  FAIL  leak probe")


def work_python(hill: Path) -> str:
    from hills.checks.shared import hill_python

    return hill_python("reused", str(hill))


def test_a_forged_record_is_not_trusted(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hill = leaking_hill()
    first = run_cli("check", "reused", "--no-tests")
    assert first.code == 1 and probe_fails(first), first.output
    # A failure is never recorded.
    assert probe.NAME not in recorded.lookup(str(hill), recorded.key(str(hill), work_python(hill),
                                                                     locks.StatCache(str(hill))))
    forge(hill, work_python(hill))
    attacked = run_cli("check", "reused", "--no-tests")
    assert attacked.code == 1 and probe_fails(attacked), attacked.output
    assert RECORDED not in attacked.out
    # The control: were the seal not checked, the same forged record would pass the leaking hill.
    trusting_every_record(monkeypatch)
    forge(hill, work_python(hill))
    trusted = run_cli("check", "reused", "--no-tests")
    assert not probe_fails(trusted) and RECORDED in lines_of(trusted, probe.NAME)[0], trusted.output


def test_an_edited_record_is_not_trusted(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A genuine record of the hill before its evaluator leaked, its key
    edited to the leaking tree's: the seal no longer holds."""
    hill = leaking_hill()
    (hill / "eval.py").write_text(CLEAN)
    clean = run_cli("check", "reused", "--no-tests")
    assert clean.code == 0 and not probe_fails(clean), clean.output
    path = recorded.records_path(str(hill))
    with open(path) as handle:
        genuine = json.load(handle)
    assert state.sealed_read(path) == genuine["value"]  # sealed by this machine
    (hill / "eval.py").write_text(IMPORTER)
    edited = dict(genuine, value=[dict(genuine["value"][0], key=recorded.key(
        str(hill), work_python(hill), locks.StatCache(str(hill))))])
    forge(hill, work_python(hill), edited)
    attacked = run_cli("check", "reused", "--no-tests")
    assert attacked.code == 1 and probe_fails(attacked), attacked.output
    trusting_every_record(monkeypatch)
    forge(hill, work_python(hill), edited)
    trusted = run_cli("check", "reused", "--no-tests")
    assert not probe_fails(trusted) and RECORDED in lines_of(trusted, probe.NAME)[0], trusted.output


@pytest.mark.slow
def test_commit_right_after_a_passing_check_runs_no_check(hill: Path, runs: dict[str, int]) -> None:
    first = checked()
    assert runs["checks"] == 1 and not reused(first)
    committed = run_cli("commit", "reused", "-m", "first")
    assert committed.code == 0, committed.output
    assert runs["checks"] == 1 and runs["probe"] == 1, committed.err
    gate_lines = [line for line in committed.err.splitlines() if line.startswith(("  ok ", "  warn "))]
    assert len(gate_lines) == len(first.out.strip().splitlines()) - 2  # every check's line, none run
    assert all(line.endswith("(remembered)") for line in gate_lines), committed.err
    # The control: after a change the commit's gate runs the checks (the probe and corpus from their record).
    (hill / "README.md").write_text((hill / "README.md").read_text() + "\nMore.\n")
    again = run_cli("commit", "reused", "-m", "second")
    assert again.code == 0, again.output
    assert runs["checks"] == 2 and "(remembered)" not in again.err


@pytest.mark.slow
def test_a_check_without_the_tests_is_not_the_gate(hill: Path, runs: dict[str, int]) -> None:
    checked("--no-tests")
    committed = run_cli("commit", "reused", "-m", "first")
    assert committed.code == 0, committed.output
    assert runs["checks"] == 2 and "(remembered)" not in committed.err
    assert runs["probe"] == 1, "the commit's gate took the probe's result from its record"


def test_the_records_live_in_machine_state(hill: Path) -> None:
    checked("--no-tests")
    path = Path(recorded.records_path(str(hill)))
    assert path.is_file() and hills_home() in path.parents
    assert not [p for p in hill.rglob("*") if "recorded" in p.name]


# ---------------------------------------------------------------- a stand-in for an expensive solution

GRID = Path(__file__).parents[1] / "examples" / "circle-packing" / "examples" / "grid" / "circles.json"
STAND_IN = ("import pathlib\n"
            f"pathlib.Path('circles.json').write_text({GRID.read_text()!r})\n")


def stand_in_hill(hill: Path, key: str = "checks:\n  solution: check_solution.py\n") -> None:
    """The example's solution.py fails (as a training run too long for a
    check would); check_solution.py writes the grid's packing."""
    (hill / "examples" / "grid" / "circles.json").unlink()
    (hill / "examples" / "grid" / "solution.py").write_text("raise SystemExit('too long to run in a check')\n")
    (hill / "check_solution.py").write_text(STAND_IN)
    text = (hill / "hill.yaml").read_text()
    (hill / "hill.yaml").write_text(text.replace("\nevaluator:\n", "\n" + key + "\nevaluator:\n", 1))


def test_the_probe_and_the_corpus_run_the_stand_in_and_no_eval_does(hill: Path) -> None:
    stand_in_hill(hill)
    checked_ = run_cli("check", "reused", "--no-tests")
    assert checked_.code == 0, checked_.output
    # The payload went into the stand-in and ran, confined.
    assert "paths tried, none reached; submitted code started by hills, confined" in lines_of(checked_, probe.NAME)[0]
    assert "cheats tried, none got through" in lines_of(checked_, corpus.NAME)[0]
    evaluated = run_cli("eval", "--current", hill / "examples" / "grid", "-H", "reused", "--json")
    assert evaluated.report["status"] == "buggy", evaluated.output  # an eval runs the example's own solution.py
    # The control: without the key the corpus runs the example's own solution, which fails.
    text = (hill / "hill.yaml").read_text()
    (hill / "hill.yaml").write_text(text.replace("checks:\n  solution: check_solution.py\n", ""))
    unchecked = run_cli("check", "reused", "--no-tests")
    assert lines_of(unchecked, corpus.NAME)[0].startswith("  warn  cheat corpus        the example does not pass"), \
        unchecked.out


@pytest.mark.parametrize("value, expected", [
    ("private/x.py", "a file inside the hill and outside private/"),
    ("/etc/passwd", "a file inside the hill and outside private/"),
    ("../x.py", "a file inside the hill and outside private/"),
])
def test_a_stand_in_outside_the_hill_or_in_private_is_refused(hill: Path, value: str, expected: str) -> None:
    stand_in_hill(hill, f"checks:\n  solution: {value}\n")
    refused = run_cli("check", "reused", "--no-tests")
    assert refused.code == 1
    assert lines_of(refused, "manifest")[0].startswith("  FAIL  manifest"), refused.out
    assert "checks.solution" in refused.out and expected in refused.out, refused.out


def test_a_missing_stand_in_fails_the_probe_and_the_corpus(hill: Path) -> None:
    stand_in_hill(hill, "checks:\n  solution: missing.py\n")
    refused = run_cli("check", "reused", "--no-tests")
    assert refused.code == 1
    for name in (probe.NAME, corpus.NAME):
        assert lines_of(refused, name)[0].startswith("  FAIL ") and "checks.solution in hill.yaml names 'missing.py'" \
            in lines_of(refused, name)[0], refused.out
