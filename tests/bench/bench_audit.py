"""The cost of the access audit and of measuring submitted code: `hills
eval` of the circle-packing template with a solution.py (its solution
phase runs it through hills.sdk), with the audit hook on its path, against
the same eval with the audit left out of the submission's configuration;
both in this process, in turns. The measurement itself (a monotonic clock
and two getrusage calls per start) runs on both sides. Target: at most
1.05x."""

import os

from .common import Sandbox, compared, interleaved

ROUNDS = int(os.environ.get("HILLS_BENCH_REPEAT", "9"))
# A solver of the usual shape: imports, reads its inputs, works, writes.
SOLVER = """\
import json, math, os, random, collections, pathlib
rng = random.Random(0)
points = [(rng.random(), rng.random()) for _ in range(20000)]
best = collections.Counter(round(math.hypot(x, y), 2) for x, y in points)
for name in os.listdir("."):
    pathlib.Path(name).stat()
open("circles.json", "w").write(CIRCLES)
"""


def main():
    from hills.run import sandbox

    if not sandbox.bwrap_works():
        print(f"{'eval with the access audit vs without':<58} skipped: bubblewrap (bwrap) is not usable here")
        return
    with Sandbox() as box:
        box.run("hills", "new", "audited", "-t", "circle-packing")
        box.run("hills", "commit", "audited", "-m", "initial")
        grid = os.path.join(box.hill_dir("audited"), "examples", "grid")
        with open(os.path.join(grid, "circles.json"), encoding="utf-8") as handle:
            circles = handle.read()
        solver = os.path.join(box.root, "solver")
        os.makedirs(solver)
        with open(os.path.join(solver, "solution.py"), "w", encoding="utf-8") as handle:
            handle.write(SOLVER.replace("CIRCLES", repr(circles)))
        with box.inside():
            _compare(solver)


def _compare(solver):
    from hills.disk import hill
    from hills.run import evaluate, sandbox

    original = sandbox.Confinement.submission_config

    def without_audit(self, *args, **kwargs):
        config = original(self, *args, **kwargs)
        config.pop("audit", None)
        return config

    def run(audited):
        sandbox.Confinement.submission_config = original if audited else without_audit
        try:
            outcome = evaluate.evaluate(evaluate.EvalRequest(hill.resolve("audited"), solver))
        finally:
            sandbox.Confinement.submission_config = original
        report = outcome.report
        assert report["status"] == "passing", report.get("reason")
        assert report["audit"]["runs"] == (1 if audited else 0), report["audit"]
        assert report["audit"]["attempts"] == 0, report["audit"]
        assert report["measured"]["runs"] == 1

    comparison = interleaved(lambda: run(False), lambda: run(True), rounds=ROUNDS, warmup=1)
    compared("hills eval, solution phase audited vs not", comparison, target=1.05)


if __name__ == "__main__":
    main()
