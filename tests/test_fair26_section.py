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

WAIT = 1.0
"""Seconds a call may wait for the section here (``_SECTION_WAIT``, 10 s in use)."""

BUSY = 3 * WAIT
"""Seconds thread A goes on taking the section at most, whatever thread B does."""


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
    """Thread A runs guarded payments of 1 on a session one after another (each holds the
    section for a 5 ms vault round trip, and takes it again right after leaving it); thread
    B's model asks for two payments of 1 in one message on the same session (two waiting
    calls of one loop). B's calls are paid within the wait, none blocked, and so are A's."""
    policies = load_text(tmp_path, POLICY)
    middleware = guard(policies, secrets=SlowVault(0.005))
    session = AgentSession()
    b_done = threading.Event()
    a_started = threading.Event()
    a_results: list[str] = []
    b_results: list[str] = []
    errors: list[BaseException] = []

    async def loop_a() -> None:
        end = time.monotonic() + BUSY
        while not b_done.is_set() and time.monotonic() < end:
            client = ScriptedChatClient([[call("pay", to="a", amount=1)], [text("done")]])
            await Agent(client=client, tools=[pay], middleware=middleware).run(
                "pay", session=session)
            a_results.extend(str(r.result) for r in client.tool_results()[-1:])  # (its own: the
            # shared session holds the other runs' results too)
            a_started.set()

    def thread_a() -> None:
        try:
            asyncio.run(loop_a())
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def thread_b() -> None:
        client = ScriptedChatClient([[call("pay", to="b", amount=1) for _ in range(2)],
                                     [text("done")]])
        try:
            asyncio.run(Agent(client=client, tools=[pay], middleware=middleware)
                        .run("pay", session=session))
            b_results.extend(str(r.result) for r in client.tool_results()[-2:])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            b_done.set()

    a = threading.Thread(target=thread_a)
    a.start()
    assert a_started.wait(10), "thread A's first run never ended"
    b = threading.Thread(target=thread_b)
    b.start()
    b.join(30)
    a.join(30)
    assert not a.is_alive() and not b.is_alive()
    assert not errors, errors
    assert b_results == ["paid", "paid"], b_results
    assert a_results and all(r == "paid" for r in a_results), a_results
    assert len(PAID) == len(a_results) + 2
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


def test_a_waiter_cancelled_after_the_section_was_handed_to_it_passes_it_on() -> None:
    """The holder leaves the section to waiter 1 (thread B's loop), whose task is cancelled
    before its loop wakes it: it passes the section on to waiter 2 (thread C), which takes
    it; nothing leaks, nothing is lost."""
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
        seen["c_users"] = section.users
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
    assert c_entered.is_set() and seen["c_users"] == 1, seen
    assert _section_free(state) and not section.waiters


def test_a_waiter_whose_loop_closed_is_passed_over() -> None:
    """A waiter's loop is closed without its task ever finishing (a host that closes a
    loop it stopped): the holder's leave cannot wake it and gives the section to the next
    call instead of leaving it held by nobody."""
    state: dict[str, Any] = {}
    holder = _Holder(state)
    section = _SECTIONS[id(state)]

    def dead_loop() -> None:
        loop = asyncio.new_event_loop()
        loop.create_task(HistoryTurn().enter(state))
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
