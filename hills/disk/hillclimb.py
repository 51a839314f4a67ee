"""`hills new --from-hillclimb DIR`: read a hillclimb problem folder and write
the files of an equivalent command-shape hill (docs/hillclimb.md)."""

import json
import math
import os
import re
import shlex
import shutil
import textwrap
from collections.abc import Callable
from typing import Any

from . import yamlfile
from ..base.errors import UsageError
from .schema import At, Check, Key, MapOf, Maybe, Table, empty, is_number, null, scalar, show

PROBLEM_FILE = "problem.yaml"
DEFAULT_VERIFIER = "verifier.sh"
DEFAULT_DESCRIPTION = "description.md"
DEFAULT_CONTRACT = "contract.md"
# hillclimb's shared runtime when a problem names no requirements file.
DEFAULT_RUNTIME = ["numpy", "scipy", "pandas", "scikit-learn"]
LAYOUT_SCRIPT = "hills_layout.py"
TEST_FILE = "test_hillclimb_problem.py"
DEFAULT_TIMEOUT = 600

# problem.yaml keys hillclimb reads that hills keeps as files but does not use.
KEPT_UNUSED = {
    "output_artifacts": "hills snapshots the whole submission folder, so nothing needs listing",
    "interface": "the file is kept in the hill; hills does not render or check it",
    "landscape": "the file is kept in the hill; hills has no surface view",
    "surface_metrics": "hills has no surface view",
    "fingerprint": "the file is kept in the hill; hills has no similarity view",
    "plot": "the file is kept in the hill; hills draws no plots",
    "written_by": "informational",
    "score_function": "only meaningful inside hillclimb's own Python API",
}
# Names the hill itself owns at its top level: a problem holding one cannot be imported as is.
HILL_OWNED = ("hill.yaml", "pyproject.toml", "uv.lock", "private.lock", "blobs.lock", ".vc")
SKIPPED = {".git", ".vc", "__pycache__", ".pytest_cache", ".venv", ".mypy_cache", ".ruff_cache", ".DS_Store"}
PLACEHOLDERS = {"python": '"$HILLS_PYTHON"', "solution": '"$HILLS_SOLUTION"', "result": '"$HILLS_RESULT"'}


def _load_yaml(path: str) -> dict[str, Any]:
    data = yamlfile.load(yamlfile.read_text(path), path, typ="safe")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UsageError(f"'{path}': expected a mapping at the top level, got {show(data)}")
    return {str(key): value for key, value in data.items()}


def _inside(rel: Any) -> str | None:
    """`rel` as a clean relative path inside the problem folder, or None."""
    if not isinstance(rel, str) or not rel or os.path.isabs(rel):
        return None
    norm = os.path.normpath(rel).replace(os.sep, "/")
    if norm == "." or norm == ".." or norm.startswith("../"):
        return None
    return norm


# ---------------------------------------------------------------- checks of one value

def _relative(kind: str) -> Check:
    return scalar(f"a relative path to a {kind} inside the problem folder", lambda rel: rel is not None,
                  convert=_inside)


def _problem_file(value: Any, at: At) -> str:
    if value is None:
        at.fail("a file of the problem", value)
    return _relative("file")(value, at)


def _command(value: Any, at: At) -> list[str]:
    """`run:` or `score:` as a list of tokens: a script alone means `{python} script`."""
    tokens = [value] if isinstance(value, str) else value
    if not isinstance(tokens, list) or not tokens or not all(isinstance(t, str) and t for t in tokens):
        at.fail("a script (e.g. verify.py) or a command as a list of strings", value)
    return ["{python}", tokens[0]] if len(tokens) == 1 and tokens[0].endswith(".py") else list(tokens)


