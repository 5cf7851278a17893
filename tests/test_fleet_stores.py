"""The shared stores against real backends: an SQLite file and a real redis-server.

The soak test is the fleet's claim: four processes share one Redis and make 10,000 calls
under a "at most N per window" rule; the count is exact and nothing is admitted over it.
"""

from __future__ import annotations

import multiprocessing
import uuid
from pathlib import Path
from typing import Any

import pytest

import guardrails
from guardrails.engine.counters import CounterRequest, StoreUnavailable
from guardrails.fleet.stores import RedisStore, SQLiteStore
from tests.engine_support import policy
from tests.fleet_support import RedisServer, redis_server, start_redis

__all__ = ["redis_server"]  # the fixture, re-exported for pytest

LIMITED = policy("limited", spec="""
    counters:
      - {name: calls, key: 'principal.tenant', window: 1h, limit: LIMIT}
    rules:
      - {name: over, when: 'counters.calls.exceeded', action: deny}
      - {name: tiny, when: 'args.amount < 1', action: deny}
""")


# The soaks test atomicity: exactly the limit is admitted across replicas. On a loaded
# machine a Redis reply can take longer than the store's 0.5 s default, and that call is
# then denied (failing closed, as it must), so fewer than the limit would run: a longer
# wait keeps the count about the store's atomicity, not the machine's load.
SOAK_TIMEOUT = 30.0


def _write(tmp_path: Path, limit: int) -> Path:
    path = tmp_path / "limited.yaml"
    path.write_text(LIMITED.replace("LIMIT", str(limit)))
    return path


def _worker(args: tuple[str, str, str, int, int]) -> tuple[int, int]:
    """One replica: its own PolicySet and store client, ``calls`` calls per tenant."""
    path, url, prefix, calls, seed = args
    policies = guardrails.load(path)
    store = RedisStore(url, prefix=prefix, timeout=SOAK_TIMEOUT)
    admitted = {"hot": 0, "cold": 0}
    for i in range(calls):
        tenant = "hot" if i % 2 == 0 else "cold"
        amount = 0 if (i + seed) % 10 == 0 else 5  # denied by another rule: not counted
        d = policies.evaluate("pay", {"amount": amount}, principal={"tenant": tenant},
                              counters=store)
        if d.effect == "allow":
            admitted[tenant] += 1
    store.close()
    return admitted["hot"], admitted["cold"]


def test_soak_four_processes_one_redis_exact_counts(tmp_path: Path,
                                                   redis_server: RedisServer) -> None:
    limit, per_process, processes = 1500, 2500, 4
    path = _write(tmp_path, limit)
    prefix = f"soak-{uuid.uuid4().hex}:"
    jobs = [(str(path), redis_server.url, prefix, per_process, p) for p in range(processes)]
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        results = pool.map(_worker, jobs)
    hot = sum(r[0] for r in results)
    cold = sum(r[1] for r in results)
    # 10,000 calls: 5,000 per tenant, 500 of each denied by "tiny" and given back.
    assert hot == limit  # nothing over the limit, and the limit reached exactly
    assert cold == min(limit, 4500)
    store = RedisStore(redis_server.url, prefix=prefix)
    (h,) = store.reserve([CounterRequest(_key("hot"), 3600, limit, 0)])
    (c,) = store.reserve([CounterRequest(_key("cold"), 3600, limit, 0)])
    assert (h.count, c.count) == (hot, cold)  # the stored counts are the admitted calls


def test_soak_counts_exact_below_the_limit(tmp_path: Path, redis_server: RedisServer) -> None:
    path = _write(tmp_path, 100_000)
    prefix = f"soak-{uuid.uuid4().hex}:"
    jobs = [(str(path), redis_server.url, prefix, 500, p) for p in range(4)]
    with multiprocessing.get_context("fork").Pool(4) as pool:
        results = pool.map(_worker, jobs)
    admitted = sum(a + b for a, b in results)
    assert admitted == 4 * 450  # every call but the "tiny" ones
    store = RedisStore(redis_server.url, prefix=prefix)
    counts = [store.reserve([CounterRequest(_key(t), 3600, 100_000, 0)])[0].count
              for t in ("hot", "cold")]
    assert sum(counts) == admitted


def _key(tenant: str) -> str:
    import json

    from guardrails.engine.counters import window_key
    return window_key("limited/calls", json.dumps(tenant))


