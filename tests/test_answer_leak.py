"""The answer-leak scan of `hills check` (issue 12 item 6): held-out
content of private/ in what the solution phase can see (public files,
blobs, README, examples, the variables an eval passes on) fails the check,
naming the place and the private file it came from."""

import json
from pathlib import Path

import pytest

from testing.util import git, run_cli, write_files
from hills.checks import leakscan
from hills.checks.shared import Result

LABELS = "[3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4]\n"
ANSWERS = ('{"q1": "the mitochondria is the powerhouse", "q2": "Ouagadougou-Burkina", "n": 3}\n')
NOTES = "{\n1\n}\nThe held-out split was drawn from batch 7731-B of the survey.\n"
PRIVATE = {"labels.json": LABELS, "answers.json": ANSWERS, "notes.txt": NOTES}


@pytest.fixture
def demo(project: Path) -> Path:
    created = run_cli("new", "demo", "-t", "circle-packing")
    assert created.code == 0, created.output
    hill = Path(created.out.strip())
    write_files(hill / "private", PRIVATE)
    return hill


def scanned(hill: Path) -> Result:
    return leakscan.leak_check(str(hill))


def test_a_hill_with_private_data_and_no_leak_passes(demo: Path) -> None:
    result = scanned(demo)
    assert result.status == "ok", result.detail
    assert result.detail.startswith("7 public files, ") and result.detail.endswith("against 3 private files")
    assert " installed files scanned " in result.detail


@pytest.mark.parametrize("rel, content, words", [
    ("examples/labels.json", LABELS, "'examples/labels.json' is a copy of 'private/labels.json'"),
    ("README.md", "# demo\n\nSee:\n> The held-out split was drawn from batch 7731-B of the survey.\n",
     "'README.md' line 4 holds a line of 'private/notes.txt'"),
    ("data/train.py", "TRAIN = [0, 0]\nLABELS = [3,1,4,1,5,9,2,6,5,3,5,8,9,7,9,3]\n",
     "'data/train.py' line 2 holds a sequence of numbers of 'private/labels.json': '3, 1, 4, 1, 5, 9"),
    ("tests/test_answers.py", 'def test_q2():\n    assert answer("q2") == "Ouagadougou-Burkina"\n',
     "'tests/test_answers.py' line 2 holds a value of 'private/answers.json': 'Ouagadougou-Burkina'"),
], ids=["copied labels", "readme quotes a line", "embedded label sequence", "test holds an answer"])
def test_held_out_content_in_a_public_file_fails_naming_it(demo: Path, rel: str, content: str, words: str) -> None:
    write_files(demo, {rel: content})
    result = scanned(demo)
    assert result.status == "fail"
    first = result.detail.splitlines()[0]
    assert first == "held-out content where submitted code can see it: " + first.split(": ", 1)[1]
    assert words in first, result.detail
    assert "hint: submitted code can read every public file" in result.detail