def _held_out(value: Any, at: At) -> list[str]:
    """`private:` or `holdout_inputs:`: paths inside the problem folder, none
    in a folder the hill owns."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(item, str) and item for item in items):
        at.fail("a path or a list of paths", value)
    found = []
    for item in items:
        rel = _inside(item)
        if rel is None:
            at.fail("paths inside the problem folder (hills keeps held-out data in the hill's private/)", item,
                    hint="copy the data into the problem folder and name it relative to it")
        if rel.split("/")[0] in HILL_OWNED + ("private", "examples", "tests"):
            at.fail("a path outside the folders hills owns", item)
        found.append(rel)
    return found


def _baseline(value: Any, at: At) -> str | float:
    if isinstance(value, str):
        return _relative("file")(value, at)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        at.fail("a number or a file such as baseline.py", value)
    return value


def _is_score(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_UNQUOTED = scalar("true or false, unquoted", lambda value: isinstance(value, bool))
_BOOLEAN = scalar("true or false", lambda value: isinstance(value, bool))
_DIRECTIONS = {"max": "max", "maximize": "max", "min": "min", "minimize": "min"}


# ---------------------------------------------------------------- the keys of problem.yaml

UNIT_TESTS_KEYS = Table("a mapping with root and command", (
    Key("root", _relative("folder"), required=True, missing="a folder in the problem folder", absent=null),
    Key("command", scalar("a command as a list of strings",
                          lambda value: isinstance(value, list) and bool(value)
                          and all(isinstance(token, str) and token for token in value)), default=None),
))

# The keys hills reads; the keys it keeps as files but does not use are in
# KEPT_UNUSED, and any other key is a warning (hillclimb grows new ones).
PROBLEM_KEYS = Table("a mapping", strict=False, keys=(
    Key("kind", scalar("no 'kind' key (hillclimb retired it: a problem is its verifier command)",
                       lambda value: False),
        doc="refused: hillclimb retired it"),
    Key("solution_kind", scalar("program (hills cannot import climber meta-problems)",
                                lambda value: value == "program"), default="program",
        doc="must be `program`: climber meta-problems cannot be imported"),
    Key("problem_id", scalar("a string", lambda value: isinstance(value, str)), absent=empty,
        note="default the folder's name", doc="the README title when the description has none"),
    Key("metric", scalar("a non-empty string", lambda value: isinstance(value, str) and bool(value.strip()),
                         convert=lambda value: value.strip() if isinstance(value, str) else value),
        required=True, missing="a name for the score, e.g. accuracy", absent=null, doc="`metrics[0].name`"),
    Key("higher_is_better", _UNQUOTED, doc="`metrics[0].direction`: `max` when true"),
    Key("lower_is_better", _UNQUOTED, doc="`metrics[0].direction`: `min` when true"),
    Key("maximize", _UNQUOTED, doc="`metrics[0].direction`: `max` when true"),
    Key("direction", scalar("max or min", lambda value: value is not None,
                            convert=lambda value: _DIRECTIONS.get(value) if isinstance(value, str) else None),
        doc="`metrics[0].direction`: `max` (or `maximize`) or `min` (or `minimize`)"),
    Key("description", _relative("file"), default=DEFAULT_DESCRIPTION, absent=null,
        note=f"default {DEFAULT_DESCRIPTION}, else README.md", doc="the top of the hill's README.md"),
    Key("contract", _relative("file"), default=DEFAULT_CONTRACT, absent=null,
        note=f"default {DEFAULT_CONTRACT} when present", doc="a Contract section of the hill's README.md"),
    Key("verifier", scalar("a relative path to the verifier script", lambda rel: rel is not None,
                           convert=_inside), default=DEFAULT_VERIFIER,
        doc="the evaluator of a verifier-shaped problem"),
    Key("score", _command, absent=empty, doc="the scoring step of the generated two-step verifier.sh"),
    Key("run", _command, absent=empty, doc="the solution step of the generated two-step verifier.sh"),
    Key("private", _held_out, default=[], absent=null, doc="moved into the hill's private/, read by the scorer"),
    Key("holdout_inputs", _held_out, default=[], absent=null,
        doc="moved into the hill's private/, read on the holdout split"),
    Key("holdout", _BOOLEAN, default=False, doc="whether `hills eval --final` has a holdout split to run"),
    Key("time_limit_s", scalar("a positive number of seconds", lambda value: is_number(value) and value > 0),
        absent=null, doc="a timeout around the solution step of a two-step problem"),
    Key("data_dir", scalar("data (hills links ./data to the hill's data/ folder only)",
                           lambda value: _inside(value) == "data", hint="rename the folder to data/"),
        absent=null, doc="must be `data`"),
    Key("requirements", _relative("file"), absent=null, note="default requirements.txt when present",
        doc="the dependencies of the hill's pyproject.toml"),
    Key("unit_tests", Maybe(UNIT_TESTS_KEYS), default=None, doc="the hill's `unit_tests: {path, command}`"),
    Key("baseline", _baseline, absent=null, doc="a file: the example solution; a number: a reference score"),
    Key("baseline_files", MapOf("a mapping of submission file to problem file",
                                scalar("a plain file name in the submission",
                                       lambda dest: _inside(str(dest)) is not None and "/" not in str(dest)),
                                _problem_file),
        default={}, absent=empty, doc="copied into the example solution under their submission names"),
    Key("chart_baselines", scalar("a mapping of label to score",
                                  lambda value: isinstance(value, dict) and all(map(_is_score, value.values()))),
        default={}, absent=empty, doc="reference scores in the hill's README.md"),
    Key("allow_internet_during_solution", _BOOLEAN, note="default false", doc="the hill's `network`"),
    Key("allow_network", _BOOLEAN, doc="the old name of allow_internet_during_solution"),
))


# ---------------------------------------------------------------- rules between keys

def _direction(where: At, values: dict[str, Any]) -> str:
    """The one direction the direction keys agree on."""
    found: list[tuple[str, str]] = [(key, "max" if values[key] == (key != "lower_is_better") else "min")
             for key in ("higher_is_better", "lower_is_better", "maximize") if key in values]
    if "direction" in values:
        found.append(("direction", values["direction"]))
    if not found:
        where.child("higher_is_better").missing("true or false (which way the metric improves)")
    if len({direction for _, direction in found}) > 1:
        names = " and ".join(f"'{key}'" for key, _ in found)
        raise UsageError(f"'{where.source}': keys {names} disagree on the metric's direction")
    return found[0][1]


def _existing(where: At, source: str, key: str, rel: str | None, *, explicit: bool, kind: str = "file") -> str | None:
    """`rel` when it exists in the problem folder. A path named explicitly
    must exist; a default that does not is just absent."""
    if rel is None:
        return None
    path = os.path.join(source, rel)
    if os.path.isdir(path) if kind == "folder" else os.path.isfile(path):
        return rel
    if explicit:
        raise UsageError(f"'{path}' is missing (named by key '{key}' in '{where.source}')")
    return None


def _named_files(where: At, source: str, key: str, tokens: list[str]) -> None:
    """The problem's own scripts a `run:` or `score:` command names must exist."""
    for token in tokens:
        if token.endswith((".py", ".sh")) and "{" not in token:
            rel = _inside(token)
            if rel is None or not os.path.isfile(os.path.join(source, rel)):
                raise UsageError(f"'{os.path.join(source, token)}' is missing (named by key '{key}' in "
                                 f"'{where.source}')")


