"""The leak probe of `hills check` (docs/confinement.md, "The leak probe"):
it fails the naive evaluators, naming the path their submitted code
reached and how it was started, passes evaluators that start submitted
code through hills, warns when the boundary is off, and leaves no run
folder, attempts-log line or process behind."""

import os
import sys
import textwrap
from pathlib import Path

import pytest

from testing.util import needs_bwrap
from testing.eval_fixtures import hill_yaml, hills, hills_home, real, uncommitted_template_hill
from hills.checks import probe

SECRET = '{"labels": [1, 2, 3]}\n'
RESULT = {"passed": True, "metrics": [{"name": "total", "value": 1.0, "direction": "max"}],
          "config": [{"name": "mode", "value": "validation", "primary": True}], "details": {}}


def function_eval(body: str) -> str:
    """eval.py whose eval() runs `body` (indented code using `submission`)."""
    return ("import importlib.util, os, subprocess, sys\n\n"
            "def eval(submission, *, final=False, **params):\n"
            + textwrap.indent(textwrap.dedent(body), "    ")
            + f"    return {RESULT!r}\n")


def command_yaml(name: str, extra: str = "") -> str:
    return textwrap.dedent(f"""\
        spec: 1
        name: {name}
        version: 0.1.0
        description: a command hill made by the leak probe tests
        evaluator:
          shape: command
          entry: [bash, verifier.sh]
        timeout: 20
        metrics:
          - {{name: score, direction: max}}
        """) + extra


def make_uncommitted(name: str, files: dict[str, str], *, example: dict[str, str]) -> Path:
    return uncommitted_template_hill(name, {"private/labels.json": SECRET, **files}, example)


def function_hill(name: str, body: str, extra: str = "", example: dict[str, str] | None = None) -> Path:
    return make_uncommitted(name, {"eval.py": function_eval(body), "hill.yaml": hill_yaml(name, extra=extra)},
                            example=example or {"run.py": "print('the example ran')\n"})


# The verifier's score says whether the submitted code read the private
# file through ./problem: 1 when it did, so ran unconfined, 0 when it did not.
LEAKS = ("import os\n"
         "try:\n"
         "    print(len(open(os.path.join('problem', 'private', 'labels.json')).read()))\n"
         "except OSError:\n"
         "    print(0)\n")


def command_hill(name: str, interpreter: str) -> Path:
    verifier = ("#!/usr/bin/env bash\nset -euo pipefail\n"
                f"out=$({interpreter} solution.py | tail -n 1) || out=0\n"
                "if [ \"${out:-0}\" -gt 0 ]; then echo '{\"score\": 1}' > \"$HILLS_RESULT\";"
                " else echo '{\"score\": 0}' > \"$HILLS_RESULT\"; fi\n")
    return make_uncommitted(name, {"hill.yaml": command_yaml(name), "verifier.sh": verifier},
                            example={"solution.py": LEAKS})


def check(name: str):
    return hills("check", name, "--no-tests")


def probe_line(result) -> str:
    lines = [line for line in result.out.splitlines() if line.split()[1:3] == ["leak", "probe"]]
    assert len(lines) == 1, result.out
    return lines[0]


@pytest.fixture(autouse=True)
def probe_temp(monkeypatch):
    """A temporary folder of this test's own for the probe's sockets and
    findings, short enough for a unix socket's path."""
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="lp-")
    monkeypatch.setattr(tempfile, "tempdir", folder)
    monkeypatch.setenv("TMPDIR", folder)
    yield Path(folder)
    shutil.rmtree(folder, ignore_errors=True)


TOKENS: list[str] = []


@pytest.fixture(autouse=True)
def probe_tokens(monkeypatch):
    """The tokens of the probes this test ran in-process: a process of
    another probe on this machine (another suite's) is not this test's."""
    original = probe.kill_leftovers

    def recording(token):
        TOKENS.append(token)
        return original(token)

    TOKENS.clear()
    monkeypatch.setattr(probe, "kill_leftovers", recording)
    return TOKENS


