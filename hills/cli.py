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

    def parse_args(self, ctx, args):
        # No command: the help, as --help prints it, not an "error: usage:"
        # wrapped around it; still exit 2, as no command was given.
        if not args and self.no_args_is_help and not ctx.resilient_parsing:
            click.echo(ctx.get_help(), color=ctx.color)
            raise SystemExit(errors.EXIT_USAGE)
        return super().parse_args(ctx, args)

    def format_commands(self, ctx, formatter):
        """Each command's first sentence whole, wrapped to the terminal
        rather than cut to fit one line."""
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=1000)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


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
@click.option("-t", "--template", metavar="TEMPLATE", default="default", show_default=True,
              help="Template to start from (see 'hills examples').")
@click.option("--from-hillclimb", "hillclimb_dir", metavar="DIR",
              help="Import the hillclimb problem folder DIR instead of a template.")
def new_command(name, template, hillclimb_dir):
    """Create the hill NAME under .hills/ in the current folder.

    Creates .hills/.gitignore (so the folder hides itself from your project's
    git), the hill folder from TEMPLATE, its own git dir .vc with the
    pre-commit hook installed, and registers the hill in machine state. No
    file of yours is touched; a refused name or a failed step leaves nothing.
    With --from-hillclimb, the hill is converted from a hillclimb problem
    folder instead (see docs/hillclimb.md); its held-out inputs go to private/.
    """
    from . import hill

    if hillclimb_dir is not None:
        from . import hillclimb

        if template != "default":
            raise errors.UsageError("--template and --from-hillclimb cannot be combined")
        created = hillclimb.new_hill(name, hillclimb_dir, warn=say)
        template = f"hillclimb problem {created['import']['problem']} ({created['import']['shape']})"
    else:
        created = hill.create(name, template)
    if created["home_created"]:
        say(f"hills: created machine state at {state.home()}")
    emit(created["path"])
    say(f"created {os.path.relpath(created['path'])}")
    say(f"  template         {template}")
    say(f"  version control  {os.path.relpath(created['path'])}/.vc (nothing committed yet)")
    from .check import readme_check

    if readme_check(created["path"]).status == "fail":
        say(f"hint: write the task in {os.path.relpath(created['path'])}/README.md, replacing the note "
            "for the hill's author")
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
@click.option("--exit-code", "exit_code", is_flag=True,
              help="Exit 1 when anything changed since the last commit (files or lock drift).")
@json_option
def status_command(name, exit_code, as_json):
    """Show what changed in a hill since its last commit.

    Lists added, modified and deleted files, and lock drift: a file under
    private/ or a blob added, changed or removed since HEAD's locks. Exits 0
    either way, unless --exit-code is given; use --json for a
    machine-readable form.
    """
    from . import hill, info

    target = hill.resolve(name)
    result = info.status(target)
    changes = result["files"] + result["private"] + result["blobs"]
    _status_table(target, result, changes, as_json)
    if exit_code and changes:
        raise SystemExit(errors.EXIT_NO)


def _status_table(target, result, changes, as_json):
    if as_json:
        emit_json(result)
        return
    if not result["head"]:
        emit(f"hill '{target.name}': no commits yet")
    else:
        emit(f"hill '{target.name}' at {result['head'][:12]}")
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
    emit(f"{'TREE':<12}  {'COMMIT':<12}  {'DATE':<25}  {'EVALS':>5}  MESSAGE")
    for version in versions:
        emit(f"{version['tree_hash'][:12]}  {version['commit'][:12]}  {version['date']:<25}  "
             f"{version['evals']:>5}  {version['message']}")


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
    for key in ("what", "command", "params", "symlinks", "unit_tests"):
        if key in described["submission"]:
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


