"""Helpers for the scoring-path tests: hills made from an evaluator's source,
commands run in-process or as the real executables, and log and report
readers. The hermetic machine itself, and the two ways to run a command,
come from conftest (`module_machine`, `run_cli`, `run_bin`).
"""

import contextlib
import json
import os
import textwrap
from pathlib import Path
from typing import Any

import pytest

from testing.util import Result, run_bin, run_cli, write_files

REPO_ROOT = Path(__file__).resolve().parents[2]
TRIVIAL_TEST = "def test_the_hill_imports():\n    import eval  # noqa: F401\n"
GRID_EXAMPLE = REPO_ROOT / "examples" / "circle-packing" / "examples" / "grid"


# A hills command run in-process through the error funnel.
hills = run_cli


def real(*argv: object, timeout: float = 180, **options: Any) -> Result:
    """Run a real executable (bin/hills, hills-eval, git...) from PATH; an
    eval may build its environment first, hence the longer timeout."""
    return run_bin(*argv, timeout=timeout, **options)


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
              message="first", gate=False):
    """Create hill `name` in the cwd from the circle-packing template, replace
    its evaluator, manifest and tests, add private files, and commit it:
    without the gate's checks unless `gate` (see `gate_skipped`), since the
    hill is made for a test of something else."""
    # Never create a hill inside the checkout this suite runs from.
    assert REPO_ROOT not in (Path.cwd().resolve(), *Path.cwd().resolve().parents), Path.cwd()
    created = hills("new", name, "-t", "circle-packing")
    assert created.code == 0, created.output
    hill_dir = Path(created.out.strip())
    (hill_dir / "eval.py").write_text(textwrap.dedent(eval_source))
    (hill_dir / "hill.yaml").write_text(hill_yaml(name, timeout=timeout, params=params, exclusive=exclusive,
                                                    extra=extra))
    (hill_dir / "tests" / "test_eval.py").write_text(TRIVIAL_TEST)
    if private:
        write_files(hill_dir / "private", private)
    with contextlib.nullcontext() if gate else gate_skipped():
        committed = hills("commit", name, "-m", message)
    assert committed.code == 0, committed.output
    return hill_dir


@contextlib.contextmanager
def gate_skipped():
    """In this process, `hills commit` freezes a hill without running the
    gate's checks (its tests, the cheat corpus, the leak scans), as if they
    had all passed; what the commit writes is otherwise the same (locks,
    tree, registry), though no verdict is remembered, so a report on such a
    hill names no cheat corpus. Only in-process, and only here: nothing a
    hill or a climber controls turns the gate off."""
    from hills.disk import verdicts
    from hills.freeze import gate

    def passed(hill, cache, tell=None):
        return gate.Gate([], False, verdicts.listing_of(hill))

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gate, "run", passed)
        yield


def uncommitted_template_hill(name: str, files: dict[str, str], example: dict[str, str]) -> Path:
    """Hill `name` from the circle-packing template with `files` on top and
    `example` as its only example submission, not committed (a naive
    evaluator could not be)."""
    assert REPO_ROOT not in (Path.cwd().resolve(), *Path.cwd().resolve().parents), Path.cwd()
    created = hills("new", name, "-t", "circle-packing")
    assert created.code == 0, created.output
    hill_dir = Path(created.out.strip())
    for path in sorted((hill_dir / "examples").rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    write_files(hill_dir, {"tests/test_eval.py": TRIVIAL_TEST,
                           **{f"examples/basic/{rel}": text for rel, text in example.items()}, **files})
    return hill_dir


def official_report(machine, tmp_path_factory, name):
    """On `machine`, a hill `name` scoring score.txt, one passing official
    eval of it written with -o, and the report file's path."""
    with on_machine(machine):
        make_hill(name, SCORE_EVAL)
        folder = submission(tmp_path_factory.mktemp("sub"), {"score.txt": "7\n"})
        target = machine.root / "report.json"
        result = hills("eval", folder, "-H", name, "-o", target)
        assert result.code == 0, result.output
        return target


@contextlib.contextmanager
def on_machine(machine):
    """Apply a conftest Machine's environment and cwd for a module-scoped fixture."""
    from hills.checks import corpus

    with pytest.MonkeyPatch.context() as patch:
        machine.apply(patch)
        patch.chdir(machine.project)
        # A module's hills are committed before any test's autouse fixtures
        # run: the buggy-example rule is off for them as it is for a test's
        # (tests/conftest.py), unless a test asks for it.
        patch.setattr(corpus, "BUGGY_EXAMPLE_FAILS", False)
        yield


def submission(root: str | os.PathLike, files: dict[str, str | bytes]) -> Path:
    """A submission folder under `root` with {relative path: text or bytes}."""
    return write_files(root, files)


def hills_home():
    return Path(os.environ["HILLS_HOME"])


def tree_of(hill_dir):
    return real("git", "--git-dir=.vc", "rev-parse", "HEAD^{tree}", cwd=hill_dir).out.strip()


def attempts_log(name, tree_hash, hill_dir=None):
    """The attempts log of a version; the working tree's (`tree_hash` None)
    is the one of the hill folder `hill_dir`."""
    if tree_hash:
        return hills_home() / "state" / f"{name}@{tree_hash}" / "attempts.jsonl"
    from hills.base import state

    return Path(state.state_dir(name, None, str(hill_dir))) / "attempts.jsonl"


def log_entries(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def last_report(name, tree_hash):
    return log_entries(attempts_log(name, tree_hash))[-1]["report"]


def notes_lines(hill_dir):
    """Every report noted on HEAD, oldest first: the note holds the newest
    one (docs/history.md), each notes commit that changed it added the line
    it ends with."""
    shown = real("git", "--git-dir=.vc", "notes", "--ref=refs/notes/hills/reports", "show", "HEAD",
                 cwd=hill_dir)
    assert shown.code == 0, shown.output
    head = real("git", "--git-dir=.vc", "rev-parse", "HEAD", cwd=hill_dir).out.strip()
    changed = real("git", "--git-dir=.vc", "log", "--reverse", "--format=%H", "refs/notes/hills/reports", "--",
                   head, cwd=hill_dir)
    assert changed.code == 0, changed.output
    lines = []
    for commit in changed.out.split():
        note = real("git", "--git-dir=.vc", "cat-file", "blob", f"{commit}:{head}", cwd=hill_dir)
        assert note.code == 0, note.output
        lines.append([line for line in note.out.splitlines() if line.strip()][-1])
    assert lines[-1] == shown.out.strip().splitlines()[-1]
    return lines


def processes_with(word):
    """Host pids whose command line holds `word` (zombies have none)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                if word.encode() in handle.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


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


def three_evals(name, tmp_path_factory):
    """A hill `name` scoring score.txt, with three logged evals (scores 1,
    3, 2: six lines, each eval's started entry then its outcome), and a
    folder with copies of its log (`log`) and its head file (`head`):
    (hill folder, log path, that folder). Called on a machine (on_machine)."""
    import shutil

    hill_dir = make_hill(name, SCORE_EVAL)
    folders = tmp_path_factory.mktemp("subs")
    for value in (1, 3, 2):
        result = hills("eval", submission(folders / str(value), {"score.txt": str(value)}), "-H", name)
        assert result.code == 0, result.output
    log = attempts_log(name, tree_of(hill_dir))
    saved = tmp_path_factory.mktemp("saved")
    shutil.copy(log, saved / "log")
    shutil.copy(str(log) + ".head", saved / "head")
    return hill_dir, log, saved
