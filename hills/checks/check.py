"""`hills check`: the checks a hill must pass before it can be committed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

from ..disk import uvenv
from .shared import Result, check_env, hill_python
from ..base.errors import HillsError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import threading
    from collections.abc import Callable, Mapping
    from typing import Any

SHIM = os.path.join(os.path.dirname(os.path.dirname(__file__)), "shim.py")
TEST_RUNNER = os.path.join(os.path.dirname(os.path.dirname(__file__)), "testrunner.py")
TEST_TIMEOUT = 600


def bind(python: str, hill_dir: str, entry: str, params: dict[str, Any]) -> dict[str, Any]:
    request = json.dumps({"hill_dir": hill_dir, "entry": entry, "params": params})
    env = check_env()
    done = subprocess.run([python, SHIM, "bind", request], cwd=hill_dir, stdin=subprocess.DEVNULL, env=env,
                          capture_output=True, text=True, timeout=120)
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"ok": False, "error": (done.stderr.strip() or "the shim printed nothing")[-500:]}


# The checks in the order run_checks runs them: the next one's name is
# what a progress line shows while it runs.
ORDER = ("manifest", "layout", "readme", "dependencies", "environment", "answer leak", "evaluator contract",
         "tests", "isolation", "leak probe", "cheat corpus")


class _Told(list["Result"]):
    """The results so far, each handed to `tell` as it is appended, so a
    caller prints a check's line the moment it finishes."""

    def __init__(self, tell: Callable[[Result], object] | None) -> None:
        super().__init__()
        self.tell = tell

    def append(self, result: Result) -> None:
        super().append(result)
        if self.tell is not None:
            self.tell(result)


def next_check(done: str) -> str | None:
    """The check that runs after the one named `done`, if any."""
    index = ORDER.index(done) + 1 if done in ORDER else len(ORDER)
    return ORDER[index] if index < len(ORDER) else None


def run_checks(hill_dir: str, tests: bool = True, tell: Callable[[Result], object] | None = None,
               say: Callable[[str], object] | None = None, fresh: bool = False) -> list[Result]:
    """Run every check in order; later checks are skipped once one fails that
    they depend on. Returns a list of Result; `tell` gets each as it finishes,
    and `say` (a progress line) how the build of the hill's environment goes.
    The leak probe's and the cheat corpus's passing results recorded for
    the same inputs are reused (hills.checks.recorded), unless `fresh`."""
    results: list[Result] = _Told(tell)
    name = os.path.basename(hill_dir)
    from ..disk import manifest  # not at import: a remembered gate needs no parser

    try:
        spec = manifest.load(hill_dir)
    except HillsError as exc:
        results.append(Result("manifest", "fail", exc.message))
        return results
    results.append(Result("manifest", "ok", f"{spec['name']} {spec['version']}"))
    from ..run import sandbox

    # Fail closed, as an eval does: no check of a hill whose evals would be
    # refused here (exit 4, the reason named), unless it says `sandbox: none`.
    sandbox.level_for(spec)

    problems: list[str] = []
    present: list[str] = []
    for required in ("README.md", "pyproject.toml"):
        (present if os.path.isfile(os.path.join(hill_dir, required)) else problems).append(required)
    shape = spec["evaluator"]["shape"]
    entry = spec["evaluator"]["entry"]
    if shape == "function":
        (present if os.path.isfile(os.path.join(hill_dir, entry)) else problems).append(entry)
    else:
        program = entry[0]
        local = os.path.join(hill_dir, program)
        if os.path.isfile(local) or ("/" not in program and shutil.which(program)):
            present.append(program)
        else:
            problems.append(program)
    examples = os.path.join(hill_dir, "examples")
    if not os.path.isdir(examples) or not [e for e in os.listdir(examples) if not e.startswith(".")]:
        problems.append("examples/ (at least one example submission)")
    if tests and not os.path.isdir(os.path.join(hill_dir, "tests")):
        problems.append("tests/")
    if problems:
        results.append(Result("layout", "fail", "missing: " + ", ".join(problems)))
        return results
    results.append(Result("layout", "ok", ", ".join(present)))
    results.append(readme_check(hill_dir))

    current, reason = uvenv.lock_is_current(hill_dir)
    if not current:
        results.append(Result("dependencies", "fail", reason))
        return results
    results.append(Result("dependencies", "ok", "uv.lock is up to date"))

    try:
        python = hill_python(name, hill_dir, say)
    except HillsError as exc:
        results.append(Result("environment", "fail", exc.message.splitlines()[0]))
        return results
    from . import leakscan

    # After the environment: what it installs is scanned too.
    results.append(leakscan.leak_check(hill_dir, env_dir=os.path.dirname(os.path.dirname(python))))

    infinite = infinite_failure(spec, hill_dir)
    if shape == "function":
        defaults = {key: param["default"] for key, param in spec["params"].items()}
        bound = bind(python, hill_dir, entry, defaults)
        if not bound.get("ok"):
            results.append(Result("evaluator contract", "fail", bound.get("error", "does not bind")))
            return results
        said = f"{bound['signature']} imports and binds"
    else:
        said = "command: " + " ".join(entry)
    results.append(Result("evaluator contract", "warn", f"{said}; {infinite}") if infinite
                   else Result("evaluator contract", "ok", said))

    if not tests:
        _confined_checks(spec, name, hill_dir, python, results, fresh)
        return results
    # The hill's tests run in a process of their own while the confined
    # checks run here (docs/decisions.md D-352): the lines still come in
    # ORDER, each as soon as it and every line before it are done.
    running = RunningTests(python, hill_dir)
    after = _AfterTests(results)
    waiter = running.told_to(after)
    try:
        _confined_checks(spec, name, hill_dir, python, after, fresh)
    except BaseException:  # an error or Ctrl-C here ends the tests too
        running.kill()
        raise
    finally:
        waiter.join()
    return results