@pytest.fixture(params=["memory", "sqlite", "redis"])
def store(request: Any, tmp_path: Path, redis_server: RedisServer) -> Any:
    if request.param == "memory":
        from guardrails.engine.counters import MemoryStore
        yield MemoryStore()
        return
    if request.param == "sqlite":
        s: Any = SQLiteStore(tmp_path / "state.db")
    else:
        s = RedisStore(redis_server.url, prefix=f"t-{uuid.uuid4().hex}:")
    yield s
    s.close()


def test_reserve_release_and_limits(store: Any) -> None:
    r = CounterRequest("k", 3600, 3, 2)
    first, second = store.reserve([r]), store.reserve([r])
    assert first[0].granted and first[0].count == 2
    assert not second[0].granted and second[0].count == 4 and second[0].reservation is None
    store.release([first[0].reservation])
    again = store.reserve([r])
    assert again[0].granted and again[0].count == 2
    store.release([again[0].reservation, again[0].reservation, again[0].reservation])
    assert store.reserve([CounterRequest("k", 3600, 3, 0)])[0].count == 0  # never below zero


def test_approvals_are_taken_once(store: Any) -> None:
    store.hold("call-1", "fingerprint", 60)
    assert store.take("call-1") == "fingerprint"
    assert store.take("call-1") is None
    assert store.take("never-held") is None


def test_redis_down_is_store_unavailable_and_the_rule_fails_closed(tmp_path: Path) -> None:
    server = start_redis()
    store = RedisStore(server.url, timeout=0.2)
    policies = guardrails.load(_write(tmp_path, 10))
    assert policies.evaluate("pay", {"amount": 5}, principal={"tenant": "t"},
                             counters=store).effect == "allow"
    server.stop()
    with pytest.raises(StoreUnavailable):
        store.reserve([CounterRequest("k", 60, 1, 1)])
    d = policies.evaluate("pay", {"amount": 5}, principal={"tenant": "t"}, counters=store)
    assert d.effect == "deny" and d.errors[0].element == "counters.calls"
    assert "counter store unavailable" in d.errors[0].message


def test_sqlite_shared_by_processes(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    SQLiteStore(db).close()
    with multiprocessing.get_context("fork").Pool(4) as pool:
        granted = pool.map(_sqlite_worker, [str(db)] * 4)
    assert sum(granted) == 150
    assert SQLiteStore(db).reserve([CounterRequest("k", 3600, 150, 0)])[0].count == 150


def _sqlite_worker(path: str) -> int:
    store = SQLiteStore(path)
    n = sum(store.reserve([CounterRequest("k", 3600, 150, 1)])[0].granted for _ in range(100))
    store.close()
    return n


def _guard_worker(args: tuple[str, str, str, int]) -> int:
    """One replica running real agent runs through guard() with the shared Redis store."""
    import asyncio

    from agent_framework import Agent, tool

    from guardrails.agent_framework import ScriptedChatClient, guard
    from guardrails.agent_framework.scripted import call

    path, url, prefix, runs = args
    ran: list[int] = []

    @tool
    def pay(amount: float) -> str:
        """Pay."""
        ran.append(1)
        return "paid"

    async def main() -> None:
        store = RedisStore(url, prefix=prefix, timeout=SOAK_TIMEOUT)
        middleware = guard(guardrails.load(path), principal={"tenant": "hot"}, counters=store)
        for i in range(runs):
            client = ScriptedChatClient([[call("pay", amount=0 if i % 10 == 0 else 5)]])
            await Agent(client=client, tools=[pay], middleware=middleware).run("pay")
        store.close()

    asyncio.run(main())
    return len(ran)


def test_soak_real_agent_loop_four_processes(tmp_path: Path, redis_server: RedisServer) -> None:
    """The same claim through the guard: runs, validation and the thread offload included."""
    limit = 150
    path = _write(tmp_path, limit)
    prefix = f"loop-{uuid.uuid4().hex}:"
    with multiprocessing.get_context("fork").Pool(4) as pool:
        ran = pool.map(_guard_worker, [(str(path), redis_server.url, prefix, 60)] * 4)
    assert sum(ran) == limit  # 216 calls would pass the other rules: exactly the limit ran
    store = RedisStore(redis_server.url, prefix=prefix)
    (h,) = store.reserve([CounterRequest(_key("hot"), 3600, limit, 0)])
    assert h.count == limit
