"""Red team 20: ``history`` read by one call while another, in another thread, is between
reading it and recording itself.

A host that serves requests in threads (each with its own event loop: ``asyncio.run`` per
request) may run two requests of one user on one ``AgentSession`` at once. A call is
decided on the history as it stands and recorded after its decision; on one event loop
nothing runs in between (or the call is decided again: red team 19), but another thread
runs whenever this one lets go of the GIL: a secret provider's round trip to its vault
(a synchronous client), a decision-log sink writing a file, a counter store's thread. A
structuring rule ("the payments of this session add up to at most 1,000") let one payment
of 600 through in each of two threads (1,200), and with a counter store (SQLite) the
same race was open between a call's last look at the history and its record. Now the
reading (or last look) and the record of a call are one section per session history,
across threads.

Also: the mark a counted call compares to see whether the history changed was its length
and the ``id`` of its last entry; an entry pushed out of a full history is freed, and a
new entry can be built at its address, so the history changed under an equal mark.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from pathlib import Path
from typing import Any

import pytest
from agent_framework import Agent, AgentSession, tool

from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework._history import HistoryTurn, history_mark
from guardrails.agent_framework._state import STATE_KEY
from guardrails.agent_framework.scripted import call, text
from guardrails.fleet.stores import SQLiteStore
from tests.af_support import load_text

PAID: list[int] = []
_PAID_LOCK = threading.Lock()

POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: payments}
spec:
  match: {tools: ["pay"]}
  %s
  rules:
    - name: structuring
      when: >-
        history.filter(h, h.tool == "pay" && h.effect == "allow")
          .map(h, h.args.amount).sum() + args.amount > 1000
      action: deny
      message: the payments of this session add up to more than 1000
"""
INJECTS = "secrets: {inject: {api_key: {env: BANK_KEY}}}"
COUNTS = """counters: [{name: calls, key: '"all"', window: 1h, limit: 1000}]
  secrets: {inject: {api_key: {env: BANK_KEY}}}"""


@tool
def pay(to: str, amount: int, api_key: str = "") -> str:
    with _PAID_LOCK:
        PAID.append(amount)
    return "paid"


@pytest.fixture(autouse=True)
def _clear() -> Any:
    PAID.clear()
    yield
    PAID.clear()


class Vault:
    """A vault reached by a synchronous client: its round trip lets go of the GIL. Each
    fetch waits (up to a bound) for the other thread's fetch, as a slow vault makes two
    concurrent fetches overlap."""

    def __init__(self) -> None:
        self.both = threading.Barrier(2)

    def get(self, ref: str) -> str:
        with contextlib.suppress(threading.BrokenBarrierError):
            self.both.wait(timeout=0.5)
        return "vault-bank-key-0123456789"


def _two_threads(middleware: Any, session: AgentSession) -> None:
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def one() -> None:
        client = ScriptedChatClient([[call("pay", to="x", amount=600)], [text("done")]])
        agent = Agent(client=client, tools=[pay], middleware=middleware)
        start.wait()
        try:
            asyncio.run(agent.run("pay", session=session))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors, errors


@pytest.mark.parametrize("kind", ["uncounted", "sqlite"])
def test_two_threads_on_one_session_never_add_up_past_a_history_limit(
        tmp_path: Path, kind: str) -> None:
    policies = load_text(tmp_path, POLICY % (INJECTS if kind == "uncounted" else COUNTS))
    counters = SQLiteStore(tmp_path / "counters.db") if kind == "sqlite" else None
    middleware = guard(policies, secrets=Vault(), counters=counters)
    session = AgentSession()
    _two_threads(middleware, session)
    assert sum(PAID) <= 1000, PAID
    assert PAID == [600]
    entries = session.state[STATE_KEY]["history"]
    assert sorted(e["effect"] for e in entries) == ["allow", "deny"]


def test_the_mark_changes_when_the_last_entry_is_replaced_by_one_at_its_address() -> None:
    """A full history (its limit 1, say) whose one entry was pushed out by a new one:
    the old entry is freed, and CPython builds the next dict of the same size in its
    memory (before the fix, the mark of the entry that replaced it was equal). The mark
    must still change."""
    session = AgentSession()
    history: list[dict[str, Any]] = [{"tool": "pay", "args": {"amount": 600}, "effect": "allow",
                                      "result": "", "trusted": False, "at": "t0"}]
    session.state[STATE_KEY] = {"history": history}
    before = history_mark(session, None)
    args = {"amount": 1}  # (one arguments dict: the next dict built is the entry)
    for i in range(50):
        history.append({"tool": "pay", "args": args, "effect": "allow", "result": "",
                        "trusted": False, "at": f"t{i}"})
        del history[:-1]  # (record's bound: the old entry is freed)
        history.append({"tool": "pay", "args": args, "effect": "allow", "result": "",
                        "trusted": False, "at": f"u{i}"})
        del history[:-1]
        assert history_mark(session, None) != before
        before = history_mark(session, None)


async def test_a_sub_agent_sharing_the_session_takes_its_turn_without_deadlock(
        tmp_path: Path) -> None:
    """``as_tool(propagate_session=True)``: the sub-agent's session is another object over
    the caller's guard state (one history). Its calls run inside the caller's tool, after
    the caller's call left the section: they decide on the caller's payments, and nothing
    waits for itself."""
    policies = load_text(tmp_path, POLICY % "")
    middleware = guard(policies)
    inner = Agent(client=ScriptedChatClient([[call("pay", to="x", amount=600)], [text("ok")]]),
                  tools=[pay], middleware=middleware, name="payer")
    outer_client = ScriptedChatClient([
        [call("pay", to="x", amount=600), call("payer", task="pay 600 too")], [text("done")]])
    outer = Agent(client=outer_client, tools=[pay, inner.as_tool(propagate_session=True)],
                  middleware=middleware)
    session = AgentSession()
    await outer.run("pay", session=session)
    assert PAID == [600]
    assert not any("held by another call" in str(r.result) for r in outer_client.tool_results())
    effects = [e["effect"] for e in session.state[STATE_KEY]["history"]]
    assert sorted(effects) == ["allow", "allow", "deny"]  # (pay, payer, the inner pay)


async def test_a_section_held_by_this_thread_is_an_error_not_a_deadlock() -> None:
    """Nothing is awaited in a section; were a call of this thread to hold one across an
    await, a second call of the same event loop would wait for it (up to the bound) for
    nothing. It is a guard error at once instead (the call is blocked), and the section
    stays usable."""
    state: dict[str, Any] = {}
    first, second = HistoryTurn(), HistoryTurn()
    await first.enter(state)
    with pytest.raises(RuntimeError, match="of this thread"):
        await second.enter(state)
    first.done()
    await second.enter(state)  # free again
    second.done()


def test_a_call_of_another_thread_waits_for_the_section() -> None:
    state: dict[str, Any] = {}
    order: list[str] = []
    holder = HistoryTurn()
    asyncio.run(holder.enter(state))
    entered = threading.Event()

    def other() -> None:
        turn = HistoryTurn()
        asyncio.run(turn.enter(state))
        order.append("other")
        entered.set()
        turn.done()

    thread = threading.Thread(target=other)
    thread.start()
    assert not entered.wait(0.2)  # it waits for the holder
    order.append("holder")
    holder.done()
    thread.join(5)
    assert order == ["holder", "other"]
