"""The one error funnel: expected error, bug and interrupt decided in one
place (hills.base.errors.funnel), on the click path and the fast paths alike;
commands return their exit code and only the entry point exits."""

import ast
import errno
import importlib
import os
import pkgutil
from pathlib import Path

import pytest

import hills
from testing.util import run_cli
from hills import commands
from hills.base import errors

REPO_ROOT = Path(__file__).resolve().parent.parent


def _raise(exc):
    def call():
        raise exc

    return call


# What a command did, the exit code, and the stderr lines (None: a bug, checked below).
FUNNEL = [
    ("returns 0", lambda: 0, 0, []),
    ("returns 1", lambda: 1, 1, []),
    ("usage error", _raise(errors.UsageError("bad 'x'", hint="pass y")), 2, ["error: bad 'x'", "hint: pass y"]),
    ("refused, no hint", _raise(errors.Refused("no")), 1, ["error: no", "hint: see 'hills x --help'"]),
    ("not scored", _raise(errors.NotScored("dirty", hint="commit")), 5, ["error: dirty", "hint: commit"]),
    ("environment", _raise(errors.EnvironmentProblem("no git", hint="install git")), 4,
     ["error: no git", "hint: install git"]),
    ("a kind never named", _raise(errors.HillsError("what")), 3, ["error: what", "hint: see 'hills x --help'"]),
    ("interrupt", _raise(KeyboardInterrupt()), 130, ["error: interrupted"]),
    ("closed pipe", _raise(BrokenPipeError()), 0, []),
    ("exit", _raise(SystemExit(7)), 7, []),
    ("missing dependency", _raise(ModuleNotFoundError("No module named 'click'", name="click")), 4, None),
    ("missing module", _raise(ModuleNotFoundError("No module named 'nosuch'", name="nosuch")), 3, None),
    ("bug", _raise(ValueError("broken")), 3, None),
]


@pytest.mark.parametrize("what, call, code, lines", FUNNEL, ids=[row[0] for row in FUNNEL])
def test_the_funnel_decides_every_outcome(capsys, tmp_path, what, call, code, lines):
    logs = tmp_path / "logs"
    assert errors.funnel(call, hint=lambda: "see 'hills x --help'", crash_dir=lambda: str(logs)) == code
    captured = capsys.readouterr()
    assert captured.out == ""
    if lines is not None:
        assert captured.err.splitlines() == lines
    elif code == errors.EXIT_ENVIRONMENT:
        assert captured.err.startswith("error: hills needs the Python package 'click'")
    else:
        # A bug: one line to the user, the traceback in a crash log.
        error, hint = captured.err.splitlines()
        assert error.startswith("error: internal error in hills: ") and "Traceback" not in captured.err
        crash_logs = list(logs.iterdir())
        assert len(crash_logs) == 1 and hint == f"hint: the traceback is saved in {crash_logs[0]}; please report it"
        text = crash_logs[0].read_text(encoding="utf-8")
        assert text.startswith(f"hills {hills.__version__}\n") and "Traceback (most recent call last)" in text


def test_an_explainer_names_a_failed_write_as_the_users_problem(capsys, tmp_path):
    failed = OSError(errno.EROFS, os.strerror(errno.EROFS), str(tmp_path / "out.json"))
    assert commands.run(_raise(failed)) == errors.EXIT_ENVIRONMENT
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == f"error: cannot write '{tmp_path / 'out.json'}': {os.strerror(errno.EROFS)}"
    assert lines[1].startswith("hint: ")


@pytest.mark.parametrize("argv", [["verify", "REPORT"], ["sign", "--verify", "REPORT"]],
                         ids=["fast path", "click path"])
def test_a_bug_on_either_path_is_one_line_and_a_crash_log(project, monkeypatch, argv):
    from hills.evidence import verify

    def broken(paths, key=None):
        raise RuntimeError("check broke")

    monkeypatch.setattr(verify, "check", broken)
    result = run_cli(*argv)
    assert result.code == errors.EXIT_BUG, result.output
    error, hint = result.err.splitlines()
    assert error == "error: internal error in hills: RuntimeError: check broke"
    logs = Path(os.environ["HILLS_HOME"]) / "logs"
    assert hint == f"hint: the traceback is saved in {next(logs.iterdir())}; please report it"


