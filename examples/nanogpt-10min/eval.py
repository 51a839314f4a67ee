"""Score a training run: load the checkpoint the solution phase wrote into
the hill's GPT (gpt.py) and measure its loss on a held-out split of the
corpus, validation or, with --final, holdout. The contract is in README.md."""

import json
import math
import os
import re
import sys
from pathlib import Path

CHECKPOINT = "checkpoint.pt"
RUN_RECORD = "run.json"
HILL = Path(__file__).resolve().parent
sys.path.insert(0, str(HILL))  # gpt.py, the architecture
MAX_CHECKPOINT_BYTES = 8 * 1024 ** 3
MAX_RECORD_BYTES = 64 * 1024
BATCH_TOKENS = 1 << 16
# About this many items of the split's bytes, each a run of whole windows:
# the loss is their mean, and their spread tells hills how much of a
# difference between two runs the split's sampling alone makes.
ITEMS = 128
# The loss of a model that knows nothing of bytes: what a failed run scores.
UNTRAINED_LOSS = math.log(256)
# Common memory sizes of accelerators, in GB as vendors name them.
MEMORY_SIZES = (2, 4, 6, 8, 10, 11, 12, 16, 20, 24, 32, 40, 48, 64, 80, 94, 96, 128, 141, 144, 180, 192, 256, 288)
VENDOR_WORDS = re.compile(r"\b(nvidia|geforce|tesla|quadro|amd|radeon|instinct)\b")


class Rejected(Exception):
    """The run's outputs break the contract; the message says where."""


def eval(submission, *, final=False, time_budget_s=600.0, max_steps=0):
    import torch

    submission = Path(submission)
    config = [
        {"name": "gpu", "value": hardware_profile(), "primary": True},
        {"name": "mode", "value": "holdout" if final else "validation", "primary": True},
        {"name": "time_budget_s", "value": float(time_budget_s), "primary": True},
        {"name": "torch", "value": torch.__version__.split("+")[0], "primary": False},
    ]
    details = {"vocab_size": 256, "hardware": hardware_details()}
    try:
        record = _read_record(submission)
        model = _load_model(submission / CHECKPOINT)
    except Rejected as exc:
        details["reason"] = str(exc)
        return {"passed": False, "metrics": [_metric(UNTRAINED_LOSS)], "config": config, "details": details}
    details["parameters"] = model.parameter_count()
    details["model"] = {key: model.config[key] for key in ("n_layer", "n_head", "n_embd", "block_size")}
    details["train_seconds"] = record.get("train_seconds")
    if isinstance(record.get("tokens"), int) and record.get("train_seconds"):
        details["tokens_per_s"] = round(record["tokens"] / record["train_seconds"], 1)
        details["tokens"] = record["tokens"]
    if isinstance(record.get("steps"), int):
        details["steps"] = record["steps"]
    split = "holdout" if final else "validation"
    try:
        loss, items = split_loss(model, (HILL / "private" / f"{split}.bin").read_bytes())
    except Rejected as exc:
        details["reason"] = str(exc)
        return {"passed": False, "metrics": [_metric(UNTRAINED_LOSS)], "config": config, "details": details}
    details["val_bpb"] = loss / math.log(2) if math.isfinite(loss) else None
    if not math.isfinite(loss):
        details["reason"] = "the model's loss on the split is not finite"
        return {"passed": False, "metrics": [_metric(UNTRAINED_LOSS)], "config": config, "details": details}
    details["untrained_loss"] = UNTRAINED_LOSS
    return {"passed": True, "metrics": [_metric(loss)], "config": config, "details": details,
            "items": {"aggregate": "mean", "values": items}}


def _metric(value):
    return {"name": "val_loss", "value": value, "direction": "min"}


def hardware_profile():
    """`cpu`, or the first GPU's normalized name and memory, e.g. `h100-80gb`
    (`2x-h100-80gb` for two): runs on different hardware never rank together."""
    import torch

    if not torch.cuda.is_available():
        return "cpu"
    count = torch.cuda.device_count()
    properties = torch.cuda.get_device_properties(0)
    profile = normalize_gpu(properties.name, properties.total_memory)
    return f"{count}x-{profile}" if count > 1 else profile


