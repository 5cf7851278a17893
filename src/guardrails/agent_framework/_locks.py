"""A thread lock that calls on event loops take in turn, without stalling their loops.

``threading.Lock.acquire(timeout=...)`` on an event loop stops the whole loop until the
lock is free: every task of that thread (a request's other work, a heartbeat, another
agent) waits, not only the call that wants the lock. A host serving requests in threads,
each with its own loop, shares locks between them (a session's history section,
``_history.HistoryTurn.enter``), and the other thread may hold one for a secret provider's
round trip: its loop stalled for as long (up to ten seconds).

Retrying a plain lock between pauses of the loop (race 24) stalled no loop, but was not
fair: a thread that left the lock and took it again at once won every time against a
waiter that slept between its tries, and the waiter, starved to its deadline, was refused
(its call blocked; ``tests/test_fair26_section.py``). So a ``FairLock`` is handed over: a
call that finds it held queues, and whoever leaves it gives it to the oldest call still
waiting, which a future of its own loop wakes (``call_soon_threadsafe`` from another
thread). A call arriving while others wait queues behind them, so every waiter is served
after at most the calls queued before it.

A waiter gives up when the lock has not changed hands for its ``timeout`` (a holder that
hangs, a secret provider that never answers), not after ``timeout`` in line: the parallel
calls of one message queue together behind another thread's call, and the last of a long
batch waits for all the others' round trips before its own turn, which is progress.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import threading
import time

__all__ = ["FairLock"]


class _Waiter:
    """One call waiting for a ``FairLock``: the future of its loop that wakes it, and
    whether the lock was handed to it (then it holds it, even if it never wakes to see)."""

    __slots__ = ("future", "handed", "loop", "thread", "timer")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.future: asyncio.Future[None] = loop.create_future()
        self.thread = threading.get_ident()
        self.handed = False
        self.timer: asyncio.TimerHandle | None = None


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():  # (cancelled meanwhile: its waiter passes the lock on)
        future.set_result(None)


class FairLock:
    """A lock held by one call at a time, handed to waiting calls in the order they came.

    ``lock`` is held while a call holds the ``FairLock`` or it is being handed to one: the
    usual, uncontended take is ``lock.acquire(False)`` (no await, nothing queued), and the
    leave is ``release()``. A call that finds it held awaits ``take``, which never blocks
    its loop. Leave it only with ``release`` (which hands it on), never ``lock.release()``.
    """

    __slots__ = ("_guard", "_moved", "lock", "waiters")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.waiters: collections.deque[_Waiter] = collections.deque()
        self._guard = threading.Lock()
        """Held (briefly, never across an await) to queue, leave the queue or hand over."""
        self._moved = 0.0
        """When (``time.monotonic``) the lock was last handed over."""

    def release(self) -> None:
        """Leave the lock: to the oldest waiting call if there is one, else free.

        Released first and the queue read after, without the guard in the usual case of
        nobody waiting: a waiter queues under the guard and then tries the lock once more,
        so either its try finds the lock free or this read finds it queued."""
        self.lock.release()
        if self.waiters:
            self.pass_on()

    def pass_on(self) -> None:
        """The second half of ``release`` when calls wait (a hot caller writes the first
        half in line: ``lock.release()``, then this if ``waiters``)."""
        with self._guard:
            if self.waiters and self.lock.acquire(False):
                self._hand_over()

    async def take(self, timeout: float) -> bool:
        """Hold the lock, letting the loop run meanwhile; False when it stayed with one
        holder for ``timeout`` seconds (from this call's arrival or the last hand-over,
        whichever is later). A call cancelled while it waits holds nothing (a lock handed
        to it meanwhile goes on to the next waiter)."""
        loop = asyncio.get_running_loop()
        waiter = _Waiter(loop)
        with self._guard:
            self.waiters.append(waiter)
            if self.lock.acquire(False):  # left before this call queued: to the oldest
                self._hand_over()
        if waiter.handed:
            return True
        waiter.timer = loop.call_later(timeout, self._expire, waiter, timeout,
                                       time.monotonic())
        try:
            await waiter.future
        except BaseException:
            with self._guard:
                if waiter.handed:  # it holds the lock it will not use: on to the next
                    self._hand_over()
                else:
                    self._forget(waiter)
            raise
        finally:
            if waiter.timer is not None:
                waiter.timer.cancel()
        return waiter.handed

    def _expire(self, waiter: _Waiter, timeout: float, since: float) -> None:
        """``waiter`` has waited ``timeout`` since ``since``: it gives up unless the lock
        changed hands meanwhile (then it waits ``timeout`` from that hand-over)."""
        with self._guard:
            if waiter.handed:  # handed over in time: its wake-up is on its way
                return
            moved = self._moved
            if moved > since:
                waiter.timer = waiter.loop.call_later(
                    max(0.0, moved + timeout - time.monotonic()), self._expire, waiter,
                    timeout, moved)
                return
            self._forget(waiter)
        _wake(waiter.future)

    def _forget(self, waiter: _Waiter) -> None:
        with contextlib.suppress(ValueError):  # passed over already (it was cancelled)
            self.waiters.remove(waiter)

    def _hand_over(self) -> None:
        """Give the held ``lock`` to the oldest waiter that can still take it (the guard
        is held); free it when there is none."""
        me = threading.get_ident()
        self._moved = time.monotonic()
        while self.waiters:
            waiter = self.waiters.popleft()
            future = waiter.future
            if waiter.thread == me:  # its loop is this thread's: wake it directly
                if future.done():  # cancelled, not yet out of the queue
                    continue
                waiter.handed = True
                future.set_result(None)
                return
            waiter.handed = True  # (first: it may wake and look before the next line ends)
            try:
                waiter.loop.call_soon_threadsafe(_wake, future)
            except RuntimeError:  # its loop is closed: it will never take the lock
                waiter.handed = False
                continue
            return
        self.lock.release()
