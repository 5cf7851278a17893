"""Extra cost of telemetry per guarded call, as a ratio to the guard without telemetry.

    .venv/bin/python benchmarks/telemetry_bench.py [--rounds 15] [--calls 200]

Two views. *Evaluation*: the guard's own work per call is ``PolicySet.evaluate``; telemetry adds
the guard span, its attributes and events, the metrics and the decision record. *In the loop*:
a real Agent Framework run (guardrails.agent_framework.ScriptedChatClient, offline) making a batch of tool
calls through ``guard()``'s middleware, with telemetry replaced by a no-op versus the real
thing. Each configuration runs the same calls; rounds interleave the configurations (so drift
hits them alike) and the figure is the median per-call time over rounds. One run, one machine:
a ratio, not an absolute promise.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import guardrails
from guardrails.engine.decision import Decision
from guardrails.telemetry import (
    CallSpan,
    DecisionSink,
    GuardTelemetry,
    JsonLinesSink,
    LoggingSink,
)

POLICY = """\
apiVersion: guardrails/v1
kind: ToolPolicy
metadata:
  name: payments
spec:
  match:
    tools: ["send_money"]
  params:
    known: ["UK12", "UK13", "UK14"]
    max_amount: 10000
  repairs:
    - name: amount-as-string
      when: 'type(args.amount) == string'
      set:
        amount: 'double(args.amount.replace(",", ""))'
  secrets:
    arguments: [api_key]
  rules:
    - name: unknown-recipient
      when: '!(args.recipient in params.known)'
      action: deny
      message: 'unknown recipient'
    - name: large
      when: 'double(args.amount) > 1000.0'
      action: require_approval
      message: 'large amount'
    - name: weekend
      when: 'true'
      action: warn
      message: 'noted'
"""

CALLS: list[Mapping[str, Any]] = [
    {"recipient": "UK12", "amount": 10.0, "api_key": "sk-1"},       # allow (+warn)
    {"recipient": "UK99", "amount": "1,500.00", "api_key": "sk-2"},  # repair, deny, approval
    {"recipient": "UK13", "amount": 5000.0, "api_key": "sk-3"},     # require_approval
]


class _Null:
    def write(self, record: Mapping[str, Any]) -> None:
        pass


def _sdk() -> tuple[TracerProvider, MeterProvider]:
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    return tp, MeterProvider(metric_readers=[InMemoryMetricReader()])


class _NoSpan(CallSpan):
    def __init__(self) -> None:
        pass

    def record(self, decision: Decision, duration_s: float) -> None:
        pass

    def fail(self, error: BaseException) -> None:
        pass


class NoTelemetry(GuardTelemetry):
    """The guard without telemetry: every hook is a no-op."""

    @contextmanager
    def call_span(self, *, tool: str, call_id: str | None) -> Iterator[CallSpan]:
        yield _NoSpan()

    def record_halt(self, decision: Decision) -> None:
        pass


def _table(title: str, samples: dict[str, list[float]]) -> None:
    names = list(samples)
    base = statistics.median(samples[names[0]])
    print(f"\n{title}")
    print(f"{'configuration':46} {'us/call':>9} {'extra us':>9} {'ratio':>6}")
    for name in names:
        med = statistics.median(samples[name])
        print(f"{name:46} {med:9.1f} {med - base:9.1f} {med / base:6.2f}")


def in_loop(policies: guardrails.PolicySet, rounds: int, calls: int) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.af_support import agent_with
    from tests.af_tools import CALLS, send_money

    from guardrails.agent_framework import (
        GuardFunctionMiddleware,
        GuardRunMiddleware,
        ScriptedChatClient,
    )
    from guardrails.agent_framework.scripted import call

    batch = 10  # tool calls per model turn

    def middleware(t: GuardTelemetry) -> list[Any]:
        return [GuardRunMiddleware(policies, telemetry=t),
                GuardFunctionMiddleware(policies, telemetry=t)]

    async def one_run(t: GuardTelemetry) -> None:
        turn = [call("send_money", recipient="UK12", amount=float(i)) for i in range(batch)]
        client = ScriptedChatClient([turn])
        await agent_with(client, [send_money], middleware(t)).run("pay")
        CALLS.clear()

    tp, mp = _sdk()
    configs = {
        "guard, telemetry a no-op": NoTelemetry(),
        "guard + telemetry, no SDK": GuardTelemetry(
            tracer_provider=trace.NoOpTracerProvider(),
            meter_provider=metrics.NoOpMeterProvider()),
        "guard + telemetry, SDK, logging sink": GuardTelemetry(
            tracer_provider=tp, meter_provider=mp),
    }
    runs = max(1, calls // batch)

    async def main() -> dict[str, list[float]]:
        for t in configs.values():
            await one_run(t)
        samples: dict[str, list[float]] = {name: [] for name in configs}
        for _ in range(rounds):
            for name, t in configs.items():
                start = time.perf_counter_ns()
                for _ in range(runs):
                    await one_run(t)
                samples[name].append((time.perf_counter_ns() - start) / (runs * batch) / 1000)
        return samples

    _table(f"In the Agent Framework loop ({batch} calls per model turn, framework "
           "instrumentation as installed)", asyncio.run(main()))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=200)
    opts = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="guardrails-bench-"))
    (tmp / "payments.yaml").write_text(POLICY)
    policies = guardrails.load(tmp / "payments.yaml")

    def evaluate(i: int) -> Any:
        return policies.evaluate(tool="send_money", args=CALLS[i % len(CALLS)])

    def with_telemetry(t: GuardTelemetry) -> Callable[[int], None]:
        def call(i: int) -> None:
            with t.call_span(tool="send_money", call_id=f"call-{i}") as span:
                start = time.perf_counter()
                decision = evaluate(i)
                span.record(decision, time.perf_counter() - start)
        return call

    def telemetry(sdk: bool, sink: DecisionSink) -> GuardTelemetry:
        if sdk:
            tp, mp = _sdk()
            return GuardTelemetry(tracer_provider=tp, meter_provider=mp, decision_log=sink)
        return GuardTelemetry(tracer_provider=trace.NoOpTracerProvider(),
                              meter_provider=metrics.NoOpMeterProvider(), decision_log=sink)

    jsonl = JsonLinesSink(tmp / "nofsync.jsonl", fsync=False)
    jsonl_fsync = JsonLinesSink(tmp / "fsync.jsonl", fsync=True)
    configs: dict[str, Callable[[int], Any]] = {
        "guard without telemetry": evaluate,
        "API only, no SDK (logging sink, INFO off)": with_telemetry(telemetry(False, LoggingSink())),
        "SDK spans+metrics, null sink": with_telemetry(telemetry(True, _Null())),
        "SDK spans+metrics, logging sink (INFO off)": with_telemetry(telemetry(True, LoggingSink())),
        "SDK spans+metrics, JSON Lines, no fsync": with_telemetry(telemetry(True, jsonl)),
        "SDK spans+metrics, JSON Lines, fsync": with_telemetry(telemetry(True, jsonl_fsync)),
    }
    for fn in configs.values():  # warm caches
        for i in range(20):
            fn(i)
    samples: dict[str, list[float]] = {name: [] for name in configs}
    for _ in range(opts.rounds):
        for name, fn in configs.items():
            start = time.perf_counter_ns()
            for i in range(opts.calls):
                fn(i)
            samples[name].append((time.perf_counter_ns() - start) / opts.calls / 1000)
    jsonl.close()
    jsonl_fsync.close()

    _table("Evaluation (PolicySet.evaluate per call)", samples)
    in_loop(policies, opts.rounds, opts.calls)


if __name__ == "__main__":
    main()
