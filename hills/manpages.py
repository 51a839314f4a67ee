"""Man pages generated from the click commands themselves (their help texts
and options) plus the OUTPUT, EXIT STATUS and EXAMPLES text below, and the
section-5 pages for hill.yaml, the lock files and the signed report.

    python -m hills.manpages [--check] [OUTDIR]
    python -m hills.manpages --install PREFIX

writes the pages into OUTDIR (the checkout's man/ by default); with --check
it writes nothing and exits 1 naming every page that is stale, missing or
no longer generated. The pages are never edited by hand. --install puts
them under PREFIX/share/man, where man finds them for PREFIX/bin on PATH.

The text blocks below use a small markup: paragraphs separated by blank
lines; a block indented by four spaces is shown verbatim; `code` is set in
bold; NAME(1) references are set in bold; a line followed by a line starting
with ": " is a term and its definition; lines starting with "- " are a
bulleted list; a line starting with "## " is a subsection title.
"""

import argparse
import inspect
import os
import re
import sys
import textwrap

import click

from . import __version__, cli, manifest, report

MANUAL = "Hills Manual"
SOURCE = f"hills {__version__}"
WIDTH = 78
SYNOPSIS_WIDTH = 70

HILL_ARGUMENT = """The hill: its name, looked up first in the nearest `.hills/` folder at or
above the current folder that holds a hill of that name, then in the machine
registry (see hills-list(1)); or the path of a hill folder (any argument
containing `/`). Two projects may each hold a hill of the same name: inside
either project its own is found; from elsewhere the name is ambiguous, and
the command exits 2 listing the candidates' paths, to be passed instead.
Same-named hills with the same tree hash are the same task and share their
attempts log and holdout budget; an approval (hills-pin(1)) belongs to one
folder. A name that matches no hill is answered with the closest ones."""

COMMON_EXIT = [
    (3, "an internal error, that is a bug in hills: one line on standard error "
        "names the file under `$HILLS_HOME/logs/` that holds the traceback"),
    (130, "interrupted (Ctrl-C)"),
]
USAGE_EXIT = "a usage error: an unknown option, a missing argument or a bad value"

