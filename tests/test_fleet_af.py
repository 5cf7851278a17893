"""Agents, bindings and counters in the framework's real agent loop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_framework import Agent

import guardrails
from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework.scripted import call
from guardrails.engine.counters import MemoryStore
from tests.af_support import STREAMING, RecordingTelemetry, approve_all, clear_calls_fixture, run
from tests.af_tools import CALLS, send_money

_clear = clear_calls_fixture()

POLICIES = """
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: support-payments}
spec:
  match: {tools: [send_money], agents: [support]}
  rules:
    - {name: no-payments, when: 'true', action: deny, message: support cannot pay}
---
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: finance-payments}
spec:
  match: {tools: [send_money], agents: [finance]}
  counters:
    - {name: payments, key: 'principal.user', window: 1d, limit: 2}
  rules:
    - {name: daily-limit, when: 'counters.payments.exceeded', action: deny,
       message: daily payment limit reached}
    - {name: big, when: 'args.amount > 1000', action: require_approval}
"""


def _policies(tmp_path: Path) -> guardrails.PolicySet:
    path = tmp_path / "p.yaml"
    path.write_text(POLICIES)
    return guardrails.load(path)


def _agent(name: str, client: ScriptedChatClient, middleware: list[Any]) -> Agent:
    return Agent(client=client, name=name, tools=[send_money], middleware=middleware)


@STREAMING
async def test_same_tool_two_agents_two_policies(tmp_path: Path, stream: bool) -> None:
    policies = _policies(tmp_path)
    telemetry = RecordingTelemetry()
    from tests.af_support import guarded
    for name in ("support", "finance"):
        client = ScriptedChatClient([[call("send_money", recipient="UK12", amount=10)]])
        await run(_agent(name, client, guarded(policies, telemetry, principal={"user": "u"})),
                  "pay", stream=stream)
    support, finance = telemetry.decisions
    assert support.effect == "deny" and support.policies == ("support-payments",)
    assert finance.effect == "allow" and finance.policies == ("finance-payments",)
    assert CALLS == [("send_money", {"recipient": "UK12", "amount": 10.0})]


async def test_counter_across_runs_and_agents_sharing_one_store(tmp_path: Path) -> None:
    policies = _policies(tmp_path)
    store = MemoryStore()
    for i in range(4):  # four runs, two guards (two replicas in one process), one store
        client = ScriptedChatClient([[call("send_money", recipient=f"P{i}", amount=10)]])
        mw = guard(policies, principal={"user": "ann"}, counters=store)
        await run(_agent("finance", client, mw), "pay")
    assert [c[1]["recipient"] for c in CALLS] == ["P0", "P1"]
    # Each call reserved once, although settling the validated arguments evaluates more.
    import json

    from guardrails.engine.counters import window_key
    assert store.count(window_key("finance-payments/payments", json.dumps("ann")), 86400) == 2


async def test_a_call_waiting_for_approval_is_counted_only_when_it_runs(tmp_path: Path) -> None:
    policies = _policies(tmp_path)
    store = MemoryStore()
    mw = guard(policies, principal={"user": "bob"}, counters=store)
    client = ScriptedChatClient([[call("send_money", recipient="UK12", amount=5000)]])
    agent = _agent("finance", client, mw)
    session = agent.create_session()
    first = await run(agent, "pay", session=session)
    assert first.user_input_requests and CALLS == []
    # Waiting for approval holds nothing: two other payments still fit in the limit...
    for i in range(2):
        c = ScriptedChatClient([[call("send_money", recipient=f"Q{i}", amount=1)]])
        await run(_agent("finance", c, guard(policies, principal={"user": "bob"},
                                             counters=store)), "pay")
    assert len(CALLS) == 2
    # ...and the approved replay is evaluated again: now over the limit, it is denied.
    await run(agent, approve_all(first), session=session)
    assert len(CALLS) == 2


async def test_unknown_agent_gets_every_agents_restrictions(tmp_path: Path) -> None:
    """Without the run boundary the agent is unknown: every agent selector matches."""
    from guardrails.agent_framework import GuardFunctionMiddleware

    policies = _policies(tmp_path)
    telemetry = RecordingTelemetry()
    client = ScriptedChatClient([[call("send_money", recipient="UK12", amount=10)]])
    only_function = [GuardFunctionMiddleware(policies, telemetry=telemetry)]
    await run(_agent("finance", client, only_function), "pay")
    assert telemetry.decisions[0].effect == "deny" and CALLS == []


class SlowStore(MemoryStore):
    """Our own store interface with a slow round trip (as a far Redis would have)."""

    blocking = True

    def reserve(self, requests: Any) -> Any:
        import time
        time.sleep(0.3)
        return super().reserve(requests)


async def test_a_blocking_store_never_blocks_the_event_loop(tmp_path: Path) -> None:
    import asyncio

    policies = _policies(tmp_path)
    ticks = 0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not done.is_set():
            await asyncio.sleep(0.01)
            ticks += 1

    async def one_run() -> None:
        client = ScriptedChatClient([[call("send_money", recipient="P", amount=10)]])
        mw = guard(policies, principal={"user": "ann"}, counters=SlowStore())
        await run(_agent("finance", client, mw), "pay")
        done.set()

    await asyncio.gather(ticker(), one_run())
    assert CALLS and ticks >= 10  # the loop kept running while the store took 300 ms


async def test_a_sub_agent_is_judged_as_itself(tmp_path: Path) -> None:
    """The same tool, called by the orchestrator and by the sub-agent it runs: each call is
    decided with the policies of the agent that made it."""
    from guardrails.agent_framework.scripted import text

    policies = _policies(tmp_path)
    telemetry = RecordingTelemetry()
    from tests.af_support import guarded
    inner_client = ScriptedChatClient([[call("send_money", recipient="IN", amount=10)],
                                       [text("inner done")]])
    inner = Agent(client=inner_client, name="support", description="Support desk.",
                  tools=[send_money], middleware=guarded(policies, telemetry,
                                                         principal={"user": "u"}))
    outer_client = ScriptedChatClient([[call("support", task="refund")],
                                       [call("send_money", recipient="OUT", amount=10)],
                                       [text("done")]])
    outer = Agent(client=outer_client, name="finance", tools=[inner.as_tool(), send_money],
                  middleware=guarded(policies, telemetry, principal={"user": "u"}))
    await run(outer, "go")
    by_recipient = {d.arguments.get("recipient"): d for d in telemetry.decisions
                    if d.tool == "send_money"}
    assert by_recipient["IN"].policies == ("support-payments",)
    assert by_recipient["IN"].effect == "deny"
    assert by_recipient["OUT"].policies == ("finance-payments",)
    assert CALLS == [("send_money", {"recipient": "OUT", "amount": 10.0})]
