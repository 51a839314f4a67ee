"""The solution phase (hill.yaml `solution:`): call predict() from the
submission's solution.py with the training split and the split's inputs,
copied into ./inputs, and write the predicted labels to predictions.json.
It runs confined with the submitted code and scores nothing; eval.py
checks what it wrote against the labels in private/."""

import csv
import importlib.util
import json
import os
import sys

HILL = os.path.dirname(os.path.abspath(__file__))


def read_table(path):
    with open(path, encoding="ascii", newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader)
        return header, list(reader)


def main():
    solution = sys.argv[1] if len(sys.argv) > 1 else "solution.py"
    if not os.path.isfile(solution):
        raise SystemExit("error: the submission has no solution.py; it must hold one that defines "
                         "predict(train_x, train_y, test_x)")
    spec = importlib.util.spec_from_file_location("solution", solution)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(solution)))
    spec.loader.exec_module(module)
    if not callable(getattr(module, "predict", None)):
        raise SystemExit("error: solution.py defines no predict(train_x, train_y, test_x) function")
    _, train = read_table(os.path.join(HILL, "data", "train.csv"))
    train_x = [[int(value) for value in row[:-1]] for row in train]
    train_y = [int(row[-1]) for row in train]
    _, test = read_table(os.path.join("inputs", "inputs.csv"))
    ids = [row[0] for row in test]
    test_x = [[int(value) for value in row[1:]] for row in test]
    predicted = module.predict(train_x, train_y, test_x)
    try:
        predicted = [int(label) for label in predicted]
    except (TypeError, ValueError):
        raise SystemExit("error: predict() must return one integer label per test row")
    if len(predicted) != len(ids):
        raise SystemExit(f"error: predict() returned {len(predicted)} labels for {len(ids)} test rows")
    with open("predictions.json", "w", encoding="utf-8") as handle:
        json.dump(dict(zip(ids, predicted)), handle)


if __name__ == "__main__":
    main()
