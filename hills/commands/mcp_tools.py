"""The tools `hills mcp` serves, free of the mcp package: each tool's input
schema (an allow-list built from the server's flags), the check of a
call's arguments against it, and the call itself through hills.api,
answered as a short text and a JSON value (docs/mcp.md)."""

from __future__ import annotations

import json
import os

from ..base import errors
from ..base.records import frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

# The longest note the attempts log keeps (hills-eval(1), --note).
NOTE_LIMIT = 200
# What a knob or a param may be given as; the pipeline types and bounds it.
SCALAR = {"type": ["number", "string", "boolean"]}


@frozen
class Policy:
    """What the server was started to allow: the hills it serves (by name,
    never a path from the agent), the folders a submission or a report
    file must lie under, and the flags past the default (--final, params
    by name, the most replicates an eval may ask for)."""

    hills: tuple[str, ...]
    roots: tuple[str, ...]
    allow_final: bool = False
    allow_params: tuple[str, ...] = ()
    max_repeat: int = 5
    # (name, folder, tree hash) of each hill, read once at start: a call
    # names the hill, the server scores that folder at that version only.
    served: tuple[tuple[str, str, str | None], ...] = ()

    def folder(self, name: str) -> str:
        """The folder of the served hill `name` (the name itself when the
        policy was made without folders, as the unit tests make it)."""
        return next((folder for served, folder, _ in self.served if served == name), name)

    def tree(self, name: str) -> str | None:
        return next((tree for served, _, tree in self.served if served == name), None)


@frozen
class Answer:
    """One tool call's answer: a short text for the model to read, the JSON
    value behind it (a report, a description), and whether it is an error."""

    summary: str
    data: Any
    error: bool = False


@frozen
class Tool:
    """One tool: its name, what it does, its input schema under a policy,
    whether it only reads, and the call."""

    name: str
    title: str
    description: str
    schema: Callable[[Policy], dict[str, Any]]
    call: Callable[[Policy, dict[str, Any]], Answer]
    read_only: bool = True


class UnknownTool(LookupError):
    """A call names no tool this server has: a protocol error, not a tool's."""


# ---------------------------------------------------------------- schemas

def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    # additionalProperties false: an argument the schema does not list is
    # refused (check_arguments), never ignored.
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def _hill_property(policy: Policy) -> dict[str, Any]:
    return {"type": "string", "enum": list(policy.hills),
            "description": "The hill's name: one of those this server was started with (--hill)."}


def _hill_schema(policy: Policy) -> dict[str, Any]:
    return _object({"hill": _hill_property(policy)}, ["hill"])


def _report_schema(policy: Policy) -> dict[str, Any]:
    return _object({
        "report": {"type": "object", "description": "A report, as the eval tool returned it."},
        "path": {"type": "string", "description": "Or the path of a report file, under the server's roots."},
    }, [])


def _eval_schema(policy: Policy) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "submission": {"type": "string",
                       "description": "The submission folder: a path under the server's roots "
                                      f"({', '.join(policy.roots)}); a relative one is read from the first."},
        "hill": _hill_property(policy),
        "knobs": {"type": "object", "additionalProperties": SCALAR,
                  "description": "Knobs the submission declares in its params.json, NAME to value; "
                                 "refused outside their declared range."},
        "repeat": {"type": "integer", "minimum": 1, "maximum": policy.max_repeat,
                   "description": f"Replicates to run (fresh seeds), at most {policy.max_repeat}; "
                                  "the metrics are their medians."},
        "note": {"type": "string", "maxLength": NOTE_LIMIT,
                 "description": "What this attempt changes, in one line; kept in the attempts log."},
    }
    if policy.allow_params:
        properties["params"] = {
            "type": "object", "additionalProperties": False,
            "properties": {name: {**SCALAR, "description": f"The hill's param '{name}'."}
                           for name in policy.allow_params},
            "description": "Params of hill.yaml, NAME to value, among those the server allows (--allow-param); "
                           "refused outside their declared range."}
    if policy.allow_final:
        properties["final"] = {"type": "boolean",
                               "description": "Holdout mode: spends the hill version's final budget."}
    return _object(properties, ["submission", "hill"])


# ---------------------------------------------------------------- checks

