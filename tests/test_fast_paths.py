"""The fast paths: an ordinary `hills eval` or `hills verify` is parsed from
the command's one declaration without click, exactly as click would parse
it, and imports only what it needs; `hills --help` lists every verb without
importing a command module."""

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

from testing.util import run_bin, run_cli
from hills.cli import registry as cli
from hills.commands import attempts as attempts_command
from hills.commands import commit as commit_command
from hills.commands import eval as eval_command
from hills.commands import rank as rank_command
from hills.commands import verify as verify_command

REPO_ROOT = Path(__file__).resolve().parent.parent

# argv after the verb, and whether the fast parse must take it (False: it
# must leave it to click, which accepts or refuses it).
EVAL_ARGV = [
    (["sub", "-H", "cp"], True),
    (["-H", "cp", "sub"], True),
    (["sub", "--hill=cp", "--json"], True),
    (["sub", "-Hcp", "-p", "n=3", "-p", "tolerance=0.1", "-k", "a=1", "--knob", "b=-2"], True),
    (["sub", "-H", "cp", "--repeat", "3", "-o", "out.json", "-v", "--final", "--force", "--current", "--queue"], True),
    (["sub", "-H", "first", "-H", "second", "--repeat=007"], True),
    (["missing-folder", "-H", "cp", "-o", "missing-folder/report.json"], True),
    (["sub"], False),
    (["sub", "-H"], False),
    (["sub", "-H", "cp", "--help"], False),
    (["-h"], False),
    ([], False),
    (["sub", "-H", "cp", "--repeat", "0"], False),
    (["sub", "-H", "cp", "--repeat", "x"], False),
    (["sub", "-H", "cp", "--repeat", "²"], False),
    (["sub", "-H", "cp", "extra"], True),  # several DIRs
    (["sub", "sub", "-H", "cp", "--on", "ray://127.0.0.1:6379", "--workers", "2"], True),
    (["sub", "-H", "cp", "--on=ray"], True),
    (["sub", "-H", "cp", "-m", "tune the learning rate"], True),
    (["sub", "-H", "cp", "--note=first", "-msecond"], True),
    (["sub", "-H", "cp", "--metric-lines"], True),
    (["sub", "-H", "cp", "--colon-lines", "-o", "out.json"], True),
    (["sub", "-H", "cp", "--metric-lines=1"], False),
    (["sub", "-H", "cp", "-m"], False),
    (["sub", "-H", "cp", "--workers", "0"], False),
    (["sub", "file.txt", "-H", "cp"], False),
    (["--", "sub", "-H", "cp"], False),
    (["sub", "-vH", "cp"], False),
    (["sub", "-H", "cp", "--final=1"], False),
    (["sub", "-H", "cp", "--nope"], False),
    (["file.txt", "-H", "cp"], False),
    (["sub", "-H", "cp", "-o", "sub"], False),
    (["sub", "-H", "-x"], False),
]
VERIFY_ARGV = [
    (["r.json"], True),
    (["a.json", "b.json", "-"], True),
    ([], False),
    (["--nope", "r.json"], False),
    (["r.json", "-h"], False),
]
COMMIT_ARGV = [
    (["cp", "-m", "first version"], True),
    (["-m", "first version", "cp"], True),
    (["cp", "--message=a", "-mb"], True),
    (["cp"], False),
    (["-m", "x"], False),
    (["cp", "-m"], False),
    (["cp", "-m", "x", "extra"], False),
    (["cp", "-m", "x", "--help"], False),
]
ATTEMPTS_ARGV = [
    (["cp"], True),
    (["cp", "--json"], True),
    (["--current", "cp"], True),
    (["cp", "--tree", "abc123", "--json"], True),
    (["cp", "--tree=abc123"], True),
    ([], False),
    (["cp", "--tree"], False),
    (["cp", "extra"], False),
    (["cp", "--nope"], False),
    (["cp", "--help"], False),
]
RANK_ARGV = [
    (["-H", "cp"], True),
    (["--hill=cp", "--json"], True),
    (["a.json", "b.json"], True),
    (["a.json", "-H", "cp", "--json"], True),
    ([], True),  # no reports: the command says so
    (["-H"], False),
    (["--nope"], False),
    (["-h"], False),
]
MODULES = {"eval": eval_command, "verify": verify_command, "commit": commit_command, "attempts": attempts_command,
           "rank": rank_command}