# Per verb: text appended to the DESCRIPTION (after the command's own help),
# the ARGUMENTS' descriptions, OUTPUT, EXIT STATUS codes other than 3 and
# 130, EXAMPLES and SEE ALSO.
VERBS = {
    "new": {
        "arguments": {"name": """The name of the new hill: 1 to 63 lowercase letters, digits, `.`, `_` or
`-`, starting with a letter or a digit, never containing `..` and not ending
in `.` or `.lock`. A name is unique within a project's `.hills/`; another
project may hold a hill of the same name (see the NAME argument of
hills-check(1) for how a name is then found)."""},
        "more": """The template's `uv.lock` is written with `uv lock` while the hill is
created, so the network may be needed the first time a template's
dependencies are resolved.""",
        "output": """The absolute path of the new hill folder, one line, on standard output.
On standard error: the template and the version control folder, a hint
naming the next commands, and, the first time hills runs on a machine, a
line saying the machine state folder was created.""",
        "exit": [
            (0, "the hill was created"),
            (2, "the name is invalid, a hill of that name already exists in this project, "
                "or the template is unknown"),
            (4, "git or uv is missing, or `uv lock` failed on the template's dependencies"),
        ],
        "examples": """Create a hill from the circle-packing template:

    $ hills new circle-packing -t circle-packing
    /home/me/demo/.hills/circle-packing

Create one from the default template and change into it:

    $ cd "$(hills new my-task)\"""",
        "see_also": ["hills-examples(1)", "hills-check(1)", "hills-commit(1)", "hill.yaml(5)"],
    },
    "examples": {
        "output": """One line per template on standard output: its name and the description
from its `hill.yaml`. With `--json`, one JSON object mapping each template
name to its description.""",
        "exit": [(0, "always, unless the command is misused")],
        "examples": """    $ hills examples
    circle-packing  Pack n circles in the unit square without overlap, ...
    default         Submit a number in answer.txt; larger is better.""",
        "see_also": ["hills-new(1)"],
    },
    "check": {
        "arguments": {"name": HILL_ARGUMENT},
        "output": """One line per check on standard output, in order: its state (`ok`, `FAIL`
or `warn`), its name and a detail; then a blank line and `NAME: all checks
passed` or `NAME: N check(s) failed`. The checks are `manifest`, `layout`,
`readme`, `dependencies`, `environment` (shown only when the hill's
environment cannot be built), `evaluator contract` and `tests`. A failed
check stops the checks after it, which depend on it; `readme` fails while
`README.md` still holds the default template's note for the hill's author
(the task text is what the climber reads), and the checks go on after it.

With `--json`, one object: `{"hill", "passed", "checks": [{"check",
"status", "detail"}]}`.""",
        "exit": [
            (0, "every check passed"),
            (1, "a check failed"),
            (2, "no such hill"),
            (4, "uv cannot be found"),
        ],
        "examples": """    $ hills check circle-packing
      ok    manifest            circle-packing 0.1.0
      ok    layout              README.md, pyproject.toml, eval.py
      ok    dependencies        uv.lock is up to date
      ok    evaluator contract  eval(submission, final, n, tolerance) imports and binds
      ok    tests               8 passed, 0 failed in 0.13s

    circle-packing: all checks passed

Gate a script on the checks, without the hill's own tests:

    $ hills check my-task --no-tests >/dev/null && echo ready""",
        "see_also": ["hills-commit(1)", "hill.yaml(5)"],
    },
    "commit": {
        "arguments": {"name": HILL_ARGUMENT},
        "more": """A plain `git --git-dir=.vc --work-tree=. commit` in the hill folder is
gated the same way: the pre-commit hook installed by hills-new(1) runs the
same checks and regenerates the locks. When a lock changes, the hook rewrites
it and fails the commit, naming the lock file to stage; it never stages
anything itself.""",
        "output": """Two lines on standard output: the tree hash, which is the identity of the
new hill version, and the commit id. On standard error: one line per check
(as hills-check(1) prints them), the number of files and bytes in each lock,
and the hill's version with its tree hash and commit.""",
        "exit": [
            (0, "the commit was recorded"),
            (1, "a check failed, the hill is unchanged since its last commit, or another "
                "commit moved the hill meanwhile; nothing was recorded"),
            (2, "no such hill, an empty message, or a symbolic link in the hill or in `private/`"),
            (4, "git or uv failed"),
        ],
        "examples": """    $ hills commit circle-packing -m "initial"
    f48111974a00b3398edbcc5ec35f3616e52944b4
    b4f7c4d59b27025bcc3095f7b309a98cabab20ed

Keep the tree hash of the new version:

    $ tree=$(hills-commit my-task -m "more test cases" | head -n 1)""",
        "see_also": ["hills-check(1)", "hills-status(1)", "hills-log(1)", "hill.yaml(5)", "hills-lock(5)"],
    },
    "status": {
        "arguments": {"name": HILL_ARGUMENT},
        "output": """On standard output, a first line `hill 'NAME' at COMMIT` (12 hex digits)
or `hill 'NAME': no commits yet`; then `nothing changed since the last
commit`, or one line per change. Files of the git tree are `added`,
`modified`, `deleted` or `now a blob`; files under `private/` and blobs are
`added`, `changed` or `removed`, and a symbolic link under `private/` is
`symlink`, followed by the lock they belong to. A hill with no commits yet
lists every file as `added`.

With `--json`, one object: `{"hill", "head", "files", "private", "blobs"}`,
where `head` is the commit id or null and each list holds `[change, path]`
pairs.""",
        "exit": [
            (0, "the status was shown; with `--exit-code`, nothing changed since the last commit"),
            (1, "with `--exit-code`: something changed since the last commit, a file of the tree "
                "or lock drift (the hill has no commits yet counts as changed)"),
            (2, "no such hill, or a symbolic link in the hill outside `private/`"),
            (4, "git failed"),
        ],
        "examples": """    $ hills status circle-packing
    hill 'circle-packing' at b4f7c4d59b27
      modified   eval.py
      added      private/holdout.json  (private.lock)

Commit only when something changed:

    $ hills status my-task --exit-code >/dev/null || hills commit my-task -m "retune\"""",
        "see_also": ["hills-commit(1)", "hills-log(1)", "hills-lock(5)"],
    },
    "log": {
        "arguments": {"name": HILL_ARGUMENT},
        "output": """On standard output, a header line `TREE COMMIT DATE EVALS MESSAGE`, then
one line per version, newest first: the tree hash and the commit id (12 hex
digits each), the commit date (ISO 8601), the number of official
evaluations recorded in the notes of that commit, and the first line of the
commit message. Before the first commit: `hill 'NAME': no commits yet`.

With `--json`, a list of `{"commit", "tree_hash", "date", "message",
"evals"}`, newest first (empty before the first commit).""",
        "exit": [(0, "the versions were listed"), (2, "no such hill"), (4, "git failed")],
        "examples": """    $ hills log circle-packing
    TREE          COMMIT        DATE                       EVALS  MESSAGE
    f48111974a00  b4f7c4d59b27  2026-11-30T02:22:36+00:00      1  initial

The full tree hash of the newest version:

    $ hills log circle-packing --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["tree_hash"])'""",
        "see_also": ["hills-commit(1)", "hills-attempts(1)"],
    },
    "describe": {
        "arguments": {"name": HILL_ARGUMENT},
        "more": """It reads the hill's working files, so it also describes a hill that was
never committed; the title says which tree hash HEAD has.""",
        "output": """Markdown on standard output: a title with the hill's name, version and
tree hash (or `not committed yet`), its description, then the sections
`Submission contract` (with, when the hill declares frozen unit tests,
their command and where the climber's disposable copy of them is: the
hill's own working folder, which only `--current` evaluations read), `Params`
(type, bounds or choices, default, and whether the param is primary),
`Metrics` (name and direction) and `Task`, which is the hill's `README.md`.

With `--json`, one object with the keys `hill`, `version`, `description`,
`tree_hash`, `path`, `evaluator`, `params`, `metrics`, `timeout`,
`replicates`, `final_budget`, `examples`, `submission` (with a
`unit_tests` entry when the hill has frozen unit tests) and `readme`.""",
        "exit": [
            (0, "the hill was described"),
            (2, "no such hill, an invalid `hill.yaml`, or no `README.md`"),
        ],
        "examples": """Hand the task to a climber:

    $ hills describe circle-packing > TASK.md""",
        "see_also": ["hills-eval(1)", "hill.yaml(5)"],
    },
    "list": {
        "output": """One line per registered hill on standard output, sorted by name (hills
of the same name in the order they were registered): the
name, the tree hash of its last commit (12 hex digits) or `uncommitted`, its
path, and `(missing)` when that folder no longer holds a hill. With no hills
registered, a hint on standard error and nothing on standard output.

With `--json`, a list of `{"name", "path", "tree_hash", "exists"}`.""",
        "exit": [(0, "the hills were listed"), (4, "the registry is not valid JSON, or not of its shape")],
        "examples": """    $ hills list
    circle-packing  f48111974a00  /home/me/demo/.hills/circle-packing""",
        "see_also": ["hills-new(1)", "hills-home(1)"],
    },
    "home": {
        "output": """The absolute path of the machine state folder, one line on standard
output: `$HILLS_HOME` when set, else `~/.autolab/hills`. The folder is not
created; hills(1) lists what it holds.""",
        "exit": [(0, "always, unless the command is misused")],
        "examples": """    $ ls "$(hills home)"
    envs  key  locks  registry.json  runs  state""",
        "see_also": ["hills(1)", "hills-list(1)"],
    },
    "eval": {
        "arguments": {"submission": """The submission folder. It is copied into a fresh run folder and hashed
(paths, modes and contents) before the evaluator starts. A top-level `.git`
folder is neither copied nor hashed; its branch, commit and dirty state are
recorded as `submission_git`. A symbolic link that leads outside the folder
is refused."""},
        "more": """NAME in `-H` is found as in the other commands: in the nearest `.hills/`
folder, then in the machine registry, or as a path. The report is official
unless `--current` is given; with `--force` it stays official and carries
`forced: true`. With `--final`, an official evaluation counts against the
`final.budget` of hill.yaml(5) for this hill version; once the budget is
spent, `--final` is refused.

The evaluator runs in the hill's own uv environment, with only `PATH`,
`HOME`, the locale, `TMPDIR`, `TERM`, the user name and the GPU visibility
variables of the caller's environment, plus `HILLS_PYTHON`,
`HILLS_SUBMISSION`, `HILLS_SPLIT` (`validation`, or `holdout` with
`--final`), `HILLS_REPLICATE_SEED`, `HILLS_PARAMS` when there are knob
values, and a `PYTHONPATH` holding the small `hills` package that submitted
code imports (`from hills import spaces`). A command-shape evaluator gets
more; hill.yaml(5) describes that contract under COMMAND EVALUATORS. The
watchdog is the `timeout` of hill.yaml(5): when it fires, every process the
evaluator started is killed. The newest 20 run folders of each hill are kept
under `$HILLS_HOME/runs/`.

## Replicates

`--repeat N`, or `replicates` in hill.yaml(5) when `--repeat` is not given,
runs the evaluator N times, with `HILLS_REPLICATE_SEED` set to 0, 1, ...
N-1, each time on a fresh copy of the submission snapshot (folders
`submission-0`, `submission-1`, ... of the run folder; with one replicate,
`submission`). It stops at the first replicate that does not pass. The
report's metrics, instances and side metrics are the per-key medians over
the replicates that completed, `spread` gives each metric's minimum,
maximum and median absolute deviation, and the report block is the one of
the replicate whose first metric is nearest the median. hills-rank(1) and
hills-attempts(1) mark a lead no larger than the range of the spread as
noise.

## Frozen unit tests

When hill.yaml(5) declares `unit_tests`, they run once, right after the
first replicate passes, from the hill version's frozen copy in the run
folder (the hill's working folder only with `--current`), against that
replicate's snapshot. The status is then `passing` if they exit 0, `failing` if they
exit otherwise, `buggy` if they time out; only a passing suite lets the
other replicates run.

## Knobs

A submission may declare knobs in a `params.json` at its top level (the
format is in hills-tune(1)). `-k NAME=VALUE` sets one for this evaluation:
VALUE is read as JSON (`3`, `0.5`, `true`, `"text"`) and otherwise taken as
text, then checked against the declaration; a value of the wrong type,
outside `low`..`high` or not among the `choices` is refused with the
allowed range. Without `-k`, the declared defaults are the values. The
values reach submitted code as `HILLS_PARAMS` (JSON) and through
`spaces.params()`, and the report records them as `trial`. A `params.json`
that is not a valid declaration is not fatal: the submission runs with no
values set, so its code falls back on its own defaults, and the report
carries a warning saying why; `-k` is then refused.""",
        "output": """The signed report, indented JSON, on standard output (one line with
`--json`); hills-report(5) describes its fields. `--output` writes the same
text to FILE. On standard error, unless `--json`: the hill and its tree, the
submission and its hash, the params, the verdict (`PASSED`, `FAILED` or
`BUGGY`) with the metrics, the spread of each metric over the replicates,
the knob values, whether the frozen unit tests passed, any warning, the
config (primary entries marked `*`), the reason when it did not pass, and a
note when the report is forced or unofficial. With `--verbose`, the evaluator's own output is streamed to
standard error as well; it is always kept in `stdout.log` and `stderr.log`
in the run folder.

A refused evaluation (private data or a blob that no longer matches its
lock, a symbolic link leaving the submission, a submission holding
`problem` or `data` for a command evaluator, an environment that cannot be
built) prints its report too, with status `refused` (written to FILE as
well with `--output`); the error goes to standard error, with no summary.
An interrupted evaluation prints its report the same way, with status
`interrupted`. An internal error during the run is logged as `buggy`
before hills exits 3. A refusal before the run folder exists (no such
hill, a dirty hill, a bad param or knob, a spent holdout budget, a broken
attempts log, `--final` with `--current` on a hill with a holdout budget)
prints no report and is not logged.
Every report, refused and interrupted ones included,
is signed and appended to the attempts log of the hill version, and an
official one is also added to the git notes of the hill commit.""",
        "exit": [
            (0, "the submission passed (status `passing`)"),
            (1, "the submission did not pass: status `failing` (the evaluator said so, or the "
                "frozen unit tests failed) or `buggy` (the report is printed), or the submission "
                "itself was refused: a symbolic link leaves it, or a command-shape submission "
                "holds `problem` or `data`; also "
                "when the private data or a blob changed while the evaluator ran (the score is "
                "void, the report says `refused`, and the next evaluation exits 5)"),
            (2, "no such hill, DIR is not a folder, an unknown param or a value of the wrong "
                "type or out of bounds, `--repeat` below 1, a knob refused (not declared, "
                "out of its range, or no valid `params.json`), `--current` with `--force`, "
                "or the folder of FILE does not exist"),
            (5, "the evaluation was refused before scoring, for a reason on the hill's side that "
                "no other submission would get past: the hill has uncommitted changes (without "
                "`--force` or `--current`) or no commit yet, its private data or a blob no longer "
                "matches the locks (the `refused` report is printed and logged), the holdout "
                "budget is spent, `--final` with `--current` on a hill with a holdout budget, or "
                "the attempts log is broken"),
            (4, "git or uv failed (for example while building the hill's environment), or "
                "the hill's `exclusive` resource is busy and `--queue` was not given"),
            (130, "interrupted: Ctrl-C, or SIGTERM or SIGHUP while the evaluator runs; the "
                  "report with status `interrupted` is logged"),
        ],
        "examples": """Score the example submission and keep the report:

    $ cp -r .hills/circle-packing/examples/grid my-packing
    $ hills eval my-packing -H circle-packing -o report.json >/dev/null

Try another param value, appending the one-line report to a file:

    $ hills eval my-packing -H circle-packing -p n=30 --json >> reports.jsonl

Five replicates, to see how noisy a score is; then one knob changed:

    $ hills eval my-packing -H circle-packing --repeat 5 -o five.json
    $ hills eval ./candidate -H my-task -k restarts=16 -k init=random

Use the exit status in a loop: 1 is a verdict on the candidate; 5 (no
candidate can be scored until the hill is fixed), 4 and 2 stop the loop:

    $ hills-eval ./candidate -H my-task --json > report.json
    $ case $? in 0) echo passed ;; 1) echo "try another" ;; *) exit 1 ;; esac""",
        "see_also": ["hills-report(5)", "hills-verify(1)", "hills-show(1)", "hills-attempts(1)",
                     "hills-rank(1)", "hills-tune(1)", "hill.yaml(5)", "hills-lock(5)"],
    },
    "verify": {
        "arguments": {"reports": "Report files to check; `-` reads one report from standard input."},
        "more": """The signatures are checked with this machine's key: a report made on
another machine is INVALID here. Checking never creates anything: on a
machine with no key yet (no machine state at all), every report is INVALID
with `no machine key to check it with`, and the machine state folder is
still absent afterwards.""",
        "output": """For each report, on standard output: `signature valid: HILL @ TREE`
(12 hex digits, or `working tree`; for an object signed by hills-sign(1),
`self-reported object (hills-sign)`, with `, naming hill 'HILL'` when it
names one) followed by the verdict with its metrics
and a line `signed TIMESTAMP by hills VERSION`, which ends with
`[unofficial: REASON]` for an unofficial report; or one line `signature
INVALID: ...` saying why: the report was edited or signed on another
machine, or it carries no signature. With several reports, each first line
ends with the file name in parentheses. A file that cannot be read as a JSON
object gets no verdict but an `error: ...` line on standard error; the other
reports are still checked.""",
        "exit": [
            (0, "every signature is valid"),
            (1, "a report is INVALID"),
            (2, "no report given, or a file that is missing, unreadable or not a JSON object"),
            (4, "the machine key is damaged"),
        ],
        "examples": """    $ hills verify report.json
    signature valid: circle-packing @ f48111974a00
      PASSED   sum_radii=2.54142 (max)
      signed 2026-11-30T02:22:37Z by hills 0.1.0

    $ hills eval my-packing -H circle-packing --json | hills verify -""",
        "see_also": ["hills-report(5)", "hills-sign(1)", "hills-rank(1)"],
    },
    "sign": {
        "output": """The signed object, indented JSON, on standard output: the input's keys
with any `signature` it carried dropped, `official` set to false, `trust` to
`"self-reported"`, `official_reason` to `"signed by hills-sign, not produced
by an evaluator"`, `timestamp` added when missing, and a new `signature`.
With `--verify`, the output of hills-verify(1).""",
        "exit": [
            (0, "the object was signed (with `--verify`: every signature is valid)"),
            (1, "with `--verify`, a report is INVALID"),
            (2, "standard input is a terminal, or not one JSON object: invalid JSON, "
                "duplicate keys, NaN or an infinite number; with `--verify`, a file that "
                "cannot be read as a report"),
            (4, "the machine key is damaged"),
        ],
        "examples": """    $ echo '{"score": 0.93, "note": "my own run"}' | hills-sign > claim.json
    $ hills-sign --verify claim.json""",
        "see_also": ["hills-verify(1)", "hills-report(5)"],
    },
    "chain": {
        "arguments": {"log_file": """The log file. A missing file is an empty chain; `append` creates it and
its folder."""},
        "more": """Beside FILE, `append` keeps `FILE.head`, the newest seq and mac signed with
the machine key, which `verify` uses to notice a tail cut off cleanly, and
`FILE.lock`, the lock every append holds, so concurrent writers never break
the chain. The line format is in hills-report(5); the attempts logs of
hills-eval(1) are such logs.""",
        "output": """append
: One line of JSON on standard output, `{"seq": N, "mac": "hmac-sha256:..."}`:
  the new entry's position and MAC, which `verify --head` can check later.

verify
: On standard output, `chain intact: N entries in FILE`, or `chain BROKEN at
  line N of FILE` followed by one indented line per problem: a line edited,
  deleted, moved or repeated, a truncated last line, lines missing at the
  end.

show
: Each entry as one line of JSON with sorted keys, `seq`, `prev` and `mac`
  included. An entry whose line fails a check carries `_problem`; a line that
  is not JSON shows as `{"_line", "_error"}`. With `--json`, a list of the same
  objects.""",
        "exit": [
            (0, "appended; the chain is intact; the entries were shown (`show` also "
                "exits 0 for a broken chain, whose lines it marks)"),
            (1, "`verify` found the chain broken, or `append` refused to extend a broken "
                "log: a truncated or edited last line, or a head file that does not match"),
            (2, "standard input is not one JSON object, a record uses the reserved fields "
                "`seq`, `prev` or `mac`, or `--head` is not a JSON `{seq, mac}`"),
            (4, "the machine key is damaged"),
        ],
        "examples": """    $ echo '{"step": 1, "loss": 0.25}' | hills-chain append train.jsonl
    {"seq": 0, "mac": "hmac-sha256:ea25e880ff7a..."}
    $ hills-chain verify train.jsonl
    chain intact: 1 entry in train.jsonl

Check against a head kept elsewhere, so a log rewritten from scratch is
noticed too:

    $ hills-chain verify train.jsonl --head '{"seq": 0, "mac": "hmac-sha256:ea25e880ff7a..."}'""",
        "see_also": ["hills-attempts(1)", "hills-report(5)"],
    },
    "attempts": {
        "arguments": {"name": HILL_ARGUMENT},
        "output": """On standard output: `HILL @ TREE: N attempt(s)`; when there are any, a
header line `SEQ TIMESTAMP SUBMISSION RESULT` and one line per attempt in
log order with its seq, timestamp, the start of the submission hash, the
verdict (`PASSED`, `FAILED`, `BUGGY`, `REFUSED` or `INTERRUPTED`) and
metrics, `(unofficial)` when it applies and the reason when it did not
pass; then
`best:` and the top report of each comparable group (see hills-rank(1)),
ending in `; its lead over the runner-up is within the replicate spread:
noise` when the gap to the second report is no larger than the range
(maximum minus minimum) of either one's first metric over its replicates;
then `chain intact: N entries`, or `chain BROKEN at line N of LOG` with one
line per problem. The log is also checked against the newest seq and mac
kept in the hill's git notes, so a tail cut off the log is reported.

With `--json`, one object: `{"hill", "tree_hash", "log", "attempts": [{"seq",
"line", "report"}], "best": [{"primary", "source", "report", "candidates",
"noise"}],
"chain": {"ok", "count", "problems", "break_line"}}`.""",
        "exit": [
            (0, "the chain is intact"),
            (1, "the chain is broken"),
            (2, "no such hill"),
            (4, "git failed"),
        ],
        "examples": """    $ hills attempts circle-packing
    circle-packing @ f48111974a00: 1 attempt(s)
       SEQ  TIMESTAMP             SUBMISSION           RESULT
         0  2026-11-30T02:22:37Z  blake3:d02050616c5f  PASSED   sum_radii=2.54142 (max)
    best:
      [n=26  mode=validation] seq 0: PASSED   sum_radii=2.54142 (max) (of 1 passing)
    chain intact: 1 entry""",
        "see_also": ["hills-eval(1)", "hills-rank(1)", "hills-chain(1)", "hills-report(5)"],
    },
    "rank": {
        "arguments": {"reports": "Report files to rank; `-` reads one report from standard input."},
        "more": """Reports compare only within a group: the same hill, the same tree hash
and the same values of the primary config entries. Inside a group they sort
by the first metric of the group's first report, in its direction, ties
broken by the next metric; a report that lacks a metric sorts after those
that have it.""",
        "output": """For each comparable group, on standard output: `HILL @ TREE  [PRIMARY]`
(the primary config values, or `no primary config`), then its reports best
first: the position, the verdict and metrics, the start of the submission
hash, where the report came from (its file name, or `HILL seq N` for a
logged report), and `(within noise of the one above)` when its gap to the
report above it is no larger than the range (maximum minus minimum) of
either one's first metric over its replicates: their order is noise. Then `not ranked:` and one line per report left out, with
the reason: an INVALID signature, an unofficial report, or a status other
than `passing`.

With `--json`, one object: `{"groups": [{"hill", "tree_hash", "primary",
"metric_order", "entries": [{"position", "source", "noise", "report"}]}], "apart":
[{"source", "report", "reason"}]}`.""",
        "exit": [
            (0, "the reports were ranked, even when some were left out"),
            (2, "no reports (no file and no `-H`), a report file that is missing, "
                "unreadable or not a JSON object, or no such hill"),
            (4, "git failed"),
        ],
        "examples": """    $ hills rank -H circle-packing
    circle-packing @ f48111974a00  [n=26  mode=validation]
        1. PASSED   sum_radii=2.54142 (max)  blake3:d02050616c5f  circle-packing seq 0

    $ hills rank reports/*.json --json > ranking.json""",
        "see_also": ["hills-attempts(1)", "hills-verify(1)", "hills-report(5)"],
    },
    "show": {
        "arguments": {"report_path": "The report file; `-` reads one report from standard input."},
        "more": """Nothing is recomputed: the report is shown as it was signed. The
signature is checked with this machine's key, as hills-verify(1) does.""",
        "output": """On standard output: `signature valid`, or `signature INVALID (WHY)`;
then `HILL @ TREE` (12 hex digits, or `working tree`), or `self-reported
object (hills-sign)` for an object signed by hills-sign(1), with the
timestamp and, for an unofficial report, why. Then indented lines: `status` (the verdict
and metrics), `reason` when it did not pass, `submission` (its hash), `git`
(the submission's branch and commit), `params`, `trial` (the knob values),
`warning` lines, and `config` (primary entries marked `*`, and `(* =
primary)` when there are any).

Then, when present: `metrics:`, one line per metric with its value and
direction and, after replicates, `spread min X max Y MAD Z over N`; `side
metrics (recorded, not ranked):`; `unit tests:` and whether they passed;
`report:` (marked self-reported, or with the replicate it was taken from)
with its `overall` values, the segments of `zones` sorted worst first (by
their `score`, lowest first when the first metric is maximised, highest
first when it is minimised) under `by LABEL (worst first):`, where LABEL is
the block's `segment_label`, the rows of `horizons`, `quantiles` and
`worst_origins` (20 at most each), and any other key of the block; and
`instances (N, worst first):` with the 50 worst instances in the same
order.""",
        "exit": [
            (0, "the signature is valid"),
            (1, "the signature is INVALID (the report is shown anyway, marked so)"),
            (2, "the file is missing, unreadable or not a JSON object"),
            (4, "the machine key is damaged"),
        ],
        "examples": """    $ hills eval ./candidate -H my-task --repeat 5 -o report.json >/dev/null
    $ hills show report.json
    signature valid
    my-task @ 3f2c0a9e51d7  2026-11-30T02:43:52Z
      status       PASSED   score=3 (max)
      submission   blake3:baeff2c099ddab8f...
      config       mode=validation*   (* = primary)
    metrics:
      score                           3  (max)  spread min 1 max 5 MAD 1 over 5
    report (from replicate 1, the one nearest the median):
      by case (worst first):
        bad                score=2
        good               score=10
    instances (2, worst first):
      a                               2
      b                               8""",
        "see_also": ["hills-verify(1)", "hills-eval(1)", "hills-report(5)"],
    },
    "tune": {
        "arguments": {"submission": """The submission folder. It must hold a valid `params.json` declaring its
knobs; the best values found are written beside it, as
`DIR.best-params.json`."""},
        "more": """## params.json

A submission declares its knobs in a `params.json` at its top level: a JSON
object mapping each knob's name to its space, one of

    {"type": "int", "low": 1, "high": 64, "log": true, "default": 8}
    {"type": "float", "low": 0.0001, "high": 0.1, "log": true, "default": 0.01}
    {"type": "int", "low": 0, "high": 10, "step": 2, "default": 4}
    {"type": "categorical", "choices": ["grid", "random"], "default": "grid"}

`low` and `high` are required for `int` and `float` (integers for `int`),
with `low` not above `high`; `log` (default false) samples on a log scale
and needs `low` above 0; `step` (a positive number, an integer for `int`)
puts the values on the grid `low`, `low + step`, ... and cannot be combined
with `log`; `choices` is a non-empty list. Every knob needs a `default`
inside its space. Submitted code reads the values of the current trial with

    from hills import spaces
    P = spaces.params()

which returns the trial's values, or the declared defaults outside a trial.
hills puts this module on the `PYTHONPATH` of every evaluation, so it
imports inside the hill's environment, where hills is not installed.
A `params.json` larger than 256 KiB or nested deeper than 32 levels is
refused unparsed, like any malformed one.

## Trials

Trial 0 uses the declared defaults. The `random` tuner then draws each knob
uniformly (log-uniformly with `log`, on the grid with `step`); `optuna`
uses optuna's TPE sampler, told each trial's first metric in its
direction, and needs the optional `hills[optuna]` extra. Trials run K at a
time with `--parallel K`, each as its own `hills eval DIR -H NAME -k ...`
process, so each is an ordinary evaluation: signed, appended to the hill
version's attempts log and carrying its values as `trial`. The
candidate's score is its best passing trial, ranked as hills-rank(1) ranks
reports.""",
        "output": """On standard error, one line per trial as it finishes: its number, its
status, its metrics (or the reason it has none) and its knob values. On
standard output: `best trial N:` with its metrics, `knobs` with its values,
and `written to PATH`, the file holding those values as a JSON object; or
`no trial passed`.

With `--json`, one object: `{"hill", "submission", "tuner", "budget",
"trials": [{"trial", "knobs", "status", "metrics", "reason", "run_id"}],
"best": {"trial", "knobs", "metrics", "run_id", "report"}, "best_params_file"}`,
where `best` and `best_params_file` are null when no trial passed.""",
        "exit": [
            (0, "at least one trial passed; the best values were written"),
            (1, "no trial passed (a trial whose evaluation was refused, for example for a "
                "bad `-p` value, counts as not passed)"),
            (2, "no such hill, DIR is not a folder, it has no valid `params.json`, or "
                "`--budget` or `--parallel` below 1"),
            (4, "`--tuner optuna` without optuna installed (no trial is run), or git or uv failed"),
            (5, "the first trial's evaluation was refused before scoring (see hills-eval(1), exit "
                "status 5: uncommitted changes, lock drift...); no other trial is run. A later "
                "trial refused that way counts as not passed"),
        ],
        "examples": """Spend 20 evaluations, four at a time:

    $ hills tune ./candidate -H my-task --budget 20 --parallel 4
    best trial 7: score=0.912 (max)
      knobs  restarts=16  init=random
      written to /home/me/demo/candidate.best-params.json

Score those values again, with replicates:

    $ hills eval ./candidate -H my-task --repeat 5 -k restarts=16 -k init=random""",
        "see_also": ["hills-eval(1)", "hills-attempts(1)", "hills-rank(1)", "hills-report(5)"],
    },
    "pin": {
        "arguments": {"name": HILL_ARGUMENT,
                      "tree": """The tree hash to approve: all 40 hex digits, or at least 4 of them as
hills-log(1) prints them. The tree of HEAD when omitted."""},
        "more": """The approval is kept in the machine registry with an HMAC made with the
machine key; a record edited by other means makes every evaluation of the
hill unofficial until a version is approved again. Without an approval,
every committed version scores officially.""",
        "output": """The full approved tree hash, one line, on standard output, and a line
on standard error saying evaluations of other versions are unofficial. With
`--clear`, nothing on standard output and one line on standard error.""",
        "exit": [
            (0, "the version was approved, or the approval cleared"),
            (1, "the hill has no commits yet"),
            (2, "no such hill, TREE is not a tree of the hill, or `--clear` with a TREE"),
            (4, "the machine key or registry is damaged"),
        ],
        "examples": """Approve the version a person reviewed, then see a later edit score unofficially:

    $ hills pin my-task
    f48111974a00b3398edbcc5ec35f3616e52944b4
    $ hills pin my-task --clear""",
        "see_also": ["hills-log(1)", "hills-eval(1)", "hills-report(5)"],
    },
    "help": {
        "arguments": {"words": """The command: a verb, or `chain` and one of its subcommands. Without
it, the manual of hills itself: hills(1), or git-hill(1) when called as
`git hill help`."""},
        "more": """The page is looked up the way man(1) looks it up: on `MANPATH`, or, when
`MANPATH` is unset, in `../share/man` beside each folder on `PATH`. Putting
the `bin/` folder of the environment hills is installed in on `PATH`
(`.venv/bin` in a checkout) is enough. When man finds no page there and
hills runs from a checkout, the page is read from the checkout's `man/`
folder. Standard output that is not a terminal (a pipe, a file, an agent's
shell) gets the `--help` text, which is the same on every machine, unless
`--man` is given.

`git hill --help` never reaches hills: git turns it into `git help hill`,
which opens git-hill(1) with man. `git hill help` is this command.""",
        "output": """In a terminal, the man page, through man's pager. Otherwise (or when no
page is found) the text `VERB --help` prints, on standard output; with
`--man`, the page as man renders it for a pipe. Errors go to standard
error.""",
        "exit": [
            (0, "the manual was shown"),
            (2, "the words name no command (the hint names the closest verbs), or "
                "`--man` for an internal command, which has no page"),
            (4, "with `--man`: man is not installed, finds no page, or fails"),
        ],
        "examples": """The page of one verb, and the short help of a chain subcommand in a script:

    $ hills help eval
    $ hills help chain verify | head -3
    Usage: hills chain verify [OPTIONS] FILE

Through git, and the same page rendered as plain text:

    $ git hill help eval
    $ MANPAGER=cat hills help --man eval""",
        "see_also": ["hills(1)", "git-hill(1)", "man(1)", "git-help(1)"],
    },
}

