"""The standby evaluator (docs/standby.md): an eval's evaluator process,
started in a warm server's spare before the call it expects, and adopted by
that call's eval only where the eval's plan, resolved again, fits it."""

from __future__ import annotations

import contextlib
import json
import os
import shutil

from ..base import state
from ..base.errors import HillsError
from ..disk import locks, uvenv
from . import runner, sandbox
from .env import sdk_path
from .evaluate import build_context, open_run
from .phases import function_call, intake_folders, replicate
from .pinned import checked_pin
from .plan import resolve, takes_in_while_booting
from .records import quiet

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

    from .records import EvalContext, EvalPlan, EvalRequest, Locks, Replicate

class Standby:
    """A run folder held in use, the eval context and first replicate made
    for it (folders empty), and the evaluator started in it, gated."""

    def __init__(self, fit: tuple[Any, ...], pristine: str, expected: Locks, ctx: EvalContext,
                 rep: Replicate, scored: Replicate, outputs_dir: str | None,
                 started: runner.Started, lock: contextlib.ExitStack) -> None:
        self.fit, self.pristine, self.expected, self.ctx = fit, pristine, expected, ctx
        self.rep, self.scored, self.outputs_dir = rep, scored, outputs_dir
        self._started: runner.Started | None = started
        self._lock: contextlib.ExitStack | None = lock
        self.used = False  # its eval took its process
        self._offered = False  # an eval was handed it: a later one starts its own

    @contextlib.contextmanager
    def in_use(self) -> Iterator[bool]:
        """The run folder's in-use lock, held since the standby was made,
        released as the eval's own would be."""
        try:
            yield True
        finally:
            self._release()

    def alive(self) -> bool:
        """Whether its process still waits (one ended meanwhile, killed say,
        would make its eval look buggy)."""
        return self._started is not None and self._started.process.poll() is None

    def take(self) -> runner.Started:
        """The process, for the eval to finish; the standby no longer ends it."""
        assert self._started is not None, "a standby's process is taken once"
        started, self._started = self._started, None
        self.used = True
        return started

    def discard(self, keep_folder: bool = False) -> None:
        """End what the eval did not take: the process (without its key),
        the confinement's cgroup, the lock, and, unless `keep_folder` (the
        eval logged in it), the run folder."""
        if self._started is not None:
            self._started.discard()
            self._started = None
            self.ctx.confinement.close()
            if not keep_folder:
                shutil.rmtree(self.ctx.run_dir, ignore_errors=True)
        self._release()

    def adopt(self, plan: EvalPlan) -> Standby | None:
        """This standby, handed to the eval of `plan`, when the plan fits it
        (docs/standby.md, "The threat it must not open"); else None, and
        the standby is ended and its run folder removed. Only once: a later
        eval starts its own."""
        if self._offered:
            return None
        self._offered = True
        try:
            fits = _refit(plan, self)
        except Exception:  # whatever the eval will meet, it meets in its own run folder
            fits = False
        if not fits:
            self.discard()
            return None
        return self

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None


def reserve(req: EvalRequest) -> Standby | None:
    """A standby for `req`: None where one cannot be made or would not be
    used (docs/standby.md, "Moving parts"). A refusal the eval itself would
    meet (a log that takes no entry, drifted data) is left for it to meet."""
    plan = resolve(req)
    spec = plan.spec
    if req.verbose or spec["exclusive"] or not takes_in_while_booting(plan, True):
        return None
    assert plan.tree_hash is not None
    python = uvenv.ready(plan.hill.name, plan.tree_hash)
    if python is None:
        return None
    try:
        run_dir = open_run(plan)
    except HillsError:
        return None
    lock = contextlib.ExitStack()
    ctx = None
    try:
        lock.enter_context(state.file_lock(os.path.join(run_dir, ".in-use")))
        pristine, expected = checked_pin(plan, locks.StatCache(plan.hill.path))
        os.mkdir(os.path.join(run_dir, "hill"))
        ctx = build_context(plan, run_dir, expected, quiet, python=python)
        rep = replicate(ctx, 0, filled=False)
        scored, outputs_dir = intake_folders(ctx, rep)
        argv, env = function_call(ctx, scored)
        started = runner.start(argv, cwd=ctx.run_dir, env=env, stdout_path=os.path.join(run_dir, "stdout.log"),
                               stderr_path=os.path.join(run_dir, "stderr.log"), result_pipe=True,
                               own_pid_namespace=ctx.confinement.level == sandbox.LEVEL_BWRAP, gated=True,
                               hold_signals=False)
    except BaseException:
        if ctx is not None:
            ctx.confinement.close()
        lock.close()
        shutil.rmtree(run_dir, ignore_errors=True)
        raise
    return Standby(_fit(plan, expected, python, ctx.sdk_dir), pristine, expected, ctx, rep, scored, outputs_dir,
                   started, lock)


def _refit(plan: EvalPlan, held: Standby) -> bool:
    """Whether the plan, resolved for this call, is the standby's, whose
    process still waits: the same version, manifest, params and machine
    state, the hill's data still matching the same lock entries, the same
    intact environment and SDK, and the same folders hidden."""
    if not held.alive() or plan.tree_hash is None or not takes_in_while_booting(plan, True):
        return False
    _, expected = checked_pin(plan, locks.StatCache(plan.hill.path))
    python = uvenv.ready(plan.hill.name, plan.tree_hash)
    if python is None:
        return False
    return _fit(plan, expected, python, sdk_path()) == held.fit


def _fit(plan: EvalPlan, expected: Locks, python: str, sdk_dir: str) -> tuple[Any, ...]:
    """What a standby's process depends on, of an eval's plan."""
    req = plan.request

    def text(value: object) -> str:
        return json.dumps(value, sort_keys=True, default=repr)

    level = sandbox.level_for(plan.spec)
    return (plan.hill.name, os.path.realpath(plan.hill.path), plan.head, plan.tree_hash, plan.log_tree,
            text(plan.spec), text(plan.params), text(plan.trial), plan.repeat, plan.official, plan.forced,
            req.final, req.verbose, req.queue, req.current, state.home(), plan.key.fingerprint, text(expected),
            python, sdk_dir, level, text(sandbox.private_elsewhere(plan.hill.path) if level == sandbox.LEVEL_BWRAP
                                           else []))
