"""hill.yaml: its schema, validation with precise errors, and typed params."""

import copy
import math
import os
import re

from . import yamlfile
from .errors import UsageError

SPEC_VERSION = 1
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")

TOP_KEYS = {
    "spec": "the manifest format version (integer, currently 1)",
    "name": "the hill's name (must match its folder)",
    "version": "the hill's own version string",
    "description": "one line saying what the hill measures",
    "evaluator": "mapping: shape (function or command) and entry",
    "timeout": "watchdog in seconds (number > 0)",
    "params": "mapping of typed params",
    "metrics": "list of {name, direction} (command shape)",
    "blobs": "mapping: track (globs) and threshold (bytes)",
    "unit_tests": "mapping: command (argv) and path",
    "replicates": "number of replicates per eval (integer >= 1)",
    "final": "mapping: budget (holdout evals allowed per version)",
    "exclusive": "resource evaluated one at a time per machine, e.g. gpu",
    "sandbox": "auto, bwrap or none",
    "network": "whether the evaluator may reach the network (boolean)",
    "limits": "mapping: time (seconds) and memory (size) for submitted code",
}
PARAM_TYPES = ("int", "float", "str", "bool", "categorical")
PARAM_KEYS = {"type", "default", "primary", "low", "high", "choices", "description"}
DEFAULT_TIMEOUT = 600
DEFAULT_BLOB_THRESHOLD = 10 * 1024 * 1024
DEFAULT_MEMORY = 4 * 1024 * 1024 * 1024
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 1000**2, "mb": 1000**2,
               "mib": 1024**2, "g": 1000**3, "gb": 1000**3, "gib": 1024**3,
               "t": 1000**4, "tb": 1000**4, "tib": 1024**4}


def validate_name(name):
    """Refuse names that are not safe as a folder, a git ref part and a state key."""
    if not isinstance(name, str) or not NAME_RE.match(name) or ".." in name or name.endswith((".", ".lock")):
        raise UsageError(
            f"invalid hill name '{name}'",
            hint="use 1-63 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit",
        )
    return name


class _Checker:
    def __init__(self, source):
        self.source = source

    def fail(self, key, expected, got=None, *, missing=False):
        if missing:
            raise UsageError(f"'{self.source}': missing key '{key}': expected {expected}")
        raise UsageError(f"'{self.source}': key '{key}': expected {expected}, got {_show(got)}")

    def unknown(self, key, allowed):
        raise UsageError(f"'{self.source}': unknown key '{key}'",
                         hint="allowed keys: " + ", ".join(sorted(allowed)))


def _show(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "nothing"
    if isinstance(value, (dict, list)):
        return type(value).__name__ if not isinstance(value, dict) else "a mapping"
    return repr(value) if isinstance(value, str) else str(value)


def _plain(node):
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


def parse_size(value, checker, key):
    if isinstance(value, bool):
        checker.fail(key, "a size in bytes (e.g. 10485760 or '10MB')", value)
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, str):
        match = _SIZE_RE.match(value)
        if match and (match.group(2) or "").lower() in _SIZE_UNITS:
            return int(float(match.group(1)) * _SIZE_UNITS[(match.group(2) or "").lower()])
    checker.fail(key, "a size in bytes (e.g. 10485760 or '10MB')", value)


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _check_param(checker, name, spec):
    key = f"params.{name}"
    if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
        checker.fail(key, "a param name that is a Python identifier", name)
    if not isinstance(spec, dict):
        checker.fail(key, "a mapping with type and default", spec)
    for sub in spec:
        if sub not in PARAM_KEYS:
            checker.unknown(f"{key}.{sub}", PARAM_KEYS)
    kind = spec.get("type")
    if kind is None:
        checker.fail(f"{key}.type", "one of " + ", ".join(PARAM_TYPES), missing=True)
    if kind not in PARAM_TYPES:
        checker.fail(f"{key}.type", "one of " + ", ".join(PARAM_TYPES), kind)
    if "default" not in spec:
        checker.fail(f"{key}.default", f"a default {kind} value", missing=True)
    primary = spec.get("primary", False)
    if not isinstance(primary, bool):
        checker.fail(f"{key}.primary", "true or false", primary)
    out = {"type": kind, "primary": primary}
    if spec.get("description") is not None:
        if not isinstance(spec["description"], str):
            checker.fail(f"{key}.description", "a string", spec["description"])
        out["description"] = spec["description"]
    if kind in ("int", "float"):
        for bound in ("low", "high"):
            if bound in spec and spec[bound] is not None:
                value = spec[bound]
                if not _is_number(value) or (kind == "int" and not isinstance(value, int)):
                    checker.fail(f"{key}.{bound}", f"a finite {kind}", value)
                out[bound] = value
        if "low" in out and "high" in out and out["low"] > out["high"]:
            checker.fail(f"{key}.low", f"a value not above high ({out['high']})", out["low"])
        if "choices" in spec:
            checker.fail(f"{key}.choices", f"no choices for a {kind} param (use type: categorical)", spec["choices"])
    elif kind == "categorical":
        choices = spec.get("choices")
        if not isinstance(choices, list) or not choices:
            checker.fail(f"{key}.choices", "a non-empty list", choices)
        for choice in choices:
            if not isinstance(choice, (str, int, float, bool)):
                checker.fail(f"{key}.choices", "strings, numbers or booleans", choice)
        out["choices"] = choices
    else:
        for extra in ("low", "high", "choices"):
            if extra in spec:
                checker.fail(f"{key}.{extra}", f"no {extra} for a {kind} param", spec[extra])
    try:
        out["default"] = coerce_value(name, out, spec["default"])
    except UsageError as exc:
        checker.fail(f"{key}.default", f"a valid default ({exc.message})", spec["default"])
    return out