def _texts(where: At, source: str, meta: dict[str, Any], values: dict[str, Any],
           notes: list[str]) -> tuple[str, str | None]:
    """The task text (description.md, else README.md) and the contract."""
    description = _existing(where, source, "description", values["description"],
                            explicit=meta.get("description") is not None)
    if description is None:
        if not os.path.isfile(os.path.join(source, "README.md")):
            raise UsageError(f"'{os.path.join(source, DEFAULT_DESCRIPTION)}' is missing (key 'description' in "
                             f"'{where.source}')", hint="a hillclimb problem describes its task in description.md")
        description = "README.md"
        notes.append("the task text is the problem's README.md (it has no description.md)")
    contract = _existing(where, source, "contract", values["contract"], explicit=meta.get("contract") is not None)
    return description, contract


def _steps(where: At, source: str, meta: dict[str, Any], values: dict[str, Any],
           notes: list[str]) -> dict[str, Any]:
    """How the problem scores: its verifier, or a scorer with an optional
    solution step, and the held-out paths each may read."""
    score, run = values.get("score"), values.get("run")
    if score is None:
        for key in ("run", "private", "holdout_inputs"):
            if values.get(key):
                where.child("score").missing(f"a scorer (e.g. score: verify.py) when '{key}' is set")
    for key, tokens in (("score", score), ("run", run)):
        if tokens is not None:
            _named_files(where, source, key, tokens)
    for key in ("private", "holdout_inputs"):
        for rel in values[key]:
            if not os.path.exists(os.path.join(source, rel)):
                raise UsageError(f"'{os.path.join(source, rel)}' is missing (named by key '{key}' in "
                                 f"'{where.source}')")
    if values["holdout_inputs"] and not values["holdout"]:
        where.child("holdout").fail("true when 'holdout_inputs' is set", values["holdout"])
    overlap = set(values["private"]) & set(values["holdout_inputs"])
    if overlap:
        where.child("holdout_inputs").fail("paths not also listed under 'private'", sorted(overlap)[0])
    time_limit = values.get("time_limit_s")
    if time_limit is not None and score is None:
        notes.append("`time_limit_s` only limits the solution step of a two-step problem; ignored here")
        time_limit = None
    verifier = None
    if score is None:
        verifier = values["verifier"]
        if not os.path.isfile(os.path.join(source, verifier)):
            raise UsageError(f"'{os.path.join(source, verifier)}' is missing: the problem has no verifier",
                             hint=f"give the problem a {DEFAULT_VERIFIER}, or a scorer with 'score:' in "
                                  f"'{where.source}'")
    elif "verifier" in meta:
        notes.append("`verifier` is ignored: `score` makes this a two-step problem, as in hillclimb")
    return {"shape": "verifier" if score is None else "run-then-score", "verifier": verifier, "run": run,
            "score": score, "private": values["private"], "holdout_inputs": values["holdout_inputs"],
            "time_limit_s": time_limit}


def _environment(where: At, source: str, values: dict[str, Any], notes: list[str]) -> tuple[str | None, list[str]]:
    """The requirements file, if any, and the dependencies of the hill's environment."""
    requirements = _existing(where, source, "requirements", values.get("requirements"), explicit=True)
    if requirements is None and os.path.isfile(os.path.join(source, "requirements.txt")):
        requirements = "requirements.txt"
        notes.append("requirements.txt is used although problem.yaml does not name it")
    if requirements is None:
        notes.append("no requirements file: the environment gets hillclimb's default runtime ("
                     + ", ".join(DEFAULT_RUNTIME) + ")")
        return None, list(DEFAULT_RUNTIME)
    return requirements, _read_requirements(os.path.join(source, requirements))


def _examples(where: At, source: str, values: dict[str, Any]) -> dict[str, Any]:
    """The baseline solution (a file, or files under their submission names)
    and the reference scores; some example solution must exist."""
    baseline = values.get("baseline")
    baseline_file = _existing(where, source, "baseline", baseline, explicit=True) if isinstance(baseline, str) \
        else None
    for dest, src in values["baseline_files"].items():
        _existing(where, source, f"baseline_files.{dest}", src, explicit=True)
    references = dict(values["chart_baselines"])
    if baseline is not None and not isinstance(baseline, str):
        references = {"baseline": baseline, **{k: v for k, v in references.items() if k != "baseline"}}
    # A problem without any solution is imported with a placeholder example (_write_examples).
    return {"baseline_file": baseline_file, "baseline_files": values["baseline_files"], "references": references}


