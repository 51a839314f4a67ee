"""`hills help`: which command a list of words names, its --help text, and
its man page, found on the manual path or in the checkout's man/."""

import difflib
import os
import shutil
import subprocess
import sys
from typing import Callable, NamedTuple, Optional

import click

from ..base import errors


class Topic(NamedTuple):
    """What `hills help WORDS...` is about: the command's click context and
    the man page that documents it (None for internal commands)."""

    ctx: click.Context
    page: Optional[str]


def _visible(group: click.Group) -> list[str]:
    return [name for name, command in group.commands.items() if not command.hidden]


def _unknown(word: str, ctx: click.Context) -> errors.UsageError:
    root = ctx.find_root().command_path
    if isinstance(ctx.command, click.Group):
        message = f"'{word}' is not a {ctx.command_path} command"
        close = difflib.get_close_matches(word, _visible(ctx.command), n=3, cutoff=0.6)
    else:
        message = f"'{ctx.command_path}' has no subcommand '{word}'"
        close = []
    listing = f"run '{root} help' for the list of commands"
    if isinstance(ctx.command, click.Group) and ctx.parent is None:
        close += [name for name in difflib.get_close_matches(word, FORMATS, n=1, cutoff=0.6) if name not in close]
    if close:
        listing = f"did you mean {' or '.join(repr(name) for name in close)}? {listing}"
    return errors.UsageError(message, hint=listing)


# The pages of section 5, the files hills reads and writes, by the word
# `hills help WORD` takes for each (the page's name, or it without `hills-`).
FORMATS = {"hill.yaml": "hill.yaml", "hills-report": "hills-report", "report": "hills-report",
           "hills-json": "hills-json", "json": "hills-json", "hills-lock": "hills-lock", "lock": "hills-lock",
           "hills-service": "hills-service"}


def format_page(words: list[str], root_ctx: click.Context) -> str | None:
    """The section-5 page one word names when it names no command: `hills
    help hill.yaml` is hill.yaml(5)."""
    root = root_ctx.command
    if len(words) != 1 or (isinstance(root, click.Group) and words[0] in root.commands):
        return None
    return FORMATS.get(words[0])


def topic(words: list[str], root_ctx: click.Context) -> Topic:
    """The command `words` names under the root group of `root_ctx`; a
    UsageError naming the first word that names nothing."""
    ctx = root_ctx
    for word in words:
        command = ctx.command
        sub = command.commands.get(word) if isinstance(command, click.Group) else None
        if sub is None:
            raise _unknown(word, ctx)
        # Resilient: no required argument or no_args_is_help may stop here.
        ctx = sub.make_context(word, [], parent=ctx, resilient_parsing=True)
    page: Optional[str]
    if not words:
        page = "git-hill" if root_ctx.command_path == "git hill" else "hills"
    else:
        root = root_ctx.command
        verb = root.commands[words[0]] if isinstance(root, click.Group) else None
        page = None if verb is None or verb.hidden else f"hills-{words[0]}"
    return Topic(ctx, page)


def _checkout_page(page: str, section: str = "1") -> Optional[str]:
    """The page in the checkout's man/, when hills runs from a checkout."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = os.path.join(root, "man", f"{page}.{section}")
    if os.path.isfile(os.path.join(root, "pyproject.toml")) and os.path.isfile(path):
        return path
    return None


def man_argv(page: str, section: str = "1") -> Optional[list[str]]:
    """How to run man(1) on `page`: from the manual path when man finds it
    there, else from the checkout's man/; None without man or a page."""
    man = shutil.which("man")
    if man is None:
        return None
    found = subprocess.run([man, "-w", section, page], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True)
    if found.returncode == 0 and found.stdout.strip():
        return [man, section, page]
    checkout = _checkout_page(page, section)
    return [man, "-l", checkout] if checkout else None


def show_format(page: str, *, force_man: bool) -> int:
    """A section-5 page: through man's pager in a terminal (or `force_man`),
    else its text on stdout, as man formats it for a pipe."""
    argv = man_argv(page, "5")
    if argv is None:
        if shutil.which("man") is None:
            raise errors.EnvironmentProblem(
                "'man' is not installed", hint="install it (the Debian package 'man-db') to read "
                                                f"{page}(5)")
        prefix_bin = os.path.join(sys.prefix, "bin")
        raise errors.EnvironmentProblem(
            f"man finds no page '{page}(5)'",
            hint=f"put '{prefix_bin}' on PATH (man looks in '../share/man' beside it; 'make quickstart' installs "
                 "the pages there), or add its share/man to MANPATH")
    sys.stdout.flush()
    if force_man or sys.stdout.isatty():
        code = subprocess.run(argv).returncode
    else:
        env = {key: value for key, value in os.environ.items() if key != "MAN_KEEP_FORMATTING"}
        code = subprocess.run(argv, env=dict(env, MANPAGER="cat", PAGER="cat")).returncode
    if code != 0:
        raise errors.EnvironmentProblem(f"man exited with code {code} showing '{page}(5)'")
    return errors.EXIT_OK


def show(words: list[str], root_ctx: click.Context, *, force_man: bool, echo: Callable[[str], None]) -> int:
    """Open the man page of what `words` name when standard output is a
    terminal (or `force_man`), else print its --help text; the exit code.
    A word naming a file format instead (FORMATS) shows its section-5 page."""
    page = format_page(words, root_ctx)
    if page is not None:
        return show_format(page, force_man=force_man)
    found = topic(words, root_ctx)
    if force_man or sys.stdout.isatty():
        argv = man_argv(found.page) if found.page else None
        if argv is not None:
            sys.stdout.flush()
            code = subprocess.run(argv).returncode
            if code != 0:
                raise errors.EnvironmentProblem(
                    f"man exited with code {code} showing '{found.page}'",
                    hint=f"run '{found.ctx.command_path} --help' for the short help")
            return errors.EXIT_OK
        if force_man:
            raise _no_page(found)
    echo(found.ctx.get_help())
    return errors.EXIT_OK


def _no_page(found: Topic) -> errors.HillsError:
    fallback = f"run '{found.ctx.command_path} --help' for the short help"
    if found.page is None:
        return errors.UsageError(f"'{found.ctx.command_path}' is internal and has no man page", hint=fallback)
    if shutil.which("man") is None:
        return errors.EnvironmentProblem(
            "'man' is not installed", hint=f"install it (the Debian package 'man-db'), or {fallback}")
    prefix_bin = os.path.join(sys.prefix, "bin")
    return errors.EnvironmentProblem(
        f"man finds no page '{found.page}'",
        hint=f"put '{prefix_bin}' on PATH (man looks in '../share/man' beside it; 'make quickstart' installs "
             f"the pages there), or add its share/man to MANPATH; or {fallback}")