MAIN = {
    "more": """The same commands answer to three kinds of names: `hills VERB`, `git hill
VERB` (git runs the `git-hill` executable, see git-hill(1)), and the
standalone `hills-commit`, `hills-eval`, `hills-sign` and `hills-chain`,
which are `hills commit`, `hills eval`, `hills sign` and `hills chain`. Each
is one command with one set of options, one output and one exit status,
whatever the name it is called by.

`hills hook pre-commit` is internal: it is what the pre-commit hook in each
hill's `.vc/hooks/` runs, so that a plain git commit in a hill is gated like
hills-commit(1).""",
    "output": """What other programs read goes to standard output: JSON reports, ids,
paths, tables. Human summaries, progress, errors and hints go to standard
error, git style: `error: ...` and `hint: ...`. Commands that print a table
take `--json` for a machine-readable form. A user mistake never shows a
traceback.""",
    "exit": [
        (0, "success"),
        (1, "a clear no: a failed check, a submission that did not pass or was refused, an "
            "INVALID signature, a broken chain"),
        (2, "a usage error: an unknown option or command, a bad argument, a file or hill "
            "that does not exist, or no command at all (the help is printed on standard output)"),
        (3, "an internal error, that is a bug in hills: the traceback is saved under "
            "`$HILLS_HOME/logs/` and one line on standard error names the file"),
        (4, "an environment problem: git or uv missing or failing, a busy exclusive "
            "resource, a damaged machine key or registry, or a folder hills must write that "
            "cannot be written: read-only, not the user's, a file where a folder should be "
            "(`HILLS_HOME` included), or on a full disk; the error names the path, and "
            "nothing is left half-written"),
        (5, "an evaluation refused before scoring for a reason on the hill's side: "
            "uncommitted changes, no commit yet, lock drift, a spent holdout budget, a "
            "broken attempts log (see hills-eval(1)); a loop stops here rather than count "
            "a failed candidate"),
        (130, "interrupted (Ctrl-C)"),
    ],
    "environment": """HILLS_HOME
: The machine state folder; `~/.autolab/hills` when unset.

HILLS_UV
: The uv executable to use instead of the one installed with hills or found
  on `PATH`.

HILLS_PYTHON_BASE
: The Python interpreter hill environments are built on; the one running
  hills when unset. uv never downloads an interpreter.

GIT_AUTHOR_NAME, GIT_AUTHOR_EMAIL, GIT_COMMITTER_NAME, GIT_COMMITTER_EMAIL
: The identity of commits made by hills-commit(1); `hills <hills@localhost>`
  when unset. Other `GIT_*` variables are ignored: hills only ever works on
  each hill's own `.vc` folder.""",
    "files": """.hills/NAME/
: A hill: `hill.yaml` (see hill.yaml(5)), `README.md`, the evaluator,
  `pyproject.toml` and `uv.lock`, `examples/`, `tests/`, `private/` (held-out
  data, never in git), `private.lock` and `blobs.lock` (see hills-lock(5)),
  and `.vc/`, the hill's own git folder. `.hills/.gitignore` holds `*`, so
  the folder hides itself from the project's git.

$HILLS_HOME/key
: The machine key (mode 0600), created on first use; it signs every report
  and log line.

$HILLS_HOME/registry.json
: The hills of this machine: under each name, every folder holding a hill
  of that name, with its last tree hash and its approval (hills-pin(1)).

$HILLS_HOME/state/NAME@TREE/attempts.jsonl
: The attempts log of a hill version, shared by same-named hills with that
  tree (`NAME@current-DIGEST`, one per hill folder, for `--current`
  evaluations); see hills-report(5).

$HILLS_HOME/runs/NAME/
: Run folders of recent evaluations: the hill and submission snapshots,
  `stdout.log`, `stderr.log` and `report.json`.

$HILLS_HOME/envs/NAME/
: The hill's uv environments, one per committed tree.

$HILLS_HOME/sdk/
: The small `hills` package (`spaces`, `sdk`) put on the `PYTHONPATH` of
  evaluators and submitted code, one folder per hills build.

$HILLS_HOME/cache/stat/
: The stat caches of the lock files; see hills-lock(5).

$HILLS_HOME/logs/
: Tracebacks of internal errors.""",
    "examples": """The whole loop, from a new hill to a verified score:

    $ hills new circle-packing -t circle-packing
    $ hills check circle-packing
    $ hills commit circle-packing -m "initial"
    $ cp -r .hills/circle-packing/examples/grid my-packing
    $ hills eval my-packing -H circle-packing > report.json
    $ hills verify report.json
    $ hills attempts circle-packing""",
    "see_also": ["git-hill(1)", "hill.yaml(5)", "hills-lock(5)", "hills-report(5)", "git(1)"],
}

