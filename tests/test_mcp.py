"""`hills mcp` through the mcp package's own client over stdio: the tools
listed with their allow-list schemas, an eval run, its report read,
verified and shown; --final, a param, an unknown argument and a path
outside the roots refused with hills' words; a submission reading the
hill's private data through an eval the tool started stays confined (the
same payload unconfined is the control); nothing but the protocol on
stdout."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

import mcp  # noqa: F401  (the test extra has it: a missing package fails here, never skips)

from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

from testing.eval_fixtures import make_hill, on_machine, submission  # noqa: E402
from testing.util import needs_bwrap, run_cli  # noqa: E402

HILL = "circle-packing"
GRID = f".hills/{HILL}/examples/grid"


def served(flags, script, cwd=None):
    """Start `hills mcp FLAGS` as the agent CLI would (a child speaking MCP
    on its stdin and stdout), run `script(session)` on an initialised
    session, and return what it returns."""
    async def main():
        server = StdioServerParameters(command=sys.executable, args=["-m", "hills", "mcp", *flags],
                                       env=dict(os.environ), cwd=str(cwd or Path.cwd()))
        with open(os.devnull, "w") as quiet:
            async with stdio_client(server, errlog=quiet) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await script(session)
    return anyio.run(main)


def calling(name, arguments):
    async def script(session):
        return await session.call_tool(name, arguments)
    return script


def text_of(result):
    return result.content[0].text


def attempt_count():
    listed = run_cli("attempts", HILL, "--json")
    assert listed.code == 0, listed.output
    return len(json.loads(listed.out)["attempts"])


def test_the_tools_are_listed_with_schemas_that_allow_only_what_the_flags_allow(shared_hill):
    async def script(session):
        return (await session.list_tools()).tools

    tools = {tool.name: tool for tool in served(["--hill", HILL], script)}
    assert sorted(tools) == ["attempts", "describe", "eval", "show", "verify"]
    schema = tools["eval"].input_schema
    assert schema["additionalProperties"] is False and schema["required"] == ["submission", "hill"]
    assert sorted(schema["properties"]) == ["hill", "knobs", "note", "repeat", "submission"]
    assert schema["properties"]["hill"]["enum"] == [HILL]
    assert schema["properties"]["repeat"]["maximum"] == 5
    assert tools["describe"].annotations.read_only_hint is True and tools["eval"].annotations.read_only_hint is False

    opened = {tool.name: tool for tool in served(["--hill", HILL, "--allow-final", "--allow-param", "n,tolerance",
                                                   "--max-repeat", "3"], script)}
    schema = opened["eval"].input_schema
    assert schema["properties"]["final"]["type"] == "boolean"
    assert sorted(schema["properties"]["params"]["properties"]) == ["n", "tolerance"]
    assert schema["properties"]["params"]["additionalProperties"] is False
    assert schema["properties"]["repeat"]["maximum"] == 3


@pytest.mark.slow
def test_an_eval_through_the_tool_is_signed_logged_verified_and_shown(shared_hill):
    before = attempt_count()

    async def script(session):
        scored = await session.call_tool("eval", {"submission": GRID, "hill": HILL, "note": "the grid, over MCP"})
        report = scored.structured_content
        return (scored, await session.call_tool("verify", {"report": report}),
                await session.call_tool("show", {"report": report}),
                await session.call_tool("attempts", {"hill": HILL}),
                await session.call_tool("describe", {"hill": HILL}))

    scored, verified, shown, attempts, described = served(["--hill", HILL], script)
    assert not scored.is_error, text_of(scored)
    report = scored.structured_content
    assert json.loads(scored.content[1].text) == report  # the JSON beside the summary is the same report
    assert report["hill"] == HILL and report["status"] == "passing" and report["final"] is False
    assert report["note"] == "the grid, over MCP" and report["official"] is True
    assert text_of(scored).startswith(f"{HILL} @ {report['tree_hash'][:12]}: PASSED ")
    assert attempt_count() == before + 1
    assert not verified.is_error and verified.structured_content["valid"] is True
    assert text_of(verified).startswith("signature valid: signed by ")
    assert not shown.is_error and "signature valid" in text_of(shown) and "sum_radii" in text_of(shown)
    assert attempts.structured_content["attempts"][-1]["report"]["submission_hash"] == report["submission_hash"]
    assert described.structured_content["hill"] == HILL and "sum_radii (max)" in text_of(described)

    tampered = dict(report, metrics=[dict(report["metrics"][0], value=99.0)])
    refuted = served(["--hill", HILL], calling("verify", {"report": tampered}))
    assert not refuted.is_error and refuted.structured_content["valid"] is False
    assert text_of(refuted).startswith("signature INVALID: ")


def test_final_is_refused_without_allow_final_and_nothing_is_logged(shared_hill):
    before = attempt_count()
    refused = served(["--hill", HILL], calling("eval", {"submission": GRID, "hill": HILL, "final": True}))
    assert refused.is_error
    assert text_of(refused) == (
        "error: tool 'eval' takes no argument 'final': this server was started without --allow-final\n"
        "hint: the holdout is the person's to spend: they may restart the server with 'hills mcp --allow-final'")
    assert refused.structured_content["exit_code"] == 2
    assert attempt_count() == before


@pytest.mark.slow
def test_with_allow_final_the_holdout_eval_runs_and_counts(shared_hill):
    report = served(["--hill", HILL, "--allow-final"],
                    calling("eval", {"submission": GRID, "hill": HILL, "final": True})).structured_content
    assert report["final"] is True and report["status"] == "passing", report


def test_an_out_of_range_param_is_refused_by_the_pipelines_own_rule(shared_hill):
    cli = run_cli("eval", GRID, "-H", HILL, "-p", "n=100000", "--json")
    assert cli.code == 2, cli.output
    cli_error = next(line for line in cli.err.splitlines() if line.startswith("error: "))
    assert "param 'n' must be in [" in cli_error
    before = attempt_count()
    refused = served(["--hill", HILL, "--allow-param", "n"],
                     calling("eval", {"submission": GRID, "hill": HILL, "params": {"n": 100000}}))
    assert refused.is_error
    assert text_of(refused).splitlines()[0] == cli_error  # the same rule, in the same words
    assert refused.structured_content["exit_code"] == 2
    assert attempt_count() == before


def test_params_are_refused_unless_allowed_by_name(shared_hill):
    refused = served(["--hill", HILL], calling("eval", {"submission": GRID, "hill": HILL, "params": {"n": 5}}))
    assert refused.is_error
    assert text_of(refused).startswith("error: tool 'eval' takes no argument 'params': this server was started "
                                       "without --allow-param\n")
    other = served(["--hill", HILL, "--allow-param", "tolerance"],
                   calling("eval", {"submission": GRID, "hill": HILL, "params": {"n": 5}}))
    assert other.is_error
    assert text_of(other).startswith("error: param 'n' may not be set through this server\n"
                                     "hint: it allows tolerance; ")


def test_an_unknown_argument_a_bad_value_and_an_unknown_tool_are_refused(shared_hill):
    before = attempt_count()

    async def script(session):
        forced = await session.call_tool("eval", {"submission": GRID, "hill": HILL, "force": True})
        many = await session.call_tool("eval", {"submission": GRID, "hill": HILL, "repeat": 50})
        other = await session.call_tool("describe", {"hill": "not-served"})
        with pytest.raises(MCPError) as unknown:
            await session.call_tool("rescore", {"hill": HILL})
        return forced, many, other, unknown.value

    forced, many, other, unknown = served(["--hill", HILL], script)
    assert forced.is_error and text_of(forced) == (
        "error: tool 'eval' takes no argument 'force': no such argument\n"
        "hint: its arguments: submission, hill, knobs, repeat, note")
    assert many.is_error and text_of(many).startswith("error: tool 'eval': 'repeat': 50 is greater than the maximum "
                                                      "of 5\n")
    assert other.is_error and text_of(other).startswith("error: tool 'describe': 'hill': 'not-served' is not one of "
                                                        f"['{HILL}']")
    assert unknown.message == "unknown tool 'rescore'"
    assert attempt_count() == before


def test_a_path_outside_the_roots_is_refused_a_link_out_included(shared_hill, tmp_path):
    outside = submission(tmp_path / "outside", {"solution.py": "print(1)\n"})
    (Path.cwd() / "link-out").symlink_to(outside)

    async def script(session):
        return (await session.call_tool("eval", {"submission": str(outside), "hill": HILL}),
                await session.call_tool("eval", {"submission": "link-out", "hill": HILL}),
                await session.call_tool("show", {"path": "/etc/passwd"}))

    try:
        direct, linked, shown = served(["--hill", HILL], script)
    finally:
        (Path.cwd() / "link-out").unlink()
    for result, given in ((direct, str(outside)), (linked, "link-out")):
        assert result.is_error
        assert text_of(result).startswith(f"error: submission '{given}' is outside the folders this server reads "
                                          f"({Path.cwd()})\n"), text_of(result)
    assert shown.is_error and text_of(shown).startswith("error: report file '/etc/passwd' is outside the folders")
    assert "root:" not in text_of(shown)


def test_a_hill_not_registered_stops_the_server_before_it_serves(project):
    done = subprocess.run([sys.executable, "-m", "hills", "mcp", "--hill", "nowhere"], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert "error: " in done.stderr and "'nowhere'" in done.stderr


def test_without_the_mcp_package_the_error_says_how_to_install_it(project, monkeypatch):
    monkeypatch.setitem(sys.modules, "mcp", None)  # find_spec answers None: not installed
    result = run_cli("mcp", "--hill", HILL)
    assert result.code == 4, result.output
    assert result.err.splitlines()[:2] == [
        "error: 'hills mcp' serves MCP with the Python package 'mcp', which is not installed",
        "hint: install it: pip install 'hills[mcp]'"]
    assert result.out == ""


# A server whose describe tool prints, as careless code in hills might, on
# sys.stdout and straight on fd 1 (as a child would): the transport must
# send both to stderr, and stdout must carry the protocol alone.
NOISY_SERVER = textwrap.dedent("""\
    import os, sys
    import anyio
    from hills.commands import mcp, mcp_tools

    quiet = mcp_tools._describe
    def noisy(policy, args):
        print("a progress line on sys.stdout")
        os.write(1, b"a child's line on fd 1\\n")
        return quiet(policy, args)
    mcp_tools.TOOLS = tuple(mcp_tools.Tool(t.name, t.title, t.description, t.schema,
                                           noisy if t.name == "describe" else t.call, t.read_only)
                            for t in mcp_tools.TOOLS)
    mcp_tools.BY_NAME = {t.name: t for t in mcp_tools.TOOLS}
    anyio.run(mcp.serve, mcp.policy_of((sys.argv[1],), (), False, (), 5))
    """)


def _rpc(message_id, method, params):
    return json.dumps({"jsonrpc": "2.0", "id": message_id, "method": method, "params": params}) + "\n"


@pytest.mark.slow
def test_nothing_but_the_protocol_reaches_stdout(shared_hill, tmp_path):
    script = tmp_path / "noisy_server.py"
    script.write_text(NOISY_SERVER)
    loud = submission(Path.cwd() / "loud", {"solution.py": "print('LOUD ' * 100)\n"})
    messages = "".join([
        _rpc(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                               "clientInfo": {"name": "test", "version": "0"}}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n",
        _rpc(2, "tools/call", {"name": "describe", "arguments": {"hill": HILL}}),
        _rpc(3, "tools/call", {"name": "eval", "arguments": {"submission": GRID, "hill": HILL}}),
        _rpc(4, "tools/call", {"name": "eval", "arguments": {"submission": str(loud), "hill": HILL}}),
    ])
    child = subprocess.Popen([sys.executable, str(script), HILL], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        child.stdin.write(messages)
        child.stdin.flush()
        lines = []
        while len([line for line in lines if '"id":' in line]) < 4:
            line = child.stdout.readline()
            assert line, child.stderr.read() if child.poll() is not None else "stdout closed"
            lines.append(line)
        rest, stderr = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    # The precondition: the stray writes happened, and went to stderr.
    assert "a progress line on sys.stdout" in stderr and "a child's line on fd 1" in stderr
    for line in lines + rest.splitlines():
        message = json.loads(line)  # every line on stdout is a JSON-RPC message, nothing else
        assert message["jsonrpc"] == "2.0", line
    answers = {json.loads(line)["id"]: json.loads(line) for line in lines if '"id":' in line}
    assert answers[3]["result"]["structuredContent"]["status"] == "passing"
    assert "LOUD" not in "".join(lines) + rest


# ---------------------------------------------------------------- confinement

SECRET = "the held-out answer is 4242\n"
# Runs attack.py from the submission through hills.sdk and reports what it
# printed: the one way this evaluator starts submitted code.
ATTACK_EVAL = """\
    import json
    import sys

    from hills import sdk

    def eval(submission, *, final=False, **params):
        done = sdk.run_submission([sys.executable, "attack.py"], capture_output=True, text=True)
        lines = done.stdout.strip().splitlines()
        seen = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {}
        return {"passed": done.returncode == 0, "metrics": [{"name": "total", "value": 1.0, "direction": "max"}],
                "details": {"seen": seen, "stderr": done.stderr[-2000:]}}
    """
READER = """\
import json, os
paths = json.load(open("paths.json"))
seen = {}
for name, path in paths.items():
    try:
        seen[name] = open(path).read() if name.endswith("file") else sorted(os.listdir(path))
    except Exception as exc:
        seen[name] = "refused: " + type(exc).__name__
