"""The request records of the evaluation service (hills-service(5)): per
verb, the fields it takes, each field's type and check and who may use it.
The client builds a record from the options it parsed; the service checks
the record against the same table, refusing any field the table does not
declare, and builds the command line itself from the checked values. No
string a caller sends ever becomes an option or a path of the service."""

from __future__ import annotations

import re

from ..base.errors import Refused, UsageError
from ..base.records import frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

# What a field's value is on the wire and how the service passes it on:
# flag (true), hill (a hill name), tree (a tree hash or its prefix), count
# (an integer, at least `low`), int, pair (NAME=VALUE), choice, ray (the
# --on value, held against the service's config), folder and file (the
# index of a stream the client sends), output (true: the service makes the
# file in its request folder and sends its bytes back; the client writes it),
# text (a string the command checks itself, such as the note of -m).
KINDS = frozenset({"flag", "hill", "tree", "count", "int", "pair", "choice", "ray", "folder", "file", "output",
                   "text"})
STREAMED = frozenset({"folder", "file"})
RECORD_KEYS = frozenset({"type", "version", "verb", "fields"})
MAX_STREAMS = 100
MAX_VALUES = 1000
MAX_TEXT = 4096
_TREE = re.compile(r"^[0-9a-f]{4,64}$")
_PAIR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,99}$")
_INT_BOUND = 1 << 62


@frozen
class Field:
    """One field of a verb's request record. `key` is its name in the
    record (an option's long name without the dashes, or the argument's
    name); `option` the option the service passes it as (None for a
    positional argument); `dest` the name the command's parser gives it."""

    key: str
    option: str | None
    kind: str
    dest: str
    many: bool = False
    required: bool = False
    admin_only: bool = False
    low: int = 1
    choices: tuple[str, ...] = ()


def _field(key: str, kind: str, *, positional: bool = False, dest: str | None = None, **more: Any) -> Field:
    assert kind in KINDS
    return Field(key, None if positional else f"--{key}", kind, dest or key.replace("-", "_"), **more)


@frozen
class Verb:
    """A verb the service answers: its fields in the order its command
    line takes them, whether only admins may use it, and the files the
    command makes beside its input that the client writes (`implicit`)."""

    name: str
    fields: tuple[Field, ...]
    admin_only: bool = False
    implicit: tuple[str, ...] = ()

    def field(self, key: str) -> Field | None:
        return next((field for field in self.fields if field.key == key), None)


_JSON = _field("json", "flag", dest="as_json")
_HILL_OPTION = _field("hill", "hill", dest="hill_name")
# The evaluator's own output (--verbose) and the scoring of an unclean
# working tree (--force, --current) are the hill's author's business: the
# evaluator's stderr can hold what it read of the held-out data.
VERBS: dict[str, Verb] = {verb.name: verb for verb in (
    Verb("eval", (
        _field("submissions", "folder", positional=True, many=True, required=True),
        _field("hill", "hill", dest="hill_name", required=True),
        _field("param", "pair", dest="params", many=True),
        _field("final", "flag"),
        _field("force", "flag", admin_only=True),
        _field("current", "flag", admin_only=True),
        _field("queue", "flag"),
        _field("verbose", "flag", admin_only=True),
        _field("output", "output"),
        _field("repeat", "count"),
        _field("against", "folder"),
        _field("knob", "pair", dest="knobs", many=True),
        _JSON,
        _field("metric-lines", "flag"),  # formatting only: the report is made and signed as ever
        _field("colon-lines", "flag"),
        _field("on", "ray"),
        _field("workers", "count"),
        _field("summary-only", "flag"),
        _field("quiet", "flag"),
        _field("progress", "flag"),
        _field("note", "text"),
    )),
    Verb("tune", (
        _field("submission", "folder", positional=True, required=True),
        _field("hill", "hill", dest="hill_name", required=True),
        _field("budget", "count", required=True),
        _field("tuner", "choice", choices=("random", "optuna")),
        _field("parallel", "count"),
        _field("param", "pair", dest="params", many=True),
        _field("seed", "int"),
        _field("on", "ray"),
        _field("workers", "count"),
        _JSON,
    ), implicit=("best-params",)),
    Verb("describe", (_field("name", "hill", positional=True, required=True), _JSON)),
    Verb("log", (_field("name", "hill", positional=True, required=True), _JSON)),
    Verb("attempts", (_field("name", "hill", positional=True, required=True), _field("current", "flag"),
                      _field("tree", "tree", dest="tree_hash"), _JSON)),
    Verb("rank", (_field("reports", "file", positional=True, many=True), _HILL_OPTION, _JSON)),
    Verb("show", (_field("report", "file", positional=True, required=True, dest="report_path"),
                  _field("picture", "output", dest="picture_path"))),
    Verb("verify", (_field("reports", "file", positional=True, many=True, required=True),)),
    Verb("list", (_JSON,)),
    Verb("key", (_JSON,)),
    Verb("pin", (_field("name", "hill", positional=True, required=True), _field("tree", "tree", positional=True),
                 _field("clear", "flag")), admin_only=True),
    Verb("commit", (_field("bundle", "file", positional=True, required=True),), admin_only=True),
)}


