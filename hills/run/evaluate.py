"""`hills eval`: pin the hill, verify its locks, snapshot the submission, run
the evaluator under the watchdog, and sign, log and note the outcome.

This module is the pipeline (DESIGN section 6) and its two entries,
`evaluate()` and `evaluate_unlogged()`. Its parts: records.py (what passes
from step to step), plan.py (step 1, before anything is logged),
pinned.py (the committed version's files), env.py (the evaluator's
environment and sdk folder), phases.py (the processes of a replicate),
logbook.py (the attempts log) and folders.py (the run folders)."""

from __future__ import annotations

import os

from ..base import progress, state
from ..base.errors import (EXIT_BUG, EXIT_INTERRUPTED, EXIT_NO, EXIT_OK, EnvironmentProblem, HillsError, NotScored,
                           Refused)
from ..base.git import lineage
from ..disk import locks, uvenv
from ..evidence import caller, chain, report as report_module
from . import measures, noise, replicates, runner, sandbox, seeds, snapshot
from .env import sdk_path
from .folders import prune_runs, run_id
from .logbook import Start, attempts_path, budget_lock, finish, guard_budget
from .phases import (BadOutput, collect_outputs, intake_folders, replicate, run_command, run_function,
                     run_solution, run_unit_tests, scoring_replicate, scoring_stop, solution_inputs)
from .pinned import check_locks, checked_pin, copy_hill, prepare_hill
from .plan import resolve, takes_in_while_booting, takes_solution
from .records import EvalContext, EvalRequest, Outcome, RunResult, Runs, quiet

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, ContextManager

    from ..evidence.report_types import Report
    from .records import EvalPlan, Locks, Replicate, Say
    from .standby import Standby


def evaluate(req: EvalRequest, say: Say = quiet, standby: Standby | None = None) -> Outcome:
    """Run one evaluation. A refusal before the attempts log is opened (bad
    usage, a hill that allows no score) raises HillsError; from then on
    every path (scored, refused, interrupted, crashed) is logged and
    returned as the Outcome. `standby`: the one a warm server's spare made
    for this call (docs/standby.md), adopted where the plan fits it."""
    plan = resolve(req)
    held = standby.adopt(plan) if standby is not None else None
    try:
        run_dir = open_run(plan, held)
        envelope = _envelope(plan, os.path.basename(run_dir))
        in_use = held.in_use() if held is not None else state.file_lock(os.path.join(run_dir, ".in-use"))
        with budget_lock(plan), in_use:
            guard_budget(plan, run_dir)
            outcome = _run_logged(plan, run_dir, envelope, say, held)
    finally:
        if held is not None:
            held.discard(keep_folder=True)  # a no-op once the eval took its process
    if outcome.scored:
        name = req.hill.name
        state.housekeeping(lambda: prune_runs(name))
    return outcome


def evaluate_unlogged(req: EvalRequest, run_dir: str, say: Say = quiet) -> Report:
    """Run one evaluation in `run_dir`, an empty folder the caller made and
    removes, through the same pipeline as `evaluate()`, and return its
    report unsigned: nothing is logged, signed or noted, and no budget is
    counted (the leak probe of `hills check`). A refusal raises its HillsError."""
    plan = resolve(req)
    envelope = _envelope(plan, os.path.basename(run_dir))
    with state.file_lock(os.path.join(run_dir, ".in-use")), state.write_errors_as_problems(run_dir):
        _pipeline(plan, run_dir, envelope, say)
    return envelope


def open_run(plan: EvalPlan, held: Standby | None = None) -> str:
    """Make the run folder (a standby's is made already), once the attempts
    log is known to take the outcome: a log that cannot refuses before the
    evaluator runs."""
    hill = plan.hill
    try:
        chain.check_appendable(attempts_path(hill.name, plan.log_tree, hill.path), plan.key)
    except Refused as exc:
        raise NotScored(exc.message, hint=exc.hint or f"see 'hills attempts {hill.name}'") from None
    if held is not None:
        return held.ctx.run_dir
    run_dir = os.path.join(state.runs_dir(hill.name), run_id())
    os.makedirs(run_dir)
    return run_dir


