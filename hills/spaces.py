"""Tunable params a submission declares in params.json, and the values of
the current trial.

Submitted code reads its knobs with::

    from hills import spaces
    P = spaces.params()   # the trial's values, else the declared defaults

This module uses the standard library only: hills puts a copy of it on the
PYTHONPATH of evaluators and submissions, so it imports inside a hill's
environment where hills itself is not installed.

A declaration maps a name to one of:

    {"type": "int",   "low": 1, "high": 64, "log": true, "step": 1, "default": 8}
    {"type": "float", "low": 1e-4, "high": 0.1, "log": true, "default": 0.01}
    {"type": "categorical", "choices": ["grid", "random"], "default": "grid"}
"""

from __future__ import annotations

import json
import math
import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    import random
    from pathlib import Path
    from typing import Any, TypeGuard

DECLARATION = "params.json"
ENV_VALUES = "HILLS_PARAMS"
# The knob values in every phase: a solution phase's HILLS_PARAMS holds the
# hill's params instead.
ENV_KNOBS = "HILLS_KNOBS"
# A declaration is a few hundred bytes, three levels deep; the caps bound the
# time and memory a hostile file can cost: the size before parsing, the depth
# on the parsed value (json's own recursion limit stops a far deeper one first).
MAX_BYTES = 256 * 1024
MAX_DEPTH = 32
_KEYS = {"int": {"type", "low", "high", "log", "step", "default"},
         "float": {"type", "low", "high", "log", "step", "default"},
         "categorical": {"type", "choices", "default"}}


class DeclarationError(ValueError):
    """params.json breaks the format; the message names the knob and key."""


class ValueRefused(ValueError):
    """A trial value outside its declared type or range."""


def _number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def validate(declaration: object, source: str = DECLARATION) -> dict[str, dict[str, Any]]:
    """Check a parsed declaration; return it with defaults typed."""
    if not isinstance(declaration, dict) or not declaration:
        raise DeclarationError(f"{source}: expected a non-empty JSON object of knob name to spec")
    checked: dict[str, dict[str, Any]] = {}
    for name, spec in declaration.items():
        where = f"{source}: knob '{name}'"
        if not isinstance(spec, dict):
            raise DeclarationError(f"{where}: expected an object with type and default")
        kind = spec.get("type")
        if kind not in _KEYS:
            raise DeclarationError(f"{where}: key 'type': expected int, float or categorical, got {kind!r}")
        unknown = sorted(set(spec) - _KEYS[kind])
        if unknown:
            raise DeclarationError(f"{where}: unknown key '{unknown[0]}' (allowed: {', '.join(sorted(_KEYS[kind]))})")
        if "default" not in spec:
            raise DeclarationError(f"{where}: missing key 'default'")
        if kind == "categorical":
            choices = spec.get("choices")
            if not isinstance(choices, list) or not choices:
                raise DeclarationError(f"{where}: key 'choices': expected a non-empty list")
            checked[name] = {"type": kind, "choices": choices, "default": spec["default"]}
        else:
            low, high = spec.get("low"), spec.get("high")
            if not _number(low) or not _number(high):
                raise DeclarationError(f"{where}: keys 'low' and 'high': expected finite numbers")
            if kind == "int" and (not isinstance(low, int) or not isinstance(high, int)):
                raise DeclarationError(f"{where}: keys 'low' and 'high': expected integers for an int knob")
            if low > high:
                raise DeclarationError(f"{where}: key 'low' ({low}) is above 'high' ({high})")
            log = spec.get("log", False)
            if not isinstance(log, bool):
                raise DeclarationError(f"{where}: key 'log': expected true or false")
            if log and low <= 0:
                raise DeclarationError(f"{where}: key 'low': a log-scaled knob needs low > 0, got {low}")
            step = spec.get("step")
            if step is not None and (not _number(step) or step <= 0 or (kind == "int" and not isinstance(step, int))):
                raise DeclarationError(f"{where}: key 'step': expected a positive {kind}")
            if step is not None and log:
                raise DeclarationError(f"{where}: keys 'step' and 'log' cannot be combined")
            checked[name] = {"type": kind, "low": low, "high": high, "log": log, "default": spec["default"]}
            if step is not None:
                checked[name]["step"] = step
        try:
            checked[name]["default"] = check_value(checked, name, spec["default"])
        except ValueRefused as exc:
            raise DeclarationError(f"{where}: key 'default': {exc}")
    return checked


