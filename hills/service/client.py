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


def parsed_options(verb: str, args: list[str]) -> dict[str, Any]:
    """The values the command's own parser gives `args` (the fast parse
    where the verb has one, else click's), so that the service gets what
    the same command line means in same-user mode; a mistake is a usage
    error, as it would be there."""
    import importlib

    module = importlib.import_module(f"hills.commands.{verb}")
    declared = getattr(module, "DECLARED", None)
    if declared is not None:
        parsed = declared.parse(args)
        if parsed is not None:
            return parsed
    import click

    from ..base.errors import UsageError

    command = module.command
    try:
        with command.make_context(f"hills {verb}", list(args)) as context:
            return dict(context.params)
    except click.exceptions.Exit as exc:  # --help and the like, which stay local anyway
        raise UsageError(f"'hills {verb}' stopped early (exit {exc.exit_code})") from None
    except click.ClickException as exc:
        message = exc.format_message().rstrip(".")
        problem = UsageError(message[:1].lower() + message[1:], hint=f"see 'hills {verb} --help'")
        raise problem from None


class Request:
    """A verb's typed request record (hills.service.requests): its fields,
    the caller's folders and files to stream, and the files the client
    writes itself once the service sent their bytes."""

    def __init__(self, verb: str, args: list[str]) -> None:
        from . import requests as service_requests
        from ..base.errors import UsageError

        self.verb = verb
        self.declared = service_requests.VERBS[verb]
        self.fields: dict[str, Any] = {}
        self.files: list[tuple[str, str]] = []  # (kind, local path), in stream order
        self.outputs: dict[str, str] = {}  # output key -> local path
        if verb == "commit":
            return
        parsed = parsed_options(verb, args)
        taken = {field.dest for field in self.declared.fields}
        for dest, value in parsed.items():
            if dest not in taken and value not in (None, False, ()):
                shown = "--" + dest.replace("_", "-")
                raise UsageError(f"'{shown}' is not taken through the hills service",
                                 hint=f"run it in same-user mode: HILLS_SERVICE=off hills {verb} ...")
        self.fields, self.files, self.outputs = service_requests.record_values(self.declared, parsed)
        if verb == "tune":
            submission = str(parsed["submission"])
            self.outputs["best-params"] = os.path.abspath(submission).rstrip(os.sep) + ".best-params.json"

    def record(self) -> dict[str, Any]:
        from . import protocol

        return {"type": "request", "version": protocol.VERSION, "verb": self.verb, "fields": self.fields}


def call(socket_path: str, verb: str, args: list[str]) -> int:
    """Run `hills VERB ARGS` through the service at `socket_path`."""
    import socket

    from . import protocol
    from ..base.errors import EnvironmentProblem

    args = args[1:] if args and args[0] == verb else args
    request = Request(verb, args)
    _check_outputs(request)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(socket_path)
    except OSError as exc:
        raise EnvironmentProblem(f"cannot reach the hills service at '{socket_path}': {exc.strerror or exc}",
                                 hint="start it (see 'hills setup service'), or set HILLS_SERVICE=off "
                                      "for same-user mode") from None
    try:
        return _exchange(protocol.Connection(sock), request, args)
    finally:
        sock.close()


def _check_outputs(request: Request) -> None:
    """Refuse, before anything is sent, a folder or file the client could
    not send and a file it could not write."""
    from ..base.errors import UsageError

    for kind, path in request.files:
        if path == "-":
            continue
        try:
            os.lstat(path)
        except FileNotFoundError:
            raise UsageError(f"'{path}' does not exist: expected a {'folder' if kind == 'dir' else 'file'} "
                             "to send to the hills service") from None
        except OSError as exc:
            raise UsageError(f"cannot send '{path}': {exc.strerror or exc}",
                             hint="the client sends what you can read; the service opens no path a caller "
                                  "names") from None
    for path in request.outputs.values():
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise UsageError(f"cannot write '{path}': folder '{folder}' does not exist")


