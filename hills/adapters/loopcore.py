"""What the loop adapters share (docs/adapters.md): the hill and the file a
loop's candidate is bound to, the submission folder made from the candidate,
and the signed report read in the loop's terms (a score to maximise, whether
it passed or was an error, feedback in words)."""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from hills import api
from hills.base.errors import HillsError, UsageError

# The environment a loop's configuration can set where it can only name a
# file (OpenEvolve's evaluator, ShinkaEvolve's evaluate.py). Not HILLS_HILL:
# hills sets that one for its own verifiers and drops it from a caller.
HILL_VARIABLE = "HILLS_LOOP_HILL"
FILE_VARIABLE = "HILLS_LOOP_FILE"
BASE_VARIABLE = "HILLS_LOOP_BASE"
FLOOR_VARIABLE = "HILLS_LOOP_FLOOR"
PARAMS_VARIABLE = "HILLS_LOOP_PARAMS"

# Metric names a loop gives a meaning of its own: a hill's metric of that
# name goes to the loop as `metric_NAME`, so it cannot pose as the score or
# mark every evaluation as an error.
RESERVED = frozenset({"combined_score", "error", "timeout", "passed"})
# Statuses that carry a measurement: the evaluator ran and judged the
# candidate. Every other one (buggy, refused, interrupted) is an error to
# the loop.
JUDGED = frozenset({"passing", "failing", "implausible"})


@dataclass(frozen=True)
class Binding:
    """Which hill a loop's candidates go to, and how each becomes a submission."""

    hill: str
    loop: str  # the loop's name: the attempt's note, so `hills attempts` says who asked
    file: str | None = None  # the candidate's name inside the submission; None: the hill's default
    base: str | None = None  # a folder the submission starts from, the candidate written over it
    floor: float = -math.inf  # the score of a report that did not pass
    params: Mapping[str, Any] | None = None  # hill.yaml params, as `hills eval -p`


@dataclass(frozen=True)
class Reading:
    """One report in a loop's terms."""

    report: api.Report
    score: float  # the report's fitness when it passed, else the binding's floor
    passed: bool
    error: bool  # nothing was judged: the loop's own error shape applies
    metrics: dict[str, float]  # the report's metrics as they are (not oriented), reserved names prefixed
    feedback: str  # one line: the status and the score, or why it did not pass


def binding(loop: str, hill: str | None = None, *, file: str | None = None, base: str | None = None,
            floor: float | None = None, params: Mapping[str, Any] | None = None,
            environ: Mapping[str, str] | None = None) -> Binding:
    """The binding of `loop`: each argument given, else its variable of the
    environment (HILLS_LOOP_*), else its default."""
    environ = os.environ if environ is None else environ
    hill = hill or environ.get(HILL_VARIABLE) or None
    if not hill:
        raise UsageError(f"no hill named for the {loop} adapter: {HILL_VARIABLE} is unset",
                         hint=f"set {HILL_VARIABLE}=NAME in the loop's environment, or point the loop at a "
                              f"binding file ('python -m hills.adapters {loop} NAME' prints one)")
    file = file or environ.get(FILE_VARIABLE) or None
    if file is not None:
        file = checked_name(file, FILE_VARIABLE)
    base = base or environ.get(BASE_VARIABLE) or None
    if base is not None and not os.path.isdir(base):
        raise UsageError(f"{BASE_VARIABLE}: '{base}' is not a folder",
                         hint="name the folder whose files every submission starts from, or unset it")
    if floor is None:
        floor = _floor(environ.get(FLOOR_VARIABLE))
    elif math.isnan(floor) or floor == math.inf:
        raise UsageError(f"the floor must be a number below +inf, got {floor!r}")
    if params is None and environ.get(PARAMS_VARIABLE):
        params = _params(environ[PARAMS_VARIABLE])
    return Binding(hill=hill, loop=loop, file=file, base=base, floor=floor, params=params)


def _floor(text: str | None) -> float:
    if text is None or not text.strip():
        return -math.inf
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if math.isnan(value) or value == math.inf:
        raise UsageError(f"{FLOOR_VARIABLE} must be a number (or -inf), got '{text}'",
                         hint="it is the score the loop gets for a candidate that did not pass")
    return value


def _params(text: str) -> dict[str, Any]:
    try:
        loaded = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{PARAMS_VARIABLE} is not JSON: {exc.msg}",
                         hint='write an object of hill.yaml params, such as {"n": 26}') from None
    if not isinstance(loaded, dict):
        raise UsageError(f"{PARAMS_VARIABLE} must be a JSON object of hill.yaml params, got {type(loaded).__name__}",
                         hint='such as {"n": 26}')
    return loaded


def checked_name(name: str, source: str) -> str:
    """`name` when it is a relative path of plain parts (a file inside the
    submission); a usage error naming `source` otherwise."""
    parts = name.split("/")
    if not name or name.startswith("/") or "\\" in name or "\0" in name \
            or any(part in ("", ".", "..") for part in parts):
        raise UsageError(f"{source}: '{name}' is not a file name inside the submission",
                         hint="name a relative path such as solution.py or src/main.py")
    return name


