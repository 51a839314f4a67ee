"""hill.yaml: its keys, each declared once with its check, default and
documentation (validation and the keys of hill.yaml(5) come from them), and
typed params."""

import copy
import math
import os
import re
from typing import Any

from . import yamlfile
from ..base.errors import Refused, UsageError
from ..base.names import validate_name
from .schema import (At, Key, KeyProblem, ListOf, MapOf, Maybe, Table, anything, docs, empty, is_count, is_number,
                     null, one_of, scalar, show)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .manifest_types import Manifest

SPEC_VERSION = 1
PARAM_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
RESOURCE_RE = re.compile(r"^[a-z0-9_-]+$")
PARAM_TYPES = ("int", "float", "str", "bool", "categorical")
DEFAULT_TIMEOUT = 600
DEFAULT_BLOB_THRESHOLD = 10 * 1024 * 1024
DEFAULT_MEMORY = 4 * 1024 * 1024 * 1024
MIN_MEMORY = 64 * 1024 * 1024
# Caps on submitted code (`limits`); docs/decisions.md D-075 says why.
DEFAULT_PROCESSES = 512
MIN_PROCESSES = 8
DEFAULT_DISK = 1024 ** 3
DEFAULT_FILE_SIZE = 1024 ** 3
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 1000**2, "mb": 1000**2,
               "mib": 1024**2, "g": 1000**3, "gb": 1000**3, "gib": 1024**3,
               "t": 1000**4, "tb": 1000**4, "tib": 1024**4}


def _plain(node: Any) -> Any:
    """ruamel round-trip nodes to plain Python values."""
    if isinstance(node, dict):
        return {str(k): _plain(v) for k, v in node.items()}
    if isinstance(node, (list, tuple)):
        return [_plain(v) for v in node]
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    if isinstance(node, str):
        return str(node)
    return node


def _show(value: Any) -> str:
    """A value as the errors about hill.yaml quote it (a list is `list`)."""
    return "list" if isinstance(value, list) else show(value)


# ---------------------------------------------------------------- checks of one value

def _spec(value: Any, at: At) -> int:
    if isinstance(value, bool) or value != SPEC_VERSION:
        at.fail(f"the integer {SPEC_VERSION}", value)
    return SPEC_VERSION


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _hill_name(value: Any, at: At) -> str:
    if not _text(value):
        at.fail("a non-empty string", value)
    try:
        return validate_name(value)
    except UsageError:
        at.fail("a valid hill name (lowercase letters, digits, '.', '_', '-')", value)


def _size(value: Any, at: At) -> int:
    """A size in bytes, or a string such as '10MB' or '1.5GiB'."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str):
        match = _SIZE_RE.match(value)
        if match and (match.group(2) or "").lower() in _SIZE_UNITS:
            return int(float(match.group(1)) * _SIZE_UNITS[(match.group(2) or "").lower()])
    at.fail("a size in bytes (e.g. 10485760 or '10MB')", value)


def _memory(value: Any, at: At) -> int:
    size = _size(value, at)
    if size < MIN_MEMORY:
        at.fail("at least 64MiB", value)
    return size


def _at_least_a_mebibyte(value: Any, at: At) -> int:
    size = _size(value, at)
    if size < 1024 * 1024:
        at.fail("a size of at least 1MiB (e.g. 1048576 or '50MB')", value)
    return size


def _inside_hill(value: Any) -> bool:
    return isinstance(value, str) and not value.startswith("/") and ".." not in value.split("/")


def _words(value: Any) -> Any:
    """A command written as one string is split on white space."""
    return value.split() if isinstance(value, str) else value


def _argv(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(arg, str) for arg in value)


_STRING = scalar("a string", lambda value: isinstance(value, str))
_BOOLEAN = scalar("true or false", lambda value: isinstance(value, bool))
_SECONDS = scalar("a number of seconds greater than 0", lambda value: is_number(value) and value > 0)


# ---------------------------------------------------------------- rules between keys

def _evaluator_rule(values: dict[str, Any], at: At) -> None:
    """The entry's form and default follow from the shape."""
    entry = values["entry"]
    if values["shape"] == "function":
        entry = "eval.py" if entry is None else entry
        if not isinstance(entry, str) or not entry.endswith(".py") or not _inside_hill(entry):
            at.child("entry").fail("a .py file inside the hill (default eval.py)", entry)
    else:
        argv = _words(entry)
        if not _argv(argv) or not all(argv):
            at.child("entry").fail("a command as a list of strings", entry)
        entry = argv
    values["entry"] = entry


