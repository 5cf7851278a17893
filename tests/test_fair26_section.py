"""Fair 26: the session history's section is taken in turn across threads.

Race 24 made a call of one thread wait for another thread's section without stalling its
loop: non-blocking tries with ``asyncio.sleep`` (0.5 ms growing to 20 ms) between them. That
was not fair. A thread running one guarded call after another on a session leaves the
section and takes it again at once; the waiting thread, woken from its pause, needs the GIL
to try, and gets it when the busy thread lets go of it: in its vault round trip, inside the
section. Every try found the section held, the waiter reached its deadline and its call, a
legitimate one, was blocked. Now the section is handed to the call that has waited longest
(``_locks.FairLock``), the waiters of another loop woken on their own loop.

Real framework loop (``Agent``, ``ScriptedChatClient``, ``guard``), real threads each with
its own ``asyncio`` loop; the sections are held by a synchronous vault client's round trip.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from agent_framework import Agent, AgentSession

from guardrails.agent_framework import ScriptedChatClient, _history, guard
from guardrails.agent_framework._history import _SECTIONS, HistoryTurn
from guardrails.agent_framework._state import STATE_KEY
from guardrails.agent_framework.scripted import call, text
from tests.af_support import load_text
from tests.test_race24_history_loop import PAID, POLICY, pay
from tests.test_redteam25_sections import SlowVault

WAIT = 0.5
"""Seconds a call may wait for the section here (``_SECTION_WAIT``, 10 s in use)."""

BATCH = 60
"""Parallel payments thread A's model asks for in one message: the framework runs them
one after another on A's loop, each holding the section for a vault round trip of
``ROUND_TRIP`` (``BATCH * ROUND_TRIP`` is well past ``WAIT``)."""

ROUND_TRIP = 0.02


@pytest.fixture(autouse=True)
def _clear(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("BANK_KEY", "unused")
    monkeypatch.setattr(_history, "_SECTION_WAIT", WAIT)
    PAID.clear()
    yield
    PAID.clear()


def _section_free(state: dict[str, Any]) -> bool:
    section = _SECTIONS.get(id(state))
    return section is None or (not section.lock.locked() and section.users == 0)


def test_a_thread_retaking_the_section_never_starves_another(tmp_path: Path) -> None:
    """Thread A's model asks for 60 payments of 1 in one message on a session: A's loop
    runs them back to back, each leaving the section and the next taking it at once, with
    nothing in between that lets go of the GIL (the vault round trip inside the section
    does). Thread B's model asks for two payments of 2 on the same session meanwhile (two
    waiting calls of one loop). B's calls are paid, neither blocked (before: each try of B's
    came while A's vault held the section, until B's wait ran out), after at most a few of
    A's; A's are all paid."""
    policies = load_text(tmp_path, POLICY)
    middleware = guard(policies, secrets=SlowVault(ROUND_TRIP))
    session = AgentSession()
    b_results: list[str] = []
    errors: list[BaseException] = []
    a_client = ScriptedChatClient([[call("pay", to="a", amount=1) for _ in range(BATCH)],
                                   [text("done")]])

    def thread_a() -> None:
        try:
            asyncio.run(Agent(client=a_client, tools=[pay], middleware=middleware)
                        .run("pay", session=session))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def thread_b() -> None:
        client = ScriptedChatClient([[call("pay", to="b", amount=2) for _ in range(2)],
                                     [text("done")]])
        try:
            asyncio.run(Agent(client=client, tools=[pay], middleware=middleware)
                        .run("pay", session=session))
            b_results.extend(str(r.result) for r in client.tool_results())
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    a = threading.Thread(target=thread_a)
    a.start()
    for _ in range(1000):  # A's first payment made: A's batch is under way
        if PAID:
            break
        time.sleep(0.005)
    a_before = len(PAID)
    b = threading.Thread(target=thread_b)
    b.start()
    b.join(30)
    a.join(30)
    assert not a.is_alive() and not b.is_alive()
    assert not errors, errors
    assert not [r for r in b_results if "blocked" in r or "held by" in r], b_results
    assert PAID.count(2) == 2, PAID  # B's two calls
    assert PAID.count(1) == BATCH, PAID
    a_between = PAID[a_before:PAID.index(2, a_before)].count(1)
    assert a_between <= 3, f"{a_between} of A's calls went before B's first: {PAID}"
    assert _section_free(session.state[STATE_KEY])


class _Holder:
    """A thread whose loop holds a section until ``release`` is set, then leaves it and
    says so (``left``)."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.holding = threading.Event()
        self.release = threading.Event()
        self.left = threading.Event()
        self.thread = threading.Thread(target=lambda: asyncio.run(self._hold(state)))
        self.thread.start()
        assert self.holding.wait(10)

    async def _hold(self, state: dict[str, Any]) -> None:
        turn = HistoryTurn()
        await turn.enter(state)
        self.holding.set()
        self.release.wait(10)
        turn.done()
        self.left.set()


