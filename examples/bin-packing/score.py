"""Step 2 of the verifier: check every packing in packings.json and write the
score to $HILLS_RESULT. An invalid packing is an error (exit 1), never a score:
fewer bins is better, so a zero would win."""

import json
import os
import sys

import binpacking


def score(split, packings):
    """The result object for `packings` ({instance name: bins}) on `split`."""
    rows = []
    for name, instance in binpacking.load_instances(split).items():
        if name not in packings:
            raise ValueError(f"instance '{name}' has no packing")
        problem = binpacking.check_packing(instance, packings[name])
        if problem:
            raise ValueError(f"instance '{name}': {problem}")
        rows.append({"zone": name, "score": len(packings[name]), "lower_bound": binpacking.lower_bound(instance)})
    mean_bins = sum(row["score"] for row in rows) / len(rows)
    result = {
        "score": mean_bins,
        "excess_bins": sum(row["score"] - row["lower_bound"] for row in rows),
        "lower_bound": sum(row["lower_bound"] for row in rows) / len(rows),
    }
    seed = binpacking.secret_seed()
    if seed is not None:
        # The replicate's fresh instances must be packed validly too; their
        # excess is a side metric, so the score stays comparable between evals.
        excess = 0
        for name, instance in binpacking.fresh_instances(seed).items():
            if name not in packings:
                raise ValueError(f"fresh instance '{name}' has no packing")
            problem = binpacking.check_packing(instance, packings[name])
            if problem:
                raise ValueError(f"fresh instance '{name}': {problem}")
            excess += len(packings[name]) - binpacking.lower_bound(instance)
        result["fresh_excess_bins"] = excess
    # The score per instance, on both splits: hills resamples them for the
    # score's noise, and keeps a holdout report's values to itself.
    result["items"] = {"metric": "bins", "aggregate": "mean", "values": {row["zone"]: row["score"] for row in rows}}
    if split == "validation":
        # The breakdown is for the climber; the holdout split gets none.
        result["instances"] = {row["zone"]: row["score"] for row in rows}
        worst_first = sorted(rows, key=lambda row: (row["lower_bound"] - row["score"], -row["score"], row["zone"]))
        result["report"] = {
            "version": 1,
            "split": split,
            "overall": {"score": mean_bins, "n_scored": len(rows), "excess_bins": result["excess_bins"]},
            "segment_label": "instance",
            "zones": [dict(row, excess=row["score"] - row["lower_bound"]) for row in worst_first],
        }
    return result


def main():
    split = binpacking.split_from_env()
    try:
        with open("packings.json", encoding="utf-8") as handle:
            packings = json.load(handle)
    except (OSError, ValueError) as exc:
        print(f"error: cannot read packings.json: {exc}", file=sys.stderr)
        return 1
    if not isinstance(packings, dict):
        print("error: packings.json must map instance names to bins", file=sys.stderr)
        return 1
    try:
        result = score(split, packings)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    with open(os.environ["HILLS_RESULT"], "w", encoding="utf-8") as handle:
        json.dump(result, handle)
    print(f"mean bins {result['score']:.4f} (lower bound {result['lower_bound']:.4f}) on {split}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
