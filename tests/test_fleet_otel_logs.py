"""Decision logs as OpenTelemetry log records, with the real SDK, in the real loop."""

from __future__ import annotations

import json
from pathlib import Path

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework.scripted import call
from guardrails.telemetry import JsonLinesSink, OpenTelemetrySink
from tests.af_support import agent_with, clear_calls_fixture, load_fixture
from tests.af_tools import login

_clear = clear_calls_fixture()


async def test_decisions_become_otel_log_records_linked_to_the_guard_span(
        tmp_path: Path) -> None:
    logs = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    jsonl = tmp_path / "decisions.jsonl"
    policies = load_fixture("secrets.yaml")
    client = ScriptedChatClient([[call("login", user="admin", pin=987654)],
                                 [call("login", user="ann", pin=123987)]])
    with JsonLinesSink(jsonl) as file_sink:
        sinks = [OpenTelemetrySink(provider), file_sink]
        agent = agent_with(client, [login], guard(policies, decision_log=sinks,
                                                  tracer_provider=tracer_provider))
        await agent.run("log in")
    records = [r.log_record for r in logs.get_finished_logs()]
    assert len(records) == 2
    denied, allowed = records
    assert denied.event_name == "guardrails.decision"
    assert denied.attributes is not None and denied.attributes["guardrails.decision.effect"] == (
        "deny")
    assert denied.severity_text == "WARN" and allowed.severity_text == "INFO"
    body = denied.body
    assert isinstance(body, dict) and body["tool"] == "login"
    assert body["rules"][0]["rule"] == "no-admin"
    # Linked to the guard's span, and the JSON Lines sink got the same records.
    guard_spans = {s.context.span_id: s for s in spans.get_finished_spans()
                   if s.name.startswith("guardrails.guard")}
    assert denied.span_id in guard_spans and denied.trace_id == (
        guard_spans[denied.span_id].context.trace_id)
    lines = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert [line["decision_id"] for line in lines] == [b["decision_id"] for b in (
        r.body for r in records) if isinstance(b, dict)]
    # The secret pin (quoted by the rule's messageExpression) is nowhere in the records.
    exported = json.dumps([{"body": r.body, "attributes": dict(r.attributes or {})}
                           for r in records], default=str)
    assert "987654" not in exported and "123987" not in exported
