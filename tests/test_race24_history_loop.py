"""Race 24: a call waiting for the session history's section never stalls its event loop.

A host serving requests in threads (each with its own event loop) may run two of one
user's on one ``AgentSession``. A call of thread A holds the history's section from reading
the history to its record, a secret provider's round trip included (``HistoryTurn.enter``);
a call of thread B on that session waits for it. It waited with
``threading.Lock.acquire(timeout=10)`` on B's event loop: every task of B's loop (a
heartbeat, another request's work) stopped for as long as A held the section, up to ten
seconds. Now B's call waits with non-blocking tries and ``asyncio.sleep`` between them:
B's loop keeps running, the call still decides on A's record, and past the same wait it
is the same guard error (blocked) as before.

Real framework loop (``Agent``, ``ScriptedChatClient``, ``guard``), real threads, each with
its own ``asyncio`` loop; A's section is held by a secret provider that waits on a
``threading.Event``, as a synchronous vault client does.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from agent_framework import Agent, AgentSession

from guardrails.agent_framework import ScriptedChatClient, _history, guard
from guardrails.agent_framework._history import _SECTIONS, HistoryTurn
from guardrails.agent_framework._state import STATE_KEY
from guardrails.agent_framework.scripted import call, text
from tests.af_support import load_text
from tests.test_redteam20_history import INJECTS, PAID, pay
from tests.test_redteam20_history import POLICY as STRUCTURING

POLICY = STRUCTURING % INJECTS
"""A structuring rule of 1,000 over the session's payments, the bank key from a vault."""

TICK = 0.005
"""Seconds between two ticks of thread B's ticker task."""

WATCH = 0.4
"""Seconds thread B watches its ticker while its guarded call waits for the section."""


class HeldVault:
    """A vault reached by a synchronous client whose first round trip lasts until the test
    lets it go (``release``): the first call holds its session's section meanwhile."""

    def __init__(self) -> None:
        self.held = threading.Event()
        self.release = threading.Event()
        self._lock = threading.Lock()
        self._first = True

    def get(self, ref: str) -> str:
        with self._lock:
            first, self._first = self._first, False
        if first:
            self.held.set()
            self.release.wait(timeout=30)
        return "vault-bank-key-0123456789"


@pytest.fixture(autouse=True)
def _clear(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("BANK_KEY", "unused")
    PAID.clear()
    yield
    PAID.clear()


def _agent(middleware: Any, amount: int) -> tuple[Agent, ScriptedChatClient]:
    client = ScriptedChatClient([[call("pay", to="x", amount=amount)], [text("done")]])
    return Agent(client=client, tools=[pay], middleware=middleware), client


class Watched:
    """What thread B saw: ticks of its ticker while its call waited, whether the call was
    still waiting then, and the tool's result the model got."""

    ticks = 0
    waiting = False
    result = ""


def _race(tmp_path: Path, release_after_b: bool) -> tuple[Watched, AgentSession]:
    """Thread A's call holds the section (its vault round trip); thread B runs a ticker
    and a guarded call on the same session. A is let go once B has watched its ticker
    (``release_after_b`` False) or once B's call is over (it timed out)."""
    policies = load_text(tmp_path, POLICY)
    vault = HeldVault()
    middleware = guard(policies, secrets=vault)
    session = AgentSession()
    watched = Watched()
    watched_done = threading.Event()
    errors: list[BaseException] = []

    def thread_a() -> None:
        try:
            asyncio.run(_agent(middleware, 600)[0].run("pay", session=session))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    async def loop_b() -> None:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(TICK)
                ticks += 1

        ticking = asyncio.create_task(ticker())
        agent, client = _agent(middleware, 600)
        paying = asyncio.create_task(agent.run("pay", session=session))
        await asyncio.sleep(WATCH)
        watched.ticks, watched.waiting = ticks, not paying.done()
        watched_done.set()
        await paying
        ticking.cancel()
        watched.result = str(client.tool_results()[0].result)

    def thread_b() -> None:
        try:
            asyncio.run(loop_b())
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    a = threading.Thread(target=thread_a)
    a.start()
    assert vault.held.wait(10), "thread A's call never reached its vault"
    b = threading.Thread(target=thread_b)
    b.start()
    if release_after_b:
        b.join(timeout=30)
    else:
        assert watched_done.wait(30)
    vault.release.set()
    a.join(timeout=30)
    b.join(timeout=30)
    assert not a.is_alive() and not b.is_alive()
    assert not errors, errors
    return watched, session


def test_a_call_waiting_for_another_threads_section_lets_its_loop_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """B's ticker keeps ticking while B's call waits; B's call then decides on A's record
    (600 + 600 is over the limit: denied), never on the history A read."""
    monkeypatch.setattr(_history, "_SECTION_WAIT", 5.0)
    watched, session = _race(tmp_path, release_after_b=False)
    assert watched.waiting, "B's call did not wait for A's section"
    # A blocked loop ticks at most once or twice; a running one about WATCH / TICK times.
    assert watched.ticks >= 10, f"B's loop stalled: {watched.ticks} ticks in {WATCH} s"
    assert PAID == [600]
    assert "held by another call" not in watched.result
    assert "add up to more than 1000" in watched.result
    effects = [e["effect"] for e in session.state[STATE_KEY]["history"]]
    assert effects == ["allow", "deny"], effects
    section = _SECTIONS.get(id(session.state[STATE_KEY]))
    assert section is None or (not section.lock.locked() and section.users == 0)


def test_past_the_wait_the_call_is_blocked_and_its_loop_ran_meanwhile(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A holds the section past the wait: B's call is a guard error (blocked, fail
    closed), as before, and B's loop ran all the while."""
    monkeypatch.setattr(_history, "_SECTION_WAIT", WATCH / 2)
    watched, session = _race(tmp_path, release_after_b=True)
    assert watched.ticks >= 10, f"B's loop stalled: {watched.ticks} ticks in {WATCH} s"
    assert "could not evaluate the call to pay, so it was blocked" in watched.result
    assert PAID == [600]  # A's call only
    section = _SECTIONS.get(id(session.state[STATE_KEY]))
    assert section is None or (not section.lock.locked() and section.users == 0)


async def test_a_call_cancelled_while_it_waits_holds_nothing() -> None:
    """Cancelled while it waits for another thread's section (a sibling's halt cancels a
    parallel batch): it holds no part of the section, and its user count goes back."""
    state: dict[str, Any] = {}
    holding = threading.Event()
    release = threading.Event()

    def holder() -> None:
        async def hold() -> None:
            turn = HistoryTurn()
            await turn.enter(state)
            holding.set()
            release.wait(10)
            turn.done()
        asyncio.run(hold())

    thread = threading.Thread(target=holder)
    thread.start()
    assert holding.wait(10)
    section = _SECTIONS[id(state)]
    waiting = asyncio.create_task(HistoryTurn().enter(state))
    await asyncio.sleep(0.05)
    assert not waiting.done() and section.users == 2
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert section.users == 1
    release.set()
    thread.join(10)
    assert section.users == 0 and not section.lock.locked()
