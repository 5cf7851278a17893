"""Red team of shared counters: over-admission under concurrency on real stores, keys that
error or are huge, a store that is slow or down, reservations given back twice."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

import guardrails
from guardrails.engine.counters import MemoryStore, Reservation
from guardrails.fleet.stores import RedisStore, SQLiteStore
from tests.engine_support import load_text, policy
from tests.fleet_support import RedisServer, redis_server

__all__ = ["redis_server"]

LIMITED = policy("limited", spec="""
    match: {tools: [send_money]}
    counters:
      - {name: calls, key: 'principal.user', window: 1d, limit: 37}
    rules:
      - {name: over, when: 'counters.calls.exceeded', action: deny}
""")


def _stores(kind: str, tmp_path: Path, redis: RedisServer, prefix: str) -> Any:
    if kind == "sqlite":
        return SQLiteStore(tmp_path / "c.db")
    return RedisStore(redis.url, prefix=prefix)


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_threads_with_their_own_store_clients_never_over_admit(
        tmp_path: Path, redis_server: RedisServer, kind: str) -> None:
    ps = load_text(tmp_path, LIMITED)
    prefix = f"rt-{uuid.uuid4().hex}:"
    effects: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(8)
    _stores(kind, tmp_path, redis_server, prefix).close()  # the store exists before replicas open it

    def worker() -> None:
        store = _stores(kind, tmp_path, redis_server, prefix)  # one client per "replica"
        start.wait()
        mine = [ps.evaluate("send_money", {"amount": 1}, principal={"user": "u"},
                            counters=store).effect for _ in range(12)]
        store.close()
        with lock:
            effects.extend(mine)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(effects) == 96
    assert effects.count("allow") == 37  # exact: no over-admission, no lost count


def test_a_key_that_errors_fails_closed(tmp_path: Path) -> None:
    ps = load_text(tmp_path, LIMITED)
    store = MemoryStore()
    for principal in ({}, {"user": None}, {"user": {"nested": [1, 2]}}):
        decision = ps.evaluate("send_money", {"amount": 1}, principal=principal,
                               counters=store)
        assert decision.effect == "deny", (principal, decision)


def test_huge_and_hostile_keys_are_bounded_and_distinct(tmp_path: Path) -> None:
    ps = load_text(tmp_path, LIMITED)
    store = MemoryStore()
    huge = "u" * 4000  # long, within the input bounds (over them a call is denied)
    hostile = ["a:1d:0", "a\x00b", "guardrails:c:*", huge, huge + "x"]
    for user in hostile:
        for _ in range(37):
            assert ps.evaluate("send_money", {"amount": 1}, principal={"user": user},
                               counters=store).effect == "allow"
        assert ps.evaluate("send_money", {"amount": 1}, principal={"user": user},
                           counters=store).effect == "deny"
    assert all(len(k) < 200 for k in store._counts)  # type: ignore[attr-defined]


@pytest.mark.parametrize("kind", ["memory", "sqlite", "redis"])
def test_a_reservation_given_back_twice_never_goes_below_zero_or_frees_others(
        tmp_path: Path, redis_server: RedisServer, kind: str) -> None:
    ps = load_text(tmp_path, LIMITED)
    store = MemoryStore() if kind == "memory" else _stores(
        kind, tmp_path, redis_server, f"rt-{uuid.uuid4().hex}:")
    for _ in range(37):
        ps.evaluate("send_money", {"amount": 1}, principal={"user": "u"}, counters=store)
    from guardrails.engine.counters import CounterRequest, window_key
    key = window_key("limited/calls", "u")
    [granted] = store.reserve([CounterRequest(key, 86400, 40, 1)])
    assert granted.reservation is not None
    store.release([granted.reservation])
    store.release([granted.reservation])  # twice: the 37 allowed calls keep their count
    assert ps.evaluate("send_money", {"amount": 1}, principal={"user": "u"},
                       counters=store).effect == "deny"
    store.release([Reservation(granted.reservation.entry, 10**6)])  # far too much
    [after] = store.reserve([CounterRequest(key, 86400, 40, 0)])
    assert after.count == 0  # floored at zero, never negative


def test_a_slow_or_dead_store_fails_closed_in_bounded_time(tmp_path: Path) -> None:
    import socket
    import time

    # A server that accepts and never answers: the Redis client's timeout bounds the call.
    silent = socket.create_server(("127.0.0.1", 0))
    try:
        store = RedisStore(f"redis://127.0.0.1:{silent.getsockname()[1]}/0", timeout=0.3)
        ps = load_text(tmp_path, LIMITED)
        started = time.monotonic()
        decision = ps.evaluate("send_money", {"amount": 1}, principal={"user": "u"},
                               counters=store)
        assert decision.effect == "deny"
        assert time.monotonic() - started < 10
    finally:
        silent.close()
    _ = guardrails
