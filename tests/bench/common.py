"""Shared set-up for the benchmarks: a private machine state, a project
folder, the hills executables, and timing: by median of repeated runs, or
interleaved against a reference for a ratio."""

import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable, NamedTuple

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Sandbox:
    """A temporary HILLS_HOME and project folder, removed on exit."""

    def __init__(self):
        self.root = tempfile.mkdtemp(prefix="hills-bench-")
        self.home = os.path.join(self.root, "machine-state")
        self.project = os.path.join(self.root, "project")
        os.makedirs(self.project)
        self.env = dict(os.environ, HILLS_HOME=self.home)
        # Measured as installed: bytecode cached, as it is unless a user turns it off.
        self.env.pop("PYTHONDONTWRITEBYTECODE", None)
        if not shutil.which("hills"):
            self.env["PATH"] = os.path.join(REPO, "bin") + os.pathsep + self.env["PATH"]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        shutil.rmtree(self.root, ignore_errors=True)

    def run(self, *argv, check=True, input=None):
        done = subprocess.run(list(argv), cwd=self.project, env=self.env, input=input,
                              capture_output=True, text=True)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed with {done.returncode}:\n{done.stderr}")
        return done

    def hill_dir(self, name):
        return os.path.join(self.project, ".hills", name)

    @contextlib.contextmanager
    def inside(self):
        """This process as one of the box's commands: its HILLS_HOME, the
        project as the current folder, bytecode cached; put back after."""
        old = {key: os.environ.get(key) for key in ("HILLS_HOME", "PYTHONDONTWRITEBYTECODE")}
        os.environ["HILLS_HOME"] = self.home
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        cwd = os.getcwd()
        os.chdir(self.project)
        try:
            yield self
        finally:
            os.chdir(cwd)
            for key, value in old.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def plain_hill(box: "Sandbox", name: str = "plain") -> str:
    """A committed circle-packing hill `name` in the box, evaluated once (its
    environment built): the path of its example submission `grid`."""
    box.run("hills", "new", name, "-t", "circle-packing")
    box.run("hills", "commit", name, "-m", "initial")
    submission = os.path.join(box.hill_dir(name), "examples", "grid")
    box.run("hills", "eval", submission, "-H", name)  # builds the environment once
    return submission


def timed(function, repeat=5):
    """Median wall time of `function()` over `repeat` runs."""
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


class Comparison(NamedTuple):
    """An interleaved timing: each side's median and the median of the
    pairwise ratios candidate / reference."""

    reference_s: float
    candidate_s: float
    ratio: float


def interleaved(reference: Callable[[], object], candidate: Callable[[], object], *, rounds: int = 9,
                warmup: int = 1, pause: float = 0.0) -> Comparison:
    """Time `reference` and `candidate` in turns (A B A B ...) after `warmup`
    runs of each, and compare them pair by pair: a reference measured
    minutes before the candidate drifts with the load of the machine.
    `pause`: seconds waited, untimed, before each run, so that work a run
    leaves for between calls (a warm server's standby) never overlaps the
    next timed one."""
    for _ in range(warmup):
        reference()
        candidate()
    pairs = []
    for _ in range(rounds):
        time.sleep(pause)
        started = time.perf_counter()
        reference()
        middle = time.perf_counter()
        time.sleep(pause)
        resumed = time.perf_counter()
        candidate()
        pairs.append((middle - started, time.perf_counter() - resumed))
    return Comparison(statistics.median(a for a, _ in pairs), statistics.median(b for _, b in pairs),
                      statistics.median(b / a for a, b in pairs))


def compared(name: str, comparison: Comparison, target: float | None = None) -> float:
    """Print an interleaved comparison as `line` prints a ratio; return the ratio."""
    verdict = ""
    if target is not None:
        verdict = f"  (target <= {target}x){'  ok' if comparison.ratio <= target else '  OVER TARGET'}"
    print(f"{name:<58} {comparison.candidate_s:8.3f}s / {comparison.reference_s:8.3f}s  "
          f"median ratio {comparison.ratio:5.2f}x{verdict}")
    sys.stdout.flush()
    return comparison.ratio


def write_random_files(folder, total_bytes, count=20):
    os.makedirs(folder, exist_ok=True)
    size = total_bytes // count
    for index in range(count):
        with open(os.path.join(folder, f"part-{index:03d}.bin"), "wb") as handle:
            remaining = size
            while remaining:
                chunk = min(remaining, 1 << 24)
                handle.write(os.urandom(chunk))
                remaining -= chunk


def line(name, value, reference, target=None, unit="x"):
    ratio = value / reference if reference else float("inf")
    verdict = ""
    if target is not None:
        verdict = "  ok" if ratio <= target else "  OVER TARGET"
        verdict = f"  (target <= {target}{unit}){verdict}"
    print(f"{name:<58} {value:8.3f}s / {reference:8.3f}s = {ratio:6.2f}{unit}{verdict}")
    sys.stdout.flush()
    return ratio