GIT_HILL = {
    "help": """`-h` prints the usage and the list of verbs. `--help` is answered by git,
which opens this page (run as `git-hill --help`, it prints what `-h` prints).""",
    "description": """`git-hill` is the hills executable under another name: when `git hill`
is typed, git runs the first `git-hill` it finds on `PATH`. Every `git hill
VERB` is `hills VERB`, the same command with the same options, output and
exit status; only the program name in usage messages differs. So hills can
be called from git aliases and from scripts that already speak git.

`git hill --help` is answered by git itself, which opens this page with
man(1), so the page must be on the manual path: installed beside the
`git-hill` on `PATH` (`make` puts a checkout's pages in `.venv/share/man`)
or in `MANPATH`. `git hill -h` prints the list of verbs and `git hill VERB
--help` the help of one verb; in a terminal, `git hill help` opens this page
and `git hill help VERB` hills-VERB(1), the verb's full page (see
hills-help(1)).

A git repository is not needed: hills finds hills through `.hills/` folders
and the machine registry, and ignores the `GIT_DIR` and other `GIT_*`
variables git may pass on.""",
    "examples": """    $ git hill eval my-packing -H circle-packing > report.json
    $ git hill verify report.json

A git alias:

    $ git config --global alias.score 'hill eval'
    $ git score my-packing -H circle-packing""",
    "see_also": ["hills(1)", "git(1)"],
}

