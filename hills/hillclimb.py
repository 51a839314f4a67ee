"""`hills new --from-hillclimb DIR`: read a hillclimb problem folder and write
the files of an equivalent command-shape hill (docs/hillclimb.md)."""

import json
import math
import os
import re
import shlex
import shutil
import textwrap

from . import yamlfile
from .errors import UsageError

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
HANDLED = {
    "problem_id", "metric", "higher_is_better", "lower_is_better", "maximize", "direction", "description",
    "contract", "verifier", "score", "run", "private", "holdout", "holdout_inputs", "time_limit_s",
    "baseline", "baseline_files", "chart_baselines", "requirements", "unit_tests", "data_dir",
    "allow_internet_during_solution", "allow_network", "solution_kind", "kind",
}
# Names the hill itself owns at its top level: a problem holding one cannot be imported as is.
HILL_OWNED = ("hill.yaml", "pyproject.toml", "uv.lock", "private.lock", "blobs.lock", ".vc")
SKIPPED = {".git", ".vc", "__pycache__", ".pytest_cache", ".venv", ".mypy_cache", ".ruff_cache", ".DS_Store"}
PLACEHOLDERS = {"python": '"$HILLS_PYTHON"', "solution": '"$HILLS_SOLUTION"', "result": '"$HILLS_RESULT"'}


class _Where:
    """Error messages that name problem.yaml and the key."""

    def __init__(self, path):
        self.path = path

    def fail(self, key, expected, got=None, *, missing=False, hint=None):
        if missing:
            raise UsageError(f"'{self.path}': missing key '{key}': expected {expected}", hint=hint)
        raise UsageError(f"'{self.path}': key '{key}': expected {expected}, got {_show(got)}", hint=hint)