def _param_rule(values: dict[str, Any], at: At) -> None:
    """Bounds and choices follow from the type; the default must fit them."""
    kind = values["type"]
    if kind in ("int", "float"):
        for bound in ("low", "high"):
            value = values.get(bound)
            if value is None:
                values.pop(bound, None)
            elif not is_number(value) or (kind == "int" and not isinstance(value, int)):
                at.child(bound).fail(f"a finite {kind}", value)
        if "low" in values and "high" in values and values["low"] > values["high"]:
            at.child("low").fail(f"a value not above high ({values['high']})", values["low"])
        if "choices" in values:
            at.child("choices").fail(f"no choices for a {kind} param (use type: categorical)", values["choices"])
    elif kind == "categorical":
        choices = values.get("choices")
        if not isinstance(choices, list) or not choices:
            at.child("choices").fail("a non-empty list", choices)
        for choice in choices:
            if not isinstance(choice, (str, int, float, bool)):
                at.child("choices").fail("strings, numbers or booleans", choice)
        values.pop("low", None)
        values.pop("high", None)
    else:
        for extra in ("low", "high", "choices"):
            if extra in values:
                at.child(extra).fail(f"no {extra} for a {kind} param", values[extra])
    try:
        values["default"] = coerce_value(at.name, values, values["default"])
    except UsageError as exc:
        at.child("default").fail(f"a valid default ({exc.message})", values["default"])
    if "check" in values:
        try:
            values["check"] = coerce_value(at.name, values, values["check"])
        except UsageError as exc:
            at.child("check").fail(f"a valid value ({exc.message})", values["check"])
    if values["neutral"] and values["primary"]:
        at.child("neutral").fail("false for a primary param (a primary param decides which reports compare)",
                                 values["neutral"])


def _metric_rule(values: dict[str, Any], at: At) -> None:
    """The bounds of a metric are in order; `max_gain` is a gain over
    `best_known`; `for_params` scopes bounds."""
    floor, ceiling, best = values.get("floor"), values.get("ceiling"), values.get("best_known")
    if floor is not None and ceiling is not None and floor > ceiling:
        at.child("floor").fail(f"a value not above ceiling ({ceiling})", floor)
    if best is not None and floor is not None and best < floor:
        at.child("best_known").fail(f"a value not below floor ({floor})", best)
    if best is not None and ceiling is not None and best > ceiling:
        at.child("best_known").fail(f"a value not above ceiling ({ceiling})", best)
    if best is None and "max_gain" in values:
        at.child("max_gain").fail("best_known beside it (max_gain is the largest gain over best_known "
                                  "that is plausible)", values["max_gain"])
    if "for_params" in values and floor is None and ceiling is None and best is None:
        at.child("for_params").fail("floor, ceiling or best_known beside it (for_params says when they hold)",
                                    values["for_params"])
    for name in ("claim_tolerance", "claim_slack"):
        if name in values and "claimed" not in values:
            at.child(name).fail("claimed beside it (it says how far a claimed time may be from the measured one)",
                                values[name])
    if values.get("timing") is False and "claimed" in values:
        at.child("timing").fail("true or absent for a claimed time (a claimed time is a timing metric)", False)


def _bounds_rule(values: dict[str, Any], at: At) -> None:
    """Each `for_params` of a metric names params of the hill, with values
    they may take."""
    params = values["params"]
    for index, metric in enumerate(values["metrics"]):
        scope = at.child("metrics").item(index).child("for_params")
        for name, value in metric.get("for_params", {}).items():
            if name not in params:
                scope.fail(f"one of the hill's params ({', '.join(params) or 'none declared'})", name)
            try:
                metric["for_params"][name] = coerce_value(name, params[name], value)
            except UsageError as exc:
                scope.child(name).fail(f"a valid value ({exc.message})", value)


def _manifest_rule(values: dict[str, Any], at: At) -> None:
    """A command evaluator declares its one metric; submitted code's time
    limit is the watchdog unless set."""
    command = values["evaluator"]["shape"] == "command"
    if "metrics" not in values:
        if command:
            at.child("metrics").missing("a list of {name, direction} for a command evaluator")
        values["metrics"] = []
    _bounds_rule(values, at)
    if command and len(values["metrics"]) != 1:
        at.child("metrics").fail("exactly one {name, direction} for a command evaluator (its result is one score)",
                                 values["metrics"])
    values["limits"] = {"time": values["timeout"], **values["limits"]}
    values["limits"].setdefault("cpu", values["limits"]["time"])


# ---------------------------------------------------------------- the keys of hill.yaml

EVALUATOR_KEYS = Table("a mapping with shape and entry", (
    Key("shape", one_of("function", "command"), default=None),
    Key("entry", anything, default=None),
), rule=_evaluator_rule)

