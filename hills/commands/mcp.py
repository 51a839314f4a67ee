"""`hills mcp`: an MCP server over stdio for agent CLIs, serving the tools
of hills.commands.mcp_tools; the only module that imports the mcp
package (the hills[mcp] extra), and only when the command runs."""

from __future__ import annotations

import os
import sys

import click

from .. import __version__
from ..base import errors
from ..cli.options import CONTEXT

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .mcp_tools import Policy

INSTALL_HINT = "install it: pip install 'hills[mcp]'"


@click.command("mcp", context_settings=CONTEXT)
@click.option("--hill", "hill_names", multiple=True, required=True, metavar="NAME",
              help="Serve the hill NAME, or the hill in folder NAME (repeatable); the tools take it by its name, "
                   "and no other hill.")
@click.option("--root", "roots", multiple=True, metavar="DIR",
              help="A folder submissions and report files must lie under (repeatable; default: the folder "
                   "the server starts in).")
@click.option("--allow-final", is_flag=True,
              help="Let the eval tool take final (holdout mode), which spends the hill's final budget.")
@click.option("--allow-param", "allow_params", multiple=True, metavar="NAME[,NAME...]",
              help="Let the eval tool set the hill.yaml param NAME (repeatable), within its declared range.")
@click.option("--max-repeat", default=5, show_default=True, type=click.IntRange(1, 1000), metavar="N",
              help="The most replicates one eval may ask for.")
def command(hill_names: tuple[str, ...], roots: tuple[str, ...], allow_final: bool, allow_params: tuple[str, ...],
            max_repeat: int) -> int:
    """Serve hills to an agent CLI as MCP tools, over stdin and stdout.

    The tools are describe, eval, attempts, show and verify, each the
    command of the same name. The server runs outside the agent's own
    sandbox, where bubblewrap starts, and every eval it runs is the
    pipeline of 'hills eval': confined, signed and logged. The eval tool
    takes a submission folder under the roots and one of the hills named
    with --hill; it never takes --final, or a param, unless the server was
    started with --allow-final or --allow-param NAME. Nothing but the
    protocol goes to stdout; what hills says goes to stderr.
    """
    missing = missing_package()
    if missing is not None:
        raise missing
    policy = policy_of(hill_names, roots, allow_final, allow_params, max_repeat)
    import anyio

    anyio.run(serve, policy)
    return errors.EXIT_OK


def policy_of(hill_names: tuple[str, ...], roots: tuple[str, ...], allow_final: bool, allow_params: tuple[str, ...],
              max_repeat: int) -> Policy:
    """The server's policy from its flags, each hill resolved and each root
    checked before the server starts: a mistake is said once, on stderr,
    not in every tool call."""
    from .. import api
    from .mcp_tools import Policy

    served = []
    for name in dict.fromkeys(hill_names):
        described = api.describe(name)
        served.append((str(described["hill"]), served_as(described), described.get("tree_hash")))
    for root in roots:
        if not os.path.isdir(root):
            raise errors.UsageError(f"--root '{root}' is not a folder",
                                    hint="name a folder the agent writes its submissions in")
    params = tuple(dict.fromkeys(name.strip() for given in allow_params for name in given.split(",") if name.strip()))
    return Policy(hills=tuple(dict.fromkeys(name for name, _, _ in served)), served=tuple(served),
                  roots=tuple(os.path.abspath(root) for root in roots) or (os.getcwd(),),
                  allow_final=allow_final, allow_params=params, max_repeat=max_repeat)


def served_as(described: dict[str, Any]) -> str:
    """How the server names a hill to hills.api: its folder here, where a
    name could resolve to another hill from another working folder; its
    name with a service, which holds the one copy under that name."""
    from ..service import client

    return str(described["hill"]) if client.service_socket() is not None else str(described["path"])


def missing_package() -> errors.EnvironmentProblem | None:
    """The error for an interpreter without the mcp package, found without
    importing it."""
    import importlib.util

    try:
        found = importlib.util.find_spec("mcp")
    except (ImportError, ValueError):
        found = None
    if found is None:
        return errors.EnvironmentProblem("'hills mcp' serves MCP with the Python package 'mcp', which is not installed",
                                         hint=INSTALL_HINT)
    return None


def server(policy: Policy) -> Any:
    """The low-level MCP server of the tools under `policy`. The low-level
    server, not MCPServer: the input schemas are hills' own allow-lists,
    and each call's arguments are checked against them here (mcp_tools)."""
    import anyio.to_thread
    import mcp_types as types
    from mcp.server import Server
    from mcp.shared.exceptions import MCPError

    from . import mcp_tools

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[
            types.Tool(name=tool.name, title=tool.title, description=tool.description,
                       input_schema=tool.schema(policy),
                       annotations=types.ToolAnnotations(read_only_hint=tool.read_only, destructive_hint=False,
                                                         idempotent_hint=tool.read_only, open_world_hint=False))
            for tool in mcp_tools.TOOLS])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            # An eval takes seconds to minutes: in a thread, the server keeps answering.
            answer = await anyio.to_thread.run_sync(mcp_tools.call, policy, params.name, params.arguments)
        except mcp_tools.UnknownTool:
            raise MCPError(code=types.INVALID_PARAMS, message=f"unknown tool '{params.name}'",
                           data={"tools": list(mcp_tools.BY_NAME)}) from None
        return types.CallToolResult(
            content=[types.TextContent(text=answer.summary), types.TextContent(text=mcp_tools.as_text(answer))],
            structured_content=answer.data, is_error=answer.error)

    return Server("hills", version=__version__, title="hills",
                  instructions="Score submissions against frozen hills: 'describe' a hill first, then 'eval' a "
                               "submission folder; each report is signed and logged.",
                  on_list_tools=list_tools, on_call_tool=call_tool)


async def serve(policy: Policy) -> None:
    """Serve over this process's stdin and stdout until the client closes
    them. The transport points fd 1 at stderr while it serves, so a stray
    print from hills or a child can never reach the protocol stream."""
    from mcp.server.stdio import stdio_server

    made = server(policy)
    async with stdio_server() as (read_stream, write_stream):
        # A print while serving goes to stderr at once: through sys.stdout it
        # would wait in that object's buffer and could be flushed after the
        # transport hands fd 1 back, onto the protocol stream.
        saved, sys.stdout = sys.stdout, sys.stderr
        try:
            await made.run(read_stream, write_stream, made.create_initialization_options())
        finally:
            sys.stdout = saved
