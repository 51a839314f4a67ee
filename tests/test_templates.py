"""The shipped hill templates and the stdlib test runner `hills check` uses on them."""

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import hills
from hills.disk import hill, manifest

PACKAGE_DIR = Path(hills.__file__).resolve().parent
TEMPLATES_DIR = Path(hill.shipped("examples"))
RUNNER = PACKAGE_DIR / "testrunner.py"
# nanogpt-10min's tests need torch, which only its own environment has:
# tests/test_nanogpt.py runs them through hills check.
TEMPLATES = ["bin-packing", "circle-packing", "dataset", "default"]
SHAPES = {"bin-packing": {"shape": "command", "entry": ["bash", "problem/verifier.sh"]},
          "circle-packing": {"shape": "function", "entry": "eval.py"},
          "dataset": {"shape": "function", "entry": "eval.py"},
          "default": {"shape": "function", "entry": "eval.py"},
          "nanogpt-10min": {"shape": "function", "entry": "eval.py"}}
SUBSTITUTED = ("hill.yaml", "README.md", "pyproject.toml")
SUMMARY_RE = re.compile(r"^(\d+) passed, (\d+) failed(?:, (\d+) errors)? in \d+\.\d\ds$")


def make_hill(tmp_path, template, name=None):
    """Copy a template the way `hills new NAME -t TEMPLATE` lays it out."""
    name = name or template
    hill_dir = tmp_path / name
    shutil.copytree(TEMPLATES_DIR / template, hill_dir, ignore=shutil.ignore_patterns("__pycache__"))
    for filename in SUBSTITUTED:
        path = hill_dir / filename
        path.write_text(path.read_text(encoding="utf-8").replace("{{name}}", name), encoding="utf-8")
    hill.make_data(str(hill_dir))
    return hill_dir


def run_runner(hill_dir, *args, python_flags=()):
    # The environment `hills check` gives a hill's tests: hills.sdk importable.
    from hills.checks.shared import check_env

    return subprocess.run([sys.executable, *python_flags, str(RUNNER), *args, str(hill_dir)],
                          capture_output=True, text=True, timeout=120, env=check_env())


def summary(result):
    lines = result.stdout.strip().splitlines()
    assert lines, result.stderr
    match = SUMMARY_RE.match(lines[-1])
    assert match, lines[-1]
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


