"""Dev runs (`hills run`) and the locked environment (`hills env`): the
solution phase runs as an eval runs it, confined, on public inputs, and
leaves nothing behind (no attempts line, no run folder, no report); its
submitted code reaches neither private/ nor the machine key, and the
hill's generator sees no private/ either. Each attack has its control:
the same payload with the boundary off (`sandbox: none`, or a real eval
for the generator, which may read private/ by design)."""

import json
import os
import re
import signal
import subprocess
import textwrap
from pathlib import Path

import pytest

from testing import readme_examples

from testing.eval_fixtures import attempts_log, hills, make_hill, submission, tree_of
from testing.util import UV_CACHE, needs_bwrap, run_bin
from hills.base import state

SECRET = "the-answer-is-42"

# Scores 1.0 when out.txt holds the private answer.
SCORER = '''
from pathlib import Path

def eval(submission, *, final=False):
    answer = (Path(__file__).parent / "private" / "answer.txt").read_text()
    out = Path(submission) / "out.txt"
    got = out.read_text() if out.is_file() else ""
    return {"passed": True, "metrics": [{"name": "score", "value": 1.0 if answer in got else 0.0,
                                         "direction": "max"}], "config": [], "details": {}}
'''

# Submitted code that tries the answer key and the machine key by every
# path it knows, and writes what it read into its output and its stdout.
THIEF = '''
import os
found = []
for path in ["../hill/private/answer.txt", "problem/private/answer.txt", PRIVATE_ABS, KEY_ABS]:
    try:
        found.append(open(path).read())
    except OSError as exc:
        found.append("refused " + type(exc).__name__)
try:
    found.append("state: " + ",".join(sorted(os.listdir(STATE_ABS))))
except OSError as exc:
    found.append("state refused " + type(exc).__name__)
print("|".join(found))
open("out.txt", "w").write("|".join(found))
'''

SOLUTION = """\
solution:
  run: ["{python}", solution.py]
  when: solution.py
  outputs: [out.txt]
"""


def dev_hill(name, *, sandbox="auto", extra=""):
    return make_hill(name, SCORER, timeout=30, private={"answer.txt": SECRET},
                     extra=SOLUTION + f"sandbox: {sandbox}\n" + extra)


def thief(root, hill_dir):
    home = Path(os.environ["HILLS_HOME"])
    text = (THIEF.replace("PRIVATE_ABS", repr(str(hill_dir / "private" / "answer.txt")))
            .replace("KEY_ABS", repr(state.key_path())).replace("STATE_ABS", repr(str(home))))
    return submission(root, {"solution.py": text})


def key_text():
    return Path(state.key_path()).read_text()


def dev_run(*args):
    result = hills("run", *map(str, args))
    return result, (json.loads(result.out) if result.out.strip().startswith("{") else None)


@needs_bwrap
def test_a_dev_run_reaches_neither_private_nor_the_key(tmp_path):
    hill_dir = dev_hill("devrun")
    # An eval first: the machine key exists, and the private answer is where the thief looks.
    assert hills("eval", submission(tmp_path / "plain", {"out.txt": "x"}), "-H", "devrun").code == 0
    assert (hill_dir / "private" / "answer.txt").read_text() == SECRET and key_text().strip()
    result, ran = dev_run(thief(tmp_path / "sub", hill_dir), "-H", "devrun", "-o", tmp_path / "out", "--json")
    assert result.code == 0, result.output
    assert ran["status"] == "ok" and ran["isolation"] == "bwrap" and ran["logged"] is False
    got = (tmp_path / "out" / "out.txt").read_text()
    assert got.split("|")[:4] == ["refused FileNotFoundError"] * 4, got
    # Of machine state, only the mount points of what it may read (its
    # environment, the sdk, its own folder) are there, as in an eval.
    listed = got.split("|")[4].removeprefix("state: ").split(",")
    assert "key" not in listed and "state" not in listed, got
    assert SECRET not in got and key_text().strip() not in got
    # What it printed streamed to stderr, with nothing of the secrets in it.
    assert "refused FileNotFoundError" in result.err and SECRET not in result.output


