"""hills eval on the circle-packing example against the same eval made by
another hills install (HILLS_BENCH_BASE: the bin folder of, say, the
previous release's checkout and venv), cold (HILLS_WARM=off) and served
warm, each pair timed in turns, so that a change can be held to "no
slower than before" on a loaded machine. Skipped when the variable is
not set."""

import os
import subprocess
import time

from .common import Sandbox, compared, interleaved

ROUNDS = int(os.environ.get("HILLS_BENCH_REPEAT", "11"))


def _box(bin_dir=None):
    box = Sandbox()
    if bin_dir:
        box.env["PATH"] = bin_dir + os.pathsep + box.env["PATH"]
    box.run("hills", "new", "plain", "-t", "circle-packing")
    box.run("hills", "commit", "plain", "-m", "initial")
    box.run("hills", "eval", os.path.join(box.hill_dir("plain"), "examples", "grid"), "-H", "plain")
    return box


def main():
    base = os.environ.get("HILLS_BENCH_BASE")
    if not base:
        print(f"{'eval against another hills install':<58} skipped: set HILLS_BENCH_BASE to its bin folder")
        return
    reference, candidate = _box(base), _box()
    try:
        for box in (reference, candidate):
            box.submission = os.path.join(box.hill_dir("plain"), "examples", "grid")

        def cold(box):
            env = dict(box.env, HILLS_WARM="off")
            return lambda: subprocess.run(["hills", "eval", box.submission, "-H", "plain"], cwd=box.project, env=env,
                                          check=True, capture_output=True)

        def warm(box):
            return lambda: box.run("hills", "eval", box.submission, "-H", "plain")

        compared("cold eval, this hills / HILLS_BENCH_BASE",
                 interleaved(cold(reference), cold(candidate), rounds=ROUNDS), target=1.05)
        # The first warm call starts the server (each install its own, by its
        # own key); the next ones are served.
        for box in (reference, candidate):
            for _ in range(3):
                warm(box)()
                time.sleep(0.5)
        compared("warm eval, this hills / HILLS_BENCH_BASE",
                 interleaved(warm(reference), warm(candidate), rounds=ROUNDS, pause=0.3), target=1.05)
    finally:
        # A warm server goes once its machine state is gone (it checks between calls).
        for box in (reference, candidate):
            box.__exit__(None, None, None)


if __name__ == "__main__":
    main()
