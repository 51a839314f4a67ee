"""The journal tells the climb's story (docs/noise.md): the best so far
inside its noise band, "new best" only beyond noise and "within noise"
otherwise, a second eval of the best's submission never a new best, the
holdout its own labelled series, each attempt named by its note or commit
subject, numbered as `hills attempts` numbers it, and the --final budget
left; checked on the rendered page."""

import json
import re
import subprocess

import pytest

from testing.eval_fixtures import SCORE_EVAL, hills, make_hill, submission
from hills.views import journal

TREE = "a" * 40


def report(value, *, se=None, sub="s1", note=None, final=False, ab=None, instances=None, subject=None):
    """A passing, official RMSE report of the constructed climb."""
    made = {"hill": "diabetes", "tree_hash": TREE, "status": "passing", "passed": True, "official": True,
            "final": final, "config": [{"name": "isolation", "value": "bwrap", "primary": True}],
            "metrics": [{"name": "rmse", "value": value, "direction": "min"}],
            "submission_hash": f"blake3:{sub:0<64}", "timestamp": "2026-12-02T08:00:00Z"}
    if se is not None:
        made["noise"] = {"metric": "rmse", "replicates": None, "items": {"n": 88, "aggregate": "rms", "se": se},
                         "se": se, "label": f"noise ±{se} (items)"}
    if note is not None:
        made["note"] = note
    if subject is not None:
        made["submission_git"] = {"ref": f"main@{'b' * 40}", "dirty": False, "subject": subject}
    if ab is not None:
        made["ab"] = ab
    if instances is not None:
        made["instances"] = instances
    return made


# The climb of the issue in small: a deterministic evaluator over 88
# patients whose RMSE has a standard error of about 3 from the items.
CLIMB = [
    report(60.49, se=3.0, sub="s1", note="linear baseline"),
    report(60.13, se=3.0, sub="s2", note="gradient boosting, 100 trees"),    # -0.36: within noise
    report(59.90, se=3.0, sub="s1", note="the baseline again"),              # same submission as the best
    report(52.00, se=2.8, sub="s3", subject="ridge on log-age features"),    # -8.5: beyond noise
    report(55.00, se=2.8, sub="s3", final=True, note="holdout look"),        # the holdout
    report(50.10, se=2.8, sub="s4", ab={"role": "candidate", "pair": 0, "of": 2, "id": "r1"}),  # an A/B run
    report(51.50, se=2.8, sub="s5"),                                         # within noise, named by hash
]


def constructed(reports=CLIMB, budget=None):
    """A Journal of `reports` as collect makes it, signatures taken as valid."""
    made = journal.Journal("diabetes", [{"tree_hash": TREE, "date": "2026-12-02", "message": "v1"}],
                           [{"tree_hash": TREE, "ok": True, "count": 2 * len(reports), "problems": [],
                             "break_line": None}], [], [], [], "2026-12-02T08:00:00Z", budget)
    for position, one in enumerate(reports, 1):
        metric, direction, value = journal._primary_metric(one)
        made.attempts.append(journal.Attempt(position, position, 0, TREE, 2 * position - 1, one, True, "",
                                             metric, direction, value))
    journal._group(made)
    return made


def test_new_best_only_beyond_noise_and_never_for_the_same_submission_an_ab_run_or_the_holdout():
    found = constructed()
    assert [a.verdict for a in found.attempts] == ["first", "within noise", "same submission as #1", "new best",
                                                  "", "", "within noise"]
    assert [a.new_best for a in found.attempts] == [True, False, False, True, False, False, False]
    [group] = found.groups
    assert found.at(group.best).number == 4 and found.at(group.previous_best).number == 1
    assert group.top == 7  # 51.5, within the noise of #4's 52; the A/B run's 50.1 is not in the group
    assert 5 not in group.members and 6 not in group.members  # the holdout and the A/B run are not grouped


def test_without_noise_a_gain_is_a_new_best_and_the_page_says_the_noise_is_unknown():
    found = constructed([report(10.0), report(9.9, sub="s2")])
    assert [a.verdict for a in found.attempts] == ["first", "new best"]
    assert "noise unknown (no per-item scores)" in journal.render(found)


