"""The CLI's side of the evaluation service: whether this CLI talks to
one, and sending a verb there, the caller's folders and files streamed,
the command's output and exit code coming back (docs/service.md)."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .protocol import Connection

CLIENT_CONFIG = "/etc/hills/service.json"
CLIMBER_VERBS = frozenset({"eval", "tune", "describe", "attempts", "log", "rank", "show", "verify", "list", "key"})
ADMIN_VERBS = CLIMBER_VERBS | {"pin", "commit"}
# Verbs whose positional arguments name the caller's folders and files.
FILE_VERBS = frozenset({"eval", "tune", "rank", "show", "verify"})
STANDALONE = {"hills-eval": "eval", "hills-commit": "commit"}


def client_config_path() -> str:
    """Where the client finds the socket (`HILLS_SERVICE_CONFIG` overrides)."""
    return os.environ.get("HILLS_SERVICE_CONFIG") or CLIENT_CONFIG


def service_socket() -> str | None:
    """The socket of the service this CLI uses, or None for same-user
    mode: `HILLS_SERVICE` when set (`off` forces same-user mode), else the
    socket the client config names, when it exists."""
    named = os.environ.get("HILLS_SERVICE")
    if named:
        return None if named == "off" else named
    try:
        with open(client_config_path(), encoding="utf-8") as handle:
            text = handle.read()
    except OSError:
        return None
    import json

    try:
        configured = json.loads(text).get("socket")
    except (ValueError, AttributeError):
        return None
    return configured if isinstance(configured, str) and os.path.exists(configured) else None


def remote_verb(program: str, args: list[str]) -> str | None:
    """The verb `program args` would send to the service, if any: help
    and `verify --export` stay local."""
    if program in ("hills", "git-hill"):
        verb = args[0] if args else None
    else:
        verb = STANDALONE.get(program)
    if verb not in ADMIN_VERBS or any(arg in ("-h", "--help") for arg in args):
        return None
    if verb == "verify" and any(arg == "--export" or arg.startswith("--export=") for arg in args):
        return None
    return verb


def _value_options(verb: str) -> set[str]:
    """The option names of `verb` that take a value."""
    import importlib

    module = importlib.import_module(f"hills.commands.{verb}")
    declared = getattr(module, "DECLARED", None)
    if declared is not None:
        return {name for name, option in declared.options.items() if not option.flag}
    import click

    command = module.command
    return {name for param in command.params if isinstance(param, click.Option) and not param.is_flag
            for name in param.opts}


class Request:
    """A verb's argv with the caller's paths replaced by placeholders."""

    def __init__(self, verb: str, args: list[str]) -> None:
        self.verb = verb
        self.argv: list[str] = []
        self.files: list[tuple[str, str]] = []  # (kind, local path)
        self.output: str | None = None
        if verb == "commit":
            return
        takes_value = _value_options(verb) if verb in FILE_VERBS else set()
        index = 0
        while index < len(args):
            arg = args[index]
            index += 1
            if verb in FILE_VERBS and arg in ("-o", "--output") and index < len(args):
                self.output = args[index]
                index += 1
                continue
            if arg.startswith("--output="):
                self.output = arg.partition("=")[2]
                continue
            if arg in takes_value and index < len(args):
                self.argv += [arg, args[index]]
                index += 1
                continue
            if verb in FILE_VERBS and not arg.startswith("-") and os.path.exists(arg):
                self.argv.append(self._placeholder("dir" if os.path.isdir(arg) else "file", arg))
                continue
            if verb in FILE_VERBS and arg == "-":
                self.argv.append(self._placeholder("file", "-"))
                continue
            self.argv.append(arg)

    def _placeholder(self, kind: str, path: str) -> str:
        self.files.append((kind, path))
        return f"@{len(self.files) - 1}"


def call(socket_path: str, verb: str, args: list[str]) -> int:
    """Run `hills VERB ARGS` through the service at `socket_path`."""
    import socket

    from . import protocol
    from .errors import EnvironmentProblem

    request = Request(verb, args[1:] if args and args[0] == verb else args)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(socket_path)
    except OSError as exc:
        raise EnvironmentProblem(f"cannot reach the hills service at '{socket_path}': {exc.strerror or exc}",
                                 hint="start it (see 'hills setup service'), or set HILLS_SERVICE=off "
                                      "for same-user mode") from None
    conn = protocol.Connection(sock)
    try:
        return _exchange(conn, request, args)
    finally:
        sock.close()


def _exchange(conn: Connection, request: Request, args: list[str]) -> int:
    from . import protocol

    bundle_dir = None
    if request.verb == "commit":
        request.files, request.argv = [("file", "")], ["@0"]
    conn.record({"type": "request", "version": protocol.VERSION, "verb": request.verb, "argv": request.argv,
                 "files": [kind for kind, _ in request.files]})
    answer = conn.receive_record()
    if answer["type"] == "error":
        return _raise(answer)
    try:
        if request.verb == "commit":
            bundle_dir, bundle_file = _commit_locally(args)
            request.files = [("file", bundle_file)]
        for kind, path in request.files:
            (protocol.send_folder if kind == "dir" else protocol.send_file)(conn, path)
        conn.record({"type": "run"})
    finally:
        if bundle_dir is not None:
            import shutil

            shutil.rmtree(bundle_dir, ignore_errors=True)
    return _replies(conn, request)


def _replies(conn: Connection, request: Request) -> int:
    from . import protocol
    from .errors import EnvironmentProblem

    captured = bytearray()
    names: list[tuple[bytes, bytes]] = []
    for kind, payload in protocol.frames(conn):
        if kind == protocol.STDERR:
            for theirs, ours in names:
                payload = payload.replace(theirs, ours)
        if kind == protocol.STDOUT:
            sys.stdout.buffer.write(payload)
            sys.stdout.flush()
            if request.output is not None:
                captured += payload
        elif kind == protocol.STDERR:
            sys.stderr.buffer.write(payload)
            sys.stderr.flush()
        elif kind == protocol.RECORD:
            record = protocol.parse_record(payload)
            if record["type"] == "error":
                return _raise(record)
            if record["type"] == "paths":
                names = _local_names(record.get("paths"), request)
            if record["type"] == "exit":
                if request.output is not None and captured:
                    from . import state

                    state.atomic_write(request.output, bytes(captured))
                return int(record["exit"])
    raise EnvironmentProblem("the hills service closed the connection before the command ended",
                             hint="see the service's log")


def _local_names(paths: object, request: Request) -> list[tuple[bytes, bytes]]:
    """(the service's path, the caller's) for each placeholder, longest first."""
    if not isinstance(paths, dict):
        return []
    local = {f"@{index}": path for index, (_, path) in enumerate(request.files)}
    pairs = [(os.fsencode(theirs), os.fsencode(local[name])) for theirs, name in paths.items()
             if isinstance(theirs, str) and name in local and theirs]
    return sorted(pairs, key=lambda pair: -len(pair[0]))


def _raise(record: dict[str, Any]) -> int:
    from .errors import HillsError

    problem = HillsError(str(record.get("message")), record.get("hint"))
    problem.exit_code = int(record.get("exit", 1))
    raise problem


def _commit_locally(args: list[str]) -> tuple[str, str]:
    """Commit through the gate here, as ever, then write the bundle of
    HEAD that the service takes: (folder to remove, bundle file)."""
    import tempfile

    from . import bundle, hill
    from .commands import commit as commit_command
    from .errors import Refused

    parsed = commit_command.DECLARED.parse(args[1:] if args and args[0] == "commit" else args)
    if parsed is None:
        from .errors import UsageError

        raise UsageError("expected: hills commit NAME -m MESSAGE", hint="see 'hills commit --help'")
    try:
        commit_command.run(**parsed)  # type: ignore[arg-type]
    except Refused as exc:
        if not exc.message.startswith("nothing to commit"):
            raise
    folder = tempfile.mkdtemp(prefix="hills-push-")
    path = os.path.join(folder, "version.bundle")
    bundle.write(hill.resolve(str(parsed["name"])), path)
    return folder, path