@main_group.command("pin", context_settings=CONTEXT)
@hill_argument
@click.argument("tree", required=False, metavar="[TREE]")
@click.option("--clear", is_flag=True, help="Remove the approval: every committed version scores officially again.")
def pin_command(name, tree, clear):
    """Approve one version of a hill; evals of any other are unofficial.

    Records TREE (default: the tree of HEAD) in machine state, sealed with
    the machine key, as the version a person approved. From then on an eval
    of another tree of the hill is logged and signed but unofficial, with
    the reason stated, so a climber that re-commits an edited evaluator
    cannot produce official scores. Prints the approved tree hash.
    """
    from . import hill, pin

    target = hill.resolve(name)
    if clear:
        if tree:
            raise errors.UsageError("--clear takes no TREE")
        pin.clear_pin(target)
        say(f"hill '{target.name}': approval cleared; every committed version scores officially")
        return
    if not tree:
        head = target.repo.head()
        if not head:
            raise errors.Refused(f"hill '{target.name}' has no commits yet", hint=f"hills commit {name} -m MESSAGE")
        tree = target.repo.tree_of(head)
    approved = pin.set_pin(target, tree)
    emit(approved)
    say(f"hill '{target.name}': approved tree {approved[:12]}; evals of other versions are unofficial")


@main_group.command("list", context_settings=CONTEXT)
@json_option
def list_command(as_json):
    """List the hills registered on this machine, one line per hill.

    Hills of the same name in different projects each get their line; the
    path tells them apart.
    """
    from . import evaluate, hill

    rows = []
    for name, entry in state.registry_entries():
        exists = os.path.isfile(os.path.join(entry["path"], "hill.yaml"))
        tree_hash = entry.get("tree_hash")
        if exists and os.path.isdir(os.path.join(entry["path"], ".vc")):
            # HEAD, not the registry: a plain git commit moves it too.
            target = hill.Hill(entry["path"])
            head = target.repo.head()
            tree_hash = evaluate.pinned_tree(target, head) if head else None
        rows.append({"name": name, "path": entry["path"], "tree_hash": tree_hash, "exists": exists})
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



@main_group.command("eval", context_settings=CONTEXT)
@click.argument("submission", metavar="DIR", type=click.Path(file_okay=False, path_type=str))
@click.option("-H", "--hill", "hill_name", metavar="NAME", required=True, help="The hill to score against.")
@click.option("-p", "--param", "params", metavar="NAME=VALUE", multiple=True,
              help="Set a param declared in hill.yaml (repeatable); typed and bounded.")
@click.option("--final", is_flag=True, help="Holdout mode: counted per hill version, against the final budget.")
@click.option("--force", is_flag=True, help="Score HEAD even though the hill has uncommitted changes.")
@click.option("--current", is_flag=True, help="Score the working tree, unofficially (tree_hash null).")
@click.option("--queue", is_flag=True, help="Wait for the hill's exclusive resource instead of failing.")
@click.option("-v", "--verbose", is_flag=True, help="Stream the evaluator's output to stderr.")
@click.option("-o", "--output", metavar="FILE", type=click.Path(dir_okay=False, path_type=str),
              help="Also write the report to FILE.")
@click.option("--repeat", type=click.IntRange(min=1), metavar="N",
              help="Run N replicates (seeds 0..N-1); metrics are medians, with their spread.")
@click.option("-k", "--knob", "knobs", metavar="NAME=VALUE", multiple=True,
              help="Set a knob the submission declares in params.json (repeatable); refused outside its range.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one line of JSON and no summary.")
def eval_command(submission, hill_name, params, final, force, current, queue, verbose, output, as_json, repeat,
                 knobs):
    """Score the submission folder DIR against a hill's committed evaluator.

    Pins the hill's HEAD (a dirty hill is an error), verifies private data
    against the locks, snapshots and hashes DIR, runs the evaluator in its
    own process group under the watchdog, and prints the signed report as
    JSON on stdout with a short summary on stderr. Every outcome, crash or
    refusal included, is appended to the hill version's attempts log.
    Exits 0 when the submission passed, 1 when it did not, 5 when the hill
    allowed no score (uncommitted changes, no commit, lock drift, a spent
    holdout budget).
    """
    from . import evaluate, hill

    target = hill.resolve(hill_name)
    request = evaluate.EvalRequest(target, submission, tuple(params), final=final, force=force, current=current,
                                   queue=queue, verbose=verbose, repeat=repeat, knobs=tuple(knobs) or None)
    if output:
        _check_output_path(output)
    outcome = evaluate.evaluate(request, say=say)
    if not outcome.crashed:  # a bug in hills prints no report; the funnel says where its traceback is
        _emit_report(outcome.report, output, as_json)
    if outcome.error is not None:
        raise outcome.error  # the refusal, interrupt or bug: said by the funnel like any other
    if not as_json:
        _eval_summary(outcome.report, submission)
    if outcome.exit_code:
        raise SystemExit(outcome.exit_code)


