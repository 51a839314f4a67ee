"""`hills eval -m TEXT`: the attempt's change in words, in the started
entry and the signed report; anything but one printable line of at most
200 characters is refused before anything is logged."""

import os

import pytest

from testing.eval_fixtures import SCORE_EVAL, attempts_log, hills, log_entries, make_hill, submission, tree_of
from hills.base.errors import UsageError
from hills.run.plan import MAX_NOTE, check_note

NAME = "noted"


@pytest.fixture
def noted(tmp_path):
    return make_hill(NAME, SCORE_EVAL)


def test_the_note_is_in_the_started_entry_and_the_signed_report(noted, tmp_path):
    folder = submission(tmp_path / "a", {"score.txt": "2\n"})
    result = hills("eval", folder, "-H", NAME, "-m", "hexagonal rows — no grid")
    assert result.code == 0, result.output
    assert result.report["note"] == "hexagonal rows — no grid"
    started, outcome = log_entries(attempts_log(NAME, tree_of(noted)))
    assert started["started"]["note"] == "hexagonal rows — no grid"
    assert outcome["report"] == result.report
    report_file = tmp_path / "report.json"
    report_file.write_text(result.out, encoding="utf-8")
    assert hills("verify", report_file).code == 0
    plain = hills("eval", folder, "-H", NAME, "--note=second try")
    assert plain.code == 0 and plain.report["note"] == "second try"
    without = hills("eval", folder, "-H", NAME)
    assert without.code == 0 and "note" not in without.report


@pytest.mark.parametrize("note, words", [
    ("two\nlines", ["control character U+000A at position 4", "one line of printable text"]),
    ("tab\there", ["U+0009 at position 4"]),
    ("\x1b[2Jclear", ["U+001B at position 1"]),
    ("right\u202eto left", ["U+202E at position 6"]),
    ("x" * (MAX_NOTE + 1), [f"{MAX_NOTE + 1} characters long: at most {MAX_NOTE}"]),
    ("   ", ["is empty"]),
])
def test_a_bad_note_is_refused_before_anything_is_logged(noted, tmp_path, note, words):
    folder = submission(tmp_path / "a", {"score.txt": "2\n"})
    log = attempts_log(NAME, tree_of(noted))
    before = log_entries(log) if os.path.exists(log) else []
    result = hills("eval", folder, "-H", NAME, "-m", note)
    assert result.code == 2, result.output
    assert "error: the note given with -m" in result.err
    for word in words:
        assert word in result.err
    assert (log_entries(log) if os.path.exists(log) else []) == before


def test_a_note_of_the_longest_length_in_any_script_is_taken():
    check_note("é" * MAX_NOTE)
    check_note("数値を丸める")
    with pytest.raises(UsageError, match="at most"):
        check_note("é" * (MAX_NOTE + 1))
