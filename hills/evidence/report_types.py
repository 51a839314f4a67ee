"""The report's shape (hills-report(5), FIELDS) for the type checker: a
TypedDict, imported under TYPE_CHECKING only, so it costs the eval
nothing at run time. tests/test_guard.py holds its keys to the man page's."""

from __future__ import annotations

from typing import Any, TypedDict


class Tool(TypedDict):
    """`tool`: the hills that made the report."""

    version: str
    sha256: str


class Report(TypedDict, total=False):
    """A report, one key per FIELDS entry of hills-report(5). Every key is
    optional to the checker: a report is built in steps (buggy until a
    replicate says otherwise), and one read back may be older."""

    hill: str
    tree_hash: str | None
    commit: str | None
    submission_hash: str | None
    submission_git: dict[str, Any] | None  # {ref, dirty, subject}
    passed: bool
    status: str
    reason: str | None
    config: list[dict[str, Any]]  # {name, value, primary}
    metrics: list[dict[str, Any]]  # {name, value, direction}, in ranking order
    details: dict[str, Any]
    params: dict[str, Any]
    param_defaults: dict[str, Any]
    neutral_params: list[str]
    final: bool
    release: bool  # a reusable holdout's --final: the holdout score released (docs/noise.md)
    validation: float | None  # beside release: the validation score of the first metric
    official: bool
    official_reason: str | None
    forced: bool
    trust: str
    user: str
    tool: Tool
    timestamp: str
    report_version: int
    run_id: str
    replicates: int
    corpus: int | None
    trial: dict[str, Any]
    ab: dict[str, Any]  # {role, pair, of, id}: one run of an A/B
    note: str  # -m TEXT: the attempt's change in words
    warnings: list[str]
    duration_s: float
    output_dropped_bytes: int
    unit_tests: dict[str, Any] | None
    isolation: dict[str, Any]
    solution_phase: dict[str, Any]
    measured: dict[str, Any] | None
    claimed: list[dict[str, Any]]
    audit: dict[str, Any]
    fingerprint: dict[str, Any]
    timing_metrics: list[str]
    seeds: dict[str, Any]
    verdict: dict[str, Any]
    instances: dict[str, float]
    items: dict[str, Any]  # {metric, aggregate, values}
    noise: dict[str, Any]  # {metric, replicates, items, items_reason, se, label}
    side_metrics: dict[str, float]
    spread: dict[str, dict[str, Any]]  # metric name -> {min, max, mad, n}
    report: dict[str, Any]
    report_replicate: int
    signer: str | None  # the signing key's fingerprint (trust.Keys.fingerprint)
    signature: str