def _confined_checks(spec: Mapping[str, Any], name: str, hill_dir: str, python: str, results: Any,
                     fresh: bool) -> None:
    """The isolation check, then the leak probe and the cheat corpus, their
    results appended to `results`."""
    isolation = isolation_check(spec, name, hill_dir, python)
    results.append(isolation)
    if isolation.status != "fail":  # a hill whose evals cannot start has nothing to probe
        _probe_and_corpus(spec, name, hill_dir, python, results, fresh)


class _AfterTests:
    """The results that come after the tests' in ORDER: held until the
    tests' result is appended, then appended as they come."""

    def __init__(self, results: list[Result]) -> None:
        import threading

        self.results, self.tests_done = results, False
        self.held: list[Result] = []
        self.lock = threading.Lock()

    def append(self, result: Result) -> None:
        with self.lock:
            (self.results if self.tests_done else self.held).append(result)

    def tests(self, result: Result) -> None:
        with self.lock:
            self.results.append(result)
            for held in self.held:
                self.results.append(held)
            self.held, self.tests_done = [], True


def _probe_and_corpus(spec: Mapping[str, Any], name: str, hill_dir: str, python: str, results: list[Result],
                      fresh: bool) -> None:
    """The leak probe's and the cheat corpus's results, appended to
    `results`: those recorded for the same inputs, the others run and
    recorded when they pass and nothing they read moved while they ran."""
    from ..disk import locks
    from . import corpus, probe, recorded

    cache = locks.StatCache(hill_dir)
    before = recorded.key(hill_dir, python, cache)
    found = {} if fresh else recorded.lookup(hill_dir, before)
    ran: list[Result] = []
    for check_name, run in ((probe.NAME, lambda: probe.leak_probe(spec, name, hill_dir, python)),
                            (corpus.NAME, lambda: corpus.cheat_corpus(spec, name, hill_dir))):
        result = found.get(check_name)
        if result is None:
            result = run()
            ran.append(result)
        results.append(result)
    if ran and before is not None and recorded.key(hill_dir, python, cache) == before:
        recorded.record(hill_dir, before, ran)
    cache.save()


# An infinity spelled in Python or JSON: a failing result of a `min` metric
# given one is buggy (a report holds finite numbers only), not failing.
INFINITY_RE = re.compile(r"""float\(\s*['"][+-]?inf(inity)?['"]\s*\)|\b(math|np|numpy|torch)\.inf\b|"""
                         r"""-?\bInfinity\b""", re.IGNORECASE)


def infinite_failure(spec: Mapping[str, Any], hill_dir: str) -> str | None:
    """What the evaluator-contract check says of a hill with a `min` metric
    whose evaluator's source writes an infinity (the worst score one might
    give a failing result), or None: the file, the line and the fix."""
    names = [metric["name"] for metric in spec.get("metrics") or [] if metric.get("direction") == "min"]
    if not names:
        return None
    entry = spec["evaluator"]["entry"]
    sources = [entry] if isinstance(entry, str) else [arg for arg in entry if not arg.startswith("-")]
    for relative in sources:
        # A command runs in the submission's copy, where ./problem is the hill.
        path = os.path.join(hill_dir, relative[len("problem/"):] if relative.startswith("problem/") else relative)
        if not os.path.isfile(path) or os.path.islink(path):
            continue
        for found in _infinite_lines(path, hill_dir):
            return (f"{found} writes an infinity: a failing result of min metric '{names[0]}' needs a finite "
                    f"value (an infinite one makes the eval buggy, not failing); give the worst finite score "
                    f"instead, such as a large penalty")
    return None