# The default candidate name of each hill, looked up once per process: a
# loop evaluates thousands of candidates against the same hill.
_DEFAULT_FILES: dict[str, str] = {}


def candidate_file(bound: Binding) -> str:
    """The name the candidate takes inside the submission: the binding's
    own, else the file the hill's solution phase runs (hill.yaml
    `solution.when`), else the one file of the hill's first example."""
    if bound.file:
        return bound.file
    if bound.hill not in _DEFAULT_FILES:
        _DEFAULT_FILES[bound.hill] = _default_file(bound.hill)
    return _DEFAULT_FILES[bound.hill]


def _default_file(hill: str) -> str:
    described = api.describe(hill)
    hill_dir = described.get("path")
    if isinstance(hill_dir, str) and os.path.isdir(hill_dir):
        when = _solution_when(hill_dir)
        if when:
            return when
        examples = described.get("examples") or []
        if examples:
            folder = Path(hill_dir, "examples", str(examples[0]))
            try:
                files = sorted(path for path in folder.rglob("*") if path.is_file()) if folder.is_dir() else []
            except OSError:  # a service's hill, say, whose folder is not ours to read
                files = []
            if len(files) == 1:
                return files[0].relative_to(folder).as_posix()
    raise UsageError(f"cannot tell which file of a submission to hill '{hill}' a candidate is",
                     hint=f"set {FILE_VARIABLE} to its name inside the submission, such as solution.py")


def _solution_when(hill_dir: str) -> str | None:
    from hills.disk import hill as hill_files

    try:
        solution = hill_files.working_manifest(hill_dir).get("solution")
    except (HillsError, OSError):
        return None
    when = solution.get("when") if isinstance(solution, dict) else None
    return when if isinstance(when, str) and when else None


def write_submission(files: Mapping[str, str | bytes], bound: Binding, folder: Path) -> Path:
    """The submission folder `folder`: the binding's base, if any, with
    `files` ({name inside the submission: content}) written over it."""
    if bound.base:
        import shutil

        shutil.copytree(bound.base, folder, symlinks=True)
    else:
        folder.mkdir()
    for name, content in files.items():
        target = folder / checked_name(name, "candidate")
        target.parent.mkdir(parents=True, exist_ok=True)
        data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
        if target.is_symlink():
            target.unlink()  # the base's link is replaced, never written through
        target.write_bytes(data)
    return folder


def evaluate_files(files: Mapping[str, str | bytes], bound: Binding) -> Reading:
    """Evaluate the candidate `files` on the bound hill through hills.api
    (signed, logged, as `hills eval` would) and read the report. A refusal
    before scoring raises api.HillsError."""
    with tempfile.TemporaryDirectory(prefix=f"hills-{bound.loop}-") as scratch:
        folder = write_submission(files, bound, Path(scratch) / "submission")
        # api.evaluate runs `hills eval` as its own process: evaluations the
        # loop starts from several threads at once are concurrent evals,
        # which hills keeps apart as it does for any two commands.
        report = api.evaluate(str(folder), bound.hill, params=dict(bound.params) if bound.params else None,
                              note=bound.loop)
    return read(report, bound.floor)


def evaluate_file(path: str | os.PathLike[str], bound: Binding) -> Reading:
    """Evaluate the one file at `path` (the loop's candidate) under the
    name candidate_file gives it."""
    name = candidate_file(bound)
    with open(path, "rb") as handle:
        content = handle.read()
    return evaluate_files({name: content}, bound)


def read(report: api.Report, floor: float = -math.inf) -> Reading:
    """`report` in a loop's terms: its fitness (larger is better, a `min`
    metric negated) when it passed, `floor` when it did not."""
    passed = report.status == "passing" and report.fitness is not None
    score = float(report.fitness) if passed and report.fitness is not None else floor
    return Reading(report=report, score=score, passed=passed, error=report.status not in JUDGED,
                   metrics=loop_metrics(report.metrics), feedback=feedback(report))


def loop_metrics(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The numeric metrics, each under its name, a RESERVED one prefixed."""
    shown = {}
    for name, value in metrics.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        shown[f"metric_{name}" if name in RESERVED else name] = float(value)
    return shown


def feedback(report: api.Report) -> str:
    """One line for the loop's model: the status and the score, or why the
    candidate did not pass."""
    if report.status == "passing":
        aim = "minimise" if report.direction == "min" else "maximise"
        line = f"passing: {report.metric} = {report.score!r} ({aim})"
        if not report.official and report.official_reason:
            line += f"; not official: {report.official_reason}"
        return line
    return f"{report.status}: {report.reason or 'no reason given'}"


def details_text(report: api.Report) -> str:
    """The report's details as JSON text, for the loops that take text only."""
    return json.dumps(report.details, sort_keys=True, default=str)
