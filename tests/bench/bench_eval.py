"""hills eval on the circle-packing example: against running the same
evaluator with a bare python3, and with 200 MB in private/ against without,
each pair timed in turns."""

import os
import sys

from .common import Sandbox, compared, interleaved, write_random_files

SIZE = int(os.environ.get("HILLS_BENCH_PRIVATE_MB", "200")) * 1024 * 1024
BARE = ("import sys; sys.path.insert(0, '.'); from pathlib import Path; from eval import eval as e; "
        "r = e(Path('examples/grid')); assert r['passed'], r")


def main():
    with Sandbox() as box:
        box.run("hills", "new", "plain", "-t", "circle-packing")
        box.run("hills", "commit", "plain", "-m", "initial")
        submission = os.path.join(box.hill_dir("plain"), "examples", "grid")
        box.run("hills", "eval", submission, "-H", "plain")  # builds the environment once

        def bare_in_hill():
            import subprocess

            subprocess.run([sys.executable, "-c", BARE], cwd=box.hill_dir("plain"), check=True,
                           capture_output=True, env=box.env)

        def plain():
            box.run("hills", "eval", submission, "-H", "plain")

        compared("hills eval vs bare python3 evaluator", interleaved(bare_in_hill, plain, rounds=11), 2.0)

        box.run("hills", "new", "heavy", "-t", "circle-packing")
        write_random_files(os.path.join(box.hill_dir("heavy"), "private"), SIZE)
        box.run("hills", "commit", "heavy", "-m", "with private data")
        heavy_submission = os.path.join(box.hill_dir("heavy"), "examples", "grid")
        box.run("hills", "eval", heavy_submission, "-H", "heavy")
        compared(f"hills eval with {SIZE // (1024 * 1024)} MB private vs without",
                 interleaved(plain, lambda: box.run("hills", "eval", heavy_submission, "-H", "heavy"), rounds=7), 1.1)


if __name__ == "__main__":
    main()