def hardware_details():
    """What the profile was made from: the devices' names, and the CPUs."""
    import torch

    found = {"cpus": os.cpu_count()}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            names = [line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")]
        if names:
            found["cpu"] = names[0]
    except OSError:
        pass
    if torch.cuda.is_available():
        found["gpus"] = [torch.cuda.get_device_name(index) for index in range(torch.cuda.device_count())]
    return found


def normalize_gpu(name, total_memory):
    """'NVIDIA H100 80GB HBM3', 85e9 bytes -> 'h100-80gb'."""
    words = re.sub(r"\b(rtx|gtx)\s+", r"\1", VENDOR_WORDS.sub(" ", name.lower()))
    tokens = [token for token in re.split(r"[\s_/()-]+", words) if token]
    model = next((token for token in tokens if re.search(r"\d", token) and not re.fullmatch(r"\d+gb", token)),
                 tokens[0] if tokens else "gpu")
    gib = total_memory / 1024 ** 3
    size = next((size for size in MEMORY_SIZES if size >= gib * 0.97), round(gib))
    return f"{re.sub(r'[^a-z0-9.]', '', model)}-{size}gb"


def _read_record(submission):
    path = submission / RUN_RECORD
    if not path.is_file() or path.stat().st_size > MAX_RECORD_BYTES:
        raise Rejected(f"{RUN_RECORD} is missing: the solution phase did not finish")
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise Rejected(f"{RUN_RECORD} is not valid JSON")
    if not isinstance(record, dict):
        raise Rejected(f"{RUN_RECORD} must be an object")
    return record


def _load_model(path):
    import torch

    from gpt import GPT

    if not path.is_file():
        raise Rejected(f"the run wrote no {CHECKPOINT}")
    size = path.stat().st_size
    if size > MAX_CHECKPOINT_BYTES:
        raise Rejected(f"{CHECKPOINT} is {size} bytes, more than the {MAX_CHECKPOINT_BYTES} allowed")
    try:
        # weights_only: tensors and plain values, never pickled code.
        checkpoint = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as exc:  # a corrupt file raises anything the unpickler meets
        raise Rejected(f"{CHECKPOINT} cannot be loaded: {type(exc).__name__}: {str(exc)[:200]}")
    if not isinstance(checkpoint, dict) or "config" not in checkpoint or "model" not in checkpoint:
        raise Rejected(f"{CHECKPOINT} must hold a mapping with 'config' and 'model' (a state_dict)")
    try:
        model = GPT(checkpoint["config"])
    except ValueError as exc:
        raise Rejected(f"{CHECKPOINT}: {exc}")
    state = checkpoint["model"]
    if not isinstance(state, dict):
        raise Rejected(f"{CHECKPOINT}: 'model' must be a state_dict")
    state = {key.removeprefix("_orig_mod."): value for key, value in state.items()}
    try:
        model.load_state_dict(state, strict=True)
    except (RuntimeError, TypeError) as exc:
        raise Rejected(f"{CHECKPOINT}: the weights do not fit the config: {str(exc).splitlines()[0][:300]}")
    return model


def item_windows(windows):
    """How many windows each item holds: the divisor of `windows` that
    gives the nearest count above ITEMS (or all of them, one each, when it
    has none), so every item is the same size and the loss, their mean,
    is the mean over every byte."""
    for size in range(max(1, windows // ITEMS), 0, -1):
        if windows % size == 0:
            return size
    return 1


def split_loss(model, data):
    """Mean cross-entropy in nats per predicted byte over `data`, cut into
    windows of the model's block_size, each predicting its bytes after the
    first; and the same per item, runs of item_windows() windows keyed by
    their first byte's offset (`bytes-OFFSET`)."""
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = model.to(device).float().eval()
    block = model.config["block_size"]
    tokens = torch.frombuffer(bytearray(data), dtype=torch.uint8).long()
    windows = (len(tokens) - 1) // block
    if windows < 1:
        raise Rejected("the split is shorter than the model's block_size")
    inputs = tokens[:windows * block].view(windows, block)
    targets = tokens[1:windows * block + 1].view(windows, block)
    size = item_windows(windows)
    per_batch = max(size, BATCH_TOKENS // block // size * size)  # whole items to a batch
    sums = []
    with torch.no_grad():
        for start in range(0, windows, per_batch):
            x = inputs[start:start + per_batch].to(device)
            y = targets[start:start + per_batch].to(device)
            logits, _ = model(x)
            each = torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), y.reshape(-1),
                                                     reduction="none").view(-1, size * block)
            sums.extend(each.double().sum(dim=1).tolist())
    items = {f"bytes-{index * size * block}": total / (size * block) for index, total in enumerate(sums)}
    return sum(items.values()) / len(items), items
