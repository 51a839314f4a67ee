"""The guard: the command registry, console scripts, bin/ symlinks, man pages,
README reference table and help texts stay in step. A command added, renamed
or hidden without its help, its page, its script or its README row fails here."""

import ast
import glob
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

from testing.util import write_python_shim
from hills import manpages
from hills.cli import registry as cli
from hills.disk import manifest
from hills.evidence import report
from hills.run import command, evaluate, logbook, measures, noise, replicates

REPO_ROOT = Path(__file__).resolve().parent.parent
BIN_DIR = REPO_ROOT / "bin"
MAN_DIR = REPO_ROOT / "man"
README = REPO_ROOT / "README.md"
ENTRY = "hills.entry:main"

VERBS = [verb for verb, command in cli.COMMANDS.items() if not command.hidden]
CHAIN = cli.COMMANDS["chain"]
SUBCOMMANDS = [(f"chain {name}", command) for name, command in CHAIN.commands.items() if not command.hidden]
# Every non-hidden command object, the group included, by the words that call it.
DOCUMENTED = [("", cli.main_group)] + [(verb, cli.COMMANDS[verb]) for verb in VERBS] + SUBCOMMANDS
ALL_COMMANDS = [("", cli.main_group)] + list(cli.COMMANDS.items()) + SUBCOMMANDS
EXECUTABLES = ["hills", "git-hill", *cli.STANDALONE]


def _load_toml(path):
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        tomllib = pytest.importorskip("tomli")
    with open(path, "rb") as handle:
        return tomllib.load(handle)


def _ids(items):
    return [words or "hills" for words, _ in items]


# ---------------------------------------------------------------- help texts

@pytest.mark.parametrize("words,command", DOCUMENTED, ids=_ids(DOCUMENTED))
def test_command_has_help_and_a_short_help_that_fits(words, command):
    assert manpages.help_text(command), f"'hills {words}' has no help text (its docstring)"
    short = manpages.short_help(command)
    assert short, f"'hills {words}' has no short help"
    # The width click gives the summaries in `hills --help` (and the chain
    # group's help): a summary cut with "..." there is too long.
    siblings = CHAIN.commands if words.startswith("chain ") else cli.COMMANDS
    limit = cli.CONTEXT["max_content_width"] - 6 - max(len(name) for name in siblings)
    shown = command.get_short_help_str(limit=limit)
    assert not shown.endswith("..."), (
        f"the first sentence of 'hills {words}' help is cut in 'hills --help': {shown!r}")


@pytest.mark.parametrize("words,command", ALL_COMMANDS, ids=_ids(ALL_COMMANDS))
def test_every_option_has_help(words, command):
    ctx = click.Context(command, info_name="hills", **command.context_settings)
    for param in command.get_params(ctx):
        if isinstance(param, click.Option):
            assert (param.help or "").strip(), f"option {param.opts} of 'hills {words}' has no help text"


@pytest.mark.parametrize("words,command", DOCUMENTED[1:], ids=_ids(DOCUMENTED[1:]))
def test_every_argument_is_described_in_the_man_page(words, command):
    verb = words.split()[0]
    options = _section(MAN_DIR / f"hills-{verb}.1.rst", "OPTIONS")
    for metavar in manpages.arguments(command, f"hills {words}"):
        # A term line, then its description indented under it.
        assert re.search(rf"^\*{re.escape(metavar)}\*\n    \S", options, re.MULTILINE), (
            f"argument {metavar} of 'hills {words}' is not described under OPTIONS in man/hills-{verb}.1.rst")


# ---------------------------------------------------------------- registry, scripts, bin/

def test_standalone_names_are_real_commands():
    for program, verb in cli.STANDALONE.items():
        assert program == f"hills-{verb}"
        assert verb in cli.COMMANDS and not cli.COMMANDS[verb].hidden, f"'{program}' maps to no visible verb"
        command, prog_name = cli.entry_for(program)
        assert command is cli.COMMANDS[verb] and prog_name == program
    assert cli.entry_for("git-hill") == (cli.main_group, "git hill")
    assert cli.entry_for("hills") == (cli.main_group, "hills")


def test_the_registry_summaries_are_the_commands_short_help():
    # `hills --help` shows the registry's summaries, so it imports no command module.
    assert list(cli.SUMMARIES) == list(cli.COMMANDS) == cli.main_group.list_commands(click.Context(cli.main_group))
    for verb, summary in cli.SUMMARIES.items():
        command = cli.main_group.get_command(click.Context(cli.main_group), verb)
        assert command.hidden == (summary is None), verb
        if summary is not None:
            assert summary == command.get_short_help_str(limit=1000), f"cli.SUMMARIES[{verb!r}] is stale"
    assert cli.verbs() == VERBS


