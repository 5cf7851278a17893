"""Round trips to the counter and approval stores: off the event loop, each bounded in time.

A store's own timeout bounds each socket read, not the round trip: a Redis (or a proxy in
front of it) that trickles its answer a byte at a time never trips ``socket_timeout``, and a
store of the host's own may block with no timeout at all. The guarded call waited for ever
(tests/test_redteam22_stores.py). So the guard waits at most ``timeout`` for a round trip;
a store that has not answered by then is unavailable, a guard error that blocks the call.

Python cannot stop the thread of a round trip that overran: it runs on, and what it returns
then is handed to ``late`` (a reservation made for a call that was blocked goes back).
Each round trip has a daemon thread of its own rather than a pool's: a stuck worker of
asyncio's default executor would hold a thread the framework's synchronous tools need, and
``asyncio.run`` waits for that executor at exit. At most ``MAX_IN_FLIGHT`` round trips run
at once in a process; beyond that a call is refused at once (its store is not answering).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import math
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from guardrails.engine.counters import StoreUnavailable

__all__ = ["MAX_IN_FLIGHT", "STORE_TIMEOUT", "check_timeout", "in_background", "round_trip"]

_log = logging.getLogger("guardrails")

STORE_TIMEOUT = 5.0
"""Seconds a guarded call waits for one store round trip (``guard(store_timeout=...)``)."""

MAX_IN_FLIGHT = 64
"""Store round trips running at once in a process, stuck ones included."""

_in_flight = threading.BoundedSemaphore(MAX_IN_FLIGHT)

_T = TypeVar("_T")


def check_timeout(timeout: Any) -> float:
    """``timeout`` as a float, or ValueError/TypeError naming ``store_timeout``."""
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise TypeError(f"store_timeout must be a number of seconds, not {timeout!r}")
    if not (math.isfinite(timeout) and timeout > 0):
        raise ValueError(f"store_timeout must be a positive finite number, not {timeout!r}")
    return float(timeout)


def _start(work: Callable[[], None]) -> None:
    if not _in_flight.acquire(blocking=False):
        raise StoreUnavailable(f"{MAX_IN_FLIGHT} store round trips are already waiting")

    def run() -> None:
        try:
            work()
        finally:
            _in_flight.release()

    try:
        threading.Thread(target=run, name="guardrails-store", daemon=True).start()
    except BaseException:
        _in_flight.release()
        raise


async def round_trip(call: Callable[..., _T], *args: Any, timeout: float,
                     late: Callable[[_T], None] | None = None) -> _T:
    """``call(*args)`` in a thread of its own, awaited for at most ``timeout`` seconds.

    Raises ``StoreUnavailable`` when it does not return in time (or too many round trips
    are stuck already). ``late`` gets the result of one that returns after the call gave up
    on it (timed out or cancelled), so nothing it reserved is kept for a call that never ran.
    """
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[_T] = loop.create_future()
    context = contextvars.copy_context()  # as asyncio.to_thread: the call's run, its span

    def settle(result: Any, error: BaseException | None) -> None:
        if not answer.done():  # (the loop's thread: no race with wait_for's cancel)
            if error is None:
                answer.set_result(result)
            else:
                answer.set_exception(error)
        elif error is None and late is not None:
            late(result)

    def work() -> None:
        result: Any = None
        error: BaseException | None = None
        try:
            result = context.run(call, *args)
        except BaseException as exc:  # handed to the waiting call, raised there
            error = exc
        try:
            loop.call_soon_threadsafe(settle, result, error)
        except RuntimeError:  # the loop is closed: nobody waits, nothing settles there
            if error is None and late is not None:
                late(result)

    _start(work)
    try:
        return await asyncio.wait_for(answer, timeout)
    except TimeoutError:
        raise StoreUnavailable(f"the store did not answer within {timeout:g} s") from None


def in_background(call: Callable[..., Any], *args: Any) -> None:
    """``call(*args)`` in a thread of its own, not awaited: a release no call waits for.
    A failure is logged (by type only); the count stays high, which errs towards refusing."""

    def work() -> None:
        try:
            call(*args)
        except Exception as exc:
            _log.warning("guardrails: giving back counter reservations failed (%s)",
                         type(exc).__name__)

    try:
        _start(work)
    except StoreUnavailable:
        _log.warning("guardrails: counter reservations were not given back (the store is "
                     "not answering)")