PARAM_KEYS = Table("a mapping with type and default", (
    Key("type", scalar("one of " + ", ".join(PARAM_TYPES), lambda value: value in PARAM_TYPES),
        kind="string", required=True, missing="one of " + ", ".join(PARAM_TYPES), absent=null,
        doc="`int`, `float`, `str`, `bool` or `categorical`."),
    Key("default", anything, required=True, missing=lambda seen: f"a default {seen['type']} value",
        doc="""The value used when `-p` does not set the param; it is checked like any
other value, type and bounds included."""),
    Key("primary", _BOOLEAN, kind="boolean", default=False,
        doc="""Whether the param is primary config: a command evaluator's reports mark it
so in `config`, and hills-describe(1) and hills-rank(1) show it. Primary or
not, every param that is not `neutral` decides which reports compare."""),
    Key("neutral", _BOOLEAN, kind="boolean", default=False,
        doc="""Whether the param leaves the score alone, such as a seed or a thread
count: reports then rank together whatever its value. Every other param is
part of comparability: a report whose value differs from the default ranks
only with reports that used the same value (see hills-rank(1)), so a
climber cannot buy score by loosening a param. A primary param cannot be
neutral."""),
    Key("low", anything, kind="number", note="int and float only",
        doc="The smallest value allowed; an integer for an `int` param."),
    Key("high", anything, kind="number", note="int and float only",
        doc="The largest value allowed, not below `low`."),
    Key("choices", anything, kind="list", note="categorical only, required there",
        doc="The values allowed: strings, numbers or booleans."),
    Key("description", _STRING, kind="string", absent=null,
        doc="What the param means, shown by hills-describe(1)."),
    Key("check", anything, absent=null, note="default the default",
        doc="""The value the evals of hills-check(1) use, the leak probe's and the cheat
corpus's: for a param that sets how long the submission runs, such as a
training budget, so that checking the hill does not take as long as an
eval. It is checked like the default."""),
), rule=_param_rule)

_BOUND = scalar("a finite number", is_number)

METRIC_KEYS = Table("a mapping with name and direction", (
    Key("name", scalar("a non-empty string", _text), kind="string", default=None, note="required",
        doc="The metric's name, as the evaluator reports it."),
    Key("direction", one_of("max", "min"), kind="string", default=None, note="required",
        doc="`max` when higher is better, `min` when lower is."),
    Key("description", _STRING, kind="string", absent=empty, doc="What the metric measures."),
    Key("floor", _BOUND, kind="number",
        doc="""A hard lower limit no honest result goes below, such as a physical
limit: a passing result below it is `implausible`."""),
    Key("ceiling", _BOUND, kind="number",
        doc="""A hard upper limit no honest result goes above, such as a theoretical
optimum: a passing result above it is `implausible`. Not below `floor`."""),
    Key("best_known", _BOUND, kind="number",
        doc="""The best value known for the task, such as a published record, between
`floor` and `ceiling`: a passing result better than it (above for `max`,
below for `min`) by more than `max_gain` is `implausible`."""),
    Key("max_gain", scalar("a finite number >= 0", lambda value: is_number(value) and value >= 0),
        kind="number", note="default 0, with best_known only",
        doc="""How far beyond `best_known` a result may go and still be plausible: room
for rounding in `best_known` and for slack the scoring allows. 0 when left
out: a result must not beat the best known at all."""),
    Key("for_params", scalar("a non-empty mapping of param name to value",
                             lambda value: isinstance(value, dict) and bool(value)),
        kind="mapping", note="default every evaluation",
        doc="""When the bounds hold, for bounds that depend on a param (the best known
sum for 26 circles is not that for 27): a mapping of param names to
values; the bounds apply only to evaluations run with those values, and
other evaluations are not judged against them. Each name is a param of
the hill and each value one it may take."""),
    Key("timing", _BOOLEAN, kind="boolean", note="default false; true with claimed",
        doc="""Whether the metric is a time (or a speed) that depends on the machine:
reports of a hill that declares one rank only beside reports from the same
hardware fingerprint (hills-report(5), `fingerprint`)."""),
    Key("claimed", one_of("wall", "cpu"), kind="string", note="default none",
        doc="""The metric is a time in seconds that the evaluator takes from the
submission (its own timer's figure), to be held against the time hills
measures from outside the submitted code: `wall` for the wall time of what
submitted code ran, `cpu` for its CPU time. A claimed time outside
`claim_tolerance` and `claim_slack` of the measured one makes the report
unofficial, with the reason. Implies `timing`."""),
    Key("claim_tolerance", scalar("a number from 0 to 1", lambda value: is_number(value) and 0 <= value <= 1),
        kind="number", note="default 0.5, with claimed only",
        doc="""How far, as a fraction of the measured time, a claimed time may fall
below it or rise above it (a timer inside the code does not time the
interpreter's start), 0.5 when left out."""),
    Key("claim_slack", scalar("a number of seconds >= 0", lambda value: is_number(value) and value >= 0),
        kind="number", note="default 0.1, with claimed only",
        doc="Seconds allowed beside `claim_tolerance`, 0.1 when left out."),
    Key("items", one_of("mean", "sum", "rms", "median"), kind="string", note="default none",
        doc="""How the metric's per-item scores aggregate into it: `mean`, `sum`, `rms`
(root mean square) or `median`. The evaluator's `instances` (or its `items`
without an `aggregate`) are then read as the metric's items: hills holds
them to the metric's value and resamples them to estimate the metric's
sampling noise on the split (hills-report(5), `noise`). Where left out,
`instances` are a breakdown only and a deterministic evaluator's noise is
unknown."""),
), rule=_metric_rule)

