"""`hills setup mcp`: write (or print) the entry that makes an agent CLI
start `hills mcp`, in that CLI's own config file and format, merged into
what the file holds (docs/mcp.md)."""

from __future__ import annotations

import json
import os
import sys

import click

from ..base import errors
from ..base.records import frozen
from ..cli.options import CONTEXT
from ..cli.output import emit, say

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


@frozen
class Agent:
    """Where an agent CLI reads its MCP servers, and in which format: a JSON
    file with an `mcpServers` object, or TOML `[mcp_servers.NAME]` tables."""

    name: str
    file: str  # relative to the project, or under the home with "~/"
    kind: str  # "json" or "toml"
    extra: tuple[tuple[str, Any], ...] = ()  # keys the entry carries beside command and args


# Each CLI's file as its documentation names it. Codex reads only its user
# config (a project's .codex/config.toml only once the project is trusted);
# an eval can outlast its default 60 s tool timeout, hence tool_timeout_sec.
AGENTS = {
    "claude-code": Agent("claude-code", ".mcp.json", "json", (("type", "stdio"),)),
    "codex": Agent("codex", "~/.codex/config.toml", "toml", (("tool_timeout_sec", 600),)),
    "gemini-cli": Agent("gemini-cli", ".gemini/settings.json", "json"),
    "cursor": Agent("cursor", ".cursor/mcp.json", "json"),
}


@frozen
class Entry:
    """The server entry to write: its name in the config, the command line
    that starts the server, and the environment it needs."""

    name: str
    command: str
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()

    def fields(self, agent: Agent) -> dict[str, Any]:
        entry: dict[str, Any] = {key: value for key, value in agent.extra if key == "type"}
        entry.update(command=self.command, args=list(self.args))
        if self.env:
            entry["env"] = dict(self.env)
        entry.update((key, value) for key, value in agent.extra if key != "type")
        return entry


def config_path(agent: Agent, project: str) -> str:
    """The file `agent` reads its servers from, for the project folder."""
    if agent.file.startswith("~/"):
        if agent.name == "codex" and os.environ.get("CODEX_HOME"):
            return os.path.join(os.environ["CODEX_HOME"], "config.toml")
        return os.path.expanduser(agent.file)
    return os.path.join(project, agent.file)


# ---------------------------------------------------------------- merging

def _put_entry(path: str, config: dict[str, Any], key: str, kind: str, entry: Entry, agent: Agent,
               force: bool) -> None:
    """The entry put in `config[key]`, the servers of a JSON or TOML config:
    refused where that is not `kind` (an object, a table), or where it holds
    the name already and --force was not given."""
    servers = config.setdefault(key, {})
    if not isinstance(servers, dict):
        raise errors.UsageError(f"'{path}': '{key}' must be {kind}, got {type(servers).__name__}",
                                hint="fix the file, or add the entry by hand: 'hills setup mcp ... --print'")
    _refuse_existing(path, entry.name, servers, force)
    servers[entry.name] = entry.fields(agent)


def merged_json(path: str, text: str | None, entry: Entry, agent: Agent, force: bool) -> str:
    """The JSON config `text` (None: no file yet) with the entry in its
    `mcpServers`, every other key and server kept."""
    config: Any = {}
    if text is not None and text.strip():
        try:
            config = json.loads(text)
        except ValueError as exc:
            raise errors.UsageError(f"'{path}' is not valid JSON: {exc}",
                                    hint="fix the file, or add the entry by hand: 'hills setup mcp ... --print'") \
                from None
    if not isinstance(config, dict):
        raise errors.UsageError(f"'{path}': expected a JSON object at the top level, got {type(config).__name__}",
                                hint="fix the file, or add the entry by hand: 'hills setup mcp ... --print'")
    _put_entry(path, config, "mcpServers", "an object", entry, agent, force)
    return json.dumps(config, indent=2, ensure_ascii=False) + "\n"


def merged_toml(path: str, text: str | None, entry: Entry, agent: Agent, force: bool) -> str:
    """The TOML config `text` with the table `[mcp_servers.NAME]`: added at
    the end, or put in place of the old one, so every other line, comments
    included, stays as it was; the result is parsed back and must hold
    exactly the old config with the entry in it."""
    import tomllib

    import tomli_w

    try:
        config = tomllib.loads(text or "")
    except tomllib.TOMLDecodeError as exc:
        raise errors.UsageError(f"'{path}' is not valid TOML: {exc}",
                                hint="fix the file, or add the entry by hand: 'hills setup mcp ... --print'") from None
    _put_entry(path, config, "mcp_servers", "a table", entry, agent, force)
    table = tomli_w.dumps({"mcp_servers": {entry.name: entry.fields(agent)}})
    kept = _without_table(text or "", entry.name).rstrip("\n")
    result = (kept + "\n\n" if kept else "") + table
    try:
        if tomllib.loads(result) == config:
            return result
    except tomllib.TOMLDecodeError:
        pass
    # The old entry was not a table of its own (an inline table, dotted
    # keys): the file is written again from what it holds, comments lost.
    return tomli_w.dumps(config)


def _without_table(text: str, name: str) -> str:
    """`text` without the lines of `[mcp_servers.NAME]` and its sub-tables."""
    import re

    header = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
    ours = {f"mcp_servers.{name}", f'mcp_servers."{name}"'}
    kept, skipping = [], False
    for line in text.splitlines(keepends=True):
        found = header.match(line)
        if found:
            key = found.group(1).replace(" ", "")
            skipping = any(key == own or key.startswith(own + ".") for own in ours)
        if not skipping:
            kept.append(line)
    return "".join(kept)