print(json.dumps(seen))
"""


@pytest.fixture(scope="module")
def attack_hills(module_machine):
    with on_machine(module_machine):
        made = {name: make_hill(name, ATTACK_EVAL, timeout=60, private={"secret.txt": SECRET},
                                extra=f"sandbox: {sandbox}\n")
                for name, sandbox in (("boxed", "bwrap"), ("opened", "none"))}
    return made


def leak_attempt(hill_dir, tmp_path):
    """The payload aimed at `hill_dir`'s private data, run through the eval
    tool; the precondition (the secret is where the payload looks) first."""
    secret = hill_dir / "private" / "secret.txt"
    assert secret.read_text() == SECRET
    paths = {"private file": str(secret), "private folder": str(hill_dir / "private")}
    sub = submission(Path.cwd() / f"leak-{hill_dir.name}", {"attack.py": READER, "paths.json": json.dumps(paths)})
    result = served(["--hill", hill_dir.name], calling("eval", {"submission": str(sub), "hill": hill_dir.name}))
    assert not result.is_error, text_of(result)
    return result.structured_content


@pytest.mark.slow
@needs_bwrap
def test_a_submission_reading_private_data_through_the_eval_tool_stays_confined(attack_hills, tmp_path):
    report = leak_attempt(attack_hills["boxed"], tmp_path)
    seen = report["details"]["seen"]
    assert seen, report["details"]  # the payload ran and said what it saw
    assert str(seen["private file"]).startswith("refused: ") and str(seen["private folder"]).startswith("refused: ")
    assert SECRET.strip() not in json.dumps(report)
    assert report["isolation"]["submitted_code"] == "confined" and report["isolation"]["evaluator"] == "bwrap"


@pytest.mark.slow
def test_the_control_the_same_payload_unconfined_reads_the_secret(attack_hills, tmp_path):
    report = leak_attempt(attack_hills["opened"], tmp_path)
    seen = report["details"]["seen"]
    assert seen["private file"] == SECRET and seen["private folder"] == ["secret.txt"]
    assert report["isolation"]["submitted_code"] == "unconfined"


@pytest.mark.slow
def test_a_version_committed_after_the_server_started_is_not_scored(committed_hill):
    """The agent may write where the hill lives: a new evaluator committed
    behind the server's back is refused, not run."""
    (committed_hill / "README.md").write_text("A new version.\n")
    before = attempt_count()

    async def script(session):
        committed = run_cli("commit", HILL, "-m", "a version the server did not start on")
        assert committed.code == 0, committed.output
        return await session.call_tool("eval", {"submission": GRID, "hill": HILL})

    refused = served(["--hill", HILL], script)
    assert refused.is_error
    assert text_of(refused).startswith(f"error: hill '{HILL}' is at tree ")
    assert "not the version" in text_of(refused) and "this server was started on" in text_of(refused)
    assert refused.structured_content["exit_code"] == 1
    assert attempt_count() == before == 0