def _envelope(plan: EvalPlan, run_id: str) -> Report:
    """The report as it stands before the evaluator runs: buggy until a
    replicate says otherwise."""
    req, current = plan.request, plan.request.current
    envelope: Report = {
        "hill": plan.hill.name, "tree_hash": None if current else plan.tree_hash,
        "commit": None if current else plan.head, "submission_hash": None, "submission_git": None, "passed": False,
        "status": "buggy", "reason": None, "config": [], "metrics": [], "details": {}, "params": plan.params,
        "final": bool(req.final), "official": plan.official, "official_reason": plan.official_reason,
        "forced": plan.forced, "trust": caller.trust(), "user": caller.user(), "tool": report_module.tool_identity(),
        "timestamp": report_module.timestamp(), "report_version": report_module.REPORT_VERSION, "run_id": run_id,
        "replicates": 0, "corpus": plan.corpus,
    }
    if req.note is not None:
        envelope["note"] = req.note
    if plan.trial is not None:
        envelope["trial"] = plan.trial
    if req.ab is not None:
        envelope["ab"] = dict(req.ab)
    if plan.knob_warning:
        envelope["warnings"] = [plan.knob_warning]
    return envelope


class Resource:
    """An exclusive machine resource (hill.yaml `exclusive:`), held for the eval
    (and for a dev run, run/devrun.py, which must not share it either)."""

    def __init__(self, name: str | None, queue: bool, say: Say) -> None:
        self.name, self.queue, self.say = name, queue, say
        self._ctx: ContextManager[bool] | None = None

    def __enter__(self) -> "Resource":
        if not self.name:
            return self
        path = os.path.join(state.home(), "locks", f"resource-{self.name}.lock")
        self._ctx = state.file_lock(path, blocking=False)
        if self._ctx.__enter__():
            return self
        self._ctx.__exit__(None, None, None)
        if not self.queue:
            raise EnvironmentProblem(f"resource '{self.name}' is busy: another eval is using it",
                                     hint="pass --queue to wait for your turn")
        self.say(f"hills: resource '{self.name}' is busy; waiting for the eval ahead to finish (--queue)")
        self._ctx = state.file_lock(path, blocking=True)
        self._ctx.__enter__()
        self.say(f"hills: resource '{self.name}' acquired")
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._ctx is not None:
            self._ctx.__exit__(*exc)


def _run_logged(plan: EvalPlan, run_dir: str, envelope: Report, say: Say, held: Standby | None = None) -> Outcome:
    """Run the pipeline and log its report, whatever happens: refusals,
    interrupts and bugs in hills are attempts too (no survivorship). The
    `started` entry goes first, before anything submitted runs."""
    start = Start(plan, envelope)
    try:
        # A full disk or a read-only folder is the machine's problem, named, not a bug in hills.
        with state.write_errors_as_problems(run_dir):
            _pipeline(plan, run_dir, envelope, say, start, held)
    except HillsError as exc:
        envelope.update({"status": "refused", "passed": False, "reason": exc.message})
        finish(plan, envelope, start.link)
        return Outcome(envelope, exc.exit_code, exc.message, exc.hint, exc)
    except KeyboardInterrupt:
        if envelope["status"] != "interrupted":  # else the runner already said which signal
            envelope.update({"status": "interrupted", "passed": False, "reason": "interrupted by the user (Ctrl-C)"})
        return _interrupted(plan, envelope, start.link)
    except Exception as exc:
        message = f"internal error in hills: {type(exc).__name__}: {exc}"
        envelope.update({"status": "buggy", "passed": False, "reason": message})
        finish(plan, envelope, start.link)
        return Outcome(envelope, EXIT_BUG, message, error=exc)
    if envelope["status"] == "interrupted":  # the runner said which signal stopped it
        return _interrupted(plan, envelope, start.link)
    finish(plan, envelope, start.link)
    return Outcome(envelope, EXIT_OK if envelope["status"] == "passing" else EXIT_NO)