@pytest.mark.parametrize("template", TEMPLATES)
def test_template_tests_pass(tmp_path, template):
    hill_dir = make_hill(tmp_path, template)
    result = run_runner(hill_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    passed, failed, errors = summary(result)
    assert passed >= 3 and failed == 0 and errors == 0
    assert "FAILED" not in result.stdout
    # Checking a hill must not leave it dirty.
    assert not list(hill_dir.rglob("__pycache__"))


@pytest.mark.parametrize("template", TEMPLATES + ["nanogpt-10min"])
def test_template_manifest_is_valid(tmp_path, template):
    hill_dir = make_hill(tmp_path, template, name="my-hill")
    parsed = manifest.load(str(hill_dir))
    assert parsed["name"] == "my-hill"
    assert parsed["evaluator"] == SHAPES[template]
    assert "{{name}}" not in "".join((hill_dir / f).read_text() for f in SUBSTITUTED)
    assert "# must match the hill's folder name" in (hill_dir / "hill.yaml").read_text()


def test_circle_packing_params():
    text = (TEMPLATES_DIR / "circle-packing" / "hill.yaml").read_text().replace("{{name}}", "circle-packing")
    params = manifest.parse_text(text, "hill.yaml", "circle-packing")["params"]
    assert params["n"] == {"type": "int", "default": 26, "primary": True, "neutral": False, "low": 1, "high": 100,
                           "description": params["n"]["description"]}
    assert params["tolerance"]["default"] == 1e-9 and params["tolerance"]["primary"] is False
    # A loosened tolerance buys score: it decides which reports compare.
    assert params["tolerance"]["neutral"] is False


@pytest.mark.parametrize("template, example", [("circle-packing", "grid"), ("default", "basic")])
def test_template_example_scores(tmp_path, template, example):
    hill_dir = make_hill(tmp_path, template)
    script = ("import json, sys; from eval import eval as evaluate; "
              "print(json.dumps(evaluate(sys.argv[1])))")
    result = subprocess.run([sys.executable, "-B", "-c", script, str(hill_dir / "examples" / example)],
                            cwd=hill_dir, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["passed"] is True
    assert report["metrics"][0]["direction"] == "max"
    if template == "circle-packing":
        assert abs(report["metrics"][0]["value"] - 2.5414213562) < 1e-9
        assert len(report["instances"]) == 26


def test_broken_evaluator_fails(tmp_path):
    hill_dir = make_hill(tmp_path, "circle-packing")
    eval_py = hill_dir / "eval.py"
    source = eval_py.read_text()
    assert "if overlap > tolerance:" in source
    eval_py.write_text(source.replace("if overlap > tolerance:", "if False:"))
    result = run_runner(hill_dir)
    assert result.returncode == 1
    assert "FAILED tests/test_eval.py::test_overlap_is_rejected - AssertionError" in result.stdout
    passed, failed, errors = summary(result)
    assert failed == 1 and errors == 0 and passed >= 1


def test_empty_tests_folder_collects_nothing(tmp_path):
    hill_dir = make_hill(tmp_path, "default")
    shutil.rmtree(hill_dir / "tests")
    (hill_dir / "tests").mkdir()
    result = run_runner(hill_dir)
    assert result.returncode == 5
    assert summary(result) == (0, 0, 0)
    assert run_runner(hill_dir, "--list").returncode == 5


def write_tests(hill_dir, source):
    (hill_dir / "tests").mkdir(parents=True, exist_ok=True)
    (hill_dir / "tests" / "test_x.py").write_text(source)


def test_import_error_is_an_error_with_its_traceback(tmp_path):
    write_tests(tmp_path, "import no_such_module_anywhere\n")
    (tmp_path / "tests" / "test_y.py").write_text("def test_fine():\n    pass\n")
    result = run_runner(tmp_path)
    assert result.returncode == 1
    assert "ERROR tests/test_x.py - ModuleNotFoundError: No module named 'no_such_module_anywhere'" in result.stdout
    assert "import no_such_module_anywhere" in result.stdout
    assert summary(result) == (1, 0, 1)
    assert result.stdout.strip().splitlines()[-1].startswith("1 passed, 0 failed, 1 errors in ")


def test_fixtures_order_and_failure_lines(tmp_path):
    write_tests(tmp_path, (
        "import os\n"
        "def test_b(tmp_path):\n"
        "    assert tmp_path.is_dir() and not any(tmp_path.iterdir())\n"
        "    os.chdir(tmp_path)\n"
        "def test_a():\n"
        "    assert os.path.isdir('tests'), 'cwd is the hill root again'\n"
        "    value = 1\n"
        "    assert value == 2\n"
        "def test_c(monkeypatch):\n"
        "    pass\n"
        "def helper_test_d():\n"
        "    raise RuntimeError\n"))
    listed = run_runner(tmp_path, "--list")
    assert listed.returncode == 0
    assert listed.stdout.splitlines() == [
        "tests/test_x.py::test_b", "tests/test_x.py::test_a", "tests/test_x.py::test_c"]
    result = run_runner(tmp_path)
    assert result.returncode == 1
    assert "FAILED tests/test_x.py::test_a - AssertionError: assert value == 2" in result.stdout
    assert "line 8, in test_a" in result.stdout
    assert "ERROR tests/test_x.py::test_c - fixture 'monkeypatch' not found" in result.stdout
    assert summary(result) == (1, 1, 1)


def test_all_passing_and_missing_hill(tmp_path):
    write_tests(tmp_path, "def test_one():\n    assert True\n")
    result = run_runner(tmp_path)
    assert result.returncode == 0
    assert summary(result) == (1, 0, 0)
    missing = run_runner(tmp_path / "nope")
    assert missing.returncode == 2
    assert "error: hill folder" in missing.stderr


def test_runner_needs_only_the_standard_library(tmp_path):
    tree = ast.parse(RUNNER.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0 and not (node.module or "").startswith("hills"), ast.dump(node)
        elif isinstance(node, ast.Import):
            assert not any(alias.name.split(".")[0] == "hills" for alias in node.names)
    # -S: no site-packages at all, so neither hills nor pytest can be imported.
    hill_dir = make_hill(tmp_path, "circle-packing")
    result = run_runner(hill_dir, python_flags=("-S",))
    assert result.returncode == 0, result.stdout + result.stderr


def test_nanogpt_params_and_hardware_profile_config():
    text = (TEMPLATES_DIR / "nanogpt-10min" / "hill.yaml").read_text().replace("{{name}}", "nano")
    spec = manifest.parse_text(text, "hill.yaml", "nano")
    budget = spec["params"]["time_budget_s"]
    assert (budget["default"], budget["primary"], budget["neutral"], budget["check"]) == (600.0, True, False, 60.0)
    assert spec["params"]["max_steps"]["check"] == 20 and spec["params"]["max_steps"]["default"] == 0
    assert spec["exclusive"] == "gpu"
    assert spec["metrics"][0]["name"] == "val_loss" and spec["metrics"][0]["direction"] == "min"
    assert spec["solution"]["run"] == ["{python}", "../hill/harness.py", "train.py"]
    # The evaluator names the hardware as primary config: see tests/test_nanogpt.py.
    assert '{"name": "gpu", "value": hardware_profile(), "primary": True}' in \
        (TEMPLATES_DIR / "nanogpt-10min" / "eval.py").read_text()


def test_a_check_value_is_checked_like_the_default(tmp_path):
    from hills.base.errors import UsageError

    hill_dir = make_hill(tmp_path, "default", name="checked")
    base = (hill_dir / "hill.yaml").read_text()
    param = "params:\n  steps:\n    type: int\n    default: 10\n    low: 1\n    high: 100\n    check: {}\n"
    (hill_dir / "hill.yaml").write_text(base + param.format(5))
    assert manifest.load(str(hill_dir))["params"]["steps"]["check"] == 5
    (hill_dir / "hill.yaml").write_text(base + param.format(500))
    with pytest.raises(UsageError) as raised:
        manifest.load(str(hill_dir))
    assert "params.steps.check" in raised.value.message and "a valid value" in raised.value.message


# ------------------------------------------------- held-out data drawn at creation

def shipped_files():
    """Every file the hills package and its shipped folders hold."""
    import os

    from hills.checks import leakscan

    return [os.path.join(current, name) for _, folder in leakscan.installed_places(None)
            for current, _, files in os.walk(folder) for name in files]


@pytest.mark.slow
def test_two_bin_packing_hills_hold_different_instances_found_nowhere_in_the_package(project):
    from testing.util import run_cli
    from hills.disk import locks

    digests = []
    for name in ("bp-one", "bp-two"):
        created = run_cli("new", name, "-t", "bin-packing")
        assert created.code == 0, created.output
        folder = Path(created.out.strip()) / "private" / "holdout"
        made = sorted(folder.iterdir())
        assert [path.name for path in made] == [f"h0{n}-{kind}.json" for n, kind in enumerate(
            ["uniform", "large", "triplets", "small", "uniform", "triplets"], 1)]
        digests.append({path.name: locks.file_digest(path) for path in made})
    assert all(digests[0][name] != digests[1][name] for name in digests[0]), digests
    shipped = {locks.file_digest(path) for path in shipped_files()}
    assert len(shipped) > 50 and not shipped & (set(digests[0].values()) | set(digests[1].values()))
    checked = run_cli("check", "bp-one", "--no-tests")
    assert checked.code == 0, checked.output
    assert "installed files scanned against 6 private files" in checked.out


KNOWN_PACKINGS = '''import json, pathlib

KNOWN = json.loads((pathlib.Path(__file__).parent / "known.json").read_text())


def first_fit_decreasing(items, capacity):
    bins, loads = [], []
    for index in sorted(range(len(items)), key=lambda i: (-items[i], i)):
        for number, load in enumerate(loads):
            if load + items[index] <= capacity:
                bins[number].append(index)
                loads[number] += items[index]
                break
        else:
            bins.append([index])
            loads.append(items[index])
    return bins


def pack(items, capacity):
    return KNOWN.get(json.dumps([capacity, items])) or first_fit_decreasing(items, capacity)
'''


def exact_triplets(items, capacity):
    """Bins of three items each filling one exactly, if the instance has
    them: the offline solve that beats first-fit-decreasing on triplets."""
    if len(items) % 3 or sum(items) * 3 != capacity * len(items):
        return None

    def solve(left):
        if not left:
            return []
        first, rest = left[0], left[1:]
        for a in range(len(rest)):
            for b in range(a + 1, len(rest)):
                if items[first] + items[rest[a]] + items[rest[b]] == capacity:
                    found = solve([index for k, index in enumerate(rest) if k not in (a, b)])
                    if found is not None:
                        return [[first, rest[a], rest[b]], *found]
        return None

    return solve(sorted(range(len(items)), key=lambda i: -items[i]))


@pytest.mark.slow
def test_packings_hard_coded_by_content_gain_nothing_on_the_fresh_holdout(project, tmp_path):
    """The attack: a solution.py with packings solved offline for every
    instance the package ships, looked up by content (it beat
    first-fit-decreasing on --final while the holdout instances shipped).
    On validation, whose instances ship, it still wins: the control. On
    the holdout, drawn at `hills new`, it knows no instance and scores
    what first-fit-decreasing scores."""
    from testing.util import new_and_commit, run_cli, write_files

    known = {}
    for path in shipped_files():
        if path.endswith(".json") and "bin-packing" in path:
            case = json.loads(Path(path).read_text())
            if isinstance(case, dict) and set(case) == {"capacity", "items"}:
                solved = exact_triplets(case["items"], case["capacity"])
                if solved is not None:
                    known[json.dumps([case["capacity"], case["items"]])] = solved
    assert len(known) >= 2, "the shipped triplet instances are solved exactly"
    hill_dir = new_and_commit("bp", "bin-packing")
    held_out = [json.loads(path.read_text()) for path in sorted((hill_dir / "private" / "holdout").glob("*.json"))]
    assert not {json.dumps([case["capacity"], case["items"]]) for case in held_out} & set(known)
    attack = write_files(tmp_path / "known", {"solution.py": KNOWN_PACKINGS, "known.json": json.dumps(known)})
    honest = hill_dir / "examples" / "first-fit-decreasing"
    scores = {}
    for flags in ((), ("--final",)):
        for name, submission in (("honest", honest), ("attack", attack)):
            result = run_cli("eval", "-H", "bp", submission, *flags)
            assert result.code == 0, result.output
            assert result.report["status"] == "passing" and result.report["final"] == bool(flags)
            scores[name, bool(flags)] = result.report["metrics"][0]["value"]
    assert scores["attack", False] < scores["honest", False], scores
    assert scores["attack", True] == scores["honest", True], scores


def test_nanogpt_holds_out_library_files_no_one_can_name(tmp_path):
    """nanogpt-10min's held-out text is cut from the standard library, which
    the training script can read; which files, a salt drawn at creation
    and kept nowhere decides, so two hills hold out different ones, and no
    script can train on exactly them. Each split is still 256 KiB."""
    made = [make_hill(tmp_path, "nanogpt-10min", name) for name in ("nano-a", "nano-b")]
    for split in ("validation", "holdout"):
        first, second = ((hill_dir / "private" / f"{split}.bin").read_bytes() for hill_dir in made)
        assert len(first) == len(second) == 256 * 1024 and first != second, split
    records = [json.loads((hill_dir / "data" / "corpus.json").read_text()) for hill_dir in made]
    assert not any("salt" in json.dumps(record) for record in records)
    assert records[0]["splits"]["train"]["bytes"] != records[1]["splits"]["train"]["bytes"]
