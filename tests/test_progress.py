"""Progress on stderr: a live line on a terminal, plain phase lines
elsewhere for a phase that lasts, nothing with -q; stdout is the report alone, or
nothing with --summary-only. Checks are told as they finish."""

import io
import json
import time

import pytest

from testing.eval_fixtures import SCORE_EVAL, hills, make_hill, submission
from hills.base import progress
from hills.checks import check


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def scored(project, tmp_path):
    make_hill("slow", SCORE_EVAL)
    return submission(tmp_path / "sub", {"score.txt": "4\n"})


def test_a_quick_eval_off_a_terminal_prints_the_summary_alone(scored) -> None:
    result = hills("eval", scored, "-H", "slow")
    assert result.code == 0
    assert json.loads(result.out)["status"] == "passing"
    assert "hills: scoring" not in result.err and "\r" not in result.err
    assert result.err.splitlines()[0].startswith("slow @ ")  # the summary, as it always was


def test_off_a_terminal_each_phase_that_lasts_is_a_plain_line(scored, monkeypatch) -> None:
    monkeypatch.setattr(progress, "SHOW_AFTER_S", 0.0)
    result = hills("eval", scored, "-H", "slow")
    assert "\r" not in result.err
    assert result.code == 0
    phases = [line for line in result.err.splitlines() if line.startswith("hills: ")]
    assert phases[-1] == "hills: scoring" and "hills: preparing the hill's environment" in phases
    assert json.loads(result.out)["status"] == "passing"  # stdout is the report alone


def test_repeat_names_the_replicate(scored, monkeypatch) -> None:
    monkeypatch.setattr(progress, "SHOW_AFTER_S", 0.0)
    result = hills("eval", scored, "-H", "slow", "--repeat", "2")
    assert "hills: replicate 1 of 2: scoring" in result.err and "hills: replicate 2 of 2: scoring" in result.err


def test_quiet_and_summary_only(scored, tmp_path) -> None:
    quiet = hills("eval", scored, "-H", "slow", "-q")
    assert quiet.code == 0 and quiet.err == "" and json.loads(quiet.out)["passed"] is True
    target = tmp_path / "report.json"
    summary = hills("eval", scored, "-H", "slow", "-o", target, "--summary-only")
    assert summary.code == 0 and summary.out == ""
    assert "PASSED" in summary.err and json.loads(target.read_text())["status"] == "passing"
    failing = hills("eval", submission(tmp_path / "bad", {"score.txt": "-1\n"}), "-H", "slow", "-q")
    assert failing.code == 1 and failing.err == ""


def test_json_has_no_progress(scored, monkeypatch) -> None:
    monkeypatch.setattr(progress, "SHOW_AFTER_S", 0.0)
    result = hills("eval", scored, "-H", "slow", "--json", "--progress")
    assert result.err == "" and json.loads(result.out)["status"] == "passing"


def test_the_live_line_is_drawn_in_place_and_cleared(monkeypatch) -> None:
    monkeypatch.setattr(progress, "SHOW_AFTER_S", 0.0)
    screen = Terminal()
    with progress.Progress(progress.LIVE, stream=screen) as shown:
        shown.header(["hill @ abc", "  submission   sub"])
        shown.phase("scoring")
        time.sleep(0.3)
        shown("a message")
    text = screen.getvalue()
    assert text.startswith("hill @ abc\n  submission   sub\n")
    assert "\r\x1b[Khills: scoring  0s" in text and "a message\n" in text
    assert text.endswith(progress.CLEAR)  # nothing left on the line
    assert shown.headed


def test_modes() -> None:
    assert progress.mode_for(stream=Terminal()) == progress.LIVE
    assert progress.mode_for(verbose=True, stream=Terminal()) == progress.LINES
    assert progress.mode_for(quiet=True, stream=Terminal()) == progress.OFF
    assert progress.mode_for(asked=True, stream=Terminal()) == progress.LINES
    assert progress.mode_for(stream=io.StringIO()) == progress.OFF  # check and commit
    assert progress.mode_for(stream=io.StringIO(), elsewhere=progress.LINES) == progress.LINES  # eval and tune
    assert progress.mode_for(quiet=True, stream=io.StringIO(), elsewhere=progress.LINES) == progress.OFF


def test_a_plain_line_waits_for_the_phase_to_last() -> None:
    stream = io.StringIO()
    with progress.Progress(progress.LINES, stream=stream) as shown:
        shown.phase("preparing the hill's environment")
        shown.phase("scoring")  # the first phase ended at once: never told
        time.sleep(progress.SHOW_AFTER_S + 2 * progress.REDRAW_S)
        shown("PASSED")
    assert stream.getvalue() == "hills: scoring\nPASSED\n"


def test_checks_are_told_as_they_finish(project) -> None:
    hill_dir = make_hill("told", SCORE_EVAL)
    told: list[str] = []
    results = check.run_checks(str(hill_dir), tell=lambda result: told.append(result.name))
    assert told == [result.name for result in results]
    assert told[:3] == ["manifest", "layout", "readme"] and told[-1] == "cheat corpus"
    assert check.next_check("tests") == "isolation" and check.next_check("cheat corpus") is None