def read_problem(source_dir: str) -> dict[str, Any]:
    """Read and check a hillclimb problem folder; return a plain dict of what
    the hill needs. Every error names the file (and the key) at fault."""
    source = os.path.abspath(source_dir)
    if not os.path.isdir(source):
        raise UsageError(f"'{source_dir}' is not a folder",
                         hint="pass a hillclimb problem folder, the one holding problem.yaml")
    yaml_path = os.path.join(source, PROBLEM_FILE)
    if not os.path.isfile(yaml_path):
        raise UsageError(f"'{yaml_path}' is missing", hint="a hillclimb problem folder holds problem.yaml")
    meta = _load_yaml(yaml_path)
    where = At(yaml_path)
    values = PROBLEM_KEYS(meta, where)
    notes: list[str] = []
    warnings: list[str] = []
    direction = _direction(where, values)
    description, contract = _texts(where, source, meta, values, notes)
    steps = _steps(where, source, meta, values, notes)
    requirements, dependencies = _environment(where, source, values, notes)
    unit_tests = values["unit_tests"]
    if unit_tests is not None:
        _existing(where, source, "unit_tests.root", unit_tests["root"], explicit=True, kind="folder")
    examples = _examples(where, source, values)

    known = PROBLEM_KEYS.names()
    for key in sorted(meta):
        if key in KEPT_UNUSED:
            notes.append(f"`{key}` is not used by hills: {KEPT_UNUSED[key]}")
        elif key not in known:
            warnings.append(f"'{yaml_path}': unknown key '{key}' is ignored")
            notes.append(f"unknown key `{key}` in problem.yaml was ignored")

    for name in HILL_OWNED:
        if os.path.lexists(os.path.join(source, name)):
            raise UsageError(f"'{os.path.join(source, name)}': a hill writes its own '{name}'",
                             hint="move or rename it in the problem folder, then import again")

    return {
        "source": source, "yaml_path": yaml_path, "problem_id": values.get("problem_id") or os.path.basename(source),
        "metric": values["metric"], "direction": direction, "description": description, "contract": contract,
        "holdout": values["holdout"],
        "network": values.get("allow_internet_during_solution", values.get("allow_network", False)),
        **steps, "requirements": requirements, "dependencies": dependencies, "unit_tests": unit_tests,
        **examples, "notes": notes, "warnings": warnings,
    }


def _read_requirements(path: str) -> list[str]:
    """Requirement specifiers of a requirements.txt, for pyproject.toml."""
    found = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            text = re.sub(r"(^|\s)#.*$", "", line).strip()
            if not text:
                continue
            if text.startswith("-"):
                raise UsageError(f"'{path}': line {number}: pip option '{text.split()[0]}' is not supported",
                                 hint="list plain requirement specifiers (name, version, markers) only")
            found.append(text)
    return found


# ---------------------------------------------------------------- writing

def import_problem(source_dir: str, staging_dir: str, name: str | None = None) -> dict[str, Any]:
    """Write the hill files for the hillclimb problem `source_dir` into
    `staging_dir` (created, must not exist). Returns what was done:
    {problem, shape, entry, private, examples, notes, warnings}."""
    problem = read_problem(source_dir)
    source = problem["source"]
    name = name or os.path.basename(os.path.abspath(staging_dir))
    notes = list(problem["notes"])

    held_out = {rel: "private/" + rel for rel in problem["private"] + problem["holdout_inputs"]}
    renamed = {}
    unit_tests = None
    if problem["unit_tests"]:
        root = problem["unit_tests"]["root"]
        target = root
        if root == "tests" or root.startswith("tests/"):
            # tests/ holds the hill's own checks: the whole folder moves.
            if os.path.lexists(os.path.join(source, "unit_tests")):
                raise UsageError(f"'{os.path.join(source, 'tests')}': the unit tests would move to unit_tests/, "
                                 "which the problem already has", hint="rename one of the two folders")
            renamed["tests"] = "unit_tests"
            target = "unit_tests" + root[len("tests"):]
            notes.append(f"the frozen unit tests moved from `{root}/` to `{target}/` (tests/ holds the hill's "
                         "own checks)")
        unit_tests = {"command": problem["unit_tests"]["command"], "path": target}
    if os.path.isdir(os.path.join(source, "tests")) and "tests" not in renamed:
        renamed["tests"] = "problem-tests"
        notes.append("the problem's `tests/` folder is kept as `problem-tests/` (tests/ holds the hill's own checks)")
    if os.path.isfile(os.path.join(source, "README.md")) and problem["description"] != "README.md":
        renamed["README.md"] = "README.problem.md"
        notes.append("the problem's README.md is kept as README.problem.md")
    if os.path.isdir(os.path.join(source, "private")):
        notes.append("the problem's own `private/` folder is held out by hills (bound by private.lock, never in git)")

    def generated_name(preferred: str, fallback: str) -> str:
        return fallback if os.path.lexists(os.path.join(source, preferred)) else preferred

    os.makedirs(staging_dir)
    _copy_problem(source, staging_dir, skip=set(held_out), renamed=renamed)
    for rel, target in held_out.items():
        destination = os.path.join(staging_dir, target)
        if os.path.lexists(destination):
            raise UsageError(f"'{os.path.join(source, target)}' already exists, so '{rel}' cannot move there",
                             hint="hills keeps held-out data in the hill's private/ folder")
        os.makedirs(os.path.dirname(destination), exist_ok=True)
        origin = os.path.join(source, rel)
        if os.path.isdir(origin):
            shutil.copytree(origin, destination, ignore=shutil.ignore_patterns(*SKIPPED))
        else:
            shutil.copy2(origin, destination)

    needs_layout = bool(held_out)
    if needs_layout:
        if os.path.lexists(os.path.join(source, LAYOUT_SCRIPT)):
            raise UsageError(f"'{os.path.join(source, LAYOUT_SCRIPT)}': hills writes a file of that name",
                             hint="rename it in the problem folder")
        _write(staging_dir, LAYOUT_SCRIPT, _layout_script(problem))

    if problem["shape"] == "verifier":
        if problem["holdout"] or not _is_shell(os.path.join(source, problem["verifier"])):
            script = generated_name("hills-verifier.sh", "hills-verifier-entry.sh")
            _write(staging_dir, script, _verifier_wrapper(problem), executable=True)
        else:
            script = problem["verifier"]
    else:
        script = generated_name(DEFAULT_VERIFIER, "hills-verifier.sh")
        _write(staging_dir, script, _two_step_script(problem, needs_layout), executable=True)
    entry = ["bash", "problem/" + script]

    examples = _write_examples(problem, staging_dir)
    _write(staging_dir, "pyproject.toml", _pyproject(name, problem["dependencies"]))
    timeout = DEFAULT_TIMEOUT
    if problem["time_limit_s"] and problem["time_limit_s"] + 120 > timeout:
        timeout = int(math.ceil(problem["time_limit_s"])) + 300
    _write(staging_dir, "hill.yaml", _hill_yaml(name, problem, entry, timeout, unit_tests))
    os.makedirs(os.path.join(staging_dir, "tests"), exist_ok=True)
    _write(staging_dir, os.path.join("tests", TEST_FILE), _hill_test(problem, entry, examples[0], timeout,
                                                                     _is_placeholder(staging_dir, examples[0])))
    if not problem["holdout"]:
        notes.append("the problem has no holdout split, so `final: {budget: 0}` refuses `hills eval --final`")
    problem["placeholder"] = _is_placeholder(staging_dir, examples[0])
    _write(staging_dir, "README.md", _readme(problem, entry, examples, held_out, notes))
    return {"problem": problem["problem_id"], "shape": problem["shape"], "entry": entry,
            "private": sorted(held_out.values()), "examples": examples, "notes": notes,
            "warnings": problem["warnings"]}