CASES = ([("eval", argv, fast) for argv, fast in EVAL_ARGV] + [("verify", argv, fast) for argv, fast in VERIFY_ARGV]
         + [("commit", argv, fast) for argv, fast in COMMIT_ARGV]
         + [("attempts", argv, fast) for argv, fast in ATTEMPTS_ARGV]
         + [("rank", argv, fast) for argv, fast in RANK_ARGV])


@pytest.mark.parametrize("verb, argv, fast", CASES, ids=[f"{verb} {' '.join(argv)}" for verb, argv, _ in CASES])
def test_the_fast_parse_is_clicks_parse(tmp_path, monkeypatch, verb, argv, fast):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "file.txt").write_text("x\n", encoding="utf-8")
    module = MODULES[verb]
    parsed = module.DECLARED.parse(argv)
    assert (parsed is not None) == fast, parsed
    try:
        ctx = module.command.make_context(verb, list(argv))
    except (click.UsageError, click.exceptions.Exit):
        assert parsed is None, "the fast parse took an argv that click refuses"
        return
    if parsed is not None:
        assert parsed == ctx.params


def test_the_declared_commands_are_the_registered_ones():
    for verb, module in MODULES.items():
        assert cli.get(verb) is module.command and module.command.name == verb
        assert [param.name for param in module.command.params] == [param.dest for param in module.DECLARED.params]


def _modules_after(code, cwd=None):
    """The modules a fresh interpreter, importing hills from this checkout,
    holds after running `code`."""
    # The checkout goes on sys.path by hand, not through PYTHONPATH: no
    # hills command runs with PYTHONPATH set (hills.base.startup drops it), and
    # a gate's verdict depends on the PYTHON* variables.
    script = (f"import sys\nsys.path.insert(0, {str(REPO_ROOT)!r})\n" + code
              + "\nimport json, sys\nsys.__stdout__.write('\\n' + json.dumps(sorted(sys.modules)))\n")
    env = dict(os.environ)
    done = subprocess.run([sys.executable, "-c", script], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.rsplit("\n", 1)[1]))


def _heavy(modules):
    return sorted(name for name in modules if name.split(".")[0] in ("click", "ruamel", "yaml", "optuna"))


def test_help_lists_every_verb_without_importing_one(project):
    modules = _modules_after("from hills.cli import registry as cli\ncode = cli.main('hills', ['--help'])\nassert code "
                             "== 0",
                             cwd=project)
    assert not {name for name in modules if name.startswith("hills.commands.")}


@pytest.mark.slow
def test_an_eval_imports_neither_click_nor_yaml_nor_another_command(shared_hill):
    submission = shared_hill / "examples" / "grid"
    # The first eval of a version parses its hill.yaml once; later ones read the sealed JSON.
    assert run_cli("eval", submission, "-H", shared_hill.name).code == 0
    modules = _modules_after("from hills import entry\n"
                             f"code = entry.run('hills', ['eval', {str(submission)!r}, '-H', {shared_hill.name!r}])\n"
                             "assert code == 0, code", cwd=os.getcwd())
    assert "hills.run.evaluate" in modules
    assert _heavy(modules) == []
    assert {name for name in modules if name.startswith(("hills.commands.", "hills.cli."))} == {
        "hills.commands.eval", "hills.cli.fast", "hills.cli.output", "hills.cli.summary"}
    assert "hills.cli.registry" not in modules and "hills.manpages" not in modules
    # The manifest of an evaluated version comes from the sealed JSON cache.
    assert "hills.disk.manifest" not in modules and "hills.disk.schema" not in modules
    # OpenSSL (hashlib, hmac) and shutil's compressors cost every eval a few ms each.
    assert not modules & {"hashlib", "hmac", "shutil", "tempfile", "bz2", "lzma"}


