"""Red team 23, promise 8 for tools declared by a JSON schema: the cost of judging what an
MCP tool will run with (red team 22 made the guard fill every default the server's schema
declares and check the arguments strictly against it, with ``jsonschema``, before the
rules and before the input bounds). The model chooses the arguments; the server's schema
is an ordinary pydantic one (tests/mcp_schema_server23.py, a real stdio MCP server).

The attacks, each in the real loop: a recursive union whose two models both accept a chain
of links (tried both ways at every level: exponential, 1 s at 12 links), a tree of
conditions (every level checked again: 0.4 s for 30 levels of 30), a list of 20,000
payments (2 s), a set (``uniqueItems``) of 3,000 numbers and one string (compared
pairwise: 2.2 s), and an address under a pattern that Python's ``re`` backtracks on (1.2 s
at 24 characters, doubling with each one more). 5 of 5 attacks got through before the fix
(the call ran, or its check took seconds; the pattern one never finished at 4,000
characters). Each test asserts on the outcome and on the counted steps, never on time.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from agent_framework import MCPStdioTool

import guardrails
from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework._schema import SCHEMA_STEPS
from guardrails.agent_framework.scripted import call, result_text
from tests.af_support import agent_with, load_text

SERVER = Path(__file__).parent / "mcp_schema_server23.py"

POLICIES = """
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: bank23}
spec:
  match: {tools: ["mcp:bank23/*"]}
  rules:
    - name: no-evil-copies
      when: 'has(args.payments) && args.payments.exists(p, p.cc.endsWith("@evil.example"))'
      action: deny
      message: Copies stay inside the bank.
"""

OVER = f"take more than {SCHEMA_STEPS} steps to check against its schema"


@pytest.fixture
def policies(tmp_path: Path) -> guardrails.PolicySet:
    return load_text(tmp_path, POLICIES)


@pytest.fixture
async def bank() -> AsyncIterator[MCPStdioTool]:
    tool = MCPStdioTool(name="bank23", command=sys.executable, args=[str(SERVER)])
    async with tool:
        yield tool


def received(text: str) -> Any:
    """What the server echoed it received, or None when it did not run."""
    if text.startswith('{"result": '):
        text = json.loads(text)["result"]
    if not text.startswith("received "):
        return None
    return json.loads(text.removeprefix("received "))


async def one_call(tools: list[Any], policies: guardrails.PolicySet, name: str,
                   **arguments: Any) -> str:
    client = ScriptedChatClient([[call(name, **arguments)]])
    await agent_with(client, tools, guard(policies), include_detailed_errors=True).run("go")
    [result] = client.tool_results()
    return result_text(result)


def chain(links: int) -> dict[str, Any]:
    value: dict[str, Any] = {"tag": "same"}
    for _ in range(links):
        value = {"tag": "same", "next": value}
    return value


def tree(levels: int, width: int) -> dict[str, Any]:
    node: dict[str, Any] = {"label": "x"}
    for _ in range(levels):
        node = {"label": "x", "children": [node] + [{"label": "y"} for _ in range(width)]}
    return node


async def test_a_short_chain_both_alternatives_accept_runs_as_judged(
        policies: guardrails.PolicySet, bank: MCPStdioTool) -> None:
    text = await one_call([bank], policies, "either", link=chain(3))
    filled = {"tag": "same", "next": None}
    for _ in range(3):
        filled = {"tag": "same", "next": filled}
    assert received(text) == filled


@pytest.mark.parametrize(("tool_name", "arguments"), [
    # A recursive union both of whose models accept the value: tried both ways per level.
    ("either", {"link": chain(14)}),
    # A recursive model: each level's union checks the whole subtree below it again.
    ("tree", {"node": tree(14, 40)}),
    # Many small values: each a few keywords.
    ("batch", {"payments": [{"to": "bob", "amount": 1, "cc": "ops@bank.example"}
                            for _ in range(1_000)]}),
    # Items that do not sort are compared pairwise by uniqueItems.
    ("tags", {"values": [*range(3_000), "x"]}),
], ids=["overlapping-union", "tree", "batch", "unique-items"])
async def test_arguments_too_costly_for_their_schema_are_refused(
        policies: guardrails.PolicySet, bank: MCPStdioTool, tool_name: str,
        arguments: dict[str, Any]) -> None:
    text = await one_call([bank], policies, tool_name, **arguments)
    assert received(text) is None, text[:200]
    assert OVER in text, text[:300]


async def test_a_list_within_the_steps_runs_and_is_judged(
        policies: guardrails.PolicySet, bank: MCPStdioTool) -> None:
    payments = [{"to": "bob", "amount": 1, "cc": "ops@bank.example"} for _ in range(150)]
    text = await one_call([bank], policies, "batch", payments=payments)
    assert received(text) == payments
    # A server default left out is still filled and judged.
    text = await one_call([bank], policies, "batch",
                          payments=[*payments[:10], {"to": "eve", "amount": 2}])
    assert received(text) is None and "Copies stay inside the bank." in text, text[:300]


async def test_a_pattern_python_backtracks_on_is_matched_in_linear_time(
        policies: guardrails.PolicySet, bank: MCPStdioTool) -> None:
    # (a..a! takes Python's re exponential time under this pattern; RE2 reads it once.)
    text = await one_call([bank], policies, "contact", email="a" * 4_000 + "!")
    assert received(text) is None, text[:200]
    assert "email: fails 'pattern'" in text, text[:300]
    text = await one_call([bank], policies, "contact", email="bob@bank.com")
    assert received(text) == "bob@bank.com"


async def test_a_sortable_set_within_the_steps_runs(
        policies: guardrails.PolicySet, bank: MCPStdioTool) -> None:
    text = await one_call([bank], policies, "tags", values=[3, 1, 2])
    assert received(text) == [1, 2, 3]
    text = await one_call([bank], policies, "tags", values=[1, 2, 1])
    assert received(text) is None and "values: fails 'uniqueItems'" in text, text[:300]