def _show(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "nothing"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return repr(value) if isinstance(value, str) else str(value)


def _load_yaml(path):
    data = yamlfile.load(yamlfile.read_text(path), path, typ="safe")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UsageError(f"'{path}': expected a mapping at the top level, got {_show(data)}")
    return {str(key): value for key, value in data.items()}


def _inside(source, rel):
    """`rel` as a clean relative path inside `source`, or None."""
    if not isinstance(rel, str) or not rel or os.path.isabs(rel):
        return None
    norm = os.path.normpath(rel).replace(os.sep, "/")
    if norm == "." or norm == ".." or norm.startswith("../"):
        return None
    return norm


def _file_key(where, source, meta, key, default=None, *, required=False, kind="file"):
    """A problem file named by `key` (or its default): (relative path or None).
    A file named explicitly must exist; a missing default is just absent."""
    explicit = key in meta and meta[key] is not None
    value = meta[key] if explicit else default
    if value is None:
        if required:
            where.fail(key, f"a {kind} in the problem folder", missing=True)
        return None
    rel = _inside(source, value)
    if rel is None:
        where.fail(key, f"a relative path to a {kind} inside the problem folder", value)
    path = os.path.join(source, rel)
    exists = os.path.isdir(path) if kind == "folder" else os.path.isfile(path)
    if not exists:
        if explicit or required:
            raise UsageError(f"'{path}' is missing (named by key '{key}' in '{where.path}')")
        return None
    return rel


def _direction(where, meta):
    found = []
    for key in ("higher_is_better", "lower_is_better", "maximize"):
        if key in meta:
            value = meta[key]
            if not isinstance(value, bool):
                where.fail(key, "true or false, unquoted", value)
            found.append((key, "max" if value == (key != "lower_is_better") else "min"))
    if "direction" in meta:
        value = meta["direction"]
        mapped = {"max": "max", "maximize": "max", "min": "min", "minimize": "min"}.get(value)
        if mapped is None:
            where.fail("direction", "max or min", value)
        found.append(("direction", mapped))
    if not found:
        where.fail("higher_is_better", "true or false (which way the metric improves)", missing=True)
    if len({direction for _, direction in found}) > 1:
        names = " and ".join(f"'{key}'" for key, _ in found)
        raise UsageError(f"'{where.path}': keys {names} disagree on the metric's direction")
    return found[0][1]


def _argv(where, source, key, raw):
    """`run:` or `score:` as a list of tokens: a script alone means `{python} script`."""
    tokens = [raw] if isinstance(raw, str) else raw
    if not isinstance(tokens, list) or not tokens or not all(isinstance(t, str) and t for t in tokens):
        where.fail(key, "a script (e.g. verify.py) or a command as a list of strings", raw)
    if len(tokens) == 1 and tokens[0].endswith(".py"):
        tokens = ["{python}", tokens[0]]
    for token in tokens:
        if token.endswith((".py", ".sh")) and "{" not in token:
            rel = _inside(source, token)
            if rel is None or not os.path.isfile(os.path.join(source, rel)):
                raise UsageError(f"'{os.path.join(source, token)}' is missing (named by key '{key}' in "
                                 f"'{where.path}')")
    return list(tokens)


def _paths(where, source, meta, key):
    raw = meta.get(key)
    if raw is None:
        return []
    items = [raw] if isinstance(raw, str) else raw
    if not isinstance(items, list) or not all(isinstance(item, str) and item for item in items):
        where.fail(key, "a path or a list of paths", raw)
    found = []
    for item in items:
        rel = _inside(source, item)
        if rel is None:
            where.fail(key, "paths inside the problem folder (hills keeps held-out data in the hill's private/)",
                       item, hint="copy the data into the problem folder and name it relative to it")
        if not os.path.exists(os.path.join(source, rel)):
            raise UsageError(f"'{os.path.join(source, rel)}' is missing (named by key '{key}' in '{where.path}')")
        if rel.split("/")[0] in HILL_OWNED + ("private", "examples", "tests"):
            where.fail(key, "a path outside the folders hills owns", item)
        found.append(rel)
    return found


def read_problem(source_dir):
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
    where = _Where(yaml_path)
    notes, warnings = [], []

    if "kind" in meta:
        where.fail("kind", "no 'kind' key (hillclimb retired it: a problem is its verifier command)", meta["kind"])
    solution_kind = meta.get("solution_kind", "program")
    if solution_kind != "program":
        where.fail("solution_kind", "program (hills cannot import climber meta-problems)", solution_kind)

    problem_id = meta.get("problem_id") or os.path.basename(source)
    if not isinstance(problem_id, str):
        where.fail("problem_id", "a string", problem_id)
    metric = meta.get("metric")
    if metric is None:
        where.fail("metric", "a name for the score, e.g. accuracy", missing=True)
    if not isinstance(metric, str) or not metric.strip():
        where.fail("metric", "a non-empty string", metric)
    direction = _direction(where, meta)

    description = _file_key(where, source, meta, "description", DEFAULT_DESCRIPTION)
    if description is None:
        if os.path.isfile(os.path.join(source, "README.md")):
            description = "README.md"
            notes.append("the task text is the problem's README.md (it has no description.md)")
        else:
            raise UsageError(f"'{os.path.join(source, DEFAULT_DESCRIPTION)}' is missing (key 'description' in "
                             f"'{yaml_path}')", hint="a hillclimb problem describes its task in description.md")
    contract = _file_key(where, source, meta, "contract", DEFAULT_CONTRACT)

    holdout = meta.get("holdout", False)
    if not isinstance(holdout, bool):
        where.fail("holdout", "true or false", holdout)
    network = meta.get("allow_internet_during_solution", meta.get("allow_network", False))
    if not isinstance(network, bool):
        key = "allow_internet_during_solution" if "allow_internet_during_solution" in meta else "allow_network"
        where.fail(key, "true or false", network)

    if not meta.get("score"):
        for key in ("run", "private", "holdout_inputs"):
            if meta.get(key):
                where.fail("score", f"a scorer (e.g. score: verify.py) when '{key}' is set", missing=True)
    score = _argv(where, source, "score", meta["score"]) if meta.get("score") else None
    run = _argv(where, source, "run", meta["run"]) if meta.get("run") else None
    private = _paths(where, source, meta, "private")
    holdout_inputs = _paths(where, source, meta, "holdout_inputs")
    if holdout_inputs and not holdout:
        where.fail("holdout", "true when 'holdout_inputs' is set", holdout)
    overlap = set(private) & set(holdout_inputs)
    if overlap:
        where.fail("holdout_inputs", "paths not also listed under 'private'", sorted(overlap)[0])
    time_limit = meta.get("time_limit_s")
    if time_limit is not None:
        if isinstance(time_limit, bool) or not isinstance(time_limit, (int, float)) or not math.isfinite(time_limit) \
                or time_limit <= 0:
            where.fail("time_limit_s", "a positive number of seconds", time_limit)
        if score is None:
            notes.append("`time_limit_s` only limits the solution step of a two-step problem; ignored here")
            time_limit = None

    verifier = None
    if score is None:
        name = meta.get("verifier", DEFAULT_VERIFIER)
        rel = _inside(source, name) if isinstance(name, str) else None
        if rel is None:
            where.fail("verifier", "a relative path to the verifier script", name)
        if not os.path.isfile(os.path.join(source, rel)):
            raise UsageError(f"'{os.path.join(source, rel)}' is missing: the problem has no verifier",
                             hint=f"give the problem a {DEFAULT_VERIFIER}, or a scorer with 'score:' in "
                                  f"'{yaml_path}'")
        verifier = rel
    elif "verifier" in meta:
        notes.append("`verifier` is ignored: `score` makes this a two-step problem, as in hillclimb")

    data_dir = meta.get("data_dir")
    if data_dir is not None and _inside(source, data_dir) != "data":
        where.fail("data_dir", "data (hills links ./data to the hill's data/ folder only)", data_dir,
                   hint="rename the folder to data/")

    requirements = _file_key(where, source, meta, "requirements")
    if requirements is None and os.path.isfile(os.path.join(source, "requirements.txt")):
        requirements = "requirements.txt"
        notes.append("requirements.txt is used although problem.yaml does not name it")
    if requirements is None:
        dependencies = list(DEFAULT_RUNTIME)
        notes.append("no requirements file: the environment gets hillclimb's default runtime ("
                     + ", ".join(DEFAULT_RUNTIME) + ")")
    else:
        dependencies = _read_requirements(os.path.join(source, requirements))

    unit_tests = None
    if meta.get("unit_tests") is not None:
        raw = meta["unit_tests"]
        if not isinstance(raw, dict):
            where.fail("unit_tests", "a mapping with root and command", raw)
        for key in raw:
            if key not in ("root", "command"):
                where.fail(f"unit_tests.{key}", "only root and command", key)
        root = _file_key(where, source, {"unit_tests.root": raw.get("root")}, "unit_tests.root", required=True,
                         kind="folder")
        command = raw.get("command")
        if not isinstance(command, list) or not command or not all(isinstance(t, str) and t for t in command):
            where.fail("unit_tests.command", "a command as a list of strings", command)
        unit_tests = {"root": root, "command": command}

    baseline = meta.get("baseline")
    baseline_file = None
    if isinstance(baseline, str):
        baseline_file = _file_key(where, source, meta, "baseline")
    elif baseline is not None and (isinstance(baseline, bool) or not isinstance(baseline, (int, float))):
        where.fail("baseline", "a number or a file such as baseline.py", baseline)
    baseline_files = meta.get("baseline_files") or {}
    if not isinstance(baseline_files, dict):
        where.fail("baseline_files", "a mapping of submission file to problem file", baseline_files)
    for dest, src in baseline_files.items():
        if _inside(source, str(dest)) is None or "/" in str(dest):
            where.fail(f"baseline_files.{dest}", "a plain file name in the submission", dest)
        if _file_key(where, source, {f"baseline_files.{dest}": src}, f"baseline_files.{dest}") is None:
            where.fail(f"baseline_files.{dest}", "a file of the problem", src)
    chart_baselines = meta.get("chart_baselines") or {}
    if not isinstance(chart_baselines, dict) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in chart_baselines.values()):
        where.fail("chart_baselines", "a mapping of label to score", chart_baselines)
    references = dict(chart_baselines)
    if isinstance(baseline, (int, float)) and not isinstance(baseline, bool):
        references = {"baseline": baseline, **{k: v for k, v in references.items() if k != "baseline"}}

    examples_dir = os.path.join(source, "examples")
    if not (baseline_file or baseline_files or os.path.isfile(os.path.join(source, "solution.py")) or (
            os.path.isdir(examples_dir) and any(os.path.isfile(os.path.join(examples_dir, entry, "solution.py"))
                                                for entry in os.listdir(examples_dir)))):
        raise UsageError(f"'{yaml_path}': no example solution to import: key 'baseline' names no file, and "
                         "there is no baseline_files, solution.py or examples/NAME/solution.py",
                         hint="set 'baseline: baseline.py' to a solution that scores")

    for key in sorted(meta):
        if key in KEPT_UNUSED:
            notes.append(f"`{key}` is not used by hills: {KEPT_UNUSED[key]}")
        elif key not in HANDLED:
            warnings.append(f"'{yaml_path}': unknown key '{key}' is ignored")
            notes.append(f"unknown key `{key}` in problem.yaml was ignored")

    for name in HILL_OWNED:
        if os.path.lexists(os.path.join(source, name)):
            raise UsageError(f"'{os.path.join(source, name)}': a hill writes its own '{name}'",
                             hint="move or rename it in the problem folder, then import again")

    return {
        "source": source, "yaml_path": yaml_path, "problem_id": problem_id, "metric": metric.strip(),
        "direction": direction, "description": description, "contract": contract, "holdout": holdout,
        "network": network, "shape": "verifier" if score is None else "run-then-score", "verifier": verifier,
        "run": run, "score": score, "private": private, "holdout_inputs": holdout_inputs,
        "time_limit_s": time_limit, "requirements": requirements, "dependencies": dependencies,
        "unit_tests": unit_tests, "baseline_file": baseline_file, "baseline_files": baseline_files,
        "references": references, "notes": notes, "warnings": warnings,
    }


