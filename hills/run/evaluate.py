"""`hills eval`: pin the hill, verify its locks, snapshot the submission, run
the evaluator under the watchdog, and sign, log and note the outcome.

An eval passes records, not argument rows: the frozen `EvalRequest` (what
the user asked), the `EvalPlan` resolved from it before anything is logged,
the one `EvalContext` the replicates run in, a `RunResult` per replicate,
and the `Outcome` that `evaluate()` returns on every path once the attempts
log is open."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import types
from collections.abc import Mapping

# manifest (and the YAML it reads) is imported where it is needed: an eval
# of a committed version reads its manifest from the sealed JSON cache.
# So is shutil, which loads its compressors; the copies an eval makes are
# state.copy_tree's.
# command (the command shape's) and sdk (copied into the sdk folder once) are
# imported where they are needed.
from .. import spaces
from ..base import progress, state
from ..disk import locks, uvenv
from ..evidence import caller, chain, report as report_module, signing
from . import replicates, runner, sandbox, snapshot
from ..base.errors import (EXIT_BUG, EXIT_INTERRUPTED, EXIT_NO, EXIT_OK, EnvironmentProblem, HillsError, NotScored,
                           Refused, UsageError)
from ..base.git import lineage
from ..base.records import frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any, ContextManager

    from ..disk.hill import Hill
    from ..disk.manifest_types import Manifest as Spec  # a parsed hill.yaml (manifest.py)
    from ..evidence.report_types import Report
    from .standby import Standby
    from ..evidence.trust import Keys

    Say = Callable[[str], None]
    Locks = dict[str, dict[str, Any]]  # lock file name -> its entries

NOTES_REF = "refs/notes/hills/reports"
KEEP_RUNS = 20
SHIM = os.path.join(os.path.dirname(os.path.dirname(__file__)), "shim.py")
# What the evaluator's environment may inherit from the caller; nothing else
# (no tokens, no cloud credentials) reaches it.
ENV_ALLOW = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "TERM", "USER", "LOGNAME",
             "SYSTEMROOT", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "CUDA_VISIBLE_DEVICES",
             "NVIDIA_VISIBLE_DEVICES")



def _quiet(message: str) -> None:
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

    def __post_init__(self) -> None:
        object.__setattr__(self, "param_texts", tuple(self.param_texts))
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
    split: str  # HILLS_SPLIT: validation, or holdout under --final
    run_dir: str
    run_hill_dir: str
    source_dir: str  # the snapshot each replicate copies
    python: str
    sdk_dir: str
    wrapper: str  # $HILLS_PYTHON: the confined interpreter
    confinement: sandbox.Confinement
    seed_key: str = ""  # hex: draws the replicate and secret seeds (seeds.py)


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


def pinned_manifest(hill: Hill, tree_hash: str) -> Spec:
    """The manifest at a committed tree, parsed once per hills version and
    cached as JSON (a newer hills may read more keys from the same text)."""
    return pinned_version(hill, tree_hash)[0]


def pinned_version(hill: Hill, tree_hash: str, clean: bool = False) -> tuple[Spec, int | None]:
    """The manifest at a committed tree and the version of the cheat corpus
    its files passed at commit (hills-report(5), `corpus`), both cached with
    the manifest. The corpus is looked up once, by an eval of the tree
    `clean` in the working folder (so the gate's record of these files is
    the tree's), and None until then."""
    cache = os.path.join(state.state_dir(hill.name, tree_hash), "manifest.json")
    tool = report_module.tool_identity()["sha256"]
    cached = state.sealed_read(cache)
    if isinstance(cached, dict) and cached.get("tool") == tool:
        if "corpus" in cached or not clean:
            return cached["manifest"], cached.get("corpus")
        return cached["manifest"], _record_corpus(hill, cache, cached)
    text = hill.repo.show_blob(tree_hash, "hill.yaml")
    if text is None:
        raise NotScored(f"hill '{hill.name}' has no hill.yaml at tree {tree_hash[:12]}",
                        hint=f"commit the hill with hills commit {hill.name} -m MESSAGE")
    from ..disk import manifest

    spec = manifest.parse_text(text, f"hill.yaml at {tree_hash[:12]}", hill.name)
    cached = {"tool": tool, "manifest": spec}
    if clean:
        return spec, _record_corpus(hill, cache, cached)
    state.sealed_write(cache, cached)
    return spec, None


def _record_corpus(hill: Hill, cache: str, cached: dict[str, Any]) -> int | None:
    """Look the corpus version up in the gate's record and cache it."""
    from ..freeze import gate

    cached["corpus"] = gate.passed_corpus(hill)
    state.sealed_write(cache, cached)
    return cached["corpus"]


def resolve_params(spec: Spec, texts: Iterable[str]) -> dict[str, Any]:
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
            from ..disk import manifest

            params[name] = manifest.parse_cli_value(name, spec["params"][name], value)
        except UsageError as exc:
            raise UsageError(f"-p '{text}': {exc.message}", hint=exc.hint or described) from None
    return params


def is_dirty(hill: Hill, tree_hash: str | None = None) -> list[str]:
    """The changed files `git status` lists; [] at once, without git, when
    the index's stat data show a clean tree of `tree_hash` (gitobjects)."""
    if tree_hash is not None:
        from ..base import gitobjects
        from ..disk import hill as hill_module

        blobs = hill_module.excluded_blobs(hill.path)
        if blobs is not None and gitobjects.clean_by_stat(hill.repo.git_dir, hill.path, tree_hash, blobs):
            return []
    out = hill.repo.run("--no-optional-locks", "status", "--porcelain", "-z", "--untracked-files=all",
                        "--no-renames")
    return [record[3:] for record in out.split("\0") if record]


def _run_id() -> str:
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + os.urandom(4).hex()


def materialize(hill: Hill, rev: str, run_hill_dir: str) -> None:
    """Write the files of `rev` into `run_hill_dir` (git archive, extracted)."""
    import io
    import tarfile

    data = hill.repo.run("archive", "--format=tar", rev, binary=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        # The "data" filter exists from Python 3.11.4; the archive is our own
        # git tree, which never holds links or special files, so without it
        # the extraction is the same.
        options: dict[str, Any] = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        archive.extractall(run_hill_dir, **options)


def pinned_tree(hill: Hill, commit_id: str) -> str:
    """The tree hash of a commit; commits are immutable, so it is cached."""
    cache = os.path.join(state.home(), "cache", "commit-tree", commit_id)
    tree_hash = state.sealed_read(cache)
    if isinstance(tree_hash, str) and len(tree_hash) == 40:
        return tree_hash
    tree_hash = hill.repo.tree_of(commit_id)
    state.sealed_write(cache, tree_hash)
    return tree_hash


def pinned_files(hill: Hill, commit_id: str, tree_hash: str) -> tuple[str, Locks]:
    """A pristine copy of the tree's files, with their bytecode, and its
    decoded locks, made once per tree in machine state and sealed with the
    machine key: an edit of the copy is noticed and the copy made again.
    (folder, {lock: entries})."""
    root = state.state_dir(hill.name, tree_hash)
    folder = os.path.join(root, "tree")
    seal = os.path.join(root, "tree.seal.json")

    def intact() -> Locks | None:
        sealed = state.sealed_read(seal)
        if isinstance(sealed, dict) and sealed.get("bytecode") == sys.implementation.cache_tag \
                and os.path.isdir(folder) and sealed.get("signature") == state.folder_signature(folder):
            return sealed["locks"]
        return None

    expected = intact()
    if expected is not None:
        return folder, expected
    with state.file_lock(os.path.join(root, "tree.lock")):
        expected = intact()
        if expected is not None:
            return folder, expected
        import shutil

        expected = {}
        for lock_name in (locks.PRIVATE_LOCK, locks.BLOBS_LOCK):
            text = hill.repo.show_blob(commit_id, lock_name)
            expected[lock_name] = locks.decode(text, f"{lock_name} at {commit_id[:12]}") if text else {}
        staging = folder + f".tmp-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        os.makedirs(staging)
        materialize(hill, commit_id, staging)
        compile_bytecode(staging)
        shutil.rmtree(folder, ignore_errors=True)
        os.rename(staging, folder)
        state.sealed_write(seal, {"signature": state.folder_signature(folder), "locks": expected,
                                  "bytecode": sys.implementation.cache_tag})
    return folder, expected


def _link_locked(hill: Hill, run_hill_dir: str, entries: Iterable[str]) -> None:
    for rel in entries:
        target = os.path.join(run_hill_dir, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.symlink(os.path.join(hill.path, rel), target)


def evaluator_env(ctx: EvalContext, extra: Mapping[str, str]) -> dict[str, str]:
    """The environment of an evaluator: `$HILLS_PYTHON` and the `python`
    and `python3` first on its PATH are the confined interpreter,
    `$HILLS_SCORING_PYTHON` the trusted one."""
    env = {key: os.environ[key] for key in ENV_ALLOW if key in os.environ}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    env["PATH"] = os.pathsep.join([os.path.join(ctx.sdk_dir, "bin"), env.get("PATH", os.defpath)])
    env["HILLS_PYTHON"] = ctx.wrapper
    env["HILLS_SCORING_PYTHON"] = ctx.python
    env["HILLS_REAL_PYTHON"] = ctx.python
    env.update(extra)
    return env


def prune_runs(name: str, keep: int = KEEP_RUNS) -> None:
    """Remove the oldest run folders beyond `keep`; never one still in use."""
    root = state.runs_dir(name)
    try:
        runs = sorted(e for e in os.listdir(root) if not e.startswith("."))
    except FileNotFoundError:
        return
    for entry in runs[:-keep] if len(runs) > keep else []:
        import shutil

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


def attempts_path(name: str, tree_hash: str | None, hill_path: str | None = None) -> str:
    """The attempts log of a version; the working tree's (`tree_hash` None)
    is the hill folder's own."""
    return os.path.join(state.state_dir(name, tree_hash, hill_path), "attempts.jsonl")


def spends_holdout(entry: Mapping[str, Any]) -> bool:
    """Whether an entry of an attempts log spends a look at the holdout: the
    `started` entry of a --final eval, whether an outcome followed it or
    not (a killed eval spends its look). An outcome line names its started
    entry, or null when the eval stopped before anything ran (`start`), and
    adds nothing, so each eval counts once. A --final outcome from before
    started entries counts unless it was refused."""
    started = entry.get("started")
    if isinstance(started, dict):
        return started.get("final") is True
    if "start" in entry:
        return False
    report = entry.get("report")
    return isinstance(report, dict) and bool(report.get("final")) and report.get("status") != "refused"


def final_count(name: str, tree_hash: str, key: Keys) -> int:
    """Holdout evals already spent on a version, official or not (a look at
    the holdout is a look): each eval whose `started` entry is logged, so
    one killed while its evaluator ran too; refusals before anything ran
    are not counted. The log must verify:
    a log cut short must not hand the budget back. A sealed counter beside
    the log (`final-count.json`, written under the budget lock the caller
    holds) keeps the count up to a line, so only the lines after it are
    read; without it the whole log is counted again, to the same number."""
    counter = os.path.join(state.state_dir(name, tree_hash), "final-count.json")
    try:
        return chain.tally(attempts_path(name, tree_hash), key, counter, spends_holdout)
    except Refused as exc:
        raise NotScored(f"the attempts log of hill '{name}' at tree {tree_hash[:12]} is broken "
                        f"({exc.message}): its holdout evals cannot be counted",
                        hint=f"see 'hills attempts {name}'") from None


class _Resource:
    """An exclusive machine resource (hill.yaml `exclusive:`), held for the eval."""

    def __init__(self, name: str | None, queue: bool, say: Say) -> None:
        self.name, self.queue, self.say = name, queue, say
        self._ctx: ContextManager[bool] | None = None

    def __enter__(self) -> "_Resource":
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


PYTHON_WRAPPER = """#!/bin/sh
# The confined interpreter: $HILLS_PYTHON, and python and python3 first on
# an evaluator's PATH. Whatever it is given (a script, -c, -m) runs as
# submitted code, confined by hills.sdk. The trusted interpreter of scoring
# steps is $HILLS_SCORING_PYTHON.
if [ -z "$HILLS_REAL_PYTHON" ]; then
    echo "hills: the confined python runs only inside a hills eval (HILLS_REAL_PYTHON is not set)" >&2
    exit 127
fi
# The sdk runs as a file, isolated (-I): from the folder the verifier runs
# in, `-m hills.sdk` would import whatever hills/ the submission holds.
sdk="$(dirname "$0")/../hills/sdk.py"
if [ "$1" = "-m" ] && [ "$2" = "hills.sdk" ]; then
    shift 2
    exec "$HILLS_REAL_PYTHON" -I "$sdk" "$@"
fi
exec "$HILLS_REAL_PYTHON" -I "$sdk" "$HILLS_REAL_PYTHON" "$@"
"""

# $HILLCLIMB_PYTHON: where the code comes from decides. The verifier's own
# code (`-c`, `-m` of the hill's environment, a program on standard input,
# a script of the hill such as `exec "$HILLCLIMB_PYTHON" problem/verify.py`)
# runs trusted, under the scoring guard of its PYTHONPATH (hills/scoringhook.py),
# so it may read private/ and write $HILLCLIMB_RESULT; any other script (the
# candidate's solution.py) runs confined, as under $HILLS_PYTHON.
HILLCLIMB_WRAPPER = """#!/bin/sh
skip= script= inline=
for arg do
    if [ -n "$skip" ]; then skip=; continue; fi
    case "$arg" in
        -X|-W|--check-hash-based-pycs) skip=1 ;;
        -c*|-m*|-) inline=1; break ;;
        -*) ;;
        *) script=$arg; break ;;
    esac
done
if [ -z "$script" ] || [ -n "$inline" ]; then
    exec "$HILLS_REAL_PYTHON" "$@"
fi
real=$(realpath -e -- "$script" 2>/dev/null) && hill=$(realpath -e -- "$HILLS_HILL" 2>/dev/null) &&
case "$real" in
    "$hill"/*) exec "$HILLS_REAL_PYTHON" "$@" ;;
esac
exec "$(dirname "$0")/python" "$@"
"""

# The shells first on a command verifier's PATH: a script that is a file
# of the submission is not run in the scoring phase (the guard of
# hills/scoringhook.py cannot see into a shell); anything else runs on the
# shell found after this folder on PATH. Without the guard's variable
# (submitted code, confined, never has it) they only pass through.
SHELL_WRAPPED = ("bash", "sh", "dash", "zsh")
SHELL_WRAPPER = """#!/bin/sh
self=${0%/*} name=${0##*/}
here=$(cd "$self" && pwd -P)
real= rest=$PATH
while [ -n "$rest" ]; do
    folder=${rest%%:*}
    case "$rest" in *:*) rest=${rest#*:} ;; *) rest= ;; esac
    { [ -n "$folder" ] && [ "$folder" != "$self" ] && [ -x "$folder/$name" ]; } || continue
    [ "$(cd "$folder" && pwd -P)" = "$here" ] && continue
    real=$folder/$name
    break
done
if [ -z "$real" ]; then echo "$name: command not found" >&2; exit 127; fi
if [ -n "$HILLS_SCORING_GUARD" ]; then
    skip= script=
    for arg do
        if [ -n "$skip" ]; then skip=; continue; fi
        case "$arg" in
            -c|-s|-i) break ;;
            -o|+o|-O|+O|--rcfile|--init-file) skip=1 ;;
            -*|+*) ;;
            *) script=$arg; break ;;
        esac
    done
    if [ -n "$script" ] && found=$(realpath -e -- "$script" 2>/dev/null); then
        nl='
'
        record=${HILLS_SCORING_GUARD%%"$nl"*}
        roots=${HILLS_SCORING_GUARD#*"$nl"}
        roots=${roots%%"$nl"*}
        while [ -n "$roots" ]; do
            root=${roots%%:*}
            case "$roots" in *:*) roots=${roots#*:} ;; *) roots= ;; esac
            root=$(realpath -e -- "$root" 2>/dev/null) || continue
            case "$found" in
                "$root"/*)
                    rel=${found#"$root"/}
                    why="the scoring phase tried to run the submission's file '$rel' as the script of '$name'; submitted code runs only confined (hills.sdk.run_submission, \\$HILLS_PYTHON, or the solution phase)"
                    printf '{"event": "stopped", "how": "as the script of %s", "path": "%s", "reason": "%s"}\\n' \\
                        "$name" "$(printf %s "$rel" | tr '\\\\"' '__')" "$(printf %s "$why" | tr '\\\\"' '__')" >> "$record"
                    echo "hills: $why" >&2
                    exit 126 ;;
            esac
        done
    fi
fi
exec "$real" "$@"
"""  # noqa: E501 (a shell script: its long lines are its text)


def sdk_path(say: Say | None = None) -> str:
    """A folder holding a tiny `hills` package (spaces, sdk and the shim)
    for the PYTHONPATH of evaluators and submissions, whose environments do
    not install hills, with its bytecode, and the `bin/python` wrapper of
    command verifiers. Made once per hills version and sealed with the
    machine key like a hill environment: every evaluator imports from it,
    so a file added or edited there (a `sitecustomize.py`, a `.pth`) would
    run in every eval. A folder that differs from its seal is made again."""
    identity = report_module.tool_identity()["sha256"][:16]
    root = os.path.join(state.home(), "sdk", identity)
    if _sdk_intact(root):
        return root
    state.ensure_home()
    with state.file_lock(root + ".lock"):
        if _sdk_intact(root):
            return root
        if say and os.path.lexists(root):
            say(f"hills: the sdk folder '{root}' changed since it was made; making it again")
        _make_sdk(root)
    return root


def _sdk_intact(root: str) -> bool:
    sealed = state.sealed_read(root + ".seal.json")
    return bool(sealed) and not os.path.islink(root) and sealed == state.folder_signature(root)


def _make_sdk(root: str) -> None:
    """Build the sdk folder aside, swap it in, then seal it (the caller
    holds its lock)."""
    import shutil

    from .. import sdk

    staging = root + f".tmp-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    os.makedirs(os.path.join(staging, "hills"))
    os.makedirs(os.path.join(staging, "bin"))
    with open(os.path.join(staging, "hills", "__init__.py"), "w", encoding="utf-8") as handle:
        handle.write('"""The part of hills that evaluators and submitted code may import."""\n')
    for source in (str(spaces.__file__), str(sdk.__file__), SHIM):
        shutil.copy2(source, os.path.join(staging, "hills", os.path.basename(source)))
    compile_bytecode(os.path.join(staging, "hills"))
    # The access audit's hook, first on the path of the code hills.sdk starts (docs/audit.md).
    os.makedirs(os.path.join(staging, "audit"))
    shutil.copy2(os.path.join(os.path.dirname(os.path.dirname(__file__)), "audithook.py"),
                 os.path.join(staging, "audit", "sitecustomize.py"))
    compile_bytecode(os.path.join(staging, "audit"))
    # The scoring phase's guard, first on the path of its trusted interpreters.
    os.makedirs(os.path.join(staging, "scoring"))
    shutil.copy2(os.path.join(os.path.dirname(os.path.dirname(__file__)), "scoringhook.py"),
                 os.path.join(staging, "scoring", "sitecustomize.py"))
    compile_bytecode(os.path.join(staging, "scoring"))
    for name, text in (("python", PYTHON_WRAPPER), ("python3", PYTHON_WRAPPER), ("hillclimb-python", HILLCLIMB_WRAPPER),
                       *((shell, SHELL_WRAPPER) for shell in SHELL_WRAPPED)):
        wrapper = os.path.join(staging, "bin", name)
        with open(wrapper, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(wrapper, 0o755)
    aside = root + f".old-{os.getpid()}"
    if os.path.islink(root) or os.path.isfile(root):
        os.unlink(root)
    elif os.path.lexists(root):
        shutil.rmtree(aside, ignore_errors=True)
        os.rename(root, aside)
    os.rename(staging, root)
    shutil.rmtree(aside, ignore_errors=True)
    state.sealed_write(root + ".seal.json", state.folder_signature(root))


def compile_bytecode(folder: str) -> None:
    """Bytecode for every Python file under `folder`, for this interpreter,
    beside it in `__pycache__`: an evaluator runs with bytecode writing off
    and its folders read-only, so it would compile them on every start.

    The files are hash-checked (PEP 552): an interpreter uses one only while
    its source hashes to what the file records, whatever the timestamps say,
    and else compiles the source. An interpreter of another version looks
    for its own file name and compiles the source. A file that does not
    compile is left to fail where the evaluator imports it."""
    import py_compile

    for current, dirs, files in os.walk(folder):
        dirs[:] = [name for name in dirs if name != "__pycache__"]
        for name in files:
            if name.endswith(".py"):
                try:
                    py_compile.compile(os.path.join(current, name), doraise=True,
                                       invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
                except (py_compile.PyCompileError, OSError, ValueError):
                    continue


def _fresh(path: str) -> str:
    """`path` with nothing at it: an earlier evaluator process of this run
    may have left a link there, and hills, unconfined, must not write
    through it (it would write anywhere the user can)."""
    if os.path.isdir(path) and not os.path.islink(path):
        import shutil

        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)
    return path


def run_function(ctx: EvalContext, rep: Replicate, gate: Callable[[], None] | None = None,
                 prepare: Callable[[], None] | None = None, started: runner.Started | None = None) -> RunResult:
    """Run a function-shape evaluator through the shim; `prepare` (the
    intake) and `gate` (the started entry) run while its process boots,
    before it may run (runner.run). `started`: a standby's process, used
    only where its argv and environment are this run's own, else ended."""
    argv, env = _function_call(ctx, rep)
    if started is not None and (started.argv, started.env) != (argv, env):
        started.discard()
        started = None
    if started is not None:
        process = started.finish(ctx.spec["timeout"], gate=gate, prepare=prepare)
    else:
        process = runner.run(argv, cwd=ctx.run_dir, env=env, timeout=ctx.spec["timeout"],
                             own_pid_namespace=ctx.confinement.level == sandbox.LEVEL_BWRAP,
                             stdout_path=_fresh(os.path.join(ctx.run_dir, f"stdout{rep.tag}.log")),
                             stderr_path=_fresh(os.path.join(ctx.run_dir, f"stderr{rep.tag}.log")),
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


def _function_call(ctx: EvalContext, rep: Replicate) -> tuple[list[str], dict[str, str]]:
    """The argv and environment of a function evaluator's process."""
    request = {"hill_dir": ctx.run_hill_dir, "entry": ctx.spec["evaluator"]["entry"], "submission": rep.submission_dir,
               "final": ctx.final, "params": ctx.params}
    env = evaluator_env(ctx, rep.env)
    # The fd number is only known once the pipe exists; the shim reads it from env.
    argv = ctx.confinement.evaluator([ctx.python, "-c", _SHIM_BOOT, json.dumps(request)], ctx.run_dir,
                                     hide=rep.hidden)
    return argv, env


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
    result_path = _fresh(os.path.join(run_dir, f"result{rep.tag}.json"))  # only this run's verifier may write it
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
                         timeout=ctx.spec["timeout"], stdout_path=_fresh(os.path.join(run_dir, f"stdout{rep.tag}.log")),
                         stderr_path=_fresh(os.path.join(run_dir, f"stderr{rep.tag}.log")), verbose=ctx.verbose)
    failure = _failure(ctx.spec, process)
    if failure:
        return RunResult(rep, process, *failure)
    if process.exit_code != 0:
        said = _last_line(os.path.join(run_dir, f"stderr{rep.tag}.log")) or "the candidate is buggy"
        return RunResult(rep, process, "buggy", f"the verifier failed ({process.describe_exit()}): {said}; "
                                                f"see stderr{rep.tag}.log in {run_dir}")
    try:
        parsed = command.parse_result(result_path)
    except report_module.Malformed as exc:
        return RunResult(rep, process, "buggy", f"malformed result: {exc}")
    return RunResult(rep, process, "passing", None, command.core_from_result(ctx.spec, ctx.params, ctx.final, parsed))


def _last_line(log_path: str, limit: int = 300) -> str | None:
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
    config = ctx.confinement.submission_config(submission_dir, _fresh(os.path.join(run_dir, f"scratch-tests{rep.tag}")),
                                               readable=[tests_dir])
    env[sdk.ENV_CONFIG] = json.dumps(dict(config, timeout=spec["timeout"], by="unit_tests"))
    argv = [ctx.python, "-I", "-B", os.path.join(ctx.sdk_dir, "hills", os.path.basename(sdk.__file__))] + argv
    process = runner.run(argv, cwd=run_dir, env=env, timeout=spec["timeout"],
                         stdout_path=_fresh(os.path.join(run_dir, "unit_tests.log")),
                         stderr_path=_fresh(os.path.join(run_dir, "unit_tests.err.log")), verbose=ctx.verbose)
    record = {"passed": process.exit_code == 0 and not process.timed_out and not process.interrupted,
              "exit_code": process.exit_code, "duration_s": round(process.duration_s, 3)}
    failure = _failure(spec, process)
    if failure:
        return UnitTestsResult(failure[0], "unit tests: " + failure[1], record)
    if process.exit_code != 0:
        return UnitTestsResult("failing", f"the frozen unit tests failed ({process.describe_exit()}); "
                                          f"see unit_tests.log in {run_dir}", record)
    return UnitTestsResult("passing", None, record)


class _BadOutput(Exception):
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
    inputs = _solution_inputs(ctx)
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
    ran = _takes_solution(solution, snapshot_dir)
    if ran and solution.get("generate"):
        from . import seeds

        target = os.path.join(snapshot_dir, "inputs")
        if not inputs and os.path.lexists(target):
            raise Refused("the submission holds 'inputs', a name reserved for the generated inputs in this hill",
                          hint="rename it: hills writes the replicate's inputs there before the solution phase")
        failed = seeds.generate_inputs(ctx, rep, target)  # fresh inputs, from the secret seed
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
                             stdout_path=_fresh(os.path.join(ctx.run_dir, f"solution-stdout{rep.tag}.log")),
                             stderr_path=_fresh(os.path.join(ctx.run_dir, f"solution-stderr{rep.tag}.log")),
                             verbose=ctx.verbose)
        failure = _failure(ctx.spec, process)
        if failure:
            return SolutionPhase(True, process, None), RunResult(rep, process, *failure)
        if process.exit_code != 0:
            said = _last_line(os.path.join(ctx.run_dir, f"solution-stderr{rep.tag}.log"))
            return SolutionPhase(True, process, None), RunResult(
                rep, process, "buggy", f"the solution phase failed ({process.describe_exit()})"
                                       + (f": {said}" if said else "")
                                       + f"; see solution-stderr{rep.tag}.log in {ctx.run_dir}")
    outputs_dir = _fresh(os.path.join(ctx.run_dir, "outputs" + rep.tag))
    os.mkdir(outputs_dir)
    try:
        _collect_outputs(snapshot_dir, outputs_dir, solution["outputs"],
                         "the solution phase wrote no" if ran else f"the submission holds neither '{when}' nor")
    except _BadOutput as exc:
        stopped = process if process is not None else runner.ProcessOutcome()
        return SolutionPhase(ran, process, None), RunResult(rep, stopped, "buggy", str(exc))
    return SolutionPhase(ran, process, outputs_dir), None


def _collect_outputs(snapshot_dir: str, outputs_dir: str, patterns: Iterable[str], missing: str) -> None:
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
                raise _BadOutput(f"{missing} '{pattern}' (hill.yaml solution.outputs)")
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
        raise _BadOutput(f"the output '{rel}' is a symbolic link; outputs must be files or folders")
    if stat_module.S_ISDIR(info.st_mode):
        os.mkdir(target)
        for name in sorted(os.listdir(source)):
            _copy_output(os.path.join(source, name), os.path.join(target, name), f"{rel}/{name}")
        return
    if not stat_module.S_ISREG(info.st_mode):
        raise _BadOutput(f"the output '{rel}' is not a regular file")
    fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    try:
        with open(fd, "rb", closefd=False) as reader, open(target, "xb") as writer:
            while chunk := reader.read(1024 * 1024):
                writer.write(chunk)
    finally:
        os.close(fd)


def scoring_replicate(ctx: EvalContext, rep: Replicate, outputs_dir: str) -> Replicate:
    """The replicate the scoring phase runs: the outputs as its submission,
    the snapshot and its scratch hidden from it."""
    tag = rep.tag
    config = ctx.confinement.submission_config(outputs_dir, _fresh(os.path.join(ctx.run_dir, "scratch-score" + tag)))
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


def resolve_knobs(req: EvalRequest) -> tuple[dict[str, Any] | None, dict[str, Any] | None, str | None]:
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
    items: list[tuple[str, Any]] = []
    if isinstance(given, Mapping):
        items = list(given.items())
    else:
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
                             hint="the knobs and their ranges are declared in "
                                  f"{os.path.join(req.submission, 'params.json')}")
    return declaration, values, warning


# The shim is run through a tiny bootstrap so the result fd arrives by env
# rather than on the command line an evaluator could read back and reuse;
# the key sealing the result arrives on stdin, which the shim reads first.
# It imports the shim from the sdk folder (PYTHONPATH), whose bytecode is
# made with it: runpy would import pkgutil and typing first.
_SHIM_BOOT = ("import json,os,sys;"
              "r=json.loads(sys.argv[1]);r['result_fd']=int(os.environ.pop('HILLS_RESULT_FD'));"
              "from hills import shim;"
              "sys.argv=[shim.__file__,'eval',json.dumps(r)];sys.exit(shim.main(sys.argv))")


def evaluate(req: EvalRequest, say: Say = _quiet, standby: Standby | None = None) -> Outcome:
    """Run one evaluation. A refusal before the attempts log is opened (bad
    usage, a hill that allows no score) raises HillsError; from then on
    every path (scored, refused, interrupted, crashed) is logged and
    returned as the Outcome. `standby`: the one a warm server's spare made
    for this call (docs/standby.md), adopted where the plan fits it."""
    plan = resolve(req)
    held = standby.adopt(plan) if standby is not None else None
    try:
        run_dir = _open_run(plan, held)
        envelope = _envelope(plan, os.path.basename(run_dir))
        in_use = held.in_use() if held is not None else state.file_lock(os.path.join(run_dir, ".in-use"))
        with _budget_lock(plan), in_use:
            _guard_budget(plan, run_dir)
            outcome = _run_logged(plan, run_dir, envelope, say, held)
    finally:
        if held is not None:
            held.discard(keep_folder=True)  # a no-op once the eval took its process
    if outcome.scored:
        name = req.hill.name
        state.housekeeping(lambda: prune_runs(name))
    return outcome


def evaluate_unlogged(req: EvalRequest, run_dir: str, say: Say = _quiet) -> Report:
    """Run one evaluation in `run_dir`, an empty folder the caller made and
    removes, through the same pipeline as `evaluate()`, and return its
    report unsigned: nothing is logged, signed or noted, and no budget is
    counted (the leak probe of `hills check`). A refusal raises its HillsError."""
    plan = resolve(req)
    envelope = _envelope(plan, os.path.basename(run_dir))
    with state.file_lock(os.path.join(run_dir, ".in-use")), state.write_errors_as_problems(run_dir):
        _pipeline(plan, run_dir, envelope, say)
    return envelope


def resolve(req: EvalRequest) -> EvalPlan:
    """Pin the version the request scores and check what it asks (DESIGN
    section 6, step 1); every refusal here raises, before anything is logged."""
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
    official, official_reason, forced = _official(req, tree_hash)
    corpus = None
    if req.current:
        from ..disk import manifest

        spec = manifest.load(hill.path)
    else:
        assert tree_hash is not None  # a hill without commits was refused above
        spec, corpus = pinned_version(hill, tree_hash, clean=not forced)
    params = resolve_params(spec, req.param_texts)
    # Fail closed (DESIGN 6.9): without a bubblewrap that confines, no eval
    # at all, before anything is logged, unless hill.yaml says `sandbox: none`.
    sandbox.level_for(spec)
    if not os.path.isdir(req.submission):
        raise UsageError(f"submission '{req.submission}' is not a folder",
                         hint="a submission is a folder; pass its path")
    _refuse_state_inside(req.submission)
    repeat = req.repeat if req.repeat is not None else spec["replicates"]
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise UsageError(f"--repeat expects an integer >= 1, got {repeat}")
    _, trial, knob_warning = resolve_knobs(req)
    from ..evidence.trust import machine_keys

    key = machine_keys(for_signing=True)
    caller.trust()  # a claim of the service this process cannot back is refused here, before anything is logged
    if req.final and spec["final"]["budget"] is not None and req.current:
        raise NotScored(f"hill '{hill.name}' limits its holdout evals ({spec['final']['budget']} per version): "
                        "--final needs a committed version, not --current",
                        hint=f"commit the hill (hills commit {hill.name} -m MESSAGE) and drop --current")
    return EvalPlan(request=req, head=head, tree_hash=tree_hash, log_tree=None if req.current else tree_hash,
                    spec=spec, params=params, trial=trial, knob_warning=knob_warning, repeat=repeat,
                    official=official, official_reason=official_reason, forced=forced, key=key, corpus=corpus)


def _refuse_state_inside(submission: str) -> None:
    """A submission folder that holds the machine state would be copied
    into its own run folder as it is copied, without end."""
    folder, home = os.path.realpath(submission), os.path.realpath(state.home())
    if os.path.commonpath([folder, home]) == folder:
        raise UsageError(f"submission '{submission}' holds the machine state '{home}', where its run folder "
                         "would be", hint="pass the submission's own folder, or set HILLS_HOME outside it")


def _official(req: EvalRequest, tree_hash: str | None) -> tuple[bool, str | None, bool]:
    """(official, why not, forced): whether the report will be official, and
    whether it scores HEAD of a dirty hill (--force); a dirty hill without
    --force or --current is refused."""
    hill = req.hill
    if req.current:
        return False, "scored the working tree (--current), not a committed version", False
    assert tree_hash is not None  # resolve() refused a hill without commits
    changed = is_dirty(hill, tree_hash)
    from ..disk import pin

    official, official_reason = pin.official_status(hill, tree_hash)
    if changed and not req.force:
        raise NotScored(f"hill '{hill.name}' has uncommitted changes ({', '.join(changed[:3])}"
                        + (", ..." if len(changed) > 3 else "") + ")",
                        hint="commit them, pass --force to score the last commit anyway, "
                             "or --current to try the working tree unofficially")
    return official, official_reason, bool(changed)


def _open_run(plan: EvalPlan, held: Standby | None = None) -> str:
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
    run_dir = os.path.join(state.runs_dir(hill.name), _run_id())
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
    if plan.trial is not None:
        envelope["trial"] = plan.trial
    if plan.knob_warning:
        envelope["warnings"] = [plan.knob_warning]
    return envelope


def _budget_lock(plan: EvalPlan) -> ContextManager[object]:
    """Held from the count to the log line, so concurrent --final evals
    cannot overspend the holdout budget."""
    if plan.budget is None:
        return contextlib.nullcontext()
    return state.file_lock(os.path.join(state.state_dir(plan.hill.name, plan.tree_hash), "final.lock"))


def _guard_budget(plan: EvalPlan, run_dir: str) -> None:
    """Refuse a --final eval whose version has spent its holdout budget;
    nothing is logged for it (a refusal does not count)."""
    if plan.budget is None:
        return
    assert plan.tree_hash is not None  # resolve() refused --final --current under a budget
    used = final_count(plan.hill.name, plan.tree_hash, plan.key)
    if used >= plan.budget:
        import shutil

        shutil.rmtree(run_dir, ignore_errors=True)
        raise NotScored(f"the holdout budget of hill '{plan.hill.name}' is spent: {used} of "
                        f"{plan.budget} --final evals used for tree {plan.tree_hash[:12]}",
                        hint="evals without --final still score on the validation split; "
                             "a new committed version starts a new budget")


def process_start(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks after boot) of process
    `pid`, from /proc; None where it has no entry there. The start time
    tells a process from a later one given the same pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        return fields[0].decode("ascii", "replace"), int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


class _Start:
    """The `started` entry of a logged eval, appended once, just before
    its first process (the solution phase or the evaluator) runs anything
    of the hill or the submission (an evaluator boots meanwhile), the
    refusals of the hill and the submission behind it: an eval killed from
    then on (kill -9 after reading a holdout score) is in the log, and
    counts toward the holdout budget. `link` ({seq, mac}) is what the
    outcome line names."""

    __slots__ = ("plan", "envelope", "link")

    def __init__(self, plan: EvalPlan, envelope: Report) -> None:
        self.plan, self.envelope = plan, envelope
        self.link: dict[str, Any] | None = None

    def __call__(self, ctx: EvalContext) -> None:
        if self.link is not None:
            return
        plan, envelope, spec = self.plan, self.envelope, ctx.spec
        pid = os.getpid()
        own = process_start(pid)
        # The longest the watchdog lets the run take: past it (and a margin)
        # an entry with no outcome is abandoned, on any machine.
        runs = ctx.repeat * (2 if spec["solution"] else 1) + (1 if spec["unit_tests"] else 0)
        record = {"run_id": envelope["run_id"], "hill": plan.hill.name, "tree_hash": envelope["tree_hash"],
                  "final": envelope["final"], "submission_hash": envelope["submission_hash"],
                  "timestamp": report_module.timestamp(), "pid": pid, "host": os.uname().nodename,
                  "pid_start": own[1] if own else None, "timeout_s": spec["timeout"] * runs}
        path = attempts_path(plan.hill.name, plan.log_tree, plan.hill.path)
        entry = chain.append(path, {"started": signing.clean_text(record)}, plan.key)
        self.link = {"seq": entry["seq"], "mac": entry["mac"]}


def _run_logged(plan: EvalPlan, run_dir: str, envelope: Report, say: Say, held: Standby | None = None) -> Outcome:
    """Run the pipeline and log its report, whatever happens: refusals,
    interrupts and bugs in hills are attempts too (no survivorship). The
    `started` entry goes first, before anything submitted runs."""
    start = _Start(plan, envelope)
    try:
        # A full disk or a read-only folder is the machine's problem, named, not a bug in hills.
        with state.write_errors_as_problems(run_dir):
            _pipeline(plan, run_dir, envelope, say, start, held)
    except HillsError as exc:
        envelope.update({"status": "refused", "passed": False, "reason": exc.message})
        _finish(plan, envelope, start.link)
        return Outcome(envelope, exc.exit_code, exc.message, exc.hint, exc)
    except KeyboardInterrupt:
        if envelope["status"] != "interrupted":  # else the runner already said which signal
            envelope.update({"status": "interrupted", "passed": False, "reason": "interrupted by the user (Ctrl-C)"})
        return _interrupted(plan, envelope, start.link)
    except Exception as exc:
        message = f"internal error in hills: {type(exc).__name__}: {exc}"
        envelope.update({"status": "buggy", "passed": False, "reason": message})
        _finish(plan, envelope, start.link)
        return Outcome(envelope, EXIT_BUG, message, error=exc)
    if envelope["status"] == "interrupted":  # the runner said which signal stopped it
        return _interrupted(plan, envelope, start.link)
    _finish(plan, envelope, start.link)
    return Outcome(envelope, EXIT_OK if envelope["status"] == "passing" else EXIT_NO)


def _interrupted(plan: EvalPlan, envelope: Report, start: dict[str, Any] | None) -> Outcome:
    """Log an interrupted eval; its outcome exits 130 like any interrupt."""
    _finish(plan, envelope, start)
    return Outcome(envelope, EXIT_INTERRUPTED, "interrupted", error=KeyboardInterrupt(envelope["reason"]))


def _pipeline(plan: EvalPlan, run_dir: str, envelope: Report, say: Say,
              start: Callable[[EvalContext], None] | None = None, held: Standby | None = None) -> None:
    """DESIGN section 6, steps 2 to 5: verify the locks, fill the run folder,
    run the replicates, and record them in `envelope`; `start` logs the
    `started` entry once nothing is left to refuse (not for an unlogged eval).
    `held`: the standby this eval adopted (its context, folders and process)."""
    req = plan.request
    # `cryptography` signs the started entry before anything runs: loading
    # while the hill and the submission are copied, it is there (or nearly)
    # by then, where loading at the first signature would wait all of it.
    plan.key.preload()
    cache = locks.StatCache(plan.hill.path)
    run_hill_dir = os.path.join(run_dir, "hill")
    intake: Callable[[], None] | None = None
    python = None
    if held is None and _takes_in_while_booting(plan, isinstance(start, _Start)):
        assert plan.tree_hash is not None
        python = uvenv.ready(plan.hill.name, plan.tree_hash)  # a build needs the hill's files first
    if held is not None or python is not None:
        # The evaluator's process boots (or a standby's waits) while the
        # hill and the submission are copied in: its folders exist, empty,
        # before it starts, and are filled before it gets its key
        # (runner.run's `prepare`).
        if held is not None:
            pristine, expected, ctx = held.pristine, held.expected, held.ctx
            progress.phase(say, "preparing the hill's environment")
        else:
            pristine, expected = _checked_pin(plan, cache)
            os.mkdir(run_hill_dir)
            ctx = build_context(plan, run_dir, expected, say, python=python)

        def intake() -> None:
            _copy_hill(plan, run_hill_dir, pristine, expected, into=True)
            _take_submission(plan, run_dir, envelope, say)
    else:
        expected = _prepare_hill(plan, run_hill_dir, cache)
        _take_submission(plan, run_dir, envelope, say)
        ctx = build_context(plan, run_dir, expected, say)
    try:
        runs = _run_replicates(ctx, say, start, intake, held)
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
    # How the evaluator was confined: primary config, so an unconfined
    # report never ranks beside confined ones (rank.primary_tuple).
    envelope["config"] = [c for c in envelope["config"] if c.get("name") != "isolation"] + [
        {"name": "isolation", "value": ctx.confinement.level, "primary": True}]
    # What ran confined, the caps and the caps hit (hills-report(5)).
    envelope["isolation"] = ctx.confinement.record()
    from . import measures, seeds

    envelope["seeds"] = seeds.record(ctx.spec, ctx.seed_key, max(len(runs.cores), 1))
    measures.attach(envelope, ctx.confinement.events, ctx.spec)  # measured, claimed, audit, fingerprint
    reason = runs.reason
    hits = envelope["isolation"]["caps_hit"]
    if hits and runs.status not in ("passing", "interrupted"):
        named = "; ".join(f"{hit['cap']} (limit {hit['limit']}, seen {hit.get('seen')})" for hit in hits)
        reason = f"{reason or runs.status}; submitted code was stopped at its cap: {named}"
    envelope.update({"status": runs.status, "passed": runs.status == "passing", "reason": reason})
    report_module.judge(envelope, ctx.spec)  # comparability and plausibility (hills-report(5))
    if runs.status != "interrupted" and not req.current:
        _check_locks(plan.hill, expected, cache)


def _take_submission(plan: EvalPlan, run_dir: str, envelope: Report, say: Say) -> None:
    """Snapshot the submission into the run folder's source/, and say what is scored."""
    req = plan.request
    envelope["submission_git"] = lineage(req.submission)
    envelope["submission_hash"] = snapshot.snapshot(req.submission, os.path.join(run_dir, "source"))
    progress.header(say, envelope, req.submission, plan.spec.get("version"))


def _takes_in_while_booting(plan: EvalPlan, logged: bool) -> bool:
    """Whether the evaluator's process may boot while the hill and the
    submission are copied in: a committed version (not --current) scored
    by a function evaluator that is the first process to run (no solution
    phase, or one this submission does not take: `_boots_first`, asked of
    the submission's folder, and asked again of the snapshot), and
    `cryptography` already loaded (a warm worker), which otherwise loads
    meanwhile, holding the interpreter lock a process's start needs. (Its
    environment must be built, too: _pipeline.)"""
    spec, req = plan.spec, plan.request
    if not logged or not plan.key.loaded or req.current or plan.tree_hash is None \
            or spec["evaluator"]["shape"] != "function":
        return False
    solution = spec["solution"]
    return not solution or not (_inputs_for(solution, "holdout" if req.final else "validation")
                                or _takes_solution(solution, os.fspath(req.submission)))


def _check_locks(hill: Hill, expected: Locks, cache: locks.StatCache) -> None:
    """Verify the hill's private data and public blobs against their locks."""
    try:
        for lock_name in (locks.PRIVATE_LOCK, locks.BLOBS_LOCK):
            locks.verify_disk(hill.path, lock_name, expected[lock_name], cache)
    finally:
        cache.save()


def _prepare_hill(plan: EvalPlan, run_hill_dir: str, cache: locks.StatCache) -> Locks:
    """Write the hill into the run folder: the pinned tree, its private
    data and locked blobs linked once verified, or under --current the
    working tree. Returns the lock entries the data must still match."""
    hill = plan.hill
    if plan.request.current:
        import shutil

        state.copy_tree(hill.path, run_hill_dir, symlinks=True,
                        ignore=shutil.ignore_patterns(".vc", "private", "__pycache__"))
        if os.path.isdir(os.path.join(hill.path, locks.PRIVATE_DIR)):
            os.symlink(os.path.join(hill.path, locks.PRIVATE_DIR), os.path.join(run_hill_dir, locks.PRIVATE_DIR))
        return {}
    pristine, expected = _checked_pin(plan, cache)
    _copy_hill(plan, run_hill_dir, pristine, expected)
    return expected


def _checked_pin(plan: EvalPlan, cache: locks.StatCache) -> tuple[str, Locks]:
    """The pinned tree's pristine copy and its lock entries (pinned_files),
    once the hill's data on disk is checked against them."""
    hill = plan.hill
    assert plan.head is not None and plan.tree_hash is not None  # resolve() refused an uncommitted hill
    pristine, expected = pinned_files(hill, plan.head, plan.tree_hash)
    try:
        _check_locks(hill, expected, cache)
    except Refused as exc:
        # Drift found before the run is the hill's, not the submission's:
        # no candidate can be scored until the data is restored.
        raise NotScored(exc.message, hint=exc.hint) from None
    return pristine, expected


def _copy_hill(plan: EvalPlan, run_hill_dir: str, pristine: str, expected: Locks, into: bool = False) -> None:
    """The pristine tree into `run_hill_dir` (an empty folder there, `into`),
    with links to its private data and its locked blobs."""
    hill = plan.hill
    state.copy_tree(pristine, run_hill_dir, into=into)
    if expected[locks.PRIVATE_LOCK]:
        os.symlink(os.path.join(hill.path, locks.PRIVATE_DIR), os.path.join(run_hill_dir, locks.PRIVATE_DIR))
    _link_locked(hill, run_hill_dir, expected[locks.BLOBS_LOCK])


def build_context(plan: EvalPlan, run_dir: str, expected: Locks, say: Say, python: str | None = None) -> EvalContext:
    """The one EvalContext of an eval whose run folder holds the hill and
    the snapshot: the hill environment's interpreter (made once per
    version, unless `python` is it already) and the evaluator's confinement."""
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
                                      elsewhere=sandbox.private_elsewhere(hill.path)
                                      if level == sandbox.LEVEL_BWRAP else (), gpu=spec["exclusive"] == "gpu")
    return EvalContext(spec=spec, params=plan.params, trial=plan.trial, repeat=plan.repeat, final=req.final,
                       verbose=req.verbose, queue=req.queue, split="holdout" if req.final else "validation",
                       run_dir=run_dir, run_hill_dir=run_hill_dir, source_dir=os.path.join(run_dir, "source"),
                       python=python, sdk_dir=sdk_dir, wrapper=os.path.join(sdk_dir, "bin", "python"),
                       confinement=confinement, seed_key=os.urandom(16).hex())


def _run_replicates(ctx: EvalContext, say: Say, start: Callable[[EvalContext], None] | None = None,
                    intake: Callable[[], None] | None = None, held: Standby | None = None) -> Runs:
    """Run the replicates, seeds 0..N-1, and the frozen unit tests after the
    first; stop at the first that does not pass. `start` is called once the
    exclusive resource is held and the first replicate's folder is ready,
    just before anything of it runs. `intake` (_pipeline) fills the run
    folder while the first replicate's evaluator boots, its folder then
    filled from the snapshot after it."""
    cores: list[dict[str, Any]] = []
    duration, dropped, tests = 0.0, 0, None
    status, reason = "passing", None
    solution: dict[str, Any] = {"runs": 0, "duration_s": 0.0}
    with _Resource(ctx.spec["exclusive"], ctx.queue, say):
        for seed in range(ctx.repeat):
            filling = intake if seed == 0 else None
            rep = scored = held.rep if held is not None and seed == 0 else _replicate(ctx, seed,
                                                                                    filled=filling is None)
            # Where nothing runs before the evaluator, its process boots
            # while the started entry is signed and appended; not while
            # `cryptography` still loads, which holds the interpreter lock
            # the start of a process needs (measured: 7 ms slower).
            early = filling is None and isinstance(start, _Start) and start.plan.key.loaded \
                and _boots_first(ctx, rep)
            if start is not None and not early and filling is None:
                start(ctx)
            run: RunResult | None = None
            replicate = f"replicate {seed + 1} of {ctx.repeat}: " if ctx.repeat > 1 else ""
            if filling is not None:
                assert start is not None
                run = _run_taking_in(ctx, rep, say, replicate, start, filling, held if seed == 0 else None)
            elif ctx.spec["solution"]:
                progress.phase(say, replicate + "solution phase")
                phase, run = run_solution(ctx, rep)
                if phase.process is not None:
                    solution["runs"] += 1
                    solution["duration_s"] += phase.process.duration_s
                    duration += phase.process.duration_s
                    dropped += phase.process.output_dropped
                if phase.outputs_dir is not None:
                    scored = scoring_replicate(ctx, rep, phase.outputs_dir)
            if run is None:
                progress.phase(say, replicate + "scoring")
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
            if seed == 0 and ctx.spec["unit_tests"] and status == "passing":
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
        scored, outputs_dir = _intake_folders(ctx, rep)

    def prepare() -> None:
        intake()
        if solution and _takes_solution(solution, ctx.source_dir):
            raise Refused(f"submission entry '{solution['when']}' appeared while the submission was copied",
                          hint="leave the submission folder alone while hills evaluates it")
        state.copy_tree(ctx.source_dir, rep.submission_dir, symlinks=True, into=True)
        if outputs_dir is not None:
            _collect_outputs(rep.submission_dir, outputs_dir, solution["outputs"],
                             f"the submission holds neither '{solution['when']}' nor")
        progress.phase(say, label + "scoring")

    try:
        return run_function(ctx, scored, gate=lambda: start(ctx), prepare=prepare,
                            started=held.take() if held is not None else None)
    except _BadOutput as exc:
        start(ctx)  # logged after its started entry, as run_solution's outcome is
        return RunResult(rep, runner.ProcessOutcome(), "buggy", str(exc))


def _intake_folders(ctx: EvalContext, rep: Replicate) -> tuple[Replicate, str | None]:
    """The replicate the first evaluator scores, and its outputs folder
    when a solution phase is skipped, made (empty) before it starts: the
    folders hidden from the scorer must be there to be hidden."""
    if not ctx.spec["solution"]:
        return rep, None
    os.makedirs(ctx.source_dir, exist_ok=True)
    outputs_dir = _fresh(os.path.join(ctx.run_dir, "outputs" + rep.tag))
    os.mkdir(outputs_dir)
    return scoring_replicate(ctx, rep, outputs_dir), outputs_dir


def _boots_first(ctx: EvalContext, rep: Replicate) -> bool:
    """Whether the replicate's first process is a function evaluator: no
    solution phase, or one the submission does not take (no `when` file)
    with no inputs to copy in."""
    if ctx.spec["evaluator"]["shape"] != "function":
        return False
    solution = ctx.spec["solution"]
    return not solution or not (_solution_inputs(ctx) or _takes_solution(solution, rep.submission_dir))


def _solution_inputs(ctx: EvalContext) -> str | None:
    """The folder of the hill the solution phase gets as its inputs, if any."""
    return _inputs_for(ctx.spec["solution"], ctx.split)


def _inputs_for(solution: dict[str, Any], split: str) -> str | None:
    inputs = solution["inputs"]
    return inputs.get(split) if inputs else None


def _takes_solution(solution: dict[str, Any], snapshot_dir: str) -> bool:
    """Whether the submission takes the solution phase: it holds the
    `when` file (or the phase has none)."""
    when = solution["when"]
    return not when or os.path.lexists(os.path.join(snapshot_dir, when))


def _replicate(ctx: EvalContext, index: int, filled: bool = True) -> Replicate:
    """A fresh copy of the snapshot for replicate `index`, and its
    environment; its folder left empty, to be filled later, unless `filled`."""
    from . import seeds

    tag = "" if ctx.repeat == 1 else f"-{index}"
    seed, secret = seeds.replicate_seed(ctx.spec, ctx.seed_key, index), seeds.secret_seed(ctx.seed_key, index)
    submission_dir = _fresh(os.path.join(ctx.run_dir, "submission" + tag))
    if filled:
        state.copy_tree(ctx.source_dir, submission_dir, symlinks=True)
    else:
        os.mkdir(submission_dir)
    config = ctx.confinement.submission_config(submission_dir, _fresh(os.path.join(ctx.run_dir, "scratch" + tag)))
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


def _finish(plan: EvalPlan, envelope: Report, start: dict[str, Any] | None = None) -> None:
    """Sign, append to the attempts log, and note official reports. The
    line names the eval's `started` entry ({seq, mac}), or null when it
    stopped before one was logged."""
    hill = plan.hill
    envelope.pop("signature", None)
    # Names from the submission and text from the evaluator may hold lone
    # surrogates; the report is UTF-8, so they become visible escapes.
    cleaned = signing.clean_text(envelope)
    plain: Any = envelope  # emptied and refilled in place: the callers hold this dict
    plain.clear()
    plain.update(cleaned)
    envelope["signer"] = plan.key.fingerprint
    envelope["signature"] = signing.sign(envelope, plan.key)
    path = attempts_path(hill.name, plan.log_tree, hill.path)
    entry = chain.append(path, {"report": envelope, "start": start}, plan.key)
    run_dir = os.path.join(state.runs_dir(hill.name), envelope["run_id"])
    if os.path.isdir(run_dir):
        state.atomic_write(os.path.join(run_dir, "report.json"), json.dumps(envelope, indent=2) + "\n")
    if envelope["official"] and plan.head:
        note = json.dumps({"report": envelope, "attempt": {"seq": entry["seq"], "mac": entry["mac"]}},
                          sort_keys=True, separators=(",", ":"))
        with state.file_lock(os.path.join(hill.repo.git_dir, "hills-notes.lock")):
            hill.repo.append_note(NOTES_REF, plan.head, note)
        if envelope.get("status") in ("passing", "failing", "implausible"):
            from ..many import rescore

            # Kept by content hash, for `hills rescore` against a later version.
            rescore.keep(os.path.join(run_dir, "source"), envelope)