# Report envelope fields, in the order hills eval writes them.
REPORT_FIELDS = {
    "hill": ("string", "The hill's name."),
    "tree_hash": ("string or null", """The git tree hash of the hill version that scored the
submission (40 hex digits): the hill's identity. Null for a `--current`
evaluation of the working tree."""),
    "commit": ("string or null", "The hill commit that was scored; null with `--current`."),
    "submission_hash": ("string or null", """`blake3:` and 64 hex digits over the submission's
paths, modes and contents (one record per file or link, sorted by path).
Null when the evaluation stopped before the submission was read."""),
    "submission_git": ("object or null", """When the submission folder is in a git checkout:
`ref` (`BRANCH@COMMIT`) and `dirty` (boolean). Null otherwise."""),
    "passed": ("boolean", "True exactly when `status` is `passing`."),
    "status": ("string", "One of the statuses below."),
    "reason": ("string or null", """Why the submission did not pass: the evaluator's
`details.reason` for `failing`, the crash, timeout or broken contract for
`buggy`, the refusal for `refused`. Null when it passed."""),
    "config": ("list", """The evaluator's configuration: `{name, value, primary}` entries.
Reports rank together only when their primary entries are equal."""),
    "metrics": ("list", """`{name, value, direction}` entries in ranking order: `value` a finite
number, `direction` `max` or `min`."""),
    "details": ("object", "Anything else the evaluator reported; finite numbers only."),
    "params": ("object", "The param values used: the defaults of hill.yaml(5) with the `-p` values."),
    "final": ("boolean", "True for a holdout (`--final`) evaluation."),
    "official": ("boolean", """True when the report scores a committed hill version through
hills-eval(1); false for `--current` evaluations and for hills-sign(1)."""),
    "official_reason": ("string or null", "Why the report is not official; null when it is."),
    "forced": ("boolean", """True when the hill had uncommitted changes and its last commit was
scored anyway (`--force`). The report stays official."""),
    "trust": ("string", """`evaluator` for reports made by hills-eval(1), `self-reported` for
objects signed by hills-sign(1)."""),
    "tool": ("object", """`version`, the hills version, and `sha256`, over the names and contents
of the Python files of the hills package that made the report."""),
    "timestamp": ("string", "When the report was made, UTC, `YYYY-MM-DDTHH:MM:SSZ`."),
    "report_version": ("integer", f"The version of this format, currently {report.REPORT_VERSION}."),
    "run_id": ("string", """The run folder's name under `$HILLS_HOME/runs/HILL/`: a UTC stamp and
8 hex digits."""),
    "replicates": ("integer", """How many replicates completed and make up the metrics: fewer than
asked when one did not pass, 0 when the first one broke (see
hills-eval(1)). A report refused before the evaluator ran carries the
number asked for."""),
    "trial": ("object", """The knob values of the evaluation, when the submission declares knobs in
`params.json` (see hills-tune(1)): the declared defaults with the `-k`
values. Absent otherwise."""),
    "warnings": ("list of strings", """Problems that did not stop the evaluation, such as a `params.json`
that is not a valid declaration. Absent when there are none."""),
    "duration_s": ("number", """Seconds the evaluator ran, summed over the replicates. Absent when it
never started."""),
    "output_dropped_bytes": ("integer", """Bytes of evaluator output dropped beyond the 8 MiB kept
per stream. Absent when nothing was dropped."""),
    "unit_tests": ("object or null", """Present when the hill declares frozen unit tests and they ran:
`passed` (boolean), `exit_code` (null when they were killed) and
`duration_s`; null when the tests folder is missing from the hill."""),
    "instances": ("object", """Present when the evaluator reports one: per-instance scores, name to
finite number, in the same metric and direction; with replicates, the
per-name median."""),
    "side_metrics": ("object", """Command evaluators only: the other finite numeric keys of the result,
name to number (medians over replicates). Recorded, never ranked."""),
    "spread": ("object", """With more than one replicate: for each metric name, `min`, `max`, `mad`
(the median absolute deviation from the median) and `n`, the number of
replicates."""),
    "report": ("object", """Present when the evaluator reports one: a breakdown block, kept as given;
with replicates, the block of the replicate named by `report_replicate`."""),
    "report_replicate": ("integer", """With more than one replicate and a report block: the seed of the
replicate whose block is shown, the one whose first metric is nearest the
median."""),
    "signature": ("string", "`hmac-sha256:` and 64 hex digits; see SIGNATURE below."),
}

STATUSES = {
    "passing": """The evaluator ran and said the submission passed, and the frozen unit
tests, if any, passed too. Only passing reports rank.""",
    "failing": "The evaluator ran and said it did not pass, or the frozen unit tests failed.",
    "buggy": """The evaluation broke: the evaluator crashed, timed out, returned no result or
one that breaks the contract (a missing `passed`, a metric that is not a finite
number, an unknown key); a command verifier exited non-zero (`reason` quotes
the last line of its standard error), exited 0 without a result, or wrote a
bad one; or the frozen unit tests timed out.""",
    "refused": """The evaluation was refused or could not go on: the hill's data no longer
matches its locks, the submission holds a symbolic link that leaves it (or,
for a command evaluator, a `problem` or `data` entry), or an environment
problem stopped it while it ran, such as a hill environment that could not
be built or a busy exclusive resource. hills-eval(1) prints it and logs it,
and exits 5 when the hill's data drifted before the run, 4 for an
environment problem, and 1 otherwise.""",
    "interrupted": """The evaluation was stopped while the evaluator ran: Ctrl-C, SIGTERM or
SIGHUP, which `reason` names. The evaluator's processes were killed.""",
}

