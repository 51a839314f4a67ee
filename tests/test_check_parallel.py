"""`hills check` runs the hill's tests in a process of their own while the
isolation check, the leak probe and the cheat corpus run (D-352): the
confined checks' evals happen while the tests run (and, with the tests
run first and alone, they do not); the lines keep their order; a check
stopped in the confined checks ends the tests too."""

from pathlib import Path

import pytest

from testing.eval_fixtures import hills_home
from testing.util import needs_bwrap, run_cli
from hills.checks import check

pytestmark = [needs_bwrap, pytest.mark.usefixtures("short_temp")]

# A test of the hill's own that passes only if an eval of the confined
# checks (their run folders are `.probe-*`) starts while it runs.
WAITS_FOR_AN_EVAL = """\
import time
from pathlib import Path

def test_an_eval_of_the_confined_checks_starts_meanwhile():
    runs = Path({runs!r})
    deadline = time.monotonic() + {seconds}
    while time.monotonic() < deadline:
        if runs.is_dir() and any(path.name.startswith(".probe-") for path in runs.iterdir()):
            return
        time.sleep(0.01)
    raise AssertionError("no eval of the confined checks started while the tests ran")
"""

SLEEPS = """\
import time

def test_that_takes_a_minute():
    time.sleep(60)
"""


@pytest.fixture
def hill(project: Path) -> Path:
    created = run_cli("new", "overlap", "-t", "circle-packing")
    assert created.code == 0, created.output
    return Path(created.out.strip())


def with_test(hill: Path, text: str) -> None:
    (hill / "tests" / "test_overlap.py").write_text(text)


def statuses(results) -> dict[str, str]:
    return {result.name: result.status for result in results}


@pytest.mark.slow
def test_the_confined_checks_run_while_the_tests_run(hill: Path, monkeypatch: pytest.MonkeyPatch):
    runs = hills_home() / "runs" / "overlap"
    with_test(hill, WAITS_FOR_AN_EVAL.format(runs=str(runs), seconds=60))
    told: list[str] = []
    results = check.run_checks(str(hill), tell=lambda result: told.append(result.name))
    assert statuses(results)["tests"] == "ok", [(r.name, r.detail) for r in results]
    assert all(status == "ok" for status in statuses(results).values()), [(r.name, r.detail) for r in results]
    assert told == list(check.ORDER[:4]) + ["answer leak", "evaluator contract", "tests", "isolation",
                                            "leak probe", "cheat corpus"]
    # The control: the tests run to their end before anything else, as
    # they did before D-352, and the hill's test sees no eval start.
    original = check.RunningTests.__init__

    def to_the_end(self, python, hill_dir):
        original(self, python, hill_dir)
        self.process.wait()

    monkeypatch.setattr(check.RunningTests, "__init__", to_the_end)
    with_test(hill, WAITS_FOR_AN_EVAL.format(runs=str(runs), seconds=3))
    alone = check.run_checks(str(hill), fresh=True)
    tests = next(result for result in alone if result.name == "tests")
    assert tests.status == "fail" and "1 failed" in tests.detail, tests.detail


@pytest.mark.slow
def test_a_check_stopped_in_the_confined_checks_ends_the_tests(hill: Path, monkeypatch: pytest.MonkeyPatch):
    with_test(hill, SLEEPS)
    started: list[check.RunningTests] = []
    original = check.RunningTests.__init__

    def kept(self, python, hill_dir):
        original(self, python, hill_dir)
        started.append(self)

    def interrupted(*args, **kwargs):
        assert started and started[0].process.poll() is None  # the tests run as the check is stopped
        raise KeyboardInterrupt

    monkeypatch.setattr(check.RunningTests, "__init__", kept)
    monkeypatch.setattr(check, "isolation_check", interrupted)
    told: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        check.run_checks(str(hill), tell=lambda result: told.append(result.name))
    assert started[0].process.poll() is not None and started[0].process.returncode < 0  # killed, not done
    assert told[-1] == "evaluator contract"  # no line for the tests it ended, nor for what did not run