def option_name(key: object) -> str:
    """How a refusal names a record key: as the option it would be."""
    text = str(key)[:60]
    return f"--{text}" if re.match(r"^[a-z][a-z0-9-]*$", text) else text


@frozen
class Typed:
    """A checked request: the verb, its checked values by key, and for
    each stream the kind ('dir' or 'file'), in the order they are sent."""

    verb: Verb
    values: dict[str, Any]
    streams: tuple[str, ...]

    def evaluators(self) -> int:
        """How many evaluators this request runs at once: `tune --parallel
        K` runs K; a cluster run's evaluators are the cluster's, not ours."""
        if self.values.get("on") is not None:
            return 1
        if self.verb.name == "tune":
            return int(self.values.get("parallel") or 1)
        return 1 if self.verb.name == "eval" else 0


def check(request: Mapping[str, Any], role: str, user: str) -> Typed:
    """The request record checked against its verb's fields, for a caller
    of `role`: a field the verb does not declare, one the role may not use,
    or a value of the wrong type is refused, by name."""
    verb = VERBS.get(request.get("verb"))  # type: ignore[arg-type]
    if verb is None:
        raise UsageError(f"'{str(request.get('verb'))[:60]}' is not a verb the hills service answers",
                         hint="it answers " + ", ".join(sorted(VERBS)))
    if verb.admin_only and role != "admin":
        raise Refused(f"'hills {verb.name}' is for the service's admins; user '{user}' is a {role}",
                      hint="an admin commits and pins; climbers evaluate and read results")
    extra = sorted(set(request) - RECORD_KEYS)
    if extra:
        raise UsageError(f"'{option_name(extra[0])}' is not taken through the hills service: a request record "
                         f"holds only {', '.join(sorted(RECORD_KEYS))}", hint="see hills-service(5), REQUESTS")
    fields = request.get("fields")
    if not isinstance(fields, dict):
        raise UsageError("a request record needs 'fields', an object of the verb's fields")
    values: dict[str, Any] = {}
    streams: dict[int, str] = {}
    for key, value in fields.items():
        field = verb.field(key)
        if field is None:
            raise UsageError(f"'{option_name(key)}' is not taken through the hills service",
                             hint=f"through the service, 'hills {verb.name}' takes "
                                  + (", ".join(_shown(known) for known in verb.fields) or "no options"))
        if field.admin_only and role != "admin":
            raise Refused(f"'{_shown(field)}' of 'hills {verb.name}' is for the service's admins; "
                          f"user '{user}' is a {role}", hint=f"run 'hills {verb.name}' without {_shown(field)}")
        values[key] = _checked(field, value, streams)
    for field in verb.fields:
        if field.required and _absent(values.get(field.key)):
            raise UsageError(f"'hills {verb.name}' through the service needs '{_shown(field)}'")
    if sorted(streams) != list(range(len(streams))):
        raise UsageError("the request's streams must be numbered 0, 1, 2... each once")
    return Typed(verb, values, tuple(streams[index] for index in range(len(streams))))


def _absent(value: object) -> bool:
    """Whether a value says nothing: none, a flag not given, no values (a
    stream's number 0 is a value)."""
    return value is None or value is False or value == ()


def _shown(field: Field) -> str:
    return field.option or field.key.upper()


def _checked(field: Field, value: object, streams: dict[int, str]) -> Any:
    if field.many:
        if not isinstance(value, list) or len(value) > MAX_VALUES:
            raise UsageError(f"'{_shown(field)}': expected a list of at most {MAX_VALUES} values")
        return tuple(_one(field, item, streams) for item in value)
    return _one(field, value, streams)


