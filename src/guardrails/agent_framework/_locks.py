"""Taking a thread lock from an event loop without stalling it.

``threading.Lock.acquire(timeout=...)`` on an event loop stops the whole loop until the
lock is free: every task of that thread (a request's other work, a heartbeat, another
agent) waits, not only the call that wants the lock. A host serving requests in threads,
each with its own loop, shares locks between them (a session's history section,
``_history.HistoryTurn.enter``), and the other thread may hold one for a secret provider's
round trip: its loop stalled for as long (up to ten seconds). So a lock that may be held
long by another thread is taken here: a try that never blocks, then short, growing pauses
of the loop (``asyncio.sleep``, other tasks run) between tries, up to the same overall wait.
"""

from __future__ import annotations

import asyncio
import threading
import time

__all__ = ["FIRST_PAUSE", "MOST_PAUSE", "acquire"]

FIRST_PAUSE = 0.0005
"""Seconds of the first pause between two tries: a section is usually held for tens of
microseconds, so the first retries come soon."""

MOST_PAUSE = 0.02
"""The longest pause: a waiter notices a free lock at most this late (the lock is not
fair; a waiter that sleeps longer would more often find it taken again)."""


async def acquire(lock: threading.Lock, timeout: float) -> bool:
    """Take ``lock`` within ``timeout`` seconds, letting the loop run meanwhile; False when
    it is still held then. Never blocks the loop: each try is ``acquire(False)``. A call
    cancelled while it waits holds nothing."""
    if lock.acquire(False):
        return True
    deadline = time.monotonic() + timeout
    pause = FIRST_PAUSE
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        await asyncio.sleep(min(pause, left))
        if lock.acquire(False):
            return True
        pause = min(pause * 2, MOST_PAUSE)