def _emit_report(report, output, as_json):
    text = json.dumps(report, indent=None if as_json else 2, ensure_ascii=False)
    if output:
        state.atomic_write(output, text + "\n")
    emit(text)


def _check_output_path(output):
    folder = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(folder):
        raise errors.UsageError(f"cannot write the report to '{output}': folder '{folder}' does not exist")


def _eval_summary(report, submission):
    from .report import summary_line

    tree = (report["tree_hash"] or "working tree")[:12]
    say(f"{report['hill']} @ {tree}" + ("" if report["official"] else "  (unofficial)"))
    say(f"  submission   {submission}")
    if report.get("submission_hash"):
        say(f"  hash         {report['submission_hash'][:27]}…")
    if report["params"]:
        say("  params       " + "  ".join(f"{k}={v}" for k, v in report["params"].items()))
    say(f"  {summary_line(report)}")
    for name, spread in (report.get("spread") or {}).items():
        say(f"  spread       {name}: min {spread['min']:.6g}  max {spread['max']:.6g}  MAD {spread['mad']:.6g}"
            f"  over {spread['n']} replicates")
    if report.get("trial"):
        say("  knobs        " + "  ".join(f"{k}={v}" for k, v in report["trial"].items()))
    if report.get("unit_tests"):
        say(f"  unit tests   {'passed' if report['unit_tests']['passed'] else 'FAILED'}")
    for warning in report.get("warnings", []):
        say(f"  warning      {warning}")
    if report.get("config"):
        say("  config       " + "  ".join(f"{c['name']}={c['value']}{'*' if c['primary'] else ''}"
                                         for c in report["config"])
            + ("   (* = primary)" if any(c["primary"] for c in report["config"]) else ""))
    if report.get("reason"):
        say(f"  reason       {report['reason']}")
    if report.get("forced"):
        say("  note         the hill had uncommitted changes; its last commit was scored (--force)")
    if report["official_reason"]:
        say(f"  unofficial   {report['official_reason']}")


@main_group.command("tune", context_settings=CONTEXT)
@click.argument("submission", metavar="DIR", type=click.Path(file_okay=False, path_type=str))
@click.option("-H", "--hill", "hill_name", metavar="NAME", required=True, help="The hill to score against.")
@click.option("--budget", type=int, required=True, metavar="N", help="Number of trials (evaluator runs), at least 1.")
@click.option("--tuner", type=click.Choice(["random", "optuna"]), default="random", show_default=True,
              help="How trial values are chosen; optuna needs the hills[optuna] extra.")
@click.option("--parallel", type=int, default=1, show_default=True, metavar="K", help="Trials run at once.")
@click.option("-p", "--param", "params", metavar="NAME=VALUE", multiple=True,
              help="Set a hill param for every trial (repeatable), as for 'hills eval'.")
