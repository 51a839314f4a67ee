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

STARTED = time.monotonic()

import torch  # noqa: E402

from gpt import GPT  # noqa: E402

BUDGET = float(os.environ["TIME_BUDGET_S"])
MAX_STEPS = int(os.environ.get("MAX_STEPS") or 0)
# Seconds kept back for saving the checkpoint and exiting.
RESERVE = 1.0 + 0.02 * BUDGET

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"
if CUDA:
    CONFIG = {"n_layer": 6, "n_head": 6, "n_embd": 384, "block_size": 256}
    BATCH, LEARNING_RATE = 64, 1e-3
else:  # a CPU trains a model a tenth the size
    CONFIG = {"n_layer": 2, "n_head": 4, "n_embd": 128, "block_size": 64}
    BATCH, LEARNING_RATE = 16, 2e-3
WARMUP_STEPS, MIN_LR_RATIO = 20, 0.1


def elapsed():
    return time.monotonic() - STARTED


def main():
    torch.manual_seed(1337)
    with open(os.environ["TRAIN_DATA"], "rb") as handle:
        data = torch.frombuffer(bytearray(handle.read()), dtype=torch.uint8)
    model = GPT(CONFIG).to(DEVICE)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, betas=(0.9, 0.99), weight_decay=0.1)
    block = CONFIG["block_size"]
    generator = torch.Generator().manual_seed(1337)
    steps, tokens, step_seconds, loss = 0, 0, 0.0, None
    train_until = BUDGET - RESERVE
    while True:
        now = elapsed()
        if MAX_STEPS and steps >= MAX_STEPS or now + step_seconds > train_until:
            break
        # The schedule follows the clock, or the steps when they are capped,
        # so that a capped run is the same run on any machine.
        progress = steps / MAX_STEPS if MAX_STEPS else min(1.0, now / max(train_until, 1e-9))
        ratio = min(1.0, (steps + 1) / WARMUP_STEPS)
        ratio *= MIN_LR_RATIO + (1 - MIN_LR_RATIO) * 0.5 * (1 + math.cos(math.pi * progress))
        for group in optimizer.param_groups:
            group["lr"] = LEARNING_RATE * ratio
        starts = torch.randint(len(data) - block - 1, (BATCH,), generator=generator)
        x = torch.stack([data[i:i + block] for i in starts]).long().to(DEVICE, non_blocking=True)
        y = torch.stack([data[i + 1:i + 1 + block] for i in starts]).long().to(DEVICE, non_blocking=True)
        with torch.autocast(device_type=DEVICE, dtype=torch.bfloat16, enabled=CUDA):
            _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        steps += 1
        tokens += BATCH * block
        step_seconds = (elapsed() - now) if steps > 1 else 0.0
    torch.save({"config": CONFIG, "model": model.state_dict()}, os.environ["CHECKPOINT"])
    with open("train_log.json", "w", encoding="utf-8") as handle:
        json.dump({"steps": steps, "tokens": tokens, "device": DEVICE}, handle)
    last = f", last loss {loss.item():.4f}" if loss is not None else ""
    print(f"trained {steps} steps, {tokens} tokens{last} in {elapsed():.1f} s")


if __name__ == "__main__":
    main()
