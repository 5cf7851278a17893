"""Red team, round 4: counters when the host's clock is stepped back (promise 9).

The memory and SQLite stores pick a counter's window by the host's clock, and swept an
entry the moment its window ended. A clock stepped back into that window afterwards (an NTP
correction a second after a boundary) found no entry and admitted the window's whole limit
a second time. Entries now stay ``SKEW_GRACE`` seconds past their window before a sweep.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest

from guardrails.engine.counters import SKEW_GRACE, CounterRequest, MemoryStore, StoreUnavailable
from guardrails.fleet.stores import SQLiteStore

WINDOW = 60


def _stores(tmp_path: Path, now: list[float]) -> dict[str, Any]:
    return {"memory": MemoryStore(clock=lambda: now[0], max_entries=3),
            "sqlite": SQLiteStore(tmp_path / "counters.db", clock=lambda: now[0])}


def _sweep(store: Any, now: list[float]) -> None:
    """Make the store sweep ended entries: the memory store when it is full, SQLite once
    every 1,000 reservations. (A memory store full of entries it may not forget refuses,
    failing closed.)"""
    for i in range(1000):
        with contextlib.suppress(StoreUnavailable):
            store.reserve([CounterRequest(f"other-{i % 2}", WINDOW, 10**9, 1)])


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("step_back", [1.0, 30.0, SKEW_GRACE - 1])
def test_a_clock_stepped_back_into_a_swept_window_admits_nothing_more(
        tmp_path: Path, kind: str, step_back: float) -> None:
    now = [1_000_000 * WINDOW + WINDOW - 2.0]  # two seconds before a window ends
    store = _stores(tmp_path, now)[kind]
    request = CounterRequest("payments", WINDOW, 2, 1)
    assert [r.granted for r in store.reserve([request, request])] == [True, True]
    now[0] += 2.0 + step_back - 0.5  # past the boundary, then the sweep...
    _sweep(store, now)
    now[0] -= step_back  # ...and the clock stepped back into the ended window
    try:
        admitted = store.reserve([request])[0].granted
    except StoreUnavailable:  # a memory store full of entries it may not forget: refused
        admitted = False
    assert admitted is False


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_entries_past_the_grace_are_still_swept(tmp_path: Path, kind: str) -> None:
    """Held: the next window starts at zero, and the store does not fill up."""
    now = [1_000_000.0 * WINDOW]
    store = _stores(tmp_path, now)[kind]
    request = CounterRequest("payments", WINDOW, 2, 1)
    store.reserve([request, request])
    now[0] += WINDOW + SKEW_GRACE + 1
    _sweep(store, now)
    assert [r.granted for r in store.reserve([request, request])] == [True, True]