# ---------------------------------------------------------------- hills setup mcp

CONFIGS = {"claude-code": ".mcp.json", "gemini-cli": ".gemini/settings.json", "cursor": ".cursor/mcp.json"}


@pytest.fixture
def configs(shared_hill, tmp_path, monkeypatch):
    """Where each agent's config lands for this test (codex's under
    CODEX_HOME, a folder of the test's own); the project's files are
    removed after, as the shared hill's project is the module's."""
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))
    paths = {agent: Path.cwd() / rel for agent, rel in CONFIGS.items()}
    paths["codex"] = tmp_path / "codex-home" / "config.toml"
    yield paths
    for agent, path in paths.items():
        if path.exists():
            path.unlink()


def read_config(path):
    import tomllib

    text = path.read_text()
    return tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)


def servers_in(path):
    config = read_config(path)
    return config["mcp_servers"] if path.suffix == ".toml" else config["mcpServers"]


@pytest.mark.parametrize("agent", ["claude-code", "codex", "gemini-cli", "cursor"])
def test_setup_writes_each_agents_entry_in_its_own_file_and_format(configs, shared_hill, agent):
    assert not configs[agent].exists()
    result = run_cli("setup", "mcp", "--agent", agent, "--hill", HILL)
    assert result.code == 0, result.output
    assert result.out == f"{configs[agent]}\n"
    assert f"{agent}: server 'hills' written in {configs[agent]}" in result.err
    entry = servers_in(configs[agent])["hills"]
    assert entry["command"] == sys.executable
    assert entry["args"] == ["-m", "hills", "mcp", "--hill", str(shared_hill), "--root", str(Path.cwd())]
    assert entry["env"] == {"HILLS_HOME": os.environ["HILLS_HOME"]}
    assert entry.get("type") == ("stdio" if agent == "claude-code" else None)
    assert entry.get("tool_timeout_sec") == (600 if agent == "codex" else None)


