"""Promise 8 (every call's cost is bounded) against the counter and approval stores: a
store's own timeout bounds each socket read, not the round trip. A Redis (or a proxy in
front of it) that trickles its answer a byte at a time never trips ``socket_timeout``, and
a store of the host's own that blocks has no timeout at all: the guarded call waited for
ever. The guard bounds every store round trip (``guard(store_timeout=...)``): a counter
store that does not answer in time is unavailable (its counters' ``failurePolicy`` decides,
as for a store that is down), a stuck approval store blocks the call, and what a late store
reserved goes back. Real loop, real redis client against a real (hostile) TCP server.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_framework import AgentSession

import guardrails
from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework.scripted import call, result_text
from guardrails.engine.counters import MemoryStore
from guardrails.fleet.stores import RedisStore
from tests.af_support import (
    RecordingTelemetry,
    agent_with,
    clear_calls_fixture,
    guarded,
    load_text,
)
from tests.af_tools import CALLS, send_money

_clear = clear_calls_fixture()

POLICIES = """
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: payments}
spec:
  match: {tools: [send_money]}
  counters:
    - {name: payments, key: 'principal.user', window: 1d, limit: 5}
  rules:
    - {name: daily-limit, when: 'counters.payments.exceeded', action: deny,
       message: daily payment limit reached}
    - {name: big, when: 'args.amount > 1000', action: require_approval}
"""

SAFETY_NET = 60.0
"""Only so that a regression fails this test instead of hanging the suite."""


@pytest.fixture
def policies(tmp_path: Path) -> guardrails.PolicySet:
    return load_text(tmp_path, POLICIES)


@pytest.fixture
def trickling_redis() -> Iterator[str]:
    """A TCP server that answers every request with a bulk reply one byte per 50 ms: each
    read returns well within the client's socket timeout, the reply never ends."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            try:
                conn.recv(65536)
                conn.sendall(b"$100000000\r\n")
                while not stop.is_set():
                    time.sleep(0.05)
                    conn.sendall(b"a")
            except OSError:
                pass

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield f"redis://127.0.0.1:{server.getsockname()[1]}/0"
    stop.set()
    server.close()


class StuckStore(MemoryStore):
    """A store of the host's own whose round trip never returns until the test lets it."""

    blocking = True

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.released: list[Any] = []

    def reserve(self, requests: Any) -> Any:
        self.gate.wait(SAFETY_NET)
        return super().reserve(requests)

    def release(self, reservations: Any) -> None:
        self.released.append(list(reservations))
        super().release(reservations)


async def _pay(middleware: Any, amount: int = 10) -> str:
    client = ScriptedChatClient([[call("send_money", recipient="UK12", amount=amount)]])
    agent = agent_with(client, [send_money], middleware)
    await asyncio.wait_for(agent.run("pay", session=AgentSession()), SAFETY_NET)
    return result_text(client.tool_results()[0])


async def test_a_trickling_redis_counter_store_denies_the_call(
        policies: guardrails.PolicySet, trickling_redis: str) -> None:
    store = RedisStore(trickling_redis, timeout=0.5)
    telemetry = RecordingTelemetry()
    text = await _pay(guarded(policies, telemetry, principal={"user": "u"}, counters=store,
                              store_timeout=0.5))
    assert CALLS == [] and "denied by policy" in text, text
    [decision] = telemetry.decisions
    assert decision.effect == "deny"
    assert [e.element for e in decision.errors] == ["counters.payments"]
    assert "counter store unavailable" in decision.errors[0].message


async def test_a_stuck_counter_store_denies_the_call_and_gets_its_count_back(
        policies: guardrails.PolicySet) -> None:
    store = StuckStore()
    text = await _pay(guard(policies, principal={"user": "u"}, counters=store,
                            store_timeout=0.3))
    assert CALLS == [] and "denied by policy" in text, text
    store.gate.set()  # the store answers at last: its reservation goes back
    for _ in range(200):
        if store.released:
            break
        await asyncio.sleep(0.01)
    assert store.released and store.released[0][0].cost == 1


async def test_a_stuck_store_under_ignore_lets_the_call_run(tmp_path: Path) -> None:
    """The counter's ``failurePolicy`` decides, as for a store that is down."""
    policies = load_text(tmp_path, POLICIES.replace(
        "limit: 5}", "limit: 5, failurePolicy: Ignore}"))
    store = StuckStore()
    try:
        text = await _pay(guard(policies, principal={"user": "u"}, counters=store,
                                store_timeout=0.3))
    finally:
        store.gate.set()
    assert CALLS and "sent" in text, text


class StuckApprovals:
    """A shared approval store that never answers."""

    blocking = True

    def __init__(self) -> None:
        self.gate = threading.Event()

    def hold(self, key: str, value: str, ttl: int) -> None:
        self.gate.wait(SAFETY_NET)

    def take(self, key: str) -> str | None:
        self.gate.wait(SAFETY_NET)
        return None


async def test_a_stuck_approval_store_blocks_the_call(policies: guardrails.PolicySet) -> None:
    approvals = StuckApprovals()
    try:
        text = await _pay(guard(policies, principal={"user": "u"}, approvals=approvals,
                                approval_key=b"k" * 32, store_timeout=0.3), amount=5000)
    finally:
        approvals.gate.set()
    assert CALLS == [] and "blocked" in text, text


def test_a_store_timeout_must_be_a_positive_number(policies: guardrails.PolicySet) -> None:
    for bad in (0, -1.0, float("nan"), float("inf"), "5"):
        with pytest.raises((ValueError, TypeError), match="store_timeout"):
            guard(policies, store_timeout=bad)  # type: ignore[arg-type]