TOPICS = {
    "hill.yaml": {
        "summary": "the manifest of a hill",
        "synopsis": ".hills/NAME/hill.yaml",
        "sections": lambda: [
            ("DESCRIPTION", """Every hill has a `hill.yaml` at its root: a YAML mapping saying what the
hill is, how it scores a submission and what it allows. hills-check(1)
validates it, hills-commit(1) freezes it with the rest of the hill, and
hills-eval(1) reads it from the committed version it scores (from the
working tree with `--current`). hills never rewrites it, so comments stay.

A key hills does not know is an error that names the key and lists the
allowed ones. Every error names the file, the key (such as
`params.n.default` or `metrics[0].direction`) and what was expected.

hills reads the file within fixed bounds and refuses, naming the file and
the limit, one that is larger than 256 KiB (checked before parsing), holds
more than 5000 values (keys, items and collections counted together), is
nested deeper than 32 levels, or uses a YAML alias (`*name`, so also a `<<`
merge key): aliases can make a few bytes expand without bound, so write
each value out in full. A real hill.yaml is a few kilobytes. The same
bounds apply to the `problem.yaml` of hills-new(1) `--from-hillclimb`."""),
            ("KEYS", _definitions(manifest.key_docs())),
            ("PARAMS", """Each key of `params` names a param: a Python identifier, passed to
`eval()` as a keyword argument of that name. Its value is a mapping with
these keys:

""" + _definitions(manifest.key_docs(manifest.PARAM_KEYS)) + """

`hills eval -p NAME=VALUE` sets a param from text: a base-10 integer for
`int`, a number for `float`, `true`, `1`, `yes` or `on` (and `false`, `0`,
`no`, `off`) for `bool`, the text of one of the choices for `categorical`,
and the text itself for `str`. The value is then checked against the type
and the bounds."""),
            ("COMMAND EVALUATORS", """With `shape: command`, hills-eval(1) runs `entry` as a hillclimb-style
verifier. An argument naming a file of the hill, such as `verifier.sh`, is
replaced by the path of the hill's frozen copy, so a submission cannot ship
its own. The command runs under the watchdog with its working folder set to
a copy of the submission, in which `problem` links to the hill version's
files and `data` to its `data/` folder (a submission holding either name is
refused). It gets these variables, each also under the same name with
`HILLCLIMB_` instead of `HILLS_`, so a hillclimb `verifier.sh` runs
unchanged:

HILLS_RESULT
: Where to write the result: a path outside the submission, deleted before
  every run, so only this run's verifier can have written it.

HILLS_PYTHON
: The interpreter of the hill's environment. Run on `$HILLS_SOLUTION`, it
  runs the submitted code confined, under `limits`.

HILLS_SUBMISSION, HILLS_SOLUTION
: The submission copy (the working folder) and its `solution.py`.

HILLS_SPLIT
: `validation`, or `holdout` for `hills eval --final`.

HILLS_REPLICATE_SEED
: The replicate's seed, 0 to N-1 (also as `HILLCLIMB_TRIAL_SEED`).

HILLS_HILL
: The hill version's files in the run folder.

HILLS_PARAMS
: The knob values of the evaluation as a JSON object, when the submission
  declares knobs (see hills-tune(1)).

Exit status 0 with a result file means the verifier accepted the
candidate; any other exit status makes it `buggy`, and so does exit 0
without a result file (a contract violation, never a silent zero). The
result is a JSON object `{"score": X, ...}` or a bare number. `score` must
be a finite number: NaN, an infinity, a boolean, a string, null, a missing
`score` key, an empty or unparsable file are each refused with a message
saying which, and the report is `buggy`. The score becomes the first metric
of `metrics`, with its direction. Two more keys are reserved: `instances`,
an object of instance name to finite number, and `report`, an object kept
as a breakdown block (a NaN or infinity inside it becomes null). Every
other key holding a finite number is a side metric, recorded in the
report's `side_metrics` but never ranked; the names of the others (strings,
booleans, NaN, objects) are listed in `details.side_metrics_dropped`."""),
            ("EXAMPLE", """    spec: 1
    name: circle-packing
    version: 0.1.0
    description: Pack n circles in the unit square, maximising the sum of their radii.
    evaluator:
      shape: function
      entry: eval.py
    timeout: 60
    params:
      n:
        type: int
        default: 26
        primary: true
        low: 1
        high: 100
        description: number of circles to pack
    blobs:
      track: ["data/*.parquet"]
      threshold: 50MB
    final:
      budget: 3"""),
            ("SEE ALSO", _see_also(["hills-check(1)", "hills-describe(1)", "hills-eval(1)",
                                    "hills-lock(5)", "hills(1)"])),
        ],
    },
    "hills-lock": {
        "summary": "private.lock and blobs.lock, the content locks of a hill",
        "synopsis": ".hills/NAME/private.lock\n.hills/NAME/blobs.lock",
        "sections": lambda: [
            ("DESCRIPTION", """Held-out data and large files never enter a hill's git. Instead the two
lock files, which are committed, list each such file with its size and
content digest, so the tree hash of a hill version commits to that content
without holding it. hills-commit(1) and the pre-commit hook regenerate both
locks from disk; they are never edited by hand.

`private.lock` lists every file under `private/`. The other files of the
hill are those its `.gitignore` files do not exclude, leaving out `.vc/`,
`__pycache__/`, `*.py[cod]`, `.pytest_cache/` and `.DS_Store`; neither
`.vc/info/exclude` nor a global excludes file counts, so the tree does not
depend on the machine. Of these, `blobs.lock` lists the blobs: files of at
least `blobs.threshold` bytes or matching a `blobs.track` glob of
hill.yaml(5). A glob is matched against the path from the hill's root, where
`*` also matches `/`; a glob without `/` also matches the file's base name;
`dir/**` matches everything under `dir/`. Every other file goes into the git
tree, and so do `hill.yaml`, `README.md`, `pyproject.toml`, `uv.lock` and
the two locks, whatever their size. hills lists committed blobs in
`.vc/info/exclude`, so plain git commands ignore them. Symbolic links are
refused everywhere in a hill."""),
            ("FORMAT", """A lock is UTF-8 TOML in one canonical encoding, so the same files always
give the same bytes and the same tree hash:

- `version = 1` comes first.
- Then one table per file, `[files."PATH"]`, sorted by path: the path from the
  hill's root with `/` separators (`private/...` in `private.lock`).
- Each table holds `size`, the size in bytes (an integer), then `digest`,
  `blake3:` and the 64 lowercase hex digits of the BLAKE3 hash of the file's
  bytes.
- A lock with no files is `version = 1` and an empty `[files]` table.

Reading a lock, hills refuses another version, any key besides `version` and
`files`, and an entry without an integer `size` and a `blake3:` digest; the
error names the lock."""),
            ("VERIFICATION", """Before hills-eval(1) runs the evaluator, and again after it, every file in
HEAD's locks must exist on disk as a regular file (not a symbolic link, even
to the same bytes) with the locked size and digest, and `private/` must hold
no file or link the lock does not list. A mismatch refuses the evaluation
and names the file: exit status 5 when found before the run (no submission
can be scored until the data is restored), 1 when found after it (the
evaluator or the submission changed the data; that score is void). hills-status(1)
shows the same differences as lock drift."""),
            ("STAT CACHE", """Hashing gigabytes of data on every evaluation would be slow, so digests
are cached per hill in `$HILLS_HOME/cache/stat/`, in a JSON file named after
the hill's path: `entries` maps each absolute path to `[size, mtime_ns,
ctime_ns, inode, digest]`, and `mac` is the hex HMAC-SHA256 of the canonical
JSON of `entries` with the machine key. A digest is reused only when all
four stat values still match, so an unchanged file costs one stat. A cache
whose `mac` does not verify is ignored as a whole, so an edited cache
cannot vouch for a changed file."""),
            ("EXAMPLE", """    version = 1

    [files."private/holdout.json"]
    size = 48213
    digest = "blake3:5f0c9d2e8a4b7c1d3e6f809a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e\""""),
            ("SEE ALSO", _see_also(["hill.yaml(5)", "hills-commit(1)", "hills-status(1)",
                                    "hills-eval(1)"])),
        ],
    },
    "hills-report": {
        "summary": "the signed report of an evaluation, and the attempts log",
        "synopsis": "hills eval DIR -H NAME > report.json\n$HILLS_HOME/state/NAME@TREE/attempts.jsonl",
        "sections": lambda: [
            ("DESCRIPTION", """hills-eval(1) prints one JSON object per evaluation: the report. It is
signed with the machine key, so any edit makes hills-verify(1) say INVALID,
and it is appended to the attempts log of the hill version whatever its
outcome. hills-sign(1) signs other objects in the same way, marked
self-reported."""),
            ("FIELDS", _definitions(REPORT_FIELDS)),
            ("STATUSES", _definitions({name: ("", STATUSES.get(name, "")) for name in report.STATUSES})),
            ("SIGNATURE", """The signature is `hmac-sha256:` followed by the lowercase hex
HMAC-SHA256 of the report without its `signature` key, encoded as canonical
JSON: keys sorted, separators `,` and `:` with no spaces, UTF-8 text with no
`\\u` escapes beyond what JSON needs, numbers as Python's json module writes
them, and no NaN or infinity. The HMAC key is the content of
`$HILLS_HOME/key` with surrounding white space removed, used as bytes (the
64 hex characters themselves, not the bytes they spell). In Python:

    body = {k: v for k, v in report.items() if k != "signature"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False, allow_nan=False)
    mac = hmac.new(key, text.encode(), hashlib.sha256).hexdigest()

A report is valid when `signature` equals `"hmac-sha256:" + mac`. Keys
may come in any order and white space may change: only the canonical
encoding is signed. A report holding a duplicate key is refused."""),
            ("ATTEMPTS LOG", """Each hill version has an append-only log,
`$HILLS_HOME/state/NAME@TREE/attempts.jsonl` (`NAME@current-DIGEST` for
`--current`, DIGEST naming the hill folder), with one line per evaluation. Each line is the canonical JSON
of a record, here `{"report": REPORT}`, plus two fields the log owns, `seq`
(0 for the first line, then one more per line) and `prev` (the `mac` of the
line before, empty on the first), with its closing `}` replaced by
`,"mac":"hmac-sha256:HEX"}` and a newline. HEX is the HMAC-SHA256, with the
machine key, of that canonical JSON (the line up to `,"mac":`, closed by
`}`). So `mac` is always the last key, and dropping it from a parsed line and
encoding the rest canonically gives back the signed bytes.

`attempts.jsonl.head` holds the canonical JSON of `{"mac", "seq",
"signature"}` for the newest line, its signature an HMAC of `{"mac", "seq"}`;
it reveals a tail cut off the log. `attempts.jsonl.lock` is the lock every
append holds. hills-chain(1) reads and writes logs of this format, and
hills-attempts(1) checks them.

A report is as large as its result allows: a function evaluator's result
and a command verifier's result file are each capped at 64 MiB (a larger
one makes the evaluation `buggy`), and every report up to that size is
printed, logged and noted alike.

An official report is also appended to the git notes of the hill commit,
under `refs/notes/hills/reports`, as one canonical JSON line `{"attempt":
{"mac", "seq"}, "report": REPORT}`; hills-log(1) counts these lines and
hills-attempts(1) checks the log against the newest `attempt`. To read them:

    git --git-dir=.vc notes --ref=hills/reports show HEAD"""),
            ("EXAMPLE", """    {
      "hill": "circle-packing",
      "tree_hash": "f48111974a00b3398edbcc5ec35f3616e52944b4",
      "commit": "b4f7c4d59b27025bcc3095f7b309a98cabab20ed",
      "submission_hash": "blake3:d02050616c5f693567aec0d8f021dd1542444a8a9ec0b7e8bd38d82b8128b539",
      "submission_git": null,
      "passed": true,
      "status": "passing",
      "reason": null,
      "config": [{"name": "n", "value": 26, "primary": true}],
      "metrics": [{"name": "sum_radii", "value": 2.5414213562363095, "direction": "max"}],
      "details": {"min_radius": 0.0414, "max_radius": 0.1},
      "params": {"n": 26, "tolerance": 1e-09},
      "final": false,
      "official": true,
      "official_reason": null,
      "forced": false,
      "trust": "evaluator",
      "tool": {"version": "0.1.0", "sha256": "7d03c4be..."},
      "timestamp": "2026-11-30T02:22:37Z",
      "report_version": 1,
      "run_id": "20261130T022237-1438d6e2",
      "duration_s": 0.117,
      "signature": "hmac-sha256:..."
    }"""),
            ("SEE ALSO", _see_also(["hills-eval(1)", "hills-verify(1)", "hills-sign(1)",
                                    "hills-attempts(1)", "hills-chain(1)", "hills-rank(1)"])),
        ],
    },
}


# ---------------------------------------------------------------- markup to roff