def _infinite_lines(path: str, hill_dir: str) -> list[str]:
    """`FILE:LINE` of each line of the evaluator's file, and of the hill's
    Python files it names (a verifier.sh that runs score.py), that spells
    an infinity."""
    found: list[str] = []
    files = [path]
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read(1024 * 1024)
    except OSError:
        return found
    for named in re.findall(r"[\w./-]+\.py\b", text) if not path.endswith(".py") else []:
        for candidate in (os.path.join(hill_dir, named), os.path.join(hill_dir, os.path.basename(named))):
            if os.path.isfile(candidate) and candidate not in files:
                files.append(candidate)
                break
    for each in files:
        try:
            with open(each, encoding="utf-8", errors="replace") as handle:
                lines = handle.read(1024 * 1024).splitlines()
        except OSError:
            continue
        for number, line in enumerate(lines, 1):
            if INFINITY_RE.search(line.split("#", 1)[0]):
                found.append(f"{os.path.relpath(each, hill_dir)}:{number}")
    return found


# The first words of the note to the hill's author in the default
# template's README.md; a hill committed with it would hand the climber
# instructions meant for the author, and no task.
AUTHOR_NOTE = "For the hill's author:"


def readme_check(hill_dir: str) -> Result:
    """A failure, which does not stop the checks after it, while README.md
    still holds the template's note to the hill's author."""
    try:
        with open(os.path.join(hill_dir, "README.md"), encoding="utf-8", errors="replace") as handle:
            text = handle.read(1024 * 1024)
    except OSError as exc:
        return Result("readme", "fail", f"README.md cannot be read: {exc.strerror}")
    if AUTHOR_NOTE in text:
        return Result("readme", "fail", "README.md still holds the template's note for the hill's author "
                                        "(the <!-- ... --> block): write the task there and delete the note")
    return Result("readme", "ok", "README.md holds the task, no template note")


def isolation_check(spec: Mapping[str, Any], hill_name: str, hill_dir: str, python: str) -> Result:
    """A warning for `sandbox: none`, which the hill's author declared:
    submitted code runs unconfined. Otherwise bubblewrap is usable (the
    checks were refused already where it is not), and a failure when it
    does not start with the mounts an eval of this hill needs: every eval
    would be buggy."""
    from ..run import sandbox

    if sandbox.level_for(spec) == sandbox.LEVEL_NONE:
        return Result("isolation", "warn", "sandbox: none in hill.yaml: submitted code can read private/ "
                                           "and the machine state")
    problem = sandbox.trial(hill_name, hill_dir, python, spec)
    if problem:
        return Result("isolation", "fail", problem)
    return Result("isolation", "ok", "bubblewrap" + ("" if not spec["network"] else ", network allowed"))


class RunningTests:
    """The hill's frozen tests (hills/testrunner.py in its interpreter),
    started at once, their output kept in unnamed files (a pipe nobody
    reads would stall them), their result read by `result`."""

    def __init__(self, python: str, hill_dir: str) -> None:
        import tempfile

        self.out, self.err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
        self.deadline = TEST_TIMEOUT
        self.killed = False
        # Started here, before any eval of the confined checks: an eval keeps
        # the processes its caller had when it started (hills.run.runner).
        self.process = subprocess.Popen([python, TEST_RUNNER, hill_dir], cwd=hill_dir, stdin=subprocess.DEVNULL,
                                        stdout=self.out, stderr=self.err, env=check_env())

    def result(self) -> Result:
        """Their Result, once they are done (or killed at TEST_TIMEOUT)."""
        try:
            code = self.process.wait(timeout=self.deadline)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            return Result("tests", "fail", f"did not finish within {TEST_TIMEOUT}s")
        finally:
            stdout, stderr = self._read(self.out), self._read(self.err)
        return _tests_result(code, stdout, stderr)

    def told_to(self, after: _AfterTests) -> threading.Thread:
        """A started thread that hands their Result to `after` once they are done."""
        import threading

        def wait() -> None:
            try:
                result = self.result()
            except Exception as exc:  # an OSError reading the output: said as the check's failure
                result = Result("tests", "fail", f"could not be read: {exc}")
            if not self.killed:  # the check stopped: no line for tests it ended
                after.tests(result)

        waiter = threading.Thread(target=wait, name="hills-tests", daemon=True)
        waiter.start()
        return waiter

    def kill(self) -> None:
        """End them, where the checks stop before they are done."""
        self.killed = True
        if self.process.poll() is None:
            self.process.kill()

    @staticmethod
    def _read(handle: Any) -> str:
        handle.seek(0)
        text = handle.read().decode("utf-8", "replace")
        handle.close()
        return text


def _tests_result(code: int, stdout: str, stderr: str) -> Result:
    lines = stdout.strip().splitlines()
    summary = lines[-1] if lines else "no output"
    if code == 0:
        return Result("tests", "ok", summary)
    if code == 5:
        return Result("tests", "fail", "no tests found in tests/")
    failing = [line for line in lines if line.startswith(("FAILED", "ERROR"))]
    detail = summary + ("".join("\n        " + line for line in failing[:10]) if failing else "")
    if not re.search(r"\d+ passed", summary):
        detail = (stderr.strip() or summary)[-800:]
    return Result("tests", "fail", detail)
