"""Draw the hill's held-out instances, once, when `hills new` creates the
hill, into private/holdout/: six instances of the four kinds the
validation split shows (uniform, large and small items, and triplets that
fill every bin exactly), from fresh randomness (os.urandom) whose seed is
kept nowhere. So no copy of them exists outside this hill's private/,
and packings worked out for another hill's instances are of no use here.
The locks freeze what this script wrote; running it again draws others.
Standard library only: `hills new` runs it with its own interpreter."""

import json
import os
import random
import sys

CAPACITY = 100


def uniform(rng):
    return [rng.randint(10, 60) for _ in range(rng.randint(40, 55))]


def large(rng):
    return [rng.randint(25, 70) for _ in range(rng.randint(28, 34))]


def small(rng):
    return [rng.randint(2, 35) for _ in range(rng.randint(55, 68))]


def triplets(rng):
    """Items three to a bin, each three filling it exactly, shuffled."""
    items = []
    for _ in range(rng.randint(10, 15)):
        first = rng.randint(26, 44)
        second = rng.randint(max(22, CAPACITY - first - 48), min(48, CAPACITY - first - 22))
        items += [first, second, CAPACITY - first - second]
    rng.shuffle(items)
    return items


KINDS = [("h01-uniform", uniform), ("h02-large", large), ("h03-triplets", triplets),
         ("h04-small", small), ("h05-uniform", uniform), ("h06-triplets", triplets)]


def build(hill_dir, rng=None):
    rng = rng or random.Random(os.urandom(32))
    folder = os.path.join(hill_dir, "private", "holdout")
    os.makedirs(folder, exist_ok=True)
    for name, kind in KINDS:
        with open(os.path.join(folder, name + ".json"), "w", encoding="utf-8") as handle:
            json.dump({"capacity": CAPACITY, "items": kind(rng)}, handle)
            handle.write("\n")
    return [name for name, _ in KINDS]


if __name__ == "__main__":
    print(build(sys.argv[1] if len(sys.argv) > 1 else "."), file=sys.stderr)