def coerce_value(name, spec, value):
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
            raise UsageError(f"param '{name}' expects one of {', '.join(map(str, spec['choices']))}, got {_show(value)}")
    low, high = spec.get("low"), spec.get("high")
    if low is not None and value < low or high is not None and value > high:
        raise UsageError(f"param '{name}' must be in [{low if low is not None else '-inf'}, "
                         f"{high if high is not None else 'inf'}], got {value}")
    return value


def parse_cli_value(name, spec, text):
    """Turn the text of `-p name=text` into a typed, bounded value."""
    kind = spec["type"]
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


def validate(raw, source, folder_name=None):
    """Validate a parsed hill.yaml mapping; return a plain, defaulted dict."""
    checker = _Checker(source)
    if not isinstance(raw, dict):
        raise UsageError(f"'{source}': expected a mapping at the top level, got {_show(raw)}")
    for key in raw:
        if key not in TOP_KEYS:
            checker.unknown(key, TOP_KEYS)
    if "spec" not in raw:
        checker.fail("spec", f"the integer {SPEC_VERSION}", missing=True)
    if raw["spec"] != SPEC_VERSION or isinstance(raw["spec"], bool):
        checker.fail("spec", f"the integer {SPEC_VERSION}", raw["spec"])
    for key in ("name", "version"):
        if key not in raw:
            checker.fail(key, "a string", missing=True)
        if not isinstance(raw[key], str) or not raw[key]:
            checker.fail(key, "a non-empty string", raw[key])
    try:
        validate_name(raw["name"])
    except UsageError:
        checker.fail("name", "a valid hill name (lowercase letters, digits, '.', '_', '-')", raw["name"])
    if folder_name is not None and raw["name"] != folder_name:
        checker.fail("name", f"'{folder_name}' (the hill's folder name)", raw["name"])
    out = {"spec": SPEC_VERSION, "name": raw["name"], "version": raw["version"],
           "description": raw.get("description") or ""}
    if not isinstance(out["description"], str):
        checker.fail("description", "a string", raw.get("description"))

    evaluator = raw.get("evaluator")
    if evaluator is None:
        checker.fail("evaluator", "a mapping with shape and entry", missing=True)
    if not isinstance(evaluator, dict):
        checker.fail("evaluator", "a mapping with shape and entry", evaluator)
    for key in evaluator:
        if key not in ("shape", "entry"):
            checker.unknown(f"evaluator.{key}", {"shape", "entry"})
    shape = evaluator.get("shape")
    if shape not in ("function", "command"):
        checker.fail("evaluator.shape", "function or command", shape)
    entry = evaluator.get("entry")
    if shape == "function":
        entry = "eval.py" if entry is None else entry
        if not isinstance(entry, str) or not entry.endswith(".py") or entry.startswith("/") or ".." in entry.split("/"):
            checker.fail("evaluator.entry", "a .py file inside the hill (default eval.py)", entry)
    else:
        if isinstance(entry, str):
            entry = entry.split()
        if not isinstance(entry, list) or not entry or not all(isinstance(a, str) and a for a in entry):
            checker.fail("evaluator.entry", "a command as a list of strings", entry)
    out["evaluator"] = {"shape": shape, "entry": entry}

    timeout = raw.get("timeout", DEFAULT_TIMEOUT)
    if not _is_number(timeout) or timeout <= 0:
        checker.fail("timeout", "a number of seconds greater than 0", timeout)
    out["timeout"] = timeout

    params = raw.get("params") or {}
    if not isinstance(params, dict):
        checker.fail("params", "a mapping of param name to {type, default, ...}", params)
    out["params"] = {name: _check_param(checker, name, spec) for name, spec in params.items()}

    metrics = raw.get("metrics")
    if metrics is None:
        if shape == "command":
            checker.fail("metrics", "a list of {name, direction} for a command evaluator", missing=True)
        metrics = []
    if not isinstance(metrics, list):
        checker.fail("metrics", "a list of {name, direction}", metrics)
    if shape == "command" and len(metrics) != 1:
        checker.fail("metrics", "exactly one {name, direction} for a command evaluator (its result is one score)",
                     metrics)
    out["metrics"] = []
    for index, metric in enumerate(metrics):
        key = f"metrics[{index}]"
        if not isinstance(metric, dict):
            checker.fail(key, "a mapping with name and direction", metric)
        for sub in metric:
            if sub not in ("name", "direction", "description"):
                checker.unknown(f"{key}.{sub}", {"name", "direction", "description"})
        if not isinstance(metric.get("name"), str) or not metric.get("name"):
            checker.fail(f"{key}.name", "a non-empty string", metric.get("name"))
        if metric.get("direction") not in ("max", "min"):
            checker.fail(f"{key}.direction", "max or min", metric.get("direction"))
        out["metrics"].append({"name": metric["name"], "direction": metric["direction"],
                               **({"description": metric["description"]} if metric.get("description") else {})})

    blobs = raw.get("blobs") or {}
    if not isinstance(blobs, dict):
        checker.fail("blobs", "a mapping with track and threshold", blobs)
    for key in blobs:
        if key not in ("track", "threshold"):
            checker.unknown(f"blobs.{key}", {"track", "threshold"})
    track = blobs.get("track", [])
    if isinstance(track, str):
        track = [track]
    if not isinstance(track, list) or not all(isinstance(g, str) and g for g in track):
        checker.fail("blobs.track", "a list of glob patterns", track)
    out["blobs"] = {"track": track,
                    "threshold": parse_size(blobs.get("threshold", DEFAULT_BLOB_THRESHOLD), checker, "blobs.threshold")}

    unit_tests = raw.get("unit_tests")
    if unit_tests is not None:
        if not isinstance(unit_tests, dict):
            checker.fail("unit_tests", "a mapping with command and path", unit_tests)
        for key in unit_tests:
            if key not in ("command", "path"):
                checker.unknown(f"unit_tests.{key}", {"command", "path"})
        command = unit_tests.get("command")
        if isinstance(command, str):
            command = command.split()
        if not isinstance(command, list) or not command or not all(isinstance(a, str) for a in command):
            checker.fail("unit_tests.command", "a command as a list of strings", command)
        path = unit_tests.get("path", "unit_tests")
        if not isinstance(path, str) or path.startswith("/") or ".." in path.split("/"):
            checker.fail("unit_tests.path", "a folder inside the hill", path)
        out["unit_tests"] = {"command": command, "path": path}
    else:
        out["unit_tests"] = None

    replicates = raw.get("replicates", 1)
    if isinstance(replicates, bool) or not isinstance(replicates, int) or replicates < 1:
        checker.fail("replicates", "an integer >= 1", replicates)
    out["replicates"] = replicates

    final = raw.get("final")
    out["final"] = {"budget": None}
    if final is not None:
        if not isinstance(final, dict):
            checker.fail("final", "a mapping with budget", final)
        for key in final:
            if key != "budget":
                checker.unknown(f"final.{key}", {"budget"})
        budget = final.get("budget")
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 0):
            checker.fail("final.budget", "an integer >= 0", budget)
        out["final"]["budget"] = budget

    exclusive = raw.get("exclusive")
    if exclusive is not None and (not isinstance(exclusive, str) or not re.match(r"^[a-z0-9_-]+$", exclusive)):
        checker.fail("exclusive", "a resource name such as gpu", exclusive)
    out["exclusive"] = exclusive

    sandbox = raw.get("sandbox", "auto")
    if sandbox not in ("auto", "bwrap", "none"):
        checker.fail("sandbox", "auto, bwrap or none", sandbox)
    out["sandbox"] = sandbox

    network = raw.get("network", False)
    if not isinstance(network, bool):
        checker.fail("network", "true or false", network)
    out["network"] = network

    limits = raw.get("limits") or {}
    if not isinstance(limits, dict):
        checker.fail("limits", "a mapping with time and memory", limits)
    for key in limits:
        if key not in ("time", "memory"):
            checker.unknown(f"limits.{key}", {"time", "memory"})
    time_limit = limits.get("time", timeout)
    if not _is_number(time_limit) or time_limit <= 0:
        checker.fail("limits.time", "a number of seconds greater than 0", time_limit)
    memory = parse_size(limits.get("memory", DEFAULT_MEMORY), checker, "limits.memory")
    if memory < 64 * 1024 * 1024:
        checker.fail("limits.memory", "at least 64MiB", limits.get("memory"))
    out["limits"] = {"time": time_limit, "memory": memory}
    return out


def parse_text(text, source, folder_name=None):
    """Parse hill.yaml text (round-trip loader, within yamlfile's bounds)
    and validate it."""
    return validate(_plain(yamlfile.load(text, source, typ="rt")), source, folder_name)


def load(hill_dir):
    path = os.path.join(hill_dir, "hill.yaml")
    try:
        text = yamlfile.read_text(path)
    except FileNotFoundError:
        raise UsageError(f"'{path}' is missing", hint="every hill needs a hill.yaml manifest")
    folder = os.path.basename(os.path.abspath(hill_dir))
    # One command reads the same manifest several times (check, locks,
    # listing); parse each text once, hand out copies.
    memo_key = (path, folder, text)
    if memo_key not in _parsed:
        _parsed.clear()
        _parsed[memo_key] = parse_text(text, path, folder)
    return copy.deepcopy(_parsed[memo_key])


_parsed = {}