def _interrupted(plan: EvalPlan, envelope: Report, start: dict[str, Any] | None) -> Outcome:
    """Log an interrupted eval; its outcome exits 130 like any interrupt."""
    finish(plan, envelope, start)
    return Outcome(envelope, EXIT_INTERRUPTED, "interrupted", error=KeyboardInterrupt(envelope["reason"]))


def _pipeline(plan: EvalPlan, run_dir: str, envelope: Report, say: Say,
              start: Callable[[EvalContext], None] | None = None, held: Standby | None = None) -> None:
    """DESIGN section 6, steps 2 to 5: verify the locks, fill the run folder,
    run the replicates, and record them in `envelope`; `start` logs the
    `started` entry once nothing is left to refuse (not for an unlogged eval).
    `held`: the standby this eval adopted (its context, folders and process)."""
    req = plan.request
    cache = locks.StatCache(plan.hill.path)
    run_hill_dir = os.path.join(run_dir, "hill")
    intake: Callable[[], None] | None = None
    python = None
    if held is None and takes_in_while_booting(plan, isinstance(start, Start)):
        assert plan.tree_hash is not None
        python = uvenv.ready(plan.hill.name, plan.tree_hash)  # a build needs the hill's files first
    if python is None:
        # `cryptography` signs the started entry before anything runs:
        # loading while the hill and the submission are copied, it is there
        # (or nearly) by then, where loading at the first signature would
        # wait all of it. Where the evaluator boots first, it loads once
        # that process is started (the intake below, D-349): its import
        # holds the interpreter lock that starting a process needs.
        plan.key.preload()
    if held is not None or python is not None:
        # The evaluator's process boots (or a standby's waits) while the
        # hill and the submission are copied in: its folders exist, empty,
        # before it starts, and are filled before it gets its key
        # (runner.run's `prepare`).
        if held is not None:
            pristine, expected, ctx = held.pristine, held.expected, held.ctx
            progress.phase(say, "preparing the hill's environment")
        else:
            pristine, expected = checked_pin(plan, cache)
            os.mkdir(run_hill_dir)
            ctx = build_context(plan, run_dir, expected, say, python=python)

        def intake() -> None:
            plan.key.preload()  # a no-op where it is loaded (a warm worker, a standby)
            copy_hill(plan, run_hill_dir, pristine, expected, into=True)
            _take_submission(plan, run_dir, envelope, say)
    else:
        expected = prepare_hill(plan, run_hill_dir, cache)
        _take_submission(plan, run_dir, envelope, say)
        ctx = build_context(plan, run_dir, expected, say)
    holdout: Runs | None = None
    try:
        runs = _run_replicates(ctx, say, start, intake, held)
        if plan.reusable and runs.status == "passing":
            # The same submission and seeds on the holdout split; its
            # unit tests ran on the first pass.
            holdout = _run_replicates(ctx.holdout_pass(), say, unit_tests=False)
    finally:
        ctx.confinement.close()
    if runs.unit_tests is not None:
        envelope["unit_tests"] = runs.unit_tests.record
    if runs.solution is not None:
        envelope["solution_phase"] = runs.solution
    envelope["duration_s"] = round(runs.duration_s, 3)
    if runs.output_dropped:
        envelope["output_dropped_bytes"] = runs.output_dropped
    if runs.cores:
        combined: Any = replicates.aggregate(list(runs.cores))  # report keys (report.normalize_core)
        envelope.update(combined)
    envelope["replicates"] = len(runs.cores)
    if plan.reusable:
        runs = _reusable_answer(plan, envelope, runs, holdout)
    # How the evaluator was confined: primary config, so an unconfined
    # report never ranks beside confined ones (rank.primary_tuple).
    envelope["config"] = [c for c in envelope["config"] if c.get("name") != "isolation"] + [
        {"name": "isolation", "value": ctx.confinement.level, "primary": True}]
    # What ran confined, the caps and the caps hit (hills-report(5)).
    envelope["isolation"] = ctx.confinement.record()
    envelope["seeds"] = seeds.record(ctx.spec, ctx.seed_key, max(len(runs.cores), 1))
    measures.attach(envelope, ctx.confinement.events, ctx.spec)  # measured, claimed, audit, fingerprint
    noise.attach(envelope, runs.cores, ctx.spec, bool(req.final))  # replicates and items (docs/noise.md)
    reason = runs.reason
    hits = envelope["isolation"]["caps_hit"]
    if hits and runs.status not in ("passing", "interrupted"):
        named = "; ".join(f"{hit['cap']} (limit {hit['limit']}, seen {hit.get('seen')})" for hit in hits)
        reason = f"{reason or runs.status}; submitted code was stopped at its cap: {named}"
    envelope.update({"status": runs.status, "passed": runs.status == "passing", "reason": reason})
    report_module.judge(envelope, ctx.spec)  # comparability and plausibility (hills-report(5))
    if runs.status != "interrupted" and not req.current:
        check_locks(plan.hill, expected, cache)


