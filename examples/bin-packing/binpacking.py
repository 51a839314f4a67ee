"""The bin-packing instances of each split, and what makes a packing valid.

Shared by run.py (which calls the submission) and score.py (which scores what
it returned). Standard library only, Python 3.9 or later.
"""

import json
import math
import os

HERE = os.path.dirname(os.path.realpath(__file__))
# Validation instances are public; the holdout ones live in private/, never in git.
SPLIT_FOLDERS = {"validation": os.path.join(HERE, "data", "validation"),
                 "holdout": os.path.join(HERE, "private", "holdout")}


def split_from_env():
    split = os.environ.get("HILLS_SPLIT", "validation")
    if split not in SPLIT_FOLDERS:
        raise SystemExit(f"error: unknown split '{split}' (expected validation or holdout)")
    return split


def load_instances(split):
    """{name: {"capacity": int, "items": [int, ...]}}, sorted by name."""
    return load_folder(SPLIT_FOLDERS[split])


def load_folder(folder):
    """The instances in `folder`, as load_instances returns them."""
    found = {}
    for filename in sorted(os.listdir(folder)):
        if filename.endswith(".json"):
            with open(os.path.join(folder, filename), encoding="utf-8") as handle:
                found[filename[:-len(".json")]] = json.load(handle)
    if not found:
        raise SystemExit(f"error: no instances in '{folder}'")
    return found


# Instances drawn for each replicate from its secret seed (make_inputs.py):
# a submission that replays answers it knows cannot know these.
FRESH = 2


def secret_seed():
    """The replicate's HILLS_SECRET_SEED, or None outside a hills eval."""
    value = os.environ.get("HILLS_SECRET_SEED", "")
    return int(value) if value.isdigit() else None


def fresh_instances(seed):
    """The fresh instances of `seed`: the same seed, the same instances."""
    import random

    rng = random.Random(seed)
    found = {}
    for number in range(FRESH):
        items = [rng.randint(5, 60) for _ in range(rng.randint(40, 80))]
        found[f"fresh-{number + 1}"] = {"capacity": 100, "items": items}
    return found


def lower_bound(instance):
    """No packing uses fewer bins than the total size over the capacity, rounded up."""
    return math.ceil(sum(instance["items"]) / instance["capacity"])


def check_packing(instance, bins):
    """None when `bins` (lists of item indices) packs every item exactly once
    within the capacity; else why not."""
    items, capacity = instance["items"], instance["capacity"]
    if not isinstance(bins, list) or not all(isinstance(b, list) for b in bins):
        return "pack() must return a list of bins, each a list of item indices"
    seen = set()
    for number, contents in enumerate(bins):
        if not contents:
            return f"bin {number} is empty"
        for index in contents:
            if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(items):
                return f"bin {number} holds {index!r}, which is not an item index (0..{len(items) - 1})"
            if index in seen:
                return f"item {index} is packed twice"
            seen.add(index)
        load = sum(items[index] for index in contents)
        if load > capacity:
            return f"bin {number} holds {load}, over the capacity of {capacity}"
    if len(seen) != len(items):
        missing = sorted(set(range(len(items))) - seen)
        return f"{len(missing)} item(s) are not packed, e.g. item {missing[0]}"
    return None
