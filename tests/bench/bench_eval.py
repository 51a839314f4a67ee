"""hills eval on the circle-packing example: against running the same
evaluator with a bare python3, served by a warm server (docs/warm.md) and
cold (HILLS_WARM=off), and with 200 MB in private/ against without, each
pair timed in turns."""

import os
import subprocess
import sys
import time

from .common import Sandbox, compared, interleaved, write_random_files

SIZE = int(os.environ.get("HILLS_BENCH_PRIVATE_MB", "200")) * 1024 * 1024
BARE = ("import sys; sys.path.insert(0, '.'); from pathlib import Path; from eval import eval as e; "
        "r = e(Path('examples/grid')); assert r['passed'], r")


def wait_for_warm_server(box, timeout=30.0, env=None):
    """Until the warm server a call with `env` (the box's) uses answers:
    an eval that finds none starts one."""
    from hills.warm import client as warm

    ask = ("import os, socket; from hills.warm import client as warm; "
           "path = os.path.join(warm.socket_dir() or '/nowhere', warm.key() + '.sock'); "
           "s = socket.socket(socket.AF_UNIX); s.connect(path); s.close()")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if subprocess.run([sys.executable, "-c", ask], env=env or box.env, capture_output=True).returncode == 0:
            return
        time.sleep(0.2)
    raise RuntimeError(f"no warm server came up for {box.home} (see {warm.socket_dir()}/warm.log)")


def main():
    with Sandbox() as box:
        box.run("hills", "new", "plain", "-t", "circle-packing")
        box.run("hills", "commit", "plain", "-m", "initial")
        submission = os.path.join(box.hill_dir("plain"), "examples", "grid")
        box.run("hills", "eval", submission, "-H", "plain")  # builds the environment once

        def bare_in_hill():

            subprocess.run([sys.executable, "-c", BARE], cwd=box.hill_dir("plain"), check=True,
                           capture_output=True, env=box.env)

        def plain():
            box.run("hills", "eval", submission, "-H", "plain")

        cold_env = dict(box.env, HILLS_WARM="off")

        def cold():
            subprocess.run(["hills", "eval", submission, "-H", "plain"], cwd=box.project, env=cold_env,
                           check=True, capture_output=True)

        no_standby_env = dict(box.env, HILLS_WARM_STANDBY="off")

        def warm_no_standby():
            subprocess.run(["hills", "eval", submission, "-H", "plain"], cwd=box.project, env=no_standby_env,
                           check=True, capture_output=True)

        plain()  # the first eval after this one is served warm
        wait_for_warm_server(box)
        # An agent reads each report before its next call: with a pause
        # between calls, the server's spare has its standby ready.
        compared("hills eval (warm server, standby) vs bare python3", interleaved(bare_in_hill, plain, rounds=11,
                                                                               pause=0.3), 2.0)
        compared("  the same, calls back to back (no pause)", interleaved(bare_in_hill, plain, rounds=11))
        warm_no_standby()  # a server of its own (HILLS_WARM_STANDBY names another)
        wait_for_warm_server(box, env=no_standby_env)
        compared("hills eval (warm, HILLS_WARM_STANDBY=off) vs bare", interleaved(bare_in_hill, warm_no_standby,
                                                                               rounds=11, pause=0.3))
        compared("hills eval cold (HILLS_WARM=off) vs bare python3", interleaved(bare_in_hill, cold, rounds=11), 2.5)

        box.run("hills", "new", "heavy", "-t", "circle-packing")
        write_random_files(os.path.join(box.hill_dir("heavy"), "private"), SIZE)
        box.run("hills", "commit", "heavy", "-m", "with private data")
        heavy_submission = os.path.join(box.hill_dir("heavy"), "examples", "grid")
        box.run("hills", "eval", heavy_submission, "-H", "heavy")
        compared(f"hills eval with {SIZE // (1024 * 1024)} MB private vs without",
                 interleaved(plain, lambda: box.run("hills", "eval", heavy_submission, "-H", "heavy"), rounds=7), 1.1)


if __name__ == "__main__":
    main()
