"""Red team 25: race 24's history section (``_locks``, ``HistoryTurn.enter``)
attacked in the real loop: parallel calls of one message on each of two threads sharing a
session, a run cancelled while its call waits for the other thread's section, and a
sub-agent sharing the session. None got through: pinned.

Real framework loop (``Agent``, ``ScriptedChatClient``, ``guard``), real threads each with
its own ``asyncio`` loop; a synchronous vault holds each section a little (as a vault
client's round trip does).
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from agent_framework import Agent, AgentSession

from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework._history import _SECTIONS
from guardrails.agent_framework._state import STATE_KEY
from guardrails.agent_framework.scripted import call, text
from tests.af_support import load_text
from tests.test_race24_history_loop import PAID, POLICY, HeldVault, pay


class SlowVault:
    """A synchronous vault client whose every round trip takes ``pause`` seconds."""

    def __init__(self, pause: float) -> None:
        self.pause = pause

    def get(self, ref: str) -> str:
        time.sleep(self.pause)
        return "vault-bank-key-0123456789"


@pytest.fixture(autouse=True)
def _clear(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("BANK_KEY", "unused")
    PAID.clear()
    yield
    PAID.clear()


def _section_free(session: AgentSession) -> bool:
    section = _SECTIONS.get(id(session.state[STATE_KEY]))
    return section is None or (not section.lock.locked() and section.users == 0)


def test_parallel_calls_of_two_threads_never_pass_the_limit(tmp_path: Path) -> None:
    """Each thread's model asks for six payments of 100 in one message (run together by
    the framework) on one session: at most ten are paid, every other one is denied by the
    rule (none blocked as a section held by its own thread), and the section is free."""
    policies = load_text(tmp_path, POLICY)
    middleware = guard(policies, secrets=SlowVault(0.002))
    session = AgentSession()
    results: list[str] = []
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def thread() -> None:
        client = ScriptedChatClient([[call("pay", to="x", amount=100) for _ in range(6)],
                                     [text("done")]])
        agent = Agent(client=client, tools=[pay], middleware=middleware)
        try:
            start.wait(10)
            asyncio.run(agent.run("pay", session=session))
            results.extend(str(r.result) for r in client.tool_results())
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=thread) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors
    assert sum(PAID) == 1000, PAID
    assert len(results) == 12
    assert not [r for r in results if "held by another call" in r or "blocked" in r], results
    effects = [e["effect"] for e in session.state[STATE_KEY]["history"]]
    assert sorted(effects) == ["allow"] * 10 + ["deny"] * 2, effects
    assert _section_free(session)


def test_a_run_cancelled_while_its_call_waits_leaves_the_section_to_its_holder(
        tmp_path: Path) -> None:
    """Thread B's run is cancelled (``wait_for`` times out) while its call waits for A's
    section: B's call never ran, A's record stands, the section is A's until A leaves
    it, and a later call of B's loop decides on A's record."""
    policies = load_text(tmp_path, POLICY)
    vault = HeldVault()
    middleware = guard(policies, secrets=vault)
    session = AgentSession()
    seen: dict[str, Any] = {}

    def thread_a() -> None:
        client = ScriptedChatClient([[call("pay", to="x", amount=600)], [text("done")]])
        asyncio.run(Agent(client=client, tools=[pay], middleware=middleware)
                    .run("pay", session=session))
        seen["a"] = str(client.tool_results()[0].result)

    async def loop_b() -> None:
        client = ScriptedChatClient([[call("pay", to="x", amount=600)], [text("done")]])
        agent = Agent(client=client, tools=[pay], middleware=middleware)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(agent.run("pay", session=session), 0.2)
        section = _SECTIONS[id(session.state[STATE_KEY])]
        seen["held"] = section.lock.locked()
        seen["users"] = section.users
        vault.release.set()
        for _ in range(200):  # A records and leaves
            if not section.lock.locked():
                break
            await asyncio.sleep(0.01)
        again = ScriptedChatClient([[call("pay", to="x", amount=600)], [text("done")]])
        await Agent(client=again, tools=[pay], middleware=middleware).run(
            "pay", session=session)
        seen["again"] = str(again.tool_results()[-1].result)

    a = threading.Thread(target=thread_a)
    a.start()
    assert vault.held.wait(10)
    b = threading.Thread(target=lambda: asyncio.run(loop_b()))
    b.start()
    b.join(30)
    a.join(30)
    assert seen["held"] is True and seen["users"] == 1, seen  # A's, B's count gone back
    assert PAID == [600], (PAID, seen, session.state[STATE_KEY]["history"])
    assert "add up to more than 1000" in seen["again"], (seen, PAID, session.state[STATE_KEY]["history"])
    effects = [e["effect"] for e in session.state[STATE_KEY]["history"]]
    assert effects == ["allow", "deny"], effects
    assert _section_free(session)


async def test_a_sub_agent_sharing_the_session_takes_its_turn(tmp_path: Path) -> None:
    """A sub-agent run as its caller's tool with the caller's session (what
    ``as_tool(propagate_session=True)`` shares): its calls enter the same section after
    the caller's call left it; the limit holds across both."""
    policies = load_text(tmp_path, POLICY)
    middleware = guard(policies)
    session = AgentSession()
    inner = ScriptedChatClient([[call("pay", to="x", amount=600)], [text("done")]])
    sub = Agent(client=inner, tools=[pay], middleware=middleware, name="payer")
    outer = ScriptedChatClient([[call("pay", to="x", amount=600)],
                                [call("payer", task="pay")], [text("done")]])
    agent = Agent(client=outer, tools=[pay, sub.as_tool(propagate_session=True)],
                  middleware=middleware)
    await agent.run("pay twice", session=session)
    assert PAID == [600]
    assert "add up to more than 1000" in str(inner.tool_results()[-1].result)
    assert _section_free(session)