def test_setup_merges_into_a_file_keeping_its_other_servers_keys_and_comments(configs, shared_hill):
    configs["cursor"].parent.mkdir(parents=True, exist_ok=True)
    configs["cursor"].write_text(json.dumps({"theme": "dark", "mcpServers": {"other": {"command": "x"}}}))
    configs["codex"].parent.mkdir(parents=True)
    configs["codex"].write_text('# my codex config\nmodel = "o3"\n\n[mcp_servers.other]\ncommand = "x"\n'
                                '[mcp_servers.other.env]\nA = "1"\n')
    result = run_cli("setup", "mcp", "--agent", "cursor", "--agent", "codex", "--hill", HILL)
    assert result.code == 0, result.output
    cursor = read_config(configs["cursor"])
    assert cursor["theme"] == "dark" and cursor["mcpServers"]["other"] == {"command": "x"}
    assert cursor["mcpServers"]["hills"]["args"][:3] == ["-m", "hills", "mcp"]
    text = configs["codex"].read_text()
    assert text.startswith('# my codex config\nmodel = "o3"\n\n[mcp_servers.other]\ncommand = "x"\n')
    codex = read_config(configs["codex"])
    assert codex["model"] == "o3" and codex["mcp_servers"]["other"] == {"command": "x", "env": {"A": "1"}}
    assert codex["mcp_servers"]["hills"]["command"] == sys.executable


