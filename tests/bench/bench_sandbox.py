"""hills eval on the circle-packing example inside the bubblewrap sandbox,
against the same eval of the same hill files with `sandbox: none`; then the
same pair where the submission is a solution.py, which the template's
solution phase runs through hills.sdk (submitted code confined as well).
Each pair is timed in turns (A B A B), the figure the median of the
pairwise ratios; the target: a confined eval within 1.3x an unconfined one."""

import json
import os

from .common import Sandbox, compared, interleaved

REPEAT = int(os.environ.get("HILLS_BENCH_REPEAT", "9"))


def main():
    from hills import sandbox

    if not sandbox.bwrap_works():
        print(f"{'sandboxed eval vs sandbox: none':<58} skipped: bubblewrap (bwrap) is not usable here")
        return
    with Sandbox() as box:
        hills = {"boxed": "", "open": "sandbox: none\n", "sdk-boxed": "", "sdk-open": "sandbox: none\n"}
        for name, extra in hills.items():
            box.run("hills", "new", name, "-t", "circle-packing")
            if extra:
                with open(os.path.join(box.hill_dir(name), "hill.yaml"), "a", encoding="utf-8") as handle:
                    handle.write(extra)
            box.run("hills", "commit", name, "-m", "initial")
        grid = os.path.join(box.hill_dir("boxed"), "examples", "grid")
        solver = os.path.join(box.root, "solver")
        os.makedirs(solver)
        with open(os.path.join(grid, "circles.json"), encoding="utf-8") as handle:
            circles = handle.read()
        with open(os.path.join(solver, "solution.py"), "w", encoding="utf-8") as handle:
            handle.write(f"open('circles.json', 'w').write({circles!r})\n")

        def evaluate(name, level):
            submission = solver if name.startswith("sdk-") else grid
            done = box.run("hills", "eval", submission, "-H", name, "--json")
            report = json.loads(done.stdout)
            config = {c["name"]: c["value"] for c in report["config"]}
            assert report["passed"] and config["isolation"] == level, (name, config, report.get("reason"))
            # The template's solution phase runs solution.py through hills.sdk.
            started = report["isolation"]["started_by"]
            assert started == ({"solution": 1} if name.startswith("sdk-") else {}), (name, report["isolation"])

        for first, second, label in (("boxed", "open", "hills eval circle-packing: bwrap vs sandbox: none"),
                                     ("sdk-boxed", "sdk-open", "same, solution.py run through hills.sdk")):
            evaluate(first, "bwrap")  # builds each environment once
            evaluate(second, "none")
            # A B A B in one run, the median of the pairwise ratios: the
            # confined eval against the same hill's files at `sandbox: none`;
            # warm (the default), then cold, where no warm server's spare,
            # made for the other hill of the pair, is set aside on each call.
            for mode, warm in (("", None), (", cold", "off")):
                if warm:
                    box.env["HILLS_WARM"] = warm
                compared(label + mode, interleaved(lambda: evaluate(second, "none"),
                                                   lambda: evaluate(first, "bwrap"), rounds=REPEAT), 1.3)
                box.env.pop("HILLS_WARM", None)

if __name__ == "__main__":
    main()