def hill_has_no_trace(hill_dir: Path, name: str) -> None:
    """No run folder, attempts log, process or findings file left behind."""
    runs = hills_home() / "runs" / name
    assert not runs.exists() or not any(runs.iterdir()), list(runs.iterdir())
    state = hills_home() / "state"
    assert not (state.exists() and list(state.rglob("attempts.jsonl")))
    assert not list(hill_dir.rglob(probe.MARK + "*"))
    assert TOKENS and not [pid for token in TOKENS for pid in probe.leftovers(token)]
    temp = Path(os.environ["TMPDIR"])
    assert not [path for path in temp.iterdir() if path.name.startswith(("hills-probe-", probe.MARK))]


# -- the pure parts ----------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("print(1)\n", "LINE\nprint(1)\n"),
    ("#!/usr/bin/env python3\nprint(1)\n", "#!/usr/bin/env python3\nLINE\nprint(1)\n"),
    ('"""Doc."""\nfrom __future__ import annotations\nx = 1\n',
     '"""Doc."""\nfrom __future__ import annotations\nLINE\nx = 1\n'),
    ("# -*- coding: utf-8 -*-\nx = 1", "# -*- coding: utf-8 -*-\nLINE\nx = 1"),
    ('"""A docstring\nover two lines."""\nimport os\n', '"""A docstring\nover two lines."""\nLINE\nimport os\n'),
    ('x = 1\n"""not a docstring"""\n', 'LINE\nx = 1\n"""not a docstring"""\n'),
    ("def broken(:\n", "LINE\ndef broken(:\n"),
    ("", "LINE\n"),
])
def test_the_payload_goes_where_code_may_start(text, expected):
    assert probe.insert_payload(text, "LINE\n") == expected


@pytest.mark.parametrize("solution, expected", [
    (None, "solution.py"),
    ({"run": ["{python}", "solve.py"], "outputs": ["x"]}, "solve.py"),
    ({"run": ["{python}", "problem/run.py"], "outputs": ["x"]}, "solution.py"),
    ({"run": ["{python}", "-u", "main.py"], "when": "main.py", "outputs": ["x"]}, "main.py"),
    ({"run": "not a list"}, "solution.py"),
])
def test_the_solution_file_comes_from_hill_yaml(tmp_path, solution, expected):
    assert probe.solution_name({"solution": solution}, str(tmp_path)) == expected


def test_the_payload_runs_the_file_after_it_and_reports_nothing_outside_an_eval(tmp_path):
    import subprocess

    config = {"token": "t" * 24, "mark": probe.MARK, "findings": str(tmp_path), "relative": ["private"],
              "private": [], "private_dir": None, "hill_paths": [], "key_paths": [], "key_id": None,
              "writes": [], "listings": [], "hill_id": None, "run_id": None, "tcp_port": None,
              "unix_path": None}
    script = tmp_path / "solution.py"
    script.write_text(probe.insert_payload("from __future__ import annotations\nprint('mine')\n",
                                           probe.prefix_line(config)))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert done.returncode == 0 and done.stdout == "mine\n", done.stderr
    reports = probe.collect("t" * 24, [str(tmp_path)], [])
    assert reports and all(report["found"] == [] for report in reports)
    probe.kill_leftovers("t" * 24)


def test_a_process_left_behind_is_found_named_and_killed():
    import subprocess

    token = "f" * 24
    left = subprocess.Popen(["bash", "-c", f"exec -a {probe.MARK}{token} sleep 30"], start_new_session=True)
    try:
        for _ in range(500):
            if probe.leftovers(token):
                break
            __import__("time").sleep(0.02)
        found = probe.kill_leftovers(token)
        assert [finding.phrase() for finding in found] == [
            f"left behind a process (pid {left.pid}, killed by hills check)"]
        assert left.wait(timeout=10) == -9
    finally:
        left.kill()
        left.wait()
    assert probe.leftovers(token) == []