def _read_requirements(path):
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

def import_problem(source_dir, staging_dir, name=None):
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

    def generated_name(preferred, fallback):
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
    _write(staging_dir, os.path.join("tests", TEST_FILE), _hill_test(problem, entry, examples[0], timeout))
    if not problem["holdout"]:
        notes.append("the problem has no holdout split, so `final: {budget: 0}` refuses `hills eval --final`")
    _write(staging_dir, "README.md", _readme(problem, entry, examples, held_out, notes))
    return {"problem": problem["problem_id"], "shape": problem["shape"], "entry": entry,
            "private": sorted(held_out.values()), "examples": examples, "notes": notes,
            "warnings": problem["warnings"]}


def new_hill(name, source_dir, project_dir=None, warn=None):
    """`hills new NAME --from-hillclimb DIR`: check the problem first (so a bad
    one leaves nothing), then create the hill through hill.create."""
    from . import hill

    problem = read_problem(source_dir)
    for warning in problem["warnings"]:
        if warn:
            warn(f"warning: {warning}")
    summary = {}

    def populate(staging):
        summary.update(import_problem(problem["source"], staging, name=name))

    created = hill.create(name, "hillclimb", project_dir=project_dir, populate=populate)
    created["import"] = summary
    return created


def _copy_problem(source, staging, skip, renamed):
    def ignore(folder, names):
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


