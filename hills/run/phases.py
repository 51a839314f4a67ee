"""The processes of one replicate: the solution phase (and the inputs its
hill generates), the evaluator of the function or command shape, the
frozen unit tests, and the scoring phase's guard; each returns its
`RunResult` (or phase record) for the pipeline to fold into the report."""

from __future__ import annotations

import json
import os

from .. import spaces
from ..base import state
from ..base.errors import NotScored, Refused
from ..evidence import report as report_module
from . import runner, sandbox, seeds
from .env import evaluator_env
from .folders import fresh
from .plan import inputs_for, takes_solution
from .records import Replicate, RunResult, SolutionPhase, UnitTestsResult

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

    from ..disk.manifest_types import Manifest as Spec
    from .records import EvalContext


# The shim is run through a tiny bootstrap so the result fd arrives by env
# rather than on the command line an evaluator could read back and reuse;
# the key sealing the result arrives on stdin, which the shim reads first.
# It imports the shim from the sdk folder (PYTHONPATH), whose bytecode is
# made with it: runpy would import pkgutil and typing first.
_SHIM_BOOT = ("import json,os,sys;"
              "r=json.loads(sys.argv[1]);r['result_fd']=int(os.environ.pop('HILLS_RESULT_FD'));"
              "from hills import shim;"
              "sys.argv=[shim.__file__,'eval',json.dumps(r)];sys.exit(shim.main(sys.argv))")


def function_call(ctx: EvalContext, rep: Replicate) -> tuple[list[str], dict[str, str]]:
    """The argv and environment of a function evaluator's process."""
    request = {"hill_dir": ctx.run_hill_dir, "entry": ctx.spec["evaluator"]["entry"], "submission": rep.submission_dir,
               "final": ctx.final, "params": ctx.params}
    env = evaluator_env(ctx, rep.env)
    # The fd number is only known once the pipe exists; the shim reads it from env.
    argv = ctx.confinement.evaluator([ctx.python, "-c", _SHIM_BOOT, json.dumps(request)], ctx.run_dir,
                                     hide=rep.hidden)
    return argv, env


def run_function(ctx: EvalContext, rep: Replicate, gate: Callable[[], None] | None = None,
                 prepare: Callable[[], None] | None = None, started: runner.Started | None = None) -> RunResult:
    """Run a function-shape evaluator through the shim; `prepare` (the
    intake) and `gate` (the started entry) run while its process boots,
    before it may run (runner.run). `started`: a standby's process, used
    only where its argv and environment are this run's own, else ended."""
    argv, env = function_call(ctx, rep)
    if started is not None and (started.argv, started.env) != (argv, env):
        started.discard()
        started = None
    if started is not None:
        process = started.finish(ctx.spec["timeout"], gate=gate, prepare=prepare)
    else:
        process = runner.run(argv, cwd=ctx.run_dir, env=env, timeout=ctx.spec["timeout"],
                             own_pid_namespace=ctx.confinement.level == sandbox.LEVEL_BWRAP,
                             stdout_path=fresh(os.path.join(ctx.run_dir, f"stdout{rep.tag}.log")),
                             stderr_path=fresh(os.path.join(ctx.run_dir, f"stderr{rep.tag}.log")),
                             verbose=ctx.verbose, result_pipe=True, gate=gate, prepare=prepare)
    failure = _failure(ctx.spec, process)
    if failure:
        return RunResult(rep, process, *failure)
    if process.result_overflow:
        return RunResult(rep, process, "buggy", f"the result was larger than {runner.RESULT_CAP} bytes")
    raw = process.result_bytes
    if raw is None and not process.result_unsealed:
        return RunResult(rep, process, "buggy", f"the evaluator produced no result ({process.describe_exit()}); "
                                                f"see stderr{rep.tag}.log in {ctx.run_dir}")
    message: dict[str, Any] = {}
    invalid: ValueError | None = None
    if raw is not None:
        try:
            message = json.loads(raw)
        except ValueError as exc:
            invalid = exc
    if message.get("ok") is False:
        return RunResult(rep, process, "buggy", f"eval() raised {message.get('error', 'an error')}")
    # A process the evaluator started may have written into the channel and
    # killed it: only a clean exit makes what is there the evaluator's result.
    if process.exit_code != 0:
        return RunResult(rep, process, "buggy", f"the evaluator did not exit cleanly after writing a result "
                                                f"({process.describe_exit()}); a result counts only after exit code 0; "
                                                f"see stderr{rep.tag}.log in {ctx.run_dir}")
    if raw is None:
        return RunResult(rep, process, "buggy", "the result channel held a message not sealed by the evaluator: "
                                                "a process it started wrote into it")
    if invalid is not None:
        return RunResult(rep, process, "buggy", f"the evaluator's result is not valid JSON: {invalid}")
    try:
        core = report_module.normalize_core(message.get("value"), ctx.spec["metrics"])
    except report_module.Malformed as exc:
        return RunResult(rep, process, "buggy", f"malformed result: {exc}")
    if core["passed"]:
        return RunResult(rep, process, "passing", None, core)
    return RunResult(rep, process, "failing", core["details"].get("reason"), core)