def test_the_listeners_count_connections_themselves(tmp_path):
    import socket

    listeners = probe.Listeners(str(tmp_path))
    try:
        assert listeners.accepted() == []
        with socket.create_connection(("127.0.0.1", listeners.port)):
            pass
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(str(listeners.unix_path))
        assert [finding.phrase() for finding in listeners.accepted()] == [
            f"connected to a TCP socket on 127.0.0.1:{listeners.port}",
            f"connected to a unix socket at {listeners.unix_path}"]
    finally:
        listeners.close()


# -- naive evaluators fail -------------------------------------------------------

@pytest.mark.slow
@needs_bwrap
def test_an_evaluator_running_the_submission_itself_fails_the_probe(project, monkeypatch):
    """The scoring phase's guard stops the start and the probe fails naming
    it; the control, with the guard off, is the payload's own finding."""
    hill_dir = function_hill("naive", 'subprocess.run([sys.executable, "run.py"], cwd=submission)\n')
    checked = check("naive")
    assert checked.code == 1, checked.output
    line = probe_line(checked)
    assert line.split()[0] == "FAIL"
    assert ("the evaluator ran the example's code itself: the scoring phase tried to run the submission's "
            "file 'run.py' as the script of 'python'") in line
    assert "hint: start submitted code with hills.sdk.run_submission" in checked.out
    hill_has_no_trace(hill_dir, "naive")
    committed = hills("commit", "naive", "-m", "first")
    assert committed.code == 1
    assert committed.error_lines[0].startswith("error: hill 'naive' failed check 'leak probe': the evaluator ran "
                                               "the example's code itself")
    from hills.run import phases

    monkeypatch.setattr(phases, "SCORING_GUARD", False)
    checked = check("naive")
    assert checked.code == 1, checked.output
    line = probe_line(checked)
    assert line.split()[0] == "FAIL"
    assert "submitted code read private/labels.json by relative path ../hill/private/labels.json" in line
    assert "started by the evaluator itself (as 'python run.py'), not through hills.sdk" in line
    assert "hint: start submitted code with hills.sdk.run_submission, or declare a solution phase" in checked.out
    hill_has_no_trace(hill_dir, "naive")
    executable = real("hills", "check", "naive", "--no-tests")
    assert executable.code == 1, executable.output
    assert probe_line(executable).split()[0] == "FAIL"
    hill_has_no_trace(hill_dir, "naive")
    committed = hills("commit", "naive", "-m", "first")
    assert committed.code == 1
    assert committed.error_lines[0].startswith("error: hill 'naive' failed check 'leak probe': submitted code read "
                                               "private/labels.json")


@needs_bwrap
def test_an_evaluator_importing_the_submission_fails_the_probe(project, monkeypatch):
    function_hill("importer", """\
        spec = importlib.util.spec_from_file_location("run", os.path.join(submission, "run.py"))
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
        """)
    checked = check("importer")
    assert checked.code == 1, checked.output
    assert "the scoring phase tried to run the submission's file 'run.py' compiled as code" in probe_line(checked)
    from hills.run import phases

    monkeypatch.setattr(phases, "SCORING_GUARD", False)  # the control: the payload itself finds the leak
    checked = check("importer")
    assert checked.code == 1, checked.output
    line = probe_line(checked)
    assert "read private/labels.json by relative path hill/private/labels.json" in line
    assert "imported into the evaluator's own process, not started through hills.sdk" in line


def unconfined(name: str, hill_dir: Path) -> bool:
    """Whether the verifier of `hill_dir` runs its example's code (as it
    is, without the payload) where it can read private/: its score says so."""
    from hills.run import evaluate
    from hills.disk.hill import Hill

    request = evaluate.EvalRequest(hill=Hill(hill_dir), submission=str(hill_dir / "examples" / "basic"),
                                   current=True, repeat=1)
    with probe.probe_run_dir(name) as run_dir:
        report = evaluate.evaluate_unlogged(request, run_dir)
    if report["status"] == "buggy" and report["reason"].startswith("the scoring phase tried to run"):
        return True  # it would have: the scoring phase's guard stopped it
    assert report["status"] == "passing", report
    return report["metrics"][0]["value"] == 1


