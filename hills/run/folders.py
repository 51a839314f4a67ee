"""The run folders of a hill: a new one per eval, the oldest pruned (never
one in use), and a fresh path in one, with nothing at it."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator

from ..base import state
from ..base.errors import EnvironmentProblem


KEEP_RUNS = 20


def run_id() -> str:
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + os.urandom(4).hex()


def fresh(path: str) -> str:
    """`path` with nothing at it: an earlier evaluator process of this run
    may have left a link there, and hills, unconfined, must not write
    through it (it would write anywhere the user can)."""
    if os.path.isdir(path) and not os.path.islink(path):
        import shutil

        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)
    return path


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


@contextlib.contextmanager
def hidden_run_dir(hill_name: str, prefix: str) -> Iterator[str]:
    """A run folder where the hill's evals make theirs, under a dot name
    (pruning and listings skip it), removed after, and the runs folder with
    it when this call made that: for the runs that leave no run folder (a
    dev run, the leak probe's eval)."""
    import shutil
    import tempfile

    with runs_root(hill_name) as root:
        run_dir = tempfile.mkdtemp(prefix=prefix, dir=root)
        try:
            yield run_dir
        finally:
            shutil.rmtree(run_dir, ignore_errors=True)


@contextlib.contextmanager
def runs_root(hill_name: str) -> Iterator[str]:
    """The hill's runs folder, made where it is missing and then removed
    after, if it is empty by then: there for the hidden run folders of
    evals that leave none (several at once, where the cheat corpus runs in
    two processes)."""
    root = state.runs_dir(hill_name)
    made_root = not os.path.isdir(root)
    os.makedirs(root, exist_ok=True)
    try:
        yield root
    finally:
        if made_root:
            with contextlib.suppress(OSError):
                os.rmdir(root)