def _reusable_answer(plan: EvalPlan, envelope: Report, runs: Runs, holdout: Runs | None) -> Runs:
    """Thresholdout's answer in `envelope`, the validation pass's report:
    its first metric becomes the answer, with `release` and `validation`
    beside it (docs/noise.md). No holdout number but a release's reaches
    it. A holdout pass that did not pass is a release of its status and
    reason; an interrupted one releases nothing. Returns the runs whose
    status and reason the report takes."""
    from . import thresholdout

    metrics = envelope["metrics"]
    envelope["validation"] = metrics[0]["value"] if metrics else None
    envelope["release"] = False
    if holdout is not None:
        envelope["duration_s"] = round(runs.duration_s + holdout.duration_s, 3)
    if holdout is None or holdout.status == "interrupted":
        return runs if holdout is None else _with_status(runs, holdout)
    assert plan.tree_hash is not None  # resolve() refused a budgeted --final --current
    if holdout.cores:
        # The report answers for the holdout: its config (an evaluator's
        # `mode: holdout`, say) decides which reports it ranks with, as a
        # plain --final's does.
        envelope["config"] = list(holdout.cores[0].get("config", []))
    name, tree, final = plan.hill.name, plan.tree_hash, plan.spec["final"]
    gamma = thresholdout.held_gamma(name, tree, final["sigma"])
    if holdout.status == "passing" and holdout.cores:
        told = thresholdout.answer(metrics[0]["value"], _first_value(holdout.cores), final["threshold"],
                                   final["sigma"], gamma)
    else:  # its status is news of the holdout: released, with its score where it gave one
        told = thresholdout.release(_first_value(holdout.cores), final["sigma"]) if holdout.cores else \
            thresholdout.Answer(metrics[0]["value"], True, thresholdout.laplace(2.0 * final["sigma"]))
        runs = _with_status(runs, holdout)
    if told.release:
        # A fresh threshold noise is sealed before the release is shown:
        # an eval killed in between has shown nothing and spent nothing.
        assert told.next_gamma is not None
        thresholdout.keep_gamma(name, tree, told.next_gamma)
        envelope["release"] = True
    metrics[0]["value"] = told.value
    return runs


def _first_value(cores: tuple[dict[str, Any], ...]) -> float:
    """The first metric's value over the replicates, as the report would say it."""
    pooled: Any = replicates.aggregate(list(cores))
    return pooled["metrics"][0]["value"]


def _with_status(runs: Runs, holdout: Runs) -> Runs:
    """The validation pass's runs with the holdout pass's status and reason."""
    return Runs(runs.cores, holdout.status, holdout.reason, runs.duration_s, runs.output_dropped, runs.unit_tests,
                runs.solution)


def _take_submission(plan: EvalPlan, run_dir: str, envelope: Report, say: Say) -> None:
    """Snapshot the submission into the run folder's source/, and say what is scored."""
    req = plan.request
    envelope["submission_git"] = lineage(req.submission)
    envelope["submission_hash"] = snapshot.snapshot(req.submission, os.path.join(run_dir, "source"))
    progress.header(say, envelope, req.submission, plan.spec.get("version"))