def _failure(spec: Spec, process: runner.ProcessOutcome) -> tuple[str, str] | None:
    """(status, reason) when the process was interrupted or timed out."""
    if process.interrupted:
        if process.stop_signal in (None, "SIGINT"):
            return "interrupted", "interrupted by the user (Ctrl-C)"
        return "interrupted", f"interrupted by {process.stop_signal}"
    if process.timed_out:
        return "buggy", f"timed out after {spec['timeout']}s (watchdog); the evaluator's processes were killed"
    return None


def run_command(ctx: EvalContext, rep: Replicate) -> RunResult:
    """Run a command-shape verifier."""
    from . import command

    run_dir, submission_dir = ctx.run_dir, rep.submission_dir
    result_path = fresh(os.path.join(run_dir, f"result{rep.tag}.json"))  # only this run's verifier may write it
    env = evaluator_env(ctx, rep.env)
    env.update(command.environment(python=ctx.wrapper, result_path=result_path, submission_dir=submission_dir,
                                   solution=os.path.join(submission_dir, "solution.py"), split=ctx.split,
                                   seed=rep.seed, hill_dir=ctx.run_hill_dir, trial=ctx.trial,
                                   scoring_python=ctx.python,
                                   hillclimb_python=os.path.join(ctx.sdk_dir, "bin", "hillclimb-python")))
    # An argument naming a file of the hill is the hill's copy, whatever the
    # submission holds under the same name (it cannot shadow the verifier).
    hill_dir = ctx.run_hill_dir
    argv = [os.path.join(hill_dir, part) if not os.path.isabs(part) and not part.startswith("-")
            and os.path.isfile(os.path.join(hill_dir, part)) else part for part in ctx.spec["evaluator"]["entry"]]
    process = runner.run(ctx.confinement.evaluator(argv, submission_dir, hide=rep.hidden), cwd=submission_dir, env=env,
                         own_pid_namespace=ctx.confinement.level == sandbox.LEVEL_BWRAP,
                         timeout=ctx.spec["timeout"], stdout_path=fresh(os.path.join(run_dir, f"stdout{rep.tag}.log")),
                         stderr_path=fresh(os.path.join(run_dir, f"stderr{rep.tag}.log")), verbose=ctx.verbose)
    failure = _failure(ctx.spec, process)
    if failure:
        return RunResult(rep, process, *failure)
    if process.exit_code != 0:
        said = last_line(os.path.join(run_dir, f"stderr{rep.tag}.log")) or "the candidate is buggy"
        return RunResult(rep, process, "buggy", f"the verifier failed ({process.describe_exit()}): {said}; "
                                                f"see stderr{rep.tag}.log in {run_dir}")
    try:
        parsed = command.parse_result(result_path, ctx.spec["metrics"][0]["name"])
    except report_module.Malformed as exc:
        return RunResult(rep, process, "buggy", f"malformed result: {exc}")
    return RunResult(rep, process, "passing", None, command.core_from_result(ctx.spec, ctx.params, ctx.final, parsed))


def last_line(log_path: str, limit: int = 300) -> str | None:
    """The last line a failed verifier wrote to stderr, without its `error: `
    prefix: the reason it gives for failing (a traceback ends with one too)."""
    try:
        with open(log_path, "rb") as handle:
            handle.seek(max(0, os.fstat(handle.fileno()).st_size - 4096))
            tail = handle.read().decode("utf-8", "replace")
    except OSError:
        return None
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    if not lines:
        return None
    last = lines[-1].removeprefix("error: ")
    return last if len(last) <= limit else last[:limit] + "…"