def test_the_rendered_page_tells_the_story():
    page = journal.render(constructed(budget={"tree_hash": TREE, "budget": 3, "used": 1, "problem": None}))
    plot = page[page.index("id=score-plot"):page.index("</svg>", page.index("id=score-plot"))]
    # The noise band, the best-so-far line, the holdout and the A/B runs as their own labelled series.
    assert "validation: noise band of the best (95%)" in plot and "validation: best so far (min)" in plot
    assert "holdout (--final), 95% interval" in plot and "A/B run (not a best)" in plot
    assert "group 2" not in page
    # The band is drawn: a filled path in the best line's colour, translucent.
    assert re.search(r"fill: ?" + journal.BEST_COLOR + r"; ?fill-opacity: ?0\.15", plot), "no noise band drawn"
    # The x axis names attempts as hills attempts does.
    assert all(f">#{n}<" in plot for n in (1, 2, 4, 6))
    rows = page[page.index("<h2>Every attempt</h2>"):]
    for verdict in ("new best", "within noise", "same submission as #1", "holdout: never a best",
                    "A/B run: never a best"):
        assert verdict in rows
    assert rows.count(">new best<") == 1 and rows.count(">within noise<") == 2
    # Each attempt's change in words: the note, else the commit subject, else the hash.
    assert "gradient boosting, 100 trees" in rows and "ridge on log-age features" in rows
    assert "<span class=change-hash>blake3:s5000000000" in rows
    assert "noise ±2.8 (items)" in rows
    # The holdout beside the validation best of its time, both with intervals, and the budget left.
    holdout = page[page.index("<h2 id=holdout>"):page.index("<h2>The best")]
    assert "2 of 3 --final eval(s) left" in holdout and "2 of 3 --final eval(s) left" in page.split("<h2>")[0]
    assert "55 (95%: 49.512 … 60.488)" in holdout and "#4: 52 (95%: 46.512 … 57.488)" in holdout
    assert "+3" in holdout


def test_the_groups_table_says_what_the_best_of_n_gives_by_chance_alone():
    # Five equal-ish submissions, the best 1.5 ahead of the first at a noise of 3: within what chance gives.
    close = [report(60.0 - 0.3 * index, se=3.0, sub=f"c{index}") for index in range(6)]
    groups = journal.render(constructed(close))
    groups = groups[groups.index("<h2>Comparable groups</h2>"):groups.index("<h2", groups.index("Comparable") + 30)]
    assert "chance alone" in groups
    assert "<span class='verdict within'>best of 6 within what 6 tries of equal submissions give" in groups
    # A lead far beyond it is not flagged.
    far = close[:5] + [report(30.0, se=3.0, sub="c9")]
    groups = journal.render(constructed(far))
    groups = groups[groups.index("<h2>Comparable groups</h2>"):groups.index("<h2", groups.index("Comparable") + 30)]
    assert "best of 6 beyond what 6 tries" in groups and "verdict within'>best of 6" not in groups


def test_a_submission_is_never_compared_with_itself_per_instance():
    items = {f"p{i}": float(i) for i in range(5)}
    found = constructed([report(10.0, se=0.1, sub="s1", instances=items),
                         report(5.0, se=0.1, sub="s2", instances={k: v / 2 for k, v in items.items()}),
                         report(1.0, se=0.1, sub="s1", instances={k: v / 10 for k, v in items.items()})])
    [group] = found.groups
    assert (group.best, group.previous_best) == (3, 2)  # a real gain of s1 over s2: compared, different submissions
    rows = journal.instance_rows(found, group)
    assert rows and all(row["previous"] is not None for row in rows)
    group.previous_best = 1  # were the previous best the same submission, nothing would be compared
    assert all(row["previous"] is None for row in journal.instance_rows(found, group))


ITEMS_EVAL = SCORE_EVAL.replace(
    '"details": {} if value >= 0 else {"reason": "negative score"},',
    '"details": {} if value >= 0 else {"reason": "negative score"},\n'
    '            "instances": {f"item-{i}": value + (i % 3) for i in range(12)},')