def build_context(plan: EvalPlan, run_dir: str, expected: Locks, say: Say, python: str | None = None,
                  withheld: tuple[str, ...] = ()) -> EvalContext:
    """The one EvalContext of an eval whose run folder holds the hill and
    the snapshot: the hill environment's interpreter (made once per
    version, unless `python` is it already) and the evaluator's confinement.
    `withheld`: folders hidden from the evaluator too (a dev run's hill's
    own private/, run/devrun.py), as other hills' private/ are."""
    req, hill, spec = plan.request, plan.hill, plan.spec
    run_hill_dir = os.path.join(run_dir, "hill")
    if req.current:
        env_key = "work-" + uvenv.env_digest(hill.path)
    else:
        assert plan.tree_hash is not None  # resolve() refused a hill without commits
        env_key = plan.tree_hash
    progress.phase(say, "preparing the hill's environment")
    if python is None:
        python = uvenv.ensure(hill.name, env_key, run_hill_dir, say=say)
    sdk_dir = sdk_path(say)
    level = sandbox.level_for(spec)
    public = [os.path.join(hill.path, rel) for rel in expected.get(locks.BLOBS_LOCK, {})]
    confinement = sandbox.Confinement(level, home=state.home(), run_dir=run_dir, run_hill_dir=run_hill_dir,
                                      hill_dir=hill.path, env_dir=os.path.dirname(os.path.dirname(python)),
                                      sdk_dir=sdk_dir, network=spec["network"], limits=spec["limits"], public=public,
                                      elsewhere=[*sandbox.private_elsewhere(hill.path), *withheld]
                                      if level == sandbox.LEVEL_BWRAP else (), gpu=spec["exclusive"] == "gpu")
    return EvalContext(spec=spec, params=plan.params, trial=plan.trial, repeat=plan.repeat,
                       final=req.final and not plan.reusable,
                       verbose=req.verbose, queue=req.queue,
                       split="holdout" if req.final and not plan.reusable else "validation",
                       run_dir=run_dir, run_hill_dir=run_hill_dir, source_dir=os.path.join(run_dir, "source"),
                       python=python, sdk_dir=sdk_dir, wrapper=os.path.join(sdk_dir, "bin", "python"),
                       confinement=confinement, seed_key=os.urandom(16).hex())


