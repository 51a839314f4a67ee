"""`hills new --from-hillclimb` and the bin-packing command template: imported
hills pass `hills check`, score exactly what the problem's own verifier scores
when run the way hillclimb runs it, and bad problem folders leave nothing."""

import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from testing.util import run_bin, run_cli, write_files
from hills.disk import hillclimb, manifest, schema
from hills.run import sandbox
from hills.base.errors import UsageError
from testing.key_fixtures import key_paths, put, wrong_type

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "hillclimb"
VERIFIER_SHAPED = FIXTURES / "spread-points"
TWO_STEP = FIXTURES / "two-step-knapsack"
BIN_PACKING = Path(__file__).resolve().parent.parent / "examples" / "bin-packing"


# ---------------------------------------------------------------- helpers

def run_verifier(tmp_path, problem_dir, example_dir, steps, split, prefixes):
    """Run `steps` (argv lists; "rm" deletes the result) in a copy of
    `example_dir` with ./problem and ./data linked to `problem_dir` and the
    run's variables set under each of `prefixes`. Returns the result object."""
    work = tmp_path / f"work-{len(list(tmp_path.iterdir()))}"
    shutil.copytree(example_dir, work)
    (work / "problem").symlink_to(problem_dir)
    if (problem_dir / "data").is_dir():
        (work / "data").symlink_to(problem_dir / "data")
    result = work.parent / (work.name + "-result.json")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HILLS_", "HILLCLIMB_"))}
    values = {"PYTHON": sys.executable, "RESULT": str(result), "SUBMISSION": str(work),
              "SOLUTION": str(work / "solution.py"), "SPLIT": split, "REPLICATE_SEED": "0"}
    for prefix in prefixes:
        env.update({prefix + key: value for key, value in values.items()})
    env["HILLS_SCORING_PYTHON"] = sys.executable  # the trusted interpreter of scoring steps
    for step in steps:
        if step == "rm":
            result.unlink(missing_ok=True)
            continue
        done = subprocess.run(step, cwd=work, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"{step} exited {done.returncode}: {done.stderr}"
    return json.loads(result.read_text())


def by_hand(tmp_path, problem_dir, example_dir, split):
    """What hillclimb itself computes: the verifier (or run, then score) run
    with only the HILLCLIMB_* variables, `--holdout` on the hidden split."""
    holdout = ["--holdout"] if split == "holdout" else []
    if (problem_dir / "run.py").is_file():
        steps = [[sys.executable, str(problem_dir / "run.py")], "rm",
                 [sys.executable, str(problem_dir / "score.py"), *holdout]]
    else:
        steps = [[str(problem_dir / "verifier.sh"), *holdout]]
    return run_verifier(tmp_path, problem_dir, example_dir, steps, split, ["HILLCLIMB_"])


def as_hills_runs_it(tmp_path, hill_dir, example_dir, split):
    entry = manifest.load(str(hill_dir))["evaluator"]["entry"]
    return run_verifier(tmp_path, hill_dir, example_dir, [entry], split, ["HILLS_", "HILLCLIMB_"])


def imported(tmp_path, source, name):
    staging = tmp_path / "staging" / name
    staging.parent.mkdir(exist_ok=True)
    summary = hillclimb.import_problem(str(source), str(staging), name=name)
    return staging, summary


def write_problem(folder, yaml_text, files=None):
    folder.mkdir(parents=True)
    if yaml_text is not None:
        (folder / "problem.yaml").write_text(yaml_text)
    return write_files(folder, files or {"description.md": "# Task\n", "verifier.sh": "#!/bin/sh\n",
                                         "baseline.py": "print(1)\n"})


def assert_nothing_left(project, name):
    assert not (project / ".hills" / name).exists()
    if (project / ".hills").exists():
        assert sorted(os.listdir(project / ".hills")) == [".gitignore"]


def eval_json(*args):
    result = run_bin("hills", "eval", *args, "--json")
    assert result.out.strip(), result.err
    return result, json.loads(result.out)


# ---------------------------------------------------------------- the mapping

def test_verifier_shape_is_kept_and_told_the_holdout_split(tmp_path):
    hill_dir, summary = imported(tmp_path, VERIFIER_SHAPED, "spread")
    assert summary["shape"] == "verifier" and summary["private"] == []
    assert summary["entry"] == ["bash", "problem/hills-verifier.sh"]
    # The problem's own verifier is kept byte for byte; the wrapper adds --holdout.
    assert (hill_dir / "verifier.sh").read_bytes() == (VERIFIER_SHAPED / "verifier.sh").read_bytes()
    wrapper = (hill_dir / "hills-verifier.sh").read_text()
    assert "exec bash problem/verifier.sh --holdout" in wrapper
    spec = manifest.load(str(hill_dir))
    assert spec["evaluator"] == {"shape": "command", "entry": ["bash", "problem/hills-verifier.sh"]}
    assert spec["metrics"] == [{"name": "min-distance", "direction": "max"}]
    assert spec["final"] == {"budget": None} and spec["network"] is False and spec["params"] == {}
    assert (hill_dir / "examples" / "baseline" / "solution.py").read_text() == \
        (VERIFIER_SHAPED / "baseline.py").read_text()
    assert (hill_dir / "data" / "count.txt").is_file()
    assert 'dependencies = []' in (hill_dir / "pyproject.toml").read_text()


def test_unknown_keys_are_warned_about_and_noted_in_the_readme(tmp_path):
    hill_dir, summary = imported(tmp_path, VERIFIER_SHAPED, "spread")
    assert summary["warnings"] == [f"'{VERIFIER_SHAPED / 'problem.yaml'}': unknown key 'chart_style' is ignored"]
    readme = (hill_dir / "README.md").read_text()
    assert readme.startswith("# Spread points\n")
    assert "## Import notes" in readme and "unknown key `chart_style`" in readme
    assert "- grid: 0.3333333333" in readme  # chart_baselines become reference scores


def test_two_step_problem_becomes_one_verifier_with_private_inputs(tmp_path):
    hill_dir, summary = imported(tmp_path, TWO_STEP, "knapsack")
    assert summary["shape"] == "run-then-score"
    assert summary["private"] == ["private/hidden", "private/holdout"]
    assert summary["entry"] == ["bash", "problem/verifier.sh"]
    for rel in ("hidden", "holdout"):
        assert not (hill_dir / rel).exists(), f"{rel}/ must only be in private/"
    assert sorted(p.relative_to(hill_dir).as_posix() for p in (hill_dir / "private").rglob("*.json")) == [
        "private/hidden/optimal.json", "private/holdout/instances.json", "private/holdout/optimal.json"]
    script = (hill_dir / "verifier.sh").read_text()
    # The contract's order: the solution step, the result deleted, the scorer.
    run_at = script.index('"$HILLS_PYTHON" problem/run.py')
    rm_at = script.index('rm -f "$HILLS_RESULT"')
    score_at = script.index('"$HILLS_SCORING_PYTHON" problem/score.py --holdout')
    assert run_at < rm_at < score_at
    assert "timeout --kill-after=5 30" in script
    assert "## Contract" in (hill_dir / "README.md").read_text()


@pytest.mark.parametrize("split", ["validation", "holdout"])
@pytest.mark.parametrize("source", [VERIFIER_SHAPED, TWO_STEP], ids=["verifier", "run-then-score"])
def test_imported_verifier_scores_what_hillclimb_scores(tmp_path, source, split):
    hill_dir, summary = imported(tmp_path, source, "imported")
    example = hill_dir / "examples" / summary["examples"][0]
    expected = by_hand(tmp_path, source, example, split)
    got = as_hills_runs_it(tmp_path, hill_dir, example, split)
    assert got == expected
    assert math.isfinite(got["score"])


def test_holdout_inputs_are_out_of_reach_on_validation(tmp_path):
    hill_dir, summary = imported(tmp_path, TWO_STEP, "knapsack")
    example = hill_dir / "examples" / "baseline"
    # A solution step that reads the holdout instances fails on validation, as in hillclimb.
    peek = tmp_path / "peek"
    shutil.copytree(example, peek)
    (peek / "solution.py").write_text(
        "import pathlib\npathlib.Path('problem/holdout/instances.json').read_text()\n"
        + (example / "solution.py").read_text())
    with pytest.raises(AssertionError, match="No such file"):
        as_hills_runs_it(tmp_path, hill_dir, peek, "validation")
    assert as_hills_runs_it(tmp_path, hill_dir, peek, "holdout")["score"] > 0


def test_requirements_become_dependencies(tmp_path):
    source = tmp_path / "problem"
    shutil.copytree(VERIFIER_SHAPED, source)
    (source / "requirements.txt").write_text("# pinned\nnumpy>=1.24  # arrays\n\nscipy ; python_version >= '3.9'\n")
    hill_dir, _ = imported(tmp_path, source, "deps")
    text = (hill_dir / "pyproject.toml").read_text()
    assert '"numpy>=1.24"' in text and "\"scipy ; python_version >= '3.9'\"" in text
    (source / "requirements.txt").unlink()
    (source / "problem.yaml").write_text((source / "problem.yaml").read_text().replace(
        "requirements: requirements.txt\n", ""))
    hill_dir, summary = imported(tmp_path, source, "runtime")
    assert all(f'"{name}"' in (hill_dir / "pyproject.toml").read_text() for name in hillclimb.DEFAULT_RUNTIME)
    assert any("default runtime" in note for note in summary["notes"])


def test_unit_tests_move_out_of_the_hills_own_tests_folder(tmp_path):
    source = tmp_path / "problem"
    shutil.copytree(TWO_STEP, source)
    (source / "tests" / "unit").mkdir(parents=True)
    (source / "tests" / "unit" / "test_solution.py").write_text("def test_nothing():\n    pass\n")
    (source / "problem.yaml").write_text((source / "problem.yaml").read_text() + (
        "unit_tests:\n  root: tests/unit\n  command: ['{python}', '-m', 'pytest', '-q', '{tests}']\n"))
    hill_dir, summary = imported(tmp_path, source, "with-tests")
    spec = manifest.load(str(hill_dir))
    assert spec["unit_tests"] == {"command": ["{python}", "-m", "pytest", "-q", "{tests}"], "path": "unit_tests/unit"}
    assert (hill_dir / "unit_tests" / "unit" / "test_solution.py").is_file()
    assert sorted(p.name for p in (hill_dir / "tests").iterdir()) == [hillclimb.TEST_FILE]
    assert any("unit_tests/unit/" in note for note in summary["notes"])


def test_a_problem_without_holdout_refuses_final(tmp_path):
    source = tmp_path / "problem"
    shutil.copytree(VERIFIER_SHAPED, source)
    yaml_path = source / "problem.yaml"
    yaml_path.write_text(yaml_path.read_text().replace("holdout: true", "holdout: false"))
    hill_dir, summary = imported(tmp_path, source, "nohold")
    assert summary["entry"] == ["bash", "problem/verifier.sh"]
    assert manifest.load(str(hill_dir))["final"] == {"budget": 0}


# ---------------------------------------------------------------- bad input

BAD_CASES = {
    "no-problem-yaml": (None, None, ["problem.yaml' is missing"]),
    "bad-yaml": ("metric: [score\nhigher_is_better: true\n", None, ["problem.yaml': not valid YAML at line"]),
    "no-verifier": ("metric: score\nhigher_is_better: true\n", {"description.md": "x\n", "baseline.py": "\n"},
                    ["verifier.sh' is missing", "no verifier"]),
    "no-metric": ("higher_is_better: true\n", None, ["problem.yaml': missing key 'metric'"]),
    "quoted-direction": ("metric: score\nhigher_is_better: 'false'\n", None,
                         ["key 'higher_is_better': expected true or false, unquoted, got 'false'"]),
    "run-without-score": ("metric: score\nhigher_is_better: true\nrun: run.py\n", None, ["missing key 'score'"]),
    "holdout-inputs-without-holdout": (
        "metric: s\nhigher_is_better: true\nscore: verify.py\nholdout_inputs: [hold]\n",
        {"description.md": "x\n", "verify.py": "\n", "hold/seed.txt": "1\n", "baseline.py": "\n"},
        ["key 'holdout': expected true when 'holdout_inputs' is set"]),
    "missing-scorer": ("metric: s\nhigher_is_better: true\nscore: verify.py\n", None,
                       ["verify.py' is missing (named by key 'score'"]),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_problems_exit_2_naming_the_file_and_leave_nothing(project, tmp_path, case):
    yaml_text, files, words = BAD_CASES[case]
    source = write_problem(tmp_path / "problems" / case, yaml_text, files)
    result = run_bin("hills", "new", "imported", "--from-hillclimb", source)
    assert result.code == 2, result.output
    assert len(result.error_lines) == 1, result.err
    assert str(source) in result.error_lines[0]
    for word in words:
        assert word in result.err
    assert_nothing_left(project, "imported")


def test_a_folder_that_is_not_there_exits_2(project, tmp_path):
    result = run_cli("new", "imported", "--from-hillclimb", tmp_path / "nowhere")
    assert result.code == 2
    assert result.error_lines == [f"error: '{tmp_path / 'nowhere'}' is not a folder"]
    assert_nothing_left(project, "imported")


def test_template_and_import_cannot_be_combined(project):
    result = run_cli("new", "imported", "-t", "bin-packing", "--from-hillclimb", VERIFIER_SHAPED)
    assert result.code == 2
    assert result.error_lines == ["error: --template and --from-hillclimb cannot be combined"]
    assert_nothing_left(project, "imported")


# ---------------------------------------------------------------- through the CLI

@pytest.mark.slow
@pytest.mark.parametrize("source, name", [(VERIFIER_SHAPED, "spread"), (TWO_STEP, "knapsack")])
def test_imported_hill_passes_check_and_commits(project, source, name):
    created = run_bin("hills", "new", name, "--from-hillclimb", source)
    assert created.code == 0, created.output
    hill_dir = project / ".hills" / name
    assert created.out.strip() == str(hill_dir)
    assert "hillclimb problem" in created.err
    for rel in ("hill.yaml", "README.md", "pyproject.toml", "uv.lock", "tests/test_hillclimb_problem.py",
                ".vc/hooks/pre-commit"):
        assert (hill_dir / rel).is_file(), rel
    assert "{{name}}" not in (hill_dir / "hill.yaml").read_text()
    if source == VERIFIER_SHAPED:
        assert "warning: " in created.err and "unknown key 'chart_style'" in created.err
    checked = run_bin("hills", "check", name)
    assert checked.code == 0, checked.output
    assert f"{name}: all checks passed" in checked.out
    committed = run_bin("hills", "commit", name, "-m", "imported")
    assert committed.code == 0, committed.output
    private_lock = (hill_dir / "private.lock").read_text()
    tree = run_bin("git", "--git-dir=.vc", "ls-tree", "-r", "--name-only", "HEAD", cwd=hill_dir).out.split()
    if source == TWO_STEP:
        for rel in ("private/hidden/optimal.json", "private/holdout/instances.json", "private/holdout/optimal.json"):
            assert rel in private_lock
        assert not [path for path in tree if path.startswith(("private/", "hidden/", "holdout/"))]
    assert "verifier.sh" in tree and "tests/test_hillclimb_problem.py" in tree


@pytest.mark.slow
def test_a_problem_without_a_baseline_gets_a_placeholder_that_check_still_runs(project, tmp_path):
    source = tmp_path / "no-baseline"
    shutil.copytree(VERIFIER_SHAPED, source)
    (source / "baseline.py").unlink()
    yaml_path = source / "problem.yaml"
    yaml_path.write_text(yaml_path.read_text().replace("baseline: baseline.py\n", "baseline: 0.25\n"))
    created = run_bin("hills", "new", "nobase", "--from-hillclimb", source)
    assert created.code == 0, created.output
    hill_dir = project / ".hills" / "nobase"
    assert sorted(os.listdir(hill_dir / "examples")) == ["placeholder"]
    assert (hill_dir / "examples" / "placeholder" / "solution.py").read_text() == hillclimb.PLACEHOLDER_SOLUTION
    readme = " ".join((hill_dir / "README.md").read_text().split())
    assert "The problem has no baseline solution: `examples/placeholder/` holds a `solution.py`" in readme
    assert "- baseline: 0.25" in readme
    checked = run_bin("hills", "check", "nobase")
    assert checked.code == 0, checked.output
    lines = {line.split()[1] if line.split()[1] != "leak" and line.split()[1] != "cheat" else " ".join(
        line.split()[1:3]): line for line in checked.out.splitlines() if line.startswith("  ")
        and len(line.split()) > 2}
    assert lines["tests"].split()[0] == "ok", checked.out
    assert lines["cheat corpus"].split()[0] == "warn", checked.out
    assert "the example does not pass (buggy:" in lines["cheat corpus"]
    if "bubblewrap" in lines["isolation"] and lines["isolation"].split()[0] == "ok":
        assert lines["leak probe"].split()[0] == "ok", checked.out
    # A solution that keeps the contract scores: the placeholder was only a stand-in.
    (hill_dir / "examples" / "placeholder" / "solution.py").write_text((VERIFIER_SHAPED / "baseline.py").read_text())
    result, report = eval_json("-H", "nobase", "--current", hill_dir / "examples" / "placeholder")
    assert result.code == 0 and report["status"] == "passing", result.output


@pytest.mark.slow
def test_bin_packing_template_holds_out_its_private_instances(project):
    created = run_cli("new", "bp", "-t", "bin-packing")
    assert created.code == 0, created.output
    hill_dir = project / ".hills" / "bp"
    held_out = sorted(p.name for p in (hill_dir / "private" / "holdout").iterdir())
    # Drawn at creation (make_data.py): the template ships none.
    assert held_out == [f"h0{n}-{kind}.json" for n, kind in enumerate(
        ["uniform", "large", "triplets", "small", "uniform", "triplets"], 1)]
    assert not (BIN_PACKING / "private").exists()
    checked = run_bin("hills", "check", "bp")
    assert checked.code == 0, checked.output
    committed = run_bin("hills", "commit", "bp", "-m", "first")
    assert committed.code == 0, committed.output
    private_lock = (hill_dir / "private.lock").read_text()
    for name in held_out:
        assert f"private/holdout/{name}" in private_lock
    tree = run_bin("git", "--git-dir=.vc", "ls-tree", "-r", "--name-only", "HEAD", cwd=hill_dir).out.split()
    assert "data/validation/v01-uniform.json" in tree
    assert not [path for path in tree if path.startswith("private/")]


# ---------------------------------------------------------------- end to end

@pytest.mark.slow
@pytest.mark.parametrize("source, name", [(VERIFIER_SHAPED, "spread"), (TWO_STEP, "knapsack")])
def test_hills_eval_scores_what_hillclimb_scores(project, tmp_path, source, name):
    assert run_bin("hills", "new", name, "--from-hillclimb", source).code == 0
    assert run_bin("hills", "commit", name, "-m", "imported").code == 0
    example = project / ".hills" / name / "examples" / "baseline"
    for split, flags in (("validation", []), ("holdout", ["--final"])):
        expected = by_hand(tmp_path, source, example, split)
        result, report = eval_json(example, "-H", name, *flags)
        assert result.code == 0, result.err
        assert report["status"] == "passing" and report["final"] == (split == "holdout")
        assert report["metrics"][0]["value"] == expected["score"]
        if "instances" in expected:
            assert report["instances"] == expected["instances"]


@pytest.mark.slow
def test_bin_packing_final_scores_the_private_instances(project, tmp_path):
    assert run_cli("new", "bp", "-t", "bin-packing").code == 0
    assert run_cli("commit", "bp", "-m", "first").code == 0
    hill_dir = project / ".hills" / "bp"
    example = hill_dir / "examples" / "first-fit-decreasing"
    namespace = {}
    exec((example / "solution.py").read_text(), namespace)

    def mean_bins(folder):
        counts = []
        for path in sorted(folder.glob("*.json")):
            case = json.loads(path.read_text())
            counts.append(len(namespace["pack"](case["items"], case["capacity"])))
        return sum(counts) / len(counts)

    result, report = eval_json(example, "-H", "bp")
    assert result.code == 0, result.err
    assert report["metrics"][0] == {"name": "bins", "value": mean_bins(hill_dir / "data" / "validation"),
                                    "direction": "min"}
    assert set(report["instances"]) == {p.stem for p in (hill_dir / "data" / "validation").glob("*.json")}
    assert report["report"]["segment_label"] == "instance"
    result, report = eval_json(example, "-H", "bp", "--final")
    assert result.code == 0, result.err
    assert report["final"] is True
    assert report["metrics"][0]["value"] == mean_bins(hill_dir / "private" / "holdout")
    assert "instances" not in report


@pytest.mark.slow
def test_a_bin_packing_submission_without_solution_py_is_told_so(project, tmp_path):
    assert run_cli("new", "bp", "-t", "bin-packing").code == 0
    assert run_cli("commit", "bp", "-m", "first").code == 0
    empty = tmp_path / "no-solution"
    empty.mkdir()
    (empty / "notes.txt").write_text("pack() is in another file\n")
    result, report = eval_json(empty, "-H", "bp")
    assert result.code == 1, result.err
    assert report["status"] == "buggy"
    assert report["reason"].startswith("the solution phase failed (exit code 1): the submission has no solution.py; "
                                       "it must hold one that defines pack(items, capacity); "
                                       "see solution-stderr.log")
    shown = run_cli("eval", str(empty), "-H", "bp")
    assert shown.code == 1
    assert "reason       the solution phase failed (exit code 1): the submission has no solution.py" in shown.err


# ---------------------------------------------------------------- the problem.yaml key table

def test_every_problem_key_is_in_the_importer_docs() -> None:
    text = (Path(__file__).resolve().parent.parent / "docs" / "hillclimb.md").read_text(encoding="utf-8")
    section = text.split("## problem.yaml, key by key\n", 1)[1].split("\n## ", 1)[0]
    named = {token.split(":")[0] for token in re.findall(r"`([^`]+)`", section)}
    first_column = {token.split(":")[0] for row in section.splitlines() if row.startswith("| `")
                    for token in re.findall(r"`([^`]+)`", row.split("|")[1])}
    known = set(hillclimb.PROBLEM_KEYS.names()) | set(hillclimb.KEPT_UNUSED)
    assert known <= named
    assert {token for token in first_column if re.fullmatch(r"[a-z_]+", token)} <= known


PROBLEM_PATHS = list(key_paths(hillclimb.PROBLEM_KEYS))


@pytest.mark.parametrize("path, key", PROBLEM_PATHS, ids=[path for path, _ in PROBLEM_PATHS])
def test_each_problem_key_refuses_a_wrong_type_naming_the_key(path: str, key: schema.Key) -> None:
    wrong = wrong_type(key)
    meta = put({"metric": "score", "unit_tests": {"root": "tests", "command": ["pytest"]}}, path, wrong)
    with pytest.raises(UsageError) as caught:
        hillclimb.PROBLEM_KEYS(meta, schema.At("p/problem.yaml"))
    assert caught.value.message.startswith(f"'p/problem.yaml': key '{path}': expected ")
    assert caught.value.message.endswith(", got " + ("a list" if isinstance(wrong, list) else "a mapping"))


def test_problem_defaults_come_from_the_table() -> None:
    values = hillclimb.PROBLEM_KEYS({"metric": " score "}, schema.At("p/problem.yaml"))
    assert values["metric"] == "score"
    for key in hillclimb.PROBLEM_KEYS.keys:
        if key.name != "metric":
            assert values.get(key.name, schema.ABSENT) == key.default, key.name
    assert values["description"] == hillclimb.DEFAULT_DESCRIPTION and values["verifier"] == hillclimb.DEFAULT_VERIFIER


# ---------------------------------------------------------------- the verifier's own code

# Each pattern of scoring code hillclimb verifiers use, and the exact score
# of the problem's baseline: the verifier's own code (inline -c, a program
# on standard input, a -m module of the environment) writes the result.
OWN_CODE = [("inline-scorer", 0.75), ("heredoc-scorer", 0.9375), ("printed-score", 0.666667)]


@pytest.mark.slow
@pytest.mark.parametrize("problem, score", OWN_CODE)
def test_a_verifiers_own_scoring_code_scores_exactly(project, tmp_path, problem, score):
    source = FIXTURES / problem
    assert run_bin("hills", "new", problem, "--from-hillclimb", source).code == 0
    committed = run_bin("hills", "commit", problem, "-m", "imported")
    assert committed.code == 0, committed.output
    example = project / ".hills" / problem / "examples" / "baseline"
    assert by_hand(tmp_path, source, example, "validation")["score"] == score
    result, report = eval_json(example, "-H", problem)
    assert result.code == 0, result.err
    assert report["status"] == "passing", report.get("reason")
    assert report["metrics"][0]["value"] == score


@pytest.mark.slow
def test_the_candidate_a_verifier_runs_is_still_confined(project, tmp_path):
    """`"$HILLCLIMB_PYTHON" "$HILLCLIMB_SOLUTION"`: the candidate runs
    confined, while the inline scorer after it may write the result."""
    if not sandbox.bwrap_works():
        pytest.skip("bubblewrap is not usable here")
    assert run_bin("hills", "new", "inline", "--from-hillclimb", FIXTURES / "inline-scorer").code == 0
    hill_dir = project / ".hills" / "inline"
    write_files(hill_dir / "private", {"secret.txt": "0.9\n"})  # a leak would guess 0.9
    assert run_bin("hills", "commit", "inline", "-m", "imported").code == 0
    thief = write_files(tmp_path / "thief", {"solution.py": (
        "import glob\nfound = glob.glob('problem/private/secret.txt') + glob.glob('../hill/private/secret.txt')\n"
        "text = ''\nfor path in found:\n    try:\n        text = open(path).read()\n    except OSError:\n        pass\n"
        "open('guess.txt', 'w').write(text.strip() or '0.0')\n")})
    result, report = eval_json(thief, "-H", "inline")
    assert result.code == 0, result.err
    assert report["status"] == "passing", report.get("reason")
    assert report["metrics"][0]["value"] == 0.25  # guessed 0.0: private/ was out of its reach
    assert report["isolation"]["submitted_code"].startswith("confined"), report["isolation"]


@pytest.mark.slow
def test_a_scorer_that_imports_the_candidate_is_stopped(project):
    """A hill script that imports solution.py into its own, trusted process
    would run the candidate unconfined: the guard stops it, and the eval is
    buggy with the reason (such a problem runs the candidate in a `run:`
    step, as hillclimb's own bin-packing does)."""
    assert run_bin("hills", "new", "importer", "--from-hillclimb", FIXTURES / "imports-candidate").code == 0
    example = project / ".hills" / "importer" / "examples" / "baseline"
    result, report = eval_json(example, "-H", "importer", "--current")
    assert report["status"] == "buggy", report
    assert "the submission's file 'solution.py' imported as module 'solution'" in report["reason"], report["reason"]
    # And the gate holds it back: its example is buggy.
    committed = run_bin("hills", "commit", "importer", "-m", "imported")
    assert committed.code == 1, committed.output
    assert "the example 'examples/baseline' is buggy" in committed.err, committed.err
    assert "imported as module 'solution'" in committed.err
