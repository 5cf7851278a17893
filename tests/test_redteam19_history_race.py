"""Red team 19: history rules judged on a history that sibling calls had already changed.

A call of a batch is decided and recorded in history without the event loop running
anything else in between, so a sibling (the calls of a batch run as concurrent tasks)
always decides on a history that holds every call decided before it. Except when the
guard waits between the two: with a counter store that does I/O (``SQLiteStore``,
``RedisStore``: ``blocking``), the counted evaluation runs in a worker thread, and every
sibling decided meanwhile read a history without the call in flight, and the call in
flight had read one without them. A structuring rule ("the payments of this session add
up to at most 1,000") let a model's five parallel payments of 400 all through (2,000)
whenever the tool also had a counter on a shared store: the fleet's set-up. Now a call
that waits between reading history and recording itself holds the history's turn, and
every call reading that history waits for it (tests below: in the real loop, a real
SQLite file, streaming and not, a counted call beside an uncounted one, two runs sharing
a session, a run without a session).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from agent_framework import Agent, AgentSession, tool

import guardrails
from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework.scripted import call, text
from guardrails.engine.counters import MemoryStore
from guardrails.fleet.stores import SQLiteStore
from tests.af_support import STREAMING, load_text, run

PAID: list[tuple[str, int]] = []

POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: payments}
spec:
  match: {tools: ["pay", "pay_fast"]}
  counters:
    - {name: calls, key: '"all"', window: 1h, limit: 1000}
  rules:
    - name: structuring
      when: >-
        history.filter(h, h.tool in ["pay", "pay_fast"] && h.effect == "allow")
          .map(h, h.args.amount).sum() + args.amount > 1000
      action: deny
      message: the payments of this session add up to more than 1000
"""
UNCOUNTED = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: fast}
spec:
  match: {tools: ["pay_fast"]}
  rules:
    - name: structuring
      when: >-
        history.filter(h, h.tool in ["pay", "pay_fast"] && h.effect == "allow")
          .map(h, h.args.amount).sum() + args.amount > 1000
      action: deny
"""


@tool
def pay(to: str, amount: int) -> str:
    PAID.append(("pay", amount))
    return "paid"


@tool
def pay_fast(to: str, amount: int) -> str:
    PAID.append(("pay_fast", amount))
    return "paid"


@pytest.fixture(autouse=True)
def _clear() -> Any:
    PAID.clear()
    yield
    PAID.clear()


def _store(tmp_path: Path, kind: str) -> Any:
    return SQLiteStore(tmp_path / "counters.db") if kind == "sqlite" else MemoryStore()


STORES = pytest.mark.parametrize("kind", ["sqlite", "memory"])


def _total() -> int:
    return sum(amount for _, amount in PAID)


@STREAMING
@STORES
async def test_parallel_payments_never_add_up_past_a_history_limit(
        tmp_path: Path, stream: bool, kind: str) -> None:
    policies = load_text(tmp_path, POLICY)
    client = ScriptedChatClient([[call("pay", to="x", amount=400) for _ in range(5)],
                                 [text("done")]])
    agent = Agent(client=client, tools=[pay], middleware=guard(policies,
                                                               counters=_store(tmp_path, kind)))
    await run(agent, "pay", stream=stream, session=AgentSession())
    assert _total() == 800, PAID
    results = sorted(r.result for r in client.tool_results())
    assert results.count("paid") == 2


@STORES
async def test_an_uncounted_sibling_waits_for_the_counted_call_in_flight(
        tmp_path: Path, kind: str) -> None:
    """The sibling's policy has no counter: it does not wait itself, but it must not read
    the history while a counted call of it is in the store's thread."""
    policies = guardrails.load([_write(tmp_path, "a.yaml", POLICY.replace(
        '["pay", "pay_fast"]}', '["pay"]}', 1)), _write(tmp_path, "b.yaml", UNCOUNTED)])
    batch = [call("pay", to="x", amount=600), call("pay_fast", to="x", amount=600),
             call("pay", to="x", amount=300), call("pay_fast", to="x", amount=300)]
    client = ScriptedChatClient([batch, [text("done")]])
    agent = Agent(client=client, tools=[pay, pay_fast],
                  middleware=guard(policies, counters=_store(tmp_path, kind)))
    await agent.run("pay", session=AgentSession())
    assert _total() <= 1000, PAID
    assert PAID  # something was paid


@STORES
async def test_two_runs_on_one_session_share_the_turn(tmp_path: Path, kind: str) -> None:
    policies = load_text(tmp_path, POLICY)
    middleware = guard(policies, counters=_store(tmp_path, kind))
    session = AgentSession()

    async def one() -> None:
        client = ScriptedChatClient([[call("pay", to="x", amount=400) for _ in range(3)],
                                     [text("done")]])
        await Agent(client=client, tools=[pay], middleware=middleware).run(
            "pay", session=session)

    await asyncio.gather(one(), one())
    assert _total() == 800, PAID


