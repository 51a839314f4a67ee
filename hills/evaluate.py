"""`hills eval`: pin the hill, verify its locks, snapshot the submission, run
the evaluator under the watchdog, and sign, log and note the outcome."""

import contextlib
import json
import os
import secrets
import shutil
import time

from . import (chain, command, locks, manifest, replicates, report as report_module, runner, sandbox, sdk,
               signing, snapshot, spaces, state, uvenv)
from .errors import EnvironmentProblem, HillsError, NotScored, Refused, UsageError
from .git import lineage

NOTES_REF = "refs/notes/hills/reports"
KEEP_RUNS = 20
SHIM = os.path.join(os.path.dirname(__file__), "shim.py")
# What the evaluator's environment may inherit from the caller; nothing else
# (no tokens, no cloud credentials) reaches it.
ENV_ALLOW = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "TERM", "USER", "LOGNAME",
             "SYSTEMROOT", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "CUDA_VISIBLE_DEVICES",
             "NVIDIA_VISIBLE_DEVICES")


class Request:
    def __init__(self, hill, submission, params=(), final=False, force=False, current=False,
                 queue=False, verbose=False, repeat=None, knobs=None):
        self.repeat = repeat
        # Trial values for the submission's params.json: texts from --knob,
        # or typed values from the tuner.
        self.knobs = knobs
        self.hill = hill
        self.submission = submission
        self.param_texts = list(params)
        self.final = final
        self.force = force
        self.current = current
        self.queue = queue
        self.verbose = verbose


def pinned_manifest(hill, tree_hash):
    """The manifest at a committed tree, parsed once per hills version and
    cached as JSON (a newer hills may read more keys from the same text)."""
    cache = os.path.join(state.state_dir(hill.name, tree_hash), "manifest.json")
    tool = report_module.tool_identity()["sha256"]
    cached = state.sealed_read(cache)
    if isinstance(cached, dict) and cached.get("tool") == tool:
        return cached["manifest"]
    text = hill.repo.show_blob(tree_hash, "hill.yaml")
    if text is None:
        raise NotScored(f"hill '{hill.name}' has no hill.yaml at tree {tree_hash[:12]}",
                        hint=f"commit the hill with hills commit {hill.name} -m MESSAGE")
    spec = manifest.parse_text(text, f"hill.yaml at {tree_hash[:12]}", hill.name)
    state.sealed_write(cache, {"tool": tool, "manifest": spec})
    return spec


def resolve_params(spec, texts):
    params = {name: param["default"] for name, param in spec["params"].items()}
    described = f"'hills describe {spec['name']}' lists the params with their types and bounds"
    for text in texts:
        if "=" not in text:
            raise UsageError(f"-p '{text}': expected NAME=VALUE",
                             hint=f"for example -p {next(iter(spec['params']))}=VALUE; {described}" if spec["params"]
                             else f"hill '{spec['name']}' declares no params")
        name, value = text.split("=", 1)
        name = name.strip()
        if name not in spec["params"]:
            allowed = ", ".join(sorted(spec["params"])) or "none"
            raise UsageError(f"unknown param '{name}' for hill '{spec['name']}'", hint=f"allowed params: {allowed}")
        try:
            params[name] = manifest.parse_cli_value(name, spec["params"][name], value)
        except UsageError as exc:
            raise UsageError(f"-p '{text}': {exc.message}", hint=exc.hint or described) from None
    return params


def is_dirty(hill):
    out = hill.repo.run("--no-optional-locks", "status", "--porcelain", "-z", "--untracked-files=all",
                        "--no-renames")
    return [record[3:] for record in out.split("\0") if record]


def _run_id():
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + secrets.token_hex(4)