@pytest.mark.slow
def test_a_remembered_recommit_imports_neither_click_nor_yaml(shared_hill):
    note = shared_hill / "notes.txt"
    try:
        # Each gate runs once and is remembered, in the environment of the
        # measured run below (the PYTHON* variables are part of what a gate
        # depends on).
        env = dict(os.environ)
        for text in ("one\n", "two\n"):
            note.write_text(text)
            assert run_bin("hills", "commit", shared_hill.name, "-m", f"note {text.strip()}", env=env).code == 0
        note.write_text("one\n")
        modules = _modules_after(f"from hills import entry\ncode = entry.run('hills', ['commit', {shared_hill.name!r}, "
                                 "'-m', 'note one again'])\nassert code == 0, code", cwd=os.getcwd())
    finally:
        note.unlink()
        assert run_cli("commit", shared_hill.name, "-m", "no note").code == 0
    assert "hills.freeze.commit" in modules and "hills.freeze.gate" in modules
    assert _heavy(modules) == [] and "hills.cli.registry" not in modules


def test_verify_imports_neither_click_nor_yaml(project, tmp_path):
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"hill": "h", "signature": "x"}), encoding="utf-8")
    modules = _modules_after(f"from hills import entry\ncode = entry.run('hills', ['verify', {str(report)!r}])",
                             cwd=project)
    assert _heavy(modules) == [] and "hills.cli.registry" not in modules


@pytest.mark.parametrize("program, argv, prog", [("hills", ["eval"], "hills eval"),
                                                 ("git-hill", ["eval"], "git hill eval"),
                                                 ("hills-eval", [], "hills-eval")])
def test_an_error_on_the_fast_path_points_at_the_help(shared_hill, program, argv, prog):
    result = run_cli(*argv, shared_hill / "examples" / "grid", "-H", shared_hill.name, "--current", "--force",
                     prog=program)
    assert result.code == 2, result.output
    assert result.err.splitlines() == ["error: --current and --force cannot be combined", f"hint: see '{prog} --help'"]


def _wrapped(function):
    import functools

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        return function(*args, **kwargs)

    return wrapper


# Evaluator signatures, the params they are called with, and whether they bind.
SIGNATURES = [
    ("def eval(submission, *, final=False, n=26, tolerance=1e-9): pass", {"n": 1, "tolerance": 0.1}, True),
    ("def eval(submission, final=False, **params): pass", {"n": 1}, True),
    ("def eval(submission, final, n): pass", {"n": 1}, True),
    ("def eval(submission, /, final=False, *, n): pass", {"n": 1}, True),
    ("def eval(submission, **params): pass", {}, True),
    ("def eval(submission, *, final=False): pass", {"n": 1}, False),
    ("def eval(submission, *, final=False, n): pass", {}, False),
    ("def eval(submission, *, n=1): pass", {"n": 2}, False),
    ("def eval(submission, other, *, final=False): pass", {}, False),
    ("def eval(*args, **kwargs): pass", {}, False),
    ("def eval(*, submission, final=False): pass", {}, False),
    ("def eval(): pass", {}, False),
    ("def eval(submission, a, /, final=False, **kw): pass", {"a": 1}, False),
    ("def eval(submission, final=False, **kw): pass", {"submission": 1}, False),
    ("def eval(submission, /, final=False, **kw): pass", {"submission": 1}, True),
]


@pytest.mark.parametrize("source, params, binds", SIGNATURES, ids=[row[0] for row in SIGNATURES])
def test_the_shim_binds_a_plain_evaluator_without_inspect(source, params, binds):
    import inspect

    from hills import shim

    namespace = {}
    exec(source, namespace)
    function = namespace["eval"]
    try:
        inspect.signature(function).bind("submission", final=False, **params)
        bound = inspect.signature(function).parameters[next(iter(inspect.signature(function).parameters))].kind \
            in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    except (TypeError, StopIteration):
        bound = False
    assert bound == binds
    # Never a yes where inspect says no; a no only sends the call to inspect.
    plainly = shim._binds_plainly(function, params)
    assert plainly == binds or (binds and not plainly)
    assert shim._binds_plainly(_wrapped(function), params) is False
