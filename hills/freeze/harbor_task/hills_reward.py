"""Harbor's verifier of an exported hill (run by test.sh, in the verifier's
container, standard library only): unbundle the frozen hill, `hills eval`
the agent's submission folder, keep the signed report beside Harbor's logs
and write Harbor's reward file from the report's primary metric.

A scored eval (passing, failing or buggy: exit 0 or 1 with a report)
writes the reward; anything hills refused before scoring (a bundle that
does not check out, a sandbox that cannot start, a bug) writes none and
exits non-zero, so Harbor reports a verifier error, never a zero."""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

REPORT = "hills-report.json"
REWARD = "reward.json"


def reward_of(report: dict[str, Any], failed_reward: float) -> dict[str, float]:
    """Harbor's rewards from a hills report: `reward`, the primary metric
    oriented so that larger is better (negated for a `min` metric) when the
    eval passed, else `failed_reward`; `passed` and `official` as 1 or 0;
    `score`, the primary metric as measured, when the report has one."""
    metrics = report.get("metrics") or []
    primary = metrics[0] if metrics and isinstance(metrics[0], dict) else {}
    value = primary.get("value")
    number = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan
    finite = math.isfinite(number)
    passed = report.get("status") == "passing" and report.get("passed") is True and finite
    rewards: dict[str, float] = {"passed": 1.0 if passed else 0.0,
                                 "official": 1.0 if report.get("official") is True else 0.0}
    if finite:
        rewards["score"] = number
    if passed:
        rewards["reward"] = -number if primary.get("direction") == "min" else number
    else:
        rewards["reward"] = failed_reward
    return rewards


def _run(argv: list[str], cwd: str) -> subprocess.CompletedProcess[str]:
    print("$ " + " ".join(argv), flush=True)
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    sys.stdout.write(done.stdout)
    sys.stdout.write(done.stderr)
    sys.stdout.flush()
    return done


def _write_json(path: str, value: object) -> None:
    temp = path + ".tmp"
    with open(temp, "w", encoding="utf-8") as handle:
        json.dump(value, handle, indent=2, sort_keys=True)
        handle.write("\n")
    os.replace(temp, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Score an exported hill's submission for Harbor.")
    parser.add_argument("--task", required=True, help="the folder holding task.json and the bundle")
    parser.add_argument("--submission", help="the agent's submission folder (default: task.json's)")
    parser.add_argument("--logs", help="Harbor's verifier log folder (default: task.json's)")
    parser.add_argument("--hills", default="hills", help="the hills command (default: hills on PATH)")
    options = parser.parse_args(argv)
    with open(os.path.join(options.task, "task.json"), encoding="utf-8") as handle:
        task = json.load(handle)
    submission = options.submission or task["submission"]
    logs = options.logs or task["logs"]
    os.makedirs(logs, exist_ok=True)
    for stale in (REWARD, REPORT):
        if os.path.lexists(os.path.join(logs, stale)):
            os.unlink(os.path.join(logs, stale))
    project = tempfile.mkdtemp(prefix="hills-harbor-")
    try:
        return _score(task, options.task, options.hills, submission, logs, project)
    finally:
        shutil.rmtree(project, ignore_errors=True)


def _score(task: dict[str, Any], folder: str, hills: str, submission: str, logs: str, project: str) -> int:
    """Unbundle into `project`, evaluate, write the reward; the exit code."""
    unbundled = _run([hills, "unbundle", os.path.join(folder, task["bundle"]),
                      "--into", project, "--json"], project)
    if unbundled.returncode != 0:
        print(f"error: the hill's bundle was refused (exit {unbundled.returncode}); no reward written")
        return 2
    tree_hash = json.loads(unbundled.stdout).get("tree_hash")
    if tree_hash != task["tree_hash"]:
        print(f"error: the bundle holds tree {tree_hash}, not the exported {task['tree_hash']}; no reward written")
        return 2
    report_path = os.path.join(logs, REPORT)
    argv_eval = [hills, "eval", os.path.abspath(submission), "-H", task["hill"], "-o", report_path]
    if task["split"] == "holdout":
        argv_eval.append("--final")
    scored = _run(argv_eval, project)
    if scored.returncode not in (0, 1) or not os.path.isfile(report_path):
        print(f"error: hills did not score the submission (exit {scored.returncode}); no reward written")
        return 3
    with open(report_path, encoding="utf-8") as handle:
        report = json.load(handle)
    rewards = reward_of(report, float(task["failed_reward"]))
    _write_json(os.path.join(logs, REWARD), rewards)
    print(f"hills: {report.get('status')}, reward {rewards['reward']}"
          + (f" ({report['reason']})" if report.get("reason") else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