async def _until(check: Any) -> None:
    for _ in range(500):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("never happened")


def test_a_waiter_cancelled_after_the_section_was_handed_to_it_passes_it_on(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The holder leaves the section to waiter 1 (thread B's loop), whose task is cancelled
    before its loop wakes it: it passes the section on to waiter 2 (thread C), which takes
    it; nothing leaks, nothing is lost."""
    monkeypatch.setattr(_history, "_SECTION_WAIT", 10.0)  # (a loaded machine is slow)
    state: dict[str, Any] = {}
    holder = _Holder(state)
    section = _SECTIONS[id(state)]
    seen: dict[str, Any] = {}
    b_queued = threading.Event()
    c_queued = threading.Event()
    c_entered = threading.Event()

    async def loop_b() -> None:
        first = asyncio.create_task(HistoryTurn().enter(state))
        await _until(lambda: len(section.waiters) == 1)
        b_queued.set()  # (C queues only now: ``first`` is the oldest waiter)
        await asyncio.to_thread(lambda: c_queued.wait(10))
        # Not awaited from here: the holder leaves, handing the section to ``first``,
        # whose wake-up waits for this loop; it is cancelled before it runs.
        holder.release.set()
        assert holder.left.wait(10)
        seen["handed"] = section.lock.locked() and len(section.waiters) == 1
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first

    async def loop_c() -> None:
        await asyncio.to_thread(lambda: b_queued.wait(10))
        turn = HistoryTurn()
        entering = asyncio.create_task(turn.enter(state))
        await _until(lambda: len(section.waiters) == 2)
        c_queued.set()
        await entering
        seen["c_holds"] = section.lock.locked() and section.thread == threading.get_ident()
        c_entered.set()
        turn.done()

    c = threading.Thread(target=lambda: asyncio.run(loop_c()))
    b = threading.Thread(target=lambda: asyncio.run(loop_b()))
    b.start()
    c.start()
    b.join(30)
    c.join(30)
    holder.thread.join(10)
    assert seen.get("handed") is True, seen
    assert c_entered.is_set() and seen["c_holds"] is True, seen
    assert _section_free(state) and not section.waiters


def test_a_waiter_whose_loop_closed_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    """A waiter's loop is closed without its task ever finishing (a host that closes a
    loop it stopped): the holder's leave cannot wake it and gives the section to the next
    call instead of leaving it held by nobody."""
    monkeypatch.setattr(_history, "_SECTION_WAIT", 10.0)
    state: dict[str, Any] = {}
    holder = _Holder(state)
    section = _SECTIONS[id(state)]
    tasks: list[asyncio.Task[None]] = []

    def dead_loop() -> None:
        loop = asyncio.new_event_loop()
        tasks.append(loop.create_task(HistoryTurn().enter(state)))
        loop.run_until_complete(asyncio.sleep(0.05))
        loop.close()

    dead = threading.Thread(target=dead_loop)
    dead.start()
    dead.join(10)
    assert len(section.waiters) == 1
    holder.release.set()
    holder.thread.join(10)
    assert not section.lock.locked() and not section.waiters

    async def again() -> None:
        turn = HistoryTurn()
        await asyncio.wait_for(turn.enter(state), 1)
        turn.done()

    asyncio.run(again())
    assert section.users == 1  # the dead waiter's, until its coroutine is closed
    tasks[0].get_coro().close()  # (what collecting it does)
    assert _section_free(state)