def test_without_the_sandbox_the_same_dev_run_reads_both(tmp_path):
    """The control: the boundary above is the sandbox's."""
    hill_dir = dev_hill("devopen", sandbox="none")
    assert hills("eval", submission(tmp_path / "plain", {"out.txt": "x"}), "-H", "devopen").code == 0
    result, ran = dev_run(thief(tmp_path / "sub", hill_dir), "-H", "devopen", "-o", tmp_path / "out", "--json")
    assert result.code == 0, result.output
    assert ran["isolation"] == "none"
    got = (tmp_path / "out" / "out.txt").read_text()
    assert SECRET in got and key_text().strip() in got
    assert {"key", "state"} <= set(got.split("|")[4].removeprefix("state: ").split(",")), got


# The hill's generator: it writes into the inputs whatever it can read of
# private/, by the run folder's link and by the hill's absolute path.
GENERATOR = '''
import os
found = "none"
for path in [os.path.join(os.environ["HILLS_HILL"], "private", "answer.txt"), PRIVATE_ABS]:
    try:
        found = open(path).read()
        break
    except OSError:
        pass
open(os.path.join(os.environ["HILLS_INPUTS"], "case.txt"), "w").write(found)
'''


def generating_hill(name, tmp_path):
    hill_dir = make_hill(name, SCORER, timeout=30, private={"answer.txt": SECRET}, extra=textwrap.dedent("""\
        solution:
          run: ["{python}", solution.py]
          generate: ["{python}", gen.py]
          outputs: [out.txt]
        """), message="zero")
    (hill_dir / "gen.py").write_text(GENERATOR.replace("PRIVATE_ABS", repr(str(hill_dir / "private" / "answer.txt"))))
    assert hills("commit", name, "-m", "with its generator").code == 0
    copier = "open('out.txt', 'w').write(open('inputs/case.txt').read())\n"
    return hill_dir, submission(tmp_path / "copier", {"solution.py": copier})


@needs_bwrap
def test_the_generator_of_a_dev_run_sees_no_private(tmp_path):
    hill_dir, copier = generating_hill("devgen", tmp_path)
    # The control first: in an eval the generator reads private/ (the
    # hill's own design), so the inputs, and the score, hold the answer.
    scored = hills("eval", copier, "-H", "devgen")
    assert scored.code == 0, scored.output
    assert scored.report["metrics"][0]["value"] == 1.0
    result, ran = dev_run(copier, "-H", "devgen", "-o", tmp_path / "out", "--json")
    assert result.code == 0, result.output
    assert (tmp_path / "out" / "out.txt").read_text() == "none"
    assert SECRET not in result.output


def test_a_dev_run_logs_nothing_and_leaves_no_run_folder(tmp_path):
    dev_hill("devlog", sandbox="none")
    assert hills("eval", submission(tmp_path / "plain", {"out.txt": "x"}), "-H", "devlog").code == 0
    log = attempts_log("devlog", tree_of(Path(".hills/devlog")))
    runs = Path(state.runs_dir("devlog"))
    lines, folders = log.read_bytes().count(b"\n"), sorted(os.listdir(runs))
    assert lines == 2 and len(folders) == 1  # the eval's started entry and its report, and its run folder
    ok = submission(tmp_path / "ok", {"solution.py": "open('out.txt', 'w').write('hi')\nprint('said hi')\n"})
    result = hills("run", ok, "-H", "devlog")
    assert result.code == 0, result.output
    assert "said hi" in result.err
    assert "solution phase: ok" in result.out and "out.txt  2 bytes" in result.out
    assert log.read_bytes().count(b"\n") == lines and sorted(os.listdir(runs)) == folders
    listed = hills("attempts", "devlog", "--json")
    assert listed.code == 0 and len(json.loads(listed.out)["attempts"]) == 1


