"""MCP tools, through the framework's ``MCPStdioTool`` and a real MCP server over stdio
(tests/mcp_bank_server.py, started by each test): names policies can match whatever the
prefix, what happens to tools no policy names, and the raw result the framework keeps for
the host (``_mcp_tool_result_host_payload``), scrubbed like everything else."""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from agent_framework import AgentSession, MCPStdioTool

import guardrails
from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework.scripted import call, result_text
from tests.af_support import agent_with, load_text
from tests.leak_support import Observer, leaks, response_places

SERVER = Path(__file__).parent / "mcp_bank_server.py"
KEY = "mcp-key-\"q\"\\ñ-5581-zz"

POLICIES = """
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: bank-payments}
spec:
  match: {tools: ["mcp:bank/send_money"]}
  rules:
    - name: cap
      when: 'args.amount > 100.0'
      action: deny
      message: Over the cap.
---
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: bank-api}
spec:
  match: {tools: ["mcp:bank/call_api", "mcp:bank/failing_api"]}
  secrets:
    inject: {api_key: {env: GR_MCP_KEY}}
---
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: bank-statement}
spec:
  match: {tools: ["mcp:*/statement"]}
  redact:
    - name: card
      regex: '\\b(?:\\d[ -]?){13,16}\\b'
      replacement: '[REDACTED:card]'
"""


@pytest.fixture
def policies(tmp_path: Path) -> guardrails.PolicySet:
    return load_text(tmp_path, POLICIES)


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    monkeypatch.setenv("GR_MCP_KEY", KEY)
    caplog.set_level(logging.DEBUG)
    yield


@pytest.fixture
async def bank() -> AsyncIterator[MCPStdioTool]:
    tool = MCPStdioTool(name="bank", command=sys.executable, args=[str(SERVER)],
                        tool_name_prefix="bank")
    async with tool:
        yield tool


async def test_the_prefix_does_not_hide_a_tool_from_its_policy(
        policies: guardrails.PolicySet, bank: MCPStdioTool) -> None:
    assert "bank_send_money" in [f.name for f in bank.functions]
    client = ScriptedChatClient([[call("bank_send_money", recipient="bob", amount=5000)],
                                 [call("bank_send_money", recipient="bob", amount=5)]])
    await agent_with(client, [bank], guard(policies)).run("pay")
    results = [result_text(c) for m in client.received[-1] for c in m.contents
               if c.type == "function_result"]
    assert "denied by policy. Over the cap." in results[0]
    assert "sent 5.0 to bob" in results[1]


async def test_a_policy_for_another_server_does_not_match(
        tmp_path: Path, bank: MCPStdioTool) -> None:
    policies = load_text(tmp_path, POLICIES.replace("mcp:bank/send_money", "mcp:other/send_money"))
    client = ScriptedChatClient([[call("bank_send_money", recipient="bob", amount=5000)]])
    await agent_with(client, [bank], guard(policies)).run("pay")
    assert "sent 5000.0 to bob" in result_text(client.tool_results()[0])


async def test_the_host_payload_carries_no_secret(
        policies: guardrails.PolicySet, bank: MCPStdioTool,
        caplog: pytest.LogCaptureFixture) -> None:
    obs = Observer()
    client = ScriptedChatClient([[call("bank_call_api", endpoint="https://api")],
                                 [call("bank_statement")]])
    session = AgentSession()
    response = await agent_with(client, [bank], obs.guard(policies)).run("go", session=session)
    [api_result, statement] = [c for m in response.messages for c in m.contents
                               if c.type == "function_result"]
    payload = api_result.additional_properties["_mcp_tool_result_host_payload"]
    assert payload["structuredContent"]["echo"] == "authorised with [REDACTED]"  # the server echoed it
    card_payload = statement.additional_properties["_mcp_tool_result_host_payload"]
    assert "[REDACTED:card]" in str(card_payload)
    places = {**response_places(response, session), **obs.places(caplog),
              "model": client.model_saw()}
    assert leaks(KEY, **places) == []
    assert leaks("4111 1111 1111 1111", **places) == []


@pytest.mark.parametrize("detailed", [False, True], ids=["brief", "detailed-errors"])
async def test_an_mcp_error_quoting_the_key_carries_no_secret(
        policies: guardrails.PolicySet, bank: MCPStdioTool,
        caplog: pytest.LogCaptureFixture, detailed: bool) -> None:
    obs = Observer()
    client = ScriptedChatClient([[call("bank_failing_api", endpoint="https://api")]])
    session = AgentSession()
    agent = agent_with(client, [bank], obs.guard(policies), include_detailed_errors=detailed)
    response = await agent.run("go", session=session)
    [result] = client.tool_results()
    assert "upstream rejected key [REDACTED]" in str(result.to_dict())  # the key arrived
    assert leaks(KEY, **response_places(response, session), **obs.places(caplog),
                 model=[m.to_dict() for b in client.received for m in b if m.role != "assistant"]) == []


