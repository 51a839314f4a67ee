"""The click layer: every command defined once, reachable as `hills VERB`,
`git hill VERB` and the standalone `hills-commit`, `hills-eval`,
`hills-sign` and `hills-chain`; one funnel maps errors to exit codes."""

import json
import os
import sys
import traceback

import click

from . import __version__, errors, state

# Standalone names and the verb each one is.
STANDALONE = {"hills-commit": "commit", "hills-eval": "eval", "hills-sign": "sign", "hills-chain": "chain"}
CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def say(message=""):
    """Human output: stderr."""
    click.echo(message, err=True)


def emit(message=""):
    """Plumbing output: stdout."""
    click.echo(message)


def emit_json(value):
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


def json_option(function):
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of the human table.")(function)


def hill_argument(function):
    return click.argument("name", metavar="NAME")(function)


class HillsGroup(click.Group):
    def list_commands(self, ctx):
        return list(self.commands)


@click.group(cls=HillsGroup, context_settings=CONTEXT)
@click.version_option(__version__, "--version", prog_name="hills")
def main_group():
    """Frozen, git-native evaluation tasks with signed reports.

    A hill is an evaluation task (task text, evaluator, held-out data) in its
    own git repository under .hills/NAME. Freeze it with 'hills commit', score
    a submission folder with 'hills eval', check a report with 'hills verify'.
    """


@main_group.command("new", context_settings=CONTEXT)
@click.argument("name")
@click.option("-t", "--template", default="default", show_default=True,
              help="Template to start from (see 'hills examples').")
def new_command(name, template):
    """Create the hill NAME under .hills/ in the current folder.

    Creates .hills/.gitignore (so the folder hides itself from your project's
    git), the hill folder from TEMPLATE, its own git dir .vc with the
    pre-commit hook installed, and registers the hill in machine state. No
    file of yours is touched; a refused name or a failed step leaves nothing.
    """
    from . import hill

    created = hill.create(name, template)
    if created["home_created"]:
        say(f"hills: created machine state at {state.home()}")
    emit(created["path"])
    say(f"created {os.path.relpath(created['path'])}")
    say(f"  template         {template}")
    say(f"  version control  {os.path.relpath(created['path'])}/.vc (nothing committed yet)")
    say(f"hint: run 'hills check {name}', then 'hills commit {name} -m MESSAGE' to freeze it")


@main_group.command("examples", context_settings=CONTEXT)
@json_option
def examples_command(as_json):
    """List the templates that 'hills new -t' accepts."""
    from . import hill

    found = hill.templates()
    if as_json:
        emit_json(found)
        return
    width = max(len(name) for name in found)
    for name, description in found.items():
        emit(f"{name:<{width}}  {description}")


@main_group.command("check", context_settings=CONTEXT)
@hill_argument
@click.option("--no-tests", is_flag=True, help="Skip the hill's own tests/.")
@json_option
def check_command(name, no_tests, as_json):
    """Run the checks a hill must pass before it can be committed.

    One line per check: manifest schema, layout, uv.lock up to date, the
    evaluator contract binding in the hill's own uv environment, and the
    hill's tests/ passing in that environment. Exits 1 when any fails.
    """
    from . import check, hill

    target = hill.resolve(name)
    results = check.run_checks(target.path, tests=not no_tests)
    failed = [r for r in results if r.status == "fail"]
    if as_json:
        emit_json({"hill": target.name, "passed": not failed, "checks": [r.as_dict() for r in results]})
    else:
        for result in results:
            emit(_check_line(result))
        emit()
        emit(f"{target.name}: " + ("all checks passed" if not failed else f"{len(failed)} check(s) failed"))
    if failed:
        raise SystemExit(errors.EXIT_NO)


def _check_line(result):
    label = {"ok": "ok", "fail": "FAIL", "warn": "warn"}[result.status]
    return f"  {label:<5} {result.name:<19} {result.detail}"