def _run_replicates(ctx: EvalContext, say: Say, start: Callable[[EvalContext], None] | None = None,
                    intake: Callable[[], None] | None = None, held: Standby | None = None,
                    unit_tests: bool = True) -> Runs:
    """Run the replicates, seeds 0..N-1, and the frozen unit tests after the
    first (unless not `unit_tests`); stop at the first that does not pass.
    `start` is called once the exclusive resource is held and the first replicate's folder is ready,
    just before anything of it runs. `intake` (_pipeline) fills the run
    folder while the first replicate's evaluator boots, its folder then
    filled from the snapshot after it."""
    cores: list[dict[str, Any]] = []
    duration, dropped, tests = 0.0, 0, None
    status, reason = "passing", None
    solution: dict[str, Any] = {"runs": 0, "duration_s": 0.0}
    with Resource(ctx.spec["exclusive"], ctx.queue, say):
        for seed in range(ctx.repeat):
            filling = intake if seed == 0 else None
            rep = scored = held.rep if held is not None and seed == 0 else replicate(ctx, seed,
                                                                                    filled=filling is None)
            # Where nothing runs before the evaluator, its process boots
            # while the started entry is signed and appended; not while
            # `cryptography` still loads, which holds the interpreter lock
            # the start of a process needs (measured: 7 ms slower).
            early = filling is None and isinstance(start, Start) and start.plan.key.loaded \
                and _boots_first(ctx, rep)
            if start is not None and not early and filling is None:
                start(ctx)
            run: RunResult | None = None
            which = f"replicate {seed + 1} of {ctx.repeat}: " if ctx.repeat > 1 else ""
            if filling is not None:
                assert start is not None
                run = _run_taking_in(ctx, rep, say, which, start, filling, held if seed == 0 else None)
            elif ctx.spec["solution"]:
                progress.phase(say, which + "solution phase")
                phase, run = run_solution(ctx, rep)
                if phase.process is not None:
                    solution["runs"] += 1
                    solution["duration_s"] += phase.process.duration_s
                    duration += phase.process.duration_s
                    dropped += phase.process.output_dropped
                if phase.outputs_dir is not None:
                    scored = scoring_replicate(ctx, rep, phase.outputs_dir)
            if run is None:
                progress.phase(say, which + "scoring")
                if early:
                    assert start is not None
                    run = run_function(ctx, scored, gate=lambda: start(ctx))
                else:
                    run = run_function(ctx, scored) if ctx.spec["evaluator"]["shape"] == "function" \
                        else run_command(ctx, scored)
            elif early:
                assert start is not None
                start(ctx)  # the solution phase's outcome is logged after its started entry
            run = scoring_stop(ctx, run)
            duration += run.process.duration_s
            dropped += run.process.output_dropped
            status, reason = run.status, run.reason
            if status in ("interrupted", "buggy"):
                break
            assert run.core is not None  # a replicate that passed or failed was scored
            cores.append(run.core)
            if seed == 0 and unit_tests and ctx.spec["unit_tests"] and status == "passing":
                progress.phase(say, "running the frozen unit tests")
                tests = run_unit_tests(ctx, rep)
                status, reason = tests.status, tests.reason
            if status != "passing":
                break
    if ctx.spec["solution"]:
        solution["duration_s"] = round(solution["duration_s"], 3)
    return Runs(tuple(cores), status, reason, duration, dropped, tests,
                solution if ctx.spec["solution"] else None)


def _run_taking_in(ctx: EvalContext, rep: Replicate, say: Say, label: str, start: Callable[[EvalContext], None],
                   intake: Callable[[], None], held: Standby | None = None) -> RunResult:
    """The first replicate, its evaluator booting while `intake` fills the
    run folder (_pipeline): then the snapshot is copied into the
    replicate's folder and, for a solution phase this submission does not
    take, its outputs into theirs, all before the evaluator gets its key.
    The folders it is given, or kept from, exist as it starts."""
    solution = ctx.spec["solution"]
    if solution:
        progress.phase(say, label + "solution phase")
    if held is not None:  # its folders are the ones its sandbox mounted: never made again
        scored, outputs_dir = held.scored, held.outputs_dir
    else:
        scored, outputs_dir = intake_folders(ctx, rep)

    def prepare() -> None:
        intake()
        if solution and takes_solution(solution, ctx.source_dir):
            raise Refused(f"submission entry '{solution['when']}' appeared while the submission was copied",
                          hint="leave the submission folder alone while hills evaluates it")
        state.copy_tree(ctx.source_dir, rep.submission_dir, symlinks=True, into=True)
        if outputs_dir is not None:
            collect_outputs(rep.submission_dir, outputs_dir, solution["outputs"],
                             f"the submission holds neither '{solution['when']}' nor")
        progress.phase(say, label + "scoring")

    try:
        return run_function(ctx, scored, gate=lambda: start(ctx), prepare=prepare,
                            started=held.take() if held is not None else None)
    except BadOutput as exc:
        start(ctx)  # logged after its started entry, as run_solution's outcome is
        return RunResult(rep, runner.ProcessOutcome(), "buggy", str(exc))


def _boots_first(ctx: EvalContext, rep: Replicate) -> bool:
    """Whether the replicate's first process is a function evaluator: no
    solution phase, or one the submission does not take (no `when` file)
    with no inputs to copy in."""
    if ctx.spec["evaluator"]["shape"] != "function":
        return False
    solution = ctx.spec["solution"]
    return not solution or not (solution_inputs(ctx) or takes_solution(solution, rep.submission_dir))
