"""`hills journal`: one self-contained HTML page of a hill's climb, every
report's signature checked, drawn by matplotlib, and rendered by a real
browser (headless Chromium) to prove the plot is there."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from testing.eval_fixtures import SCORE_EVAL, attempts_log, hills, make_hill, on_machine, submission, tree_of
from hills.views import journal, numbers

INSTANCE_EVAL = SCORE_EVAL.replace(
    '"details": {} if value >= 0 else {"reason": "negative score"},',
    '"details": {} if value >= 0 else {"reason": "negative score"},\n'
    '            "instances": {f"case-{i}": value * (i + 1) for i in range(3)},\n'
    '            "report": {"picture": {"box": [0, 0, 10, 10], "circles": [[5, 5, min(abs(value), 5)]],\n'
    '                                   "rectangles": [[0, 0, 1, 2]]}},')
assert INSTANCE_EVAL != SCORE_EVAL
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is missing "
                                                              "(install the Debian package 'chromium')")
SCORES = ["3", "5", "4", "-1", "5.0000057", "oops", "7"]  # a climb, a failing one, a gain of 5.7e-6, a crash


@pytest.fixture(scope="module")
def climbed(module_machine, tmp_path_factory):
    """A hill with a short climb: passing, failing and buggy evals, one with
    replicates; the hill's folder."""
    with on_machine(module_machine):
        hill_dir = make_hill("climb", INSTANCE_EVAL)
        for index, score in enumerate(SCORES):
            folder = submission(tmp_path_factory.mktemp(f"sub{index}"), {"score.txt": score + "\n"})
            extra = ["--repeat", "2"] if score == "7" else []
            hills("eval", folder, "-H", "climb", *extra)
        return hill_dir


@pytest.fixture
def page(climbed, module_machine):
    with on_machine(module_machine):
        result = hills("journal", "climb")
    assert result.code == 0, result.err
    return result.out


@pytest.mark.slow
def test_the_journal_lists_every_attempt_with_status_and_reason(page: str) -> None:
    assert page.startswith("<!DOCTYPE html>")
    assert "7 attempt(s)" in page and "1 buggy" in page and "1 failing" in page and "5 passing" in page
    assert "Every report&#x27;s signature is valid." in page or "Every report's signature is valid." in page
    assert "chain intact" in page
    assert "negative score" in page  # the failing attempt's reason
    assert re.search(r"could not convert string to float|ValueError", page), "the buggy attempt's reason"
    # The gain of 5.7e-6 over 5 is told apart, and its change against the best shown.
    assert ">5.00001<" in page and "+5.7e-06" in page
    # The score plot, the best submission's picture, its instances against the previous best.
    assert page.count("<svg") == 3 and "id=best-picture" in page
    assert "1 circle(s) and 1 rectangle(s) in the box [0.0, 0.0, 10.0, 10.0]" in page


def test_the_page_loads_nothing_from_anywhere(page: str) -> None:
    assert "<script" not in page.lower() and "<link" not in page.lower() and "@import" not in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page, re.IGNORECASE)
    assert not re.search(r"url\(\s*['\"]?(https?:|//)", page)


@pytest.mark.slow
def test_groups_best_so_far_and_instances(climbed, module_machine) -> None:
    with on_machine(module_machine):
        from hills.disk import hill

        found = journal.collect(hill.resolve("climb"))
    statuses = [a.status for a in found.attempts]
    assert statuses == ["passing", "passing", "passing", "failing", "passing", "buggy", "passing"]
    assert all(a.verified for a in found.attempts)
    [group] = found.groups
    assert [a.number for a in found.attempts if a.new_best] == [1, 2, 5, 7]
    assert (group.best, group.previous_best) == (7, 5)
    rows = journal.instance_rows(found, group)
    assert [row["name"] for row in rows] == ["case-2", "case-1", "case-0"]  # biggest change first
    assert rows[0]["best"] == 21 and rows[0]["previous"] == pytest.approx(15.0000171)


@pytest.mark.slow
def test_the_score_axis_spans_the_passing_scores_and_a_far_failing_one_sits_on_its_edge(
        climbed, module_machine) -> None:
    with on_machine(module_machine):
        from hills.disk import hill

        found = journal.collect(hill.resolve("climb"))
    low, high = journal._passing_limits(found)
    assert (low, high) == (pytest.approx(2.4), pytest.approx(7.6))  # the passing 3 .. 7 and 15%; not the failing -1
    assert "failing (off the scale)" in journal.score_plot(found)


@pytest.mark.slow
def test_an_edited_report_is_marked_invalid_and_exits_1(climbed, module_machine, tmp_path: Path) -> None:
    with on_machine(module_machine):
        log = attempts_log("climb", tree_of(climbed))
        kept = log.read_bytes()
        try:
            lines = kept.decode().splitlines(keepends=True)
            for index, line in enumerate(lines):
                entry = json.loads(line)
                if isinstance(entry.get("report"), dict) and entry["report"]["status"] == "failing":
                    lines[index] = line.replace("negative score", "a fine score")
            log.write_text("".join(lines))
            out = tmp_path / "page.html"
            result = hills("journal", "climb", "-o", out)
        finally:
            log.write_bytes(kept)
    assert result.code == 1
    assert "INVALID signature" in result.err and "broken" in result.err
    text = out.read_text()
    assert "INVALID" in text and "chain BROKEN" in text