@main_group.command("commit", context_settings=CONTEXT)
@hill_argument
@click.option("-m", "--message", required=True, help="The commit message.")
def commit_command(name, message):
    """Freeze a hill: gate, regenerate locks, record a commit.

    Runs every check as a gate, regenerates private.lock and blobs.lock from
    disk, builds the tree with a private index and records the commit with
    write-tree, commit-tree and a compare-and-swap update-ref. Nothing under
    private/ and no blob ever becomes a git object. Prints the tree hash and
    the commit id on stdout.
    """
    from . import commit, hill, locks

    target = hill.resolve(name)
    result = commit.commit(target, message, progress=lambda r: say(_check_line(r)))
    say(f"  private.lock  {locks.summary(result['private'])}")
    say(f"  blobs.lock    {locks.summary(result['blobs'])}")
    say()
    say(f"committed {result['hill']} {result['version']}")
    say(f"  tree hash  {result['tree_hash']}")
    say(f"  commit     {result['commit']}")
    emit(result["tree_hash"])
    emit(result["commit"])


@main_group.command("hook", context_settings=CONTEXT, hidden=True)
@click.argument("which", type=click.Choice(["pre-commit"]))
def hook_command(which):
    """Entry point of the hook installed in each hill's .vc/hooks/."""
    from . import hook

    hook.pre_commit(os.getcwd())


@main_group.command("status", context_settings=CONTEXT)
@hill_argument
@json_option
def status_command(name, as_json):
    """Show what changed in a hill since its last commit.

    Lists added, modified and deleted files, and lock drift: a file under
    private/ or a blob added, changed or removed since HEAD's locks. Exits 0
    either way; use --json for a machine-readable form.
    """
    from . import hill, info

    target = hill.resolve(name)
    result = info.status(target)
    if as_json:
        emit_json(result)
        return
    if not result["head"]:
        emit(f"hill '{target.name}': no commits yet")
    else:
        emit(f"hill '{target.name}' at {result['head'][:12]}")
    changes = result["files"] + result["private"] + result["blobs"]
    if not changes:
        emit("nothing changed since the last commit")
        return
    for change, path in result["files"]:
        emit(f"  {change:<10} {path}")
    for lock_name in ("private", "blobs"):
        for change, path in result[lock_name]:
            emit(f"  {change:<10} {path}  ({lock_name}.lock)")


@main_group.command("log", context_settings=CONTEXT)
@hill_argument
@json_option
def log_command(name, as_json):
    """List a hill's versions: tree hash, commit, date, message, evals."""
    from . import hill, info

    target = hill.resolve(name)
    versions = info.log(target)
    if as_json:
        emit_json(versions)
        return
    if not versions:
        emit(f"hill '{target.name}': no commits yet")
        return
    for version in versions:
        emit(f"{version['tree_hash'][:12]}  {version['commit'][:12]}  {version['date']}  "
             f"{version['evals']:>4} eval(s)  {version['message']}")


@main_group.command("describe", context_settings=CONTEXT)
@hill_argument
@json_option
def describe_command(name, as_json):
    """Print what a climber needs: the task, params, contract and metrics."""
    from . import hill, info

    target = hill.resolve(name)
    described = info.describe(target)
    if as_json:
        emit_json(described)
        return
    emit(f"# {described['hill']} {described['version']}"
         + (f"  (tree {described['tree_hash'][:12]})" if described["tree_hash"] else "  (not committed yet)"))
    if described["description"]:
        emit(described["description"])
    emit()
    emit("## Submission contract")
    for key in ("what", "command", "params", "symlinks"):
        emit(f"- {described['submission'][key]}")
    if described["examples"]:
        emit(f"- example submissions: {', '.join('examples/' + e for e in described['examples'])} "
             f"(under {described['path']})")
    emit(f"- evaluator: {described['evaluator']} shape, watchdog {described['timeout']}s")
    emit()
    emit("## Params")
    if not described["params"]:
        emit("(none)")
    for param_name, param in described["params"].items():
        bounds = ""
        if "low" in param or "high" in param:
            bounds = f" in [{param.get('low', '-inf')}, {param.get('high', 'inf')}]"
        if "choices" in param:
            bounds = " one of " + ", ".join(map(str, param["choices"]))
        emit(f"- {param_name}: {param['type']}{bounds}, default {param['default']}"
             + (" (primary: reports compare only with equal values)" if param["primary"] else "")
             + (f": {param['description']}" if param.get("description") else ""))
    emit()
    emit("## Metrics")
    if not described["metrics"]:
        emit("(declared by the evaluator in each report; ranked in the order given)")
    for metric in described["metrics"]:
        emit(f"- {metric['name']}: {'higher' if metric['direction'] == 'max' else 'lower'} is better "
             f"({metric['direction']})")
    emit()
    emit("## Task")
    emit(described["readme"].rstrip())