def run_unit_tests(ctx: EvalContext, rep: Replicate) -> UnitTestsResult:
    """Run the frozen unit tests against the submission."""
    spec, run_dir, submission_dir = ctx.spec, ctx.run_dir, rep.submission_dir
    tests_dir = os.path.join(ctx.run_hill_dir, spec["unit_tests"]["path"])
    if not os.path.isdir(tests_dir):
        return UnitTestsResult("buggy", f"the frozen unit tests folder '{spec['unit_tests']['path']}' is missing "
                                        "from the hill", None)
    values = {"python": ctx.python, "solution": os.path.join(submission_dir, "solution.py"), "tests": tests_dir,
              "submission": submission_dir}
    try:
        argv = [part.format(**values) for part in spec["unit_tests"]["command"]]
    except (KeyError, IndexError, ValueError) as exc:
        return UnitTestsResult("buggy", f"unit_tests.command has a bad placeholder: {exc}", None)
    from .. import sdk

    env = evaluator_env(ctx, rep.env)
    # The tests run the submitted code: through the sdk, like any start of
    # it, so with its confinement (plus their own folder), its caps and its
    # record in the report; under the watchdog's time rather than limits.time.
    config = ctx.confinement.submission_config(submission_dir, fresh(os.path.join(run_dir, f"scratch-tests{rep.tag}")),
                                               readable=[tests_dir])
    env[sdk.ENV_CONFIG] = json.dumps(dict(config, timeout=spec["timeout"], by="unit_tests"))
    argv = [ctx.python, "-I", "-B", os.path.join(ctx.sdk_dir, "hills", os.path.basename(sdk.__file__))] + argv
    process = runner.run(argv, cwd=run_dir, env=env, timeout=spec["timeout"],
                         stdout_path=fresh(os.path.join(run_dir, "unit_tests.log")),
                         stderr_path=fresh(os.path.join(run_dir, "unit_tests.err.log")), verbose=ctx.verbose)
    record = {"passed": process.exit_code == 0 and not process.timed_out and not process.interrupted,
              "exit_code": process.exit_code, "duration_s": round(process.duration_s, 3)}
    failure = _failure(spec, process)
    if failure:
        return UnitTestsResult(failure[0], "unit tests: " + failure[1], record)
    if process.exit_code != 0:
        return UnitTestsResult("failing", f"the frozen unit tests failed ({process.describe_exit()}); "
                                          f"see unit_tests.log in {run_dir}", record)
    return UnitTestsResult("passing", None, record)


class BadOutput(Exception):
    """An output of the solution phase the scoring phase must not get."""


