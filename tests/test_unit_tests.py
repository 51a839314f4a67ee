"""Frozen unit tests: declared in hill.yaml, frozen with the hill, run
against the submission after the first replicate. passing, failing (the
suite fails) and buggy (it hangs) reports; only passing ones rank."""

import json
import os

import pytest

from testing.command_fixtures import UNIT_TEST, candidate, make_command_hill, run_dir
from testing.eval_fixtures import hills, on_machine

HILL = "frozen"
# Unit tests that also hang when the submission holds `hang-tests`.
HANGING_UNIT_TEST = UNIT_TEST.replace('Path("unit-tests-ran.txt")',
                                     'Path("hang-tests").exists() and __import__("time").sleep(3600)\n'
                                     'Path("unit-tests-ran.txt")')
UNIT_TESTS_YAML = """\
unit_tests:
  command: ["{python}", "{tests}/test_solution.py", "{solution}"]
  path: unit_tests
"""


@pytest.fixture(scope="module")
def frozen(module_machine):
    with on_machine(module_machine):
        return make_command_hill(HILL, timeout=4, extra=UNIT_TESTS_YAML,
                                 files={"unit_tests/test_solution.py": HANGING_UNIT_TEST})


@pytest.mark.slow
def test_passing_tests_make_a_passing_report(frozen, tmp_path):
    result = hills("eval", candidate(tmp_path / "sub"), "-H", HILL)
    assert result.code == 0, result.output
    report = result.report
    assert report["status"] == "passing" and report["passed"] is True
    assert report["unit_tests"]["passed"] is True and report["unit_tests"]["exit_code"] == 0
    assert report["unit_tests"]["duration_s"] >= 0
    assert "unit tests   passed" in result.err
    # The suite ran from the run folder's frozen copy of the hill, in the submission's snapshot.
    ran_from = (run_dir(HILL, report) / "submission" / "unit-tests-ran.txt").read_text()
    assert os.path.realpath(ran_from) == os.path.realpath(run_dir(HILL, report) / "hill" / "unit_tests"
                                                          / "test_solution.py")


def test_failing_tests_make_a_failing_report(frozen, tmp_path):
    result = hills("eval", candidate(tmp_path / "sub", solution="print(-1)\n"), "-H", HILL, "-o",
                   tmp_path / "report.json")
    assert result.code == 1, result.output
    report = result.report
    assert report["status"] == "failing" and report["passed"] is False
    assert report["unit_tests"] == {"passed": False, "exit_code": 1, "duration_s": report["unit_tests"]["duration_s"]}
    assert "frozen unit tests failed (exit code 1)" in report["reason"]
    assert "unit_tests.log" in report["reason"]
    assert "FAILED" in result.err and "unit tests   FAILED" in result.err
    ranked = json.loads(hills("rank", tmp_path / "report.json", "--json").out)
    assert ranked["groups"] == [] and "status failing" in ranked["apart"][0]["reason"]


@pytest.mark.slow
def test_hanging_tests_make_a_buggy_report(frozen, tmp_path):
    sub = candidate(tmp_path / "sub", files={"hang-tests": ""})
    result = hills("eval", sub, "-H", HILL)
    assert result.code == 1, result.output
    report = result.report
    assert report["status"] == "buggy"
    assert report["reason"].startswith("unit tests: timed out after 4s")
    assert report["unit_tests"]["passed"] is False


def test_tests_run_once_after_the_first_replicate(frozen, tmp_path):
    result = hills("eval", candidate(tmp_path / "sub"), "-H", HILL, "--repeat", "3")
    assert result.code == 0, result.output
    folder = run_dir(HILL, result.report)
    assert result.report["replicates"] == 3
    assert [seed for seed in range(3) if (folder / f"submission-{seed}" / "unit-tests-ran.txt").exists()] == [0]


@pytest.mark.slow
def test_failing_tests_stop_the_replicates(frozen, tmp_path):
    result = hills("eval", candidate(tmp_path / "sub", solution="print(-1)\n"), "-H", HILL, "--repeat", "3")
    assert result.code == 1, result.output
    assert result.report["status"] == "failing" and result.report["replicates"] == 1
    assert not (run_dir(HILL, result.report) / "submission-1").exists()


def test_the_frozen_copy_is_used_even_when_the_working_tests_are_edited(frozen, tmp_path):
    working = frozen / "unit_tests" / "test_solution.py"
    original = working.read_text()
    working.write_text("raise SystemExit(0)\n")  # the climber's copy now passes everything
    try:
        sub = candidate(tmp_path / "sub", solution="print(-1)\n")
        dirty = hills("eval", sub, "-H", HILL)
        assert dirty.code == 5 and "uncommitted changes" in dirty.err
        forced = hills("eval", sub, "-H", HILL, "--force")
        assert forced.code == 1, forced.output
        assert forced.report["status"] == "failing" and forced.report["forced"] is True
        # --current scores the working tree instead, unofficially: there the edit counts.
        current = hills("eval", sub, "-H", HILL, "--current")
        assert current.code == 0, current.output
        assert current.report["official"] is False and current.report["unit_tests"]["passed"] is True
    finally:
        working.write_text(original)


def test_describe_says_where_the_disposable_copy_is(frozen):
    described = hills("describe", HILL)
    assert described.code == 0, described.output
    text = described.out
    assert "unit tests" in text.lower()
    assert str(frozen / "unit_tests") in text
    assert "disposable" in text and "frozen" in text
    as_json = json.loads(hills("describe", HILL, "--json").out)
    assert str(frozen / "unit_tests") in as_json["submission"]["unit_tests"]


def test_the_tests_start_through_the_sdk_confined_and_counted(frozen, tmp_path):
    """They run submitted code, so they are a start of it like any other: the
    report's isolation entry counts them, with their caps."""
    result = hills("eval", candidate(tmp_path / "sub"), "-H", HILL)
    assert result.code == 0, result.output
    isolation = result.report["isolation"]
    assert isolation["started_by"].get("unit_tests") == 1, isolation
    assert isolation["caps_hit"] == []