@pytest.mark.slow
@needs_bwrap
@pytest.mark.parametrize("interpreter", ['"$HILLS_PYTHON"', "python3", sys.executable])
def test_a_verifier_is_held_to_whether_its_submission_ran_unconfined(project, interpreter):
    hill_dir = command_hill("verifier", interpreter)
    leaked = unconfined("verifier", hill_dir)
    if interpreter == sys.executable:
        assert leaked  # the base interpreter by its own path: nothing confines it
    checked = check("verifier")
    line = probe_line(checked)
    if interpreter == sys.executable:
        # A trusted interpreter holds the scoring phase's guard: the start is stopped.
        assert checked.code == 1, checked.output
        assert line.split()[0] == "FAIL"
        assert ("the evaluator ran the example's code itself: the scoring phase tried to run the submission's "
                "file 'solution.py' as the script of a trusted interpreter") in line, line
        assert 'hint: start submitted code with "$HILLS_PYTHON"' in checked.out
    elif leaked:
        assert checked.code == 1, checked.output
        assert line.split()[0] == "FAIL"
        assert "submitted code read private/labels.json by relative path problem/private/labels.json" in line
        assert "started by the verifier itself (as 'python solution.py'), not through the confined interpreter" in line
        assert 'hint: start submitted code with "$HILLS_PYTHON"' in checked.out
    else:
        assert checked.code == 0, checked.output
        assert line.split()[:3] == ["ok", "leak", "probe"], line


# -- what passes -------------------------------------------------------------------

SDK_BODY = """\
from hills import sdk
sdk.run_submission([sys.executable, "run.py"], timeout=20)
"""


@pytest.mark.slow
@needs_bwrap
def test_an_evaluator_starting_the_submission_through_the_sdk_passes(project):
    hill_dir = function_hill("confined", SDK_BODY)
    checked = check("confined")
    assert checked.code == 0, checked.output
    line = probe_line(checked)
    assert line.split()[:3] == ["ok", "leak", "probe"]
    assert "paths tried, none reached; submitted code started by hills, confined" in line
    hill_has_no_trace(hill_dir, "confined")


@pytest.mark.slow
@needs_bwrap
@pytest.mark.parametrize("template", ["circle-packing", "bin-packing", "dataset", "default"])
def test_the_templates_pass_the_probe(project, template):
    created = hills("new", template, "-t", template)
    assert created.code == 0, created.output
    checked = check(template)
    line = probe_line(checked)
    assert line.split()[:3] == ["ok", "leak", "probe"], checked.out
    hill_has_no_trace(Path(created.out.strip()), template)
    # The same check's cheat corpus (tests/test_cheat_corpus.py has the rest): one check per template.
    from hills.checks import corpus

    cheats = next(text for text in checked.out.splitlines() if "cheat corpus" in text)
    assert cheats.split()[:3] == ["ok", "cheat", "corpus"], checked.out
    assert cheats.rstrip().endswith(f"cheats tried, none got through; corpus v{corpus.VERSION}"), cheats


@pytest.mark.slow
def test_an_example_without_code_still_carries_the_payload(project):
    """The payload goes into the names evaluators run when the example
    lacks them: here the solution phase's solve.sh, a shell script."""
    function_hill("no-code", SDK_BODY, extra="solution:\n  run: [bash, solve.sh]\n  when: solve.sh\n"
                                             "  outputs: [answer.txt]\n", example={"answer.txt": "1\n"})
    checked = check("no-code")
    line = probe_line(checked)
    assert line.split()[:3] == ["ok", "leak", "probe"], line
    assert "paths tried, none reached" in line


def test_every_file_that_could_run_carries_the_payload(tmp_path):
    source = tmp_path / "example"
    (source / "pkg").mkdir(parents=True)
    (source / "pkg" / "__init__.py").write_text("")
    (source / "go.sh").write_text("echo hi\n")
    (source / "tool").write_text("#!/usr/bin/env bash\necho tool\n")
    (source / "data.csv").write_text("1,2\n")
    example = probe.make_example(str(source), str(tmp_path / "copy"), "solution.py", "LINE\n")
    assert example.carriers == sorted(["pkg/__init__.py", "go.sh", "tool", "solution.py", "run.py", "main.py",
                                       "run.sh"])
    assert (tmp_path / "copy" / "tool").read_text().startswith("#!/usr/bin/env bash\nfor _hills_py in")
    assert (tmp_path / "copy" / "data.csv").read_text() == "1,2\n"
    assert (tmp_path / "copy" / "run.py").read_text() == "LINE\n"


