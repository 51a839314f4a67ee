"""Hermetic fixtures: every test gets its own machine state, HOME and git
config, pinned git identities and dates (so object ids can be compared), and
two ways to run hills: in-process through the error funnel, or as the real
executables from the checkout's bin/. The helpers live in the package
tests/testing/ (`from testing.util import run_cli`); the fixtures here."""

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from testing.home_guard import install_session_guard

# Installed first, while HOME is still the real one: every write this
# process makes under the real HOME, and every child sent there by its
# environment, fails the test it happened in (tests/testing/home_guard.py).
# A cache dir the caller chose (UV_CACHE_DIR, HILLS_TEST_CACHE) is theirs.
HOME_GUARD = install_session_guard(Path(__file__).resolve().parent.parent,
                                   [os.environ.get("UV_CACHE_DIR", ""), os.environ.get("HILLS_TEST_CACHE", "")])

# Set before any test module is imported: what runs while tests are being
# collected (skipif conditions, module constants) must not reach the user's
# HOME or machine state either. Each test then gets a machine of its own.
SESSION_ROOT = Path(tempfile.mkdtemp(prefix="hills-tests-"))
for _name, _folder in (("HOME", "home"), ("HILLS_HOME", "hills-home")):
    os.environ[_name] = str(SESSION_ROOT / _folder)
os.environ["HILLS_WARM"] = "off"
(SESSION_ROOT / "home").mkdir()

from testing.util import MACHINE_WIDE, SPREAD, Machine, new_and_commit, write_python_shim  # noqa: E402 (after HOME is set)
from testing.warm_fixtures import warm_servers  # noqa: E402


def pytest_unconfigure(config):
    shutil.rmtree(SESSION_ROOT, ignore_errors=True)


def pytest_sessionfinish(session, exitstatus):
    """What was written under the real HOME outside any test (at collection,
    by a session fixture) fails the run too."""
    found = HOME_GUARD.take()
    if found:
        print("\nerror: the suite wrote under the real HOME:\n  " + "\n  ".join(found))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """With `--dist loadfile`, the unit of work is a module, the machine-wide
    modules together, or one test of a SPREAD module (testing.util says
    why)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Grouped(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            name = module.rsplit("/", 1)[-1]
            if name in SPREAD:
                return nodeid
            return "machine-wide" if name in MACHINE_WIDE else module

    return Grouped(config, log)


@pytest.fixture(autouse=True)
def real_home_untouched():
    """The test fails when it, a fixture it used, or what ran since the test
    before (collection, a module's fixtures) wrote under the real HOME or
    sent a child there."""
    yield
    found = HOME_GUARD.take()
    if found:
        pytest.fail("the test wrote under the real HOME:\n  " + "\n  ".join(found), pytrace=False)


@pytest.fixture(scope="session")
def python_bin(tmp_path_factory):
    """A folder holding only `python3`, this interpreter, so bin/hills (a
    `#!/usr/bin/env python3` script) runs where the dependencies are."""
    return write_python_shim(tmp_path_factory.mktemp("python-bin"))


@pytest.fixture(scope="session")
def uv_cache(tmp_path_factory):
    # uv's package cache holds no git state; sharing it only saves time.
    return tmp_path_factory.mktemp("uv-cache")


@pytest.fixture(autouse=True)
def hermetic(request, tmp_path, monkeypatch, python_bin, uv_cache):
    """The machine of this test: its own, unless the test uses a module-scoped
    shared hill, whose machine it then shares. The cwd is the machine's
    project folder, so no test can create a hill inside the checkout."""
    if "module_machine" in request.fixturenames:
        machine = request.getfixturevalue("module_machine")
    else:
        machine = Machine(tmp_path / "machine", python_bin, uv_cache)
    machine.apply(monkeypatch)
    monkeypatch.chdir(machine.project)
    return machine


@pytest.fixture(scope="session", autouse=True)
def buggy_examples_warn():
    """In-process, the gate's rule that a hill's example must not be buggy
    is off unless a test asks for it (`buggy_examples_fail`): the suite's
    hills, module-scoped ones among them, pair many an evaluator with the
    template's example, which it cannot score. The rule's own tests, and
    every `hills` run as a subprocess, hold to it."""
    from hills.checks import corpus

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(corpus, "BUGGY_EXAMPLE_FAILS", False)
        yield


@pytest.fixture
def buggy_examples_fail(monkeypatch):
    """The gate fails a hill whose example is buggy, as outside the suite."""
    from hills.checks import corpus

    monkeypatch.setattr(corpus, "BUGGY_EXAMPLE_FAILS", True)


@pytest.fixture
def project(hermetic):
    """The user's project folder (empty at first); the cwd of the test."""
    return hermetic.project


@pytest.fixture
def committed_hill(project):
    """`hills new circle-packing -t circle-packing`, committed once."""
    return new_and_commit()


@pytest.fixture(scope="module")
def module_machine(tmp_path_factory, python_bin, uv_cache):
    return Machine(tmp_path_factory.mktemp("machine"), python_bin, uv_cache)


@pytest.fixture(scope="module")
def shared_hill(module_machine):
    """A committed circle-packing hill shared by the tests of one module;
    tests using it must leave it as they found it."""
    with pytest.MonkeyPatch.context() as patch:
        module_machine.apply(patch)
        patch.chdir(module_machine.project)
        return new_and_commit()


@pytest.fixture
def warm(monkeypatch):
    """Warm servers on for this test, their sockets in a folder of its own
    (yielded); every process started with it is stopped and waited for after."""
    with warm_servers(monkeypatch) as folder:
        yield folder


@pytest.fixture
def short_temp(monkeypatch: pytest.MonkeyPatch):
    """A temporary folder of the test's own, short enough for the probe's unix socket."""
    folder = tempfile.mkdtemp(prefix="cr-")
    monkeypatch.setattr(tempfile, "tempdir", folder)
    monkeypatch.setenv("TMPDIR", folder)
    yield Path(folder)
    shutil.rmtree(folder, ignore_errors=True)
