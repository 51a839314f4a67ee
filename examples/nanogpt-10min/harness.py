"""The solution phase (hill.yaml `solution:`): run the submission's
train.py, confined with it, owning the clock. train.py gets the training
data and its budget through the environment and must write checkpoint.pt
and exit within `time_budget_s` seconds (its imports and its save
included); past that, plus a short grace for the interpreter to exit, it
is killed and the eval fails. The harness then writes run.json, what the
scoring phase knows of the run; train.py cannot, as it has exited."""

import json
import os
import signal
import subprocess
import sys
import time

HILL = os.path.dirname(os.path.abspath(__file__))
SCRIPT = "train.py"
CHECKPOINT = "checkpoint.pt"
RUN_RECORD = "run.json"
TRAIN_LOG = "train_log.json"
MAX_LOG_BYTES = 64 * 1024


def grace(budget):
    """Seconds past the budget before train.py is killed."""
    return max(2.0, 0.02 * budget)


def params():
    values = json.loads(os.environ.get("HILLS_PARAMS") or "{}")
    return float(values.get("time_budget_s", 600)), int(values.get("max_steps", 0))


def read_log():
    """What train.py says it did (self-reported): {steps, tokens}, or {}."""
    try:
        if os.path.getsize(TRAIN_LOG) > MAX_LOG_BYTES:
            return {}
        with open(TRAIN_LOG, encoding="utf-8") as handle:
            log = json.load(handle)
    except (OSError, ValueError):
        return {}
    if not isinstance(log, dict):
        return {}
    return {key: log[key] for key in ("steps", "tokens", "device")
            if isinstance(log.get(key), (int, str)) and not isinstance(log.get(key), bool)}


def main():
    if not os.path.isfile(SCRIPT):
        print(f"error: the submission has no {SCRIPT}; it must hold a training script that writes {CHECKPOINT}",
              file=sys.stderr)
        return 1
    budget, max_steps = params()
    for stale in (CHECKPOINT, RUN_RECORD, TRAIN_LOG):
        if os.path.lexists(stale):
            os.remove(stale)
    env = dict(os.environ, TRAIN_DATA=os.path.join(HILL, "data", "train.bin"), TIME_BUDGET_S=repr(budget),
               MAX_STEPS=str(max_steps), CHECKPOINT=os.path.abspath(CHECKPOINT),
               PYTHONPATH=HILL + os.pathsep + os.environ.get("PYTHONPATH", ""))
    started = time.monotonic()
    child = subprocess.Popen([sys.executable, SCRIPT], env=env, stdin=subprocess.DEVNULL, start_new_session=True)
    limit = budget + grace(budget)
    try:
        code = child.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        print(f"error: {SCRIPT} ran past its time budget of {budget:g} s and was killed at {limit:g} s",
              file=sys.stderr)
        return 1
    seconds = time.monotonic() - started
    try:
        os.killpg(child.pid, signal.SIGKILL)  # nothing it started outlives it
    except ProcessLookupError:
        pass
    if code != 0:
        print(f"error: {SCRIPT} exited with status {code}", file=sys.stderr)
        return 1
    if not os.path.isfile(CHECKPOINT) or os.path.islink(CHECKPOINT):
        print(f"error: {SCRIPT} wrote no {CHECKPOINT}", file=sys.stderr)
        return 1
    record = {"time_budget_s": budget, "train_seconds": round(seconds, 3), **read_log()}
    with open(RUN_RECORD, "w", encoding="utf-8") as handle:
        json.dump(record, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