def new_hill(name: str, source_dir: str, project_dir: str | None = None,
             warn: Callable[[str], object] | None = None) -> dict[str, Any]:
    """`hills new NAME --from-hillclimb DIR`: check the problem first (so a bad
    one leaves nothing), then create the hill through hill.create."""
    from . import hill

    problem = read_problem(source_dir)
    for warning in problem["warnings"]:
        if warn:
            warn(f"warning: {warning}")
    summary = {}

    def populate(staging: str) -> None:
        summary.update(import_problem(problem["source"], staging, name=name))

    created = hill.create(name, "hillclimb", project_dir=project_dir, populate=populate)
    created["import"] = summary
    return created


def _copy_problem(source: str, staging: str, skip: set[str], renamed: dict[str, str]) -> None:
    def ignore(folder: str, names: list[str]) -> set[str]:
        rel_folder = os.path.relpath(folder, source).replace(os.sep, "/")
        ignored = set()
        for entry in names:
            rel = entry if rel_folder == "." else f"{rel_folder}/{entry}"
            if entry in SKIPPED or entry.endswith((".pyc", ".pyo")) or rel in skip:
                ignored.add(entry)
            elif rel_folder == "." and entry in renamed:
                ignored.add(entry)
        return ignored

    # A symbolic link is copied as what it points at: a hill holds plain files.
    shutil.copytree(source, staging, ignore=ignore, dirs_exist_ok=True)
    for old, new in renamed.items():
        origin = os.path.join(source, old)
        if os.path.isdir(origin):
            shutil.copytree(origin, os.path.join(staging, new), ignore=shutil.ignore_patterns(*SKIPPED))
        else:
            shutil.copy2(origin, os.path.join(staging, new))


def _write(staging: str, rel: str, text: str, executable: bool = False) -> None:
    path = os.path.join(staging, rel)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    if executable:
        os.chmod(path, 0o755)


def _is_shell(path: str) -> bool:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            first = handle.readline()
    except OSError:
        return False
    if not first.startswith("#!"):
        return path.endswith(".sh")
    return bool(re.search(r"\b(ba)?sh\b", first))


def _quote(token: str, problem: dict[str, Any], scoring: bool = False) -> str:
    """One argv token as a bash word: {python}, {solution} and {result} become
    the HILLS_* variables, a problem file becomes its path under ./problem.
    {python} is the confined interpreter in the solution step and the
    trusted one, `$HILLS_SCORING_PYTHON`, in the scoring step."""
    if "{" not in token:
        rel = _inside(token)
        if rel is not None and os.path.isfile(os.path.join(problem["source"], rel)):
            return shlex.quote("problem/" + rel)
        return shlex.quote(token)
    parts = re.split(r"(\{(?:python|solution|result)\})", token)
    words = dict(PLACEHOLDERS, python='"$HILLS_SCORING_PYTHON"') if scoring else PLACEHOLDERS
    return "".join(words[p[1:-1]] if p[1:-1] in words and p.startswith("{") else
                   (shlex.quote(p) if p else "") for p in parts)


def _verifier_wrapper(problem: dict[str, Any]) -> str:
    verifier = "problem/" + problem["verifier"]
    runner = f"bash {shlex.quote(verifier)}" if _is_shell(os.path.join(problem["source"], problem["verifier"])) \
        else shlex.quote(verifier)
    lines = [
        "#!/usr/bin/env bash",
        f"# Written by `hills new --from-hillclimb` for the hillclimb problem '{problem['problem_id']}'.",
        "# Runs the problem's own verifier unchanged; hillclimb passes it --holdout on",
        "# the hidden split, and so does this.",
        "set -euo pipefail",
    ]
    if problem["holdout"]:
        lines += ['if [ "${HILLS_SPLIT:-validation}" = holdout ]; then',
                  f"  exec {runner} --holdout", "fi"]
    lines.append(f"exec {runner}")
    return "\n".join(lines) + "\n"