def run_solution(ctx: EvalContext, rep: Replicate) -> tuple[SolutionPhase, RunResult | None]:
    """The solution phase of a two-phase hill (docs/confinement.md): copy
    the split's inputs into the snapshot, run `solution.run` there as
    submitted code, through hills.sdk, so confined and capped; then copy
    the declared outputs into a folder of their own for the scoring phase.
    Returns the phase, and the replicate's buggy or interrupted RunResult
    when it did not end well."""
    from .. import sdk

    solution, snapshot_dir = ctx.spec["solution"], rep.submission_dir
    inputs = solution_inputs(ctx)
    if inputs:
        source = os.path.join(ctx.run_hill_dir, inputs)
        if not os.path.isdir(source):
            raise NotScored(f"hill.yaml solution.inputs.{ctx.split} names '{inputs}', which is not a folder of "
                            f"the hill", hint="fix the hill's solution.inputs, then commit it again")
        target = os.path.join(snapshot_dir, "inputs")
        if os.path.lexists(target):
            raise Refused("the submission holds 'inputs', a name reserved for the split's inputs in this hill",
                          hint="rename it: hills copies the split's inputs there before the solution phase")
        state.copy_tree(source, target)
    when = solution["when"]
    ran = takes_solution(solution, snapshot_dir)
    if ran and solution.get("generate"):
        target = os.path.join(snapshot_dir, "inputs")
        if not inputs and os.path.lexists(target):
            raise Refused("the submission holds 'inputs', a name reserved for the generated inputs in this hill",
                          hint="rename it: hills writes the replicate's inputs there before the solution phase")
        failed = generate_inputs(ctx, rep, target)  # fresh inputs, from the secret seed
        if failed:
            return SolutionPhase(False, None, None), RunResult(rep, runner.ProcessOutcome(), "buggy", failed)
    process = None
    if ran:
        argv = [part.replace("{python}", ctx.python) for part in solution["run"]]
        env = evaluator_env(ctx, rep.env)
        env["HILLS_PARAMS"] = json.dumps(ctx.params, sort_keys=True)  # the knobs stay in HILLS_KNOBS
        # The report counts these starts as the solution phase's.
        env[sdk.ENV_CONFIG] = json.dumps({**json.loads(env.get(sdk.ENV_CONFIG) or "{}"), "by": "solution"})
        # The sdk runs as a file, isolated, from the run folder: started in
        # the snapshot, `-m hills.sdk` would import the submission's hills/.
        sdk_file = os.path.join(ctx.sdk_dir, "hills", os.path.basename(sdk.__file__))
        process = runner.run([ctx.python, "-I", "-B", sdk_file]
                             + argv, cwd=ctx.run_dir, env=env,
                             timeout=ctx.spec["timeout"],
                             stdout_path=fresh(os.path.join(ctx.run_dir, f"solution-stdout{rep.tag}.log")),
                             stderr_path=fresh(os.path.join(ctx.run_dir, f"solution-stderr{rep.tag}.log")),
                             verbose=ctx.verbose)
        failure = _failure(ctx.spec, process)
        if failure:
            return SolutionPhase(True, process, None), RunResult(rep, process, *failure)
        if process.exit_code != 0:
            said = last_line(os.path.join(ctx.run_dir, f"solution-stderr{rep.tag}.log"))
            return SolutionPhase(True, process, None), RunResult(
                rep, process, "buggy", f"the solution phase failed ({process.describe_exit()})"
                                       + (f": {said}" if said else "")
                                       + f"; see solution-stderr{rep.tag}.log in {ctx.run_dir}")
    outputs_dir = fresh(os.path.join(ctx.run_dir, "outputs" + rep.tag))
    os.mkdir(outputs_dir)
    try:
        collect_outputs(snapshot_dir, outputs_dir, solution["outputs"],
                         "the solution phase wrote no" if ran else f"the submission holds neither '{when}' nor")
    except BadOutput as exc:
        stopped = process if process is not None else runner.ProcessOutcome()
        return SolutionPhase(ran, process, None), RunResult(rep, stopped, "buggy", str(exc))
    return SolutionPhase(ran, process, outputs_dir), None


def generate_inputs(ctx: EvalContext, rep: Replicate, target: str) -> str | None:
    """Run the hill's `solution.generate` for replicate `rep`: trusted, with
    the evaluator's confinement and the submission out of its sight, in an
    empty folder, with the secret seed; then add what it wrote to `target`
    (the snapshot's inputs/). Returns why it failed, or None."""
    folder = fresh(os.path.join(ctx.run_dir, "generated" + rep.tag))
    os.mkdir(folder)
    hill_dir = ctx.run_hill_dir
    argv = [part.replace("{python}", ctx.python) for part in ctx.spec["solution"]["generate"]]
    argv = [os.path.join(hill_dir, part) if not os.path.isabs(part) and not part.startswith("-")
            and os.path.isfile(os.path.join(hill_dir, part)) else part for part in argv]
    env = _generator_env(ctx, rep, folder)
    hide = (rep.submission_dir, ctx.source_dir, os.path.join(ctx.run_dir, "scratch" + rep.tag))
    process = runner.run(ctx.confinement.evaluator(argv, folder, hide=hide), cwd=folder, env=env,
                         timeout=ctx.spec["timeout"],
                         stdout_path=fresh(os.path.join(ctx.run_dir, f"generate-stdout{rep.tag}.log")),
                         stderr_path=fresh(os.path.join(ctx.run_dir, f"generate-stderr{rep.tag}.log")),
                         verbose=ctx.verbose)
    if process.interrupted:
        raise KeyboardInterrupt(process.stop_signal or "SIGINT")
    if process.timed_out or process.exit_code != 0:
        said = last_line(os.path.join(ctx.run_dir, f"generate-stderr{rep.tag}.log"))
        return (f"the hill's solution.generate failed ({process.describe_exit()})" + (f": {said}" if said else "")
                + f"; see generate-stderr{rep.tag}.log in {ctx.run_dir}")
    os.makedirs(target, exist_ok=True)
    for name in sorted(os.listdir(folder)):
        if os.path.lexists(os.path.join(target, name)):
            return f"the hill's solution.generate wrote '{name}', which the split's inputs already hold"
        source = os.path.join(folder, name)
        if os.path.islink(source):
            return f"the hill's solution.generate wrote '{name}' as a link; inputs must be files or folders"
        if os.path.isdir(source):
            state.copy_tree(source, os.path.join(target, name))
        else:
            with open(source, "rb") as reader, open(os.path.join(target, name), "xb") as writer:
                writer.write(reader.read())
    return None