@click.option("--seed", type=int, metavar="SEED", help="Seed of the tuner's own random choices.")
@json_option
def tune_command(submission, hill_name, budget, tuner, parallel, params, seed, as_json):
    """Tune the knobs a submission declares in params.json.

    Runs BUDGET trials, each a full 'hills eval' with its own knob values:
    a signed, logged report like any other. Trial 0 uses the declared
    defaults. The candidate's score is its best passing trial; its knob
    values are written beside DIR as DIR.best-params.json. Exits 1 when no
    trial passed, 5 when the first trial's eval was refused before scoring.
    """
    from . import hill, tune

    target = hill.resolve(hill_name)
    result = tune.tune(target, submission, budget, tuner, parallel, params, seed=seed, progress=say)
    if as_json:
        emit_json(result)
    elif result["best"]:
        best = result["best"]
        emit(f"best trial {best['trial']}: " + "  ".join(f"{m['name']}={m['value']:.6g} ({m['direction']})"
                                                          for m in best["metrics"]))
        emit("  knobs  " + "  ".join(f"{k}={v}" for k, v in best["knobs"].items()))
        if not best["official"]:
            emit(f"  unofficial: {best['official_reason']}")
        emit(f"  written to {result['best_params_file']}")
    else:
        emit("no trial passed")
    if not result["best"]:
        raise SystemExit(errors.EXIT_NO)


@main_group.command("verify", context_settings=CONTEXT)
@click.argument("reports", metavar="REPORT...", nargs=-1, required=True)
def verify_command(reports):
    """Check the signature of each REPORT file ('-' reads stdin).

    Prints 'signature valid' with the verdict for each, or 'signature
    INVALID' when a report was edited or signed with another machine's key.
    Exits 1 if any report is INVALID.
    """
    from . import verify

    code = verify.render(verify.check(reports))
    if code:
        raise SystemExit(code)


@main_group.command("show", context_settings=CONTEXT)
@click.argument("report_path", metavar="REPORT")
def show_command(report_path):
    """Render a report for a person: verdict, metrics, breakdown, instances.

    Shows whether the signature is valid, the status and reason, metrics with
    their replicate spread, side metrics, unit tests, the report block with
    its worst segment first, and the instances worst first. Exits 1 when the
    signature is INVALID (the report is still shown, marked as such).
    """
    from . import show, signing, verify

    report = signing.load_report(report_path)
    ok, reason = verify.verdict(report, state.existing_key())
    verdict = "signature valid" if ok else f"signature INVALID ({reason})"
    show.render(report, verdict, emit)
    if not ok:
        if reason == verify.no_key_reason():
            say(f"hint: {verify.NO_KEY_HINT}")
        raise SystemExit(errors.EXIT_NO)


@main_group.command("sign", context_settings=CONTEXT)
@click.option("--verify", "verify_paths", metavar="REPORT", multiple=True,
              help="Check REPORT's signature instead (same as 'hills verify').")
def sign_command(verify_paths):
    """Sign a JSON object from stdin as an unofficial, self-reported report.

    The output always carries official: false and trust: "self-reported":
    signing is not a way around the evaluator. With --verify, checks reports
    exactly like 'hills verify'.
    """
    from . import signing, verify

    if verify_paths:
        code = verify.render(verify.check(verify_paths))
        if code:
            raise SystemExit(code)
        return
    if sys.stdin.isatty():
        raise errors.UsageError("hills-sign reads a JSON object on stdin", hint="echo '{\"score\": 1}' | hills-sign")
    try:
        payload = signing.parse_report(sys.stdin.read(), "<stdin>")
    except errors.UsageError as exc:
        raise errors.UsageError(exc.message, hint=exc.hint or "hills-sign reads one JSON object on stdin: "
                                                               "echo '{\"score\": 1}' | hills-sign") from None
    emit(json.dumps(signing.self_reported(payload, state.load_key()), indent=2, ensure_ascii=False))


@main_group.group("chain", context_settings=CONTEXT, cls=HillsGroup)
def chain_group():
    """Append to, verify or show any HMAC-chained log file."""


@chain_group.command("append", context_settings=CONTEXT)
@click.argument("log_file", metavar="FILE")
def chain_append(log_file):
    """Append the JSON object on stdin to FILE as a new chained line."""
    from . import chain, signing

    record = signing.parse_report(sys.stdin.read(), "<stdin>")
    entry = chain.append(log_file, record, state.load_key())
    emit(json.dumps({"seq": entry["seq"], "mac": entry["mac"]}))