def _two_step_script(problem: dict[str, Any], needs_layout: bool) -> str:
    run = problem["run"] or ["{python}", "{solution}"]
    run_words = " ".join(_quote(token, problem) for token in run)
    score_words = " ".join(_quote(token, problem, scoring=True) for token in problem["score"])
    lines = [
        "#!/usr/bin/env bash",
        f"# Written by `hills new --from-hillclimb` for the hillclimb problem '{problem['problem_id']}':",
        "# its two steps as one command verifier. First the solution runs (the",
        "# problem's `run:` step, or solution.py itself) through $HILLS_PYTHON, the",
        "# confined interpreter, then the result file is deleted, so only the",
        "# scorer can write it, then the scorer runs with $HILLS_SCORING_PYTHON.",
        "set -euo pipefail",
        "",
    ]
    if needs_layout:
        lines += [
            "# hillclimb keeps some of the problem's files from the solution; hills",
            "# keeps them in the hill's private/ folder. Before each step, lay the",
            "# problem out afresh where its scripts look for those files (the holdout",
            "# inputs only on the holdout split, the scorer's private files only for",
            "# the scorer) and point ./problem and ./data at that layout.",
            'hill_dir="$(cd problem && pwd -P)"',
            "layouts=()",
            "trap 'rm -rf ${layouts[@]+\"${layouts[@]}\"}' EXIT",
            "lay_out() {",
            "  local layout",
            '  layout="$(mktemp -d "${2:-$PWD}/.hillclimb-problem.XXXXXX")"',
            '  layouts+=("$layout")',
            f'  "$HILLS_SCORING_PYTHON" "$hill_dir/{LAYOUT_SCRIPT}" "$hill_dir" "$layout" '
            f'"${{HILLS_SPLIT:-validation}}" "$1"',
            '  ln -sfn "$layout" problem',
            '  if [ -e "$layout/data" ]; then ln -sfn "$layout/data" data; fi',
            "}",
            "",
            "lay_out solution",
        ]
    if problem["time_limit_s"]:
        seconds = problem["time_limit_s"]
        seconds = int(seconds) if float(seconds).is_integer() else seconds
        lines += [
            f"# problem.yaml: time_limit_s: {seconds} (a slower solution is a failed attempt)",
            "limit=()",
            f"if command -v timeout >/dev/null 2>&1; then limit=(timeout --kill-after=5 {seconds}); fi",
            f'${{limit[@]+"${{limit[@]}}"}} {run_words}',
        ]
    else:
        lines.append(run_words)
    lines += [
        "",
        'rm -f "$HILLS_RESULT"  # only the scorer may score',
        "",
    ]
    if needs_layout:
        # The scorer's layout lies outside the submission's folder, in the
        # run folder beside the result: the scoring phase runs no file of
        # the submission (docs/confinement.md), and a layout inside it
        # would be one.
        lines += ['lay_out scorer "$(dirname "$HILLS_RESULT")"  # a fresh layout: nothing the solution changed '
                  'in the last one is used', ""]
    go = "" if needs_layout else "exec "
    if problem["holdout"]:
        lines += ['if [ "${HILLS_SPLIT:-validation}" = holdout ]; then',
                  f"  {go}{score_words} --holdout",
                  "  exit",
                  "fi"]
    lines.append(f"{go}{score_words}")
    return "\n".join(lines) + "\n"


def _layout_script(problem: dict[str, Any]) -> str:
    private = {rel: "private/" + rel for rel in problem["private"]}
    holdout = {rel: "private/" + rel for rel in problem["holdout_inputs"]}
    own_private = os.path.isdir(os.path.join(problem["source"], "private"))
    return LAYOUT_TEMPLATE.replace("@PROBLEM@", problem["problem_id"]) \
        .replace("@PRIVATE@", json.dumps(private, sort_keys=True)) \
        .replace("@HOLDOUT@", json.dumps(holdout, sort_keys=True)) \
        .replace("@SKIP@", json.dumps(sorted({".vc", "__pycache__"} | (set() if own_private else {"private"}))))


LAYOUT_TEMPLATE = '''"""Lay the hillclimb problem '@PROBLEM@' out as hillclimb would (written by
`hills new --from-hillclimb`; the hill's verifier runs it before each eval).

    python hills_layout.py HILL_DIR LAYOUT_DIR SPLIT STEP

hillclimb keeps some files of a problem from its solutions; hills keeps them
in the hill's private/ folder instead. This rebuilds the problem folder in
LAYOUT_DIR for one STEP (solution or scorer): small top-level files are
copied (so a script that finds its data next to its own file finds it here),
everything else is linked, and the held-out paths are put back where the
problem's scripts expect them: the holdout inputs only on the holdout split
(copied, for the confined solution step), the scorer's private files only
for the scorer (linked). Standard library only.
"""

import os
import shutil
import sys

PRIVATE = @PRIVATE@
HOLDOUT = @HOLDOUT@
COPY_LIMIT = 1024 * 1024
SKIP = set(@SKIP@)


def link_or_copy(source, target):
    if os.path.isfile(source) and not os.path.islink(source) and os.path.getsize(source) <= COPY_LIMIT:
        shutil.copy2(source, target)
    else:
        os.symlink(source, target)


def fill(source_dir, target_dir):
    for name in sorted(os.listdir(source_dir)):
        if name not in SKIP:
            link_or_copy(os.path.join(source_dir, name), os.path.join(target_dir, name))


def place(layout, rel, target, copy=False):
    parts = rel.split("/")
    current = layout
    for part in parts[:-1]:
        path = os.path.join(current, part)
        if os.path.islink(path):
            source = os.path.realpath(path)
            os.unlink(path)
            os.mkdir(path)
            fill(source, path)
        elif not os.path.isdir(path):
            os.mkdir(path)
        current = path
    final = os.path.join(current, parts[-1])
    if os.path.isdir(final) and not os.path.islink(final):
        shutil.rmtree(final)
    elif os.path.lexists(final):
        os.unlink(final)
    if not copy:
        os.symlink(target, final)
    elif os.path.isdir(target):
        shutil.copytree(target, final)
    else:
        shutil.copy2(target, final)


def main(hill_dir, layout, split, step):
    fill(hill_dir, layout)
    wanted = dict(PRIVATE) if step == "scorer" else {}
    if split == "holdout":
        wanted.update(HOLDOUT)
    for rel, stored in sorted(wanted.items()):
        target = os.path.join(hill_dir, stored)
        if not os.path.exists(target):
            print(f"error: held-out file '{stored}' is missing from the hill", file=sys.stderr)
            return 1
        # The solution runs confined, where private/ does not exist: its
        # holdout inputs are copies.
        place(layout, rel, target, copy=step == "solution")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
'''