def test_console_scripts_are_exactly_the_executables():
    scripts = _load_toml(REPO_ROOT / "pyproject.toml")["project"]["scripts"]
    assert sorted(scripts) == sorted(EXECUTABLES)
    for name, target in scripts.items():
        assert target == ENTRY, f"console script '{name}' points at {target!r}, not {ENTRY!r}"


def test_bin_holds_the_multicall_script_and_a_symlink_per_name():
    hills = BIN_DIR / "hills"
    assert hills.is_file() and not hills.is_symlink() and os.access(hills, os.X_OK)
    for name in EXECUTABLES:
        if name == "hills":
            continue
        path = BIN_DIR / name
        assert path.is_symlink(), f"bin/{name} is not a symlink"
        assert os.readlink(path) == "hills", f"bin/{name} points at {os.readlink(path)!r}, not 'hills'"
    assert sorted(os.listdir(BIN_DIR)) == sorted(EXECUTABLES), "bin/ holds other files than the executables"


# ---------------------------------------------------------------- man pages

# The file formats, each documented in section 5.
FORMATS = {"hill.yaml.5", "hills-json.5", "hills-lock.5", "hills-report.5", "hills-service.5"}


def _section(source, title):
    """The text of one top-level section of a man page source."""
    text = source.read_text(encoding="utf-8")
    match = re.search(rf"^{re.escape(title)}\n=+\n(.*?)(?=^[^\n]+\n=+\n|\Z)", text, re.MULTILINE | re.DOTALL)
    assert match, f"{source.name} has no section {title}"
    return match.group(1)


def test_every_verb_and_format_has_a_page_and_nothing_else_does():
    expected = {"hills.1", "git-hill.1"} | {f"hills-{verb}.1" for verb in VERBS} | FORMATS
    assert set(manpages.command_pages()) | FORMATS == expected
    assert set(manpages.pages()) == expected
    on_disk = {name for name in os.listdir(MAN_DIR) if re.search(r"\.[0-9]$", name)}
    assert on_disk == expected, "man/ differs from the commands: run 'python -m hills.manpages'"
    sources = {name for name in os.listdir(MAN_DIR) if name.endswith(".rst")}
    assert sources == {f"{page}.rst" for page in expected}, "each page has one source, man/PAGE.rst"
    for program in cli.STANDALONE:
        assert f"{program}.1" in on_disk, f"'man {program}' would find no page"


def test_git_hill_page_exists_for_git_hill_help():
    # `git hill --help` makes git run `man git-hill`.
    text = (MAN_DIR / "git-hill.1").read_text(encoding="utf-8")
    assert text.startswith('.\\" Generated') and '.TH "GIT\\-HILL" "1"' in text


def test_every_verb_page_has_the_git_style_sections():
    sections = ["NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "OUTPUT", "EXIT STATUS", "EXAMPLES", "SEE ALSO"]
    for verb in VERBS:
        text = (MAN_DIR / f"hills-{verb}.1").read_text(encoding="utf-8")
        found = [line[4:] for line in text.splitlines() if line.startswith(".SH ")]
        assert [s for s in found if s in sections] == sections, f"hills-{verb}.1 sections: {found}"


def test_man_pages_are_up_to_date():
    done = subprocess.run([sys.executable, "-m", "hills.manpages", "--check"], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_manpages_check_names_a_stale_page(tmp_path):
    man = tmp_path / "man"
    shutil.copytree(MAN_DIR, man)
    assert manpages.main(["--check", str(man)]) == 0
    source = man / "hills-eval.1.rst"
    source.write_text(source.read_text(encoding="utf-8").replace("Score the example", "Score an example"),
                      encoding="utf-8")
    (man / "hills-gone.1").write_text("old\n", encoding="utf-8")
    (man / "hills-rank.1").unlink()
    assert manpages.check(str(man)) == [manpages.Problem("stale", str(man / "hills-eval.1")),
                                        manpages.Problem("missing", str(man / "hills-rank.1")),
                                        manpages.Problem("extra", str(man / "hills-gone.1"))]
    assert manpages.main(["--check", str(man)]) == 1


def test_wheel_installs_every_page():
    data_files = _load_toml(REPO_ROOT / "pyproject.toml")["tool"]["setuptools"]["data-files"]
    for section in ("1", "5"):
        patterns = data_files[f"share/man/man{section}"]
        installed = {os.path.basename(path) for pattern in patterns for path in glob.glob(str(REPO_ROOT / pattern))}
        assert installed == {name for name in manpages.pages() if name.endswith("." + section)}


def test_section_5_pages_cover_every_manifest_key() -> None:
    page = manpages.pages()["hill.yaml.5"]
    for table in (manifest.KEYS, manifest.PARAM_KEYS, manifest.METRIC_KEYS):
        for name, (label, _doc) in manifest.key_docs(table).items():
            assert f"\\fB{name}\\fP ({label})" in page, name


def _assigned_keys(function, variable):
    """String keys a function gives `variable`: dict literal, subscript stores, .update(key=...)."""
    keys = set()
    for node in ast.walk(ast.parse(function)):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict) and any(
                isinstance(target, ast.Name) and target.id == variable for target in node.targets):
            keys |= {key.value for key in node.value.keys if isinstance(key, ast.Constant)}
        if (isinstance(node, ast.AnnAssign) and isinstance(node.value, ast.Dict)
                and isinstance(node.target, ast.Name) and node.target.id == variable):
            keys |= {key.value for key in node.value.keys if isinstance(key, ast.Constant)}
        if (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name) and node.value.id == variable
                and isinstance(node.slice, ast.Constant)):
            keys.add(node.slice.value)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update"
                and isinstance(node.func.value, ast.Name) and node.func.value.id == variable):
            keys |= {keyword.arg for keyword in node.keywords if keyword.arg}
    return keys


