"""`hills eval DIR... -H NAME`: several submissions in one call, each a full
eval; one JSON line per submission on stdout, in the order given, and the
worst exit code."""

import json
import os

import pytest

from testing.util import run_bin, run_cli
from testing.eval_fixtures import SCORE_EVAL, attempts_log, log_entries, make_hill, submission, tree_of

from hills.base import errors


@pytest.fixture
def hill(project):
    return make_hill("many", SCORE_EVAL)


def _folders(tmp_path, *scores):
    return [submission(tmp_path / f"s{index}", {"score.txt": score}) for index, score in enumerate(scores)]


def test_one_json_line_per_submission_in_order_and_the_worst_exit_code(hill, tmp_path):
    folders = _folders(tmp_path, "3\n", "-1\n", "5\n")
    result = run_cli("eval", *folders, "-H", "many")
    assert result.code == errors.EXIT_NO, result.output
    reports = [json.loads(line) for line in result.out.splitlines()]
    assert [r["metrics"][0]["value"] for r in reports] == [3.0, -1.0, 5.0]
    assert [r["status"] for r in reports] == ["passing", "failing", "passing"]
    logged = [entry["report"] for entry in log_entries(attempts_log("many", tree_of(hill))) if "report" in entry]
    assert logged == reports
    # A summary per submission on stderr, as for one.
    assert [line.strip() for line in result.err.splitlines() if line.strip().startswith("submission")] == [
        f"submission   {folder}" for folder in folders]


def test_json_and_output_file(hill, tmp_path):
    folders = _folders(tmp_path, "1\n", "2\n")
    target = tmp_path / "reports.jsonl"
    result = run_cli("eval", *folders, "-H", "many", "--json", "-o", target)
    assert result.code == 0, result.output
    assert result.err == ""
    assert target.read_text() == result.out
    assert [json.loads(line)["metrics"][0]["value"] for line in target.read_text().splitlines()] == [1.0, 2.0]


def test_a_missing_folder_is_refused_before_any_eval(hill, tmp_path):
    folders = _folders(tmp_path, "1\n")
    result = run_cli("eval", folders[0], tmp_path / "nope", "-H", "many")
    assert result.code == errors.EXIT_USAGE
    assert f"submission '{tmp_path / 'nope'}' is not a folder" in result.error_lines[0]
    assert result.out == "" and not attempts_log("many", tree_of(hill)).exists()


def test_a_refused_submission_gets_its_line_and_the_rest_still_score(hill, tmp_path):
    good = _folders(tmp_path, "4\n")[0]
    leaking = submission(tmp_path / "leak", {"score.txt": "9\n"})
    os.symlink("/etc/hostname", leaking / "outside")
    result = run_cli("eval", leaking, good, "-H", "many", "--json")
    assert result.code == errors.EXIT_NO, result.output
    first, second = [json.loads(line) for line in result.out.splitlines()]
    assert first["status"] == "refused" and "points outside the submission" in first["reason"]
    assert second["status"] == "passing"
    assert "error: submission symlink 'outside' points outside the submission" in result.err


def test_a_hill_that_allows_no_score_stops_them_all(hill, tmp_path):
    (hill / "README.md").write_text("changed\n")
    result = run_cli("eval", *_folders(tmp_path, "1\n", "2\n"), "-H", "many")
    assert result.code == errors.EXIT_NOT_SCORED
    assert "has uncommitted changes" in result.error_lines[0] and result.out == ""


def test_the_executable_takes_several_dirs(hill, tmp_path):
    folders = _folders(tmp_path, "1\n", "-2\n")
    result = run_bin("hills-eval", *folders, "-H", "many", "--json")
    assert result.code == 1, result.output
    assert len(result.out.splitlines()) == 2


@pytest.mark.parametrize("codes, expected", [
    ([], 0), ([0, 0], 0), ([0, 1], 1), ([1, 5, 0], 5), ([5, 2], 2), ([2, 4], 4), ([4, 3, 1], 3),
    ([3, 130, 0], 130), ([0, 77], 77), ([77, 3], 77),
])
def test_worst_exit_code(codes, expected):
    assert errors.worst(codes) == expected


def test_quiet_summary_only_and_against_with_several_dirs(hill, tmp_path):
    folders = _folders(tmp_path, "1\n", "2\n")
    target = tmp_path / "out.jsonl"
    quiet = run_cli("eval", *folders, "-H", "many", "-q", "--summary-only", "-o", target)
    assert quiet.code == 0, quiet.output
    assert quiet.out == "" and quiet.err == "" and len(target.read_text().splitlines()) == 2
    against = run_cli("eval", *folders, "-H", "many", "--against", folders[0], "--repeat", "2")
    assert against.code == 2 and "--against compares one submission" in against.error_lines[0]
