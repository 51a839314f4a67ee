"""What of the caller's environment may reach hills' own process, the one
that signs (docs/decisions.md D-173, "The caller's environment cannot
steer the signer").

The interpreter and the dynamic loader read some variables before a line of
hills runs: `PYTHONPATH` (a `sitecustomize` that patches `json.dumps`),
`PYTHONHOME`, `PYTHONUSERBASE`, `PYTHONPYCACHEPREFIX` (byte code from
elsewhere), `PYTHONWARNINGS` (it imports the category it names),
`LD_PRELOAD`, `LD_LIBRARY_PATH`, `LD_AUDIT`, `GCONV_PATH`... Deny by
default: a command started with any of them, but the few on HARMLESS, is
started again, once, as `python -I` with them removed, so nothing of the
caller's Python runs in the process that signs, nor in anything it starts.

hills' own internal variables (INTERNAL: those it sets for the evaluator,
the shim and submitted code) mean nothing to a top-level command: they are
dropped when a caller sets them.

This module is imported by hills.entry before anything else of hills: it
imports nothing but what the interpreter holds already, and where no such
variable is set it costs one pass over the names of os.environ.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, MutableMapping

# Read by the interpreter (PYTHON*) or the dynamic loader and C library
# (LD_*, and the two below) as a process starts.
STARTUP_PREFIXES = ("PYTHON", "LD_")
STARTUP_NAMES = frozenset({"GCONV_PATH", "GLIBC_TUNABLES"})
# The only ones a command keeps without starting again: each sets a mode
# of the interpreter's own streams or byte code, none names a file, a
# module or a library, so none can run code.
HARMLESS = frozenset({"PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "PYTHONIOENCODING", "PYTHONUTF8"})
# Set only by hills, for the processes of an eval (the evaluator, the shim,
# the confined interpreter, submitted code, the access audit), never read
# by a top-level command: one the caller set is dropped.
INTERNAL = frozenset({
    "HILLS_REAL_PYTHON", "HILLS_SCORING_PYTHON", "HILLS_PYTHON", "HILLS_AUDIT_FD", "HILLS_AUDIT_VIEW",
    "HILLS_RESULT_FD", "HILLS_RESULT", "HILLS_SECRET_SEED", "HILLS_SUBMISSION_SANDBOX", "HILLS_SUBMISSION",
    "HILLS_SOLUTION", "HILLS_SPLIT", "HILLS_PARAMS", "HILLS_KNOBS", "HILLS_REPLICATE_SEED", "HILLS_INPUTS",
    "HILLS_OUTPUTS", "HILLS_HILL", "HILLS_PROBE_TOKEN"})
INTERNAL_PREFIXES = ("HILLCLIMB_",)
_WATCHED = STARTUP_PREFIXES + tuple(STARTUP_NAMES) + ("HILLS_",) + INTERNAL_PREFIXES
# The documented overrides that can change a score or the confinement:
# honoured, and named in the report's `isolation.overrides` (hills-report(5)).
NAMED_OVERRIDES = ("HILLS_BWRAP", "HILLS_UV", "HILLS_PYTHON_BASE")
# The command that starts hills again: the package's folder is appended to
# sys.path (never in front of the standard library), argv[0] kept.
_AGAIN = ("import sys;sys.path.append(sys.argv.pop(1));sys.argv[0]=sys.argv.pop(1);"
          "from hills.entry import main;main()")


def steering(names: Iterable[str]) -> list[str]:
    """The names among `names` that the interpreter or the loader reads at
    start and that are not HARMLESS."""
    return [name for name in names
            if (name.startswith(STARTUP_PREFIXES) and name not in HARMLESS) or name in STARTUP_NAMES]


def internal(names: Iterable[str]) -> list[str]:
    """The names among `names` that only hills sets, for its own children."""
    return [name for name in names if name in INTERNAL or name.startswith(INTERNAL_PREFIXES)]


def start_clean() -> int | None:
    """At the start of a top-level command: drop the caller's internal
    variables, and where a steering one is set, start this same command
    again isolated and without them (this call then does not return). The
    exit code, once the error is said, where it cannot start again."""
    watched = [name for name in os.environ if name.startswith(_WATCHED)]
    if not watched:
        return None
    for name in internal(watched):
        del os.environ[name]
    found = steering(watched)
    return _again(found) if found else None


def _again(found: list[str]) -> int:
    """exec this command as `python -I`, the variables `found` removed."""
    env = {name: value for name, value in os.environ.items() if name not in found}
    if not sys.executable:
        sys.stderr.write(f"error: hills cannot start itself again without {', '.join(sorted(found))}\n"
                         "hint: unset them (the interpreter would run what they name)\n")
        return 4
    package_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    argv = [sys.executable, "-I", "-c", _AGAIN, package_parent, sys.argv[0] if sys.argv else "hills",
            *sys.argv[1:]]
    try:
        os.execve(sys.executable, argv, env)
    except OSError as exc:
        sys.stderr.write(f"error: hills cannot start itself again without {', '.join(sorted(found))}: "
                         f"{exc.strerror}\nhint: unset them (the interpreter would run what they name)\n")
        return 4


def scrub(environ: MutableMapping[str, str]) -> None:
    """Remove steering and internal variables from `environ` in place: for
    a process that started clean and takes a caller's environment (a warm
    server's worker), where nothing ran yet that they could steer."""
    for name in steering(list(environ)) + internal(list(environ)):
        del environ[name]


def named_overrides(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The documented overrides set here that can change a score or the
    confinement, by name: what the report says was honoured."""
    source = os.environ if environ is None else environ
    return {name: source[name] for name in NAMED_OVERRIDES if source.get(name)}