@pytest.fixture
def real_climb(tmp_path):
    make_hill("story", ITEMS_EVAL, extra="final:\n  budget: 3\n")
    folders = []
    for index, score in enumerate(["1", "3", "2", "4"]):
        folder = submission(tmp_path / f"sub{index}", {"score.txt": score + "\n"})
        folders.append(folder)
    for argv in (["init", "-q", "-b", "main"], ["add", "."],
                 ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "three, from a commit"]):
        subprocess.run(["git", *argv], cwd=folders[1], check=True, capture_output=True)
    assert hills("eval", folders[0], "-H", "story", "-m", "the first try").code == 0
    assert hills("eval", folders[1], "-H", "story").code == 0
    assert hills("eval", folders[1], "-H", "story", "--final", "-m", "a look at the holdout").code == 0
    assert hills("eval", folders[2], "-H", "story", "-m", "a step back").code == 0
    assert hills("eval", folders[3], "-H", "story", "-m", "four <b>bold</b>").code == 0
    return tmp_path


def test_a_real_climb_numbers_as_hills_attempts_and_shows_notes_subjects_and_the_budget(real_climb):
    listed = hills("attempts", "story", "--json")
    assert listed.code == 0, listed.output
    numbers = [a["number"] for a in json.loads(listed.out)["attempts"]]
    assert numbers == [1, 2, 3, 4, 5]
    result = hills("journal", "story", "-o", real_climb / "story.html")
    assert result.code == 0, result.output
    page = (real_climb / "story.html").read_text(encoding="utf-8")
    rows = page[page.index("<h2>Every attempt</h2>"):]
    assert re.findall(r"<span class=number>#(\d+)</span>", rows) == [str(n) for n in numbers]
    table = hills("attempts", "story")
    assert [line.split()[0] for line in table.out.splitlines()[2:7]] == [f"#{n}" for n in numbers]
    assert "the first try" in rows and "three, from a commit" in rows and "a look at the holdout" in rows
    assert "four &lt;b&gt;bold&lt;/b&gt;" in rows and "<b>bold</b>" not in page
    assert "2 of 3 --final eval(s) left" in page
    assert "holdout (--final)" in page and "holdout: never a best" in rows


@pytest.mark.slow
def test_a_circle_packing_climb_names_its_attempts_and_pictures_the_best(tmp_path):
    from testing.eval_fixtures import GRID_EXAMPLE, gate_skipped

    created = hills("new", "packed", "-t", "circle-packing")
    assert created.code == 0, created.output
    with gate_skipped():
        assert hills("commit", "packed", "-m", "first").code == 0
    grid = json.loads((GRID_EXAMPLE / "circles.json").read_text())
    shrunk = submission(tmp_path / "shrunk", {"circles.json": json.dumps(
        {**grid, "circles": [[x, y, r * 0.8] for x, y, r in grid["circles"]]} if isinstance(grid, dict)
        else [[x, y, r * 0.8] for x, y, r in grid])})
    assert hills("eval", shrunk, "-H", "packed", "-m", "every radius 0.8 of the grid's").code == 0
    assert hills("eval", GRID_EXAMPLE, "-H", "packed", "-m", "the grid").code == 0
    assert hills("eval", GRID_EXAMPLE, "-H", "packed", "-m", "the grid again").code == 0
    assert hills("eval", GRID_EXAMPLE, "-H", "packed", "--final", "-m", "the grid on the holdout").code == 0
    result = hills("journal", "packed", "-o", tmp_path / "packed.html")
    assert result.code == 0, result.output
    page = (tmp_path / "packed.html").read_text(encoding="utf-8")
    rows = page[page.index("<h2>Every attempt</h2>"):]
    assert re.findall(r"<span class=number>#(\d+)</span>", rows) == ["1", "2", "3", "4"]
    assert ">new best<" in rows and "same submission as #2" in rows and "holdout: never a best" in rows
    assert "id=best-picture" in page and "holdout (--final)" in page
    # Its noise is said, never "exact": measured where the report has a noise field, else unknown.
    said = sum(rows.count(words) for words in ("noise unknown", "noise not measured", "noise ±"))
    assert said == 4 and "exact" not in rows