def _write_examples(problem: dict[str, Any], staging: str) -> list[str]:
    """examples/<name>/solution.py from the problem's baseline; returns the
    example names, the one the hill's test scores first."""
    source = problem["source"]
    names = []
    folder = os.path.join(staging, "examples")
    existing = sorted(entry for entry in os.listdir(folder) if not entry.startswith(".")) \
        if os.path.isdir(folder) else []
    example = "hillclimb-baseline" if "baseline" in existing else "baseline"
    target = os.path.join(folder, example)
    if problem["baseline_file"] or problem["baseline_files"]:
        os.makedirs(target)
        if problem["baseline_file"]:
            shutil.copy2(os.path.join(source, problem["baseline_file"]), os.path.join(target, "solution.py"))
        for dest, src in sorted(problem["baseline_files"].items()):
            shutil.copy2(os.path.join(source, src), os.path.join(target, str(dest)))
        if not problem["baseline_file"]:
            _write(target, "solution.py", "# The baseline's files are already in this folder: nothing to compute.\n")
        names.append(example)
    elif os.path.isfile(os.path.join(source, "solution.py")):
        os.makedirs(target)
        shutil.copy2(os.path.join(source, "solution.py"), os.path.join(target, "solution.py"))
        names.append(example)
    names += [entry for entry in existing if os.path.isfile(os.path.join(folder, entry, "solution.py"))]
    if not names:
        # hillclimb runs a problem without a baseline; hills needs an example
        # to check the evaluator's contract and to probe its confinement.
        placeholder = PLACEHOLDER if PLACEHOLDER not in existing else "hills-" + PLACEHOLDER
        os.makedirs(os.path.join(folder, placeholder))
        _write(os.path.join(folder, placeholder), "solution.py", PLACEHOLDER_SOLUTION)
        names.append(placeholder)
    return names


PLACEHOLDER = "placeholder"
PLACEHOLDER_SOLUTION = """\
# A placeholder: the hillclimb problem this hill was imported from has no
# baseline solution. It computes nothing; `hills check` evaluates it to hold
# the verifier to its contract and to probe its confinement, and does not
# expect it to score. Write a solution.py that solves the task instead.
"""


def _pyproject(name: str, dependencies: list[str]) -> str:
    import tomli_w

    return ("# The evaluator's environment, from the hillclimb problem's requirements.\n"
            + tomli_w.dumps({"project": {"name": f"hill-{name}", "version": "0.1.0", "requires-python": ">=3.9",
                                         "dependencies": dependencies}}))


def _yaml_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _hill_yaml(name: str, problem: dict[str, Any], entry: list[str], timeout: int,
               unit_tests: dict[str, Any] | None) -> str:
    description = f"hillclimb problem {problem['problem_id']}: " + \
        ("maximise " if problem["direction"] == "max" else "minimise ") + problem["metric"]
    lines = [
        f"# Imported from the hillclimb problem '{problem['problem_id']}' by `hills new --from-hillclimb`.",
        "spec: 1",
        f"name: {_yaml_string(name)}",
        "version: 0.1.0",
        f"description: {_yaml_string(description)}",
        "",
        "evaluator:",
        "  shape: command   # run with cwd = the submission; ./problem is this hill, ./data its data/",
        "  entry: [" + ", ".join(_yaml_string(token) for token in entry) + "]",
        "",
        f"timeout: {timeout}",
        "",
        "metrics:",
        f"  - {{name: {_yaml_string(problem['metric'])}, direction: {problem['direction']}}}",
        "",
        "params: {}",
        f"network: {'true' if problem['network'] else 'false'}   # problem.yaml: allow_internet_during_solution",
    ]
    if not problem["holdout"]:
        lines += ["", "# The problem has no holdout split: --final is refused.", "final:", "  budget: 0"]
    if unit_tests:
        lines += ["", "unit_tests:",
                  "  command: [" + ", ".join(_yaml_string(token) for token in unit_tests["command"]) + "]",
                  f"  path: {_yaml_string(unit_tests['path'])}"]
    return "\n".join(lines) + "\n"


def _is_placeholder(staging: str, example: str) -> bool:
    path = os.path.join(staging, "examples", example, "solution.py")
    with open(path, encoding="utf-8") as handle:
        return handle.read() == PLACEHOLDER_SOLUTION


def _hill_test(problem: dict[str, Any], entry: list[str], example: str, timeout: int,
               placeholder: bool = False) -> str:
    return HILL_TEST.replace("@ENTRY@", json.dumps(entry)) \
        .replace("@EXAMPLE@", json.dumps(example)) \
        .replace("@PLACEHOLDER@", "True" if placeholder else "False") \
        .replace("@HOLDOUT@", "True" if problem["holdout"] else "False") \
        .replace("@HELD_OUT@", json.dumps(sorted("private/" + rel for rel in problem["holdout_inputs"]))) \
        .replace("@TIMEOUT@", str(timeout))


