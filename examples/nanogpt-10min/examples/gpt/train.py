"""A small GPT trained on the corpus's bytes until the clock runs out,
nanoGPT style: AdamW, a warm-up then a cosine decay driven by the time
spent, bfloat16 autocast on a GPU. hills runs it with the environment:

  TRAIN_DATA      the training split, raw bytes
  TIME_BUDGET_S   seconds this script may run, its imports and the save included
  MAX_STEPS       stop after this many steps as well (0: the clock alone)
  CHECKPOINT      where to save {"config": ..., "model": state_dict}

The model is the hill's (gpt.py, importable here); this file chooses its
sizes and how it is trained."""

import json
import math
import os
import time



def process_age():
    """Seconds since this process started, when the harness's clock began:
    the interpreter's own start (slow on a loaded machine) counts against
    the budget too. 0 where /proc cannot say."""
    try:
        with open("/proc/self/stat", encoding="ascii") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22, starttime, in ticks since boot
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - started
    except (OSError, ValueError, IndexError, AttributeError):
        return 0.0
    return age if 0.0 <= age < 60.0 else 0.0


STARTED = time.monotonic() - process_age()

GPU_CONFIG = {"n_layer": 6, "n_head": 6, "n_embd": 384, "block_size": 256}
GPU_BATCH, GPU_LEARNING_RATE = 64, 1e-3
# A CPU trains a model a tenth the size.
CPU_CONFIG = {"n_layer": 2, "n_head": 4, "n_embd": 128, "block_size": 64}
CPU_BATCH, CPU_LEARNING_RATE = 16, 2e-3
WARMUP_STEPS, MIN_LR_RATIO = 20, 0.1

# When to stop, from this run's own clock: another step starts only if
# SLOWDOWN times the slowest of the last RECENT steps, then the save
# (timed once, SAVE_SLOWDOWN times over: the disk may be slower than
# memory) and EXIT_S to write the log and leave, still fit in the budget.
# A loaded machine slows every step; the margin grows with them.
RECENT, SLOWDOWN, SAVE_SLOWDOWN, EXIT_S = 8, 2.0, 3.0, 0.5
# Before the first step there is no step time to go by: it starts only
# while at least this share of the budget is left.
FIRST_STEP_SHARE = 0.5


def elapsed():
    return time.monotonic() - STARTED


def margin(recent_steps, save_seconds):
    """Seconds that must be left for one more step, the save and the exit."""
    slowest = max(recent_steps[-RECENT:]) if recent_steps else 0.0
    return SLOWDOWN * slowest + SAVE_SLOWDOWN * save_seconds + EXIT_S


def another_step(now, budget, recent_steps, save_seconds):
    """Whether a step may start at `now` seconds into a run of `budget`."""
    if not recent_steps:
        return now + EXIT_S < budget * (1 - FIRST_STEP_SHARE)
    return now + margin(recent_steps, save_seconds) <= budget


def main():
    import io

    import torch

    from gpt import GPT

    budget = float(os.environ["TIME_BUDGET_S"])
    max_steps = int(os.environ.get("MAX_STEPS") or 0)
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    config = GPU_CONFIG if cuda else CPU_CONFIG
    batch, learning_rate = (GPU_BATCH, GPU_LEARNING_RATE) if cuda else (CPU_BATCH, CPU_LEARNING_RATE)
    torch.manual_seed(1337)
    with open(os.environ["TRAIN_DATA"], "rb") as handle:
        data = torch.frombuffer(bytearray(handle.read()), dtype=torch.uint8)
    model = GPT(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, betas=(0.9, 0.99), weight_decay=0.1)
    block = config["block_size"]
    generator = torch.Generator().manual_seed(1337)
    steps, tokens, loss = 0, 0, None
    step_times, save_seconds = [], 0.0
    # The schedule's length: the time the steps may take, as first guessed.
    schedule_s = max(budget - EXIT_S - elapsed(), 1e-9)
    while True:
        now = elapsed()
        if max_steps and steps >= max_steps or not another_step(now, budget, step_times, save_seconds):
            break
        # The schedule follows the clock, or the steps when they are capped,
        # so that a capped run is the same run on any machine.
        progress = steps / max_steps if max_steps else min(1.0, now / schedule_s)
        ratio = min(1.0, (steps + 1) / WARMUP_STEPS)
        ratio *= MIN_LR_RATIO + (1 - MIN_LR_RATIO) * 0.5 * (1 + math.cos(math.pi * progress))
        for group in optimizer.param_groups:
            group["lr"] = learning_rate * ratio
        starts = torch.randint(len(data) - block - 1, (batch,), generator=generator)
        x = torch.stack([data[i:i + block] for i in starts]).long().to(device, non_blocking=True)
        y = torch.stack([data[i + 1:i + 1 + block] for i in starts]).long().to(device, non_blocking=True)
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=cuda):
            _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if cuda:
            torch.cuda.synchronize()  # a step's time is its work, not its launch
        steps += 1
        tokens += batch * block
        step_times.append(elapsed() - now)
        if steps == 1:
            # The save, timed once into memory, so the margin holds it.
            saved = time.monotonic()
            torch.save({"config": config, "model": model.state_dict()}, io.BytesIO())
            save_seconds = time.monotonic() - saved
            schedule_s = max(budget - margin(step_times, save_seconds), 1e-9)
    torch.save({"config": config, "model": model.state_dict()}, os.environ["CHECKPOINT"])
    with open("train_log.json", "w", encoding="utf-8") as handle:
        json.dump({"steps": steps, "tokens": tokens, "device": device}, handle)
    last = f", last loss {loss.item():.4f}" if loss is not None else ""
    print(f"trained {steps} steps, {tokens} tokens{last} in {elapsed():.1f} s", flush=True)


if __name__ == "__main__":
    main()
    # The checkpoint and the log are written and closed: leave without the
    # interpreter's teardown of torch, which a loaded machine makes slow.
    os._exit(0)
