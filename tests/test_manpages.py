"""The man page sources and their rendering: the generated blocks against
the commands, the rendered pages against their sources, and the rST that
help texts and the key table become."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hills import manpages
from hills.manpages import Problem

MAN_DIR = Path(__file__).resolve().parent.parent / "man"
needs_docutils = pytest.mark.skipif(manpages._docutils_version() is None,
                                    reason="docutils is not installed (the 'man' extra)")


@pytest.fixture
def man(tmp_path: Path) -> Path:
    """A copy of the checkout's man/, sources and pages."""
    copy = tmp_path / "man"
    shutil.copytree(MAN_DIR, copy)
    return copy


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} not in {path.name}"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


# ---------------------------------------------------------------- text to rST

@pytest.mark.parametrize("text, rst", [
    ("plain words", "plain words"),
    ("the `--final` flag", "the ``--final`` flag"),
    ("see hills-eval(1), then hill.yaml(5).", "see :manpage:`hills-eval(1)`, then :manpage:`hill.yaml(5)`."),
    ("outside `low`..`high`", "outside ``low``..\\ ``high``"),
    ("`x`s", "``x``\\ s"),
    ("a * b | c", "a \\* b \\| c"),
    ("NAME@TREE", "NAME\\@TREE"),
    ("trailing_ underscore", "trailing\\_ underscore"),
    ("hills-VERB(1) stays plain", "hills-VERB(1) stays plain"),
], ids=["plain", "code", "pages", "adjacent code", "code then a letter", "specials", "at sign", "underscore",
        "capitals"])
def test_rst_inline(text: str, rst: str) -> None:
    assert manpages.rst_inline(text) == rst


def test_the_synopsis_wraps_under_the_program_name() -> None:
    synopsis = manpages.blocks("hills-eval.1")["synopsis"].splitlines()
    assert synopsis[0].startswith("| **hills eval** **-H** *NAME*")
    continued = [line for line in synopsis if line.startswith("| " + manpages.PAD)]
    # Each continued line starts under the first option: with an option, or the DIR argument.
    under = "| " + manpages.PAD * len("hills eval ")
    assert continued and all(line.startswith((under + "[", under + "*DIR")) for line in continued)
    assert synopsis[-2:] == ["| **git hill eval** [*OPTIONS*] *DIR...*", "| **hills-eval** [*OPTIONS*] *DIR...*"]


def test_fill_replaces_only_the_marked_blocks() -> None:
    source = "A\n\n.. begin-generated: one\n\nold\n\n.. end-generated\n\nB\n"
    assert manpages.fill(source, {"one": "new\nlines"}) == (
        "A\n\n.. begin-generated: one\n\nnew\nlines\n\n.. end-generated\n\nB\n")
    assert manpages.marked_blocks(source) == {"one": "old"}
    with pytest.raises(ValueError, match="block 'one' has no '.. end-generated'"):
        manpages.marked_blocks("x\n.. begin-generated: one\n\nold\n")


# ---------------------------------------------------------------- --check

@pytest.mark.slow
def test_the_checkout_is_in_step_and_regenerating_it_changes_nothing(man: Path) -> None:
    assert manpages.check(str(man)) == []
    if manpages._docutils_version() is not None:
        assert manpages.update(str(man)) == ([], [])


@pytest.mark.slow
def test_a_stale_generated_block_is_named_and_regenerated(man: Path) -> None:
    source = man / "hills-eval.1.rst"
    _edit(source, "    The hill to score against. Required.", "    The hill.")
    _edit(man / "hills-rank.1.rst", "\n.. begin-generated: synopsis\n", "\n.. begin-generated: synopsis\n\nold\n")
    problems = manpages.check(str(man))
    assert Problem("block", str(source), "options") in problems
    assert Problem("block", str(man / "hills-rank.1.rst"), "synopsis") in problems
    if manpages._docutils_version() is None:
        pytest.skip("docutils is not installed (the 'man' extra)")
    assert manpages.main([str(man)]) == 0
    assert "    The hill to score against. Required." in source.read_text(encoding="utf-8")
    assert manpages.check(str(man)) == []


def test_a_source_changed_since_its_page_was_rendered_makes_the_page_stale(man: Path) -> None:
    _edit(man / "hills-lock.5.rst", "never edited by hand", "not edited by hand")
    assert manpages.check(str(man)) == [Problem("stale", str(man / "hills-lock.5"))]


def test_a_changed_include_makes_every_page_that_includes_it_stale(man: Path) -> None:
    _edit(man / "include" / "exit-bug.rst", "a bug in hills", "a bug in hills itself")
    stale = {os.path.basename(problem.path) for problem in manpages.check(str(man))}
    assert {"hills-eval.1", "hills-chain.1", "hills-home.1"} <= stale
    assert "hills.1" not in stale and "hill.yaml.5" not in stale


