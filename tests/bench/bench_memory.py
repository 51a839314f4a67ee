"""Memory of what an eval leaves running: the warm server, its spare and
the spare's standby evaluator (bwrap and the hill's interpreter), summed
over the process tree, resident (RSS) and proportional (PSS: pages shared
between the server and its fork counted once). Target: under 80 MB
resident in all (DESIGN 10, docs/warm.md)."""

import json
import os
import time

from .bench_eval import wait_for_warm_server
from .common import Sandbox, plain_hill

TARGET_MB = 80.0


def _status_kb(pid: int, field: str) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as handle:
            for text in handle:
                if text.startswith(field + ":"):
                    return int(text.split()[1])
    except OSError:
        pass
    return 0


def _pss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as handle:
            for text in handle:
                if text.startswith("Pss:"):
                    return int(text.split()[1])
    except OSError:
        pass
    return 0


def _children(pid: int) -> list[int]:
    found = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as handle:
                found += [int(child) for child in handle.read().split()]
    except OSError:
        pass
    return found


def tree(pid: int) -> list[int]:
    """`pid` and every process below it."""
    seen, waiting = [], [pid]
    while waiting:
        current = waiting.pop()
        seen.append(current)
        waiting += _children(current)
    return seen


def main():
    with Sandbox() as box:
        submission = plain_hill(box)
        wait_for_warm_server(box)
        box.run("hills", "eval", submission, "-H", "plain")  # served: its spare makes the next standby
        server = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            listed = json.loads(box.run("hills", "warm", "status", "--json").stdout)
            server = next((entry for entry in listed if entry["hills_home"] == box.home
                           and entry.get("spare") and entry["spare"].get("standby")), None)
            if server is not None:
                break
            time.sleep(0.2)
        if server is None:
            raise RuntimeError("no warm server with a standby came up")
        pids = tree(server["pid"])
        rss = sum(_status_kb(pid, "VmRSS") for pid in pids) / 1024
        pss = sum(_pss_kb(pid) for pid in pids) / 1024
        verdict = "ok" if rss <= TARGET_MB else "OVER TARGET"
        print(f"{'warm server + spare + standby, resident':<58} {rss:8.1f} MB over {len(pids)} processes  "
              f"(target <= {TARGET_MB:.0f} MB)  {verdict}")
        print(f"{'  the same, proportional (shared pages once)':<58} {pss:8.1f} MB")
        box.run("hills", "warm", "stop")


if __name__ == "__main__":
    main()