def _one(field: Field, value: object, streams: dict[int, str]) -> Any:
    from ..base.names import validate_name

    name, kind = _shown(field), field.kind
    if kind in ("flag", "output"):
        if not isinstance(value, bool):
            raise UsageError(f"'{name}': expected true or false")
        return value
    if kind == "hill":
        return validate_name(value)
    if kind in ("count", "int"):
        low = field.low if kind == "count" else -_INT_BOUND
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value < _INT_BOUND:
            raise UsageError(f"'{name}': expected an integer" + (f" of at least {low}" if kind == "count" else ""))
        return value
    if kind in STREAMED:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < MAX_STREAMS \
                or value in streams:
            raise UsageError(f"'{name}': expected the number of a stream the request sends (0 to "
                             f"{MAX_STREAMS - 1}, each once); the service opens no path a caller names",
                             hint="name hills by name; the client streams the folders and files you pass")
        streams[value] = "dir" if kind == "folder" else "file"
        return value
    if not isinstance(value, str) or not value or len(value) > MAX_TEXT or "\0" in value:
        raise UsageError(f"'{name}': expected a text of 1 to {MAX_TEXT} characters")
    if kind == "tree" and not _TREE.match(value):
        raise UsageError(f"'{name}' '{value[:80]}': expected a tree hash (4 to 64 lowercase hex digits)")
    if kind == "pair" and not _PAIR_NAME.match(value.partition("=")[0]) or kind == "pair" and "=" not in value:
        raise UsageError(f"'{name}' '{value[:80]}': expected NAME=VALUE")
    if kind == "choice" and value not in field.choices:
        raise UsageError(f"'{name}' '{value[:80]}': expected one of {', '.join(field.choices)}")
    return value


def ray_address(on: str, configured: str | None) -> str:
    """The cluster a `--on` through the service goes to: only the one the
    service's config names (`ray_address`); `--on ray` means that one."""
    if configured is None:
        raise UsageError("'--on' is not taken through this hills service: its admin configured no Ray cluster",
                         hint="run without --on, or ask the admin to set ray_address in the service's config "
                              "(hills setup service --ray ray://HOST:PORT)")
    if on not in ("ray", configured):
        raise UsageError(f"'--on {on[:80]}' names a cluster this hills service does not use; it runs only on the "
                         "cluster its admin configured", hint="pass --on ray")
    return configured


def argv_for(typed: Typed, paths: Mapping[str, str], ray: str | None) -> list[str]:
    """The command line the service runs, built from checked values only:
    options as `--name=value` (a value can never read as an option), the
    stream and output paths the service's own (`paths`, by stream number
    '@N' and output key '@key'), the positional arguments last."""
    options: list[str] = []
    positional: list[str] = []
    for field in typed.verb.fields:
        value: Any = typed.values.get(field.key)
        if _absent(value):
            continue
        items = value if field.many else (value,)
        for item in items:
            if field.kind == "flag":
                text = None
            elif field.kind in STREAMED:
                text = paths[f"@{item}"]
            elif field.kind == "output":
                text = paths[f"@{field.key}"]
            elif field.kind == "ray":
                text = ray_address(str(item), ray)
            else:
                text = str(item)
            if field.option is None:
                assert text is not None
                positional.append(text)
            else:
                options.append(field.option if text is None else f"{field.option}={text}")
    return [*options, *positional]


def record_values(verb: Verb, parsed: Mapping[str, Any]) -> tuple[dict[str, Any], list[tuple[str, str]],
                                                                   dict[str, str]]:
    """The client's half: from the values the command's parser gave, the
    record's fields, the local paths to stream (kind, path) in order, and
    the local files the client writes, by output key."""
    fields: dict[str, Any] = {}
    streams: list[tuple[str, str]] = []
    outputs: dict[str, str] = {}
    for field in verb.fields:
        value: Any = parsed.get(field.dest)
        if _absent(value) or (field.many and not value):
            continue
        if field.kind in STREAMED:
            kind = "dir" if field.kind == "folder" else "file"
            numbers = []
            for path in (value if field.many else (value,)):
                streams.append((kind, str(path)))
                numbers.append(len(streams) - 1)
            fields[field.key] = numbers if field.many else numbers[0]
        elif field.kind == "output":
            outputs[field.key] = str(value)
            fields[field.key] = True
        else:
            fields[field.key] = list(value) if field.many else value
    return fields, streams, outputs
