"""Run by tests/test_telemetry_quiet.py in a process of its own (the global providers are
set once per process): a guard built with the default telemetry while no SDK is installed
records no span, and once an SDK's tracer and meter providers are installed globally (by
the host, after ``guard()``), or named in ``OTEL_PYTHON_TRACER_PROVIDER``, its next calls
are recorded: spans and metrics. Prints one JSON line of what it saw."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

sys.path.insert(0, sys.argv[1])
from agent_framework import tool
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework.scripted import call, text
from guardrails.telemetry import _installed_tracer_provider
from tests.af_support import agent_with, load_fixture, run


@tool
def send_money(recipient: str, amount: float) -> str:
    """Send money."""
    return f"sent {amount} to {recipient}"


def decisions(reader: InMemoryMetricReader) -> int:
    data = reader.get_metrics_data()
    total = 0
    for resource in data.resource_metrics if data is not None else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == "guardrails.decisions":
                    total += sum(int(p.value) for p in metric.data.data_points)
    return total


async def main() -> None:
    out: dict[str, Any] = {"from_env": "OTEL_PYTHON_TRACER_PROVIDER" in os.environ,
                           "installed_before": _installed_tracer_provider() is not None}
    agent_guard = guard(load_fixture("payments.yaml"))
    function_guard = agent_guard[1]
    out["can_record_before"] = function_guard._telemetry._can_record()
    out["silent_before"] = function_guard._telemetry._silent()

    def turn(n: int) -> ScriptedChatClient:
        return ScriptedChatClient([[call("send_money", f"c{n}", recipient="UK12", amount=5)],
                                   [text("done")]])

    exporter = InMemorySpanExporter()
    if out["from_env"]:
        # Loaded by the API from the environment on the guard's first call: add an exporter
        # to the provider it loaded once that call ran.
        await run(agent_with(turn(0), [send_money], agent_guard), "pay")
        provider = trace.get_tracer_provider()
        assert isinstance(provider, TracerProvider), provider
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        reader = None
    else:
        await run(agent_with(turn(0), [send_money], agent_guard), "pay")
        out["spans_before"] = len(exporter.get_finished_spans())
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        reader = InMemoryMetricReader()
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    out["installed_after"] = _installed_tracer_provider() is not None
    out["silent_after"] = function_guard._telemetry._silent()
    await run(agent_with(turn(1), [send_money], agent_guard), "pay")
    out["guard_spans"] = [s.name for s in exporter.get_finished_spans()
                          if s.name.startswith("guardrails.")]
    out["decisions_counted"] = decisions(reader) if reader is not None else None
    print(json.dumps(out))


asyncio.run(main())