def test_an_existing_entry_is_kept_without_force_and_replaced_with_it(configs, shared_hill):
    first = run_cli("setup", "mcp", "--agent", "codex", "--agent", "gemini-cli", "--hill", HILL)
    assert first.code == 0, first.output
    before = {agent: configs[agent].read_bytes() for agent in ("codex", "gemini-cli")}
    for agent in ("codex", "gemini-cli"):
        again = run_cli("setup", "mcp", "--agent", agent, "--hill", HILL, "--allow-final")
        assert again.code == 1, again.output
        assert again.err.splitlines()[:2] == [
            f"error: '{configs[agent]}' has a server 'hills' already; nothing was written",
            "hint: pass --force to replace it, or --name to add another"]
        assert configs[agent].read_bytes() == before[agent]
    forced = run_cli("setup", "mcp", "--agent", "codex", "--agent", "gemini-cli", "--hill", HILL,
                     "--allow-final", "--allow-param", "n", "--force")
    assert forced.code == 0, forced.output
    for agent in ("codex", "gemini-cli"):
        servers = servers_in(configs[agent])
        assert list(servers) == ["hills"]
        assert servers["hills"]["args"][-3:] == ["--allow-final", "--allow-param", "n"]
    assert configs["codex"].read_text().count("[mcp_servers.hills]") == 1


def test_a_refusal_for_one_agent_writes_no_file_for_the_others(configs, shared_hill):
    configs["codex"].parent.mkdir(parents=True)
    configs["codex"].write_text('[mcp_servers.hills]\ncommand = "mine"\n')
    result = run_cli("setup", "mcp", "--agent", "claude-code", "--agent", "codex", "--hill", HILL)
    assert result.code == 1, result.output
    assert "has a server 'hills' already" in result.err
    assert not configs["claude-code"].exists()
    assert configs["codex"].read_text() == '[mcp_servers.hills]\ncommand = "mine"\n'