def test_a_failing_solution_or_a_missing_output_exits_1_with_the_reason(tmp_path):
    dev_hill("devbad", sandbox="none")
    failing = submission(tmp_path / "a", {"solution.py": "raise SystemExit('no luck')\n"})
    result, ran = dev_run(failing, "-H", "devbad", "--json")
    assert result.code == 1, result.output
    assert ran["status"] == "buggy" and ran["reason"] == "the solution phase failed (exit code 1): no luck"
    silent = submission(tmp_path / "b", {"solution.py": "pass\n"})
    result = hills("run", silent, "-H", "devbad")
    assert result.code == 1
    assert "reason: the solution phase wrote no 'out.txt' (hill.yaml solution.outputs)" in result.out


def test_the_caps_and_the_time_limit_are_the_evals(tmp_path):
    dev_hill("devcap", sandbox="none", extra="limits:\n  time: 1\n")
    sleeper = submission(tmp_path / "s", {"solution.py": "import time\ntime.sleep(20)\n"})
    scored = hills("eval", sleeper, "-H", "devcap")
    assert scored.code == 1 and scored.report["status"] == "buggy"
    assert [hit["cap"] for hit in scored.report["isolation"]["caps_hit"]] == ["time"]
    result, ran = dev_run(sleeper, "-H", "devcap", "--json")
    assert result.code == 1, result.output
    assert ran["status"] == "buggy" and ran["duration_s"] < 10
    assert [hit["cap"] for hit in ran["caps_hit"]] == ["time"]
    # The eval's own reason, less the pointer into its run folder and the time it measured.
    said = [re.sub(r"[0-9.]+s limit", "Ns limit", text) for text in (ran["reason"], scored.report["reason"])]
    assert said[0] == said[1].split("; see ")[0] and "limit" in said[0], said


def test_a_submission_without_the_when_file_is_taken_as_it_is(tmp_path):
    dev_hill("devwhen", sandbox="none")
    result, ran = dev_run(submission(tmp_path / "s", {"out.txt": "mine"}), "-H", "devwhen", "--json")
    assert result.code == 0, result.output
    assert ran["ran"] is False and ran["outputs"] == [{"path": "out.txt", "bytes": 4}]
    shown = hills("run", tmp_path / "s", "-H", "devwhen")
    assert "solution phase: skipped" in shown.out and "holds no 'solution.py' (hill.yaml solution.when)" in shown.out


def test_bad_input_is_named(tmp_path):
    dev_hill("devargs", sandbox="none")
    ok = submission(tmp_path / "ok", {"solution.py": "open('out.txt', 'w').write('hi')\n"})
    unknown = hills("run", ok, "-H", "no-such-hill")
    assert unknown.code == 2 and unknown.error_lines == ["error: no hill named 'no-such-hill'"]
    missing = hills("run", tmp_path / "gone", "-H", "devargs")
    assert missing.code == 2 and f"submission '{tmp_path / 'gone'}' is not a folder" in missing.err
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    taken = hills("run", ok, "-H", "devargs", "-o", tmp_path / "full")
    assert taken.code == 2 and f"--output '{tmp_path / 'full'}' exists and is not an empty folder" in taken.err
    assert (tmp_path / "full" / "keep.txt").read_text() == "mine"
    bad_param = hills("run", ok, "-H", "devargs", "-p", "nope=1")
    assert bad_param.code == 2 and "unknown param 'nope' for hill 'devargs'" in bad_param.err