@chain_group.command("verify", context_settings=CONTEXT)
@click.argument("log_file", metavar="FILE")
@click.option("--head", "head_json", metavar="JSON", help="A {seq, mac} head kept elsewhere to check against.")
def chain_verify(log_file, head_json):
    """Verify every line of FILE; print where the chain breaks. Exits 1 if broken."""
    from . import chain

    head = None
    if head_json:
        try:
            head = json.loads(head_json)
        except ValueError as exc:
            raise errors.UsageError(f"--head: not valid JSON: {exc}")
    result = chain.verify(log_file, state.load_key(), head=head)
    _render_chain(log_file, result)
    if not result.ok:
        raise SystemExit(errors.EXIT_NO)


def _render_chain(log_file, result):
    if result.ok:
        emit(f"chain intact: {result.count} entr{'y' if result.count == 1 else 'ies'} in {log_file}")
        return
    emit(f"chain BROKEN at line {result.break_line} of {log_file}")
    for problem in result.problems:
        emit(f"  {problem}")


@chain_group.command("show", context_settings=CONTEXT)
@click.argument("log_file", metavar="FILE")
@json_option
def chain_show(log_file, as_json):
    """Print the entries of FILE, one per line (or as a JSON list)."""
    from . import chain

    entries = chain.read(log_file, state.load_key())
    if as_json:
        emit_json(entries)
        return
    for entry in entries:
        emit(json.dumps(entry, sort_keys=True, ensure_ascii=False))


@main_group.command("attempts", context_settings=CONTEXT)
@hill_argument
@click.option("--current", is_flag=True, help="Show the unofficial working-tree attempts instead.")
@click.option("--tree", "tree_hash", metavar="TREE", help="Show the attempts of another version of the hill.")
@json_option
def attempts_command(name, current, tree_hash, as_json):
    """Show a hill version's attempts, its best reports and its log's state.

    Lists every attempt in the version's log, the best passing report per
    comparable group, and whether the log's chain is intact (exactly where it
    breaks if not). Exits 1 when the chain is broken.
    """
    from . import attempts, hill

    target = hill.resolve(name)
    result = attempts.collect(target, current=current, tree_hash=tree_hash)
    if as_json:
        emit_json(result)
    else:
        attempts.render(result, emit)
    if not result["chain"]["ok"]:
        raise SystemExit(errors.EXIT_NO)


@main_group.command("rank", context_settings=CONTEXT)
@click.argument("reports", metavar="[REPORT...]", nargs=-1)
@click.option("-H", "--hill", "hill_name", metavar="NAME", help="Rank the reports logged for this hill's HEAD.")
@json_option
def rank_command(reports, hill_name, as_json):
    """Rank report files (or a hill's logged reports) within comparable groups.

    Verifies each report, groups by hill tree hash and primary config, and
    sorts lexicographically by the metrics, each in its own direction.
    INVALID, unofficial and non-passing reports are listed apart, never ranked.
    """
    from . import attempts, rank, signing

    items = []
    for path in reports:
        items.append((path, signing.load_report(path)))
    if hill_name:
        from . import hill

        target = hill.resolve(hill_name)
        items.extend(attempts.logged_reports(target))
    if not items:
        raise errors.UsageError("no reports to rank", hint="pass report files, or -H NAME for a hill's logged reports")
    result = rank.rank(items, state.load_key())
    if as_json:
        emit_json({"groups": [{**g, "entries": [{"position": e["position"], "source": e["source"],
                                                    "noise": e["noise"], "report": e["report"]}
                                                   for e in g["entries"]]}
                              for g in result["groups"]],
                   "apart": result["apart"]})
        return
    from .report import summary_line

    for group in result["groups"]:
        primary = "  ".join(f"{p['name']}={p['value']}" for p in group["primary"]) or "no primary config"
        emit(f"{group['hill']} @ {(group['tree_hash'] or '')[:12]}  [{primary}]")
        for entry in group["entries"]:
            report = entry["report"]
            noise = "  (within noise of the one above)" if entry["noise"] else ""
            emit(f"  {entry['position']:>3}. {summary_line(report)}  {(report.get('submission_hash') or '')[:19]}  "
                 f"{entry['source']}{noise}")
    if result["apart"]:
        emit("not ranked:")
        for entry in result["apart"]:
            emit(f"  {entry['source']}: {entry['reason']}")


