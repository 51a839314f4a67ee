"""The stand-in for the example's train.py in the copies of it that the
leak probe and the cheat corpus of `hills check` evaluate (hill.yaml
`checks: solution:`): the same contract as train.py, in a second or two
where the example trains for a minute. It builds the hill's GPT at the
smallest sizes, takes a few optimizer steps on the training split and saves
the checkpoint, so the corpus's cheats are held to a real, if poor, score.
Every other evaluation runs the submission's own train.py."""

import json
import os

CONFIG = {"n_layer": 1, "n_head": 2, "n_embd": 32, "block_size": 64}
STEPS, BATCH = 2, 8


def main():
    import torch

    from gpt import GPT

    torch.manual_seed(1337)
    with open(os.environ["TRAIN_DATA"], "rb") as handle:
        data = torch.frombuffer(bytearray(handle.read()), dtype=torch.uint8)
    model = GPT(CONFIG)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    block = CONFIG["block_size"]
    generator = torch.Generator().manual_seed(1337)
    for _ in range(STEPS):
        starts = torch.randint(len(data) - block - 1, (BATCH,), generator=generator)
        x = torch.stack([data[i:i + block] for i in starts]).long()
        y = torch.stack([data[i + 1:i + 1 + block] for i in starts]).long()
        _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    torch.save({"config": CONFIG, "model": model.state_dict()}, os.environ["CHECKPOINT"])
    with open("train_log.json", "w", encoding="utf-8") as handle:
        json.dump({"steps": STEPS, "tokens": STEPS * BATCH * block, "device": "cpu"}, handle)


if __name__ == "__main__":
    main()
    os._exit(0)  # as train.py: no teardown of torch