def _write(staging, rel, text, executable=False):
    path = os.path.join(staging, rel)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    if executable:
        os.chmod(path, 0o755)


def _is_shell(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            first = handle.readline()
    except OSError:
        return False
    if not first.startswith("#!"):
        return path.endswith(".sh")
    return bool(re.search(r"\b(ba)?sh\b", first))


def _quote(token, problem):
    """One argv token as a bash word: {python}, {solution} and {result} become
    the HILLS_* variables, a problem file becomes its path under ./problem."""
    if "{" not in token:
        rel = _inside(problem["source"], token)
        if rel is not None and os.path.isfile(os.path.join(problem["source"], rel)):
            return shlex.quote("problem/" + rel)
        return shlex.quote(token)
    parts = re.split(r"(\{(?:python|solution|result)\})", token)
    return "".join(PLACEHOLDERS[p[1:-1]] if p[1:-1] in PLACEHOLDERS and p.startswith("{") else
                   (shlex.quote(p) if p else "") for p in parts)


def _verifier_wrapper(problem):
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


def _two_step_script(problem, needs_layout):
    run = problem["run"] or ["{python}", "{solution}"]
    run_words = " ".join(_quote(token, problem) for token in run)
    score_words = " ".join(_quote(token, problem) for token in problem["score"])
    lines = [
        "#!/usr/bin/env bash",
        f"# Written by `hills new --from-hillclimb` for the hillclimb problem '{problem['problem_id']}':",
        "# its two steps as one command verifier. First the solution runs (the",
        "# problem's `run:` step, or solution.py itself), then the result file is",
        "# deleted, so only the scorer can write it, then the scorer runs.",
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
            '  layout="$(mktemp -d "$PWD/.hillclimb-problem.XXXXXX")"',
            '  layouts+=("$layout")',
            f'  "$HILLS_PYTHON" "$hill_dir/{LAYOUT_SCRIPT}" "$hill_dir" "$layout" "${{HILLS_SPLIT:-validation}}" "$1"',
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
        lines += ["lay_out scorer  # a fresh layout: nothing the solution changed in the last one is used", ""]
    go = "" if needs_layout else "exec "
    if problem["holdout"]:
        lines += ['if [ "${HILLS_SPLIT:-validation}" = holdout ]; then',
                  f"  {go}{score_words} --holdout",
                  "  exit",
                  "fi"]
    lines.append(f"{go}{score_words}")
    return "\n".join(lines) + "\n"


def _layout_script(problem):
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
everything else is linked, and the held-out paths are linked back to where
the problem's scripts expect them: the holdout inputs only on the holdout
split, the scorer's private files only for the scorer. Standard library only.
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


def place(layout, rel, target):
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
    os.symlink(target, final)


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
        place(layout, rel, target)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
'''


def _write_examples(problem, staging):
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
        raise UsageError(f"'{problem['yaml_path']}': no example solution to import: key 'baseline' names no "
                         "file, and there is no baseline_files, solution.py or examples/NAME/solution.py",
                         hint="set 'baseline: baseline.py' to a solution that scores")
    return names


def _pyproject(name, dependencies):
    import tomli_w

    return ("# The evaluator's environment, from the hillclimb problem's requirements.\n"
            + tomli_w.dumps({"project": {"name": f"hill-{name}", "version": "0.1.0", "requires-python": ">=3.9",
                                         "dependencies": dependencies}}))


def _yaml_string(text):
    return json.dumps(text, ensure_ascii=False)


def _hill_yaml(name, problem, entry, timeout, unit_tests):
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


def _hill_test(problem, entry, example, timeout):
    return HILL_TEST.replace("@ENTRY@", json.dumps(entry)) \
        .replace("@EXAMPLE@", json.dumps(example)) \
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
    done = subprocess.run(ENTRY, cwd=str(work), env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=@TIMEOUT@)
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


def _paragraph(text):
    return textwrap.fill(text, width=78, break_long_words=False, break_on_hyphens=False)


def _bullet(text):
    return textwrap.fill(text, width=78, initial_indent="- ", subsequent_indent="  ",
                         break_long_words=False, break_on_hyphens=False)


def _readme(problem, entry, examples, held_out, notes):
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
