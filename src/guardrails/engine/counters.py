"""Counters shared across calls, runs and replicas: the store contract and the in-memory store.

A policy's ``counters:`` section names counts such as "new payees per user per week". For
each matched call the engine asks the store, in one batch, to *reserve* the call's cost on
every counter: atomically, and only while the count stays within the limit, so concurrent
calls on any number of replicas can never admit more than the limit between them (a
check-then-increment would). A call whose decision is not ``allow`` gives its reservations
back; an allowed call keeps them, which is the commit. Windows are fixed and aligned to the
Unix epoch, and every entry expires with its window (the store's TTL).

The engine calls the store synchronously; a store that does network I/O says so with
``blocking = True`` and the Agent Framework guard then evaluates in a worker thread, so the
event loop never waits on it. Stores with I/O live outside the engine
(``guardrails.fleet.stores``).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = [
    "SKEW_GRACE",
    "CounterRequest",
    "CounterResult",
    "CounterStore",
    "MemoryStore",
    "PresetCounts",
    "Reservation",
    "StoreUnavailable",
    "window_key",
]


class StoreUnavailable(Exception):
    """The store could not answer (down, timed out, refused). Counters fail closed."""


@dataclass(frozen=True, slots=True)
class CounterRequest:
    """Reserve ``cost`` on the counter ``key`` for the current ``window`` (seconds), only if
    the count stays ``<= limit``. A cost of 0 only reads the count."""

    key: str
    """Opaque and bounded: built by :func:`window_key` without the window's index."""
    window: int
    limit: int
    cost: int
    scope: str = ""
    """``policy/counter`` the request is for (for inspection; the key already holds it)."""


@dataclass(frozen=True, slots=True)
class Reservation:
    """What a granted request added, and where: given back if the call does not run."""

    entry: str
    """The store entry (key plus window index)."""
    cost: int


@dataclass(frozen=True, slots=True)
class CounterResult:
    count: int
    """The count with this call's cost: granted or not, so ``count > limit`` when refused."""
    granted: bool
    reservation: Reservation | None
    """None when nothing was added (refused, or a cost of 0)."""


@runtime_checkable
class CounterStore(Protocol):
    """Where counts live. ``reserve`` must be atomic per request across every process that
    shares the store; ``release`` must never take a count below zero."""

    blocking: bool
    """True when calls do network or disk I/O (the guard then leaves the event loop)."""

    def reserve(self, requests: Sequence[CounterRequest]) -> list[CounterResult]: ...

    def release(self, reservations: Sequence[Reservation]) -> None: ...


SKEW_GRACE = 300.0
"""Seconds an ended window's entry is kept before a store sweeps it away. The memory and
SQLite stores take the host's clock: swept the moment its window ended, an entry was gone
when the clock was then stepped back (an NTP correction) into that window, and the window
admitted its whole limit again. Redis picks windows by the server's clock (``TIME``)."""


def window_key(scope: str, key: str) -> str:
    """A bounded, injection-free store key for counter ``scope`` (``policy/counter``) and a
    key value (a user id, a tenant): any text, any length."""
    digest = hashlib.sha256(f"{scope}\x00{key}".encode()).hexdigest()[:40]
    return f"{scope}:{digest}"


def window_entry(key: str, window: int, now: float) -> tuple[str, float]:
    """The entry of ``key`` in the window containing ``now``, and when that window ends."""
    index = int(now // window)
    return f"{key}:{window}:{index}", (index + 1) * window


class PresetCounts:
    """Counts "already made" before a call, by counter name or ``policy/counter``: what a
    ``PolicyTest`` case's ``call.counters`` gives. Never stores anything."""

    blocking = False

    def __init__(self, counts: Mapping[str, int]) -> None:
        self._counts = dict(counts)

    def reserve(self, requests: Sequence[CounterRequest]) -> list[CounterResult]:
        out = []
        for r in requests:
            name = r.scope.rsplit("/", 1)[-1]
            before = self._counts.get(r.scope, self._counts.get(name, 0))
            total = before + r.cost
            out.append(CounterResult(total, total <= r.limit, None))
        return out

    def release(self, reservations: Sequence[Reservation]) -> None:
        pass


class MemoryStore:
    """Counters (and held approvals) in this process only: a dict behind a lock.

    ``clock`` is for tests (windows roll over without waiting).
    """

    blocking = False

    def __init__(self, *, clock: Callable[[], float] = time.time,
                 max_entries: int = 100_000) -> None:
        self._clock = clock
        self._max_entries = max_entries
        self._counts: dict[str, tuple[int, float]] = {}
        self._held: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()

    def reserve(self, requests: Sequence[CounterRequest]) -> list[CounterResult]:
        now = self._clock()
        out: list[CounterResult] = []
        with self._lock:
            if len(self._counts) >= self._max_entries:
                self._expire(now)
            for r in requests:
                entry, ends = window_entry(r.key, r.window, now)
                current, _ = self._counts.get(entry, (0, ends))
                total = current + r.cost
                if r.cost == 0 or total > r.limit:
                    out.append(CounterResult(total, total <= r.limit, None))
                    continue
                self._counts[entry] = (total, ends)
                out.append(CounterResult(total, True, Reservation(entry, r.cost)))
        return out

    def release(self, reservations: Sequence[Reservation]) -> None:
        with self._lock:
            for r in reservations:
                held = self._counts.get(r.entry)
                if held is not None:
                    self._counts[r.entry] = (max(0, held[0] - r.cost), held[1])

    def hold(self, key: str, value: str, ttl: int) -> None:
        """Hold an approval record (``guard(approvals=...)`` within one process)."""
        with self._lock:
            self._held[key] = (value, self._clock() + ttl)
            if len(self._held) > self._max_entries:
                now = self._clock()
                self._held = {k: v for k, v in self._held.items() if v[1] > now}
                if len(self._held) > self._max_entries:
                    del self._held[key]
                    raise StoreUnavailable("memory store full of held approvals")

    def take(self, key: str) -> str | None:
        """Remove and return a held approval record (once)."""
        with self._lock:
            held = self._held.pop(key, None)
        return held[0] if held is not None and held[1] > self._clock() else None

    def count(self, entry_key: str, window: int) -> int:
        """The current count of a ``window_key`` (for tests and inspection)."""
        entry, _ = window_entry(entry_key, window, self._clock())
        with self._lock:
            return self._counts.get(entry, (0, 0.0))[0]

    def _expire(self, now: float) -> None:
        for entry in [e for e, (_, ends) in self._counts.items() if ends <= now - SKEW_GRACE]:
            del self._counts[entry]
        if len(self._counts) >= self._max_entries:
            # Still full of live windows: refuse rather than forget counts (fail closed).
            raise StoreUnavailable(f"memory store full ({self._max_entries} live counters)")
