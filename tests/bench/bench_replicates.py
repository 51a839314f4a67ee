"""hills eval --repeat 5 on a trivial command verifier: the overhead each
replicate adds beyond the verifier's own bare run."""

import os
import subprocess
import tempfile

from .common import Sandbox, timed

VERIFIER = """#!/bin/sh
echo 1 > "$HILLS_RESULT"
"""
HILL_YAML = """spec: 1
name: trivial
version: 0.1.0
evaluator:
  shape: command
  entry: [sh, verifier.sh]
timeout: 60
metrics:
  - {name: score, direction: max}
"""


def main():
    with Sandbox() as box:
        box.run("hills", "new", "trivial")
        hill_dir = box.hill_dir("trivial")
        with open(os.path.join(hill_dir, "hill.yaml"), "w") as handle:
            handle.write(HILL_YAML)
        with open(os.path.join(hill_dir, "verifier.sh"), "w") as handle:
            handle.write(VERIFIER)
        os.unlink(os.path.join(hill_dir, "eval.py"))
        with open(os.path.join(hill_dir, "README.md"), "w") as handle:
            handle.write("# trivial\n\nPrints a score of 1; the verifier reads it back.\n")
        with open(os.path.join(hill_dir, "tests", "test_eval.py"), "w") as handle:
            handle.write("def test_verifier_exists():\n    import os\n    assert os.path.exists('verifier.sh')\n")
        box.run("hills", "commit", "trivial", "-m", "trivial verifier")
        submission = os.path.join(box.root, "submission")
        os.makedirs(submission)
        with open(os.path.join(submission, "solution.py"), "w") as handle:
            handle.write("print(1)\n")
        box.run("hills", "eval", submission, "-H", "trivial")  # environment built once

        scratch = tempfile.mkdtemp(dir=box.root)

        def bare():
            env = dict(os.environ, HILLS_RESULT=os.path.join(scratch, "result.json"))
            subprocess.run(["sh", os.path.join(hill_dir, "verifier.sh")], cwd=submission, env=env, check=True)

        bare_run = timed(bare, repeat=9)
        one = timed(lambda: box.run("hills", "eval", submission, "-H", "trivial", "--repeat", "1"), repeat=5)
        five = timed(lambda: box.run("hills", "eval", submission, "-H", "trivial", "--repeat", "5"), repeat=5)
        per_replicate = (five - one) / 4
        overhead = per_replicate - bare_run
        verdict = "ok" if overhead <= 0.030 else "OVER TARGET"
        print(f"{'hills eval --repeat 1 / --repeat 5':<58} {one:8.3f}s / {five:8.3f}s")
        print(f"{'time per extra replicate vs bare verifier run':<58} {per_replicate * 1000:8.1f}ms / "
              f"{bare_run * 1000:6.1f}ms = {per_replicate / bare_run:6.2f}x")
        print(f"{'overhead per replicate beyond the bare run':<58} {overhead * 1000:8.1f}ms  "
              f"(target <= 30 ms)  {verdict}")


if __name__ == "__main__":
    main()
