"""Hot reload: ``guardrails.watch`` on a directory, a bundle file and a real HTTP server.

What must hold: ``.current`` is always a complete set; a broken update never replaces a
good one (and says so in ``.status``, a log record and a metric); a fixed update is
picked up; a call finishes on the set it started with, under load, in the real loop.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from agent_framework import Agent, tool
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import guardrails
from guardrails.agent_framework import ScriptedChatClient
from guardrails.agent_framework.scripted import call
from guardrails.fleet.bundle import build, generate_key
from tests.af_support import RecordingTelemetry, guarded
from tests.engine_support import policy
from tests.fleet_support import BundleServer, bundle_server

__all__ = ["bundle_server"]


def _pay(cap: int, version: str) -> str:
    return policy("pay", spec=f"""
        match: {{tools: [send_money]}}
        params: {{cap: {cap}}}
        rules:
          - {{name: cap, when: 'args.amount > params.cap', action: deny, message: cap {version}}}
          - {{name: mark, when: 'true', action: warn, message: '{version}'}}
        redact:
          - {{name: token, regex: 'TOKEN-{version}', replacement: '[gone]'}}
    """)


def _mark(version: str) -> str:
    return policy("mark", spec=f"""
        rules:
          - {{name: mark, when: 'true', action: warn, message: '{version}'}}
    """)


def _write_version(d: Path, cap: int, version: str) -> None:
    d.mkdir(parents=True, exist_ok=True)
    (d / "pay.yaml").write_text(_pay(cap, version))
    (d / "mark.yaml").write_text(_mark(version))


def _metric_points(reader: InMemoryMetricReader) -> dict[str, int]:
    out: dict[str, int] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                if m.name == "guardrails.policy.reloads":
                    for p in m.data.data_points:
                        out[str(p.attributes["guardrails.reload.outcome"])] = int(p.value)
    return out


def _bump(path: Path) -> None:
    """Make a rewrite visible to the stat check even within one mtime tick."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))


