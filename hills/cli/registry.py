"""The registry of verbs: each is defined once, in hills/commands/<verb>.py,
and reachable as `hills VERB`, `git hill VERB` and, for four of them, the
standalone `hills-commit`, `hills-eval`, `hills-sign` and `hills-chain`.
`hills --help` lists the summaries below without importing a command
module; running a verb imports its module alone."""

import importlib
import sys
from collections.abc import Iterator, Mapping

import click

from .. import __version__, commands
from ..base import errors
from .options import CONTEXT, HillsGroup

# Each verb, in the order `hills --help` lists them, with its summary there
# (the first sentence of its help; None for a hidden verb). The guard test
# holds every summary equal to its command's short help.
SUMMARIES = {
    "new": "Create the hill NAME under .hills/ in the current folder.",
    "examples": "List the templates that 'hills new -t' accepts.",
    "check": "Run the checks a hill must pass before it can be committed.",
    "commit": "Freeze a hill: gate, regenerate locks, record a commit.",
    "hook": None,
    "status": "Show what changed in a hill since its last commit.",
    "restore": "Put a hill's files back as its last commit holds them, discarding edits.",
    "log": "List a hill's versions: tree hash, commit, date, message, evals.",
    "describe": "Print what a climber needs: the task, params, contract and metrics.",
    "run": "Run a submission through the hill's solution phase, unlogged.",
    "env": "Print the interpreter of the hill's locked environment.",
    "pin": "Approve one version of a hill; evals of any other are unofficial.",
    "bundle": "Write the committed version of a hill as one file, for another machine.",
    "unbundle": "Rebuild the hill a bundle holds under .hills/ and register it.",
    "export": "Write a hill's committed version as another tool's task.",
    "list": "List the hills registered on this machine, one line per hill.",
    "home": "Print the machine state folder (HILLS_HOME, else ~/.autolab/hills).",
    "eval": "Score the submission folder DIR against a hill's committed evaluator.",
    "tune": "Tune the knobs a submission declares in params.json.",
    "verify": "Check the signature of each REPORT file ('-' reads stdin).",
    "show": "Render a report for a person: verdict, metrics, breakdown, instances.",
    "sign": "Sign a JSON object from stdin as an unofficial, self-reported report.",
    "key": "Print this machine's public key as one OpenSSH line.",
    "trust": "Add, remove or list the keys whose reports 'hills verify' accepts.",
    "chain": "Append to, verify or show any signed, chained log file.",
    "attempts": "Show a hill version's attempts, its best reports and its log's state.",
    "rank": "Rank report files (or a hill's logged reports) within comparable groups.",
    "rescore": "Re-run an older version's official evals against HEAD; list the scores that moved.",
    "journal": "Write a hill's climb as one HTML page: plots, attempts, reasons, the best.",
    "setup": "Set up what hills needs once per machine or project.",
    "serve": "Run the evaluation service in the foreground, as the service user.",
    "mcp": "Serve hills to an agent CLI as MCP tools, over stdin and stdout.",
    "warm": "Show or stop the warm eval servers that run for this user.",
    "help": "Show the manual of a command, or of hills itself.",
}
# Standalone names and the verb each one is.
STANDALONE = {"hills-commit": "commit", "hills-eval": "eval", "hills-sign": "sign", "hills-chain": "chain"}


# A verb whose module has another name: `hills.commands.run` is the
# funnel, which a module of that name would replace once imported.
MODULES = {"run": "devrun"}


def module_name(verb: str) -> str:
    """The module that defines `verb`."""
    return f"{commands.__name__}.{MODULES.get(verb, verb)}"


class LazyCommands(Mapping):
    """The verbs by name, in registry order, each command module imported
    the first time its command is asked for (click's Group reads its
    commands through this mapping)."""

    def __init__(self, verbs: Mapping[str, object]) -> None:
        self._verbs = verbs
        self._loaded: dict[str, click.Command] = {}

    def __getitem__(self, verb: str) -> click.Command:
        if verb not in self._loaded:
            if verb not in self._verbs:
                raise KeyError(verb)
            self._loaded[verb] = importlib.import_module(module_name(verb)).command
        return self._loaded[verb]

    def __iter__(self) -> Iterator[str]:
        return iter(self._verbs)

    def __len__(self) -> int:
        return len(self._verbs)


@click.group(cls=HillsGroup, context_settings=CONTEXT, commands=LazyCommands(SUMMARIES), summaries=SUMMARIES)
@click.version_option(__version__, "--version", prog_name="hills")
def main_group() -> None:
    """Frozen, git-native evaluation tasks with signed reports.

    A hill is an evaluation task (task text, evaluator, held-out data) in its
    own git repository under .hills/NAME. Freeze it with 'hills commit', score
    a submission folder with 'hills eval', check a report with 'hills verify'.
    """


COMMANDS = main_group.commands


def get(verb: str) -> click.Command:
    """The click command of `verb` (its module imported if need be)."""
    return COMMANDS[verb]


def verbs() -> list[str]:
    """The visible verbs, in the order `hills --help` lists them."""
    return [verb for verb, summary in SUMMARIES.items() if summary is not None]


def entry_for(program: str) -> tuple[click.Command, str]:
    """(command, prog_name) for the name this process was started as."""
    if program in STANDALONE:
        return get(STANDALONE[program]), program
    if program == "git-hill":
        return main_group, "git hill"
    return main_group, "hills"


def _help_hint(command: click.Command, argv: list[str], prog_name: str) -> str:
    """The hint of an error that brings none of its own: the help of the
    command that argv reached (`hills eval`, `hills chain verify`...)."""
    words = [prog_name]
    reached: click.Command | None = command
    for arg in argv:
        if not isinstance(reached, click.Group) or arg.startswith("-"):
            break
        reached = reached.commands.get(arg)
        if reached is None:
            break
        words.append(arg)
    return f"see '{' '.join(words)} --help'"


def _invoke(command: click.Command, argv: list[str], prog_name: str) -> int:
    """Run a click command; click's own errors become hills errors, for the
    funnel to report like any other."""
    try:
        code = command.main(args=argv, prog_name=prog_name, standalone_mode=False)
    except SystemExit as exc:
        # click meets a closed stdout (`hills attempts NAME | head -1`) with
        # exit 1 behind flush-pacifying streams: the funnel's closed pipe.
        # (click 8.2 renamed the class _PacifyFlushWrapper; both names hold.)
        if exc.code == 1 and type(sys.stdout).__name__.lstrip("_") == "PacifyFlushWrapper":
            raise BrokenPipeError() from None
        raise
    except click.exceptions.Abort:
        raise KeyboardInterrupt from None
    except click.ClickException as exc:
        message = exc.format_message().rstrip(".")
        problem = errors.UsageError(message[:1].lower() + message[1:])
        if isinstance(exc, click.UsageError) and exc.ctx is not None:
            problem.hint = f"see '{exc.ctx.command_path} --help'"
        problem.exit_code = errors.EXIT_USAGE if isinstance(exc, click.UsageError) else exc.exit_code
        raise problem from None
    return errors.EXIT_OK if code is None else code


def run(command: click.Command, argv: list[str], prog_name: str) -> int:
    """Invoke a click command through the error funnel; return the exit code."""
    return commands.run(lambda: _invoke(command, argv, prog_name),
                        hint=lambda: _help_hint(command, argv, prog_name))


def main(program: str, argv: list[str]) -> int:
    """The exit code of `program` (hills, git-hill, hills-eval...) run on argv."""
    command, prog_name = entry_for(program)
    return run(command, argv, prog_name)
