"""Build the hill's splits, once, when `hills new` creates the hill, from
digits.csv.gz: the optical recognition of handwritten digits data set
(E. Alpaydin and C. Kaynak, UCI Machine Learning Repository, CC BY 4.0),
in the copy scikit-learn ships, 1797 images of 8x8 pixels (0 to 16) with
their digit. The rows are shuffled with a fixed seed and split into train
(60%, with labels), validation and holdout (20% each, labels in
private/). The source file holds every label, so it is removed from the
new hill once split; the locks freeze what this script wrote."""

import csv
import gzip
import os
import random
import sys

SOURCE = "digits.csv.gz"
SEED = 20260101
FEATURES = 64


def rows(path):
    with gzip.open(path, "rt", encoding="ascii", newline="") as handle:
        return [[int(value) for value in row] for row in csv.reader(handle) if row]


def write(path, header, table):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="ascii", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(table)


def build(hill_dir):
    data = rows(os.path.join(hill_dir, SOURCE))
    assert all(len(row) == FEATURES + 1 for row in data), "every row is 64 pixels and a label"
    order = list(range(len(data)))
    random.Random(SEED).shuffle(order)
    cut_validation, cut_holdout = int(len(order) * 0.6), int(len(order) * 0.8)
    splits = {"train": order[:cut_validation], "validation": order[cut_validation:cut_holdout],
              "holdout": order[cut_holdout:]}
    pixels = [f"p{index}" for index in range(FEATURES)]
    write(os.path.join(hill_dir, "data", "train.csv"), pixels + ["label"], [data[i] for i in splits["train"]])
    inputs = {"validation": os.path.join("data", "validation", "inputs.csv"),
              "holdout": os.path.join("private", "holdout", "inputs.csv")}
    for split, rel in inputs.items():
        ids = [f"{split[0]}{index:04d}" for index in range(len(splits[split]))]
        write(os.path.join(hill_dir, rel), ["id"] + pixels,
              [[row_id] + data[i][:FEATURES] for row_id, i in zip(ids, splits[split])])
        write(os.path.join(hill_dir, "private", "labels", f"{split}.csv"), ["id", "label"],
              [[row_id, data[i][FEATURES]] for row_id, i in zip(ids, splits[split])])
    os.remove(os.path.join(hill_dir, SOURCE))
    return {split: len(ids) for split, ids in splits.items()}


if __name__ == "__main__":
    print(build(sys.argv[1] if len(sys.argv) > 1 else "."), file=sys.stderr)