def _refuse_existing(path: str, name: str, servers: dict[str, Any], force: bool) -> None:
    if name in servers and not force:
        raise errors.Refused(f"'{path}' has a server '{name}' already; nothing was written",
                             hint="pass --force to replace it, or --name to add another")


# ---------------------------------------------------------------- the command

def entry_for(name: str, hills: tuple[str, ...], project: str, allow_final: bool,
              allow_params: tuple[str, ...]) -> Entry:
    """The server entry: this interpreter running `hills mcp`, each hill by
    its folder (a name could resolve elsewhere from the agent's cwd; with a
    service, by its name), the project as the root, and HILLS_HOME when
    this shell sets one."""
    from .. import api
    from .mcp import served_as

    args = ["-m", "hills", "mcp"]
    for hill in hills:
        args += ["--hill", served_as(api.describe(hill))]
    args += ["--root", project]
    if allow_final:
        args.append("--allow-final")
    for param in allow_params:
        args += ["--allow-param", param]
    env = (("HILLS_HOME", os.environ["HILLS_HOME"]),) if os.environ.get("HILLS_HOME") else ()
    return Entry(name, sys.executable, tuple(args), env)


def claude_line(entry: Entry) -> str:
    """The `claude mcp add` line that writes the same entry into .mcp.json."""
    import shlex

    env = "".join(f" --env {shlex.quote(f'{key}={value}')}" for key, value in entry.env)
    return (f"claude mcp add --scope project --transport stdio{env} {shlex.quote(entry.name)} -- "
            + " ".join(shlex.quote(word) for word in (entry.command, *entry.args)))


def merged(agent: Agent, entry: Entry, project: str, force: bool) -> tuple[str, str, int]:
    """(path, new text, file mode) of the agent's config with the entry
    merged in; nothing written yet, so a refusal for one agent leaves every
    file as it was."""
    path = config_path(agent, project)
    try:
        with open(path, encoding="utf-8") as handle:
            text: str | None = handle.read()
    except FileNotFoundError:
        text = None
    except OSError as exc:
        raise errors.UsageError(f"cannot read '{path}': {exc.strerror}") from None
    merge = merged_toml if agent.kind == "toml" else merged_json
    return path, merge(path, text, entry, agent, force), os.stat(path).st_mode & 0o777 if text is not None else 0o644


def shown(agent: Agent, entry: Entry) -> str:
    """The entry as it would stand in the agent's file."""
    if agent.kind == "toml":
        import tomli_w

        return tomli_w.dumps({"mcp_servers": {entry.name: entry.fields(agent)}})
    return json.dumps({"mcpServers": {entry.name: entry.fields(agent)}}, indent=2, ensure_ascii=False)


@click.command("mcp", context_settings=CONTEXT)
@click.option("--agent", "agents", multiple=True, required=True, type=click.Choice(sorted(AGENTS)), metavar="NAME",
              help="The agent CLI to set up (repeatable): claude-code, codex, gemini-cli or cursor.")
@click.option("--hill", "hills", multiple=True, required=True, metavar="NAME",
              help="A hill the server serves (repeatable); written as its folder.")
@click.option("--name", default="hills", show_default=True, metavar="NAME", help="The server's name in the config.")
@click.option("--allow-final", is_flag=True, help="Start the server with --allow-final (see hills-mcp(1)).")
@click.option("--allow-param", "allow_params", multiple=True, metavar="NAME",
              help="Start the server with --allow-param NAME (repeatable).")
@click.option("--print", "print_only", is_flag=True, help="Write nothing: print each entry (and the claude line).")
@click.option("--force", is_flag=True, help="Replace a server of the same name already in the file.")
def command(agents: tuple[str, ...], hills: tuple[str, ...], name: str, allow_final: bool,
            allow_params: tuple[str, ...], print_only: bool, force: bool) -> int:
    """Write the entry that makes an agent CLI start 'hills mcp'.

    Each agent CLI's entry goes in its own file and format: claude-code
    in the project's .mcp.json, codex in ~/.codex/config.toml ($CODEX_HOME
    when set), gemini-cli in the project's .gemini/settings.json, cursor in
    the project's .cursor/mcp.json. The entry is merged into what the file
    holds, every other server and key kept; a server of the same name is
    replaced only with --force. The project is the current folder, and the
    server's root: submissions are read under it. Prints each file written,
    or with --print each entry, and writes nothing.
    """
    from ..base import state

    project = os.getcwd()
    entry = entry_for(name, hills, project, allow_final, allow_params)
    chosen = [AGENTS[agent_name] for agent_name in dict.fromkeys(agents)]
    if print_only:
        for agent in chosen:
            say(f"# {agent.name}: {config_path(agent, project)}")
            emit(shown(agent, entry))
            if agent.name == "claude-code":
                say("# or, with the claude CLI:")
                emit(claude_line(entry))
        return errors.EXIT_OK
    planned = [(agent, *merged(agent, entry, project, force)) for agent in chosen]
    for agent, path, text, mode in planned:
        state.atomic_write(path, text, mode=mode)
        say(f"{agent.name}: server '{entry.name}' written in {path}")
        emit(path)
    return errors.EXIT_OK