# -- the boundary off ------------------------------------------------------------------

@pytest.mark.slow
def test_without_the_boundary_the_leak_is_a_warning(project, hermetic):
    """A `sandbox: none` control: the same evaluator that passes above
    leaks here, and the probe says what, as a warning."""
    (hermetic.home / "notes.txt").write_text("the user's own file\n")
    hill_dir = function_hill("open", SDK_BODY, extra="sandbox: none\n")
    checked = check("open")
    assert checked.code == 0, checked.output
    line = probe_line(checked)
    assert line.split()[0] == "warn", line
    assert "read private/labels.json by absolute path (" + str(hill_dir / "private" / "labels.json") in line
    assert "(sandbox: none in hill.yaml: nothing confines submitted code)" in line
    assert "hint: install bubblewrap (Debian package 'bubblewrap') and remove 'sandbox: none'" in checked.out
    assert "the user's own file" not in checked.output and SECRET.strip() not in checked.output
    assert "; and " in line and " more; started by hills, without bubblewrap" in line
    hill_has_no_trace(hill_dir, "open")


@pytest.mark.slow
def test_without_the_boundary_every_way_out_is_named(project, hermetic, monkeypatch):
    """The findings of an unconfined run, one by one (the line shows the
    first four). The process it leaves behind is killed by the eval's own
    watchdog, so none is left for the probe to find."""
    (hermetic.home / "notes.txt").write_text("x\n")
    hill_dir = function_hill("wide", SDK_BODY, extra="sandbox: none\n")
    found: list[str] = []
    original = probe.verdict

    def keep(spec, reports, extra, boundary):
        found.extend(f.phrase() for _how, f in probe._findings(reports))
        found.extend(f.phrase() for f in extra)
        return original(spec, reports, extra, boundary)

    monkeypatch.setattr(probe, "verdict", keep)
    checked = check("wide")
    assert checked.code == 0, checked.output
    text = "\n".join(found)
    for words in ("read private/labels.json by relative path", "read private/labels.json relative to its own file",
                  "read private/labels.json by absolute path", "read private/labels.json by walking up",
                  "read private/labels.json through /proc/PID/root", "read the machine key by absolute path",
                  "listed $HOME", "listed machine state", "wrote into the hill folder", "wrote into private/",
                  "wrote into the run folder", "connected to a TCP socket on 127.0.0.1",
                  "connected to a unix socket at"):
        assert words in text, (words, text)
    assert not (hill_dir / "private" / (probe.MARK + "x")).exists()
    hill_has_no_trace(hill_dir, "wide")


def test_without_bubblewrap_the_check_is_refused(project, monkeypatch):
    """Fail closed (docs/decisions.md): under `sandbox: auto` without a usable
    bubblewrap, `hills check` is refused (exit 4, the reason named) as every
    eval of the hill would be; the probe does not run, and leaves nothing.
    A leak without the boundary is a warning only for `sandbox: none`
    (test_without_the_boundary_the_leak_is_a_warning)."""
    monkeypatch.setenv("HILLS_BWRAP", "/nonexistent/bwrap")
    function_hill("unwrapped", SDK_BODY)
    checked = check("unwrapped")
    assert checked.code == 4, checked.output
    assert "error: bubblewrap '/nonexistent/bwrap' (HILLS_BWRAP) does not exist" in checked.err
    assert "hint: install bubblewrap" in checked.err and "'sandbox: none'" in checked.err
    assert not [line for line in checked.out.splitlines() if line.split()[1:3] == ["leak", "probe"]], checked.out
    runs = hills_home() / "runs" / "unwrapped"
    assert not runs.exists() or not any(runs.iterdir()), list(runs.iterdir())
