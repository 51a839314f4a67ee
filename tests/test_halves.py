"""Work shared with a forked child (hills.base.halves, D-351): the results
of the sequential loop, in its order, half of them worked in the child;
the caller does a failed child's half itself, stops its child when it is
itself stopped, and forks nothing while another thread runs. Each case
runs in a fresh process of one thread, as `hills check` is (a test
runner's own process may hold threads of its own)."""

import json
import os
import subprocess
import sys

import pytest

from hills.base import halves

PRELUDE = """\
import json, os, sys, time
from hills.base import halves
halves.cores = lambda: 2

def worked(item):
    return [item * item, os.getpid()]

def show(value):
    print(json.dumps(value))
"""


def fresh(body: str) -> list:
    """What `body` shows (one JSON value a line), run after PRELUDE in a new interpreter."""
    done = subprocess.run([sys.executable, "-c", PRELUDE + body], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_the_results_are_the_loops_in_order_half_from_a_child():
    [(caller, alone, results)] = fresh(
        "show([os.getpid(), halves.alone_here(), halves.shared(list(range(7)), worked)])")
    assert alone  # the precondition: one thread, so the child is forked
    assert [square for square, _ in results] == [item * item for item in range(7)]
    pids = [pid for _, pid in results]
    assert pids[0::2] == [caller] * 4
    assert len(set(pids[1::2])) == 1 and pids[1] != caller  # the child did every other one


def test_one_core_or_one_item_forks_nothing():
    [(caller, one_core, one_item, none)] = fresh(
        "halves.cores = lambda: 1\none = halves.shared(range(4), worked)\nhalves.cores = lambda: 2\n"
        "show([os.getpid(), one, halves.shared([3], worked), halves.shared([], worked)])")
    assert [pid for _, pid in one_core] == [caller] * 4
    assert one_item == [[9, caller]] and none == []


def test_a_child_that_fails_leaves_its_half_to_the_caller():
    [(alone, results)] = fresh(
        "caller = os.getpid()\n"
        "def failing(item):\n"
        "    if os.getpid() != caller:\n"
        "        raise RuntimeError(\"the child's bug\")\n"
        "    return item + 1\n"
        "show([halves.alone_here(), halves.shared(list(range(5)), failing)])")
    assert alone and results == [1, 2, 3, 4, 5]


def test_a_result_json_cannot_carry_is_worked_again_here():
    [(alone, results)] = fresh(
        "caller = os.getpid()\n"
        "def unsendable(item):\n"
        "    return object() if os.getpid() != caller else item\n"
        "show([halves.alone_here(), halves.shared([10, 11, 12], unsendable)])")
    assert alone and results == [10, 11, 12]


def test_a_stopped_caller_stops_its_child(tmp_path):
    marker = tmp_path / "child.pid"
    [(alone, stopped, child, children, elapsed)] = fresh(
        f"marker = {str(marker)!r}\n"
        "def slow(item):\n"
        "    if item == 1:  # the child's: it says it started, then works for a minute\n"
        "        open(marker, 'w').write(str(os.getpid()))\n"
        "        time.sleep(60)\n"
        "        return item\n"
        "    deadline = time.monotonic() + 30\n"
        "    while not os.path.exists(marker) and time.monotonic() < deadline:  # the caller's: stopped then\n"
        "        time.sleep(0.01)\n"
        "    raise KeyboardInterrupt\n"
        "alone, started = halves.alone_here(), time.monotonic()\n"
        "try:\n"
        "    halves.shared([0, 1], slow)\n"
        "    stopped = False\n"
        "except KeyboardInterrupt:\n"
        "    stopped = True\n"
        "children = open(f'/proc/{os.getpid()}/task/{os.getpid()}/children').read().split()\n"
        "show([alone, stopped, int(open(marker).read()), children, time.monotonic() - started])")
    assert alone and stopped
    assert children == []  # reaped, not left running
    assert elapsed < 30  # ended, not waited for through its minute
    try:
        os.kill(child, 0)
        alive = True
    except ProcessLookupError:
        alive = False
    assert not alive


def test_another_thread_keeps_the_work_here():
    """A fork with another thread running would strand the locks it holds
    (an import under way): the caller then does it all itself."""
    [(caller, alone, results, after, later)] = fresh(
        "import threading\n"
        "release = threading.Event()\n"
        "other = threading.Thread(target=release.wait)\n"
        "other.start()\n"
        "alone, results = halves.alone_here(), halves.shared(range(4), worked)\n"
        "release.set()\n"
        "other.join()\n"
        "deadline = time.monotonic() + 10  # the kernel lets the thread go a moment after join() returns\n"
        "while not halves.alone_here() and time.monotonic() < deadline:\n"
        "    time.sleep(0.01)\n"
        "show([os.getpid(), alone, results, halves.alone_here(), halves.shared(range(4), worked)])")
    assert not alone and [pid for _, pid in results] == [caller] * 4
    assert after and caller not in [pid for _, pid in later][1::2]


def test_a_librarys_own_threads_keep_the_work_here(tmp_path):
    """blake3 hashes a large file on a pool of threads of its own, which
    Python's threading does not see: a child forked then would wait for
    them for ever, so the caller does it all itself."""
    if halves.cores() < 2:
        pytest.skip("blake3 keeps no pool of threads on one core")
    big = tmp_path / "big"
    big.write_bytes(os.urandom(1 << 20) * 64)
    [(caller, python_threads, tasks, alone, results)] = fresh(
        "import blake3, threading\n"
        "hasher = blake3.blake3(max_threads=blake3.blake3.AUTO)\n"
        f"hasher.update_mmap({str(big)!r})\n"
        "show([os.getpid(), threading.active_count(), len(os.listdir('/proc/self/task')), halves.alone_here(),"
        " halves.shared(range(4), worked)])")
    assert python_threads == 1 and tasks > 1  # the precondition: a pool Python's threading does not count
    assert not alone and [pid for _, pid in results] == [caller] * 4