@pytest.mark.parametrize("agent, content, words", [
    ("claude-code", '{"mcpServers": {"a": 1},', "is not valid JSON: "),
    ("cursor", '["a list"]', "expected a JSON object at the top level, got list"),
    ("gemini-cli", '{"mcpServers": ["a"]}', "'mcpServers' must be an object, got list"),
    ("codex", 'model = \n', "is not valid TOML: "),
    ("codex", 'mcp_servers = "none"\n', "'mcp_servers' must be a table, got str"),
], ids=["json syntax", "json not an object", "json servers a list", "toml syntax", "toml servers a string"])
def test_a_malformed_config_is_an_error_naming_the_file(configs, shared_hill, agent, content, words):
    configs[agent].parent.mkdir(parents=True, exist_ok=True)
    configs[agent].write_text(content)
    result = run_cli("setup", "mcp", "--agent", agent, "--hill", HILL)
    assert result.code == 2, result.output
    error = result.err.splitlines()[0]
    assert error.startswith(f"error: '{configs[agent]}'") and words in error, error
    assert result.err.splitlines()[1] == "hint: fix the file, or add the entry by hand: 'hills setup mcp ... --print'"
    assert configs[agent].read_text() == content


def test_print_writes_nothing_and_shows_the_entry_and_the_claude_line(configs, shared_hill):
    result = run_cli("setup", "mcp", "--agent", "claude-code", "--hill", HILL, "--print")
    assert result.code == 0, result.output
    assert not any(path.exists() for path in configs.values())
    shown, line = result.out.rsplit("}\n", 1)
    assert json.loads(shown + "}")["mcpServers"]["hills"]["type"] == "stdio"
    assert line.startswith("claude mcp add --scope project --transport stdio --env HILLS_HOME=")
    assert f" hills -- {sys.executable} -m hills mcp --hill {shared_hill} --root {Path.cwd()}" in line


def test_the_written_entry_starts_a_server_that_serves(configs, shared_hill):
    """The round trip: the command and args in .mcp.json, run as the agent
    CLI runs them, from another folder, speak MCP and serve the hill."""
    assert run_cli("setup", "mcp", "--agent", "claude-code", "--hill", HILL).code == 0
    entry = servers_in(configs["claude-code"])["hills"]

    async def main():
        server = StdioServerParameters(command=entry["command"], args=entry["args"],
                                       env={**os.environ, **entry["env"]}, cwd="/")
        with open(os.devnull, "w") as quiet:
            async with stdio_client(server, errlog=quiet) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await session.call_tool("describe", {"hill": HILL})

    described = anyio.run(main)
    assert not described.is_error, text_of(described)
    assert described.structured_content["path"] == str(shared_hill)


# ---------------------------------------------------------------- the policy, without a server

def _policy(**flags):
    from hills.commands.mcp_tools import Policy

    return Policy(hills=("h",), roots=(str(Path.cwd()),), **flags)


@pytest.mark.parametrize("flags, arguments, refusal", [
    ({}, {"submission": "s", "hill": "h"}, None),
    ({}, {"submission": "s", "hill": "h", "knobs": {"lr": 0.1}, "repeat": 5, "note": "x"}, None),
    ({}, {"submission": "s", "hill": "h", "final": False},
     "tool 'eval' takes no argument 'final': this server was started without --allow-final"),
    ({}, {"hill": "h"}, "tool 'eval': 'arguments': 'submission' is a required property"),
    ({}, {"submission": "s", "hill": "h", "repeat": 0}, "tool 'eval': 'repeat': 0 is less than the minimum of 1"),
    ({}, {"submission": "s", "hill": "h", "repeat": 2.5}, "tool 'eval': 'repeat': 2.5 is not of type 'integer'"),
    ({}, {"submission": "s", "hill": "h", "note": "n" * 201}, "tool 'eval': 'note': "),
    ({}, {"submission": "s", "hill": "h", "knobs": {"lr": [1]}}, "tool 'eval': 'knobs/lr': [1] is not of type"),
    ({"allow_final": True}, {"submission": "s", "hill": "h", "final": True}, None),
    ({"allow_final": True}, {"submission": "s", "hill": "h", "final": "yes"},
     "tool 'eval': 'final': 'yes' is not of type 'boolean'"),
    ({"allow_params": ("n",)}, {"submission": "s", "hill": "h", "params": {"n": 3}}, None),
    ({"allow_params": ("n",)}, {"submission": "s", "hill": "h", "params": {"m": 3}},
     "param 'm' may not be set through this server"),
    ({"max_repeat": 2}, {"submission": "s", "hill": "h", "repeat": 3},
     "tool 'eval': 'repeat': 3 is greater than the maximum of 2"),
], ids=["minimal", "every default argument", "final unallowed", "missing submission", "repeat zero",
        "repeat not whole", "note too long", "knob a list", "final allowed", "final not a boolean",
        "allowed param", "param not allowed", "repeat over the flag"])