def test_check_without_docutils_still_finds_a_stale_page(man: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(manpages, "_docutils_version", lambda: None)
    assert manpages.check(str(man)) == []
    _edit(man / "hills-show.1.rst", "Nothing is recomputed", "Nothing at all is recomputed")
    assert manpages.check(str(man)) == [Problem("stale", str(man / "hills-show.1"))]


@pytest.mark.slow
@needs_docutils
def test_a_page_edited_by_hand_is_found_and_rendered_again(man: Path) -> None:
    page = man / "hills-show.1"
    _edit(page, "Nothing is recomputed", "Nothing is ever recomputed")
    assert manpages.check(str(man)) == [Problem("edited", str(page))]
    assert manpages.update(str(man)) == ([str(page)], [])
    assert page.read_text(encoding="utf-8") == (MAN_DIR / "hills-show.1").read_text(encoding="utf-8")


@pytest.mark.slow
def test_missing_and_left_over_sources_and_pages(man: Path) -> None:
    (man / "hills-pin.1.rst").unlink()
    (man / "hills-gone.1.rst").write_text("gone\n", encoding="utf-8")
    (man / "hills-log.1").unlink()
    assert manpages.check(str(man)) == [Problem("no-source", str(man / "hills-pin.1.rst")),
                                        Problem("unused-source", str(man / "hills-gone.1.rst")),
                                        Problem("missing", str(man / "hills-log.1")),
                                        Problem("extra", str(man / "hills-pin.1"))]
    assert manpages.main(["--check", str(man)]) == 1


@pytest.mark.slow
def test_blocks_and_markers_a_source_must_hold(man: Path, capsys: pytest.CaptureFixture[str]) -> None:
    eval_source, tune_source, home_source = (man / f"hills-{verb}.1.rst" for verb in ("eval", "tune", "home"))
    text = eval_source.read_text(encoding="utf-8")
    start = text.index(".. begin-generated: names")
    eval_source.write_text(text[:start] + text[text.index(".. end-generated", start) + len(".. end-generated"):],
                           encoding="utf-8")
    _edit(tune_source, "\n*DIR*\n", "\n*FOLDER*\n")
    _edit(home_source, "EXAMPLES\n", ".. begin-generated: nothing\n\n.. end-generated\n\nEXAMPLES\n")
    assert manpages.check(str(man)) == [
        Problem("no-block", str(eval_source), "names"), Problem("stale", str(man / "hills-eval.1")),
        Problem("unknown-block", str(home_source), "nothing"), Problem("stale", str(man / "hills-home.1")),
        Problem("argument", str(tune_source), "DIR of 'hills tune'"), Problem("stale", str(man / "hills-tune.1"))]
    assert manpages.main(["--check", str(man)]) == 1
    err = capsys.readouterr().err
    assert "error: man page source '" + str(eval_source) + "' has no generated block 'names'" in err
    assert "error: man page source '" + str(tune_source) + "' does not describe the argument DIR" in err
    assert err.endswith("hint: run 'python -m hills.manpages' to regenerate the pages\n")
    _edit(home_source, "\n.. end-generated\n\nEXAMPLES", "\n\nEXAMPLES")
    markers = [problem for problem in manpages.check(str(man)) if problem.kind == "markers"]
    assert [(problem.path, problem.detail.split(": ", 1)[1]) for problem in markers] == [
        (str(home_source), "block 'nothing' has no '.. end-generated'")]


# ---------------------------------------------------------------- rendering

@needs_docutils
def test_a_page_renders_with_git_s_header_and_bold_page_names(man: Path) -> None:
    page = manpages.render(str(man), "hills-eval.1", (man / "hills-eval.1.rst").read_text(encoding="utf-8"))
    lines = page.splitlines()
    assert lines[0] == '.\\" Generated by "python -m hills.manpages" from hills-eval.1.rst; do not edit.'
    assert f'\n.TH "HILLS\\-EVAL" "1" "" "{manpages.SOURCE}" "Hills Manual"\n' in page
    assert '.SH NAME\nhills\\-eval \\- score the submission folder DIR' in page
    assert "\\fBhill.yaml\\fP(5)" in page and ":manpage:" not in page
    assert "begin-generated" not in page, "the markers are comments, left out of the page"
    assert ".nh\n.nr HY 0\n.ad l\n" in page


@needs_docutils
def test_a_source_docutils_warns_of_is_refused_with_its_line(man: Path) -> None:
    source = man / "hills-home.1.rst"
    _edit(source, "SEE ALSO\n========\n", "SEE ALSO\n========\n\n:manpage:`not a page`\n")
    with pytest.raises(manpages.RenderError, match=r"hills-home\.1\.rst:\d+: \(ERROR/3\) not a man page reference"):
        manpages.render(str(man), "hills-home.1", source.read_text(encoding="utf-8"))
    assert manpages.main([str(man)]) == 1


def test_no_command_imports_docutils() -> None:
    # hills help reads the rendered pages; docutils is for rendering only.
    code = ("import sys, click\n"
            "from hills.cli import registry as cli, manual; from hills import entry, manpages\n"
            "group = cli.main_group\n"
            "ctx = click.Context(group, info_name='hills')\n"
            "for name in group.list_commands(ctx):\n"
            "    group.get_command(ctx, name)\n"
            "manpages.check(manpages.default_man_dir(), compare_rendering=False)\n"
            "assert 'docutils' not in sys.modules, sorted(m for m in sys.modules if m.startswith('docutils'))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