def _hills_modules():
    for info in pkgutil.walk_packages(hills.__path__, "hills."):
        if info.name not in ("hills.__main__",):
            yield info.name


def test_every_hills_error_has_a_kind():
    for name in _hills_modules():
        importlib.import_module(name)
    pending, kinds = [errors.HillsError], []
    while pending:
        kind = pending.pop()
        pending.extend(kind.__subclasses__())
        kinds.append(kind)
    for kind in kinds[1:]:
        assert kind.exit_code != errors.EXIT_BUG, f"{kind.__module__}.{kind.__name__} exits as a bug"


def _sources():
    for path in sorted((REPO_ROOT / "hills").rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"))


def _under_main_guard(tree):
    """Nodes inside `if __name__ == "__main__":` blocks."""
    inside = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and \
                isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__":
            inside.update(id(child) for statement in node.body for child in ast.walk(statement))
    return inside


def test_only_the_entry_point_exits():
    found = []
    for path, tree in _sources():
        allowed = _under_main_guard(tree)
        exits_here = {("hills", "entry.py"): "main", ("base", "errors.py"): "leave_now"}.get(
            (path.parent.name, path.name))
        allowed |= {id(child) for node in tree.body
                    if isinstance(node, ast.FunctionDef) and node.name == exits_here
                    for child in ast.walk(node)}
        for node in ast.walk(tree):
            exits = (isinstance(node, ast.Raise) and node.exc is not None and "SystemExit" in ast.unparse(node.exc)) \
                or (isinstance(node, ast.Call) and ast.unparse(node.func) in ("sys.exit", "exit", "os._exit"))
            if exits and id(node) not in allowed:
                found.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno}")
    assert not found, (f"only hills/entry.py (main) and hills/base/errors.py (leave_now) end the process; "
                       f"commands return their exit code: {found}")


def test_nothing_raises_the_base_error():
    found = [f"{path.relative_to(REPO_ROOT)}:{node.lineno}" for path, tree in _sources() for node in ast.walk(tree)
             if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)
             and ast.unparse(node.exc.func).split(".")[-1] == "HillsError"]
    assert not found, f"raise a kind of HillsError (UsageError, Refused...), not the base: {found}"


def test_the_funnel_imports_nothing_from_hills_nor_click():
    tree = ast.parse((REPO_ROOT / "hills" / "base" / "errors.py").read_text(encoding="utf-8"))
    imported = [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]
    names = {alias.name for node in imported if isinstance(node, ast.Import) for alias in node.names}
    names |= {node.module or "" for node in imported if isinstance(node, ast.ImportFrom) and not node.level}
    hills_imports = [alias.name for node in imported if isinstance(node, ast.ImportFrom) and node.level
                     for alias in node.names]
    assert not any(name.split(".")[0] == "click" for name in names)
    assert hills_imports == ["__version__"], "errors.py may read the version, nothing else of hills"


@pytest.mark.parametrize("argv", [["eval", "/nowhere/sub", "-H", "x"], ["status", "x"], ["describe", "x"]])
def test_a_command_started_in_a_removed_folder_says_so(tmp_path, argv):
    import subprocess

    gone = tmp_path / "gone"
    gone.mkdir()
    # The shell's folder is removed under it: every command says what to do, none crashes.
    done = subprocess.run(["bash", "-c", f"cd {gone} && rmdir {gone} && exec hills {' '.join(argv)}"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 4, done.stderr
    # (The test suite's python3 is a shell script, which says so first.)
    lines = [line for line in done.stderr.splitlines() if not line.startswith("sh: ")]
    assert lines == ["error: the current folder no longer exists (it was removed after this shell entered it)",
                     "hint: cd to a folder that exists and run the command again"]
    assert not list((Path(os.environ["HILLS_HOME"]) / "logs").glob("crash-*"))
