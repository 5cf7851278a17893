"""``guard(tracer_provider=...)`` without a global provider: one trace per run, not per call.

Run in a subprocess: a test process has a global SDK provider installed (other telemetry
tests need it), and the case here is precisely a process without one, where the
framework's ``invoke_agent`` span does not exist.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = r"""
import asyncio, json, sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import guardrails
from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework.scripted import call, text
from tests.af_support import agent_with, load_fixture, run
from tests.af_tools import send_money

assert not isinstance(trace.get_tracer_provider(), TracerProvider)  # no global provider
stream, amount = sys.argv[1] == "stream", int(sys.argv[2])
exporter = InMemorySpanExporter()
tp = TracerProvider()
tp.add_span_processor(SimpleSpanProcessor(exporter))
if len(sys.argv) > 3:  # a span processor that raises on start and on end
    from opentelemetry.sdk.trace import SpanProcessor

    class Raising(SpanProcessor):
        def on_start(self, span, parent_context=None):
            raise RuntimeError("on_start")

        def on_end(self, span):
            raise RuntimeError("on_end")

    tp.add_span_processor(Raising())
policies = load_fixture()

async def main() -> str:
    client = ScriptedChatClient([[call("send_money", "c1", recipient="UK12", amount=1)],
                                 [call("send_money", "c2", recipient="UK12", amount=amount)],
                                 [text("done")]])
    agent = agent_with(client, [send_money], guard(policies, tracer_provider=tp))
    try:
        await run(agent, "pay twice", stream=stream)
    except guardrails.PolicyViolation:
        return "halted"
    return "finished"

outcome = asyncio.run(main())
spans = [{"name": s.name, "trace": s.context.trace_id, "id": s.context.span_id,
          "parent": s.parent.span_id if s.parent else None,
          "status": s.status.status_code.name,
          "events": [e.name for e in s.events]} for s in exporter.get_finished_spans()]
print(json.dumps({"outcome": outcome, "spans": spans}))
"""


def _spans(mode: str, amount: int, *extra: str) -> dict[str, object]:
    proc = subprocess.run([sys.executable, "-c", SCRIPT, mode, str(amount), *extra], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("mode", ["run", "stream"])
def test_decisions_of_one_run_share_one_trace(mode: str) -> None:
    result = _spans(mode, 2)
    assert result["outcome"] == "finished"
    spans = result["spans"]
    assert isinstance(spans, list)
    (root,) = [s for s in spans if s["name"] == "guardrails.run"]
    guards = [s for s in spans if s["name"].startswith("guardrails.guard")]
    assert len(guards) == 2
    assert root["parent"] is None
    assert all(g["trace"] == root["trace"] and g["parent"] == root["id"] for g in guards)


@pytest.mark.parametrize("mode", ["run", "stream"])
def test_a_halt_marks_the_run_span(mode: str) -> None:
    result = _spans(mode, 10**9)  # the second call is absurd: the run halts
    assert result["outcome"] == "halted"
    spans = result["spans"]
    assert isinstance(spans, list)
    (root,) = [s for s in spans if s["name"] == "guardrails.run"]
    assert root["status"] == "ERROR" and root["events"] == ["guardrails.halt"]
    guards = [s for s in spans if s["name"].startswith("guardrails.guard")]
    assert len(guards) == 2 and all(g["parent"] == root["id"] for g in guards)


@pytest.mark.parametrize("mode", ["run", "stream"])
def test_a_raising_span_processor_changes_no_outcome(mode: str) -> None:
    assert _spans(mode, 2, "raise")["outcome"] == "finished"
    assert _spans(mode, 10**9, "raise")["outcome"] == "halted"