_INLINE = re.compile(r"`([^`]+)`|\b([a-z][a-z0-9.-]*[a-z0-9]|[a-z])\(([1-8])\)")


def _escape(text):
    """Roff-escape plain text: backslashes, and `-` as `\\-` so options and
    command names stay ASCII hyphen-minus wherever the page is rendered."""
    return text.replace("\\", "\\e").replace("-", "\\-")


def _inline(text):
    """Escape `text` and set `code` and NAME(N) references in bold."""
    out, position = [], 0
    for match in _INLINE.finditer(text):
        out.append(_escape(text[position:match.start()]))
        if match.group(1) is not None:
            out.append("\\fB" + _escape(match.group(1)) + "\\fR")
        else:
            out.append("\\fB" + _escape(match.group(2)) + "\\fR(" + match.group(3) + ")")
        position = match.end()
    out.append(_escape(text[position:]))
    return "".join(out)


def _protect(line):
    # A line starting with "." or "'" would be read as a roff request.
    return "\\&" + line if line.startswith((".", "'")) else line


def _fill(text):
    """Roff lines for running text (roff fills them; wrapping keeps diffs small)."""
    lines = textwrap.wrap(_inline(" ".join(text.split())), WIDTH, break_on_hyphens=False,
                          break_long_words=False)
    return [_protect(line) for line in lines]


def _verbatim(lines):
    body = [_protect(_escape(line)) if line else "" for line in lines]
    return [".PP", ".RS 4", ".nf"] + body + [".fi", ".RE"]


def _blocks(text):
    """Split marked-up text into (kind, payload) blocks."""
    text = text.strip("\n")
    blocks = []
    for chunk in re.split(r"\n[ \t]*\n", text):
        lines = chunk.split("\n")
        if lines[0].strip() == "\b":
            blocks.append(("pre", textwrap.dedent("\n".join(lines[1:])).split("\n")))
        elif all(line.startswith("    ") for line in lines):
            shown = [line[4:] for line in lines]
            if blocks and blocks[-1][0] == "pre":
                blocks[-1] = ("pre", blocks[-1][1] + [""] + shown)
            else:
                blocks.append(("pre", shown))
        elif lines[0].startswith("## "):
            blocks.append(("sub", lines[0][3:].strip()))
            if lines[1:]:
                blocks.append(("p", " ".join(lines[1:])))
        elif lines[0].startswith("- "):
            items = []
            for line in lines:
                if line.startswith("- "):
                    items.append(line[2:])
                else:
                    items[-1] += " " + line.strip()
            blocks.append(("list", items))
        elif len(lines) > 1 and lines[1].startswith(": "):
            body = " ".join([lines[1][2:]] + [line.strip() for line in lines[2:]])
            blocks.append(("def", (lines[0], body)))
        else:
            blocks.append(("p", " ".join(line.strip() for line in lines)))
    return blocks


def _render(text):
    """Roff lines for marked-up text."""
    out = []
    for kind, payload in _blocks(text):
        if kind == "p":
            out += [".PP"] + _fill(payload)
        elif kind == "pre":
            out += _verbatim(payload)
        elif kind == "sub":
            out += [f'.SS "{_escape(payload)}"']
        elif kind == "list":
            for item in payload:
                out += [".IP \\(bu 2"] + _fill(item)
        elif kind == "def":
            term, body = payload
            out += [".TP", _protect(_inline(term))] + _fill(body)
    return out


def _definitions(entries):
    """Markup for a {term: (kind, text)} dict as a definition list."""
    parts = []
    for term, (kind, text) in entries.items():
        body = " ".join(text.split())
        parts.append(f"`{term}`" + (f" ({kind})" if kind else "") + "\n: " + body)
    return "\n\n".join(parts)


def _see_also(refs):
    return ", ".join(refs)


def _help_text(command):
    """A command's help as click shows it: dedented, cut at a form feed."""
    text = inspect.cleandoc(command.help or "")
    return text.split("\f", 1)[0].strip()


def short_help(command):
    """The one-line summary click derives for `hills --help` (never cut short)."""
    return command.get_short_help_str(limit=1000).rstrip(".")


# ---------------------------------------------------------------- pieces of a page

def _header(page, section):
    title = _escape(page.upper())
    return [
        '.\\" Generated by "python -m hills.manpages" from the hills commands; do not edit.',
        f'.TH "{title}" "{section}" "" "{_escape(SOURCE)}" "{MANUAL}"',
        ".nh",
        ".ad l",
    ]


def _section(title, lines):
    return [f".SH {title}"] + lines


def _name_line(page, summary):
    summary = summary[:1].lower() + summary[1:] if summary[1:2].islower() else summary
    return [f"{_escape(page)} \\- {_inline(summary)}"]


def _context(command, prog):
    return click.Context(command, info_name=prog, **command.context_settings)


def _is_help(param, ctx):
    return isinstance(param, click.Option) and set(param.opts) & set(ctx.help_option_names)


def _metavar(param, ctx):
    try:
        return param.make_metavar(ctx)
    except TypeError:  # click before 8.2
        return param.make_metavar()


def _usage_pieces(command, ctx):
    """[(plain, roff)] for each option and argument, as a synopsis shows them."""
    pieces = []
    for param in command.get_params(ctx):
        if getattr(param, "hidden", False) or _is_help(param, ctx):
            continue
        if isinstance(param, click.Option):
            short = [opt for opt in param.opts if len(opt) == 2]
            flag = (short or param.opts)[0]
            plain, roff = flag, f"\\fB{_escape(flag)}\\fR"
            if not param.is_flag:
                metavar = _metavar(param, ctx)
                plain += " " + metavar
                roff += f" \\fI{_escape(metavar)}\\fR"
            if not param.required:
                plain, roff = f"[{plain}]", f"[{roff}]"
            if param.multiple:
                plain, roff = plain + "...", roff + "..."
            pieces.append((plain, roff))
    for param in command.get_params(ctx):
        if isinstance(param, click.Argument):
            metavar = _metavar(param, ctx)
            pieces.append((metavar, f"\\fI{_escape(metavar)}\\fR"))
    return pieces


def _synopsis_line(prog, pieces):
    """One synopsis entry, wrapped by hand (it sits in a no-fill block)."""
    indent = " " * (len(prog) + 1)
    lines, plain_width = [f"\\fB{_escape(prog)}\\fR"], len(prog)
    for plain, roff in pieces:
        if plain_width + 1 + len(plain) > SYNOPSIS_WIDTH:
            lines.append(indent + roff)
            plain_width = len(indent) + len(plain)
        else:
            lines[-1] += " " + roff
            plain_width += 1 + len(plain)
    return [_protect(line) for line in lines]


def _synopsis(entries):
    out = [".nf"]
    for prog, pieces in entries:
        out += _synopsis_line(prog, pieces)
    return out + [".fi"]


def _short_form(command, ctx):
    """`[OPTIONS] ARGS` as click's usage line has it."""
    return [(piece, _inline(piece) if piece.startswith("[OPTIONS]") else f"\\fI{_escape(piece)}\\fR")
            for piece in command.collect_usage_pieces(ctx)]


HELP_TEXT = "Print the usage and a summary of the options, and exit."


def _option_items(command, ctx, arguments, options=True, argument_items=True, help_text=HELP_TEXT):
    """Roff definition items for a command's options, then its arguments."""
    out = []
    for param in command.get_params(ctx):
        if not isinstance(param, click.Option) or getattr(param, "hidden", False):
            continue
        is_help = _is_help(param, ctx)
        if (is_help and not help_text) or (not is_help and not options):
            continue
        names = sorted(param.opts, key=len) + list(param.secondary_opts)
        term = ", ".join(f"\\fB{_escape(name)}\\fR" for name in names)
        if not param.is_flag and not is_help:
            term += f" \\fI{_escape(_metavar(param, ctx))}\\fR"
        if is_help:
            text = help_text
        else:
            text = " ".join((param.help or "").split())
            if param.required:
                text += " Required."
            if param.show_default and param.default not in (None, False, ()):
                text += f" Default: `{param.default}`."
        out += [".TP", _protect(term)] + _fill(text)
    for param in command.get_params(ctx) if argument_items else ():
        if isinstance(param, click.Argument):
            text = arguments.get(param.name, "")
            out += [".TP", _protect(f"\\fI{_escape(_metavar(param, ctx))}\\fR")] + _fill(text)
    return out


def _exit_items(codes, common=True):
    codes = list(codes)
    if common:
        if not any(code == 2 for code, _ in codes):
            codes.append((2, USAGE_EXIT))
        codes += [item for item in COMMON_EXIT if not any(code == item[0] for code, _ in codes)]
    out = []
    for code, text in sorted(codes):
        out += [".TP", f"\\fB{code}\\fR"] + _fill(text[:1].upper() + text[1:] + ("" if text.endswith(".") else "."))
    return out


def _names_paragraph(verb):
    names = [f"`git hill {verb}`"]
    standalone = [name for name, target in cli.STANDALONE.items() if target == verb]
    names += [f"`{name}`" for name in standalone]
    return (f"This command is also {' and '.join(names)}: the same command, with the same "
            "options, output and exit status.")


# ---------------------------------------------------------------- pages