def test_the_eval_arguments_are_checked_against_the_policy(flags, arguments, refusal):
    from hills.base import errors
    from hills.commands import mcp_tools

    tool, policy = mcp_tools.BY_NAME["eval"], _policy(**flags)
    if refusal is None:
        assert mcp_tools.check_arguments(tool, policy, arguments) == arguments
        return
    with pytest.raises(errors.UsageError) as refused:
        mcp_tools.check_arguments(tool, policy, arguments)
    assert refused.value.message.startswith(refusal), refused.value.message


def test_paths_resolve_under_the_roots_only(tmp_path):
    from hills.base import errors
    from hills.commands import mcp_tools

    policy = _policy()
    (Path.cwd() / "inside").mkdir()
    assert mcp_tools.under_roots(policy, "inside", "submission") == str((Path.cwd() / "inside").resolve())
    for given in ("..", "/", str(tmp_path), "inside/../..", "~"):
        with pytest.raises(errors.UsageError) as refused:
            mcp_tools.under_roots(policy, given, "submission")
        assert refused.value.message == (f"submission '{given}' is outside the folders this server reads "
                                         f"({Path.cwd()})")


@pytest.mark.parametrize("text", [
    '# keep me\nmcp_servers = { hills = { command = "old" }, other = { command = "x" } }\n',
    '[mcp_servers]\nhills.command = "old"\nother.command = "x"\n',
    '[mcp_servers.hills]\ncommand = "old"\n[mcp_servers.hills.env]\nA = "1"\n\n[mcp_servers.other]\ncommand = "x"\n',
], ids=["inline table", "dotted keys", "tables"])
def test_a_toml_entry_is_replaced_whatever_shape_the_old_one_has(text):
    import tomllib

    from hills.base import errors
    from hills.commands import setup_mcp

    entry = setup_mcp.Entry("hills", "/bin/python", ("-m", "hills", "mcp"))
    with pytest.raises(errors.Refused) as refused:
        setup_mcp.merged_toml("config.toml", text, entry, setup_mcp.AGENTS["codex"], force=False)
    assert refused.value.message == "'config.toml' has a server 'hills' already; nothing was written"
    merged = tomllib.loads(setup_mcp.merged_toml("config.toml", text, entry, setup_mcp.AGENTS["codex"], force=True))
    assert merged["mcp_servers"]["other"] == {"command": "x"}
    assert merged["mcp_servers"]["hills"] == {"command": "/bin/python", "args": ["-m", "hills", "mcp"],
                                              "tool_timeout_sec": 600}


def test_the_readme_example_writes_what_it_says(configs, shared_hill):
    """The README's MCP block, line by line: the claude-code entry in
    .mcp.json, codex's in its config.toml, and --print writing nothing."""
    from testing import readme_examples

    lines = [line.split("#", 1)[0].split() for line in readme_examples.example("mcp").splitlines()]
    assert [line[:3] for line in lines] == [["hills", "setup", "mcp"]] * 3
    for argv, agent in zip(lines, ("claude-code", "codex", None)):
        before = {path: path.read_bytes() if path.exists() else None for path in configs.values()}
        result = run_cli(*argv[1:])
        assert result.code == 0, (argv, result.output)
        if agent is None:
            assert "--print" in argv and '"hills"' in result.out
            assert {path: path.read_bytes() if path.exists() else None for path in configs.values()} == before
        else:
            assert servers_in(configs[agent])["hills"]["args"][:4] == ["-m", "hills", "mcp", "--hill"]