def materialize(hill, rev, run_hill_dir):
    """Write the files of `rev` into `run_hill_dir` (git archive, extracted)."""
    import io
    import tarfile

    data = hill.repo.run("archive", "--format=tar", rev, binary=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        # The "data" filter exists from Python 3.11.4; the archive is our own
        # git tree, which never holds links or special files, so without it
        # the extraction is the same.
        options = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        archive.extractall(run_hill_dir, **options)


def pinned_tree(hill, commit_id):
    """The tree hash of a commit; commits are immutable, so it is cached."""
    cache = os.path.join(state.home(), "cache", "commit-tree", commit_id)
    tree_hash = state.sealed_read(cache)
    if isinstance(tree_hash, str) and len(tree_hash) == 40:
        return tree_hash
    tree_hash = hill.repo.tree_of(commit_id)
    state.sealed_write(cache, tree_hash)
    return tree_hash


def pinned_files(hill, commit_id, tree_hash):
    """A pristine copy of the tree's files and its decoded locks, made once
    per tree in machine state and sealed with the machine key: an edit of
    the copy is noticed and the copy made again. (folder, {lock: entries})."""
    root = state.state_dir(hill.name, tree_hash)
    folder = os.path.join(root, "tree")
    seal = os.path.join(root, "tree.seal.json")

    def intact():
        sealed = state.sealed_read(seal)
        if isinstance(sealed, dict) and os.path.isdir(folder) \
                and sealed.get("signature") == state.folder_signature(folder):
            return sealed["locks"]
        return None

    expected = intact()
    if expected is not None:
        return folder, expected
    with state.file_lock(os.path.join(root, "tree.lock")):
        expected = intact()
        if expected is not None:
            return folder, expected
        expected = {}
        for lock_name in (locks.PRIVATE_LOCK, locks.BLOBS_LOCK):
            text = hill.repo.show_blob(commit_id, lock_name)
            expected[lock_name] = locks.decode(text, f"{lock_name} at {commit_id[:12]}") if text else {}
        staging = folder + f".tmp-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        os.makedirs(staging)
        materialize(hill, commit_id, staging)
        shutil.rmtree(folder, ignore_errors=True)
        os.rename(staging, folder)
        state.sealed_write(seal, {"signature": state.folder_signature(folder), "locks": expected})
    return folder, expected


def _link_locked(hill, run_hill_dir, entries):
    for rel in entries:
        target = os.path.join(run_hill_dir, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.symlink(os.path.join(hill.path, rel), target)


def evaluator_env(python, extra):
    env = {key: os.environ[key] for key in ENV_ALLOW if key in os.environ}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    env["HILLS_PYTHON"] = python
    env.update(extra)
    return env


def prune_runs(name, keep=KEEP_RUNS):
    """Remove the oldest run folders beyond `keep`; never one still in use."""
    root = state.runs_dir(name)
    try:
        runs = sorted(e for e in os.listdir(root) if not e.startswith("."))
    except FileNotFoundError:
        return
    for entry in runs[:-keep] if len(runs) > keep else []:
        folder = os.path.join(root, entry)
        try:
            # A folder made a moment ago may not hold its in-use lock yet.
            if time.time() - os.stat(folder).st_mtime < 60:
                continue
        except FileNotFoundError:
            continue
        try:
            with state.file_lock(os.path.join(folder, ".in-use"), blocking=False) as free:
                if free:
                    shutil.rmtree(folder, ignore_errors=True)
        except EnvironmentProblem:  # a link planted as its lock: no eval holds it
            shutil.rmtree(folder, ignore_errors=True)


def attempts_path(name, tree_hash, hill_path=None):
    """The attempts log of a version; the working tree's (`tree_hash` None)
    is the hill folder's own."""
    return os.path.join(state.state_dir(name, tree_hash, hill_path), "attempts.jsonl")


def final_count(name, tree_hash, key):
    """Holdout evals already spent on a version, official or not (a look at
    the holdout is a look); refusals are not counted. The log must verify:
    a log cut short must not hand the budget back. A sealed counter beside
    the log (`final-count.json`, written under the budget lock the caller
    holds) keeps the count up to a line, so only the lines after it are
    read; without it the whole log is counted again, to the same number."""
    counter = os.path.join(state.state_dir(name, tree_hash), "final-count.json")
    try:
        return chain.tally(attempts_path(name, tree_hash), key, counter,
                           lambda entry: bool(entry.get("report", {}).get("final"))
                           and entry.get("report", {}).get("status") != "refused")
    except Refused as exc:
        raise NotScored(f"the attempts log of hill '{name}' at tree {tree_hash[:12]} is broken "
                        f"({exc.message}): its holdout evals cannot be counted",
                        hint=f"see 'hills attempts {name}'") from None


class _Resource:
    """An exclusive machine resource (hill.yaml `exclusive:`), held for the eval."""

    def __init__(self, name, queue, say):
        self.name, self.queue, self.say = name, queue, say
        self._ctx = None

    def __enter__(self):
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

    def __exit__(self, *exc):
        if self._ctx is not None:
            self._ctx.__exit__(*exc)


PYTHON_WRAPPER = """#!/bin/sh
# $HILLS_PYTHON for command verifiers: the hill environment's Python. Run on
# the submission's solution, it confines it (python -m hills.sdk).
if [ -n "$HILLS_SOLUTION" ] && [ "$1" = "$HILLS_SOLUTION" ]; then
    exec "$HILLS_REAL_PYTHON" -m hills.sdk "$HILLS_REAL_PYTHON" "$@"
fi
exec "$HILLS_REAL_PYTHON" "$@"
"""


def sdk_path():
    """A folder holding a tiny `hills` package (spaces and sdk) for the
    PYTHONPATH of evaluators and submissions, whose environments do not
    install hills, and the `bin/python` wrapper of command verifiers."""
    identity = report_module.tool_identity()["sha256"][:16]
    root = os.path.join(state.home(), "sdk", identity)
    if not os.path.isfile(os.path.join(root, "bin", "python")):
        staging = root + f".tmp-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        os.makedirs(os.path.join(staging, "hills"))
        os.makedirs(os.path.join(staging, "bin"))
        with open(os.path.join(staging, "hills", "__init__.py"), "w", encoding="utf-8") as handle:
            handle.write('"""The part of hills that evaluators and submitted code may import."""\n')
        for module in (spaces, sdk):
            shutil.copy2(module.__file__, os.path.join(staging, "hills", os.path.basename(module.__file__)))
        wrapper = os.path.join(staging, "bin", "python")
        with open(wrapper, "w", encoding="utf-8") as handle:
            handle.write(PYTHON_WRAPPER)
        os.chmod(wrapper, 0o755)
        try:
            os.rename(staging, root)
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
    return root


def _fresh(path):
    """`path` with nothing at it: an earlier evaluator process of this run
    may have left a link there, and hills, unconfined, must not write
    through it (it would write anywhere the user can)."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)
    return path


def run_function(spec, python, run_dir, run_hill_dir, submission_dir, params, final, verbose, extra_env, tag,
                 confinement):
    """Run a function-shape evaluator through the shim; (core or None, status, reason, outcome)."""
    request = {"hill_dir": run_hill_dir, "entry": spec["evaluator"]["entry"], "submission": submission_dir,
               "final": final, "params": params}
    env = evaluator_env(python, extra_env)
    # The fd number is only known once the pipe exists; the shim reads it from env.
    argv = confinement.evaluator([python, "-c", _SHIM_BOOT, SHIM, json.dumps(request)], run_dir)
    outcome = runner.run(argv, cwd=run_dir, env=env, timeout=spec["timeout"],
                         stdout_path=_fresh(os.path.join(run_dir, f"stdout{tag}.log")),
                         stderr_path=_fresh(os.path.join(run_dir, f"stderr{tag}.log")), verbose=verbose, result_pipe=True)
    failure = _failure(spec, outcome, run_dir)
    if failure:
        return None, failure[0], failure[1], outcome
    if outcome.result_overflow:
        return None, "buggy", f"the result was larger than {runner.RESULT_CAP} bytes", outcome
    raw = outcome.result_bytes or b""
    if not raw:
        return None, "buggy", f"the evaluator produced no result ({outcome.describe_exit()}); see stderr{tag}.log in {run_dir}", outcome
    try:
        message = json.loads(raw)
    except ValueError as exc:
        return None, "buggy", f"the evaluator's result is not valid JSON: {exc}", outcome
    if not message.get("ok"):
        return None, "buggy", f"eval() raised {message.get('error', 'an error')}", outcome
    try:
        core = report_module.normalize_core(message.get("value"), spec["metrics"])
    except report_module.Malformed as exc:
        return None, "buggy", f"malformed result: {exc}", outcome
    status = "passing" if core["passed"] else "failing"
    return core, status, None if core["passed"] else core["details"].get("reason"), outcome


def _failure(spec, outcome, run_dir):
    """(status, reason) when the process was interrupted or timed out."""
    if outcome.interrupted:
        if outcome.stop_signal in (None, "SIGINT"):
            return "interrupted", "interrupted by the user (Ctrl-C)"
        return "interrupted", f"interrupted by {outcome.stop_signal}"
    if outcome.timed_out:
        return "buggy", f"timed out after {spec['timeout']}s (watchdog); the evaluator's processes were killed"
    return None


def run_command(spec, python, run_dir, submission_dir, params, final, verbose, extra_env, tag, confinement,
                wrapper):
    """Run a command-shape verifier; (core or None, status, reason, outcome)."""
    result_path = _fresh(os.path.join(run_dir, f"result{tag}.json"))  # only this run's verifier may write it
    env = evaluator_env(python, extra_env)
    env.update(command.environment(python=wrapper, result_path=result_path, submission_dir=submission_dir,
                                   solution=os.path.join(submission_dir, "solution.py"),
                                   split="holdout" if final else "validation",
                                   seed=extra_env["HILLS_REPLICATE_SEED"], hill_dir=os.path.join(run_dir, "hill"),
                                   trial=json.loads(extra_env["HILLS_PARAMS"]) if "HILLS_PARAMS" in extra_env else None))
    # An argument naming a file of the hill is the hill's copy, whatever the
    # submission holds under the same name (it cannot shadow the verifier).
    hill_dir = os.path.join(run_dir, "hill")
    argv = [os.path.join(hill_dir, part) if not os.path.isabs(part) and not part.startswith("-")
            and os.path.isfile(os.path.join(hill_dir, part)) else part for part in spec["evaluator"]["entry"]]
    env["HILLS_REAL_PYTHON"] = python
    outcome = runner.run(confinement.evaluator(argv, submission_dir), cwd=submission_dir, env=env, timeout=spec["timeout"],
                         stdout_path=_fresh(os.path.join(run_dir, f"stdout{tag}.log")),
                         stderr_path=_fresh(os.path.join(run_dir, f"stderr{tag}.log")), verbose=verbose)
    failure = _failure(spec, outcome, run_dir)
    if failure:
        return None, failure[0], failure[1], outcome
    if outcome.exit_code != 0:
        said = _last_line(os.path.join(run_dir, f"stderr{tag}.log")) or "the candidate is buggy"
        return None, "buggy", f"the verifier failed ({outcome.describe_exit()}): {said}; see stderr{tag}.log in {run_dir}", outcome
    try:
        parsed = command.parse_result(result_path)
    except report_module.Malformed as exc:
        return None, "buggy", f"malformed result: {exc}", outcome
    return command.core_from_result(spec, params, final, parsed), "passing", None, outcome


def _last_line(log_path, limit=300):
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


def run_unit_tests(spec, python, run_dir, run_hill_dir, submission_dir, extra_env, verbose, confinement, tag):
    """Run the frozen unit tests against the submission: (ok, status, reason, record)."""
    tests_dir = os.path.join(run_hill_dir, spec["unit_tests"]["path"])
    if not os.path.isdir(tests_dir):
        return False, "buggy", f"the frozen unit tests folder '{spec['unit_tests']['path']}' is missing from the hill", None
    values = {"python": python, "solution": os.path.join(submission_dir, "solution.py"), "tests": tests_dir,
              "submission": submission_dir}
    try:
        argv = [part.format(**values) for part in spec["unit_tests"]["command"]]
    except (KeyError, IndexError, ValueError) as exc:
        return False, "buggy", f"unit_tests.command has a bad placeholder: {exc}", None
    env = evaluator_env(python, extra_env)
    # The tests run the submitted code: they get its confinement, plus their own folder.
    config = confinement.submission_config(submission_dir, _fresh(os.path.join(run_dir, f"scratch-tests{tag}")),
                                           readable=[tests_dir])
    argv = config["prefix"] + argv
    outcome = runner.run(argv, cwd=submission_dir, env=env, timeout=spec["timeout"],
                         stdout_path=_fresh(os.path.join(run_dir, "unit_tests.log")),
                         stderr_path=_fresh(os.path.join(run_dir, "unit_tests.err.log")), verbose=verbose)
    record = {"passed": outcome.exit_code == 0 and not outcome.timed_out and not outcome.interrupted,
              "exit_code": outcome.exit_code, "duration_s": round(outcome.duration_s, 3)}
    failure = _failure(spec, outcome, run_dir)
    if failure:
        return False, failure[0], "unit tests: " + failure[1], record
    if outcome.exit_code != 0:
        return False, "failing", f"the frozen unit tests failed ({outcome.describe_exit()}); see unit_tests.log in {run_dir}", record
    return True, "passing", None, record


def resolve_knobs(req):
    """(declaration, trial values or None, warning) for the submission's params.json."""
    declaration, warning = spaces.load(req.submission) if os.path.isdir(req.submission) else (None, None)
    given = req.knobs
    if not given:
        return declaration, (spaces.defaults(declaration) if declaration else None), warning
    if declaration is None:
        raise UsageError(f"--knob given, but submission '{req.submission}' has "
                         + ("a malformed params.json: " + warning if warning else "no params.json declaring knobs"),
                         hint="declare each knob in the submission's params.json (its format is in "
                              "'man hills-tune'), or drop -k")
    values = dict(spaces.defaults(declaration))
    if isinstance(given, dict):
        items = given.items()
    else:
        items = []
        for text in given:
            if "=" not in text:
                raise UsageError(f"--knob '{text}': expected NAME=VALUE",
                                 hint=f"for example -k {next(iter(declaration), 'NAME')}=VALUE, VALUE read as JSON")
            name, raw = text.split("=", 1)
            try:
                value = json.loads(raw)
            except ValueError:
                value = raw
            spec = declaration.get(name.strip(), {})
            # A categorical choice that reads as JSON ("1", "true") is meant as text.
            if spec.get("type") == "categorical" and raw in spec["choices"] and value not in spec["choices"]:
                value = raw
            items.append((name.strip(), value))
    for name, value in items:
        try:
            values[name] = spaces.check_value(declaration, name, value)
        except spaces.ValueRefused as exc:
            raise UsageError(f"refused: {exc}",
                             hint=f"the knobs and their ranges are declared in {os.path.join(req.submission, 'params.json')}")
    return declaration, values, warning


# The shim is run through a tiny bootstrap so the result fd arrives by env
# rather than on the command line an evaluator could read back and reuse.
_SHIM_BOOT = ("import json,os,runpy,sys;"
              "r=json.loads(sys.argv[2]);r['result_fd']=int(os.environ.pop('HILLS_RESULT_FD'));"
              "sys.argv=[sys.argv[1],'eval',json.dumps(r)];runpy.run_path(sys.argv[0],run_name='__main__')")


def evaluate(req, say=lambda message: None):
    """Run one evaluation; return the signed report (every outcome is logged)."""
    hill = req.hill
    head = hill.repo.head()
    if req.current and req.force:
        raise UsageError("--current and --force cannot be combined")
    if head is None and not req.current:
        raise NotScored(f"hill '{hill.name}' has no commits yet",
                      hint=f"freeze it first: hills commit {hill.name} -m MESSAGE, "
                           "or try the working tree unofficially with --current")
    # --current scores the working tree, so it works before the first commit too.
    tree_hash = pinned_tree(hill, head) if head else None
    official, official_reason, forced = True, None, False
    changed = [] if req.current else is_dirty(hill)
    if req.current:
        official, official_reason = False, "scored the working tree (--current), not a committed version"
    else:
        from . import pin

        official, official_reason = pin.official_status(hill, tree_hash)
    if changed and not req.current:
        if not req.force:
            raise NotScored(f"hill '{hill.name}' has uncommitted changes ({', '.join(changed[:3])}"
                          + (", ..." if len(changed) > 3 else "") + ")",
                          hint="commit them, pass --force to score the last commit anyway, "
                               "or --current to try the working tree unofficially")
        forced = True
    if req.current:
        spec = manifest.load(hill.path)
    else:
        spec = pinned_manifest(hill, tree_hash)
    params = resolve_params(spec, req.param_texts)
    if not os.path.isdir(req.submission):
        raise UsageError(f"submission '{req.submission}' is not a folder", hint="a submission is a folder; pass its path")
    repeat = req.repeat if req.repeat is not None else spec["replicates"]
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise UsageError(f"--repeat expects an integer >= 1, got {repeat}")
    declaration, trial, knob_warning = resolve_knobs(req)
    key = state.load_key()
    log_tree = None if req.current else tree_hash
    budget_lock = contextlib.nullcontext()
    if req.final and spec["final"]["budget"] is not None:
        if req.current:
            raise NotScored(f"hill '{hill.name}' limits its holdout evals ({spec['final']['budget']} per version): "
                            "--final needs a committed version, not --current",
                            hint=f"commit the hill (hills commit {hill.name} -m MESSAGE) and drop --current")
        # Held from the count to the log line, so concurrent --final evals cannot overspend.
        budget_lock = state.file_lock(os.path.join(state.state_dir(hill.name, tree_hash), "final.lock"))

    # A log that cannot take the outcome refuses before the evaluator runs.
    try:
        chain.check_appendable(attempts_path(hill.name, log_tree, hill.path), key)
    except Refused as exc:
        raise NotScored(exc.message, hint=exc.hint or f"see 'hills attempts {hill.name}'") from None
    run_id = _run_id()
    run_dir = os.path.join(state.runs_dir(hill.name), run_id)
    os.makedirs(run_dir)
    envelope = {
        "hill": hill.name, "tree_hash": None if req.current else tree_hash, "commit": None if req.current else head,
        "submission_hash": None, "submission_git": None, "passed": False, "status": "buggy", "reason": None,
        "config": [], "metrics": [], "details": {}, "params": params, "final": bool(req.final),
        "official": official, "official_reason": official_reason, "forced": forced, "trust": "evaluator",
        "tool": report_module.tool_identity(), "timestamp": report_module.timestamp(),
        "report_version": report_module.REPORT_VERSION, "run_id": run_id, "replicates": 0,
    }
    if trial is not None:
        envelope["trial"] = trial
    if knob_warning:
        envelope["warnings"] = [knob_warning]
    with budget_lock, state.file_lock(os.path.join(run_dir, ".in-use")):
        if req.final and spec["final"]["budget"] is not None:
            used = final_count(hill.name, tree_hash, key)
            if used >= spec["final"]["budget"]:
                shutil.rmtree(run_dir, ignore_errors=True)
                raise NotScored(f"the holdout budget of hill '{hill.name}' is spent: {used} of "
                                f"{spec['final']['budget']} --final evals used for tree {tree_hash[:12]}",
                                hint="evals without --final still score on the validation split; "
                                     "a new committed version starts a new budget")
        try:
            # A full disk or a read-only folder is the machine's problem, named, not a bug in hills.
            with state.write_errors_as_problems(run_dir):
                _pipeline(req, hill, spec, head, tree_hash, params, trial, repeat, run_dir, envelope, say)
        except HillsError as exc:
            # Refusals and environment failures are attempts too: logged, then reported.
            envelope.update(status="refused", passed=False, reason=exc.message)
            _finish(hill, head, log_tree, envelope, key)
            exc.report = envelope  # the caller still prints it: refusals are reports too
            raise
        except KeyboardInterrupt:
            if envelope["status"] != "interrupted":  # else the runner already said which signal
                envelope.update(status="interrupted", passed=False, reason="interrupted by the user (Ctrl-C)")
            _finish(hill, head, log_tree, envelope, key)
            interrupt = KeyboardInterrupt(envelope["reason"])
            interrupt.report = envelope  # printed by the caller like any other outcome
            raise interrupt
        except Exception as exc:
            # A bug in hills still leaves its trace in the log: no survivorship.
            envelope.update(status="buggy", passed=False,
                            reason=f"internal error in hills: {type(exc).__name__}: {exc}")
            _finish(hill, head, log_tree, envelope, key)
            raise
        _finish(hill, head, log_tree, envelope, key)
    prune_runs(hill.name)
    return envelope


def _pipeline(req, hill, spec, head, tree_hash, params, trial, repeat, run_dir, envelope, say):
    cache = locks.StatCache(hill.path)
    expected = {}
    if not req.current:
        pristine, expected = pinned_files(hill, head, tree_hash)
        try:
            for lock_name in (locks.PRIVATE_LOCK, locks.BLOBS_LOCK):
                locks.verify_disk(hill.path, lock_name, expected[lock_name], cache)
        except Refused as exc:
            # Drift found before the run is the hill's, not the submission's:
            # no candidate can be scored until the data is restored.
            raise NotScored(exc.message, hint=exc.hint) from None
        finally:
            cache.save()
    run_hill_dir = os.path.join(run_dir, "hill")
    if req.current:
        state.copy_tree(hill.path, run_hill_dir, symlinks=True,
                        ignore=shutil.ignore_patterns(".vc", "private", "__pycache__"))
        if os.path.isdir(os.path.join(hill.path, locks.PRIVATE_DIR)):
            os.symlink(os.path.join(hill.path, locks.PRIVATE_DIR), os.path.join(run_hill_dir, locks.PRIVATE_DIR))
    else:
        state.copy_tree(pristine, run_hill_dir)
        if expected[locks.PRIVATE_LOCK]:
            os.symlink(os.path.join(hill.path, locks.PRIVATE_DIR), os.path.join(run_hill_dir, locks.PRIVATE_DIR))
        _link_locked(hill, run_hill_dir, expected[locks.BLOBS_LOCK])
    source_dir = os.path.join(run_dir, "source")
    envelope["submission_git"] = lineage(req.submission)
    envelope["submission_hash"] = snapshot.snapshot(req.submission, source_dir)
    env_key = tree_hash if not req.current else "work-" + uvenv.env_digest(hill.path)
    python = uvenv.ensure(hill.name, env_key, run_hill_dir, say=say)
    shape = spec["evaluator"]["shape"]
    split = "holdout" if req.final else "validation"
    sdk_dir = sdk_path()
    level = sandbox.level_for(spec)
    confinement = sandbox.Confinement(level, home=state.home(), run_dir=run_dir, run_hill_dir=run_hill_dir,
                                      hill_dir=hill.path, env_dir=os.path.dirname(os.path.dirname(python)),
                                      sdk_dir=sdk_dir, network=spec["network"], limits=spec["limits"],
                                      public=[os.path.join(hill.path, rel) for rel in expected.get(locks.BLOBS_LOCK, {})],
                                      elsewhere=sandbox.private_elsewhere(hill.path)
                                      if level == sandbox.LEVEL_BWRAP else ())
    wrapper = os.path.join(sdk_dir, "bin", "python")

    def replicate(seed):
        """One replicate on a fresh copy of the snapshot: (core, status, reason,
        outcome, submission folder, extra environment, log tag)."""
        tag = "" if repeat == 1 else f"-{seed}"
        submission_dir = _fresh(os.path.join(run_dir, "submission" + tag))
        state.copy_tree(source_dir, submission_dir, symlinks=True)
        config = confinement.submission_config(submission_dir, _fresh(os.path.join(run_dir, "scratch" + tag)))
        extra = {"HILLS_SUBMISSION": submission_dir, "HILLS_SPLIT": split, "HILLS_REPLICATE_SEED": str(seed),
                 "PYTHONPATH": sdk_dir, "HILLS_SUBMISSION_SANDBOX": json.dumps(config)}
        if trial is not None:
            extra["HILLS_PARAMS"] = json.dumps(trial, sort_keys=True)
        if shape == "function":
            return run_function(spec, python, run_dir, run_hill_dir, submission_dir, params, req.final,
                                req.verbose, extra, tag, confinement) + (submission_dir, extra, tag)
        try:
            command.prepare_workdir(submission_dir, run_hill_dir)
        except report_module.Malformed as exc:
            raise Refused(str(exc))
        # The solution may rewrite its own folder, but hills.sdk puts back
        # the links that the verifier's later steps go through.
        config["links"] = {name: os.readlink(os.path.join(submission_dir, name)) for name in ("problem", "data")
                           if os.path.islink(os.path.join(submission_dir, name))}
        extra["HILLS_SUBMISSION_SANDBOX"] = json.dumps(config)
        return run_command(spec, python, run_dir, submission_dir, params, req.final, req.verbose,
                           extra, tag, confinement, wrapper) + (submission_dir, extra, tag)

    resource = _Resource(spec["exclusive"], req.queue, say)
    cores, duration, dropped = [], 0.0, 0
    status, reason = "passing", None
    with resource:
        for seed in range(repeat):
            core, status, reason, outcome, submission_dir, extra, tag = replicate(seed)
            duration += outcome.duration_s
            dropped += outcome.output_dropped
            if status in ("interrupted", "buggy"):
                break
            cores.append(core)
            if seed == 0 and spec["unit_tests"] and status == "passing":
                ok, status, reason, record = run_unit_tests(spec, python, run_dir, run_hill_dir, submission_dir,
                                                            extra, req.verbose, confinement, tag)
                envelope["unit_tests"] = record
                if not ok:
                    break
            if status != "passing":
                break
    envelope["duration_s"] = round(duration, 3)
    if dropped:
        envelope["output_dropped_bytes"] = dropped
    if cores:
        envelope.update(replicates.aggregate(cores))
    envelope["replicates"] = len(cores)
    # How the evaluator was confined: recorded, never a reason to compare apart.
    envelope["config"] = [c for c in envelope["config"] if c.get("name") != "isolation"] + [
        {"name": "isolation", "value": level, "primary": False}]
    envelope.update(status=status, passed=status == "passing", reason=reason)
    if status == "interrupted":
        raise KeyboardInterrupt
    if not req.current:
        try:
            for lock_name in (locks.PRIVATE_LOCK, locks.BLOBS_LOCK):
                locks.verify_disk(hill.path, lock_name, expected[lock_name], cache)
        finally:
            cache.save()


def _finish(hill, head, log_tree, envelope, key):
    """Sign, append to the attempts log, and note official reports."""
    envelope.pop("signature", None)
    # Names from the submission and text from the evaluator may hold lone
    # surrogates; the report is UTF-8, so they become visible escapes.
    cleaned = signing.clean_text(envelope)
    envelope.clear()
    envelope.update(cleaned)
    envelope["signature"] = signing.sign(envelope, key)
    path = attempts_path(hill.name, log_tree, hill.path)
    entry = chain.append(path, {"report": envelope}, key)
    run_dir = os.path.join(state.runs_dir(hill.name), envelope["run_id"])
    if os.path.isdir(run_dir):
        state.atomic_write(os.path.join(run_dir, "report.json"), json.dumps(envelope, indent=2) + "\n")
    if envelope["official"] and head:
        note = json.dumps({"report": envelope, "attempt": {"seq": entry["seq"], "mac": entry["mac"]}},
                          sort_keys=True, separators=(",", ":"))
        with state.file_lock(os.path.join(hill.repo.git_dir, "hills-notes.lock")):
            # Through stdin: a report can be far larger than one argument may be.
            hill.repo.run("notes", f"--ref={NOTES_REF}", "append", "--file=-", head, input=note)
