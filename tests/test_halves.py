"""Work shared with a forked child (hills.base.halves, D-351): the results
of the sequential loop, in its order, half of them worked in the child;
the caller does a failed child's half itself, and stops its child when it
is itself stopped."""

import os
import time

import pytest

from hills.base import halves
from hills.run import runner


@pytest.fixture
def two_cores(monkeypatch):
    monkeypatch.setattr(halves, "cores", lambda: 2)


def worked(item):
    return [item * item, os.getpid()]


def test_the_results_are_the_loops_in_order_half_from_a_child(two_cores):
    items = list(range(7))
    results = halves.shared(items, worked)
    assert [square for square, _ in results] == [item * item for item in items]
    pids = [pid for _, pid in results]
    assert pids[0::2] == [os.getpid()] * 4
    assert len(set(pids[1::2])) == 1 and pids[1] != os.getpid()  # the child did every other one
    assert pids[1] not in runner._children()  # and was reaped


def test_one_core_or_one_item_forks_nothing(monkeypatch):
    monkeypatch.setattr(halves, "cores", lambda: 1)
    assert [pid for _, pid in halves.shared(range(4), worked)] == [os.getpid()] * 4
    monkeypatch.setattr(halves, "cores", lambda: 2)
    assert halves.shared([3], worked) == [[9, os.getpid()]]
    assert halves.shared([], worked) == []


def test_a_child_that_fails_leaves_its_half_to_the_caller(two_cores):
    caller = os.getpid()

    def failing_in_a_child(item):
        if os.getpid() != caller:
            raise RuntimeError("the child's bug")
        return item + 1

    assert halves.shared(list(range(5)), failing_in_a_child) == [1, 2, 3, 4, 5]


def test_a_result_json_cannot_carry_is_worked_again_here(two_cores):
    caller = os.getpid()

    def unsendable_in_a_child(item):
        return object() if os.getpid() != caller else item

    assert halves.shared([10, 11, 12], unsendable_in_a_child) == [10, 11, 12]


def test_a_stopped_caller_stops_its_child(two_cores, tmp_path):
    marker = tmp_path / "child.pid"
    before = runner._children()

    def slow(item):
        if item == 1:  # the child's: it says it started, then works for a minute
            marker.write_text(str(os.getpid()))
            time.sleep(60)
            return item
        while not marker.exists():  # the caller's: stopped once the child runs
            time.sleep(0.01)
        raise KeyboardInterrupt

    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        halves.shared([0, 1], slow)
    child = int(marker.read_text())
    assert child != os.getpid()
    assert time.monotonic() - started < 30  # not the child's minute
    assert runner._children() == before  # reaped, not left running
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)


def test_another_thread_keeps_the_work_here(two_cores):
    """A fork with another thread running would strand the locks it holds
    (an import under way): the caller then does it all itself."""
    import threading

    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        assert not halves.alone_here()
        assert [pid for _, pid in halves.shared(range(4), worked)] == [os.getpid()] * 4
    finally:
        release.set()
        other.join()
    assert halves.alone_here()
    assert os.getpid() not in [pid for _, pid in halves.shared(range(4), worked)][1::2]