# Why an argument a default server leaves out is missing, and the flag
# that would allow it: said where the agent reads the refusal.
_FLAGGED = {
    "final": ("this server was started without --allow-final",
              "the holdout is the person's to spend: they may restart the server with 'hills mcp --allow-final'"),
    "params": ("this server was started without --allow-param",
               "a hill's params change what is measured: the person may restart the server with "
               "'hills mcp --allow-param NAME'"),
}


def check_arguments(tool: Tool, policy: Policy, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
    """The arguments, checked against the tool's schema under `policy`: an
    unknown argument, a missing one or a value of the wrong kind is a
    usage error naming it, before anything runs."""
    given = dict(arguments or {})
    schema = tool.schema(policy)
    properties = schema["properties"]
    for name in given:
        if name not in properties:
            reason, hint = _FLAGGED.get(name, ("no such argument", None))
            allowed = ", ".join(properties) or "none"
            raise errors.UsageError(f"tool '{tool.name}' takes no argument '{name}': {reason}",
                                    hint=hint or f"its arguments: {allowed}")
    if "params" in given and isinstance(given["params"], dict):
        for name in given["params"]:
            if name not in policy.allow_params:
                raise errors.UsageError(f"param '{name}' may not be set through this server",
                                        hint=f"it allows {', '.join(policy.allow_params)}; the person may add "
                                             f"'--allow-param {name}' to 'hills mcp'")
    import jsonschema

    problems = sorted(jsonschema.Draft202012Validator(schema).iter_errors(given), key=lambda e: list(e.path))
    if problems:
        where = "/".join(str(part) for part in problems[0].absolute_path) or "arguments"
        raise errors.UsageError(f"tool '{tool.name}': '{where}': {problems[0].message}",
                                hint=f"the tool's input schema lists its arguments: {', '.join(properties)}")
    return given


def under_roots(policy: Policy, path: str, what: str) -> str:
    """`path` resolved (links followed once, here), refused unless it lies
    under one of the server's roots: the server reads as the person, out
    of the agent's sandbox, so the agent names only what it may show."""
    resolved = os.path.realpath(os.path.join(policy.roots[0], os.path.expanduser(path)))
    for root in policy.roots:
        real_root = os.path.realpath(root)
        if os.path.commonpath([resolved, real_root]) == real_root:
            return resolved
    raise errors.UsageError(f"{what} '{path}' is outside the folders this server reads ({', '.join(policy.roots)})",
                            hint="put it under one of them, or start 'hills mcp' with --root DIR")


# ---------------------------------------------------------------- calls

def _describe(policy: Policy, args: dict[str, Any]) -> Answer:
    from .. import api

    described = api.describe(policy.folder(args["hill"]))
    metrics = ", ".join(f"{m.get('name')} ({m.get('direction')})" for m in described.get("metrics") or []
                        if isinstance(m, dict))
    params = ", ".join(described.get("params") or {}) or "none"
    tree = (described.get("tree_hash") or "not committed")[:12]
    lines = [f"hill '{described.get('hill')}' {described.get('version')} (tree {tree})",
             f"metrics: {metrics or 'none'}", f"params: {params}"]
    if described.get("description"):
        lines.insert(1, str(described["description"]))
    return Answer("\n".join(lines), described)


def _eval(policy: Policy, args: dict[str, Any]) -> Answer:
    from .. import api
    from ..evidence.report import summary_line

    submission = under_roots(policy, args["submission"], "submission")
    if not os.path.isdir(submission):
        raise errors.UsageError(f"submission '{args['submission']}' is not a folder",
                                hint="the eval tool scores a submission folder, as 'hills eval DIR' does")
    _same_version(policy, args["hill"], api.describe(policy.folder(args["hill"])).get("tree_hash"))
    try:
        report = api.evaluate(submission, policy.folder(args["hill"]), params=args.get("params"),
                              final=bool(args.get("final")), repeat=int(args.get("repeat", 1)),
                              note=args.get("note"), knobs=args.get("knobs"))
    except errors.HillsError as problem:
        logged = getattr(problem, "report", None)
        if logged is not None:  # refused after it was logged: the report says how far it got
            problem.logged_report = logged.data  # type: ignore[attr-defined]
        raise
    data = report.data
    _same_version(policy, args["hill"], data.get("tree_hash"))
    lines = [f"{data.get('hill')} @ {(data.get('tree_hash') or 'working tree')[:12]}: {summary_line(data)}",
             "official" if report.official else f"unofficial: {report.official_reason}"]
    if report.reason:
        lines.append(f"reason: {report.reason}")
    return Answer("\n".join(lines), data)


def _same_version(policy: Policy, name: str, tree: str | None) -> None:
    """Refuse a hill whose committed version is no longer the one the
    server started on: the agent may write where the hill lives (a
    project's .hills/), and must not commit the evaluator it is scored by."""
    started = policy.tree(name)
    if policy.served and tree != started:
        raise errors.Refused(f"hill '{name}' is at tree {str(tree)[:12]}, not the version {str(started)[:12]} this "
                             "server was started on", hint="a person restarts 'hills mcp' to serve a new version")


def _attempts(policy: Policy, args: dict[str, Any]) -> Answer:
    from .. import api
    from ..evidence.report import summary_line

    found = api.attempts(policy.folder(args["hill"]))
    lines = [f"{len(found)} attempts on hill '{args['hill']}'; log chain "
             + ("ok" if found.chain_ok else "BROKEN")]
    for best in found.best[:3]:
        lines.append(f"best: {summary_line(best)}")
    return Answer("\n".join(lines), found.data)


def _report_of(policy: Policy, args: dict[str, Any]) -> dict[str, Any]:
    if ("report" in args) == ("path" in args):
        raise errors.UsageError("give the report or its path, one of the two",
                                hint="'report' takes the JSON the eval tool returned, 'path' a report file")
    if "report" in args:
        return dict(args["report"])
    from ..evidence import signing

    return signing.load_report(under_roots(policy, args["path"], "report file"))


def _verify(policy: Policy, args: dict[str, Any]) -> Answer:
    from .. import api

    found = api.verify(_report_of(policy, args))
    data = {"valid": found.valid, "message": found.message, "signer": found.signer, "trust": found.trust}
    if found.valid:
        return Answer(f"signature valid: signed by {found.signer}, trust {found.trust}", data)
    return Answer(f"signature INVALID: {found.message}", data)


def _show(policy: Policy, args: dict[str, Any]) -> Answer:
    from .. import api
    from ..views import show

    report = _report_of(policy, args)
    found = api.verify(report)
    lines: list[str] = []
    show.render(report, "signature valid" if found.valid else f"signature INVALID ({found.message})",
                lines.append, found.signer if found.valid else None)
    return Answer("\n".join(lines), {"text": "\n".join(lines), "valid": found.valid})


TOOLS = (
    Tool("describe", "Describe a hill",
         "What a climber needs of a hill: its task, submission contract, params, metrics and holdout budget "
         "(what 'hills describe NAME --json' prints).", _hill_schema, _describe),
    Tool("eval", "Score a submission",
         "Score a submission folder against a hill's committed evaluator, confined as 'hills eval' confines it; "
         "returns the signed report (logged in the hill's attempts). Never --final unless the server allows it.",
         _eval_schema, _eval, read_only=False),
    Tool("attempts", "List a hill's attempts",
         "The attempts of the hill's committed version, its best reports and its log's state "
         "(what 'hills attempts NAME --json' prints).", _hill_schema, _attempts),
    Tool("show", "Render a report",
         "A report rendered for a person: verdict, metrics, breakdown, instances, and whether its signature "
         "holds.", _report_schema, _show),
    Tool("verify", "Verify a report",
         "Whether a report's signature holds, by this machine's key or one it trusts, and who signed it.",
         _report_schema, _verify),
)
BY_NAME = {tool.name: tool for tool in TOOLS}


def call(policy: Policy, name: str, arguments: Mapping[str, Any] | None) -> Answer:
    """Run tool `name`: its answer, or hills' refusal as an error answer
    (message, hint, exit code) the model can read and act on."""
    tool = BY_NAME.get(name)
    if tool is None:
        raise UnknownTool(name)
    try:
        return tool.call(policy, check_arguments(tool, policy, arguments))
    except errors.HillsError as problem:
        return refusal(problem)


def refusal(problem: errors.HillsError) -> Answer:
    """A hills error as a tool's error answer, in the command line's words."""
    text = f"error: {problem.message}" + (f"\nhint: {problem.hint}" if problem.hint else "")
    data: dict[str, Any] = {"error": problem.message, "hint": problem.hint, "exit_code": problem.exit_code}
    logged = getattr(problem, "logged_report", None)
    if logged is not None:
        data["report"] = logged
    return Answer(text, data, error=True)


def as_text(answer: Answer) -> str:
    """The JSON of an answer, for the text block beside its structured value."""
    return json.dumps(answer.data, ensure_ascii=False)