def test_report_page_documents_every_envelope_field():
    # The pipeline fills the envelope, and the attempts log signs it (logbook.finish).
    fields = _assigned_keys(Path(evaluate.__file__).read_text(encoding="utf-8"), "envelope")
    fields |= _assigned_keys(Path(logbook.__file__).read_text(encoding="utf-8"), "envelope")
    fields |= _assigned_keys(Path(report.__file__).read_text(encoding="utf-8"), "core")
    # What hill.yaml adds to a scored report (report.judge).
    fields |= _assigned_keys(Path(report.__file__).read_text(encoding="utf-8"), "envelope")
    # The cores of command verifiers, and what replicates add when combined.
    fields |= _assigned_keys(Path(command.__file__).read_text(encoding="utf-8"), "core")
    fields |= _assigned_keys(Path(replicates.__file__).read_text(encoding="utf-8"), "combined")
    # What hills saw of the submitted code (measures.attach), and an A/B run's report.
    fields |= _assigned_keys(Path(measures.__file__).read_text(encoding="utf-8"), "envelope")
    # The noise of the score, from replicates and items (noise.attach).
    fields |= _assigned_keys(Path(noise.__file__).read_text(encoding="utf-8"), "envelope")
    fields |= {"verdict"}
    assert "signature" in fields and "tree_hash" in fields
    source = MAN_DIR / "hills-report.5.rst"
    documented = re.findall(r"^``(\w+)`` \(", _section(source, "FIELDS"), re.MULTILINE)
    assert set(documented) == fields, "hills-report(5) FIELDS differ from what hills eval writes"
    assert len(documented) == len(fields), "a field of hills-report(5) is documented twice"
    statuses = re.findall(r"^``(\w+)``$", _section(source, "STATUSES"), re.MULTILINE)
    assert statuses == list(report.STATUSES)


def _typed_keys(shape):
    return set(shape.__required_keys__) | set(shape.__optional_keys__)


def test_the_report_type_has_the_fields_of_the_report_page():
    """hills.evidence.report_types.Report, what mypy holds the code's reports to,
    names exactly the FIELDS of hills-report(5): a key typed but not
    documented, or documented but not typed, fails here."""
    from hills.evidence.report_types import Report

    documented = set(re.findall(r"^``(\w+)`` \(", _section(MAN_DIR / "hills-report.5.rst", "FIELDS"), re.MULTILINE))
    typed = _typed_keys(Report)
    assert "signature" in typed and "tree_hash" in documented
    assert not typed - documented, ("typed in hills/evidence/report_types.py, not in hills-report(5): "
                                    f"{typed - documented}")
    assert not documented - typed, ("in hills-report(5), not typed in hills/evidence/report_types.py: "
                                    f"{documented - typed}")


def test_the_manifest_type_has_the_keys_of_the_key_table():
    """hills.disk.manifest_types.Manifest names exactly the keys of
    manifest.KEYS, the table hill.yaml(5) is written from."""
    from hills.disk.manifest_types import Manifest

    typed, table = _typed_keys(Manifest), {key.name for key in manifest.KEYS.keys}
    assert "evaluator" in typed and "limits" in table
    assert not typed - table, f"typed in hills/disk/manifest_types.py, not in manifest.KEYS: {typed - table}"
    assert not table - typed, f"in manifest.KEYS, not typed in hills/disk/manifest_types.py: {table - typed}"


# ---------------------------------------------------------------- README

def test_readme_reference_table_has_a_row_per_verb():
    assert README.is_file(), "README.md is missing: its reference table lists every verb"
    rows = [line for line in README.read_text(encoding="utf-8").splitlines() if line.lstrip().startswith("|")]
    missing = [verb for verb in VERBS if not any(re.search(rf"\bhills {re.escape(verb)}\b", row) for row in rows)]
    assert not missing, f"README.md reference table has no row for: {', '.join('hills ' + v for v in missing)}"


