"""Run by tests/test_redteam_speed.py in a process of its own: an OpenTelemetry SDK
provider installed globally in the middle of a guarded run (the guard records no span
until one can record), and nothing secret in the spans recorded after it."""

from __future__ import annotations

import asyncio
import json
import pathlib
import sys
import tempfile
from typing import Any

sys.path.insert(0, sys.argv[1])
from agent_framework import AgentSession, tool
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

import guardrails
from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework.scripted import call, text
from tests.af_support import agent_with, run

SECRET = "tok-SECRET-4711"
policy = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: p}
spec:
  match: {tools: [submit]}
  secrets: {arguments: [token]}
  rules:
    - name: big
      when: 'args.amount > 100'
      action: deny
      messageExpression: '"too much for " + args.token'
"""
p = pathlib.Path(tempfile.mkdtemp()) / "p.yaml"
p.write_text(policy)
exporter = InMemorySpanExporter()
ran: list[int] = []

@tool
def submit(token: str, amount: int) -> str:
    """Submit."""
    ran.append(amount)
    if not isinstance(trace.get_tracer_provider(), TracerProvider):  # installed mid-run
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
    return f"receipt for {token}"

async def main() -> None:
    assert not isinstance(trace.get_tracer_provider(), TracerProvider)
    client = ScriptedChatClient([
        [call("submit", token=SECRET, amount=1)],
        [call("submit", token=SECRET, amount=2)],
        [call("submit", token=SECRET, amount=500)],
        [call("submit", f"id-{SECRET}", token=SECRET, amount=3)],
        [text("done")]])
    session = AgentSession()
    response = await run(agent_with(client, [submit], guard(guardrails.load(p))), "go",
                         session=session)
    spans = exporter.get_finished_spans()
    guard_spans = [s for s in spans if s.name.startswith("guardrails.")]
    texts: list[str] = []
    for s in guard_spans:
        assert s.attributes is not None
        texts += [str(v) for v in s.attributes.values()]
        texts += [str(v) for e in s.events for v in (e.name, *(e.attributes or {}).values())]
        texts.append(str(s.status.description))
    out: dict[str, Any] = {"ran": ran, "guard_spans": len(guard_spans),
           "effects": [s.attributes.get("guardrails.effect") for s in guard_spans],
           "leaks": [t for t in texts if SECRET in t],
           "keys": sorted({k for s in guard_spans for k in s.attributes}),
           # what a tool's result carries (the call id it repeats is the model's own)
           "result_leaks": [str(c.result) for m in response.messages for c in m.contents
                            if c.type == "function_result" and SECRET in str(c.result)]}
    print(json.dumps(out))

asyncio.run(main())