def check_value(declaration: dict[str, dict[str, Any]], name: str, value: Any) -> Any:
    """The value, typed, when it fits knob `name`; else ValueRefused with the range."""
    if name not in declaration:
        raise ValueRefused(f"unknown knob '{name}' (declared: {', '.join(sorted(declaration))})")
    spec = declaration[name]
    kind = spec["type"]
    if kind == "categorical":
        # The choice itself, so 1 never passes for true (nor 1.0 for 1).
        for choice in spec["choices"]:
            if choice == value and isinstance(choice, bool) == isinstance(value, bool):
                return choice
        raise ValueRefused(f"knob '{name}' must be one of {spec['choices']}, got {value!r}")
    if kind == "int":
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueRefused(f"knob '{name}' must be an int in [{spec['low']}, {spec['high']}], got {value!r}")
    elif not _number(value):
        raise ValueRefused(f"knob '{name}' must be a float in [{spec['low']}, {spec['high']}], got {value!r}")
    if not spec["low"] <= value <= spec["high"]:
        raise ValueRefused(f"knob '{name}' must be in [{spec['low']}, {spec['high']}], got {value}")
    step = spec.get("step")
    if step:
        steps = (value - spec["low"]) / step
        if abs(steps - round(steps)) > 1e-9 * max(1.0, abs(steps)):
            raise ValueRefused(f"knob '{name}' must be {spec['low']} plus a multiple of its step {step}, got {value}")
    return float(value) if kind == "float" else value


def defaults(declaration: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {name: spec["default"] for name, spec in declaration.items()}


def sample(declaration: dict[str, dict[str, Any]], rng: random.Random | None = None) -> dict[str, Any]:
    """One random point of the space (the built-in random tuner)."""
    import random

    rng = rng or random.Random()
    point: dict[str, Any] = {}
    for name, spec in declaration.items():
        if spec["type"] == "categorical":
            point[name] = rng.choice(spec["choices"])
            continue
        low, high = spec["low"], spec["high"]
        if spec["log"]:
            value = math.exp(rng.uniform(math.log(low), math.log(high)))
        else:
            value = rng.uniform(low, high)
        step = spec.get("step")
        if step:
            # On the grid low, low + step, ...: never rounded past high.
            value = low + min(round((value - low) / step), math.floor((high - low) / step)) * step
        if spec["type"] == "int":
            value = int(round(value))
        point[name] = min(max(value, low), high)
    return point


def load(folder: Path | str) -> tuple[dict[str, dict[str, Any]] | None, str | None]:
    """(declaration or None, warning or None) for the params.json in `folder`."""
    path = os.path.join(folder, DECLARATION)
    if not os.path.exists(path):
        return None, None
    try:
        return validate(_read(path)), None
    except DeclarationError as exc:
        return None, f"{exc}; scored on the submission's own defaults"


def _read(path: str) -> Any:
    """The parsed JSON of a declaration, within MAX_BYTES and MAX_DEPTH."""
    try:
        # Never blocks: a FIFO is refused before anything is read from it.
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise DeclarationError(f"{DECLARATION} is not a regular file")
            data = handle.read(MAX_BYTES + 1) if info.st_size <= MAX_BYTES else b""
    except OSError as exc:
        raise DeclarationError(f"{DECLARATION} cannot be read ({exc.strerror})")
    if info.st_size > MAX_BYTES or len(data) > MAX_BYTES:
        raise DeclarationError(f"{DECLARATION} is larger than {MAX_BYTES // 1024} KiB ({MAX_BYTES} bytes)")
    too_deep = DeclarationError(f"{DECLARATION} is nested deeper than {MAX_DEPTH} levels")
    try:
        raw = json.loads(data)
    except RecursionError:
        raise too_deep from None
    except ValueError as exc:
        raise DeclarationError(f"{DECLARATION} is not valid JSON ({exc})")
    pending: list[tuple[Any, int]] = [(raw, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, (dict, list)):
            if depth > MAX_DEPTH:
                raise too_deep
            pending.extend((item, depth + 1) for item in (value.values() if isinstance(value, dict) else value))
    return raw


def params(folder: Path | str | None = None) -> dict[str, Any]:
    """The current trial's knob values; outside a trial, the declared defaults."""
    given = os.environ.get(ENV_KNOBS) or os.environ.get(ENV_VALUES)
    if given:
        return json.loads(given)
    folder = folder or os.environ.get("HILLS_SUBMISSION") or os.getcwd()
    declaration, _warning = load(folder)
    return defaults(declaration) if declaration else {}
