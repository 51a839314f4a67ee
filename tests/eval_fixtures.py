"""Helpers for the scoring-path tests: hills made from an evaluator's source,
commands run in-process or as the real executables, and log and report
readers. The hermetic machine itself comes from conftest (`module_machine`).
"""

import contextlib
import io
import json
import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from conftest import Result

REPO_ROOT = Path(__file__).resolve().parent.parent
TRIVIAL_TEST = "def test_the_hill_imports():\n    import eval  # noqa: F401\n"
GRID_EXAMPLE = REPO_ROOT / "examples" / "circle-packing" / "examples" / "grid"


class Outcome(Result):
    """A command's exit code and output, and the report it printed."""

    @property
    def report(self):
        """The JSON report printed on stdout."""
        return json.loads(self.out)


def hills(*args, prog="hills"):
    """Run a hills command in-process through the error funnel."""
    from hills import cli

    command, prog_name = cli.entry_for(prog)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.run(command, [str(a) for a in args], prog_name)
    return Outcome(code, out.getvalue(), err.getvalue())


def real(*argv, cwd=None, env=None, input=None, timeout=180):
    """Run a real executable (bin/hills, hills-eval, git...) from PATH."""
    env = dict(os.environ if env is None else env)
    program = shutil.which(str(argv[0]), path=env.get("PATH", "")) or str(argv[0])
    done = subprocess.run([program, *[str(a) for a in argv[1:]]], cwd=cwd, env=env, input=input,
                          capture_output=True, text=True, timeout=timeout)
    return Outcome(done.returncode, done.stdout, done.stderr)


def hill_yaml(name, *, timeout=3, params="", exclusive=None, extra=""):
    """A hill.yaml for a function evaluator; `params` is the YAML body of
    params:, `extra` more top-level YAML."""
    text = textwrap.dedent(f"""\
        spec: 1
        name: {name}
        version: 0.1.0
        description: a hill made by the scoring tests
        evaluator:
          shape: function
          entry: eval.py
        timeout: {timeout}
        """)
    if params:
        text += "params:\n" + textwrap.indent(textwrap.dedent(params), "  ")
    if exclusive:
        text += f"exclusive: {exclusive}\n"
    return text + textwrap.dedent(extra)


def make_hill(name, eval_source, *, timeout=3, params="", exclusive=None, extra="", private=None,
              message="first"):
    """Create hill `name` in the cwd from the circle-packing template, replace
    its evaluator, manifest and tests, add private files, and commit it."""
    # Never create a hill inside the checkout this suite runs from.
    assert REPO_ROOT not in (Path.cwd().resolve(), *Path.cwd().resolve().parents), Path.cwd()
    created = hills("new", name, "-t", "circle-packing")
    assert created.code == 0, created.output
    hill_dir = Path(created.out.strip())
    (hill_dir / "eval.py").write_text(textwrap.dedent(eval_source))
    (hill_dir / "hill.yaml").write_text(hill_yaml(name, timeout=timeout, params=params, exclusive=exclusive,
                                                    extra=extra))
    (hill_dir / "tests" / "test_eval.py").write_text(TRIVIAL_TEST)
    for rel, content in (private or {}).items():
        target = hill_dir / "private" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content if isinstance(content, bytes) else content.encode())
    committed = hills("commit", name, "-m", message)
    assert committed.code == 0, committed.output
    return hill_dir


@pytest.fixture(autouse=True)
def inside_project(hermetic, monkeypatch):
    """Every test runs in its machine's project folder, never in the checkout.
    Autouse in each test module that imports it."""
    monkeypatch.chdir(hermetic.project)
    return hermetic.project


@contextlib.contextmanager
def on_machine(machine):
    """Apply a conftest Machine's environment and cwd for a module-scoped fixture."""
    with pytest.MonkeyPatch.context() as patch:
        machine.apply(patch)
        patch.chdir(machine.project)
        yield


def submission(root, files):
    """A submission folder under `root` with {relative path: text}."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    for rel, content in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    return root


def hills_home():
    return Path(os.environ["HILLS_HOME"])


def tree_of(hill_dir):
    return real("git", "--git-dir=.vc", "rev-parse", "HEAD^{tree}", cwd=hill_dir).out.strip()


def attempts_log(name, tree_hash, hill_dir=None):
    """The attempts log of a version; the working tree's (`tree_hash` None)
    is the one of the hill folder `hill_dir`."""
    if tree_hash:
        return hills_home() / "state" / f"{name}@{tree_hash}" / "attempts.jsonl"
    from hills import state

    return Path(state.state_dir(name, None, str(hill_dir))) / "attempts.jsonl"


def log_entries(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def last_report(name, tree_hash):
    return log_entries(attempts_log(name, tree_hash))[-1]["report"]


def notes_lines(hill_dir):
    shown = real("git", "--git-dir=.vc", "notes", "--ref=refs/notes/hills/reports", "show", "HEAD",
                 cwd=hill_dir)
    assert shown.code == 0, shown.output
    return [line for line in shown.out.splitlines() if line.strip()]


def alive(pid):
    """Whether a process exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


# A function evaluator that scores `score.txt` in the submission (sum metric,
# max). Used wherever the evaluator itself is not what is under test.
SCORE_EVAL = """\
    from pathlib import Path

    def eval(submission, *, final=False, **params):
        text = (Path(submission) / "score.txt").read_text().strip()
        value = float(text)
        return {
            "passed": value >= 0,
            "metrics": [{"name": "total", "value": value, "direction": "max"}],
            "config": [{"name": "mode", "value": "holdout" if final else "validation", "primary": True}],
            "details": {} if value >= 0 else {"reason": "negative score"},
        }
    """