def _exchange(conn: Connection, request: Request, args: list[str]) -> int:
    from . import protocol

    if request.verb == "commit":
        request.fields = {"bundle": 0}
    try:
        conn.record(request.record())
    except protocol.Closed:
        pass  # refused before it read the request: its answer is waiting
    answer = conn.receive_record()
    if answer["type"] == "error":
        return _raise(answer)
    if answer["type"] != "accepted":
        raise protocol.ProtocolError(f"expected the service's accepted record, got '{answer['type']}'")
    bundle_dir = None
    try:
        if request.verb == "commit":
            # The admin's commit goes through the gate here, as ever; the
            # service waits for its bundle longer than for other streams.
            bundle_dir, bundle_file = _commit_locally(args)
            request.files = [("file", bundle_file)]
        try:
            for kind, path in request.files:
                (protocol.send_folder if kind == "dir" else protocol.send_file)(conn, path)
            conn.record({"type": "run"})
        except protocol.Closed:
            # The service stopped the upload (a bound, a deadline): its reason is waiting to be read.
            _refusal_waiting(conn)
            raise
    finally:
        if bundle_dir is not None:
            import shutil

            shutil.rmtree(bundle_dir, ignore_errors=True)
    return _replies(conn, request)


def _refusal_waiting(conn: Connection) -> None:
    """Raise the error record the service sent before it closed, if it did."""
    from . import protocol

    try:
        record = conn.receive_record()
    except protocol.ProtocolError:
        return
    if record.get("type") == "error":
        _raise(record)


def _replies(conn: Connection, request: Request) -> int:
    from . import protocol
    from ..base.errors import EnvironmentProblem

    names: list[tuple[bytes, bytes]] = []
    made: dict[str, bytearray] = {}
    receiving: bytearray | None = None
    for kind, payload in protocol.frames(conn):
        if kind == protocol.DATA and receiving is not None:
            receiving += payload
            continue
        if kind == protocol.STDERR or (kind == protocol.STDOUT and request.verb == "tune"):
            for theirs, ours in names:
                payload = payload.replace(theirs, ours)
        if kind == protocol.STDOUT:
            sys.stdout.buffer.write(payload)
            sys.stdout.flush()
        elif kind == protocol.STDERR:
            sys.stderr.buffer.write(payload)
            sys.stderr.flush()
        elif kind == protocol.RECORD:
            record = protocol.parse_record(payload)
            if record["type"] == "error":
                return _raise(record)
            if record["type"] == "paths":
                names = _local_names(record.get("paths"), request)
            if record["type"] == "file":
                key = record.get("key")
                if not isinstance(key, str) or key not in request.outputs:
                    raise protocol.ProtocolError(f"the service sent a file '{key}' this request did not ask for")
                receiving = made[key] = bytearray()
            if record["type"] == "exit":
                _write_outputs(request, made)
                return int(record["exit"])
    raise EnvironmentProblem("the hills service closed the connection before the command ended",
                             hint="see the service's log")


def _write_outputs(request: Request, made: dict[str, bytearray]) -> None:
    """Each file the service made for this request, written here, whole or not at all."""
    from ..base import state

    for key, content in made.items():
        state.atomic_write(request.outputs[key], bytes(content))


def _local_names(paths: object, request: Request) -> list[tuple[bytes, bytes]]:
    """(the service's path, the caller's) for each stream and output, longest first."""
    if not isinstance(paths, dict):
        return []
    local = {f"@{index}": path for index, (_, path) in enumerate(request.files)}
    local.update((f"@{key}", path) for key, path in request.outputs.items())
    pairs = [(os.fsencode(theirs), os.fsencode(local[name])) for theirs, name in paths.items()
             if isinstance(theirs, str) and name in local and theirs]
    return sorted(pairs, key=lambda pair: -len(pair[0]))


def _raise(record: dict[str, Any]) -> int:
    from ..base.errors import HillsError

    problem = HillsError(str(record.get("message")), record.get("hint"))
    problem.exit_code = int(record.get("exit", 1))
    raise problem


def _commit_locally(args: list[str]) -> tuple[str, str]:
    """Commit through the gate here, as ever, then write the bundle of
    HEAD that the service takes: (folder to remove, bundle file)."""
    import tempfile

    from ..disk import bundle, hill
    from ..commands import commit as commit_command
    from ..base.errors import Refused

    parsed = commit_command.DECLARED.parse(args)
    if parsed is None:
        from ..base.errors import UsageError

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
