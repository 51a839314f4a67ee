"""The shape of a validated hill.yaml (hill.yaml(5), the KEYS table of
hills.disk.manifest) for the type checker: a TypedDict, imported under
TYPE_CHECKING only, so it costs the eval nothing at run time.
tests/test_guard.py holds its keys to the table's."""

from __future__ import annotations

from typing import Any, TypedDict


class Manifest(TypedDict):
    """A hill.yaml as hills.disk.manifest.validate returns it: validation fills
    every default, so every key is there. The mappings below it are the
    key tables' (EVALUATOR_KEYS, SOLUTION_KEYS, PARAM_KEYS...)."""

    spec: int
    name: str
    version: str
    description: str
    evaluator: dict[str, Any]
    solution: Any  # a SOLUTION_KEYS mapping or None; read once _takes_solution said it is there
    checks: dict[str, Any]  # a CHECKS_KEYS mapping: the stand-in of the leak probe and the cheat corpus
    timeout: int | float
    params: dict[str, dict[str, Any]]  # param name -> its declaration
    metrics: Any  # a list of METRIC_KEYS mappings, or None
    blobs: dict[str, Any]
    unit_tests: Any  # a UNIT_TESTS_KEYS mapping or None; read once it said it is there
    replicates: int
    seeds: str
    final: dict[str, Any]
    exclusive: str | None
    sandbox: str
    network: bool
    limits: dict[str, Any]
