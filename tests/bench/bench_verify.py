"""hills verify against a bare interpreter start, and hills-chain verify of
a 100,000-line attempts log."""

import os
import sys
import time

from .common import Sandbox, compared, interleaved, timed

LINES = 100_000


def main():
    with Sandbox() as box:
        box.run("hills", "new", "cp", "-t", "circle-packing")
        box.run("hills", "commit", "cp", "-m", "initial")
        report = os.path.join(box.root, "report.json")
        box.run("hills", "eval", os.path.join(box.hill_dir("cp"), "examples", "grid"), "-H", "cp", "-o", report)
        compared("hills verify vs python3 -c pass",
                 interleaved(lambda: box.run(sys.executable, "-c", "pass"), lambda: box.run("hills", "verify", report),
                             rounds=15), 4.0)

        os.environ["HILLS_HOME"] = box.home
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
        from hills.evidence import chain, trust

        key = trust.machine_keys(for_signing=True)
        log = os.path.join(box.root, "big.jsonl")
        record = {"report": {"hill": "cp", "status": "passing", "metrics": [{"name": "sum_radii", "value": 2.5,
                                                                            "direction": "max"}]}}
        with open(log, "wb") as handle:
            prev = ""
            for seq in range(LINES):
                data, prev = chain.encode_entry(record, seq, prev, key)
                handle.write(data)
        elapsed = timed(lambda: box.run("hills-chain", "verify", log), repeat=3)
        started = time.perf_counter()
        result = chain.verify(log, trust.machine_keys())
        in_process = time.perf_counter() - started
        assert result.ok and result.count == LINES, result.problems
        print(f"{'hills-chain verify, 100,000 lines (process)':<58} {elapsed:8.3f}s  "
              f"= {LINES / elapsed:,.0f} lines/s  (target < 1 s)  {'ok' if elapsed < 1 else 'OVER TARGET'}")
        print(f"{'chain.verify, 100,000 lines (in process)':<58} {in_process:8.3f}s  "
          f"= {LINES / in_process:,.0f} lines/s")


if __name__ == "__main__":
    main()
