"""The manual after set-up: the man pages installed in the venv where man
finds them for its bin/ on PATH, `git hill --help` opening git-hill(1), and
`hills help [VERB]` / `git hill help [VERB]`."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from testing.util import BIN_DIR, REPO_ROOT, run_bin, run_cli, write_python_shim
from hills import manpages

MAN = shutil.which("man")
needs_man = pytest.mark.skipif(MAN is None, reason="man is not installed (the Debian package 'man-db')")
VENV_BIN = Path(sys.prefix) / "bin"
VENV_MAN = Path(sys.prefix) / "share" / "man"


def _man_env(*path_first, **extra):
    """The hermetic environment with PATH = `path_first` then the system
    folders, MANPATH unset (so man derives it from PATH) and no pager."""
    env = {key: value for key, value in os.environ.items() if key != "MANPATH"}
    env["PATH"] = os.pathsep.join([*map(str, path_first), "/usr/local/bin", "/usr/bin", "/bin"])
    env.update(MANPAGER="cat", PAGER="cat", GIT_PAGER="cat", MANWIDTH="80", LC_ALL="C.UTF-8")
    env.update(extra)
    return env


def _man_w(env, *page):
    done = subprocess.run([MAN, "-w", *page], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


# ---------------------------------------------------------------- pages in the venv

@needs_man
def test_set_up_installed_the_pages_where_man_finds_them_beside_the_venv_bin():
    assert (VENV_MAN / "man1" / "hills-eval.1").is_file(), (
        f"no man pages under {VENV_MAN}: run 'make man-install' (make test and make quickstart do)")
    env = _man_env(VENV_BIN)
    for page, name in ((["hills-eval"], "man1/hills-eval.1"), (["git-hill"], "man1/git-hill.1"),
                       (["5", "hill.yaml"], "man5/hill.yaml.5")):
        assert _man_w(env, *page) == str(VENV_MAN / name)


def test_the_installed_pages_are_every_generated_page():
    expected = manpages.pages()
    installed = {path.name for section in ("man1", "man5") for path in (VENV_MAN / section).glob("*")
                 if manpages.OWN_PAGE.match(path.name)}
    assert installed == set(expected), "run 'make man-install'"


@needs_man
def test_install_writes_pages_man_finds_for_prefix_bin(tmp_path):
    prefix = tmp_path / "venv"
    (prefix / "bin").mkdir(parents=True)
    written, removed = manpages.install(str(prefix))
    assert len(written) == len(manpages.pages()) and removed == []
    assert _man_w(_man_env(prefix / "bin"), "hills-eval") == str(prefix / "share/man/man1/hills-eval.1")
    assert (prefix / "share/man/man5/hills-report.5").read_text(encoding="utf-8") == \
        manpages.pages()["hills-report.5"]


def test_install_rewrites_only_changed_pages_and_removes_only_hills_pages(tmp_path):
    man1 = tmp_path / "share" / "man" / "man1"
    manpages.install(str(tmp_path))
    (man1 / "hills-eval.1").write_text("stale\n", encoding="utf-8")
    (man1 / "hills-gone.1").write_text("a removed verb\n", encoding="utf-8")
    (man1 / "ipython.1").write_text("another package's page\n", encoding="utf-8")
    written, removed = manpages.install(str(tmp_path))
    assert written == [str(man1 / "hills-eval.1")]
    assert removed == [str(man1 / "hills-gone.1")]
    assert (man1 / "ipython.1").is_file()
    assert manpages.install(str(tmp_path)) == ([], [])
    assert manpages.main(["--install", str(tmp_path)]) == 0


def test_install_refuses_an_outdir(capsys):
    with pytest.raises(SystemExit) as raised:
        manpages.main(["--install", "somewhere", "man"])
    assert raised.value.code == 2
    assert "--install takes neither --check nor MANDIR" in capsys.readouterr().err


# ---------------------------------------------------------------- git hill --help

@needs_man
def test_git_hill_help_flag_opens_the_git_hill_page_from_the_venv():
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    assert (VENV_BIN / "git-hill").exists(), f"no git-hill in {VENV_BIN}: run 'make quickstart'"
    # Only the venv's bin/ holds git-hill and leads man to the venv's pages.
    done = run_bin("git", "hill", "--help", env=_man_env(VENV_BIN))
    assert done.code == 0, done.err
    assert done.out.lstrip().startswith("GIT-HILL(1)")
    assert "git-hill - the hills commands as a git subcommand" in done.out
    assert "hills-help(1)" in done.out


# ---------------------------------------------------------------- hills help

def _help_of(*words, prog="hills"):
    done = run_cli(*words, "--help", prog=prog)
    assert done.code == 0, done.err
    return done.out


@pytest.mark.parametrize("words", [[], ["eval"], ["chain"], ["chain", "verify"], ["help"], ["hook"]],
                         ids=lambda words: " ".join(words) or "no verb")
def test_help_off_a_terminal_prints_the_help_text(words):
    for prog in ("hills", "git-hill"):
        done = run_cli("help", *words, prog=prog)
        assert done.code == 0, done.err
        assert done.out == _help_of(*words, prog=prog) and done.err == ""


def test_help_through_the_real_entry_points():
    env = dict(os.environ, PATH=os.pathsep.join([str(BIN_DIR), os.environ["PATH"]]))
    verb = run_bin("hills", "help", "eval", env=env)
    assert verb.code == 0, verb.err
    assert verb.out.startswith("Usage: hills eval [OPTIONS] DIR")
    assert verb.out == run_bin("hills", "eval", "--help", env=env).out
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    group = run_bin("git", "hill", "help", env=env)
    assert group.code == 0, group.err
    assert group.out.startswith("Usage: git hill [OPTIONS] COMMAND [ARGS]...")
    assert "  help " in group.out
    through_git = run_bin("git", "hill", "help", "eval", env=env)
    assert through_git.code == 0, through_git.err
    assert through_git.out.startswith("Usage: git hill eval [OPTIONS] DIR")


@pytest.mark.parametrize("argv,message,hint", [
    (["nosuchverb"], "error: 'nosuchverb' is not a hills command",
     "hint: run 'hills help' for the list of commands"),
    (["evl"], "error: 'evl' is not a hills command",
     "hint: did you mean 'eval' or 'env'? run 'hills help' for the list of commands"),
    (["expor"], "error: 'expor' is not a hills command",
     "hint: did you mean 'export' or 'report'? run 'hills help' for the list of commands"),
    (["chain", "verfy"], "error: 'verfy' is not a hills chain command", "hint: did you mean 'verify'?"),
    (["eval", "extra"], "error: 'hills eval' has no subcommand 'extra'", "hint: run 'hills help'"),
])
def test_help_of_no_command_is_a_usage_error_naming_it(argv, message, hint):
    done = run_cli("help", *argv)
    assert done.code == 2 and done.out == ""
    lines = done.err.splitlines()
    assert lines[0] == message
    assert lines[1].startswith(hint)


def test_help_of_no_command_through_git_hill_names_git_hill():
    done = run_cli("help", "nosuchverb", prog="git-hill")
    assert done.code == 2
    assert done.err.splitlines() == ["error: 'nosuchverb' is not a git hill command",
                                     "hint: run 'git hill help' for the list of commands"]


@needs_man
def test_help_man_renders_the_page_from_the_venv():
    done = run_bin("hills", "help", "--man", "eval", env=_man_env(VENV_BIN))
    assert done.code == 0, done.err
    assert done.out.lstrip().startswith("HILLS-EVAL(1)")
    assert "hills-eval - score the submission folder" in done.out


@needs_man
def test_help_man_falls_back_to_the_checkout_pages(tmp_path, python_bin):
    # MANPATH set to an empty folder: man finds nothing on its path.
    env = _man_env(BIN_DIR, python_bin, MANPATH=str(tmp_path))
    done = run_bin("hills", "help", "--man", env=env)
    assert done.code == 0, done.err
    assert done.out.lstrip().startswith("HILLS(1)")
    assert (REPO_ROOT / "man" / "hills.1").is_file()


def test_help_man_without_man_is_an_environment_problem(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    done = run_cli("help", "--man", "eval")
    assert done.code == 4 and done.out == ""
    assert done.err.splitlines()[0] == "error: 'man' is not installed"
    assert "hint: install it (the Debian package 'man-db'), or run 'hills eval --help'" in done.err


def test_help_man_of_an_internal_command_says_it_has_no_page():
    done = run_cli("help", "--man", "hook")
    assert done.code == 2
    assert done.err.splitlines() == ["error: 'hills hook' is internal and has no man page",
                                     "hint: run 'hills hook --help' for the short help"]


@needs_man
def test_help_in_a_terminal_opens_the_man_page(python_bin):
    pty = pytest.importorskip("pty")
    env = _man_env(BIN_DIR, python_bin, VENV_BIN, TERM="dumb")
    leader, follower = pty.openpty()
    with subprocess.Popen([str(BIN_DIR / "hills"), "help", "eval"], env=env, stdin=subprocess.DEVNULL,
                          stdout=follower, stderr=subprocess.PIPE) as child:
        os.close(follower)
        shown = b""
        try:
            # Read while it writes: a page is larger than the terminal's buffer.
            while chunk := os.read(leader, 65536):
                shown += chunk
        except OSError:  # EIO: the child closed the terminal
            pass
        finally:
            os.close(leader)
        errors = child.stderr.read().decode()
        assert child.wait(timeout=60) == 0, errors
    text = shown.decode("utf-8", "replace")
    assert "HILLS-EVAL(1)" in text and "Usage: hills eval" not in text


# ---------------------------------------------------------------- hills help FORMAT

@needs_man
@pytest.mark.parametrize("word,page", [("hill.yaml", "HILL.YAML(5)"), ("report", "HILLS-REPORT(5)"),
                                       ("hills-report", "HILLS-REPORT(5)"), ("json", "HILLS-JSON(5)"),
                                       ("lock", "HILLS-LOCK(5)"), ("hills-service", "HILLS-SERVICE(5)")])
def test_help_of_a_file_format_prints_its_page_of_section_5(word, page):
    # The installed page, as the skill tells an agent to read it.
    done = run_bin("hills", "help", word, env=_man_env(VENV_BIN))
    assert done.code == 0, done.err
    first = done.out.splitlines()[0]
    assert first.startswith(page) and first.endswith(page), first
    assert "\b" not in done.out and "NAME" in done.out


def test_a_word_near_a_format_is_named_in_the_hint():
    done = run_cli("help", "hill.yml")
    assert done.code == 2 and done.out == ""
    assert done.err.splitlines() == ["error: 'hill.yml' is not a hills command",
                                     "hint: did you mean 'hill.yaml'? run 'hills help' for the list of commands"]


def test_a_format_without_man_says_how_to_get_it(tmp_path):
    # A PATH with hills on it and no man: the format's page cannot be shown.
    folder = write_python_shim(tmp_path / "bin")
    env = {key: value for key, value in os.environ.items() if key != "MANPATH"}
    env["PATH"] = os.pathsep.join([str(folder), str(BIN_DIR)])
    done = run_bin("hills", "help", "hill.yaml", env=env)
    assert done.code == 4, done.output
    assert done.err.splitlines()[0] == "error: 'man' is not installed"
    assert "hill.yaml(5)" in done.err
