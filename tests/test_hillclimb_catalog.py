"""hillclimb's own catalog through `hills new --from-hillclimb`: each of the
23 problems shipped in hillclimb 0.8.2 is imported, committed (the gate
runs), and its baseline scored by `hills eval`; the score must equal, to
the last bit, what hillclimb itself gives that baseline.

The catalog is not copied into this repository: the test fetches
hillclimb's wheel from PyPI with this interpreter's pip (pinned by hash)
into a cache that outlives the run, and skips only when the index cannot
be reached. hillclimb needs Python 3.12 and cannot be installed here, so the
reference score is computed the way its engine does it
(hillclimb/harness/executor.py, cli/problem.py `verify`, problem.py
`load_problem`), run directly and unconfined with the hill's own
environment, the one `hills eval` built: the candidate folder holding the
baseline (`solution.py` and `baseline_files`), `./problem` and `./data`
linked, the HILLCLIMB_* variables, the verifier (or `run:` then `score:`),
the result file read by hillclimb's own `read_result`.

Slow: 23 hills, each with an environment (uv's cache is the suite's
lasting one, as in test_nanogpt; the problems of one worker share a machine
state, where environments of the same packages are linked, not built
again) and a gate."""

import ast
import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any, Callable

import pytest

from testing.util import BWRAP_USABLE, TEST_CACHE, UV_CACHE, run_bin
from hills.base import state
from hills.disk import yamlfile

VERSION = "0.8.2"
WHEEL = f"hillclimb-{VERSION}-py3-none-any.whl"
WHEEL_SHA256 = "485e22c8f969691018c4c7dd4d5c4bbb42748ae685f735f18c1cfd39386e91f2"
CATALOG = "hillclimb/_catalog/problems"
PROBLEMS = [
    "autocorr-1", "autocorr-3", "circle-packing", "circle-packing-32", "erdos-overlap", "fitness-landscape",
    "golomb-20", "golomb-27", "heilbronn-11", "heilbronn-14", "heilbronn-17", "heilbronn-convex-13",
    "kissing-11", "knapsack", "labs-40", "labs-60", "mknap-100-5", "mknap-250-10", "tammes-30", "tammes-50",
    "thomson-100", "thomson-50", "tsp-200",
]
CACHE = TEST_CACHE / "hillclimb"
# What pip prints when it never got an answer from the index.
UNREACHABLE = ("NewConnectionError", "Failed to establish a new connection", "Temporary failure in name resolution",
               "Name or service not known", "Network is unreachable", "ConnectTimeout", "ReadTimeout",
               "ProxyError", "Max retries exceeded", "Connection refused")
# hillclimb's default verifier environment (executor.single_threaded).
SINGLE_THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS",
                     "NUMEXPR_NUM_THREADS")
# The floor solution hillclimb writes for a problem whose baseline is its files (cli/problem.py).
FLOOR_SOURCE = "# the problem's declared floor: its baseline_files, scored as they are\n"


# ---------------------------------------------------------------- the wheel

def fetch_wheel(cache: Path = CACHE) -> Path:
    """The wheel in `cache`, downloaded once by this interpreter's pip;
    skips the test when the index cannot be reached, fails on any other
    trouble (an index that answers without the wheel, a wrong hash)."""
    wheel = cache / WHEEL
    if wheel.is_file():
        # pip checked the hash when it downloaded; a cached copy is checked again.
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        assert digest == WHEEL_SHA256, f"'{wheel}' is not hillclimb {VERSION}'s wheel (sha256 {digest}): remove it"
        return wheel
    cache.mkdir(parents=True, exist_ok=True)
    pinned = cache / "requirements.txt"
    pinned.write_text(f"hillclimb=={VERSION} --hash=sha256:{WHEEL_SHA256}\n")
    done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                           "--python-version", "3.12", "--require-hashes", "-r", str(pinned), "-d", str(cache),
                           "--timeout", "30", "--retries", "1", "--disable-pip-version-check"],
                          capture_output=True, text=True, timeout=300)
    output = done.stdout + done.stderr
    if done.returncode != 0 and any(word in output for word in UNREACHABLE):
        pytest.skip(f"PyPI cannot be reached to fetch hillclimb {VERSION}: {output.strip().splitlines()[-1]}")
    assert done.returncode == 0, output
    assert wheel.is_file(), f"pip reported success but left no {WHEEL} in {cache}:\n{output}"
    return wheel