BLOBS_KEYS = Table("a mapping with track and threshold", (
    Key("track", scalar("a list of glob patterns",
                        lambda value: isinstance(value, list) and all(map(_text, value)),
                        convert=lambda value: [value] if isinstance(value, str) else value),
        default=[]),
    Key("threshold", _size, default=DEFAULT_BLOB_THRESHOLD),
))

UNIT_TESTS_KEYS = Table("a mapping with command and path", (
    Key("command", scalar("a command as a list of strings", _argv, convert=_words), default=None),
    Key("path", scalar("a folder inside the hill", _inside_hill), default="unit_tests"),
))

def _outputs(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(_text(item) and _inside_hill(item) for item in value)


def _folder_inside(value: Any) -> bool:
    return _text(value) and _inside_hill(value) and value.strip("/") not in ("", ".")


def _solution_rule(values: dict[str, Any], at: At) -> None:
    """The `when` file is one path inside the submission."""
    when = values.get("when")
    if when is not None and (not _text(when) or not _inside_hill(when) or any(c in when for c in "*?[")):
        at.child("when").fail("a file name inside the submission, such as solution.py", when)


INPUTS_KEYS = Table("a mapping with validation and holdout", (
    Key("validation", Maybe(scalar("a folder inside the hill", _folder_inside)), default=None),
    Key("holdout", Maybe(scalar("a folder inside the hill", _folder_inside)), default=None),
))

SOLUTION_KEYS = Table("a mapping with run and outputs", (
    Key("run", scalar("a command as a list of strings", _argv, convert=_words), required=True,
        missing="the command that runs the submission, such as [\"{python}\", \"solution.py\"]"),
    Key("when", anything, default=None),
    Key("inputs", INPUTS_KEYS, default={}, absent=empty),
    Key("generate", Maybe(scalar("a command as a list of strings", _argv, convert=_words)), default=None),
    Key("outputs", scalar("a non-empty list of paths or glob patterns inside the submission",
                          _outputs, convert=lambda value: [value] if isinstance(value, str) else value),
        required=True, missing="the files the scorer reads, such as [circles.json]"),
), rule=_solution_rule)

CHECKS_KEYS = Table("a mapping with solution", (
    Key("solution", Maybe(scalar("a file inside the hill and outside private/, such as check_train.py",
                                 lambda value: _text(value) and _inside_hill(value)
                                 and value.strip("/").split("/")[0] not in ("", ".", "private"))),
        default=None),
))

# The reusable holdout's defaults: the values of the experiment of Dwork
# et al. (Science 2015) on accuracies in [0, 1], sigma a quarter of T.
DEFAULT_THRESHOLD = 0.04
SIGMA_PER_THRESHOLD = 0.25
_POSITIVE = scalar("a number greater than 0", lambda value: is_number(value) and value > 0)


def _final_rule(values: dict[str, Any], at: At) -> None:
    """The reusable holdout counts its releases against a budget, and only
    it has a threshold and a noise scale; the plain holdout keeps its old
    shape ({budget}), `mode` absent."""
    mode = values.get("mode", "plain")
    if mode == "plain":
        values.pop("mode", None)
        for name in ("threshold", "sigma"):
            if name in values:
                at.child(name).fail("no value under mode plain (it is a parameter of mode: reusable)", values[name])
        return
    if values["budget"] is None:
        at.child("budget").fail("an integer >= 0 under mode reusable (how many releases of the holdout score "
                                "each version allows)", None)
    values.setdefault("threshold", DEFAULT_THRESHOLD)
    values.setdefault("sigma", values["threshold"] * SIGMA_PER_THRESHOLD)


FINAL_KEYS = Table("a mapping with mode, budget, threshold and sigma", (
    Key("mode", one_of("plain", "reusable")),
    Key("budget", Maybe(scalar("an integer >= 0", lambda value: is_count(value, 0))), default=None),
    Key("threshold", _POSITIVE),
    Key("sigma", _POSITIVE),
), rule=_final_rule)

LIMITS_KEYS = Table("a mapping with time, memory, processes, disk, file_size and cpu", (
    Key("time", _SECONDS),
    Key("memory", _memory, default=DEFAULT_MEMORY),
    Key("processes", scalar(f"an integer >= {MIN_PROCESSES}", lambda value: is_count(value, MIN_PROCESSES)),
        default=DEFAULT_PROCESSES),
    Key("disk", _at_least_a_mebibyte, default=DEFAULT_DISK),
    Key("file_size", _at_least_a_mebibyte, default=DEFAULT_FILE_SIZE),
    Key("cpu", _SECONDS),
))

KEYS = Table("a mapping", (
    Key("spec", _spec, kind="integer", required=True, missing=f"the integer {SPEC_VERSION}",
        doc=f"The manifest format version. Must be {SPEC_VERSION}."),
    Key("name", _hill_name, kind="string", required=True, missing="a string",
        doc="""The hill's name; it must equal the name of the hill's folder. The rules
are those of hills-new(1)."""),
    Key("version", scalar("a non-empty string", _text), kind="string", required=True, missing="a string",
        doc="""The hill's own version, shown in reports and by hills-describe(1). Quote a
version YAML would read as a number (`"1.0"`)."""),
    Key("description", _STRING, kind="string", default="", absent=empty,
        doc="One line saying what the hill measures."),
    Key("evaluator", EVALUATOR_KEYS, kind="mapping", required=True, missing=EVALUATOR_KEYS.expected, absent=null,
        doc="""How the hill scores a submission: `shape` is `function` or `command`.
For `function`, `entry` is a `.py` file inside the hill, `eval.py` by
default, defining `eval(submission, *, final=False, **params)`. For
`command`, `entry` is the command as a list of strings (a string is split on
white space), run as COMMAND EVALUATORS below describes; `metrics` is then
required."""),
    Key("solution", Maybe(SOLUTION_KEYS), kind="mapping", default=None,
        doc="""The solution phase, which runs the submitted code before the evaluator
scores: `run`, the command (a list of strings, a string is split on white
space; `{python}` is the hill environment's interpreter), run confined in
the submission's snapshot with a scratch folder and `HILLS_PARAMS` (the
hill's params), `HILLS_KNOBS` (the knob values),
`HILLS_SPLIT` and `HILLS_REPLICATE_SEED` set; `outputs`, a non-empty list
of paths or glob patterns inside the submission, the files the evaluator
receives; `when`, a file: the phase runs only when the submission holds
it, and otherwise the outputs are taken from the submission as it is; and
`inputs`, a folder of the hill per split (`validation`, `holdout`, which
may be inside `private/`) copied into `inputs/` of the snapshot before the
run; `generate`, a command of the hill run trusted before each run, in an
empty folder that is then added to `inputs/`, with `HILLS_SECRET_SEED`, so
that the inputs are fresh for each replicate and the submission never sees
the seed they came from (the scoring phase gets it to regenerate them). The evaluator then scores a folder holding only the outputs, and never
sees the submission's code. A run that exits non-zero, is killed or hits a
limit makes the submission `buggy`; so does a missing output named without
a pattern, or an output that is a link. See docs/confinement.md."""),  # noqa: E501 (the text of hill.yaml(5))
    Key("checks", CHECKS_KEYS, kind="mapping", default={}, absent=empty, note="default none",
        doc="""How hills-check(1) checks the hill: `solution`, a file of the
hill (a path inside it) that stands in for the example's solution file (the
`solution.when` file, the submission's script in `solution.run`, else
`solution.py`) in the copies of the example that the leak probe and the
cheat corpus evaluate, for a hill whose solution is expensive to run (one
that trains a model): a cheap script that does what the solution's contract
asks (writes the `outputs`) in seconds. The probe puts its payload into the
stand-in as into any file of the example, and the cheats are held to the
score the example gets with it. Only those two checks use it: every other
evaluation, the checks' own and `hills eval`, runs the submission as it
is. Like every file of the hill it is in the tree, and a changed stand-in
runs the two checks again."""),
    Key("timeout", _SECONDS, kind="number", default=DEFAULT_TIMEOUT,
        doc="""The watchdog, in seconds, greater than 0: an evaluation still running
after it is killed, with every process it started, and reported `buggy`."""),
    Key("params", MapOf("a mapping of param name to {type, default, ...}",
                        scalar("a param name that is a Python identifier",
                               lambda name: isinstance(name, str) and bool(PARAM_NAME_RE.match(name))),
                        PARAM_KEYS),
        kind="mapping", default={}, absent=empty, note="default none",
        doc="The typed knobs of the hill, by name; see PARAMS below."),
    Key("metrics", ListOf("a list of {name, direction}", METRIC_KEYS), kind="list", absent=null,
        note="required for command shape",
        doc="""The hill's metrics in ranking order: each a mapping with `name`,
`direction` (`max` or `min`), an optional `description` and optional
plausibility bounds (see METRICS below). A command
evaluator declares exactly one, the name and direction of its score. For a
function evaluator the list is optional; when given, every result must
report exactly these metrics, in this order and with these directions, or
the evaluation is `buggy` with a reason naming the first difference. A
result with an empty `metrics` list is `buggy` either way: it has nothing
to rank on. hills-describe(1) shows the list."""),
    Key("blobs", BLOBS_KEYS, kind="mapping", default={}, absent=empty, note="default no globs and 10 MiB",
        doc=f"""Which hill files are kept out of git and bound by `blobs.lock`: `track`, a
list of glob patterns (or one string), and `threshold`, a size from which
every file is a blob, either a number of bytes or a string such as `10MB`,
`1.5GiB` or `500k` (k, M, G, T are powers of 1000; KiB, MiB, GiB, TiB of
1024). The default threshold is {DEFAULT_BLOB_THRESHOLD} bytes. See hills-lock(5)."""),
    Key("unit_tests", Maybe(UNIT_TESTS_KEYS), kind="mapping", default=None,
        doc="""Frozen tests run against submissions: `command`, a list of strings (a
string is split on white space), and `path`, a folder inside the hill,
`unit_tests` by default, committed with the rest of the hill. In `command`,
`{python}` is the hill environment's interpreter, `{tests}` the frozen copy
of `path` in the run folder, `{solution}` the submission's `solution.py` and
`{submission}` its folder. hills-eval(1) runs the command once, after the
first replicate passes, in the submission's snapshot and under the
watchdog: exit 0 keeps the status `passing`, another exit status makes it
`failing`, a timeout `buggy`. The hill's working `path` folder is the
climber's disposable copy (hills-describe(1) says where it is); only
`--current` evaluations read it."""),
    Key("replicates", scalar("an integer >= 1", lambda value: is_count(value, 1)), kind="integer", default=1,
        doc="""How many replicates each evaluation runs, at least 1; `hills eval
--repeat N` overrides it. Metrics are then medians, with their spread; see
hills-eval(1)."""),
    Key("seeds", one_of("fresh", "fixed"), kind="string", default="fresh",
        doc="""Where the replicates' seeds (`HILLS_REPLICATE_SEED`) come from: `fresh`
draws them anew for each evaluation, so no submission can have computed
its outputs for them beforehand; `fixed` makes them 0 to N-1. Either way
each replicate's evaluator (the scoring phase, when the hill has a
solution phase) also gets `HILLS_SECRET_SEED`, drawn for the evaluation
and never passed to submitted code, from which it may regenerate its test
inputs; the report's `seeds` names both once the evaluation has ended."""),
    Key("final", FINAL_KEYS, kind="mapping", default={}, absent=null, note="default mode plain, no budget",
        doc=f"""How `--final` (holdout) evaluations are counted and answered. `budget`:
how many each committed version of the hill allows, an integer of at least
0 (0: the hill holds no holdout split, and `--final` is refused saying so),
or null for no limit. `mode`: `plain` (the default) or `reusable`.
Under `plain` every `--final` evaluation counts, official or not (a look
at the holdout is a look): it counts from the `started` entry written
before its first process runs, so one that is killed or abandoned counts
too; one refused before that does not. Under `reusable` (Thresholdout:
Dwork, Feldman, Hardt, Pitassi, Reingold and Roth, "The reusable holdout",
Science 2015) a `--final` evaluation runs the validation split and then
the holdout split on the same submission and seeds, and answers with the
validation score of the first metric unless the two differ by more than a
noisy threshold, `threshold` plus Laplace noise of scale 2 `sigma` drawn
anew after each release and a fresh Laplace noise of scale 4 `sigma` each
time; then it releases the holdout score plus Laplace noise of scale
`sigma`, and only such a release counts against `budget`, which `reusable`
requires. The report's `release` and `validation` say which (see
hills-report(5)); the true holdout score is never shown. `threshold` and
`sigma` are numbers greater than 0 in the units of the first metric, by
default {DEFAULT_THRESHOLD} and a quarter of the threshold: the values of the
paper's experiment, on accuracies over 10,000 items a split. Choose them
for the hill's metric and split sizes. The paper's Theorem 9 takes
`threshold` = 3 tau / 4 and `sigma` = tau / (96 ln(4m / beta)) to keep
each of m answers within tau of the true value with probability 1 - beta
while the budget lasts, on a holdout large enough for the budget
(docs/noise.md); in practice, a threshold several times the standard
error of the difference between the two splits' scores (0.04 was about six
of them at 10,000 items) and `sigma` a quarter of it. A threshold below
that noise releases on most queries and spends the budget as the plain
holdout would. With a budget, `--final --current` is refused; the
count comes from the version's attempts log, which must verify."""),
    Key("exclusive", Maybe(scalar("a resource name such as gpu",
                                  lambda value: isinstance(value, str) and bool(RESOURCE_RE.match(value)))),
        kind="string", default=None,
        doc="""A machine resource used by one evaluation at a time, such as `gpu`:
lowercase letters, digits, `_` and `-`. A second evaluation needing it fails
with exit status 4, or waits with `--queue`."""),
    Key("sandbox", one_of("auto", "bwrap", "none"), kind="string", default="auto",
        doc="""How the evaluator and the submitted code it starts are isolated:
`auto` and `bwrap` confine them with bubblewrap, and refuse the evaluation
and `hills check` (exit status 4, the reason named) where bubblewrap is
missing, not owned by root, or cannot build a namespace: submitted code
never runs unconfined. `none`, the hill author's declaration that it may,
never isolates; `hills describe` says so. The level used is recorded in
the report's config as `isolation`, a primary entry: reports made at
`none` never rank beside confined ones."""),
    Key("network", _BOOLEAN, kind="boolean", default=False,
        doc="""Whether the evaluator and submitted code may reach the network. When
false, the bubblewrap isolation of `sandbox` gives them none; without
isolation it is not enforced."""),
    Key("limits", LIMITS_KEYS, kind="mapping", default={}, absent=empty,
        note="default the timeout, 4GiB, 512, 1GiB, 1GiB and the time",
        doc=f"""Caps on submitted code, wherever hills starts it (the solution phase,
`hills.sdk.run_submission` in a function evaluator, the confined
interpreter of a command verifier); sizes are written as for
`blobs.threshold`. `time`: seconds of wall-clock time, greater than 0, the
`timeout` by default. `memory`: the address space of each process, at
least 64MiB, 4GiB by default. `processes`: how many processes and threads
it may run at once, counted as the kernel counts them (numeric libraries
start one thread per core), an integer of at least {MIN_PROCESSES},
{DEFAULT_PROCESSES} by default. `disk`: the bytes it may write to its
snapshot and scratch folder together, at least 1MiB, 1GiB by default; what
it wrote to the scratch folder is removed after each run, and so is what
it wrote to the snapshot when it went past the cap. `file_size`: the
largest file it may write, at least 1MiB, 1GiB by default. `cpu`: the CPU
seconds of each process, greater than 0, the `time` by default (a process
with several busy threads reaches it sooner than the time). A cap that is
hit stops the submitted code (a file write past `file_size` fails first)
and is named in the report's `isolation` entry; see hills-report(5). For
`memory`, the kernel refuses the allocation past the cap and the code
fails; the cap is named when the largest address space seen came within a
sixteenth of it (one allocation far past the cap leaves no such trace)."""),
), rule=_manifest_rule)


def key_docs(table: Table = KEYS) -> dict[str, tuple[str, str]]:
    """The keys of hill.yaml (or of one param, `table=PARAM_KEYS`, or one
    metric, `table=METRIC_KEYS`) in order, each with its manual label
    ("integer, required") and documentation: the KEYS, PARAMS and METRICS
    sections of hill.yaml(5)."""
    return docs(table)


def coerce_value(name: str, spec: dict[str, Any], value: Any) -> Any:
    """Check `value` (already typed, from YAML or JSON) against a param spec."""
    kind = spec["type"]
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise UsageError(f"param '{name}' expects an int, got {_show(value)}")
    elif kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise UsageError(f"param '{name}' expects a float, got {_show(value)}")
        value = float(value)
        if not math.isfinite(value):
            raise UsageError(f"param '{name}' expects a finite float, got {value}")
    elif kind == "str":
        if not isinstance(value, str):
            raise UsageError(f"param '{name}' expects a string, got {_show(value)}")
    elif kind == "bool":
        if not isinstance(value, bool):
            raise UsageError(f"param '{name}' expects true or false, got {_show(value)}")
    elif kind == "categorical":
        if value not in spec["choices"] or isinstance(value, bool) != any(
                isinstance(c, bool) and c == value for c in spec["choices"]):
            choices = ", ".join(map(str, spec["choices"]))
            raise UsageError(f"param '{name}' expects one of {choices}, got {_show(value)}")
    low, high = spec.get("low"), spec.get("high")
    if low is not None and value < low or high is not None and value > high:
        raise UsageError(f"param '{name}' must be in [{low if low is not None else '-inf'}, "
                         f"{high if high is not None else 'inf'}], got {value}")
    return value


def parse_cli_value(name: str, spec: dict[str, Any], text: str) -> Any:
    """Turn the text of `-p name=text` into a typed, bounded value."""
    kind = spec["type"]
    value: object
    if kind == "int":
        try:
            value = int(text, 10)
        except ValueError:
            raise UsageError(f"param '{name}' expects an int, got '{text}'")
    elif kind == "float":
        try:
            value = float(text)
        except ValueError:
            raise UsageError(f"param '{name}' expects a float, got '{text}'")
    elif kind == "bool":
        lowered = text.strip().lower()
        if lowered in ("true", "1", "yes", "on"):
            value = True
        elif lowered in ("false", "0", "no", "off"):
            value = False
        else:
            raise UsageError(f"param '{name}' expects true or false, got '{text}'")
    elif kind == "categorical":
        value = text
        for choice in spec["choices"]:
            if str(choice) == text:
                value = choice
                break
    else:
        value = text
    return coerce_value(name, spec, value)


def validate(raw: Any, source: str, folder_name: str | None = None) -> "Manifest":
    """Validate a parsed hill.yaml mapping against KEYS; return a plain,
    defaulted dict. `folder_name`, when given, is the name the hill must have."""
    if not isinstance(raw, dict):
        raise UsageError(f"'{source}': expected a mapping at the top level, got {_show(raw)}")
    at = At(source, quote=_show)
    checked: Any = KEYS(raw, at)
    spec: "Manifest" = checked  # the table's keys, each checked and defaulted
    if folder_name is not None and spec["name"] != folder_name:
        at.child("name").fail(f"'{folder_name}' (the hill's folder name)", spec["name"])
    return spec


class ManifestError(UsageError):
    """hill.yaml cannot be read or is invalid. A usage error where a command
    was handed the file; a command handed only the hill's name reports it
    as a refusal (`refused`), as `hills check` does."""

    def refused(self, hill_name: str) -> Refused:
        return Refused(self.message, hint=self.hint or f"fix it, then run 'hills check {hill_name}'; or undo "
                                                       f"the edit with 'hills restore {hill_name} hill.yaml'")


def parse_text(text: str, source: str, folder_name: str | None = None) -> "Manifest":
    """Parse hill.yaml text (round-trip loader, within yamlfile's bounds)
    and validate it; an invalid key's error names its line."""
    try:
        loaded = yamlfile.load(text, source, typ="rt")
    except UsageError as exc:
        raise ManifestError(exc.message, hint=exc.hint) from None
    try:
        return validate(_plain(loaded), source, folder_name)
    except KeyProblem as exc:
        line = _line_of(loaded, exc.key)
        raise ManifestError(exc.message + (f" (line {line})" if line else ""), hint=exc.hint) from None
    except UsageError as exc:
        raise ManifestError(exc.message, hint=exc.hint) from None


def _line_of(loaded: Any, key: str) -> int | None:
    """The 1-based line of the key path `key` (`a.b[0].c`) in the
    round-trip data, or of the deepest part of it that is there."""
    line = None
    node = loaded
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", key):
        try:
            if part.startswith("["):
                index = int(part[1:-1])
                line = node.lc.item(index)[0] + 1
                node = node[index]
            else:
                line = node.lc.key(part)[0] + 1
                node = node[part]
        except (AttributeError, KeyError, IndexError, TypeError):
            break
    return line


def load(hill_dir: str) -> "Manifest":
    path = os.path.join(hill_dir, "hill.yaml")
    try:
        text = yamlfile.read_text(path)
    except FileNotFoundError:
        raise ManifestError(f"'{path}' is missing", hint="every hill needs a hill.yaml manifest")
    except UsageError as exc:
        raise ManifestError(exc.message, hint=exc.hint) from None
    folder = os.path.basename(os.path.abspath(hill_dir))
    # One command reads the same manifest several times (check, locks,
    # listing); parse each text once, hand out copies.
    memo_key = (path, folder, text)
    if memo_key not in _parsed:
        _parsed.clear()
        _parsed[memo_key] = parse_text(text, path, folder)
    return copy.deepcopy(_parsed[memo_key])


_parsed: "dict[tuple[str, str, str], Manifest]" = {}
