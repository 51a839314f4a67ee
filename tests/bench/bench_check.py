"""hills check and the commit after it, each in turns against its reference:
a second check of an unchanged hill (the leak probe and the cheat corpus
from their records) against a check that runs them (`--fresh`, the
environment built: the cheapest first check there is); `hills commit`
right after a passing check of the same tree against that check; and a
first `hills new` + `hills check` of circle-packing against hills 0.12.1's,
installed once in a side environment under ~/.cache/hills-bench/."""

import os
import statistics
import subprocess
import sys
import time

from .common import REPO, Comparison, Sandbox, compared

REFERENCE_VERSION = "0.12.1"
ROUNDS = int(os.environ.get("HILLS_BENCH_CHECK_ROUNDS", "7"))


def reference_hills() -> str:
    """The `hills` of the reference release, installed on first use."""
    folder = os.path.join(os.path.expanduser("~"), ".cache", "hills-bench", f"hills-{REFERENCE_VERSION}")
    executable = os.path.join(folder, "bin", "hills")
    if not os.path.exists(executable):
        uv = os.path.join(os.path.dirname(sys.executable), "uv")
        subprocess.run([uv, "venv", "--quiet", folder], check=True)
        subprocess.run([uv, "pip", "install", "--quiet", "--python", os.path.join(folder, "bin", "python"),
                        f"hills=={REFERENCE_VERSION}"], check=True)
    return executable


def turns(reference, candidate, rounds: int = ROUNDS, warmup: int = 1) -> list[tuple[float, float]]:
    """(reference, candidate) seconds, run in turns after `warmup` pairs."""
    for _ in range(warmup):
        reference()
        candidate()
    pairs = []
    for _ in range(rounds):
        started = time.perf_counter()
        reference()
        middle = time.perf_counter()
        candidate()
        pairs.append((middle - started, time.perf_counter() - middle))
    return pairs


def report(name: str, pairs: list[tuple[float, float]], target: float) -> float:
    """The comparison's line (medians, the median ratio) and the ratios' spread."""
    ratios = sorted(b / a for a, b in pairs)
    ratio = compared(name, Comparison(statistics.median(a for a, _ in pairs),
                                      statistics.median(b for _, b in pairs), statistics.median(ratios)), target)
    print(f"{'':<58} spread {ratios[0]:.2f}x to {ratios[-1]:.2f}x over {len(ratios)} rounds")
    return ratio


def second_check(box: Sandbox) -> float:
    box.run("hills", "new", "same", "-t", "circle-packing")
    box.run("hills", "check", "same")
    recorded = box.run("hills", "check", "same").stdout
    assert "(recorded for this tree on" in recorded, recorded  # the precondition: the second check reuses
    pairs = turns(lambda: box.run("hills", "check", "same", "--fresh"), lambda: box.run("hills", "check", "same"))
    return report("hills check again, unchanged hill vs check --fresh", pairs, 0.3)


def commit_after_check(box: Sandbox) -> float:
    box.run("hills", "new", "after", "-t", "circle-packing")
    readme = os.path.join(box.hill_dir("after"), "README.md")
    counter = [0]

    def check() -> None:
        counter[0] += 1
        with open(readme, "a") as handle:
            handle.write(f"\nrevision {counter[0]}\n")
        box.run("hills", "check", "after")

    def commit() -> None:
        done = box.run("hills", "commit", "after", "-m", f"revision {counter[0]}")
        gate = [line for line in done.stderr.splitlines() if line.startswith(("  ok ", "  warn "))]
        assert gate and all(line.endswith("(remembered)") for line in gate), done.stderr  # no check ran

    pairs = turns(check, commit)
    return report("hills commit right after a passing check vs the check", pairs, 0.2)


def new_and_check(box: Sandbox, reference_box: Sandbox) -> float:
    old = reference_hills()
    reference_box.env["PATH"] = os.pathsep.join([os.path.dirname(old), os.path.dirname(sys.executable),
                                                 reference_box.env["PATH"]])
    counter = [0]

    def reference() -> None:
        counter[0] += 1
        reference_box.run(old, "new", f"first{counter[0]}", "-t", "circle-packing")
        reference_box.run(old, "check", f"first{counter[0]}")

    def candidate() -> None:
        box.run("hills", "new", f"first{counter[0]}", "-t", "circle-packing")
        box.run("hills", "check", f"first{counter[0]}")

    pairs = turns(reference, candidate)
    return report(f"hills new + check, circle-packing vs hills {REFERENCE_VERSION}", pairs, 1.0)


def main() -> None:
    sys.path.insert(0, REPO)
    print("the machine may be shared: ratios are of runs in turns, A B A B")
    with Sandbox() as box:
        second_check(box)
        commit_after_check(box)
        with Sandbox() as reference_box:
            new_and_check(box, reference_box)


if __name__ == "__main__":
    main()