HILL_TEST = '''"""Checks written by `hills new --from-hillclimb`: the verifier scores the
example the way `hills eval` runs it (plain asserts, run by `hills check`)."""

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

HILL = Path(__file__).resolve().parent.parent
ENTRY = @ENTRY@
EXAMPLE = @EXAMPLE@
HOLDOUT = @HOLDOUT@
HELD_OUT = @HELD_OUT@
# The example is a placeholder that computes nothing (the problem has no
# baseline): it may fail, but the verifier must still keep its contract.
PLACEHOLDER = @PLACEHOLDER@


def run_verifier(tmp_path, split):
    """The example in a submission folder with ./problem and ./data linked, the
    HILLS_* and HILLCLIMB_* variables set, as a command eval has them."""
    work = tmp_path / "submission"
    shutil.copytree(str(HILL / "examples" / EXAMPLE), str(work))
    (work / "problem").symlink_to(HILL)
    if (HILL / "data").is_dir():
        (work / "data").symlink_to(HILL / "data")
    result = tmp_path / "result.json"
    values = {"PYTHON": sys.executable, "RESULT": str(result), "SUBMISSION": str(work),
              "SOLUTION": str(work / "solution.py"), "SPLIT": split, "REPLICATE_SEED": "0", "HILL": str(HILL)}
    env = dict(os.environ)
    for key, value in values.items():
        env["HILLS_" + key] = value
        env["HILLCLIMB_" + key] = value
    env["HILLCLIMB_TRIAL_SEED"] = "0"
    env["HILLS_SCORING_PYTHON"] = sys.executable
    done = subprocess.run(ENTRY, cwd=str(work), env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=@TIMEOUT@)
    if PLACEHOLDER and done.returncode != 0:
        return None  # a candidate that computes nothing is buggy: the contract holds
    assert done.returncode == 0, "verifier exited %d: %s" % (done.returncode, done.stderr[-2000:])
    assert result.is_file(), "the verifier exited 0 without writing the result file"
    value = json.loads(result.read_text())
    score = value["score"] if isinstance(value, dict) else value
    assert isinstance(score, (int, float)) and not isinstance(score, bool) and math.isfinite(score), value
    return score


def test_example_scores_on_validation(tmp_path):
    run_verifier(tmp_path, "validation")


def test_example_scores_on_holdout(tmp_path):
    if not HOLDOUT:
        return
    for rel in HELD_OUT:
        assert (HILL / rel).exists(), "held-out input %s is missing" % rel
    run_verifier(tmp_path, "holdout")
'''


def _paragraph(text: str) -> str:
    return textwrap.fill(text, width=78, break_long_words=False, break_on_hyphens=False)


def _bullet(text: str) -> str:
    return textwrap.fill(text, width=78, initial_indent="- ", subsequent_indent="  ",
                         break_long_words=False, break_on_hyphens=False)


def _readme(problem: dict[str, Any], entry: list[str], examples: list[str], held_out: dict[str, str],
            notes: list[str]) -> str:
    source = problem["source"]
    with open(os.path.join(source, problem["description"]), encoding="utf-8") as handle:
        description = handle.read().strip()
    parts = [description if description.startswith("#") else f"# {problem['problem_id']}\n\n{description}"]
    if problem["contract"]:
        with open(os.path.join(source, problem["contract"]), encoding="utf-8") as handle:
            parts.append("## Contract\n\n" + handle.read().strip())
    better = "higher" if problem["direction"] == "max" else "lower"
    scoring = [
        "## How this hill scores",
        "",
        _paragraph(
            f"The score is `{problem['metric']}`; {better} is better. A submission is a folder holding "
            "`solution.py`. `hills eval` runs `" + " ".join(entry) + "` in a copy of it, where `problem/` is "
            "this hill and `data/` its data folder (when it has one), with the variables hillclimb sets "
            "(`HILLCLIMB_PYTHON`, `HILLCLIMB_SOLUTION`, `HILLCLIMB_RESULT`, `HILLCLIMB_SPLIT`, ...), "
            "also under the `HILLS_*` names."),
    ]
    if problem["holdout"]:
        scoring += ["", _paragraph(
            "`hills eval --final` scores the hidden (holdout) split"
            + (", whose inputs are held out in `private/`." if problem["holdout_inputs"] else "."))]
    scoring += ["", "The solution may use the internet while it runs." if problem["network"]
                else "The solution may not use the internet while it runs."]
    if problem.get("placeholder"):
        scoring += ["", _paragraph(
            f"The problem has no baseline solution: `examples/{examples[0]}/` holds a `solution.py` that "
            "computes nothing, there so that `hills check` can hold the verifier to its contract and probe "
            "its confinement. It is not expected to score; start from an empty `solution.py` of your own.")]
    else:
        scoring += ["", "Examples to start from: " + ", ".join(f"`examples/{name}/`" for name in examples) + "."]
    if problem["references"]:
        scoring += ["", "Reference scores:", ""]
        scoring += [f"- {label}: {value}" for label, value in problem["references"].items()]
    parts.append("\n".join(scoring))
    lines = ["## Import notes", "", _paragraph(
        f"Imported from the hillclimb problem `{problem['problem_id']}` "
        f"({'verifier' if problem['shape'] == 'verifier' else 'run, then score'} shape) by "
        "`hills new --from-hillclimb`; docs/hillclimb.md in hills describes the mapping.")]
    bullets = []
    if held_out:
        bullets.append("held out in `private/` (never in git): " + ", ".join(
            f"`{rel}` as `{target}`" for rel, target in sorted(held_out.items())))
    bullets += notes
    if bullets:
        lines.append("")
        lines += [_bullet(text) for text in bullets]
    parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"
