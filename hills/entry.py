"""The console-script entry: picks the command from the name this process
was started as (`hills`, `git-hill`, `hills-eval`...), sends an ordinary
`hills eval`, `hills verify` or `hills commit` down its fast path (no click,
no YAML), and
is the one place the process exits."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from .run.standby import Standby

# Verbs declared as plain data (hills.cli.fast), and the standalone
# name of each that has one.
FAST = {"eval": "hills-eval", "verify": None, "commit": "hills-commit", "attempts": None, "rank": None}
# Fast verbs whose process ends at once when the command is done (see main).
LEAVE_AT_ONCE = frozenset({"eval", "attempts", "rank"})
# Fast verbs a warm server may run (docs/warm.md).
WARM = frozenset({"eval"})


def main() -> None:
    # Before anything else of hills loads, the warm client included: a
    # caller's PYTHONPATH, LD_PRELOAD... starts the command again without
    # them (hills.base.startup).
    from .base import startup

    unclean = startup.start_clean()
    if unclean is not None:
        sys.exit(unclean)
    program = os.path.basename(sys.argv[0]) if sys.argv else "hills"
    if program.endswith(".py"):  # python -m hills, or a script by path
        program = "hills"
    args = sys.argv[1:]
    remote = _through_service(program, args)
    if remote is not None:
        if _flushed():
            # The client has written its files whole and closed its socket:
            # nothing needs the interpreter's teardown (docs/service-warm.md).
            os._exit(remote)
        sys.exit(remote)
    verb = fast_verb(program, args)
    served = None
    if verb in WARM and not _asks_help(args):
        from .warm import client as warm

        if warm.enabled():
            served = warm.call(program, args)
            if served.code is not None:  # a warm worker ran it (docs/warm.md)
                os._exit(served.code)
    if verb in WARM:
        from .base import state

        state.deferred = []  # old run folders go once the caller has its answer (_after_exit)
    fast = _fast_path(program, args)
    if fast is not None and verb in LEAVE_AT_ONCE and _flushed():
        if served is not None and served.start and fast in (0, 1):
            warm.start(served.path)  # for the next eval
        _after_exit()
        # Without the interpreter's teardown: an eval has loaded about 150
        # modules, and unloading them costs it about 5 ms. Nothing an eval
        # leaves needs it: its files are closed by `with`, its threads are
        # daemons it has joined, and it registers no atexit hook.
        os._exit(fast)
    code = fast if fast is not None else _slow(program, args)
    if verb in WARM:
        _housekeep()
    sys.exit(code)


def _housekeep() -> None:
    """Run, here and now, the housekeeping a command left (state.housekeeping)."""
    from .base import state

    calls, state.deferred = state.deferred or [], None
    for call in calls:
        call()


def _after_exit() -> None:
    """The housekeeping a command left, in a child of its own once the
    command's output is out: the caller has its exit code as this process
    ends, not after an old run folder of many files is removed, as a warm
    worker does it after its reply (D-350). The child holds none of the
    caller's pipes or terminal, and its own session."""
    from .base import state

    if not state.deferred:
        return
    from .base.errors import leave_now
    from .base.halves import alone_here

    try:
        child = os.fork() if alone_here() else -1
    except OSError:
        child = -1
    if child < 0:  # no process to spare, or a thread that a fork would strand: the caller waits instead
        _housekeep()
        return
    if child:
        state.deferred = None  # the child's
        return
    try:
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        _housekeep()
    finally:
        leave_now(0)


def _asks_help(args: list[str]) -> bool:
    return any(arg in ("-h", "--help") for arg in args)


def _flushed() -> bool:
    """Whether stdout and stderr are out; a flush that fails (the reader
    went away) is left to the ordinary exit, which reports it."""
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        return False
    return True


def run(program: str, args: list[str]) -> int:
    """The exit code of `program` run on `args`: through the evaluation
    service when this CLI uses one and the verb is one it answers."""
    remote = _through_service(program, args)
    if remote is not None:
        return remote
    return run_here(program, args)


def run_here(program: str, args: list[str], standby: Standby | None = None) -> int:
    """The exit code of `program` run on `args` in this process; `standby`:
    the one a warm server's spare made for this call (docs/standby.md),
    handed to its eval."""
    fast = _fast_path(program, args, standby)
    return fast if fast is not None else _slow(program, args)


def _through_service(program: str, args: list[str]) -> int | None:
    """The exit code of a call sent to the evaluation service, or None
    when it runs here (no service, or a verb it does not answer)."""
    from .service import client

    verb = client.remote_verb(program, args)
    if verb is None:
        return None
    socket_path = client.service_socket()
    if socket_path is None:
        return None
    from . import commands

    return commands.run(lambda: client.call(socket_path, verb, args))


def _slow(program: str, args: list[str]) -> int:
    """The exit code of a call click parses (help, a mistake, another verb)."""
    from . import commands

    try:
        from .cli import registry as cli
    except ModuleNotFoundError as exc:  # click, say, is not installed
        return commands.run(_raising(exc))
    return cli.main(program, args)


def fast_verb(program: str, args: list[str]) -> str | None:
    """The fast verb `program` started with `args` names, if any."""
    if program in ("hills", "git-hill") and args[:1] and args[0] in FAST:
        return args[0]
    return next((verb for verb, name in FAST.items() if name and name == program), None)


def _fast_path(program: str, args: list[str], standby: Standby | None = None) -> int | None:
    """The exit code of a call its fast path takes, or None for one it
    leaves to click (help, a mistake, another verb)."""
    verb = fast_verb(program, args)
    if verb is None:
        return None
    if program in ("hills", "git-hill"):
        prog, rest = ("git hill" if program == "git-hill" else "hills") + " " + verb, args[1:]
    else:
        prog, rest = program, args
    import importlib

    from . import commands

    module = importlib.import_module(f"{commands.__name__}.{verb}")
    parsed = module.DECLARED.parse(rest)
    if parsed is None:
        return None
    if standby is not None:  # only an eval's spare makes one (hills.warm.spare)
        parsed["standby"] = standby
    return commands.run(lambda: module.run(**parsed), hint=lambda: f"see '{prog} --help'")


def _raising(exc: BaseException) -> Callable[[], int]:
    """A call that fails as the import did, for the funnel to explain."""
    def call() -> int:
        raise exc

    return call


if __name__ == "__main__":
    main()