def _generator_env(ctx: EvalContext, rep: Replicate, folder: str) -> dict[str, str]:
    """The generator's environment: the evaluator's, with the secret seed,
    the split, the hill and where to write."""
    env = evaluator_env(ctx, rep.env)
    env.update({seeds.ENV_SECRET: str(rep.secret), "HILLS_INPUTS": folder, "HILLS_HILL": ctx.run_hill_dir,
                "HILLS_SPLIT": ctx.split})
    return env


def collect_outputs(snapshot_dir: str, outputs_dir: str, patterns: Iterable[str], missing: str) -> None:
    """Copy what `patterns` name in the snapshot into `outputs_dir`: files
    and folders only, never through a link (submitted code may have left
    one leading to private/)."""
    import glob

    for pattern in patterns:
        if glob.has_magic(pattern):
            matches = sorted(glob.glob(pattern, root_dir=snapshot_dir, recursive=True, include_hidden=False))
        else:
            matches = [pattern] if os.path.lexists(os.path.join(snapshot_dir, pattern)) else []
            if not matches:
                raise BadOutput(f"{missing} '{pattern}' (hill.yaml solution.outputs)")
        for rel in matches:
            target = os.path.join(outputs_dir, rel)
            if os.path.lexists(target):
                continue
            os.makedirs(os.path.dirname(target), exist_ok=True)
            _copy_output(os.path.join(snapshot_dir, rel), target, rel)


def _copy_output(source: str, target: str, rel: str) -> None:
    info = os.lstat(source)
    import stat as stat_module

    if stat_module.S_ISLNK(info.st_mode):
        raise BadOutput(f"the output '{rel}' is a symbolic link; outputs must be files or folders")
    if stat_module.S_ISDIR(info.st_mode):
        os.mkdir(target)
        for name in sorted(os.listdir(source)):
            _copy_output(os.path.join(source, name), os.path.join(target, name), f"{rel}/{name}")
        return
    if not stat_module.S_ISREG(info.st_mode):
        raise BadOutput(f"the output '{rel}' is not a regular file")
    fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    try:
        with open(fd, "rb", closefd=False) as reader, open(target, "xb") as writer:
            while chunk := reader.read(1024 * 1024):
                writer.write(chunk)
    finally:
        os.close(fd)


def solution_inputs(ctx: EvalContext) -> str | None:
    """The folder of the hill the solution phase gets as its inputs, if any."""
    return inputs_for(ctx.spec["solution"], ctx.split)