def test_directory_reload_keeps_last_good_and_reports(tmp_path: Path,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "policies"
    _write_version(d, 100, "v1")
    reader = InMemoryMetricReader()
    with guardrails.watch(d, interval=3600, meter_provider=MeterProvider(
            metric_readers=[reader])) as source:
        first = source.current
        assert source.status.ok and source.status.revision == first.revision
        assert source.refresh() is False  # nothing changed: nothing loaded
        # A broken update: the good set stays, the status names file:line:column.
        (d / "pay.yaml").write_text(_pay(1000, "v2").replace("args.amount >", "args.amount >>"))
        _bump(d / "pay.yaml")
        with caplog.at_level(logging.WARNING, logger="guardrails.source"):
            assert source.refresh() is False
        assert source.current is first
        status = source.status
        assert not status.ok and status.failures == 1 and status.revision == first.revision
        (problem,) = status.problems
        assert problem.file.endswith("pay.yaml") and problem.line > 0 and problem.column > 0
        assert f"{problem.file}:{problem.line}:{problem.column}" in (status.error or "")
        assert any("keeping revision" in r.getMessage() for r in caplog.records)
        # Not retried while unchanged (no log spam), retried on the next change.
        assert source.refresh() is False and source.status.failures == 1
        _write_version(d, 1000, "v2")
        _bump(d / "pay.yaml")
        assert source.refresh() is True
        assert source.current.evaluate("send_money", {"amount": 500}).effect == "allow"
        assert source.status.ok and source.status.error is None
        assert _metric_points(reader) == {"rejected": 1, "loaded": 1}


def test_background_thread_picks_up_changes(tmp_path: Path) -> None:
    d = tmp_path / "policies"
    _write_version(d, 100, "v1")
    with guardrails.watch(d, interval=0.02) as source:
        before = source.current.revision
        _write_version(d, 1000, "v2")
        _bump(d / "pay.yaml")
        deadline = time.monotonic() + 5
        while source.current.revision == before and time.monotonic() < deadline:
            time.sleep(0.01)
        assert source.current.revision != before
    thread_names = [t.name for t in threading.enumerate()]
    assert "guardrails-watch" not in thread_names or all(
        not t.is_alive() for t in threading.enumerate() if t.name == "guardrails-watch")


def test_first_load_must_succeed(tmp_path: Path) -> None:
    d = tmp_path / "policies"
    d.mkdir()
    (d / "bad.yaml").write_text("apiVersion: guardrails/v1\nkind: ToolPolicy\n")
    with pytest.raises(guardrails.PolicyError):
        guardrails.watch(d)


def test_url_polled_with_etag_and_verified(tmp_path: Path,
                                           bundle_server: BundleServer) -> None:
    private, public = generate_key(tmp_path / "k")
    _write_version(tmp_path / "v1", 100, "v1")
    _write_version(tmp_path / "v2", 1000, "v2")
    build(tmp_path / "v1", tmp_path / "v1.tgz", sign=private)
    build(tmp_path / "v2", tmp_path / "v2.tgz", sign=private)
    build(tmp_path / "v2", tmp_path / "unsigned.tgz")
    bundle_server.publish((tmp_path / "v1.tgz").read_bytes())
    with guardrails.watch(bundle_server.url, interval=3600, key=public) as source:
        v1 = source.current.revision
        for _ in range(3):
            assert source.refresh() is False
        assert bundle_server.not_modified == 3  # unchanged costs a 304, nothing is loaded
        # An unsigned bundle where a key is required: refused, v1 kept, not re-fetched.
        bundle_server.publish((tmp_path / "unsigned.tgz").read_bytes())
        assert source.refresh() is False and source.current.revision == v1
        assert "not signed" in (source.status.error or "")
        assert source.refresh() is False and bundle_server.not_modified == 4
        # The server goes down: v1 kept, reported, retried on every poll.
        bundle_server.down = True
        assert source.refresh() is False and "cannot read" in (source.status.error or "")
        assert source.status.failures >= 2
        bundle_server.down = False
        bundle_server.publish((tmp_path / "v2.tgz").read_bytes())
        assert source.refresh() is True and source.status.ok
        assert source.current.evaluate("send_money", {"amount": 500}).effect == "allow"


def test_an_older_signed_bundle_is_a_rollback(tmp_path: Path,
                                              bundle_server: BundleServer) -> None:
    private, public = generate_key(tmp_path / "k")
    _write_version(tmp_path / "v1", 100, "v1")
    _write_version(tmp_path / "v2", 1000, "v2")
    day = datetime.datetime(2026, 3, 1, tzinfo=datetime.UTC)
    build(tmp_path / "v1", tmp_path / "old.tgz", sign=private, now=day)
    build(tmp_path / "v2", tmp_path / "new.tgz", sign=private,
          now=day + datetime.timedelta(hours=1))
    build(tmp_path / "v1", tmp_path / "rebuilt.tgz", sign=private,
          now=day + datetime.timedelta(hours=2))
    bundle_server.publish((tmp_path / "new.tgz").read_bytes())
    with guardrails.watch(bundle_server.url, interval=3600, key=public) as source:
        v2 = source.current.revision
        assert source.status.built == "2026-03-01T01:00:00Z"
        bundle_server.publish((tmp_path / "old.tgz").read_bytes())  # validly signed, older
        assert source.refresh() is False and source.current.revision == v2
        assert "rollback is refused" in (source.status.error or "")
        # Going back on purpose: rebuild the old policies (a newer build of them).
        bundle_server.publish((tmp_path / "rebuilt.tgz").read_bytes())
        assert source.refresh() is True and source.current.revision != v2


def test_bundle_file_watch_rejects_tampering(tmp_path: Path) -> None:
    private, public = generate_key(tmp_path / "k")
    _write_version(tmp_path / "v1", 100, "v1")
    target = tmp_path / "live.tgz"
    build(tmp_path / "v1", target, sign=private)
    with guardrails.watch(target, interval=3600, key=public) as source:
        v1 = source.current.revision
        data = bytearray(target.read_bytes())
        data[len(data) // 2] ^= 0xFF
        tmp = tmp_path / "x"
        tmp.write_bytes(bytes(data))
        os.replace(tmp, target)
        assert source.refresh() is False and source.current.revision == v1
        assert "bundle rejected" in (source.status.error or "")


# --- under load, in the real loop ------------------------------------------------------

CALLS: list[str] = []


async def test_hot_reload_under_load_in_the_real_loop(tmp_path: Path) -> None:
    """Runs keep going while bundles are swapped every few ms and broken ones published.

    Every decision must come from one complete revision: its cap rule and both policies'
    warn marks agree on the version, and the revision is one of the good ones.
    """
    private, public = generate_key(tmp_path / "k")
    revisions: dict[str, str] = {}
    bundles: list[bytes] = []
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    for version, cap in (("v1", 100), ("v2", 1000)):
        _write_version(tmp_path / version, cap, version)
    for i in range(60):  # v1, v2, v1...: each built later than the one before (no rollback)
        version = ("v1", "v2")[i % 2]
        out = tmp_path / f"b{i}.tgz"
        revisions[build(tmp_path / version, out, sign=private,
                        now=start + datetime.timedelta(seconds=i)).revision] = version
        bundles.append(out.read_bytes())
    live = tmp_path / "live.tgz"
    live.write_bytes(bundles[0])
    broken = bytearray(bundles[1])
    broken[len(broken) // 3] ^= 0x55

    source = guardrails.watch(live, interval=0.001, key=public)
    stop = threading.Event()

    def publisher() -> None:
        i = 0
        while not stop.is_set() and i // 2 < len(bundles):
            data = bytes(broken) if i % 2 == 1 else bundles[i // 2]
            tmp = tmp_path / f"pub-{i}"
            tmp.write_bytes(data)
            os.replace(tmp, live)  # atomic publish
            i += 1
            time.sleep(0.002)

    @tool
    def send_money(recipient: str, amount: float) -> str:
        """Send money."""
        CALLS.append(recipient)
        return "ok"

    telemetry = RecordingTelemetry()
    middleware = guarded(source, telemetry)  # type: ignore[arg-type]
    thread = threading.Thread(target=publisher)
    thread.start()
    try:
        async def one(i: int) -> None:
            client = ScriptedChatClient([[call("send_money", recipient=f"r{i}", amount=500)]])
            await Agent(client=client, tools=[send_money], middleware=middleware).run("pay")

        # At least 15 batches, and on until the publisher is done and both versions have
        # decided calls (bounded): how many runs a swap lands in depends on the machine.
        batch = 0
        while batch < 15 or (batch < 300 and (thread.is_alive() or len(
                {revisions.get(d.revision) for d in telemetry.decisions}) < 2)):
            await asyncio.gather(*(one(batch * 10 + i) for i in range(10)))
            batch += 1
    finally:
        stop.set()
        thread.join()
        source.close()
    assert len(telemetry.decisions) == batch * 10
    seen = set()
    for d in telemetry.decisions:
        version = revisions[d.revision]  # always a complete, good revision
        seen.add(version)
        marks = {r.message for r in d.rules if r.action == "warn"}
        assert marks == {version}
        assert d.effect == ("deny" if version == "v1" else "allow")
    assert seen == {"v1", "v2"}  # swaps did happen during the runs


async def test_a_call_finishes_on_the_set_it_started_with(tmp_path: Path) -> None:
    """The tool runs while the source swaps to a set without the redact pattern: the result
    is still scrubbed with the patterns of the set the call was decided on."""
    _write_version(tmp_path / "policies", 1000, "v1")
    source = guardrails.watch(tmp_path / "policies", interval=3600)
    swapped: list[bool] = []

    @tool
    def send_money(recipient: str, amount: float) -> str:
        """Send money."""
        _write_version(tmp_path / "policies", 1000, "v2")
        _bump(tmp_path / "policies" / "pay.yaml")
        swapped.append(source.refresh())
        return "confirmation TOKEN-v1"

    telemetry = RecordingTelemetry()
    client = ScriptedChatClient([[call("send_money", recipient="a", amount=5)]])
    agent = Agent(client=client, tools=[send_money],
                  middleware=guarded(source, telemetry))  # type: ignore[arg-type]
    response = await agent.run("pay")
    source.close()
    assert swapped == [True]
    results = [c for m in response.messages for c in m.contents if c.type == "function_result"]
    text = str(results[0].result)
    assert "TOKEN-v1" not in text and "[gone]" in text
    assert {r.message for r in telemetry.decisions[0].rules} == {"v1"}


def test_guard_accepts_a_source_with_mode(tmp_path: Path) -> None:
    from guardrails.agent_framework import guard

    _write_version(tmp_path / "policies", 100, "v1")
    with guardrails.watch(tmp_path / "policies", interval=3600) as source:
        _run, fn = guard(source, mode="audit")
        current: Any = fn._policies.current  # type: ignore[attr-defined]
        assert all(p.mode == "audit" for p in current.policies)
        assert current is fn._policies.current  # type: ignore[attr-defined]
        _write_version(tmp_path / "policies", 1000, "v2")
        _bump(tmp_path / "policies" / "pay.yaml")
        source.refresh()
        after = fn._policies.current  # type: ignore[attr-defined]
        assert after.revision == source.current.revision and all(
            p.mode == "audit" for p in after.policies)


async def test_counts_survive_a_reload_and_the_new_limit_applies(tmp_path: Path) -> None:
    from guardrails.agent_framework import guard
    from guardrails.engine.counters import MemoryStore

    def write(limit: int) -> None:
        d = tmp_path / "policies"
        d.mkdir(exist_ok=True)
        (d / "limit.yaml").write_text(policy("limit", spec=f"""
            match: {{tools: [send_money]}}
            counters:
              - {{name: calls, key: 'principal.user', window: 1d, limit: {limit}}}
            rules:
              - {{name: over, when: 'counters.calls.exceeded', action: deny}}
        """))
        _bump(d / "limit.yaml")

    ran: list[float] = []

    @tool
    def send_money(recipient: str, amount: float) -> str:
        """Send money."""
        ran.append(amount)
        return "ok"

    write(3)
    source = guardrails.watch(tmp_path / "policies", interval=3600)
    middleware = guard(source, principal={"user": "u"}, counters=MemoryStore())

    async def pay(amount: float) -> None:
        client = ScriptedChatClient([[call("send_money", recipient="a", amount=amount)]])
        await Agent(client=client, tools=[send_money], middleware=middleware).run("pay")

    for i in range(2):
        await pay(i)
    write(2)  # lowered: the two calls already made count against the new limit
    assert source.refresh() is True
    await pay(9)
    write(4)
    assert source.refresh() is True
    await pay(10)
    await pay(11)
    await pay(12)
    source.close()
    assert ran == [0, 1, 10, 11]


def test_a_stale_bundle_is_reported_but_stays_in_use(tmp_path: Path,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    _write_version(tmp_path / "v1", 100, "v1")
    old = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=2)
    build(tmp_path / "v1", tmp_path / "live.tgz", now=old)
    with caplog.at_level(logging.WARNING, logger="guardrails.source"), guardrails.watch(
            tmp_path / "live.tgz", interval=3600, max_age=86400) as source:
        assert not source.status.ok and "stale copy" in (source.status.error or "")
        assert source.current.evaluate("send_money", {"amount": 500}).effect == "deny"
        for _ in range(3):
            source.refresh()
        assert not source.status.ok
        build(tmp_path / "v1", tmp_path / "live.tgz")  # rebuilt now: fresh again
        _bump(tmp_path / "live.tgz")
        source.refresh()
        assert source.status.ok and source.status.error is None
    stale_logs = [r for r in caplog.records if "stale copy" in r.getMessage()]
    assert len(stale_logs) == 1  # once, not once per poll