async def test_a_declared_secret_the_model_sends_is_not_kept_in_the_host_payload(
        tmp_path: Path, bank: MCPStdioTool, caplog: pytest.LogCaptureFixture) -> None:
    policies = load_text(tmp_path, POLICIES.replace(
        "inject: {api_key: {env: GR_MCP_KEY}}", "arguments: [api_key]"))
    obs = Observer()
    client = ScriptedChatClient([[call("bank_call_api", endpoint="https://api", api_key=KEY)]])
    session = AgentSession()
    response = await agent_with(client, [bank], obs.guard(policies)).run("go", session=session)
    [result] = [c for m in response.messages for c in m.contents if c.type == "function_result"]
    assert "[REDACTED]" in str(result.additional_properties["_mcp_tool_result_host_payload"])
    assert leaks(KEY, **response_places(response, session), **obs.places(caplog),
                 model=[m.to_dict() for b in client.received for m in b if m.role != "assistant"]) == []


async def test_unmatched_tools_follow_the_hosts_choice(
        policies: guardrails.PolicySet, bank: MCPStdioTool,
        caplog: pytest.LogCaptureFixture) -> None:
    for unmatched in ("allow", "warn", "deny"):  # one server for the three choices
        caplog.clear()
        client = ScriptedChatClient([[call("bank_unlisted_tool", note="hello")],
                                     [call("bank_send_money", recipient="bob", amount=5)]])
        await agent_with(client, [bank], guard(policies, unmatched=unmatched)).run("go")
        unlisted, named = [result_text(c) for m in client.received[-1] for c in m.contents
                           if c.type == "function_result"]
        assert "sent 5.0 to bob" in named, unmatched  # a tool a policy names is unaffected
        if unmatched == "deny":
            assert "denied by policy. no policy names the tool bank_unlisted_tool" in unlisted
        else:
            assert "noted hello" in unlisted, unmatched
        warned = "no policy names the tool bank_unlisted_tool" in caplog.text
        assert warned == (unmatched != "allow"), unmatched


def test_unmatched_must_be_a_known_choice(policies: guardrails.PolicySet) -> None:
    with pytest.raises(ValueError, match="unmatched must be one of"):
        guard(policies, unmatched="ignore")


def test_the_engine_matches_aliases_and_denies_unmatched(policies: guardrails.PolicySet) -> None:
    assert policies.evaluate("bank_send_money", {"recipient": "b", "amount": 500},
                             aliases=["mcp:bank/send_money"]).effect == "deny"
    assert policies.evaluate("bank_send_money", {"recipient": "b", "amount": 500}).effect == "allow"
    decision = policies.evaluate("mystery", {}, unmatched="deny")
    assert decision.effect == "deny" and decision.message == "no policy names the tool mystery"
    assert policies.evaluate("mystery", {}).effect == "allow"


async def test_private_names_the_guard_relies_on(bank: MCPStdioTool) -> None:
    """Pins the framework internals ``_private`` reads for MCP tools."""
    from agent_framework import _mcp, _tools

    from guardrails.agent_framework import _private

    assert _private._MCP_REMOTE_NAME_KEY == _mcp._MCP_REMOTE_NAME_KEY
    function = next(f for f in bank.functions if f.name == "bank_send_money")
    assert _private.mcp_remote_name(function) == "send_money"
    assert _tools._FUNCTION_RESULT_CARRIER_CONTEXT_KEY == "_function_result_carrier"
    assert _mcp._MCP_TOOL_RESULT_HOST_PAYLOAD_KEY == "_mcp_tool_result_host_payload"


def test_check_tools_reports_tools_no_policy_names(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from guardrails.cli import main

    (tmp_path / "p.yaml").write_text(POLICIES)
    tools = tmp_path / "tools.json"
    tools.write_text('{"bank_unlisted_tool": {"properties": {"note": {"type": "string"}}}}')
    main(["check", str(tmp_path / "p.yaml"), "--tools", str(tools)])
    assert "tool 'bank_unlisted_tool' is not matched by any policy" in capsys.readouterr().out


async def test_strict_mode_checks_a_policy_written_for_the_mcp_name(
        tmp_path: Path, bank: MCPStdioTool) -> None:
    policies = load_text(tmp_path, POLICIES.replace("args.amount > 100.0", "args.amout > 100.0"))
    client = ScriptedChatClient([[call("bank_send_money", recipient="bob", amount=5)]])
    with pytest.raises(guardrails.PolicyError, match="amout"):
        await agent_with(client, [bank], guard(policies, strict=True)).run("pay")
    good = load_text(tmp_path, POLICIES, name="good.yaml")
    await agent_with(ScriptedChatClient([[call("bank_send_money", recipient="bob", amount=5)]]),
                     [bank], guard(good, strict=True)).run("pay")
