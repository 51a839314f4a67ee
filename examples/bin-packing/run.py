"""The solution phase (hill.yaml `solution:`): call pack() from the
submission's solution.py on every instance hills copied into ./inputs and
write the bins to packings.json. It runs confined with the submitted code
and scores nothing; score.py checks what it wrote against the hill's own
instances."""

import importlib.util
import json
import os
import sys

import binpacking


def main():
    solution = os.environ.get("HILLS_SOLUTION", "solution.py")
    if not os.path.isfile(solution):
        raise SystemExit("error: the submission has no solution.py; it must hold one that defines "
                         "pack(items, capacity)")
    spec = importlib.util.spec_from_file_location("solution", solution)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(solution)))
    spec.loader.exec_module(module)
    if not callable(getattr(module, "pack", None)):
        raise SystemExit("error: solution.py defines no pack(items, capacity) function")
    packings = {}
    for name, instance in binpacking.load_folder("inputs").items():
        bins = module.pack(list(instance["items"]), instance["capacity"])
        try:
            json.dumps(bins)
        except (TypeError, ValueError):
            bins = repr(bins)  # score.py refuses it, saying why
        packings[name] = bins
    with open("packings.json", "w", encoding="utf-8") as handle:
        json.dump(packings, handle)


if __name__ == "__main__":
    main()
