"""A newcomer's first day (issue 27): the rough edges a fresh user and a
fresh agent tripped on, each held here by its exit code and its message."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from testing.util import BIN_DIR, needs_bwrap, run_cli
from hills.cli.output import compact_json
from hills.disk import skill


# 1. The skill names the install that matches the running hills.

@pytest.mark.parametrize("origin, line", [
    (skill.Origin({"url": "file:///src/hills", "dir_info": {"editable": True}}), "pip install -e /src/hills"),
    (skill.Origin({"url": "file:///src/my%20hills", "dir_info": {}}), "pip install '/src/my hills'"),
    (skill.Origin({"url": "file:///w/hills-0.1.0-py3-none-any.whl", "archive_info": {}}),
     "pip install /w/hills-0.1.0-py3-none-any.whl"),
    (skill.Origin({"url": "https://example.org/hills.git", "vcs_info": {"vcs": "git", "commit_id": "ab12"}}),
     "pip install git+https://example.org/hills.git@ab12"),
    (skill.Origin({"url": "file:///src/hills", "dir_info": {}}, uv_tool=True), "uv tool install /src/hills"),
    (skill.Origin(None, checkout="/src/hills"), "pip install /src/hills"),
    (skill.Origin(None), None),
])
def test_the_install_line_follows_how_hills_was_installed(origin: skill.Origin, line: str | None) -> None:
    assert skill.install_line(origin) == line


def test_the_installed_skill_names_the_running_install_and_never_pypi(tmp_path: Path) -> None:
    shipped = skill.shipped_files()["SKILL.md"].decode()
    assert skill.INSTALL_PLACEHOLDER in shipped, "the shipped SKILL.md lost its install line"
    assert "`pip install hills`" not in shipped.replace("never\n`pip install hills`", "")
    assert "uv tool install hills" not in shipped
    result = run_cli("setup", "skill", "--dir", tmp_path)
    assert result.code == 0, result.output
    installed = (tmp_path / "hills" / "SKILL.md").read_text()
    wanted = skill.install_line(skill.running_origin())
    assert wanted is not None and wanted.split()[:2] == ["pip", "install"]
    assert f"\n    {wanted}\n" in installed
    assert skill.INSTALL_PLACEHOLDER not in installed
    checked = run_cli("setup", "skill", "--dir", tmp_path, "--check")
    assert checked.code == 0 and "current:" in checked.err, checked.output


# 2. A report that fits on a screen.

def test_compact_json_keeps_plain_arrays_on_a_line_and_packs_long_ones() -> None:
    circles = [[round(0.1 + 0.2 * (i % 5), 1), round(0.1 + 0.2 * (i // 5), 1), 0.1] for i in range(25)]
    value = {"picture": {"box": [0, 0, 1, 1], "circles": circles}, "empty": [], "none": {},
             "rows": [{"name": "n", "value": 26, "primary": True}, {"name": "mode", "value": "é", "primary": True}],
             "nested": [{"deep": [{"a": "x" * 60}, {"b": "y" * 60}]}], "seeds": list(range(40))}
    text = compact_json(value)
    assert json.loads(text) == value
    lines = text.splitlines()
    assert lines[:3] == ["{", '  "picture": {', '    "box": [0, 0, 1, 1],']
    assert lines[4] == "      " + ", ".join(json.dumps(c) for c in circles[:5]) + ","
    assert len(lines) == 24, text
    assert '  "rows": [{"name": "n", "value": 26, "primary": true}, {"name": "mode", "value": "é", "primary": true}],' \
        in lines
    assert '        {"a": "' + "x" * 60 + '"},' in lines
    assert '  "seeds": ' + json.dumps(list(range(40))) in lines
    assert '  "empty": [],' in lines and '  "none": {},' in lines


def _eval_on_a_terminal(args: list[str], cwd: Path) -> tuple[int, str, str]:
    """`hills eval ARGS` with its stdout on a pseudo-terminal (as in a
    person's shell), its stderr a pipe: the exit code and both outputs."""
    import pty

    leader, follower = pty.openpty()
    try:
        done = subprocess.Popen([str(BIN_DIR / "hills"), "eval", *args], cwd=cwd, stdout=follower,
                                stderr=subprocess.PIPE, text=True)
        os.close(follower)
        seen = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        err = done.stderr.read()
        code = done.wait(timeout=300)
    finally:
        os.close(leader)
    return code, seen.decode("utf-8", "replace"), err


@needs_bwrap
@pytest.mark.slow
def test_eval_with_output_on_a_terminal_writes_the_file_and_shows_the_summary(shared_hill: Path,
                                                                             tmp_path: Path) -> None:
    import shutil

    submission = tmp_path / "grid"
    shutil.copytree(shared_hill / "examples" / "grid", submission)
    target = tmp_path / "report.json"
    code, out, err = _eval_on_a_terminal([str(submission), "-H", "circle-packing", "-o", str(target)],
                                         Path.cwd())
    assert code == 0, err
    report = json.loads(target.read_text())
    assert report["status"] == "passing"
    assert out.strip() == "", f"the terminal got the report: {out[:200]}"
    assert "PASSED" in err
    piped = run_cli("eval", submission, "-H", "circle-packing", "-o", tmp_path / "piped.json")
    assert piped.code == 0, piped.output
    assert json.loads(piped.out)["status"] == "passing"
    lines = piped.out.splitlines()
    assert len(lines) < 100, f"{len(lines)} lines of JSON"
    assert (tmp_path / "piped.json").read_text() == piped.out
    one = run_cli("eval", submission, "-H", "circle-packing", "--json")
    assert one.code == 0 and len(one.out.splitlines()) == 1, one.output


# 4. A broken hill.yaml is the manifest's error, exit 1, as `hills check` says it.

@pytest.mark.parametrize("verb", ["status", "describe"])
def test_a_broken_manifest_is_a_refusal_naming_file_line_and_key(project: Path, verb: str) -> None:
    created = run_cli("new", "broken", "-t", "circle-packing")
    assert created.code == 0, created.output
    manifest = Path(created.out.strip()) / "hill.yaml"
    lines = manifest.read_text().splitlines()
    manifest.write_text("\n".join(lines + ["timout: 5"]) + "\n")
    result = run_cli(verb, "broken")
    assert result.code == 1, result.output
    assert result.error_lines == [f"error: '{manifest}': unknown key 'timout' (line {len(lines) + 1})"]
    assert "hint: did you mean 'timeout'?" in result.err
    assert "--help" not in result.err
    checked = run_cli("check", "broken")
    assert checked.code == 1 and "unknown key 'timout'" in checked.output
    manifest.write_text("name: broken\nversion: [\n")
    result = run_cli(verb, "broken")
    assert result.code == 1, result.output
    assert "not valid YAML at line 3" in result.err
    assert "hint: fix it, then run 'hills check broken'; or undo the edit with 'hills restore broken hill.yaml'" \
        in result.err


def test_an_unknown_hill_name_stays_a_usage_error(project: Path) -> None:
    result = run_cli("status", "nowhere")
    assert result.code == 2 and "no hill named 'nowhere'" in result.err, result.output




# 5. A stale uv.lock names the hill's folder and the command that refreshes it.

def test_a_stale_lock_names_the_folder_and_the_command_that_refreshes_it(project: Path) -> None:
    import shlex

    created = run_cli("new", "locked", "-t", "circle-packing")
    assert created.code == 0, created.output
    hill_dir = Path(created.out.strip())
    pyproject = hill_dir / "pyproject.toml"
    assert 'requires-python = ">=3.9"' in pyproject.read_text()
    pyproject.write_text(pyproject.read_text().replace('">=3.9"', '">=3.10"'))
    checked = run_cli("check", "locked")
    assert checked.code == 1, checked.output
    [line] = [line for line in checked.output.splitlines() if " dependencies " in line]
    assert f"uv.lock in '{hill_dir}' is out of date with its pyproject.toml; refresh it with: " in line
    assert "hint:" not in line and "`uv lock`" not in line
    command = line.split("refresh it with: ", 1)[1]
    words = shlex.split(command)
    assert words[1:4] == ["lock", "--directory", str(hill_dir)]
    refreshed = subprocess.run([skill_uv() if words[0] == "uv" else words[0], *words[1:]], capture_output=True,
                               text=True, timeout=120)
    assert refreshed.returncode == 0, refreshed.stderr
    again = run_cli("check", "locked")
    assert "uv.lock is up to date" in again.output, again.output


def skill_uv() -> str:
    from hills.disk import uvenv

    return uvenv.uv_binary()


# 6. Odd exits.

def test_a_closed_pipe_is_quiet_and_exits_0(committed_hill: Path) -> None:
    reader, writer = os.pipe()
    os.close(reader)  # the reader is gone before the first line is written
    try:
        done = subprocess.run([str(BIN_DIR / "hills"), "log", "circle-packing"], stdout=writer,
                              stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(writer)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    control = subprocess.run([str(BIN_DIR / "hills"), "log", "circle-packing"], capture_output=True, text=True,
                             timeout=60)
    assert control.returncode == 0 and "TREE" in control.stdout, control.stderr


def test_rescore_of_a_dirty_hill_is_refused_before_any_work(committed_hill: Path) -> None:
    logged = run_cli("log", "circle-packing", "--json")
    assert logged.code == 0, logged.output
    tree = json.loads(logged.out)[0]["tree_hash"]
    readme = committed_hill / "README.md"
    readme.write_text(readme.read_text() + "\nan edit\n")
    result = run_cli("rescore", "circle-packing", "--from", tree)
    assert result.code == 5, result.output
    assert result.error_lines == ["error: hill 'circle-packing' has uncommitted changes (README.md): rescore scores "
                                  "its last commit only when clean"]
    assert "re-scoring" not in result.err
    assert "--force" not in result.err and "--current" not in result.err
    assert "hint: commit them first ('hills commit circle-packing -m MESSAGE')" in result.err


# 3. An environment build says how it goes.

FAKE_UV = """
import os, sys, time
env = os.environ["UV_PROJECT_ENVIRONMENT"]
os.makedirs(os.path.join(env, "lib", "site-packages", "torch-2.0.dist-info"))
with open(os.path.join(env, "lib", "site-packages", "big.bin"), "wb") as handle:
    handle.write(b"x" * 2_500_000)
for line in ("Resolved 3 packages in 1ms", "Prepared 2 packages in 3s", "Installed 2 packages in 1s"):
    print(line, file=sys.stderr, flush=True)
    time.sleep(0.05)
"""


@pytest.mark.parametrize("mode", ["live", "lines"])
def test_an_environment_build_shows_uv_lines_and_a_count_on_a_terminal_only(tmp_path: Path, mode: str,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from hills.base import progress
    from hills.disk import uvenv

    monkeypatch.setattr(progress, "SHOW_AFTER_S", 0.0)
    stream = io.StringIO()
    env_dir = tmp_path / "env"
    with progress.Progress(mode, stream=stream) as shown:
        shown.phase("check 'environment'")
        code, stderr = uvenv.build([sys.executable, "-c", FAKE_UV], tmp_path, str(env_dir), "demo", shown)
        assert shown.current == ("check 'environment'" if mode == "live" else
                                 "building the environment of hill 'demo' with uv")
    assert code == 0 and "Installed 2 packages in 1s" in stderr
    said = stream.getvalue()
    if mode == "live":
        assert "  uv: Resolved 3 packages in 1ms\n" in said and "  uv: Installed 2 packages in 1s\n" in said
        assert "hills: built the environment of hill 'demo': 1 package(s), 2.5 MB, in 0s\n" in said
    else:
        assert said.splitlines() == ["hills: check 'environment'",
                                     "hills: building the environment of hill 'demo' with uv"]


@pytest.mark.parametrize("count, shown", [(0, "0 B"), (999, "999 B"), (1000, "1.0 kB"), (5_400_000_000, "5.4 GB"),
                                          (10_600_000_000, "11 GB"), (812_000_000, "812 MB")])
def test_sizes_read_as_du_si_writes_them(count: int, shown: str) -> None:
    from hills.disk import uvenv

    assert uvenv.human_bytes(count) == shown


def _train_module():  # the example's train.py: its clock rules import without torch
    import importlib.util

    from testing.util import REPO_ROOT

    path = REPO_ROOT / "examples" / "nanogpt-10min" / "examples" / "gpt" / "train.py"
    spec = importlib.util.spec_from_file_location("nanogpt_train", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert "torch" not in module.__dict__
    return module


def _simulated_end(rng, budget: float, may_step, save_s: float) -> float:
    """The second a run of `budget` ends at on a machine whose load drifts
    (each step up to 1.9 times the one before, or down to 0.6, from 0.2 s
    to 4 s: a bigger model than the example's on shared cores), stopping
    by `may_step(now, step_times)`: its last step, its save, its exit."""
    now, load, step_times = rng.uniform(2.0, 12.0), 1.0, []  # the imports take what they take
    while may_step(now, step_times):
        load = min(20.0, max(0.5, load * rng.uniform(0.6, 1.9)))
        step = 0.2 * load
        now += step
        step_times.append(step)
    return now + save_s + 0.3


def test_the_examples_training_loop_stops_in_time_on_a_loaded_machine() -> None:
    import random

    train = _train_module()
    budget, save_in_memory, save_on_disk = 30.0, 0.05, 0.12
    rng = random.Random(20261202)
    new_ends = [_simulated_end(rng, budget, lambda now, steps: train.another_step(now, budget, steps,
                                                                                   save_in_memory), save_on_disk)
                for _ in range(2000)]

    def old_rule(now: float, steps: list[float]) -> bool:  # the last step alone, a fixed reserve
        return now + (steps[-1] if len(steps) > 1 else 0.0) <= budget - (1.0 + 0.02 * budget)

    rng = random.Random(20261202)
    old_ends = [_simulated_end(rng, budget, old_rule, save_on_disk) for _ in range(2000)]
    assert sum(end > budget for end in old_ends) > 5, "the control: the old rule overran on no drifting machine"
    assert max(new_ends) <= budget, max(new_ends)
    # Stopping in time is not stopping early: the median run uses the budget.
    assert sorted(new_ends)[1000] > budget - 6, sorted(new_ends)[1000]


def test_the_examples_first_step_waits_for_half_the_budget() -> None:
    train = _train_module()
    assert train.another_step(10.0, 30.0, [], 0.0) and not train.another_step(15.0, 30.0, [], 0.0)
    assert train.margin([0.1, 0.4, 0.2], 0.1) == pytest.approx(2.0 * 0.4 + 3.0 * 0.1 + 0.5)
    assert train.another_step(30.0 - 1.6, 30.0, [0.4], 0.1) and not train.another_step(30.0 - 1.5, 30.0, [0.4], 0.1)


# 8. A quiet, light install.

@pytest.mark.slow
def test_the_wheel_builds_without_setuptools_warnings(tmp_path: Path) -> None:
    import zipfile

    from testing.util import REPO_ROOT

    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "wheel"),
                           str(REPO_ROOT)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    [wheel] = (tmp_path / "wheel").glob("hills-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "hills/examples/dataset/make_data.py" in names and "hills/skills/hills/SKILL.md" in names
    assert "hills/examples/default/tests/test_eval.py" in names
    output = done.stdout + done.stderr
    assert "importable package" not in output and "Warning" not in output, output[:2000]


def test_the_quickstart_installs_hills_alone_and_the_tests_add_their_extra() -> None:
    import re

    from testing.util import REPO_ROOT

    makefile = (REPO_ROOT / "Makefile").read_text()
    rules = {match.group(1): (match.group(2).split(), match.group(3))
             for match in re.finditer(r"^(\S+):([^=\n]*)\n((?:\t.*\n)*)", makefile, re.MULTILINE)}
    assert rules["quickstart"][0] == ["$(BIN)/.installed-hills", "man-install", "bytecode"]
    assert rules["man-install"][0] == ["$(BIN)/.installed-hills"]
    # The package's bytecode, compiled once it is installed (PYTHONDONTWRITEBYTECODE may forbid it later).
    assert rules["bytecode"][1] == "\t$(BYTECODE)\n" and "$(BYTECODE)" in rules["$(BIN)/.installed-hills"][1]
    hills_only = rules["$(BIN)/.installed-hills"][1]
    assert "$(EDITABLE) ." in hills_only and "[test]" not in hills_only
    assert rules["$(BIN)/.installed"][0] == ["$(BIN)/.installed-hills"]
    assert "$(EDITABLE) '.[test]'" in rules["$(BIN)/.installed"][1]
    for target in ("test", "test-fast"):
        assert "$(BIN)/.installed" in rules[target][0], target


# 7. Small finds.

def test_project_check_without_agent_checks_what_project_install_put_there(project: Path, hermetic) -> None:
    assert not (Path(hermetic.home) / ".claude").exists(), "the hermetic home has an agent CLI folder"
    installed = run_cli("setup", "skill", "--project", "--agent", "claude-code")
    assert installed.code == 0, installed.output
    assert installed.out.strip() == str(project / ".claude" / "skills" / "hills")
    checked = run_cli("setup", "skill", "--project", "--check")
    assert checked.code == 0, checked.output
    assert checked.out.strip() == str(project / ".claude" / "skills" / "hills")
    assert f"current: {project / '.claude' / 'skills' / 'hills'} (claude-code)" in checked.err
    elsewhere = run_cli("setup", "skill", "--check")
    assert elsewhere.code == 1 and "missing: " + str(Path(hermetic.home) / ".agents" / "skills" / "hills") \
        in elsewhere.err, elsewhere.output


PRINTING_EVAL = """\
    import sys
    from pathlib import Path

    def eval(submission, *, final=False, **params):
        print("EVALUATOR SPEAKS", file=sys.stderr, flush=True)
        value = float((Path(submission) / "score.txt").read_text())
        return {"passed": True, "metrics": [{"name": "total", "value": value, "direction": "max"}]}
    """


def test_verbose_phase_lines_come_before_the_output_of_their_phase(project: Path, tmp_path: Path) -> None:
    from testing.eval_fixtures import hills, make_hill, submission

    make_hill("loud", PRINTING_EVAL)
    result = hills("eval", submission(tmp_path / "sub", {"score.txt": "3\n"}), "-H", "loud", "-v")
    assert result.code == 0, result.err
    lines = result.err.splitlines()
    assert "EVALUATOR SPEAKS" in lines and "hills: scoring" in lines, result.err
    assert lines.index("hills: scoring") < lines.index("EVALUATOR SPEAKS"), result.err


def test_a_phase_line_at_once_or_after_a_while() -> None:
    import io

    from hills.base import progress

    for at_once, shown in ((True, "hills: scoring\n"), (False, "")):
        stream = io.StringIO()
        with progress.Progress(progress.LINES, stream=stream, at_once=at_once) as said:
            said.phase("scoring")
            assert stream.getvalue() == shown, at_once


@needs_bwrap
def test_show_prints_the_reports_details(shared_hill: Path, tmp_path: Path) -> None:
    import shutil

    submission = tmp_path / "grid"
    shutil.copytree(shared_hill / "examples" / "grid", submission)
    target = tmp_path / "report.json"
    scored = run_cli("eval", submission, "-H", "circle-packing", "-o", target)
    assert scored.code == 0, scored.output
    details = json.loads(target.read_text())["details"]
    assert set(details) == {"min_radius", "max_radius"}
    shown = run_cli("show", target)
    assert shown.code == 0, shown.output
    lines = shown.out.splitlines()
    assert "details:" in lines
    at = lines.index("details:")
    assert lines[at + 1:at + 3] == [f"  {'min_radius':<20} {details['min_radius']:.6g}",
                                    f"  {'max_radius':<20} {details['max_radius']:.6g}"]


@needs_bwrap
def test_check_names_the_cheats_it_tried_with_v_and_in_json(shared_hill: Path) -> None:
    import re

    listed = run_cli("check", "circle-packing", "--json")
    assert listed.code == 0, listed.output
    [corpus] = [entry for entry in json.loads(listed.out)["checks"] if entry["check"] == "cheat corpus"]
    count = int(re.match(r"(\d+) cheats tried, none got through", corpus["detail"]).group(1))
    assert len(corpus["tried"]) == count >= 10 and "copy of the example" in corpus["tried"]
    named = run_cli("check", "circle-packing", "-v")
    assert named.code == 0, named.output
    assert [line.split("tried  ", 1)[1] for line in named.out.splitlines()
            if line.startswith("        tried  ")] == corpus["tried"]
    plain = run_cli("check", "circle-packing")
    assert plain.code == 0 and "        tried  " not in plain.out and f"{count} cheats tried" in plain.out


def test_a_pin_follows_its_hill_when_the_project_moves(project: Path, tmp_path: Path) -> None:
    import shutil

    from testing.eval_fixtures import SCORE_EVAL, hills, make_hill, submission, tree_of

    hill_dir = make_hill("moving", SCORE_EVAL)
    first = tree_of(hill_dir)
    (hill_dir / "README.md").write_text((hill_dir / "README.md").read_text() + "\nA second version.\n")
    assert hills("commit", "moving", "-m", "second").code == 0
    assert hills("pin", "moving", first).code == 0
    moved = tmp_path / "elsewhere" / ".hills" / "moving"
    moved.parent.mkdir(parents=True)
    shutil.move(str(hill_dir), str(moved))
    sub = submission(tmp_path / "sub", {"score.txt": "2\n"})
    result = hills("eval", sub, "-H", str(moved))
    assert result.code == 0, result.output
    assert result.report["official"] is False
    assert f"is not the approved version of hill 'moving' (approved: {first[:12]})" in result.report["official_reason"]
    assert hills("pin", str(moved), "--clear").code == 0
    again = hills("eval", sub, "-H", str(moved))
    assert again.code == 0 and again.report["official"] is True, again.output


def test_an_approval_kept_by_folder_before_still_holds(project: Path, tmp_path: Path) -> None:
    from testing.eval_fixtures import SCORE_EVAL, hills, make_hill, submission, tree_of
    from hills.base import state
    from hills.disk import pin

    hill_dir = make_hill("older", SCORE_EVAL)
    first = tree_of(hill_dir)
    (hill_dir / "README.md").write_text((hill_dir / "README.md").read_text() + "\nA second version.\n")
    assert hills("commit", "older", "-m", "second").code == 0
    key = state.load_key()

    def record(registry: dict) -> None:  # the record `hills pin` wrote before approvals had the hill's identity
        entry = state.registry_entry(registry, "older", str(hill_dir), add=True)
        entry["pinned"] = {"tree_hash": first, "mac": pin._mac("older", first, key)}

    state.update_registry(record)
    result = hills("eval", submission(tmp_path / "sub", {"score.txt": "2\n"}), "-H", "older")
    assert result.code == 0 and result.report["official"] is False, result.output
    assert hills("pin", "older", "--clear").code == 0
    assert not (state.registry_entry(state.load_registry(), "older", str(hill_dir)) or {}).get("pinned")


@pytest.mark.parametrize("first, second, close", [("dd", "d", True), ("d", "dd", True), ("cp", "cq", True),
                                                  ("circle", "circles", True), ("ab", "ba", False),
                                                  ("d", "d", False), ("abc", "a", False)])
def test_one_edit_apart(first: str, second: str, close: bool) -> None:
    from hills.disk import hill

    assert hill.one_edit_apart(first, second) is close


def test_a_mistyped_short_name_gets_a_suggestion(project: Path, tmp_path: Path) -> None:
    assert run_cli("new", "d").code == 0
    for argv in (["status", "dd"], ["eval", str(tmp_path), "-H", "dd"], ["attempts", "x"]):
        result = run_cli(*argv)
        assert result.code == 2, result.output
        assert result.error_lines == [f"error: no hill named '{argv[-1]}'"]
        assert "hint: did you mean 'd'?" in result.err, result.output


@needs_bwrap
def test_reading_commands_never_make_the_machine_key(committed_hill: Path, tmp_path: Path, hermetic) -> None:
    import shutil

    from hills.base import state

    submission = tmp_path / "grid"
    shutil.copytree(committed_hill / "examples" / "grid", submission)
    assert run_cli("eval", submission, "-H", "circle-packing", "-o", tmp_path / "r.json").code == 0
    key = Path(state.key_path())
    assert key.is_file(), "the eval signed without a machine key"
    key.unlink()
    for argv in (["attempts", "circle-packing"], ["chain", "verify", "circle-packing"],
                 ["rank", tmp_path / "r.json"], ["log", "circle-packing"], ["show", tmp_path / "r.json"]):
        result = run_cli(*argv)
        assert result.code in (0, 1), (argv, result.output)
        assert not key.exists(), f"'hills {' '.join(map(str, argv))}' made the machine key"


def test_restore_discards_an_edit_of_the_manifest(committed_hill: Path) -> None:
    manifest = committed_hill / "hill.yaml"
    before = manifest.read_bytes()
    manifest.write_bytes(before + b"timout: 5\n")
    (committed_hill / "README.md").write_text("an edit\n")
    (committed_hill / "notes.txt").write_text("added since\n")
    broken = run_cli("status", "circle-packing")
    assert broken.code == 1 and "unknown key 'timout'" in broken.err, broken.output
    refused = run_cli("restore", "circle-packing", "hill.yaml", "notes.txt")
    assert refused.code == 2, refused.output
    assert refused.error_lines == ["error: 'notes.txt' is not a file of the last commit of hill 'circle-packing'"]
    assert manifest.read_bytes() != before, "a refused restore touched a file"
    outside = run_cli("restore", "circle-packing", "../elsewhere")
    assert outside.code == 2 and "is not a file of hill 'circle-packing'" in outside.err, outside.output
    one = run_cli("restore", "circle-packing", "hill.yaml")
    assert one.code == 0 and one.out == "hill.yaml\n", one.output
    assert manifest.read_bytes() == before
    assert run_cli("status", "circle-packing").code == 0
    rest = run_cli("restore", "circle-packing")
    assert rest.code == 0 and rest.out == "README.md\n", rest.output
    assert (committed_hill / "notes.txt").is_file()
    again = run_cli("restore", "circle-packing")
    assert again.code == 0 and again.out == "" and "nothing to restore" in again.err


def test_restore_of_a_hill_without_commits(project: Path) -> None:
    assert run_cli("new", "fresh").code == 0
    result = run_cli("restore", "fresh")
    assert result.code == 2 and "hill 'fresh' has no commits yet" in result.err, result.output


def test_the_examples_clock_starts_when_its_process_did() -> None:
    from testing.util import REPO_ROOT

    path = REPO_ROOT / "examples" / "nanogpt-10min" / "examples" / "gpt" / "train.py"
    code = ("import importlib.util, time\n"
            "time.sleep(1.0)\n"  # an interpreter slow to reach the script, as on a loaded machine
            f"spec = importlib.util.spec_from_file_location('train', {str(path)!r})\n"
            "train = importlib.util.module_from_spec(spec)\n"
            "spec.loader.exec_module(train)\n"
            "print(train.process_age(), train.elapsed())\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    age, elapsed = map(float, done.stdout.split())
    assert 1.0 <= age < 10.0 and elapsed >= 1.0, done.stdout
