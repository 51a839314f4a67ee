"""Dev runs for the climber: `hills run` runs the solution phase of a hill's
committed version on a submission through the eval's own pieces (its
run folder layout, environment, sandbox, caps and time limit), on the
public inputs alone, with nothing logged or signed and no run folder
kept; `hills env` hands out the locked environment an eval runs in
(docs/devrun.md)."""

from __future__ import annotations

import contextlib
import os

from ..base import state
from ..base.errors import NotScored, Refused, UsageError
from ..base.records import frozen
from ..disk import locks, uvenv
from . import folders, snapshot
from .env import sdk_path
from .evaluate import Resource, build_context
from .phases import replicate, run_solution
from .pinned import check_locks, checked_pin, copy_public, pinned_files, pinned_tree
from .plan import inputs_for, resolve
from .records import EvalRequest, quiet

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from typing import Any

    from ..disk.hill import Hill
    from .records import Say

# The prefix of a dev run's folder among the hill's run folders: a dot
# name, which pruning and `hills attempts` never take for an eval's.
RUN_PREFIX = ".devrun-"


@frozen
class DevRunRequest:
    """What the climber asked: run `submission` through the solution phase
    of `hill`'s committed version."""

    hill: Hill
    submission: str
    param_texts: tuple[str, ...] = ()  # -p NAME=VALUE, as given
    knobs: tuple[str, ...] | None = None  # -k NAME=VALUE, as given
    queue: bool = False
    stream: bool = True  # the solution's output streamed to stderr as it runs
    output: str | None = None  # where the declared outputs are copied, when given


@frozen
class Written:
    """A file the solution phase left in the snapshot: new or changed."""

    path: str
    size: int
    kind: str = "file"  # file, link or other


@frozen
class DevRun:
    """How a dev run went. `status` is `ok` (the phase ended well and the
    declared outputs are there: an eval would go on to score them),
    `buggy` (an eval would stop here, for `reason`) or `interrupted`."""

    hill: str
    tree_hash: str
    ran: bool  # False when the submission lacks the `when` file
    status: str
    reason: str | None
    exit_code: int | None
    duration_s: float
    isolation: str
    outputs: tuple[Written, ...]  # what the scoring phase would receive
    written: tuple[Written, ...]  # what the run added to or changed in the snapshot
    copied_to: str | None
    dirty: bool  # the hill has uncommitted changes; its last commit ran
    caps_hit: tuple[dict[str, Any], ...] = ()  # as the report's isolation.caps_hit
    when: str | None = None  # hill.yaml solution.when: the file that makes the phase run

    def as_dict(self) -> dict[str, Any]:
        """The JSON of `hills run --json` (hills-run(1), OUTPUT)."""
        return {"hill": self.hill, "tree_hash": self.tree_hash, "ran": self.ran, "status": self.status,
                "reason": self.reason, "exit_code": self.exit_code, "duration_s": round(self.duration_s, 3),
                "isolation": self.isolation, "logged": False, "signed": False,
                "outputs": [{"path": item.path, "bytes": item.size} for item in self.outputs],
                "written": [{"path": item.path, "bytes": item.size, "kind": item.kind} for item in self.written],
                "copied_to": self.copied_to, "dirty": self.dirty, "caps_hit": [dict(hit) for hit in self.caps_hit]}


def no_solution_phase(name: str) -> UsageError:
    """The refusal of a dev run of a hill whose evaluator runs the
    submission itself: that evaluator has the held-out data in sight, so
    only a logged eval may start it."""
    return UsageError(f"hill '{name}' has no solution phase (no 'solution:' in its hill.yaml): its evaluator "
                      "runs the submission itself, with the hill's data in sight, so only a logged eval may run it",
                      hint=f"run your code in the hill's environment yourself ('hills env {name}' prints its "
                           f"interpreter), or score it with 'hills eval DIR -H {name}'")


def public_inputs(solution: Mapping[str, Any], name: str) -> None:
    """Refuse a hill whose validation inputs lie in private/: a dev run
    hands submitted code public inputs only, and shows all it writes."""
    inputs = inputs_for(dict(solution), "validation")
    if inputs is None:
        return
    parts = os.path.normpath(inputs).split(os.sep)
    if parts[0] == locks.PRIVATE_DIR:
        raise UsageError(f"hill '{name}' gives its solution phase inputs from private/ (hill.yaml "
                         f"solution.inputs.validation: '{inputs}'): a dev run gets public inputs only",
                         hint=f"score the submission with 'hills eval DIR -H {name}'")