# ---------------------------------------------------------------- the real executables

@pytest.fixture(scope="module")
def exe_env(tmp_path_factory):
    """PATH with the checkout's bin/ first and a `python3` that is this
    interpreter (bin/hills is a `#!/usr/bin/env python3` script)."""
    python_dir = write_python_shim(tmp_path_factory.mktemp("guard-python"))
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env["PATH"] = os.pathsep.join([str(BIN_DIR), str(python_dir), os.environ.get("PATH", "")])
    env["COLUMNS"] = "80"
    env["HILLS_HOME"] = str(tmp_path_factory.mktemp("guard-home"))
    return env


def _run(env, *argv):
    done = subprocess.run(list(argv), env=env, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    return done.returncode, done.stdout, done.stderr


HELP_CALLS = ([["hills", "--help"], ["git-hill", "--help"]]
              + [["hills", *words.split(), "--help"] for words, _ in DOCUMENTED[1:]]
              + [[program, "--help"] for program in cli.STANDALONE]
              + [["hills-chain", name, "--help"] for name in CHAIN.commands])


@pytest.mark.parametrize("argv", HELP_CALLS, ids=[" ".join(argv[:-1]) for argv in HELP_CALLS])
def test_help_exits_0_through_the_real_entry_point(exe_env, argv):
    code, out, err = _run(exe_env, *argv)
    assert code == 0, err
    assert out.startswith("Usage: "), out
    prog = "hills" if argv[0] == "hills" else ("git hill" if argv[0] == "git-hill" else argv[0])
    assert out.startswith(f"Usage: {' '.join([prog, *argv[1:-1]])} ")


@pytest.mark.parametrize("program", list(cli.STANDALONE))
def test_standalone_help_is_the_verb_help(exe_env, program):
    verb = cli.STANDALONE[program]
    _, standalone, _ = _run(exe_env, program, "--help")
    _, through_group, _ = _run(exe_env, "hills", verb, "--help")

    def options(text):
        return [line.split()[0] for line in text.split("Options:", 1)[1].splitlines() if line.startswith("  -")]

    assert options(standalone) == options(through_group) and options(standalone)
    assert standalone.replace(f"Usage: {program} ", f"Usage: hills {verb} ", 1) == through_group


def test_git_runs_git_hill(exe_env):
    if subprocess.run(["git", "--version"], capture_output=True).returncode != 0:
        pytest.skip("git is not installed")
    code, out, err = _run(exe_env, "git", "hill", "eval", "--help")
    assert code == 0, err
    assert out.startswith("Usage: git hill eval ")


@pytest.mark.parametrize("argv, group", [(["hills"], cli.main_group), (["git-hill"], cli.main_group),
                                         (["hills-chain"], CHAIN)], ids=["hills", "git-hill", "hills-chain"])
def test_no_command_prints_the_help_whole_and_exits_2(exe_env, argv, group):
    code, out, err = _run(dict(exe_env, COLUMNS="60"), *argv)
    assert code == 2, err
    assert err == "" and out.startswith("Usage: ") and "error:" not in out
    # Each command's first sentence whole, wrapped under a narrow terminal, never cut with "...".
    assert "..." not in out.split("\n", 1)[1]
    flat = " ".join(out.split())
    for name, verb in group.commands.items():
        if not verb.hidden:
            assert f" {name} {verb.get_short_help_str(limit=1000)}" in flat, name
    assert max(len(line) for line in out.splitlines()) <= 60


# ---------------------------------------------------------------- the error funnel

@pytest.mark.parametrize("argv, prog, hint", [
    (["chain", "verify", "log.jsonl", "--head", "{"], "hills", "hint: see 'hills chain verify --help'"),
    (["verify", "--nope"], "hills", "hint: see 'hills verify --help'"),
    (["-k", "x", "."], "hills-eval", "hint: see 'hills-eval --help'"),
    (["no-such-verb"], "git-hill", "hint: see 'git hill --help'"),
])
def test_an_error_without_a_hint_of_its_own_points_at_the_help(tmp_path, argv, prog, hint):
    from testing.util import run_cli

    result = run_cli(*argv, prog=prog)
    assert result.code == 2, result.output
    lines = result.err.splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1] == hint


def test_every_click_path_error_has_a_hint_line():
    assert cli._help_hint(cli.main_group, ["chain", "show", "--json"], "hills") == "see 'hills chain show --help'"
    assert cli._help_hint(cli.main_group, ["--bogus"], "git hill") == "see 'git hill --help'"
    assert cli._help_hint(cli.COMMANDS["eval"], ["x"], "hills-eval") == "see 'hills-eval --help'"
