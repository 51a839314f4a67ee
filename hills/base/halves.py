"""Independent pieces of work shared with one forked child: the cheat
corpus's evals (hills.checks.corpus), each a sandboxed process of its own,
run two at a time on a machine with two cores or more (docs/decisions.md
D-351).

The child does every other piece and sends its results back as JSON
through a pipe; the caller does the rest and puts them in order. Nothing
about the work changes: each piece runs as it would alone, in a process
that is a copy of the caller's. What a piece changes in its process (a
counter, a cache in memory) stays in the child's copy, so only pieces
whose result is all that matters are shared this way.

Where the child cannot be forked, fails, or sends what cannot be read,
the caller does its pieces too: the results are the same, only later.
Nor is it forked while another thread runs in the caller (alone_here).
"""

from __future__ import annotations

import json
import os
import signal
import time

from .errors import leave_now

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

# How long a child asked to stop (SIGTERM) has before it is killed.
STOP_GRACE_S = 5.0


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def shared(items: Sequence[Any], work: Callable[[Any], Any]) -> list[Any]:
    """`[work(item) for item in items]`, every other item worked in a forked
    child where there are two items or more, two cores, and no other thread
    (alone_here); `work`'s results must survive a trip through JSON."""
    if len(items) < 2 or cores() < 2 or not alone_here():
        return [work(item) for item in items]
    theirs = list(range(1, len(items), 2))
    read_end, write_end = os.pipe()
    try:
        child = os.fork()
    except OSError:
        os.close(read_end)
        os.close(write_end)
        return [work(item) for item in items]
    if child == 0:
        os.close(read_end)
        _child(write_end, [items[index] for index in theirs], work)
    os.close(write_end)
    results: dict[int, Any] = {}
    try:
        for index in range(0, len(items), 2):
            results[index] = work(items[index])
        sent = _read_all(read_end)
        _, status = os.waitpid(child, 0)
        child = 0
    except BaseException:
        _stop(child)
        raise
    finally:
        os.close(read_end)
    answered = _answers(sent, len(theirs)) if os.waitstatus_to_exitcode(status) == 0 else None
    for position, index in enumerate(theirs):
        results[index] = answered[position] if answered is not None else work(items[index])
    return [results[index] for index in range(len(items))]


def alone_here() -> bool:
    """Whether this is the process's only thread, as the kernel counts
    them, so that a fork may go on running Python: a child gets every lock
    as it was, and one another thread held then (an import under way, a
    stream being written) is held for ever there; a library's own pool of
    threads (blake3's, for a large file) is gone in the child while the
    library still counts on it. With any other thread (the hill's tests
    being waited for, a library loading, such a pool), the work is done
    here instead."""
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:  # no /proc: Python's own threads are all it can tell
        import threading

        return threading.active_count() == 1


def _child(write_end: int, items: list[Any], work: Callable[[Any], Any]) -> None:
    """The child's half: its results on `write_end`, then its exit, never
    back into the caller's code (nor its output buffers or exit hooks)."""
    code = 1
    try:
        data = json.dumps([work(item) for item in items]).encode()
        view = memoryview(data)
        while view:
            view = view[os.write(write_end, view):]
        code = 0
    except BaseException:  # an interrupt, a bug: the caller does this half itself (or is stopping too)
        pass
    finally:
        leave_now(code)


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _answers(sent: bytes, count: int) -> list[Any] | None:
    try:
        answers = json.loads(sent)
    except ValueError:
        return None
    return answers if isinstance(answers, list) and len(answers) == count else None


def _stop(child: int) -> None:
    """End a child the caller no longer waits for: asked first (an eval in
    it ends its sandbox and removes its run folder), then killed."""
    if not child:
        return
    try:
        os.kill(child, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        deadline = time.monotonic() + STOP_GRACE_S
        while time.monotonic() < deadline:
            if os.waitpid(child, os.WNOHANG)[0]:
                return
            time.sleep(0.01)
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
    except (ChildProcessError, ProcessLookupError):
        pass  # reaped already
