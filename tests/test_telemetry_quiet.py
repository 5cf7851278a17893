"""Default telemetry with no SDK records nothing, and asks for nothing on every call: the
guard looks for an installed global tracer provider in the OpenTelemetry API's own global
(``telemetry._installed_tracer_provider``) rather than calling ``get_tracer_provider()``,
whose environment lookup costs more than the rest of a quiet call's telemetry, and a call
of which nothing would be kept (no span, instruments recording nowhere, the decision log
off) gets one shared span that records only a halt's mark (``_SilentSpan``). Pinned here:
that global is what the API reports, the proxy instruments say when they record, and an
SDK installed after ``guard()`` (in code or named in the environment) is recorded from the
next call on, spans and metrics; the silent call changes nothing any signal keeps."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import guardrails
from guardrails.agent_framework import ScriptedChatClient
from guardrails.agent_framework.scripted import call, text
from guardrails.telemetry import (
    _UNREAD,
    EVENT_HALT,
    GuardTelemetry,
    _installed_tracer_provider,
    _records_nowhere,
    _SilentSpan,
)
from tests.af_support import agent_with, guarded, load_fixture
from tests.af_tools import CALLS, send_money

ROOT = Path(__file__).resolve().parent.parent


def test_the_installed_provider_is_the_one_the_api_reports() -> None:
    installed = _installed_tracer_provider()
    assert installed is not _UNREAD  # this OpenTelemetry keeps it where the guard reads it
    if installed is None and "OTEL_PYTHON_TRACER_PROVIDER" not in os.environ:
        assert type(trace.get_tracer_provider()) is trace.ProxyTracerProvider
    elif installed is None:  # (asking loads the provider the environment names)
        assert trace.get_tracer_provider() is _installed_tracer_provider()
    else:  # (another test of this process installed one)
        assert trace.get_tracer_provider() is installed


def _late_sdk(**env: str) -> dict[str, object]:
    """tests/telemetry_late_sdk.py's report, run with ``env`` (and no other provider named)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_PYTHON_")}
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "telemetry_late_sdk.py"),
                           str(ROOT)], capture_output=True, text=True, timeout=120,
                          check=True, env={**environ, **env})
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_an_sdk_installed_after_the_guard_is_recorded_from_the_next_call() -> None:
    out = _late_sdk()
    assert out["installed_before"] is False and out["can_record_before"] is False
    assert out["silent_before"] is True and out["spans_before"] == 0
    assert out["installed_after"] is True and out["silent_after"] is False
    assert out["guard_spans"] == ["guardrails.guard send_money"]
    assert out["decisions_counted"] == 1  # the meter's proxy instruments became the SDK's


def test_a_provider_named_in_the_environment_is_loaded_and_recorded() -> None:
    out = _late_sdk(OTEL_PYTHON_TRACER_PROVIDER="sdk_tracer_provider")
    assert out["from_env"] is True and out["installed_before"] is False
    assert out["can_record_before"] is True  # asking loads it
    assert out["installed_after"] is True
    assert out["guard_spans"] == ["guardrails.guard send_money"]


def test_a_quiet_telemetry_records_no_span_and_asks_nothing_per_call() -> None:
    telemetry = GuardTelemetry(tracer_provider=trace.NoOpTracerProvider())
    assert not telemetry._can_record()
    with telemetry.call_span(tool="t", call_id="c") as span:
        assert span.span is trace.INVALID_SPAN


def test_a_proxy_instrument_records_nowhere_until_a_meter_provider_is_installed() -> None:
    proxy = metrics._internal._ProxyMeter("probe").create_counter("c")  # (as the global's)
    assert getattr(proxy, "_real_instrument", _UNREAD) is None and _records_nowhere(proxy)
    proxy.on_meter_set(MeterProvider().get_meter("probe"))  # what installing a provider does
    assert not _records_nowhere(proxy)
    assert _records_nowhere(metrics.NoOpMeter("x").create_counter("c"))
    assert not _records_nowhere(MeterProvider().get_meter("x").create_counter("c"))
    assert not _records_nowhere(object())  # unknown: records (never silent by mistake)