def check_output_folder(path: str) -> None:
    """`-o DIR` must be a folder that does not exist yet or is empty: a dev
    run never writes over what is there."""
    if os.path.lexists(path) and not (os.path.isdir(path) and not os.path.islink(path) and not os.listdir(path)):
        raise UsageError(f"--output '{path}' exists and is not an empty folder",
                         hint="name a new folder (or an empty one) for the outputs")


@contextlib.contextmanager
def dev_run_dir(hill_name: str) -> Iterator[str]:
    """A run folder where evals make theirs, under a dot name, removed after
    with the runs folder when this run made it: a dev run leaves none."""
    with folders.hidden_run_dir(hill_name, RUN_PREFIX) as run_dir:
        yield run_dir


def dev_run(req: DevRunRequest, say: Say = quiet) -> DevRun:
    """Run the solution phase once on `req.submission`, as the first
    replicate of an eval of the hill's committed version runs it, on the
    validation split's inputs; the hill's own private/ is neither linked
    into the run folder nor in sight of its `solution.generate`. Refusals
    (no commits, a bad param or knob, no sandbox, no solution phase,
    inputs in private/) raise a HillsError before anything runs."""
    hill = req.hill
    plan = resolve(EvalRequest(hill=hill, submission=req.submission, param_texts=req.param_texts, force=True,
                               queue=req.queue, verbose=req.stream, knobs=req.knobs))
    spec, tree_hash = plan.spec, plan.tree_hash
    assert tree_hash is not None  # resolve() refused a hill without commits
    solution = spec["solution"]
    if not solution:
        raise no_solution_phase(hill.name)
    public_inputs(solution, hill.name)
    if req.output is not None:
        check_output_folder(req.output)
    withheld = (os.path.join(hill.path, locks.PRIVATE_DIR),) if os.path.isdir(
        os.path.join(hill.path, locks.PRIVATE_DIR)) else ()
    with dev_run_dir(hill.name) as run_dir, state.write_errors_as_problems(run_dir):
        pristine, expected = checked_pin(plan, locks.StatCache(hill.path))
        copy_public(hill, os.path.join(run_dir, "hill"), pristine, expected)
        source_dir = os.path.join(run_dir, "source")
        snapshot.snapshot(req.submission, source_dir)
        ctx = build_context(plan, run_dir, expected, say, withheld=withheld)
        try:
            rep = replicate(ctx, 0)
            with Resource(spec["exclusive"], req.queue, say):
                phase, failed = run_solution(ctx, rep)
        finally:
            ctx.confinement.close()
        caps_hit = tuple(ctx.confinement.record()["caps_hit"])
        outputs = _listing(phase.outputs_dir) if phase.outputs_dir is not None else ()
        written = _written(source_dir, rep.submission_dir)
        copied = None
        if req.output is not None and phase.outputs_dir is not None:
            os.makedirs(req.output, exist_ok=True)
            state.copy_tree(phase.outputs_dir, req.output, into=True)
            copied = os.path.abspath(req.output)
    process = phase.process
    return DevRun(hill=hill.name, tree_hash=tree_hash, ran=phase.ran,
                  status="ok" if failed is None else ("interrupted" if failed.status == "interrupted" else "buggy"),
                  reason=None if failed is None else _reason(failed.reason, run_dir),
                  exit_code=process.exit_code if process is not None else None,
                  duration_s=process.duration_s if process is not None else 0.0,
                  isolation=ctx.confinement.level, outputs=outputs, written=written, copied_to=copied,
                  dirty=plan.forced, caps_hit=caps_hit, when=solution["when"])


def _reason(reason: str | None, run_dir: str) -> str | None:
    """An eval's reason, less its pointer into the run folder, which a dev
    run removes (its output was streamed instead)."""
    if reason is None:
        return None
    return reason.split(f" in {run_dir}")[0].rsplit("; see ", 1)[0]


def _listing(folder: str) -> tuple[Written, ...]:
    """Every entry under `folder`, by relative path, never through a link."""
    found: list[Written] = []
    for current, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files) + [d for d in dirs if os.path.islink(os.path.join(current, d))]:
            path = os.path.join(current, name)
            found.append(_entry(os.path.relpath(path, folder), path))
    return tuple(sorted(found, key=lambda item: item.path))