def extract(wheel: Path, target: Path) -> Path:
    """The wheel unpacked under `target`, file modes kept (a verifier is
    run as a program, so its executable bit matters, as after pip install)."""
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            path = Path(archive.extract(info, target))
            mode = (info.external_attr >> 16) & 0o777
            if mode and not info.is_dir():
                path.chmod(mode)
    return target


@pytest.fixture(scope="module")
def wheel_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return extract(fetch_wheel(), tmp_path_factory.mktemp("hillclimb-wheel"))


@pytest.fixture(scope="module")
def catalog(wheel_root: Path) -> Path:
    problems = wheel_root / CATALOG
    assert problems.is_dir(), f"hillclimb {VERSION}'s wheel has no {CATALOG}/"
    return problems


def only_index(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    """pip sees `url` as its one index: no config files, no PIP_* settings."""
    for name in [name for name in os.environ if name.startswith("PIP_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", url)


def test_an_index_out_of_reach_skips_saying_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    only_index(monkeypatch, "http://127.0.0.1:9/simple")  # the discard port: nothing listens
    with pytest.raises(pytest.skip.Exception) as skipped:
        fetch_wheel(tmp_path / "cache")
    assert f"PyPI cannot be reached to fetch hillclimb {VERSION}" in str(skipped.value)


@pytest.mark.slow
def test_an_index_that_answers_without_the_wheel_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "simple").mkdir()
    only_index(monkeypatch, (tmp_path / "simple").as_uri())
    with pytest.raises(AssertionError, match="hillclimb==0.8.2"):
        fetch_wheel(tmp_path / "cache")
    assert not (tmp_path / "cache" / WHEEL).exists()


def test_the_catalog_holds_the_23_problems(catalog: Path) -> None:
    found = sorted(path.name for path in catalog.iterdir() if (path / "problem.yaml").is_file())
    assert found == sorted(PROBLEMS)


# ---------------------------------------------------------------- hillclimb's way

def hillclimb_function(wheel_root: Path, module: str, name: str) -> Callable[..., Any]:
    """A function of hillclimb's own source (self-contained, stdlib only),
    so the result file is read exactly as hillclimb reads it."""
    source = (wheel_root / module).read_text()
    tree = ast.parse(source)
    node = next(node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == name)
    namespace: dict[str, Any] = {"json": json, "math": math, "Path": Path}
    exec(compile(ast.Module(body=[node], type_ignores=[]), module, "exec"), namespace)
    function: Callable[..., Any] = namespace[name]
    return function


def hillclimb_score(wheel_root: Path, problem_dir: Path, python: Path, work: Path, split: str) -> dict[str, Any]:
    """Score the problem's baseline as `hillclimb verify` does (its
    `--holdout` for the hidden split): {returncode, score, stderr}."""
    meta = yamlfile.load((problem_dir / "problem.yaml").read_text(), str(problem_dir / "problem.yaml"), typ="safe")
    # load_problem: data_dir, else data/, else the problem folder itself.
    data_dir = (problem_dir / meta["data_dir"]) if meta.get("data_dir") else (
        problem_dir / "data" if (problem_dir / "data").exists() else problem_dir)
    baseline = meta.get("baseline")
    source = (problem_dir / baseline).read_text() if isinstance(baseline, str) else None
    floor_files = {dest: problem_dir / src for dest, src in (meta.get("baseline_files") or {}).items()}
    if source is None and floor_files:
        source = FLOOR_SOURCE
    assert source is not None, f"{problem_dir.name}: hillclimb verify has no baseline to score"
    candidate = work / "candidates" / "v0"
    candidate.mkdir(parents=True)
    (candidate / "data").symlink_to(data_dir.resolve())
    (candidate / "problem").symlink_to(problem_dir.resolve())
    (candidate / "solution.py").write_text(source)
    if split == "validation":
        for dest, src in floor_files.items():
            shutil.copy2(src, candidate / dest)
    else:
        # CommandHoldoutScorer: a fresh folder holding only the solution's scripts.
        holdout = work / "holdout" / "v0" / "t0"
        holdout.mkdir(parents=True)
        shutil.copy(candidate / "solution.py", holdout / "solution.py")
        (holdout / "data").symlink_to(data_dir.resolve())
        (holdout / "problem").symlink_to(problem_dir.resolve())
        candidate = holdout
    result = candidate / "eval_result.json"
    env = {key: value for key, value in os.environ.items() if not key.startswith(("HILLS_", "HILLCLIMB_"))}
    for key in SINGLE_THREAD_ENV:
        env.setdefault(key, "1")
    env.update({"HILLCLIMB_CPUS": "1", "HILLCLIMB_PYTHON": str(python.absolute()),
                "HILLCLIMB_SOLUTION": str(candidate / "solution.py"), "HILLCLIMB_RESULT": str(result),
                "HILLCLIMB_SPLIT": split, "HILLCLIMB_ENGINE_PYTHON": sys.executable})

    def argv(raw: Any) -> list[str]:  # problem._scorer_argv
        tokens = [raw] if isinstance(raw, str) else list(raw)
        if len(tokens) == 1 and tokens[0].endswith(".py"):
            tokens = ["{python}", tokens[0]]
        return [str((problem_dir / token).resolve()) if "{" not in token and (problem_dir / token).is_file()
                else token.replace("{python}", str(python.absolute()))
                .replace("{solution}", str(candidate / "solution.py")).replace("{result}", str(result))
                for token in tokens]

    holdout_flag = ["--holdout"] if split == "holdout" else []
    if meta.get("score"):
        steps = [argv(meta["run"]) if meta.get("run") else [str(python.absolute()), str(candidate / "solution.py")],
                 None, argv(meta["score"]) + holdout_flag]
    else:
        steps = [[str((problem_dir / meta.get("verifier", "verifier.sh")).resolve()), *holdout_flag]]
    stderr = ""
    returncode = 0
    for step in steps:
        if step is None:
            result.unlink(missing_ok=True)  # executor.run_then_score: only the scorer reports
            continue
        done = subprocess.run(step, cwd=candidate, env=env, capture_output=True, text=True, timeout=600)
        stderr += done.stderr
        returncode = done.returncode
        if returncode != 0:
            break
    read_result = hillclimb_function(wheel_root, "hillclimb/harness/executor.py", "read_result")
    score, _ = read_result(result) if returncode == 0 else (None, None)
    return {"returncode": returncode, "score": score, "stderr": stderr}


# ---------------------------------------------------------------- each problem through hills

def hill_python(name: str, tree_hash: str) -> Path:
    """The interpreter of the environment `hills eval` built for the hill."""
    python = Path(state.envs_dir(name)) / tree_hash / "bin" / "python"
    assert python.exists(), f"no environment at {python}"
    return python


def eval_report(*args: object) -> tuple[Any, dict[str, Any]]:
    result = run_bin("hills", "eval", *args, "--json", timeout=900)
    assert result.out.strip(), result.err
    return result, json.loads(result.out)


@pytest.fixture(scope="module")
def catalog_machine(module_machine: Any) -> Any:
    """One machine state for the problems a worker runs, as one user's
    hills share theirs: most problems install hillclimb's default runtime,
    and their environments are linked from the first one built (uvenv's
    twins). Each environment is some 360 MB: none is left behind in the
    kept temporary folders."""
    yield module_machine
    shutil.rmtree(module_machine.hills_home / "envs", ignore_errors=True)


@pytest.mark.slow
@pytest.mark.parametrize("name", PROBLEMS)
def test_hills_scores_the_baseline_exactly_as_hillclimb(name: str, catalog: Path, wheel_root: Path,
                                                        catalog_machine: Any, module_machine: Any, project: Path,
                                                        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UV_CACHE_DIR", UV_CACHE)
    problem_dir = catalog / name
    meta = yamlfile.load((problem_dir / "problem.yaml").read_text(), str(problem_dir / "problem.yaml"), typ="safe")
    # hillclimb's verifier runs put its `hillclimb.spaces` shim on PYTHONPATH;
    # the reference below leaves it out, which is only right while nothing
    # the verifier runs imports hillclimb.
    for script in problem_dir.glob("*.py"):
        if script.name not in ("interface.py", "plot.py", "fingerprint.py", "landscape.py"):
            tree = ast.parse(script.read_text())
            imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
            imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
            assert not any(module.split(".")[0] == "hillclimb" for module in imported), script

    started = time.monotonic()
    created = run_bin("hills", "new", name, "--from-hillclimb", problem_dir, timeout=600)
    assert created.code == 0, created.output
    hill_dir = project / ".hills" / name
    times = {"new": time.monotonic() - started}
    committed = run_bin("hills", "commit", name, "-m", "imported", timeout=900)
    times["commit"] = time.monotonic() - started - sum(times.values())
    assert committed.code == 0, committed.output
    assert f"committed {name} " in committed.err, committed.output
    # The gate held the baseline to its score: the cheat corpus had a score
    # to beat, and (where bubblewrap works) the leak probe ran confined.
    gate = {check: status for status, check in re.findall(r"^\s+(ok|warn|FAIL)\s+(\S+(?: \S+)?)\s{2,}",
                                                           committed.err, re.M)}
    assert gate["cheat corpus"] == "ok", committed.err
    if BWRAP_USABLE:
        assert gate["leak probe"] == "ok", committed.err
    example = hill_dir / "examples" / "baseline"
    assert example.is_dir(), sorted(os.listdir(hill_dir / "examples"))

    splits = [("validation", [])] + ([("holdout", ["--final"])] if meta.get("holdout") else [])
    for split, flags in splits:
        result, report = eval_report(example, "-H", name, *flags)
        times[f"eval {split}"] = time.monotonic() - started - sum(times.values())
        python = hill_python(name, report["tree_hash"])
        expected = hillclimb_score(wheel_root, problem_dir, python, tmp_path / split, split)
        times[f"hillclimb {split}"] = time.monotonic() - started - sum(times.values())
        assert expected["returncode"] == 0 and expected["score"] is not None, expected
        assert result.code == 0, result.err
        assert report["status"] == "passing" and report["passed"] is True, report.get("reason")
        assert report["official"] is True, report.get("official_reason")
        assert report["final"] == (split == "holdout")
        if BWRAP_USABLE:
            # `"$HILLCLIMB_PYTHON" "$HILLCLIMB_SOLUTION"` (or knapsack's run.py): the candidate ran confined.
            assert report["isolation"]["submitted_code"].startswith("confined"), report["isolation"]
        metric = report["metrics"][0]
        assert metric["name"] == meta["metric"]
        assert metric["direction"] == ("max" if meta["higher_is_better"] else "min")
        assert metric["value"] == expected["score"], (split, metric["value"], expected["score"])
        print(f"{name} {split}: {meta['metric']} = {metric['value']!r} (hillclimb: {expected['score']!r})")
    print(f"{name} seconds: " + ", ".join(f"{step} {seconds:.1f}" for step, seconds in times.items()))