def test_a_hill_without_a_solution_phase_is_refused_with_what_to_use(tmp_path):
    make_hill("onephase", SCORER, private={"answer.txt": SECRET})
    result = hills("run", submission(tmp_path / "s", {"out.txt": "x"}), "-H", "onephase")
    assert result.code == 2
    assert result.error_lines == ["error: hill 'onephase' has no solution phase (no 'solution:' in its hill.yaml): "
                                  "its evaluator runs the submission itself, with the hill's data in sight, so only "
                                  "a logged eval may run it"]
    assert "hills env onephase" in result.err and "hills eval DIR -H onephase" in result.err
    described = json.loads(hills("describe", "onephase", "--json").out)
    assert described["dev_run"]["available"] is False and described["dev_run"]["command"] is None


def test_inputs_in_private_are_refused(tmp_path):
    make_hill("privin", SCORER, private={"answer.txt": SECRET, "val/a.txt": "v"}, extra=textwrap.dedent("""\
        solution:
          run: ["{python}", solution.py]
          inputs: {validation: private/val}
          outputs: [out.txt]
        sandbox: none
        """))
    result = hills("run", submission(tmp_path / "s", {"solution.py": "pass\n"}), "-H", "privin")
    assert result.code == 2
    assert "solution.inputs.validation: 'private/val'" in result.err and "public inputs only" in result.err


def test_describe_names_both(tmp_path):
    dev_hill("devdesc", sandbox="none")
    shown = hills("describe", "devdesc")
    assert shown.code == 0
    assert "- dev run: hills run DIR -H devdesc" in shown.out and "- environment: hills env devdesc" in shown.out
    described = json.loads(hills("describe", "devdesc", "--json").out)
    assert described["dev_run"]["available"] is True
    assert described["env"]["command"].startswith("hills env devdesc")


# ---------------------------------------------------------------- hills env

@pytest.fixture
def hill_with_a_package(monkeypatch):
    """A committed hill whose environment installs tomli-w (small, pure
    Python, a dependency of hills, so in uv's cache)."""
    from hills.disk import uvenv

    monkeypatch.setenv("UV_CACHE_DIR", UV_CACHE)
    hill_dir = make_hill("withpkg", SCORER, private={"answer.txt": SECRET}, message="zero")
    pyproject = hill_dir / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("dependencies = []", 'dependencies = ["tomli-w"]'))
    uvenv.lock(hill_dir)
    assert "tomli-w" in (hill_dir / "uv.lock").read_text()
    assert hills("commit", "withpkg", "-m", "with tomli-w").code == 0
    return hill_dir