def replicate(ctx: EvalContext, index: int, filled: bool = True) -> Replicate:
    """A fresh copy of the snapshot for replicate `index`, and its
    environment; its folder left empty, to be filled later, unless `filled`."""
    from . import seeds

    tag = ctx.tag + ("" if ctx.repeat == 1 else f"-{index}")
    seed, secret = seeds.replicate_seed(ctx.spec, ctx.seed_key, index), seeds.secret_seed(ctx.seed_key, index)
    submission_dir = fresh(os.path.join(ctx.run_dir, "submission" + tag))
    if filled:
        state.copy_tree(ctx.source_dir, submission_dir, symlinks=True)
    else:
        os.mkdir(submission_dir)
    config = ctx.confinement.submission_config(submission_dir, fresh(os.path.join(ctx.run_dir, "scratch" + tag)))
    env = {"HILLS_SUBMISSION": submission_dir, "HILLS_SPLIT": ctx.split, "HILLS_REPLICATE_SEED": str(seed),
           "PYTHONPATH": ctx.sdk_dir, "HILLS_SUBMISSION_SANDBOX": json.dumps(config),
           **scoring_guard(ctx, submission_dir, ctx.source_dir)}
    if ctx.trial is not None:
        # The knob values: HILLS_KNOBS in every phase, and HILLS_PARAMS too
        # where no solution phase gives that name to the hill's params.
        env["HILLS_PARAMS"] = env[spaces.ENV_KNOBS] = json.dumps(ctx.trial, sort_keys=True)
    if not ctx.spec["solution"]:  # else the scoring phase gets it (scoring_replicate)
        env[seeds.ENV_SECRET] = str(secret)
    if ctx.spec["evaluator"]["shape"] != "function":
        from . import command

        try:
            command.prepare_workdir(submission_dir, ctx.run_hill_dir)
        except report_module.Malformed as exc:
            raise Refused(str(exc))
        # The solution may rewrite its own folder, but hills.sdk puts back
        # the links that the verifier's later steps go through.
        config["links"] = {name: os.readlink(os.path.join(submission_dir, name)) for name in ("problem", "data")
                           if os.path.islink(os.path.join(submission_dir, name))}
        env["HILLS_SUBMISSION_SANDBOX"] = json.dumps(config)
    return Replicate(seed, tag, submission_dir, env, secret=secret)


def intake_folders(ctx: EvalContext, rep: Replicate) -> tuple[Replicate, str | None]:
    """The replicate the first evaluator scores, and its outputs folder
    when a solution phase is skipped, made (empty) before it starts: the
    folders hidden from the scorer must be there to be hidden."""
    if not ctx.spec["solution"]:
        return rep, None
    os.makedirs(ctx.source_dir, exist_ok=True)
    outputs_dir = fresh(os.path.join(ctx.run_dir, "outputs" + rep.tag))
    os.mkdir(outputs_dir)
    return scoring_replicate(ctx, rep, outputs_dir), outputs_dir


def scoring_replicate(ctx: EvalContext, rep: Replicate, outputs_dir: str) -> Replicate:
    """The replicate the scoring phase runs: the outputs as its submission,
    the snapshot and its scratch hidden from it."""
    tag = rep.tag
    config = ctx.confinement.submission_config(outputs_dir, fresh(os.path.join(ctx.run_dir, "scratch-score" + tag)))
    env = dict(rep.env, HILLS_SUBMISSION=outputs_dir, HILLS_OUTPUTS=outputs_dir,
               HILLS_SUBMISSION_SANDBOX=json.dumps(config), HILLS_SECRET_SEED=str(rep.secret),
               **scoring_guard(ctx, outputs_dir, rep.submission_dir, ctx.source_dir))
    if ctx.spec["evaluator"]["shape"] != "function":
        from . import command

        try:
            command.prepare_workdir(outputs_dir, ctx.run_hill_dir)
        except report_module.Malformed as exc:
            raise Refused(str(exc))
    hidden = (rep.submission_dir, os.path.join(ctx.run_dir, "scratch" + tag), ctx.source_dir)
    return Replicate(rep.seed, tag, outputs_dir, env, hidden, rep.secret)


# Off only in tests, to show an attack the guard stops succeeding without it.
SCORING_GUARD = True


def scoring_guard(ctx: EvalContext, *folders: str) -> dict[str, str]:
    """The environment that holds every trusted interpreter of the scoring
    phase to the guard (hills/scoringhook.py): its folder first on
    PYTHONPATH, the submission's folders and the record of a stop."""
    from .. import scoringhook

    if not SCORING_GUARD:
        return {}
    return {"PYTHONPATH": os.pathsep.join([os.path.join(ctx.sdk_dir, "scoring"), ctx.sdk_dir]),
            scoringhook.ENV: scoringhook.value(ctx.confinement.events, folders, os.path.join(ctx.sdk_dir, "bin"))}


def scoring_stop(ctx: EvalContext, run: RunResult) -> RunResult:
    """`run` made buggy when the guard stopped the scoring phase from
    running a file of the submission, whatever the evaluator did next."""
    from .. import scoringhook

    if not SCORING_GUARD or run.status == "interrupted":
        return run
    stops = scoringhook.read_stops(ctx.confinement.events)
    if not stops:
        return run
    return RunResult(run.replicate, run.process, "buggy", stops[0])