def command_page(verb):
    """hills-VERB.1 for a non-hidden command (a group gets its subcommands)."""
    command = cli.COMMANDS[verb]
    docs = VERBS[verb]
    page = f"hills-{verb}"
    ctx = _context(command, f"hills {verb}")
    standalone = [name for name, target in cli.STANDALONE.items() if target == verb]
    out = _header(page, 1)
    out += _section("NAME", _name_line(page, short_help(command)))

    if isinstance(command, click.Group):
        subcommands = [(name, sub) for name, sub in command.commands.items() if not sub.hidden]
        entries = []
        for prog in [f"hills {verb}", f"git hill {verb}"] + standalone:
            for name, sub in subcommands:
                entries.append((f"{prog} {name}", _usage_pieces(sub, _context(sub, name))))
        out += _section("SYNOPSIS", _synopsis(entries))
        description = _render(_help_text(command))
        description += _render(_names_paragraph(verb))
        if docs.get("more"):
            description += _render(docs["more"])
        out += _section("DESCRIPTION", description)
        commands = []
        for name, sub in subcommands:
            commands += [f'.SS "{_escape(name)}"']
            rendered = _render(_help_text(sub))
            commands += rendered[1:] if rendered[:1] == [".PP"] else rendered
        out += _section("COMMANDS", commands)
        # Arguments shared by the subcommands and -h are described once, then
        # each subcommand's own options.
        options, seen = [], set()
        for name, sub in subcommands:
            sub_ctx = _context(sub, name)
            for param in sub.get_params(sub_ctx):
                if isinstance(param, click.Argument) and param.name not in seen:
                    seen.add(param.name)
                    options += [".TP", f"\\fI{_escape(_metavar(param, sub_ctx))}\\fR"]
                    options += _fill(docs.get("arguments", {}).get(param.name, ""))
        first = subcommands[0][1]
        options += _option_items(first, _context(first, subcommands[0][0]), {}, options=False,
                                 argument_items=False)
        for name, sub in subcommands:
            items = _option_items(sub, _context(sub, name), {}, argument_items=False, help_text=None)
            if items:
                options += [f'.SS "{_escape(name)}"'] + items
        out += _section("OPTIONS", options)
    else:
        entries = [(f"hills {verb}", _usage_pieces(command, ctx))]
        for prog in [f"git hill {verb}"] + standalone:
            entries.append((prog, _short_form(command, ctx)))
        out += _section("SYNOPSIS", _synopsis(entries))
        description = _render(_help_text(command))
        if docs.get("more"):
            description += _render(docs["more"])
        description += _render(_names_paragraph(verb))
        out += _section("DESCRIPTION", description)
        out += _section("OPTIONS", _option_items(command, ctx, docs.get("arguments", {})))

    out += _section("OUTPUT", _render(docs["output"]))
    out += _section('"EXIT STATUS"', _exit_items(docs["exit"]))
    out += _section("EXAMPLES", _render(docs["examples"]))
    see_also = docs["see_also"] + ([] if "hills(1)" in docs["see_also"] else ["hills(1)"])
    out += _section('"SEE ALSO"', _fill(_see_also(see_also)))
    return "\n".join(out) + "\n"


def _verb_list(prefix):
    items = []
    for verb, command in cli.COMMANDS.items():
        if command.hidden:
            continue
        items += [".TP", f"\\fB{_escape(prefix + verb)}\\fR, \\fB{_escape('hills-' + verb)}\\fR(1)"]
        items += _fill(short_help(command) + ".")
    return items


def main_page():
    """hills.1: the group and the list of verbs."""
    group = cli.main_group
    ctx = _context(group, "hills")
    out = _header("hills", 1)
    out += _section("NAME", _name_line("hills", short_help(group)))
    pieces = _usage_pieces(group, ctx) + [("[-h | --help]", "[\\fB\\-h\\fR | \\fB\\-\\-help\\fR]"),
                                          ("VERB", "\\fIVERB\\fR"), ("[ARGS]...", "[\\fIARGS\\fR]...")]
    out += _section("SYNOPSIS", _synopsis([("hills", pieces)]))
    out += _section("DESCRIPTION", _render(_help_text(group)) + _render(MAIN["more"]))
    out += _section("COMMANDS", _verb_list("hills "))
    out += _section("OPTIONS", _option_items(group, ctx, {}))
    out += _section("OUTPUT", _render(MAIN["output"]))
    out += _section('"EXIT STATUS"', _exit_items(MAIN["exit"], common=False))
    out += _section("ENVIRONMENT", _render(MAIN["environment"]))
    out += _section("FILES", _render(MAIN["files"]))
    out += _section("EXAMPLES", _render(MAIN["examples"]))
    out += _section('"SEE ALSO"', _fill(_see_also(MAIN["see_also"])))
    return "\n".join(out) + "\n"


def git_hill_page():
    """git-hill.1: `git hill --help` makes git open it."""
    group = cli.main_group
    ctx = _context(group, "git hill")
    out = _header("git-hill", 1)
    out += _section("NAME", _name_line("git-hill", "the hills commands as a git subcommand"))
    pieces = _usage_pieces(group, ctx) + [("[-h]", "[\\fB\\-h\\fR]"),
                                          ("VERB", "\\fIVERB\\fR"), ("[ARGS]...", "[\\fIARGS\\fR]...")]
    out += _section("SYNOPSIS", _synopsis([("git hill", pieces)]))
    out += _section("DESCRIPTION", _render(GIT_HILL["description"]))
    out += _section("COMMANDS", _verb_list("git hill "))
    out += _section("OPTIONS", _option_items(group, ctx, {}, help_text=GIT_HILL["help"]))
    out += _section("OUTPUT", _render(MAIN["output"]))
    out += _section('"EXIT STATUS"', _render("The same as hills(1):") + _exit_items(MAIN["exit"], common=False))
    out += _section("EXAMPLES", _render(GIT_HILL["examples"]))
    out += _section('"SEE ALSO"', _fill(_see_also(GIT_HILL["see_also"])))
    return "\n".join(out) + "\n"


def topic_page(topic):
    """A section-5 page: a file format."""
    spec = TOPICS[topic]
    out = _header(topic, 5)
    out += _section("NAME", _name_line(topic, spec["summary"]))
    out += _section("SYNOPSIS", [".nf"] + [_protect(_escape(line)) for line in spec["synopsis"].split("\n")]
                    + [".fi"])
    for title, text in spec["sections"]():
        heading = f'"{title}"' if " " in title else title
        out += _section(heading, _render(text))
    return "\n".join(out) + "\n"


def verbs():
    """The verbs that get a page: every command not hidden."""
    return [verb for verb, command in cli.COMMANDS.items() if not command.hidden]


def pages():
    """{file name: roff text} for every page."""
    result = {"hills.1": main_page(), "git-hill.1": git_hill_page()}
    for verb in verbs():
        result[f"hills-{verb}.1"] = command_page(verb)
    for topic in TOPICS:
        result[f"{topic}.5"] = topic_page(topic)
    return result


def default_outdir():
    """The checkout's man/ folder, else man/ in the current folder."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if os.path.isfile(os.path.join(root, "pyproject.toml")):
        return os.path.join(root, "man")
    return "man"


def _existing(outdir):
    try:
        return sorted(name for name in os.listdir(outdir) if re.search(r"\.[15]$", name))
    except FileNotFoundError:
        return []


def check(outdir, generated=None):
    """[(problem, path)] where `outdir` differs from the generated pages."""
    generated = generated if generated is not None else pages()
    problems = []
    for name, text in generated.items():
        path = os.path.join(outdir, name)
        try:
            with open(path, encoding="utf-8") as handle:
                current = handle.read()
        except FileNotFoundError:
            problems.append(("missing", path))
            continue
        if current != text:
            problems.append(("stale", path))
    for name in _existing(outdir):
        if name not in generated:
            problems.append(("extra", os.path.join(outdir, name)))
    return problems


def write(outdir, generated=None):
    """Write the pages that changed, remove pages no longer generated; return
    (written paths, removed paths)."""
    generated = generated if generated is not None else pages()
    os.makedirs(outdir, exist_ok=True)
    written, removed = [], []
    for problem, path in check(outdir, generated):
        if problem == "extra":
            os.unlink(path)
            removed.append(path)
            continue
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(generated[os.path.basename(path)])
        written.append(path)
    return written, removed


# Names only hills gives its pages: an installed page of this shape that is no
# longer generated is a removed command's, never another package's.
OWN_PAGE = re.compile(r"^(hills|git-hill)(-[a-z0-9-]+)?\.1$|^(hill\.yaml|hills-[a-z0-9-]+)\.5$")


def install(prefix, generated=None):
    """Put the pages where man finds them for programs in PREFIX/bin:
    PREFIX/share/man/manN/. An editable install (`pip install -e`) skips
    the wheel's data files, so a checkout's venv gets its pages from here.
    Writes the pages that changed, removes hills pages no longer generated,
    leaves other pages alone; returns (written paths, removed paths)."""
    generated = generated if generated is not None else pages()
    written, removed = [], []
    for section in sorted({name.rsplit(".", 1)[1] for name in generated}):
        folder = os.path.join(prefix, "share", "man", f"man{section}")
        own = {name: text for name, text in generated.items() if name.endswith("." + section)}
        os.makedirs(folder, exist_ok=True)
        for name in sorted(set(os.listdir(folder)) - set(own)):
            if OWN_PAGE.match(name):
                os.unlink(os.path.join(folder, name))
                removed.append(os.path.join(folder, name))
        for problem, path in check(folder, own):
            if problem != "extra":
                with open(path, "w", encoding="utf-8") as handle:
                    handle.write(own[os.path.basename(path)])
                written.append(path)
    return written, removed


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m hills.manpages",
                                     description="Generate the hills man pages from the commands.")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if a page is stale, missing or no longer generated")
    parser.add_argument("--install", metavar="PREFIX",
                        help="install the pages under PREFIX/share/man (PREFIX: a venv) instead of OUTDIR")
    parser.add_argument("outdir", nargs="?", default=None, help="where the pages go (default: the checkout's man/)")
    args = parser.parse_args(argv)
    if args.install:
        if args.check or args.outdir:
            parser.error("--install takes neither --check nor OUTDIR")
        written, removed = install(args.install)
        if written or removed:
            print(f"{len(written)} man page(s) installed, {len(removed)} removed, in "
                  f"{os.path.join(args.install, 'share', 'man')}", file=sys.stderr)
        return 0
    outdir = args.outdir or default_outdir()
    if args.check:
        problems = check(outdir)
        for problem, path in problems:
            what = {"missing": "is missing", "stale": "is out of date",
                    "extra": "is not generated from any command or topic"}[problem]
            print(f"error: man page '{path}' {what}", file=sys.stderr)
        if problems:
            print("hint: run 'python -m hills.manpages' to regenerate the pages", file=sys.stderr)
            return 1
        return 0
    written, removed = write(outdir)
    for path in written:
        print(path)
    for path in removed:
        print(f"removed {path}", file=sys.stderr)
    print(f"{len(written)} page(s) written, {len(removed)} removed, in {outdir}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
