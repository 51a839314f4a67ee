"""hills eval on the circle-packing example inside the bubblewrap sandbox,
against the same eval of the same hill files with `sandbox: none`; then the
same pair where the submission is a solution.py, which the template's
solution phase runs through hills.sdk (submitted code confined as well).
Each pair is timed in turns (A B A B), the figure the median of the
pairwise ratios; the target: a confined eval within 1.3x an unconfined one.

Warm, each hill of a pair is climbed as an agent climbs one: from a machine
state of its own, so that its own warm server serves it and keeps its
standby for it, with a pause between calls (the agent reads the report).
One more line, without a target, alternates the two hills back to back on
one server: there each call finds the standby made for the other hill, or
none yet, and which of the two gets one first is a race (the unconfined
hill's standby boots sooner), so that line measures the race more than the
sandbox (docs/decisions.md D-188, "The sandbox benchmark climbs each hill from
its own machine state")."""

import json
import os

from .common import Sandbox, compared, interleaved

REPEAT = int(os.environ.get("HILLS_BENCH_REPEAT", "9"))
PAUSE_S = 0.3
HILLS = {"boxed": "", "open": "sandbox: none\n", "sdk-boxed": "", "sdk-open": "sandbox: none\n"}


def _make(box, names):
    for name in names:
        box.run("hills", "new", name, "-t", "circle-packing")
        if HILLS[name]:
            with open(os.path.join(box.hill_dir(name), "hill.yaml"), "a", encoding="utf-8") as handle:
                handle.write(HILLS[name])
        box.run("hills", "commit", name, "-m", "initial")
    grid = os.path.join(box.hill_dir(names[0]), "examples", "grid")
    solver = os.path.join(box.root, "solver")
    os.makedirs(solver)
    with open(os.path.join(grid, "circles.json"), encoding="utf-8") as handle:
        circles = handle.read()
    with open(os.path.join(solver, "solution.py"), "w", encoding="utf-8") as handle:
        handle.write(f"open('circles.json', 'w').write({circles!r})\n")
    box.grid, box.solver = grid, solver


def _evaluate(box, name):
    level = "none" if HILLS[name] else "bwrap"

    def run():
        submission = box.solver if name.startswith("sdk-") else box.grid
        done = box.run("hills", "eval", submission, "-H", name, "--json")
        report = json.loads(done.stdout)
        config = {c["name"]: c["value"] for c in report["config"]}
        assert report["passed"] and config["isolation"] == level, (name, config, report.get("reason"))
        # The template's solution phase runs solution.py through hills.sdk.
        started = report["isolation"]["started_by"]
        assert started == ({"solution": 1} if name.startswith("sdk-") else {}), (name, report["isolation"])

    return run


def main():
    from hills.run import sandbox

    if not sandbox.bwrap_works():
        print(f"{'sandboxed eval vs sandbox: none':<58} skipped: bubblewrap (bwrap) is not usable here")
        return
    pairs = (("boxed", "open", "hills eval circle-packing: bwrap vs sandbox: none"),
             ("sdk-boxed", "sdk-open", "same, solution.py run through hills.sdk"))
    with Sandbox() as shared:
        _make(shared, list(HILLS))
        for first, second, label in pairs:
            for name in (first, second):  # builds each environment, starts the server
                _evaluate(shared, name)()
            # Each hill from a machine state of its own: its own warm server.
            with Sandbox() as own_first, Sandbox() as own_second:
                _make(own_first, [first])
                _make(own_second, [second])
                for box, name in ((own_first, first), (own_second, second)):
                    for _ in range(3):  # the server started, its standby made
                        _evaluate(box, name)()
                compared(label, interleaved(_evaluate(own_second, second), _evaluate(own_first, first),
                                            rounds=REPEAT, pause=PAUSE_S), 1.3)
            compared("  the same, both hills on one server, back to back",
                     interleaved(_evaluate(shared, second), _evaluate(shared, first), rounds=REPEAT))
            # Cold: no warm server, no standby.
            shared.env["HILLS_WARM"] = "off"
            compared(label + ", cold", interleaved(_evaluate(shared, second), _evaluate(shared, first),
                                                   rounds=REPEAT), 1.3)
            shared.env.pop("HILLS_WARM", None)


if __name__ == "__main__":
    main()
