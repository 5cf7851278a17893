"""Telemetry: the guard's OpenTelemetry spans and metrics, printed to the console.

    .venv/bin/python samples/telemetry_console.py

The package uses only the OpenTelemetry API; the host picks the SDK and exporters. Here a
TracerProvider with ConsoleSpanExporter prints every span as it ends: the guard's span
("guardrails.guard <tool>") is the parent of the framework's execute_tool span and carries
guardrails.* attributes (effect, decision id, policy revision, rules), never argument
values. An in-memory metric reader shows the decision counter. See docs/telemetry.md.
Offline: the model is a scripted stand-in.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from agent_framework import Agent, tool
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

import guardrails
from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework.scripted import call

_LIBRARY = Path(__file__).resolve().parent.parent / "policies"
POLICIES = [_LIBRARY / "payments.yaml", _LIBRARY / "common.yaml"]  # common: shared functions


def one_line(span: ReadableSpan) -> str:
    """A compact console format (the default is one JSON document per span)."""
    parent = f"{span.parent.span_id:016x}" if span.parent else "-"
    attributes = ", ".join(
        f"{k}={v!r}" for k, v in (span.attributes or {}).items()
        if str(k).startswith("guardrails.") or str(k) in ("gen_ai.tool.name", "gen_ai.tool.call.id"))
    return (f"span {span.name!r} id={span.context.span_id:016x} parent={parent}\n"
            f"     {attributes}\n")


@tool
def send_money(recipient: str, amount: float) -> str:
    """Pay an amount in EUR to an IBAN."""
    return f"Paid {amount:.2f} EUR to {recipient}."


async def main() -> None:
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(
        SimpleSpanProcessor(ConsoleSpanExporter(out=sys.stdout, formatter=one_line)))
    # Global too, so the framework's own spans (invoke_agent, chat, execute_tool) show.
    trace.set_tracer_provider(tracer_provider)
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])

    policies = guardrails.load(POLICIES)
    client = ScriptedChatClient([
        [call("send_money", recipient="GB82WEST12345698765432", amount=120)],
        [call("send_money", recipient="FR7630006000011234567890189", amount=50)],
    ])
    agent = Agent(client=client, tools=[send_money],
                  middleware=guard(policies, tracer_provider=tracer_provider,
                                   meter_provider=meter_provider))
    print("spans, as they end (a child ends before its parent):")
    await agent.run("Pay Acme 120")

    data = reader.get_metrics_data()
    for resource_metrics in data.resource_metrics if data else []:
        for scope in resource_metrics.scope_metrics:
            for metric in scope.metrics:
                if metric.name == "guardrails.decisions":
                    for point in metric.data.data_points:
                        print(f"metric guardrails.decisions {dict(point.attributes or {})} "
                              f"= {getattr(point, 'value', '?')}")
    tracer_provider.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
