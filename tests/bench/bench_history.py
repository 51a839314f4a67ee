"""Flat in history (docs/history.md): `hills attempts`, `rank -H` and
`journal` over 100, 1,000 and 10,000 attempts (seconds, and the ratio of
10,000 to 1,000: 10x is linear); eval number 1,000 of a version against
an eval of a fresh one, warm and cold; the bytes an eval adds to `.vc`
after 20 and after 1,000 evals; `hills attempts` at 1,000 against hills
0.12.1's; the journal's memory at 10,000. The long logs are real signed,
chained lines written in process (tests/bench/history_log.py)."""

import json
import os
import resource
import statistics
import subprocess
import sys
import time

from .common import Sandbox, compared, interleaved

REFERENCE = "0.12.1"
SIDE_VENV = os.path.expanduser(f"~/.cache/hills-bench/v{REFERENCE}")
SIZES = [int(n) for n in os.environ.get("HILLS_BENCH_HISTORY", "100,1000,10000").split(",")]
TARGETS = {"attempts": 2.0, "rank": 2.0, "journal": 10.0}  # seconds at 10,000


def vc_bytes(hill_dir):
    total = 0
    for root, _, files in os.walk(os.path.join(hill_dir, ".vc")):
        total += sum(os.path.getsize(os.path.join(root, name)) for name in files)
    return total


def make(box, name):
    box.run("hills", "new", name, "-t", "circle-packing")
    box.run("hills", "commit", name, "-m", "initial")
    submission = os.path.join(box.hill_dir(name), "examples", "grid")
    box.run("hills", "eval", submission, "-H", name)
    return submission


def grow(box, name, count, notes=False):
    with box.inside():
        from hills.disk import hill as hill_module

        from . import history_log

        target = hill_module.resolve(name)
        history_log.grow(name, target.repo.tree_of(target.repo.head()), count, target.path, notes)


def cpu_of_children():
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def samples(run, repeat):
    """(median wall seconds, min, max, median CPU seconds of the command and
    what it waited for): on a machine shared with others, the CPU time says
    what the wall time cannot."""
    times, cpu = [], []
    for _ in range(repeat):
        started, used = time.perf_counter(), cpu_of_children()
        run()
        times.append(time.perf_counter() - started)
        cpu.append(cpu_of_children() - used)
    return statistics.median(times), min(times), max(times), statistics.median(cpu)


def views(box, name):
    page = os.path.join(box.root, "journal.html")
    return {"attempts": lambda: box.run("hills", "attempts", name),
            "rank": lambda: box.run("hills", "rank", "-H", name),
            "journal": lambda: box.run("hills", "journal", name, "-o", page)}


def journal_memory(box, name):
    """ru_maxrss of `hills journal` as a child of its own small process."""
    code = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, capture_output=True); "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    done = box.run(sys.executable, "-c", code, "hills", "journal", name, "-o", os.path.join(box.root, "m.html"))
    return int(done.stdout.strip()) / 1024


def history_views():
    with Sandbox() as box:
        make(box, "long")
        have, seconds = 1, {}
        for size in SIZES:
            grow(box, "long", size - have)
            have = size
            repeat = 3 if size >= 10_000 else 5
            for view, run in views(box, "long").items():
                run()  # the first after new lines checks their signatures; a person's next look does not
                median, low, high, cpu = samples(run, repeat)
                seconds[(view, size)] = (median, cpu)
                target = f"  (target <= {TARGETS[view]} s)" if size == 10_000 else ""
                print(f"hills {view:<8} over {size:>6,} attempts{'':<20} {median:8.3f}s  "
                      f"(min {low:.3f}, max {high:.3f}; CPU {cpu:.3f}s){target}")
        for view in TARGETS:
            if (view, 1000) in seconds and (view, 10_000) in seconds:
                (wall_10k, cpu_10k), (wall_1k, cpu_1k) = seconds[(view, 10_000)], seconds[(view, 1000)]
                print(f"  {view}: 10,000 / 1,000 attempts = {wall_10k / wall_1k:5.2f}x wall, "
                      f"{cpu_10k / cpu_1k:5.2f}x CPU (10x is linear)")
        if 10_000 in SIZES:
            memory = journal_memory(box, "long")
            print(f"{'hills journal of 10,000 attempts: peak resident memory':<58} {memory:8.0f} MB  (target < 500 MB)")
        sys.stdout.flush()