def test_output_to_a_missing_folder_is_a_usage_error(climbed, module_machine, tmp_path: Path) -> None:
    with on_machine(module_machine):
        result = hills("journal", "climb", "-o", tmp_path / "nowhere" / "page.html")
    assert result.code == 2
    assert "folder" in result.err and "does not exist" in result.err


def test_no_such_hill(module_machine) -> None:
    with on_machine(module_machine):
        result = hills("journal", "nothing-here")
    assert result.code == 2
    assert "no hill named 'nothing-here'" in result.err


@pytest.mark.parametrize("values,expected", [
    ([5.0, 5.0000057, 3.0], ["5", "5.00001", "3"]),
    ([2.635983, 2.6359849, 2.1], ["2.635983", "2.635985", "2.1"]),  # six digits would show a tie
    ([2.541421356, 2.541421357], ["2.541421356", "2.541421357"]),
    ([1.0, None, 2.5], ["1", "None", "2.5"]),
])
def test_numbers_print_as_many_digits_as_tell_them_apart(values: list, expected: list[str]) -> None:
    assert numbers.apart(values) == expected


def test_change_is_signed_and_ties_are_equal() -> None:
    assert numbers.change(5.0000057, 5.0) == "+5.7e-06"
    assert numbers.change(4.0, 5.0) == "-1"
    assert numbers.change(5.0, 5.0) == "="
    assert numbers.change(None, 5.0) == ""


def _best_line_pixels(png: Path) -> int:
    from PIL import Image

    import numpy

    wanted = numpy.array([int(journal.BEST_COLOR[i:i + 2], 16) for i in (1, 3, 5)])
    pixels = numpy.asarray(Image.open(png).convert("RGB"), dtype=int)
    return int((numpy.abs(pixels - wanted) <= 12).all(axis=2).sum())


def _screenshot(html_file: Path, png: Path) -> None:
    done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--no-first-run", "--host-resolver-rules=MAP * ~NOTFOUND",
                           f"--user-data-dir={png.parent / 'chromium-profile'}", "--window-size=1300,900",
                           f"--screenshot={png}", html_file.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and png.is_file(), done.stderr[-2000:]


@pytest.mark.slow
@needs_chromium
def test_chromium_draws_the_score_plot(page: str, tmp_path: Path) -> None:
    html_file = tmp_path / "journal.html"
    html_file.write_text(page)
    _screenshot(html_file, tmp_path / "journal.png")
    drawn = _best_line_pixels(tmp_path / "journal.png")
    # The same page without its plots: only the tables' colour keys are left.
    bare = tmp_path / "bare.html"
    bare.write_text(re.sub(r"<svg.*?</svg>", "", page, flags=re.DOTALL))
    _screenshot(bare, tmp_path / "bare.png")
    left = _best_line_pixels(tmp_path / "bare.png")
    assert drawn - left > 1000, f"only {drawn - left} pixels of the best-so-far line in the screenshot"


def test_attempts_and_rank_tell_a_tiny_gain_from_a_tie(climbed, module_machine) -> None:
    with on_machine(module_machine):
        listed = hills("attempts", "climb")
        ranked = hills("rank", "-H", "climb")
    assert listed.code == 0 and ranked.code == 0, listed.output + ranked.output
    row = next(line for line in listed.out.splitlines() if "total=5.00001 " in line)
    assert "+5.7e-06 *" in row  # a new best, by 5.7e-6 over the 5 before it
    gained = next(line for line in ranked.out.splitlines() if "total=5.00001 " in line)
    assert " -2 " in gained  # 2 behind the best, 7
    assert "total=5 " in ranked.out  # the tie it would have been at fewer digits is not one


def test_show_draws_the_picture_the_evaluator_gave(climbed, module_machine, tmp_path: Path) -> None:
    from testing.eval_fixtures import hills_home

    with on_machine(module_machine):
        reports = sorted(hills_home().glob("runs/climb/*/report.json"))
        with_picture = next(p for p in reports if json.loads(p.read_text())["status"] == "passing")
        shown = hills("show", with_picture, "--picture", tmp_path / "picture.svg")
        buggy = next(p for p in reports if json.loads(p.read_text())["status"] == "buggy")
        refused = hills("show", buggy, "--picture", tmp_path / "none.svg")
    assert shown.code == 0, shown.output
    assert "picture: 1 circle(s) and 1 rectangle(s)" in shown.out
    svg = (tmp_path / "picture.svg").read_text()
    assert svg.startswith("<svg") and "<path" in svg
    assert refused.code == 2 and "the report holds no picture" in refused.err
    assert not (tmp_path / "none.svg").exists()


def test_a_hill_with_no_attempts_yet(module_machine) -> None:
    with on_machine(module_machine):
        make_hill("untried", SCORE_EVAL)
        result = hills("journal", "untried")
    assert result.code == 0, result.err
    assert "No attempts yet." in result.out and "<svg" not in result.out


def test_without_matplotlib_the_journal_names_the_extra(climbed, module_machine, monkeypatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now fails
    with on_machine(module_machine):
        result = hills("journal", "climb")
    assert result.code == 4
    assert "matplotlib" in result.err and "hills[journal]" in result.err
