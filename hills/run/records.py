"""The records one eval passes along, not argument rows: the frozen
`EvalRequest` (what the user asked), the `EvalPlan` resolved from it before
anything is logged (plan.py), the one `EvalContext` the replicates run in,
a `Replicate` and a `RunResult` per replicate (phases.py), and the
`Outcome` that `evaluate()` returns on every path once the attempts log is
open (evaluate.py)."""

from __future__ import annotations

import types
from collections.abc import Mapping

from ..base.errors import EXIT_BUG
from ..base.records import frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from ..disk.hill import Hill
    from ..disk.manifest_types import Manifest as Spec  # a parsed hill.yaml (manifest.py)
    from ..evidence.report_types import Report
    from ..evidence.trust import Keys
    from . import runner, sandbox

    Say = Callable[[str], None]
    Locks = dict[str, dict[str, Any]]  # lock file name -> its entries


def quiet(message: str) -> None:
    """The default `say`: an eval run as a library call says nothing."""


@frozen
class EvalRequest:
    """What the user asked for: score the folder `submission` against `hill`."""

    hill: Hill
    submission: str
    param_texts: tuple[str, ...] = ()  # -p NAME=VALUE, as given
    final: bool = False
    force: bool = False
    current: bool = False
    queue: bool = False
    verbose: bool = False
    repeat: int | None = None  # None: hill.yaml `replicates:`
    # Trial values for the submission's params.json: texts from --knob,
    # or typed values from a tuner.
    knobs: tuple[str, ...] | Mapping[str, Any] | None = None
    # A run of an A/B (hills/many/verdict.py): {role, pair, of, id}, signed
    # into its report as `ab`; such a run is never official, never a best.
    ab: Mapping[str, Any] | None = None
    note: str | None = None  # -m TEXT: the attempt's change in words (plan.check_note)

    def __post_init__(self) -> None:
        object.__setattr__(self, "param_texts", tuple(self.param_texts))
        if self.ab is not None:
            object.__setattr__(self, "ab", types.MappingProxyType(dict(self.ab)))
        if isinstance(self.knobs, Mapping):
            object.__setattr__(self, "knobs", types.MappingProxyType(dict(self.knobs)))
        elif self.knobs is not None:
            object.__setattr__(self, "knobs", tuple(self.knobs))


@frozen
class EvalPlan:
    """What an eval will score and where it is logged, resolved before
    anything runs: the pinned version, its manifest, the params and knob
    values, how many replicates, and the key that signs the report."""

    request: EvalRequest
    head: str | None
    tree_hash: str | None  # the commit's tree; None before the first commit
    log_tree: str | None  # the version whose log takes the report; None: the working tree's
    spec: Spec
    params: dict[str, Any]
    trial: dict[str, Any] | None  # knob values, when the submission declares knobs
    knob_warning: str | None
    repeat: int
    official: bool
    official_reason: str | None
    forced: bool
    key: Keys
    corpus: int | None = None  # the cheat corpus version the tree passed at commit

    @property
    def hill(self) -> Hill:
        return self.request.hill

    @property
    def budget(self) -> int | None:
        """The holdout budget this eval counts against, when it is a --final one."""
        return self.spec["final"]["budget"] if self.request.final else None

    @property
    def reusable(self) -> bool:
        """Whether this is a --final eval of a reusable holdout (hill.yaml
        `final.mode`): the validation split, then the holdout split, and
        Thresholdout's answer (thresholdout.py)."""
        return self.request.final and self.spec["final"].get("mode") == "reusable"


@frozen
class EvalContext:
    """Everything a replicate needs, built once by `build_context` when the
    run folder holds the hill and the snapshot: the interpreter of the
    hill's environment and the confinement of the evaluator."""

    spec: Spec
    params: dict[str, Any]
    trial: dict[str, Any] | None
    repeat: int
    final: bool
    verbose: bool
    queue: bool
    split: str  # HILLS_SPLIT: validation, or holdout under --final (on a reusable one's second pass)
    run_dir: str
    run_hill_dir: str
    source_dir: str  # the snapshot each replicate copies
    python: str
    sdk_dir: str
    wrapper: str  # $HILLS_PYTHON: the confined interpreter
    confinement: sandbox.Confinement
    seed_key: str = ""  # hex: draws the replicate and secret seeds (seeds.py)
    tag: str = ""  # before each replicate's tag: "-holdout" on the holdout pass of a reusable --final

    def holdout_pass(self) -> EvalContext:
        """This context for the holdout pass of a reusable --final: the same
        submission, folders and seeds on the holdout split, its files apart
        (`tag`), and its output never streamed (-v): nothing of it reaches
        the climber but Thresholdout's answer."""
        return EvalContext(spec=self.spec, params=self.params, trial=self.trial, repeat=self.repeat, final=True,
                           verbose=False, queue=self.queue, split="holdout", run_dir=self.run_dir,
                           run_hill_dir=self.run_hill_dir, source_dir=self.source_dir, python=self.python,
                           sdk_dir=self.sdk_dir, wrapper=self.wrapper, confinement=self.confinement,
                           seed_key=self.seed_key, tag="-holdout")


@frozen
class Replicate:
    """One replicate's own copy of the submission and its environment."""

    seed: int
    tag: str  # "" for a lone replicate, else "-SEED": names its logs and folders
    submission_dir: str
    env: Mapping[str, str]  # added to the evaluator's environment
    hidden: tuple[str, ...] = ()  # hidden from the evaluator: the snapshot, when a solution phase ran
    secret: int = 0  # HILLS_SECRET_SEED: the evaluator's alone (seeds.py)


@frozen
class SolutionPhase:
    """How a replicate's solution phase went: whether it ran (a `when` file
    absent skips it), its process, and the folder of outputs the scoring
    phase gets (None when it failed)."""

    ran: bool
    process: runner.ProcessOutcome | None
    outputs_dir: str | None


@frozen
class RunResult:
    """What one replicate's evaluator gave: the report core (None when it
    gave none), its status and reason, and how its process ended."""

    replicate: Replicate
    process: runner.ProcessOutcome
    status: str
    reason: str | None = None
    core: dict[str, Any] | None = None


@frozen
class UnitTestsResult:
    """The frozen unit tests' verdict on a submission; `record` is what the
    report keeps of their run (None when they could not be started)."""

    status: str
    reason: str | None
    record: dict[str, Any] | None

    @property
    def ok(self) -> bool:
        return self.status == "passing"


@frozen
class Runs:
    """The replicates of one eval, together: the cores of those that scored,
    the status and reason of the last, and what they cost."""

    cores: tuple[dict[str, Any], ...]
    status: str
    reason: str | None
    duration_s: float
    output_dropped: int
    unit_tests: UnitTestsResult | None  # None when they did not run
    solution: dict[str, Any] | None = None  # the solution phase, when the hill has one


@frozen
class Outcome:
    """How an eval ended, on every path once its attempts log was open:
    the report (signed and logged) and the exit code; for an eval that was
    not scored, the error and hint to show, and `error`, what stopped it
    (the refusal, the interrupt or a bug in hills), for a caller to hand to
    the error funnel once the report is out."""

    report: Report
    exit_code: int
    message: str | None = None
    hint: str | None = None
    error: BaseException | None = None

    @property
    def scored(self) -> bool:
        """Whether the evaluator's verdict stands (passing or not): not
        refused, interrupted or crashed."""
        return self.error is None

    @property
    def crashed(self) -> bool:
        """Whether a bug in hills stopped the eval (its report says buggy)."""
        return self.exit_code == EXIT_BUG
