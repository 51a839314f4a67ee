"""`hills setup loop LOOP NAME`: the file each text loop reads its score
through, written into the project and then run for real the way the loop
runs it (pi-autoresearch: bash on .auto/measure.sh, its output parsed with
pi-autoresearch's METRIC rule; autoresearch: the eval and the grep that
program.md gives); never over an existing file without --force; bad input."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from testing import readme_examples

from hills.commands import setup_loop
from testing.eval_fixtures import hills, make_hill, on_machine, real, submission
from testing.loop_fixtures import EVALUATOR, HILL, METRICS, pi_parse


@pytest.fixture(scope="module")
def loop_hill(module_machine):
    with on_machine(module_machine):
        make_hill(HILL, EVALUATOR, timeout=20, extra=METRICS)
        make_hill("bare", EVALUATOR, timeout=20)  # declares no metrics
    return HILL


@pytest.fixture
def project_dir(loop_hill, tmp_path, monkeypatch):
    """A loop's project (the cwd), its submission folder `my sub` beside
    the hills of the machine, found from here through the registry."""
    folder = tmp_path / "project"
    submission(folder / "my sub", {"loss.txt": "0.25"})
    monkeypatch.chdir(folder)
    return folder


def test_pi_autoresearch_gets_a_measure_script_whose_output_it_parses(project_dir, loop_hill):
    made = hills("setup", "loop", "pi-autoresearch", loop_hill, "--submission", "my sub")
    assert made.code == 0, made.output
    script = project_dir / ".auto" / "measure.sh"
    assert made.out == ".auto/measure.sh\n"
    assert stat.S_IMODE(script.stat().st_mode) == 0o755
    assert made.err.startswith("wrote .auto/measure.sh for pi-autoresearch:\n    #!/usr/bin/env bash\n")
    assert ("hint: start '/autoresearch' in pi and have it keep this .auto/measure.sh; the metric is 'val_loss', "
            "lower is better") in made.err
    assert os.listdir(script.parent) == ["measure.sh"]  # no temporary file left
    # pi-autoresearch runs `bash -c COMMAND` in the project and reads stdout
    # and stderr together; a run from elsewhere finds the project too.
    for command, cwd in (("./.auto/measure.sh", project_dir), (f"bash {script}", project_dir.parent)):
        ran = real("bash", "-c", f"{command} 2>&1", cwd=cwd)
        assert ran.code == 0, ran.output
        assert pi_parse(ran.out) == {"val_loss": 0.25, "acc": 0.975, "hills.passed": 1.0, "hills.official": 1.0}
    # A failing submission: its METRIC lines with hills.passed 0, exit 1; a crash: no line, exit non-zero.
    (project_dir / "my sub" / "loss.txt").write_text("5")
    failing = real("bash", "-c", "./.auto/measure.sh 2>&1", cwd=project_dir)
    assert failing.code == 1 and pi_parse(failing.out)["hills.passed"] == 0.0, failing.output
    (project_dir / "my sub" / "crash").write_text("")
    crashed = real("bash", "-c", "./.auto/measure.sh 2>&1", cwd=project_dir)
    assert crashed.code != 0 and pi_parse(crashed.out) == {}, crashed.output
    assert "hills eval: buggy: " in crashed.out


def test_autoresearch_gets_a_program_whose_eval_and_grep_read_the_score(project_dir, loop_hill):
    made = hills("setup", "loop", "autoresearch", loop_hill, "--submission", "my sub")
    assert made.code == 0, made.output
    program = (project_dir / "program.md").read_text()
    assert stat.S_IMODE((project_dir / "program.md").stat().st_mode) == 0o644
    # The agent runs the two commands the program shows, as it shows them.
    commands = [line.strip() for line in program.splitlines() if line.startswith("       ")]
    assert commands == [f"hills eval 'my sub' -H {loop_hill} --colon-lines > run.log 2>&1",
                        r'grep "^val_loss:\|^hills.passed:" run.log']
    assert "lower is better" in program
    run, grep = commands
    assert real("bash", "-c", run, cwd=project_dir).code == 0, (project_dir / "run.log").read_text()
    read = real("bash", "-c", grep, cwd=project_dir)
    assert read.out.splitlines() == ["val_loss: 0.25", "hills.passed: 1"], read.output
    # The program says empty grep output is a crash: so it is.
    (project_dir / "my sub" / "crash").write_text("")
    assert real("bash", "-c", run, cwd=project_dir).code == 1
    assert real("bash", "-c", grep, cwd=project_dir).out == ""


@pytest.mark.parametrize("loop, path", [("pi-autoresearch", ".auto/measure.sh"), ("autoresearch", "program.md")])
def test_an_existing_file_is_never_replaced_without_force(project_dir, loop_hill, loop, path):
    target = project_dir / path
    target.parent.mkdir(exist_ok=True)
    target.write_text("the user's own\n")
    refused = hills("setup", "loop", loop, loop_hill)
    assert refused.code == 1, refused.output
    assert f"error: '{path}' exists: hills setup loop never replaces a file unasked" in refused.err
    assert "--force" in refused.err and refused.out == ""
    assert target.read_text() == "the user's own\n"
    assert not [name for name in os.listdir(target.parent) if name.startswith(f".{target.name}.")]
    forced = hills("setup", "loop", loop, loop_hill, "--force")
    assert forced.code == 0, forced.output
    assert target.read_text().startswith("#!/usr/bin/env bash" if loop == "pi-autoresearch" else f"# {HILL}:")


def test_a_link_in_the_files_place_is_refused_too(project_dir, loop_hill):
    (project_dir / ".auto").mkdir()
    os.symlink(project_dir / "elsewhere", project_dir / ".auto" / "measure.sh")  # dangling
    refused = hills("setup", "loop", "pi-autoresearch", loop_hill)
    assert refused.code == 1 and "exists" in refused.err, refused.output
    assert not (project_dir / "elsewhere").exists()


def test_a_name_taken_between_the_look_and_the_write_is_refused_by_the_link(project_dir, loop_hill, monkeypatch):
    # The look says free; then another writer takes the name: the hard link fails, nothing is replaced.
    target = project_dir / "program.md"
    real_lexists = os.path.lexists
    looked = []

    def lexists_then_taken(path):
        if os.fspath(path) == "program.md" and not looked:
            looked.append(path)
            target.write_text("theirs\n")
            return False
        return real_lexists(path)

    monkeypatch.setattr(setup_loop.os.path, "lexists", lexists_then_taken)
    refused = hills("setup", "loop", "autoresearch", HILL)
    assert looked, "the look before the write did not happen"
    assert refused.code == 1 and "'program.md' exists" in refused.err, refused.output
    assert target.read_text() == "theirs\n"
    assert [name for name in os.listdir(project_dir) if name.startswith(".program.md.")] == []


def test_print_writes_nothing_and_prints_the_text(project_dir, loop_hill):
    printed = hills("setup", "loop", "pi-autoresearch", loop_hill, "--print")
    assert printed.code == 0, printed.output
    assert printed.out.startswith("#!/usr/bin/env bash\n")
    assert f"eval . -H {loop_hill} --metric-lines" in printed.out
    assert not (project_dir / ".auto").exists()


@pytest.mark.parametrize("argv, code, words", [
    (["nope", HILL], 2, ["unknown loop 'nope'", "one of: autoresearch, pi-autoresearch"]),
    (["autoresearch", "no-such-hill"], 2, ["no hill named 'no-such-hill'"]),
    (["pi-autoresearch", HILL, "--submission", "missing"], 2, ["submission folder 'missing' does not exist"]),
    (["pi-autoresearch", "bare"], 1, ["hill 'bare' declares no metrics in hill.yaml"]),
    (["autoresearch"], 2, ["missing argument 'NAME'"]),
])
def test_bad_input_is_refused_by_name_and_writes_nothing(project_dir, argv, code, words):
    result = hills("setup", "loop", *argv)
    assert result.code == code, result.output
    assert all(word in result.err for word in words), result.err
    assert not (project_dir / ".auto").exists() and not (project_dir / "program.md").exists()


def test_the_loops_are_a_table_each_with_a_shipped_template():
    assert sorted(setup_loop.LOOPS) == ["autoresearch", "pi-autoresearch"]
    for loop in setup_loop.LOOPS.values():
        text = setup_loop.template_text(loop)
        filled = setup_loop.plan(loop, "h", "s", {"name": "m", "direction": "max"}, "9.9", text).text
        assert not re.search(r"@[A-Z_]+@", filled), loop.name  # every key filled in
        assert "--metric-lines" in filled or "--colon-lines" in filled


def test_names_and_folders_are_quoted_for_the_shell():
    loop = setup_loop.LOOPS["pi-autoresearch"]
    written = setup_loop.plan(loop, "../hills/it's", "a b; rm -rf ~", {"name": "x y", "direction": "min"}, "1",
                              setup_loop.template_text(loop))
    assert written.text.splitlines()[-1] == (
        """exec "${HILLS:-hills}" eval 'a b; rm -rf ~' -H '../hills/it'"'"'s' --metric-lines""")
    assert "x_y (lower is better" in written.text
    assert written.mode == 0o755 and written.path == ".auto/measure.sh"


def test_help_names_the_loops():
    result = hills("setup", "loop", "--help")
    assert result.code == 0, result.output
    assert "pi-autoresearch" in result.out and "--submission" in result.out and "--force" in result.out
    assert Path(setup_loop.__file__).parent.joinpath("loops").is_dir()


# The example of the README's "autoresearch and pi-autoresearch" block, as
# it stands there: commands, each followed by the lines it prints ("# ...").
README_EXAMPLE = readme_examples.example("autoresearch")


def test_the_readme_example_runs_as_shown(committed_hill):
    assert committed_hill.name == "circle-packing"
    steps: list[tuple[str, list[str]]] = []
    for line in README_EXAMPLE.splitlines():
        if line.startswith("# "):
            steps[-1][1].append(line[2:])
        else:
            steps.append((line, []))
    assert len(steps) == 6
    for command, shown in steps:
        ran = real("bash", "-c", command)
        assert ran.code == 0, (command, ran.output)
        if shown:
            assert ran.out.splitlines() == shown, command
    assert Path(".auto/measure.sh").is_file() and Path("program.md").is_file()