@main_group.command("help", context_settings=CONTEXT)
@click.argument("words", metavar="[VERB [SUBCOMMAND]]", nargs=-1)
@click.option("-m", "--man", "force_man", is_flag=True,
              help="Open the man page even when standard output is not a terminal.")
@click.pass_context
def help_command(ctx, words, force_man):
    """Show the manual of a command, or of hills itself.

    In a terminal, opens the man page (hills-VERB(1), or hills(1) and
    git-hill(1) without a verb) when man finds it; otherwise, or when it
    does not, prints the same text as 'VERB --help' on stdout.
    """
    from . import manual

    code = manual.show(list(words), ctx.find_root(), force_man=force_man, echo=emit)
    if code:
        raise SystemExit(code)


COMMANDS = main_group.commands


def git_hill_group():
    """The same group under the name `git hill`."""
    return main_group


def _crash_log(exc):
    stamp = __import__("time").strftime("%Y%m%dT%H%M%S")
    path = os.path.join(state.home(), "logs", f"crash-{stamp}-{os.getpid()}.log")
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8", errors="backslashreplace") as handle:
            handle.write(f"hills {__version__}\nargv: {sys.argv!r}\n\n")
            handle.write("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
        return path
    except Exception:  # the crash log must never be a second crash
        return None


def _help_hint(command, argv, prog_name):
    """The hint of an error that brings none of its own: the help of the
    command that argv reached (`hills eval`, `hills chain verify`...)."""
    words = [prog_name]
    for arg in argv:
        if not isinstance(command, click.Group) or arg.startswith("-"):
            break
        command = command.commands.get(arg)
        if command is None:
            break
        words.append(arg)
    return f"see '{' '.join(words)} --help'"


def run(command, argv, prog_name):
    """Invoke a click command with the error funnel; return the exit code."""
    try:
        command.main(args=argv, prog_name=prog_name, standalone_mode=False)
        return errors.EXIT_OK
    except errors.HillsError as exc:
        say(f"error: {exc.message}")
        say(f"hint: {exc.hint or _help_hint(command, argv, prog_name)}")
        return exc.exit_code
    except click.exceptions.Abort:
        say("error: interrupted")
        return errors.EXIT_INTERRUPTED
    except click.UsageError as exc:
        message = exc.format_message().rstrip(".")
        say(f"error: {message[:1].lower() + message[1:]}")
        say(f"hint: see '{exc.ctx.command_path} --help'" if exc.ctx is not None
            else f"hint: {_help_hint(command, argv, prog_name)}")
        return errors.EXIT_USAGE
    except click.ClickException as exc:
        message = exc.format_message().rstrip(".")
        say(f"error: {message[:1].lower() + message[1:]}")
        say(f"hint: {_help_hint(command, argv, prog_name)}")
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:
        say("error: interrupted")
        return errors.EXIT_INTERRUPTED
    except BrokenPipeError:
        return errors.EXIT_OK
    except OSError as exc:
        # A read-only or full file system, or a file where a folder should
        # be: the user's to fix, named, not a bug.
        problem = state.write_problem(exc)
        if problem is None:
            return _bug(exc)
        say(f"error: {problem.message}")
        say(f"hint: {problem.hint}")
        return problem.exit_code
    except ModuleNotFoundError as exc:
        problem = errors.missing_dependency(exc)
        if problem is None:
            return _bug(exc)
        say(f"error: {problem.message}")
        say(f"hint: {problem.hint}")
        return problem.exit_code
    except Exception as exc:  # the one place a bug becomes a one-line message
        return _bug(exc)


def _bug(exc):
    """A bug: the traceback goes to a crash log, one line to the user."""
    path = _crash_log(exc)
    say(f"error: internal error in hills: {type(exc).__name__}: "
        + str(exc).encode("utf-8", "backslashreplace").decode("utf-8"))
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
    command, prog_name = entry_for(program)
    sys.exit(run(command, args, prog_name))