@main_group.command("list", context_settings=CONTEXT)
@json_option
def list_command(as_json):
    """List the hills registered on this machine."""
    registry = state.load_registry()["hills"]
    rows = [{"name": name, "path": entry["path"], "tree_hash": entry.get("tree_hash"),
             "exists": os.path.isfile(os.path.join(entry["path"], "hill.yaml"))}
            for name, entry in sorted(registry.items())]
    if as_json:
        emit_json(rows)
        return
    if not rows:
        say("no hills yet; create one with 'hills new NAME'")
        return
    width = max(len(row["name"]) for row in rows)
    for row in rows:
        tree = (row["tree_hash"] or "uncommitted")[:12]
        emit(f"{row['name']:<{width}}  {tree:<12}  {row['path']}" + ("" if row["exists"] else "  (missing)"))


@main_group.command("home", context_settings=CONTEXT)
def home_command():
    """Print the machine state folder (HILLS_HOME, else ~/.autolab/hills)."""
    emit(state.home())


COMMANDS = main_group.commands


def git_hill_group():
    """The same group under the name `git hill`."""
    return main_group


def _crash_log(exc):
    stamp = __import__("time").strftime("%Y%m%dT%H%M%S")
    path = os.path.join(state.home(), "logs", f"crash-{stamp}-{os.getpid()}.log")
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(f"hills {__version__}\nargv: {sys.argv!r}\n\n")
            handle.write("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
        return path
    except OSError:
        return None


def run(command, argv, prog_name):
    """Invoke a click command with the error funnel; return the exit code."""
    try:
        command.main(args=argv, prog_name=prog_name, standalone_mode=False)
        return errors.EXIT_OK
    except errors.HillsError as exc:
        say(f"error: {exc.message}")
        if exc.hint:
            say(f"hint: {exc.hint}")
        return exc.exit_code
    except click.exceptions.Abort:
        say("error: interrupted")
        return errors.EXIT_INTERRUPTED
    except click.ClickException as exc:
        exc.show()
        return errors.EXIT_USAGE if isinstance(exc, click.UsageError) else exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:
        say("error: interrupted")
        return errors.EXIT_INTERRUPTED
    except BrokenPipeError:
        return errors.EXIT_OK
    except Exception as exc:  # the one place a bug becomes a one-line message
        path = _crash_log(exc)
        say(f"error: internal error in hills: {type(exc).__name__}: {exc}")
        if path:
            say(f"hint: the traceback is saved in {path}; please report it")
        return errors.EXIT_BUG


def entry_for(program):
    """(command, prog_name) for the name this process was started as."""
    if program in STANDALONE:
        return COMMANDS[STANDALONE[program]], program
    if program == "git-hill":
        return main_group, "git hill"
    return main_group, "hills"


def main(argv=None):
    program = os.path.basename(sys.argv[0]) if sys.argv else "hills"
    if program.endswith(".py") or program == "__main__.py":
        program = "hills"
    args = list(sys.argv[1:] if argv is None else argv)
    if program == "git-hill" and args and args[0] in ("--help", "-h") and len(args) == 1:
        # `git hill --help` makes git open `man git-hill`; plain -h prints help.
        pass
    command, prog_name = entry_for(program)
    sys.exit(run(command, args, prog_name))