def test_an_environment_variable_holding_a_private_value_fails(demo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENBLAS_CORETYPE", "the mitochondria is the powerhouse")
    result = scanned(demo)
    assert result.status == "fail"
    assert "'$OPENBLAS_CORETYPE' holds a value of 'private/answers.json'" in result.detail


def test_short_common_private_lines_do_not_flag_ordinary_code(demo: Path) -> None:
    write_files(demo / "private", {"common.txt": "{\n}\n1\n0\nimport numpy as np\nreturn result\n"
                                                 "if __name__ == \"__main__\":\n",
                                   "small.json": '{"capacity": 100, "ids": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]}\n'})
    write_files(demo, {"helper.py": "import numpy as np\n\n\ndef f():\n    return {\n        1: 0\n    }\n\n\n"
                                    "if __name__ == \"__main__\":\n    print(list(range(1, 11)), 100)\n"})
    result = scanned(demo)
    assert result.status == "ok", result.detail


def test_a_binary_private_file_is_compared_by_digest_only(demo: Path) -> None:
    blob = bytes(range(256)) * 64
    write_files(demo / "private", {"weights.bin": blob})
    write_files(demo, {"examples/notes.txt": "weights live elsewhere\n"})
    assert scanned(demo).status == "ok"
    write_files(demo, {"examples/weights.bin": blob})
    result = scanned(demo)
    assert result.status == "fail"
    assert "'examples/weights.bin' is a copy of 'private/weights.bin'" in result.detail


def test_csv_cells_and_columns_count_but_not_the_header(demo: Path) -> None:
    write_files(demo / "private", {"holdout.csv": "identifier,expected_label_name\n"
                                                  + "".join(f"{i},{(i * 7) % 5}\n" for i in range(20))})
    write_files(demo, {"README.md": "# demo\n\nColumns: identifier,expected_label_name\n"})
    assert scanned(demo).status == "ok"
    write_files(demo, {"examples/guess.txt": " ".join(str((i * 7) % 5) for i in range(20)) + "\n"})
    result = scanned(demo)
    assert "'examples/guess.txt' line 1 holds a sequence of numbers of 'private/holdout.csv'" in result.detail


@pytest.mark.parametrize("template", ["circle-packing", "bin-packing", "default"])
def test_the_templates_pass(project: Path, template: str) -> None:
    created = run_cli("new", "t", "-t", template)
    assert created.code == 0, created.output
    result = scanned(Path(created.out.strip()))
    assert result.status == "ok", result.detail


@pytest.mark.slow
def test_check_and_commit_fail_and_leave_nothing_behind(demo: Path) -> None:
    write_files(demo, {"examples/labels.json": LABELS})
    checked = run_cli("check", "demo", "--no-tests")
    assert checked.code == 1, checked.output
    failing = [line.strip() for line in checked.out.splitlines() if line.strip().startswith("FAIL")]
    assert failing == ["FAIL  answer leak         held-out content where submitted code can see it: "
                       "'examples/labels.json' is a copy of 'private/labels.json'"]
    assert "demo: 1 check(s) failed" in checked.out
    committed = run_cli("commit", "demo", "-m", "first")
    assert committed.code == 1
    assert committed.error_lines[0] == ("error: hill 'demo' failed check 'answer leak': held-out content where "
                                        "submitted code can see it: 'examples/labels.json' is a copy of "
                                        "'private/labels.json'")
    assert "nothing was committed" in committed.err
    assert git(demo, "rev-parse", "--verify", "-q", "refs/heads/main").code != 0
    assert not (demo / "private.lock").exists()
    (demo / "examples" / "labels.json").unlink()
    committed = run_cli("commit", "demo", "-m", "first")
    assert committed.code == 0, committed.output


@pytest.mark.slow
def test_the_gate_judges_again_when_private_data_or_a_variable_changes(demo: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    assert run_cli("commit", "demo", "-m", "first").code == 0
    write_files(demo, {"examples/hint.txt": "a note on the hold-out\n"})
    assert run_cli("commit", "demo", "-m", "hint").code == 0
    # Only private/ changes: a remembered verdict must not cover it.
    write_files(demo / "private", {"hint.txt": "a note on the hold-out\n"})
    committed = run_cli("commit", "demo", "-m", "private hint")
    assert committed.code == 1
    assert "failed check 'answer leak'" in committed.error_lines[0]
    (demo / "private" / "hint.txt").unlink()
    monkeypatch.setenv("TZ", "Ouagadougou-Burkina")
    committed = run_cli("commit", "demo", "-m", "again")
    assert committed.code == 1
    assert "'$TZ' holds a value of 'private/answers.json'" in committed.error_lines[0]


HOLDOUT_ROWS = "id,a,b,c,d,e,f,g,h,i,j\n" + "".join(
    f"r{row},{','.join(str((row * 31 + col * 17) % 97) for col in range(10))}\n" for row in range(5))


@pytest.mark.slow
def test_held_out_content_in_the_hills_environment_fails_naming_it(demo: Path) -> None:
    """A package of the hill's environment that ships held-out data (as
    scikit-learn ships the digits with their labels): a whole copy of a
    private file, and the held-out rows with their labels inside a .gz
    file. Before the package is there, the same hill passes."""
    import gzip

    from hills.disk import uvenv

    write_files(demo / "private", {"holdout/inputs.csv": HOLDOUT_ROWS})
    checked = run_cli("check", "demo", "--no-tests")
    assert checked.code == 0, checked.output
    env_dir = leakscan.work_env(str(demo))
    [site] = Path(env_dir).glob("lib/python*/site-packages")
    package = write_files(site / "leaky", {"inputs.csv": HOLDOUT_ROWS})
    labelled = "".join(line.split(",", 1)[1] + ",7\n" for line in HOLDOUT_ROWS.splitlines()[1:])
    (package / "table.csv.gz").write_bytes(gzip.compress(labelled.encode()))
    uvenv._seal(env_dir)  # as a package in uv.lock would have built it
    checked = run_cli("check", "demo", "--no-tests")
    assert checked.code == 1, checked.output
    assert "rebuilding" not in checked.err, "the environment must be used as planted"
    assert (f"'{package / 'inputs.csv'}' (the hill's environment) is a copy of 'private/holdout/inputs.csv'"
            in checked.out), checked.out
    assert (f"'{package / 'table.csv.gz'}' member 'table.csv' (the hill's environment) line 1 holds a row of "
            "'private/holdout/inputs.csv'") in checked.out, checked.out
    assert "hint: submitted code can read what is installed where it runs" in checked.out


def test_a_private_file_the_hills_package_ships_fails_naming_it(demo: Path) -> None:
    """The hills package itself, where the templates' held-out data used
    to ship: a private file that is a copy of a shipped file is found there."""
    from hills.disk import hill

    shipped = Path(str(hill.shipped("examples"))) / "bin-packing" / "data" / "validation" / "v01-uniform.json"
    write_files(demo / "private", {"holdout/h01.json": shipped.read_bytes()})
    result = leakscan.leak_check(str(demo))
    assert result.status == "fail"
    assert f"'{shipped}' (the hills package) is a copy of 'private/holdout/h01.json'" in result.detail
    (demo / "private" / "holdout" / "h01.json").write_text(
        json.dumps({"capacity": 100, "items": json.loads(shipped.read_text())["items"][:-1]}))
    result = leakscan.leak_check(str(demo))
    assert result.status == "fail", "the items in order are still there"
    assert f"'{shipped}' (the hills package) line 1 holds a sequence of numbers of 'private/holdout/h01.json'" \
        in result.detail


def test_a_short_private_file_matches_installed_files_by_chance_only(demo: Path) -> None:
    """`42` is the default template's example answer, shipped with hills: a
    private `42` is that file's twin by chance, not a leak. In the hill's
    own files, a copy counts whatever its size."""
    from hills.disk import hill

    shipped = Path(str(hill.shipped("examples"))) / "default" / "examples" / "basic" / "answer.txt"
    assert shipped.read_text() == "42\n"
    write_files(demo / "private", {"answer.txt": "42\n"})
    assert scanned(demo).status == "ok"
    write_files(demo, {"examples/answer.txt": "42\n"})
    result = scanned(demo)
    assert result.status == "fail" and "'examples/answer.txt' is a copy of 'private/answer.txt'" in result.detail