@STORES
async def test_a_run_without_a_session_keeps_its_own_history_in_turn(
        tmp_path: Path, kind: str) -> None:
    policies = load_text(tmp_path, POLICY)
    client = ScriptedChatClient([[call("pay", to="x", amount=400) for _ in range(5)],
                                 [text("done")]])
    agent = Agent(client=client, tools=[pay],
                  middleware=guard(policies, counters=_store(tmp_path, kind)))
    await agent.run("pay")
    assert _total() == 800, PAID


async def test_separate_sessions_do_not_wait_for_each_other(tmp_path: Path) -> None:
    """Each session has its own history and its own turn: both pay their 800."""
    policies = load_text(tmp_path, POLICY)
    middleware = guard(policies, counters=SQLiteStore(tmp_path / "c.db"))

    async def one() -> None:
        client = ScriptedChatClient([[call("pay", to="x", amount=400) for _ in range(3)],
                                     [text("done")]])
        await Agent(client=client, tools=[pay], middleware=middleware).run(
            "pay", session=AgentSession())

    await asyncio.gather(one(), one())
    assert _total() == 1600, PAID


def _write(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return path


APPROVED = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: payments}
spec:
  match: {tools: ["pay"]}
  rules:
    - name: structuring
      when: >-
        history.filter(h, h.tool == "pay" && h.effect == "allow")
          .map(h, h.args.amount).sum() + args.amount > 1000
      action: deny
    - {name: ask, when: 'true', action: require_approval}
"""


@STREAMING
@pytest.mark.parametrize("kind", ["sqlite", "session"])
async def test_approved_replays_in_one_batch_still_add_up(tmp_path: Path, stream: bool,
                                                          kind: str) -> None:
    """A human approved five payments of 400 one by one; their replays run as one batch.
    With a shared approval store, each replay takes its held record in the store's thread:
    deny rules still apply to a replay (promise 6), on a history holding the replays
    recorded before it."""
    from tests.af_support import approve_all

    policies = load_text(tmp_path, APPROVED)
    store = SQLiteStore(tmp_path / "approvals.db") if kind == "sqlite" else None
    middleware = guard(policies, approvals=store, approval_key=b"k" * 32)
    client = ScriptedChatClient([[call("pay", to="x", amount=400) for _ in range(5)],
                                 [text("asked")], [text("done")]])
    agent = Agent(client=client, tools=[pay], middleware=middleware)
    session = AgentSession()
    first = await run(agent, "pay", stream=stream, session=session)
    assert len(first.user_input_requests) == 5 and PAID == []
    await run(agent, approve_all(first), stream=stream, session=session)
    assert _total() == 800, PAID


async def test_a_large_batch_takes_turns_without_guard_errors(tmp_path: Path) -> None:
    """Thirty counted calls in one batch: each waits for the one before, is decided again
    once, and none runs out of rounds (a guard error would block a call that fits)."""
    from guardrails.agent_framework import _history

    policies = load_text(tmp_path, POLICY)
    client = ScriptedChatClient([[call("pay", to="x", amount=30) for _ in range(30)],
                                 [text("done")]])
    agent = Agent(client=client, tools=[pay],
                  middleware=guard(policies, counters=SQLiteStore(tmp_path / "c.db")))
    await agent.run("pay", session=AgentSession())
    assert _total() == 900 and len(PAID) == 30
    assert not _history._TURNS  # every turn given back


async def test_a_turn_is_given_back_when_the_batch_is_cancelled(tmp_path: Path) -> None:
    """A sibling's halt cancels the counted calls holding or waiting for the turn: the next
    run on the session takes it at once."""
    from guardrails import PolicyViolation
    from guardrails.agent_framework import _history

    halting = POLICY + "    - {name: absurd, when: 'args.amount > 100000', action: halt}\n"
    policies = load_text(tmp_path, halting)
    middleware = guard(policies, counters=SQLiteStore(tmp_path / "c.db"))
    session = AgentSession()
    batch = [call("pay", to="x", amount=10), call("pay", to="x", amount=10),
             call("pay", to="x", amount=500000)]
    client = ScriptedChatClient([batch])
    with pytest.raises(PolicyViolation):
        await Agent(client=client, tools=[pay], middleware=middleware).run(
            "pay", session=session)
    await asyncio.sleep(0.2)  # the store's threads finish
    assert not _history._TURNS
    before = len(PAID)
    client = ScriptedChatClient([[call("pay", to="x", amount=10)], [text("done")]])
    await asyncio.wait_for(Agent(client=client, tools=[pay], middleware=middleware).run(
        "pay", session=session), 30)
    assert PAID[before:] == [("pay", 10)]
