"""Run by hills before each solution phase (hill.yaml `solution.generate`),
trusted, in an empty folder that becomes part of ./inputs: write the
replicate's fresh instances, drawn from HILLS_SECRET_SEED, which the
submission never sees. score.py draws the same ones to check them."""

import json
import os

import binpacking


def main():
    seed = binpacking.secret_seed()
    if seed is None:
        raise SystemExit("error: HILLS_SECRET_SEED is not set: make_inputs.py runs inside a hills eval")
    for name, instance in binpacking.fresh_instances(seed).items():
        with open(os.path.join(os.environ.get("HILLS_INPUTS", "."), name + ".json"), "w", encoding="utf-8") as out:
            json.dump(instance, out)


if __name__ == "__main__":
    main()