def _entry(rel: str, path: str) -> Written:
    import stat

    info = os.lstat(path)
    kind = "link" if stat.S_ISLNK(info.st_mode) else "file" if stat.S_ISREG(info.st_mode) else "other"
    return Written(rel, info.st_size, kind)


# Names in the snapshot that hills put there, not the solution: the
# split's inputs, and the command layout's links to the hill.
_PUT_BY_HILLS = ("inputs", "problem", "data")


def _written(source_dir: str, snapshot_dir: str) -> tuple[Written, ...]:
    """What the solution phase added to its snapshot or changed in it,
    compared with the submission as it was taken in."""
    changed = []
    for item in _listing(snapshot_dir):
        if item.path.split(os.sep)[0] in _PUT_BY_HILLS:
            continue
        before = os.path.join(source_dir, item.path)
        if os.path.lexists(before) and item.kind == "file" and not os.path.islink(before) \
                and _same_bytes(before, os.path.join(snapshot_dir, item.path)):
            continue
        changed.append(item)
    return tuple(changed)


def _same_bytes(first: str, second: str) -> bool:
    if os.path.getsize(first) != os.path.getsize(second):
        return False
    with open(first, "rb") as one, open(os.open(second, os.O_RDONLY | os.O_NOFOLLOW), "rb") as other:
        while True:
            chunk = one.read(1 << 20)
            if chunk != other.read(1 << 20):
                return False
            if not chunk:
                return True


@frozen
class LockedEnv:
    """The environment an eval of a hill's committed version runs in: its
    interpreter, its folder, the sdk folder its PYTHONPATH holds (`from
    hills import sdk, spaces`), and whether this call built it."""

    hill: str
    tree_hash: str
    python: str
    env_dir: str
    sdk_dir: str
    built: bool
    dirty: bool

    def variables(self, path: str) -> dict[str, str]:
        """The variables that make a shell use it, `path` the PATH they extend.
        No bytecode is written: a file added to the environment breaks its
        seal, and the next eval builds it again. Not PYTHONPATH: the sdk
        folder's small `hills` package would hide hills' own from every
        `hills` command started in that shell."""
        return {"VIRTUAL_ENV": self.env_dir, "PATH": os.pathsep.join([os.path.join(self.env_dir, "bin"), path]),
                "PYTHONDONTWRITEBYTECODE": "1"}

    def as_dict(self) -> dict[str, Any]:
        """The JSON of `hills env --json` (hills-env(1), OUTPUT)."""
        return {"hill": self.hill, "tree_hash": self.tree_hash, "python": self.python, "env_dir": self.env_dir,
                "sdk_dir": self.sdk_dir, "built": self.built, "dirty": self.dirty,
                "variables": self.variables("$PATH")}


def locked_env(hill: Hill, say: Say = quiet) -> LockedEnv:
    """The environment of the hill's committed version (HEAD), as an eval
    finds it: reused while its seal holds, else built (or built again) from
    the committed files, as the next eval would, with `say` for progress."""
    head = hill.repo.head()
    if head is None:
        raise NotScored(f"hill '{hill.name}' has no commits yet: it has no locked environment",
                        hint=f"freeze it first: hills commit {hill.name} -m MESSAGE")
    tree_hash = pinned_tree(hill, head)
    python = uvenv.ready(hill.name, tree_hash)
    built = python is None
    if python is None:
        pristine, expected = pinned_files(hill, head, tree_hash)
        try:
            check_locks(hill, expected, locks.StatCache(hill.path))
        except Refused as exc:
            raise NotScored(exc.message, hint=exc.hint) from None
        with dev_run_dir(hill.name) as work:
            source = os.path.join(work, "hill")
            copy_public(hill, source, pristine, expected)
            python = uvenv.ensure(hill.name, tree_hash, source, say=say)
    from .plan import is_dirty

    return LockedEnv(hill=hill.name, tree_hash=tree_hash, python=python,
                     env_dir=os.path.dirname(os.path.dirname(python)), sdk_dir=sdk_path(say), built=built,
                     dirty=bool(is_dirty(hill, tree_hash)))


def env_paths(name: str, tree_hash: str | None) -> tuple[str, bool] | None:
    """(interpreter path, whether it is built) of a committed version's
    environment, without checking its seal (`hills describe`)."""
    if tree_hash is None:
        return None
    env_dir = uvenv.env_path(name, tree_hash)
    return uvenv.python_of(env_dir), os.path.isfile(os.path.join(env_dir, uvenv.MARKER))

