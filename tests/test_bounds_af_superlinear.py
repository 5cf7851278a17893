"""Bounded cost in the real agent loop, for work that grows faster than its input.

Each attack made one guarded call run for seconds before this round's charges: distinct
regular expressions brought by the call, values found in an untrusted result (provenance),
membership of lists in a list, edit distances of long names, sets of lists. In the real
loop each call must be blocked by the cost bound (fail closed: the tool never runs), the
guard's block message and history must carry no argument value, and a secret argument
that is also over the bound must not leak. Asserted on decisions and counted work, never
on time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agent_framework import AgentSession, tool

import guardrails
from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework.scripted import call, result_text
from guardrails.expr import lib_common
from guardrails.expr import stdlib as std
from tests.af_support import STREAMING, agent_with, run

RAN: list[Any] = []
SECRET = "tok-Zq81-very-secret-value"


@tool
def submit(items: Any = None, other: Any = None, token: Any = None) -> str:
    """Submit items."""
    RAN.append(items)
    return "submitted"


@pytest.fixture(autouse=True)
def _clear() -> Any:
    RAN.clear()
    yield
    RAN.clear()


RULES = {
    "patterns": "args.items.exists(p, 'hello'.matches(p))",
    "find": "args.items.exists(p, 'hello'.find(p) != '')",
    "membership": "args.items.filter(x, x in args.other).size() > 0",
    "distance": "args.items.exists(x, domains.distance(x, args.other) < 2)",
    "sets": "sets.intersects(args.items, args.other)",
    "provenance": "args.items.exists(r, untrusted(r))",
}


def _inputs(kind: str) -> dict[str, Any]:
    if kind in ("patterns", "find"):
        return {"items": [f"(?i)n{i}[0-9a-f]{{8,}}z|q{i}.*w{i}" for i in range(5_000)]}
    if kind == "membership":
        return {"items": [[i] for i in range(3_000)], "other": [[-i] for i in range(3_000)]}
    if kind == "distance":
        name = ".".join(["a" * 62] * 4)
        return {"items": [name] * 300, "other": ".".join(["b" * 62] * 4)}
    if kind == "sets":
        return {"items": [[i] for i in range(3_000)], "other": [[-i] for i in range(3_000)]}
    return {"items": [f"w{i}x{i * 7}" for i in range(6_000)]}


def _policies(tmp_path: Path, kind: str) -> guardrails.PolicySet:
    path = tmp_path / f"{kind}.yaml"
    path.write_text(
        "apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\nspec:\n"
        "  match: {tools: [submit]}\n  secrets: {arguments: [token]}\n  rules:\n"
        f"    - name: r\n      when: \"{RULES[kind]}\"\n      action: warn\n",
        encoding="utf-8")
    return guardrails.load(path)


@STREAMING
@pytest.mark.parametrize("kind", sorted(RULES))
async def test_superlinear_work_is_stopped_at_the_budget_in_the_loop(
        tmp_path: Path, kind: str, stream: bool) -> None:
    policies = _policies(tmp_path, kind)
    session = AgentSession()
    if kind == "provenance":
        # The values appear in a trusted result: none is untrusted, so every one is searched.
        text = " ".join(_inputs(kind)["items"])
        session.state["guardrails"] = {"history": [
            {"tool": "read", "args": {}, "effect": "allow", "trusted": True,
             "result": text[i:i + 60_000]} for i in range(0, len(text), 60_000)]}
    client = ScriptedChatClient([[call("submit", token=SECRET, **_inputs(kind))]])
    agent = agent_with(client, [submit], guard(policies))
    response = await run(agent, "submit them", stream=stream, session=session)
    result = result_text(client.tool_results()[-1])
    # A warn rule that cannot be evaluated within the budget fails closed: the tool never
    # runs, and nothing the call brought is quoted back.
    assert RAN == []
    assert "denied" in result
    assert SECRET not in result and SECRET not in str(response)
    entry = session.state["guardrails"]["history"][-1]
    assert entry["effect"] == "deny" and SECRET not in repr(entry)


async def test_the_loop_compiles_no_more_patterns_than_the_budget_pays_for(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from guardrails.expr.limits import DEFAULT_LIMITS, PATTERN_COST

    compiled: list[str] = []
    monkeypatch.setattr(std, "_TESTERS", {})
    monkeypatch.setattr(lib_common, "_RE2_CACHE", {})
    real = std.regex
    monkeypatch.setattr(std, "regex", lambda p: compiled.append(p) or real(p))
    policies = _policies(tmp_path, "patterns")
    client = ScriptedChatClient([[call("submit", **_inputs("patterns"))]])
    await run(agent_with(client, [submit], guard(policies)), "submit them",
              session=AgentSession())
    assert RAN == []
    # The guard may evaluate a call more than once (validation settles it): each
    # evaluation pays its own compiles, each within one budget.
    assert 0 < len(compiled) <= 4 * (DEFAULT_LIMITS.max_cost // PATTERN_COST + 1)