def test_env_prints_an_interpreter_that_imports_the_hills_packages(hill_with_a_package):
    first = hills("env", "withpkg", "--json")
    assert first.code == 0, first.output
    found = json.loads(first.out)
    assert found["built"] is True  # no eval had built it: hills env built it as an eval would
    python = hills("env", "withpkg").out.strip()
    assert python == found["python"] and os.access(python, os.X_OK)
    done = subprocess.run([python, "-c", "import sys, tomli_w; print(sys.prefix); print(tomli_w.__file__)"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    prefix, module = done.stdout.split()
    assert os.path.realpath(prefix) == os.path.realpath(found["env_dir"])
    assert os.path.realpath(module).startswith(os.path.realpath(found["env_dir"]) + os.sep)
    # The activation lines, in a real shell: the same interpreter, and
    # hills.spaces importable with the sdk folder on PYTHONPATH.
    shown = run_bin("sh", "-c", 'eval "$(hills env withpkg --activate)" && python -c '
                    '"import sys, tomli_w; print(sys.executable)" && PYTHONPATH="$SDK" python -c '
                    '"from hills import spaces; print(spaces.__name__)"', env=dict(os.environ, SDK=found["sdk_dir"]))
    assert shown.code == 0, shown.output
    printed, spaces = shown.out.split()
    assert os.path.realpath(printed) == os.path.realpath(python) and spaces == "hills.spaces"
    again = json.loads(hills("env", "withpkg", "--json").out)
    assert again["built"] is False and again["python"] == python


def test_a_file_added_to_the_environment_is_gone_at_the_next_use(hill_with_a_package):
    python = hills("env", "withpkg").out.strip()
    env_dir = Path(python).parent.parent
    planted = env_dir / "lib" / "sitecustomize.py"
    planted.write_text("print('planted')\n")
    rebuilt = json.loads(hills("env", "withpkg", "--json").out)
    assert rebuilt["built"] is True and not planted.exists()


def test_env_of_a_hill_never_committed_is_refused():
    created = hills("new", "fresh", "-t", "circle-packing")
    assert created.code == 0, created.output
    result = hills("env", "fresh")
    assert result.code == 5
    assert result.error_lines == ["error: hill 'fresh' has no commits yet: it has no locked environment"]
    assert "hills commit fresh" in result.err
    unknown = hills("env", "no-such-hill")
    assert unknown.code == 2 and unknown.error_lines == ["error: no hill named 'no-such-hill'"]


# The lines of the README's dev-run block (the "Use hills from your loop"
# section), run as a person types them, through the real executables.
README_LINES = readme_examples.example("devrun")
# jq where the README has it is not on every machine: the same filter in Python.
JQ_STATUS = "jq -r .status"


@needs_bwrap
def test_the_readme_lines_run(tmp_path):
    hill = hills("new", "circle-packing", "-t", "circle-packing")
    assert hill.code == 0, hill.output
    assert hills("commit", "circle-packing", "-m", "initial").code == 0
    submission(Path("mine"), {"solution.py": "import json\nprint('packing')\n"
                                             "json.dump([[0.5, 0.5, 0.5]], open('circles.json', 'w'))\n"})
    Path("check_mine.py").write_text("import sys\nprint('checked with', sys.prefix)\n")
    assert JQ_STATUS in README_LINES
    lines = README_LINES.replace(JQ_STATUS, """python3 -c 'import json, sys; print(json.load(sys.stdin)["status"])'""")
    done = run_bin("sh", "-e", "-c", lines + 'python -c "import sys; print(sys.prefix)"\n', cwd=Path.cwd())
    assert done.code == 0, done.output
    lines = done.out.splitlines()
    assert lines[0].startswith("solution phase: ok") and "copied to: " + str(Path.cwd() / "out") in done.out
    assert "[[0.5, 0.5, 0.5]]" in done.out and "packing" in done.err
    env_dir = json.loads(hills("env", "circle-packing", "--json").out)["env_dir"]
    assert f"checked with {env_dir}" in done.out
    assert lines[-2:] == ["ok", env_dir]


def test_an_interrupted_dev_run_exits_130_and_leaves_nothing(tmp_path):
    from testing.util import default_signals

    dev_hill("devint", sandbox="none")
    runs = Path(state.runs_dir("devint"))
    assert not runs.exists()  # no eval yet: the dev run makes the runs folder, and must remove it
    sleeper = submission(tmp_path / "s", {"solution.py": "import time\nprint('begun', flush=True)\ntime.sleep(60)\n"})
    process = subprocess.Popen(["hills", "run", str(sleeper), "-H", "devint"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, preexec_fn=default_signals)
    seen = ""
    while "begun" not in seen:
        line = process.stderr.readline()
        assert line or process.poll() is None, seen
        seen += line
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, seen + out + err
    assert not runs.exists() and not attempts_log("devint", tree_of(Path(".hills/devint"))).exists()


def test_through_a_service_an_unknown_hill_says_dev_runs_are_local(tmp_path, monkeypatch):
    monkeypatch.setenv("HILLS_SERVICE", str(tmp_path / "service.sock"))
    folder = submission(tmp_path / "mine", {"solution.py": "print(1)\n"})
    for argv, verb in ((("run", str(folder), "-H", "served-only"), "run"), (("env", "served-only"), "env")):
        result = hills(*argv)
        assert result.code == 2, result.output
        assert result.error_lines[0] == (f"error: 'hills {verb}' works on this machine's own hills, "
                                         "and none here is named 'served-only'")
        assert str(tmp_path / "service.sock") in result.err