def _silent_telemetry(**kwargs: Any) -> GuardTelemetry:
    return GuardTelemetry(tracer_provider=trace.NoOpTracerProvider(),
                          meter_provider=metrics.NoOpMeterProvider(), **kwargs)


def test_a_call_nothing_keeps_shares_one_span_and_any_signal_ends_that() -> None:
    telemetry = _silent_telemetry()
    with telemetry.call_span(tool="t", call_id="c1") as one, \
            telemetry.call_span(tool="u", call_id="c2") as two:
        assert one is two and type(one) is _SilentSpan
    reader = InMemoryMetricReader()
    counted = GuardTelemetry(tracer_provider=trace.NoOpTracerProvider(),
                             meter_provider=MeterProvider(metric_readers=[reader]))
    with counted.call_span(tool="t", call_id="c") as span:
        assert type(span) is not _SilentSpan
    records: list[Any] = []

    class Sink:  # no enabled(): every record is built and written
        def write(self, record: Any) -> None:
            records.append(record)

    logged = _silent_telemetry(decision_log=Sink())
    with logged.call_span(tool="t", call_id="c") as span:
        assert type(span) is not _SilentSpan
    decisions = logging.getLogger("guardrails.decisions")
    level = decisions.level
    decisions.setLevel(logging.INFO)
    try:
        with telemetry.call_span(tool="t", call_id="c") as span:
            assert type(span) is not _SilentSpan  # logging on: from the next call on
    finally:
        decisions.setLevel(level)


@pytest.mark.parametrize("amount", [5, 500000], ids=["allow", "halt"])
async def test_a_silent_call_keeps_what_a_quiet_one_keeps(amount: int) -> None:
    """The same run with the silent span and with the quiet one (``_silent`` off): the same
    calls run, nothing is recorded by either, and a halt marks the host's span in both."""
    seen: list[tuple[list[str], list[str]]] = []
    for silent in (True, False):
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        telemetry = _silent_telemetry()
        if not silent:
            telemetry._silent = lambda: False  # type: ignore[method-assign]
        CALLS.clear()
        client = ScriptedChatClient([[call("send_money", recipient="UK12", amount=amount)],
                                     [text("done")]])
        agent = agent_with(client, [send_money], guarded(load_fixture("payments.yaml"),
                                                         telemetry))
        with provider.get_tracer("host").start_as_current_span("host request"), \
                contextlib.suppress(guardrails.PolicyViolation):
            await agent.run("pay")
        spans = exporter.get_finished_spans()
        seen.append(([str(c) for c in CALLS],
                     [e.name for s in spans for e in s.events]
                     + [s.name for s in spans if s.name.startswith("guardrails.")]))
        assert telemetry.contained_failures == 0
    assert seen[0] == seen[1]
    assert (seen[0][1] == [EVENT_HALT]) is (amount == 500000)


def test_a_silent_span_marks_a_halt_on_the_span_around_the_call() -> None:
    """(In the loop the run boundary marks it too: here the call's span alone.)"""
    halt = load_fixture("payments.yaml").evaluate(
        "send_money", {"recipient": "UK12", "amount": 500000})
    assert halt.effect == "halt"
    for silent in (True, False):
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        telemetry = _silent_telemetry()
        if not silent:
            telemetry._silent = lambda: False  # type: ignore[method-assign]
        with provider.get_tracer("host").start_as_current_span("around"), \
                telemetry.call_span(tool="send_money", call_id="c") as span:
            assert (type(span) is _SilentSpan) is silent
            span.record(halt, 0.001)
        [around] = exporter.get_finished_spans()
        assert [e.name for e in around.events] == [EVENT_HALT]
