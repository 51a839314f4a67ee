"""The dataset template end to end: `hills new -t dataset` draws and
splits its digit images at creation, `hills commit` freezes the inputs as blobs
and the labels in private/, the nearest-centroid example scores its
accuracy on validation, `--final` scores the holdout split, and the
holdout budget of 3 looks per version is kept."""

import json
import math

import pytest

from testing.util import new_and_commit, run_cli, write_files


@pytest.mark.slow
def test_the_digits_hill_scores_validation_and_a_budgeted_holdout(project):
    hill_dir = new_and_commit("digits", "dataset")
    assert {"data/train.csv", "data/validation/inputs.csv"} <= set(
        line.split('"')[1] for line in (hill_dir / "blobs.lock").read_text().splitlines() if line.startswith("[files"))
    private_lock = (hill_dir / "private.lock").read_text()
    for rel in ("holdout/inputs.csv", "labels/validation.csv", "labels/holdout.csv"):
        assert rel in private_lock, rel
    example = hill_dir / "examples" / "nearest-centroid"
    scored = run_cli("eval", "-H", "digits", example)
    assert scored.code == 0, scored.output
    report = scored.report
    assert report["metrics"][0]["name"] == "accuracy" and report["metrics"][0]["direction"] == "max"
    # The images are fresh for each hill: nearest centroid scores about 0.8,
    # far above chance (0.1), short of a nearest neighbour (about 0.95).
    assert 0.6 < report["metrics"][0]["value"] < 0.97
    assert math.isclose(sum(report["instances"].values()) / 10, report["metrics"][0]["value"], abs_tol=0.05)
    assert {"name": "mode", "value": "validation", "primary": True} in report["config"]
    for look in range(3):
        final = run_cli("eval", "-H", "digits", example, "--final")
        assert final.code == 0, final.output
        assert {"name": "mode", "value": "holdout", "primary": True} in final.report["config"]
        assert "instances" not in final.report
    spent = run_cli("eval", "-H", "digits", example, "--final")
    assert spent.code == 5
    assert "budget" in spent.err and spent.error_lines, spent.err


@pytest.mark.slow
def test_a_submission_that_breaks_the_contract_is_buggy_with_the_reason(project, tmp_path):
    new_and_commit("digits", "dataset")
    submission = tmp_path / "too-few"
    submission.mkdir()
    (submission / "solution.py").write_text("def predict(train_x, train_y, test_x):\n    return [0]\n")
    result = run_cli("eval", "-H", "digits", submission)
    assert result.code == 1
    assert result.report["status"] == "buggy"
    assert "predict() returned 1 labels for 359 test rows" in result.report["reason"]


def shipped_digit_tables():
    """{64 pixels: label} from every table of digit rows the hills package
    ships (its own folders and the templates, .csv and .csv.gz), read the
    way the lookup-table attack read digits.csv.gz when the template
    shipped it."""
    import csv
    import gzip
    import os

    from hills.checks import leakscan

    table = {}
    for _, folder in leakscan.installed_places(None):
        for current, _, files in os.walk(folder):
            for name in files:
                path = os.path.join(current, name)
                if not name.endswith((".csv", ".csv.gz")):
                    continue
                opener = gzip.open if name.endswith(".gz") else open
                with opener(path, "rt", newline="") as handle:
                    for row in csv.reader(handle):
                        cells = [cell for cell in row if cell.lstrip("-").isdigit()]
                        if len(cells) == 65:
                            table[json.dumps([int(cell) for cell in cells[:64]])] = int(cells[64])
    return table


LOOKUP = '''import json, pathlib

TABLE = json.loads((pathlib.Path(__file__).parent / "table.json").read_text())


def predict(train_x, train_y, test_x):
    return [TABLE.get(json.dumps(pixels), 0) for pixels in test_x]
'''


@pytest.mark.slow
def test_a_lookup_table_of_what_hills_ships_scores_chance_on_the_holdout(project, tmp_path):
    """The attack: a solution.py that answers from a table of labelled rows
    found in the installed package (it scored 1.0 on --final while the
    template shipped digits.csv.gz). Now the images are drawn at `hills
    new`: the package holds no row of them, and the table answers 0 to all,
    right only on the tenth that are zeros. The control: the same table
    holding this hill's own held-out rows, as a shipped copy would, scores
    1.0."""
    import csv

    hill_dir = new_and_commit("digits", "dataset")
    honest = run_cli("eval", "-H", "digits", hill_dir / "examples" / "nearest-centroid", "--final")
    assert honest.code == 0, honest.output
    honest_accuracy = honest.report["metrics"][0]["value"]
    table = shipped_digit_tables()
    attack = write_files(tmp_path / "lookup", {"solution.py": LOOKUP, "table.json": json.dumps(table)})
    looked_up = run_cli("eval", "-H", "digits", attack, "--final")
    assert looked_up.code == 0, looked_up.output
    assert looked_up.report["status"] == "passing" and looked_up.report["final"] is True
    accuracy = looked_up.report["metrics"][0]["value"]
    labels = list(csv.DictReader((hill_dir / "private" / "labels" / "holdout.csv").open(newline="")))
    assert accuracy == sum(row["label"] == "0" for row in labels) / len(labels) < 0.2 < honest_accuracy
    with (hill_dir / "private" / "holdout" / "inputs.csv").open(newline="") as handle:
        inputs = {row[0]: [int(cell) for cell in row[1:]] for row in list(csv.reader(handle))[1:]}
    table.update({json.dumps(inputs[row["id"]]): int(row["label"]) for row in labels})
    write_files(attack, {"table.json": json.dumps(table)})
    control = run_cli("eval", "-H", "digits", attack, "--final")
    assert control.code == 0, control.output
    assert control.report["metrics"][0]["value"] == 1.0