def thousandth_eval():
    with Sandbox() as box:
        fresh = make(box, "fresh")
        long = make(box, "long")
        grow(box, "long", 998, notes=True)
        eval_fresh = lambda: box.run("hills", "eval", fresh, "-H", "fresh")  # noqa: E731
        eval_long = lambda: box.run("hills", "eval", long, "-H", "long")  # noqa: E731
        compared("eval #1,000 of a version vs an eval of a fresh one (warm)",
                 interleaved(eval_fresh, eval_long, rounds=11, pause=0.3), 1.1)
        cold_env = dict(box.env, HILLS_WARM="off")

        def cold(submission, name):
            return lambda: subprocess.run(["hills", "eval", submission, "-H", name], cwd=box.project, env=cold_env,
                                          check=True, capture_output=True)

        compared("eval #1,000 of a version vs an eval of a fresh one (cold)",
                 interleaved(cold(fresh, "fresh"), cold(long, "long"), rounds=9), 1.1)
        make(box, "twenty")
        grow(box, "twenty", 18, notes=True)
        added = {}
        for name, submission in (("twenty", os.path.join(box.hill_dir("twenty"), "examples", "grid")),
                                 ("long", long)):
            growth = []
            for _ in range(5):
                before = vc_bytes(box.hill_dir(name))
                box.run("hills", "eval", submission, "-H", name)
                growth.append(vc_bytes(box.hill_dir(name)) - before)
            added[name] = statistics.median(growth)
        print(f"{'bytes an eval adds to .vc after 20 evals':<58} {added['twenty']:8.0f} B")
        print(f"{'bytes an eval adds to .vc after 1,000 evals':<58} {added['long']:8.0f} B  "
              f"= {added['long'] / added['twenty']:5.2f}x  (target: does not grow)")


def reference_venv():
    python = os.path.join(SIDE_VENV, "bin", "python")
    if not os.path.exists(python):
        uv = os.path.join(os.path.dirname(sys.executable), "uv")
        subprocess.run([uv, "venv", "-q", SIDE_VENV], check=True)
        subprocess.run([uv, "pip", "install", "-q", "--python", python, f"hills=={REFERENCE}"], check=True)
    return os.path.join(SIDE_VENV, "bin")


# hills 0.12.1 logs one HMAC-chained line per eval, the report itself; its
# own code makes the chain (hills.state.chain_mac).
OLD_GROW = """
import json, sys
from hills import state
name, tree, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
path = state.attempts_path(name, tree)
lines = path.read_text().splitlines()
last = json.loads(lines[-1])
with open(path, "a") as handle:
    for index in range(count):
        record = {k: v for k, v in last.items() if k != "chain"}
        record["seq"], record["prev"] = last["seq"] + 1, last["chain"]
        record["submission_hash"] = "blake3:" + format(index % 97, "064x")
        record["chain"] = state.chain_mac(record)
        handle.write(json.dumps(record, sort_keys=True) + "\\n")
        last = record
"""


def against_reference():
    bin_dir = reference_venv()
    with Sandbox() as ours, Sandbox() as theirs:
        make(ours, "cp")
        grow(ours, "cp", 999)
        theirs.env["PATH"] = bin_dir + os.pathsep + theirs.env["PATH"]
        theirs.env.pop("PYTHONPATH", None)
        theirs.run("hills", "new", "cp", "-t", "circle-packing")
        theirs.run("hills", "commit", "cp", "-m", "initial")
        # hills 0.12.1 keeps a hill in .autolab/hills/NAME.
        theirs.run("hills", "eval", os.path.join(theirs.project, ".autolab", "hills", "cp", "examples", "grid"),
                   "-H", "cp")
        tree = json.loads(theirs.run("hills", "attempts", "cp", "--json").stdout)["tree_hash"]
        theirs.run(os.path.join(bin_dir, "python"), "-c", OLD_GROW, "cp", tree, "999")
        shown = theirs.run("hills", "attempts", "cp").stderr.splitlines()[0]  # 0.12.1 writes its tables on stderr
        assert "1000 attempt(s)" in shown, shown
        assert "chain broken" not in theirs.run("hills", "attempts", "cp").stderr
        assert "1000 attempt(s)" in ours.run("hills", "attempts", "cp").stdout.splitlines()[0]
        compared(f"hills attempts, 1,000 attempts, vs hills {REFERENCE}'s",
                 interleaved(lambda: theirs.run("hills", "attempts", "cp"), lambda: ours.run("hills", "attempts", "cp"),
                             rounds=21), 1.0)


def main():
    history_views()
    thousandth_eval()
    against_reference()


if __name__ == "__main__":
    main()
