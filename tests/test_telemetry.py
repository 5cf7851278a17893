"""Unit tests of guardrails.telemetry with the real OpenTelemetry SDK and real Decisions."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import stat
import threading
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from guardrails.engine.decision import (
    Action,
    AppliedRepair,
    Decision,
    Effect,
    EvaluationError,
    FiredRule,
)
from guardrails.telemetry import (
    DECISION_LOGGER,
    DecisionSink,
    GuardTelemetry,
    JsonLinesSink,
    LoggingSink,
    decision_record,
)


@dataclass
class ListSink:
    records: list[Mapping[str, Any]] = field(default_factory=list)

    def write(self, record: Mapping[str, Any]) -> None:
        self.records.append(json.loads(json.dumps(record)))  # must be JSON-safe


@dataclass
class Otel:
    spans: InMemorySpanExporter
    reader: InMemoryMetricReader
    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    sink: ListSink
    telemetry: GuardTelemetry

    def finished(self) -> list[ReadableSpan]:
        return list(self.spans.get_finished_spans())

    def span(self, prefix: str = "guardrails.guard") -> ReadableSpan:
        found = [s for s in self.finished() if s.name.startswith(prefix)]
        assert len(found) == 1, [s.name for s in self.finished()]
        return found[0]

    def points(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        out: list[Any] = []
        if data is None:
            return out
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if m.name == name:
                        out.extend(m.data.data_points)
        return out


@pytest.fixture
def otel() -> Iterator[Otel]:
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    mp = MeterProvider(metric_readers=[reader])
    sink = ListSink()
    yield Otel(exporter, reader, tp, mp, sink,
               GuardTelemetry(tracer_provider=tp, meter_provider=mp, decision_log=sink))
    tp.shutdown()
    mp.shutdown()


def decision(effect: Effect = Effect.ALLOW, *, tool: str = "send_money",
             args: Mapping[str, Any] | None = None, rules: tuple[FiredRule, ...] = (),
             repairs: tuple[AppliedRepair, ...] = (), errors: tuple[EvaluationError, ...] = (),
             policies: tuple[str, ...] = ("payments",),
             secret: frozenset[str] = frozenset()) -> Decision:
    return Decision(id=str(uuid.uuid4()), tool=tool, effect=effect,
                    arguments=dict(args or {"recipient": "UK12", "amount": 10.0}),
                    rules=rules, repairs=repairs, errors=errors, policies=policies,
                    revision="rev-abc123", secret_arguments=secret)


DENY_RULE = FiredRule("payments", "unknown-recipient", Action.DENY, "unknown recipient")
WARN_RULE = FiredRule("payments", "weekend", Action.WARN, "weekend transfer")
HALT_RULE = FiredRule("exfil", "send-keys", Action.HALT, "exfiltration attempt")
REPAIR = AppliedRepair("payments", "amount-as-string", ("amount",), ("memo",))


def record_one(otel: Otel, d: Decision, *, call_id: str | None = "call-1") -> None:
    with otel.telemetry.call_span(tool=d.tool, call_id=call_id) as call:
        call.record(d, 0.002)


# ---------------------------------------------------------------------------- spans


def test_allow_span_attributes(otel: Otel) -> None:
    d = decision()
    record_one(otel, d)
    span = otel.span()
    assert span.name == "guardrails.guard send_money"
    assert span.kind is trace.SpanKind.INTERNAL
    assert span.parent is None
    assert span.status.status_code is StatusCode.UNSET
    attrs = dict(span.attributes or {})
    assert attrs == {
        "gen_ai.tool.name": "send_money",
        "gen_ai.tool.call.id": "call-1",
        "guardrails.decision.effect": "allow",
        "guardrails.decision.id": d.id,
        "guardrails.policy.revision": "rev-abc123",
        "guardrails.policies": ("payments",),
        "guardrails.rules": (),
        "guardrails.repairs": 0,
        "guardrails.errors": 0,
        "guardrails.audit": False,
    }
    assert span.events == ()


def test_no_call_id_omits_the_attribute(otel: Otel) -> None:
    record_one(otel, decision(), call_id=None)
    assert "gen_ai.tool.call.id" not in (otel.span().attributes or {})


def test_deny_with_rules_and_repairs_has_one_event_each(otel: Otel) -> None:
    d = decision(Effect.DENY, rules=(DENY_RULE, WARN_RULE), repairs=(REPAIR,))
    record_one(otel, d)
    span = otel.span()
    attrs = span.attributes or {}
    assert attrs["guardrails.decision.effect"] == "deny"
    assert attrs["guardrails.rules"] == ("payments/unknown-recipient", "payments/weekend")
    assert attrs["guardrails.repairs"] == 1
    assert span.status.status_code is StatusCode.UNSET  # a deny is the guard working, not an error
    events = [(e.name, dict(e.attributes or {})) for e in span.events]
    assert events == [
        ("guardrails.rule", {"guardrails.policy": "payments", "guardrails.rule": "unknown-recipient",
                             "guardrails.rule.action": "deny", "guardrails.audit": False}),
        ("guardrails.rule", {"guardrails.policy": "payments", "guardrails.rule": "weekend",
                             "guardrails.rule.action": "warn", "guardrails.audit": False}),
        ("guardrails.repair", {"guardrails.policy": "payments",
                               "guardrails.repair": "amount-as-string",
                               "guardrails.repair.set": ("amount",),
                               "guardrails.repair.unset": ("memo",), "guardrails.audit": False}),
    ]


def test_require_approval_effect(otel: Otel) -> None:
    rule = FiredRule("payments", "large", Action.REQUIRE_APPROVAL, "needs approval")
    record_one(otel, decision(Effect.REQUIRE_APPROVAL, rules=(rule,)))
    span = otel.span()
    assert (span.attributes or {})["guardrails.decision.effect"] == "require_approval"
    assert span.status.status_code is StatusCode.UNSET


def test_halt_sets_error_status_with_rule_names_not_messages(otel: Otel) -> None:
    d = decision(Effect.HALT, rules=(HALT_RULE, WARN_RULE), policies=("exfil", "payments"))
    record_one(otel, d)
    span = otel.span()
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "halt by rule exfil/send-keys"
    assert "exfiltration attempt" not in json.dumps(json.loads(span.to_json()))


def test_halt_by_default_action_and_by_error_give_a_reason(otel: Otel) -> None:
    err = EvaluationError("exfil", "rules.send-keys", "no such key: x", "fired")
    record_one(otel, decision(Effect.HALT, errors=(err,)), call_id="a")
    record_one(otel, decision(Effect.HALT, policies=("lockdown",)), call_id="b")
    first, second = otel.finished()
    assert first.status.description == "halt after evaluation error in exfil/rules.send-keys"
    assert second.status.description == "halt by default action (lockdown)"


def test_halt_marks_the_enclosing_span_once(otel: Otel) -> None:
    """The guard marks the span around the call; the run boundary's record_halt on the same
    span does not add a second event."""
    tracer = otel.tracer_provider.get_tracer("test")
    d = decision(Effect.HALT, rules=(HALT_RULE,))
    with tracer.start_as_current_span("invoke_agent"):
        record_one(otel, d)
        otel.telemetry.record_halt(d)
    agent = otel.span("invoke_agent")
    assert agent.status.status_code is StatusCode.ERROR
    assert agent.status.description == "run halted: halt by rule exfil/send-keys"
    halts = [e for e in agent.events if e.name == "guardrails.halt"]
    assert len(halts) == 1
    assert dict(halts[0].attributes or {}) == {
        "guardrails.decision.id": d.id, "gen_ai.tool.name": "send_money",
        "guardrails.rules": ("exfil/send-keys",), "guardrails.policy.revision": "rev-abc123"}


def test_record_halt_marks_the_current_span(otel: Otel) -> None:
    tracer = otel.tracer_provider.get_tracer("test")
    d = decision(Effect.HALT, rules=(HALT_RULE,))
    with tracer.start_as_current_span("user-run"):
        otel.telemetry.record_halt(d)
    run = otel.span("user-run")
    assert run.status.status_code is StatusCode.ERROR
    assert [e.name for e in run.events] == ["guardrails.halt"]


def test_record_halt_without_a_span_is_harmless(otel: Otel) -> None:
    otel.telemetry.record_halt(decision(Effect.HALT, rules=(HALT_RULE,)))
    assert otel.finished() == []


def test_audit_outcomes_are_flagged(otel: Otel) -> None:
    audit_rule = FiredRule("shadow", "block-all", Action.DENY, "would deny", audit=True)
    audit_repair = AppliedRepair("shadow", "trim", ("recipient",), (), audit=True)
    record_one(otel, decision(rules=(audit_rule,), repairs=(audit_repair,), policies=("shadow",)))
    span = otel.span()
    attrs = span.attributes or {}
    assert attrs["guardrails.audit"] is True
    assert attrs["guardrails.decision.effect"] == "allow"
    assert [dict(e.attributes or {})["guardrails.audit"] for e in span.events] == [True, True]
    (rec,) = otel.sink.records
    assert rec["audit"] is True
    assert rec["rules"][0]["audit"] is True and rec["repairs"][0]["audit"] is True


def test_evaluation_errors_set_error_status_and_events(otel: Otel) -> None:
    err = EvaluationError("payments", "variables.amount", "cannot convert abc to double", "skipped")
    record_one(otel, decision(errors=(err,)))
    span = otel.span()
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "evaluation error in payments/variables.amount"
    (event,) = span.events
    assert event.name == "guardrails.evaluation_error"
    assert dict(event.attributes or {}) == {
        "guardrails.policy": "payments", "guardrails.error.element": "variables.amount",
        "guardrails.error.handled_as": "skipped"}
    (point,) = otel.points("guardrails.evaluation.errors")
    assert point.value == 1
    assert dict(point.attributes) == {"gen_ai.tool.name": "send_money",
                                      "guardrails.policy": "payments",
                                      "guardrails.error.handled_as": "skipped"}


def test_fail_records_only_the_exception_type(otel: Otel) -> None:
    with pytest.raises(RuntimeError), otel.telemetry.call_span(tool="t", call_id="c") as call:
        try:
            raise RuntimeError("value hunter2 is bad")
        except RuntimeError as exc:
            call.fail(exc)
            raise
    span = otel.span()
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "guard failed: RuntimeError"
    assert (span.attributes or {})["error.type"] == "RuntimeError"
    assert span.events == ()
    assert "hunter2" not in span.to_json()
    (point,) = otel.points("guardrails.evaluation.errors")
    assert dict(point.attributes) == {"gen_ai.tool.name": "t", "error.type": "RuntimeError"}
    assert otel.sink.records == []


def test_exception_before_a_decision_is_an_error(otel: Otel) -> None:
    with pytest.raises(KeyError), otel.telemetry.call_span(tool="t", call_id="c"):
        raise KeyError("hunter2")
    span = otel.span()
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "guard did not decide: KeyError"
    assert "hunter2" not in span.to_json()


def test_tool_exception_after_allow_keeps_the_decision_status(otel: Otel) -> None:
    """The tool's own failure belongs to execute_tool; the guard span keeps what it decided."""
    with pytest.raises(ValueError), otel.telemetry.call_span(tool="t", call_id="c") as call:
        call.record(decision(tool="t"), 0.001)
        raise ValueError("tool blew up with hunter2")
    span = otel.span()
    assert span.status.status_code is StatusCode.UNSET
    assert span.events == ()
    assert "hunter2" not in span.to_json()


def test_inner_spans_are_children_of_the_guard_span(otel: Otel) -> None:
    tracer = otel.tracer_provider.get_tracer("agent_framework")
    with (tracer.start_as_current_span("invoke_agent") as agent,
          otel.telemetry.call_span(tool="t", call_id="c") as call):
        with tracer.start_as_current_span("execute_tool t"):
            pass
        call.record(decision(tool="t"), 0.001)
    guard = otel.span()
    tool = otel.span("execute_tool")
    assert tool.parent is not None and guard.parent is not None
    assert tool.parent.span_id == guard.context.span_id
    assert guard.parent.span_id == agent.get_span_context().span_id


async def test_parallel_calls_get_sibling_spans_and_matching_records(otel: Otel) -> None:
    tracer = otel.tracer_provider.get_tracer("test")

    async def one(i: int) -> None:
        with otel.telemetry.call_span(tool=f"tool{i}", call_id=f"call-{i}") as call:
            await asyncio.sleep(0)
            call.record(decision(tool=f"tool{i}"), 0.001)
            await asyncio.sleep(0)

    with tracer.start_as_current_span("invoke_agent") as agent:
        await asyncio.gather(*(one(i) for i in range(5)))
    guards = {s.attributes["gen_ai.tool.call.id"]: s for s in otel.finished()  # type: ignore[index]
              if s.name.startswith("guardrails.guard")}
    assert len(guards) == 5
    for rec in otel.sink.records:
        span = guards[rec["call_id"]]
        assert span.parent is not None
        assert span.parent.span_id == agent.get_span_context().span_id
        assert rec["span_id"] == f"{span.context.span_id:016x}"
        assert rec["tool"] == (span.attributes or {})["gen_ai.tool.name"]


# ---------------------------------------------------------------------------- metrics


def test_metrics(otel: Otel) -> None:
    record_one(otel, decision(Effect.DENY, rules=(DENY_RULE, WARN_RULE)))
    record_one(otel, decision(Effect.DENY, rules=(DENY_RULE,)))
    record_one(otel, decision())
    decisions = {(p.attributes["guardrails.decision.effect"], p.attributes["guardrails.audit"]):
                 p.value for p in otel.points("guardrails.decisions")}
    assert decisions == {("deny", False): 2, ("allow", False): 1}
    fired = {(p.attributes["guardrails.policy"], p.attributes["guardrails.rule"],
              p.attributes["guardrails.rule.action"], p.attributes["guardrails.decision.effect"]):
             p.value for p in otel.points("guardrails.rules.fired")}
    assert fired == {("payments", "unknown-recipient", "deny", "deny"): 2,
                     ("payments", "weekend", "warn", "deny"): 1}
    durations = {p.attributes["guardrails.decision.effect"]: (p.count, p.sum)
                 for p in otel.points("guardrails.evaluation.duration")}
    assert durations["deny"][0] == 2 and durations["allow"][0] == 1
    assert durations["deny"][1] == pytest.approx(0.004)
    assert otel.points("guardrails.evaluation.errors") == []


def test_duration_histogram_has_sub_millisecond_buckets(otel: Otel) -> None:
    record_one(otel, decision())
    (point,) = otel.points("guardrails.evaluation.duration")
    assert point.explicit_bounds[0] < 0.001


# ---------------------------------------------------------------------------- decision log


def test_record_fields_and_ids_match_the_span(otel: Otel) -> None:
    d = decision(Effect.DENY, rules=(DENY_RULE,), repairs=(REPAIR,), secret=frozenset({"api_key"}),
                 args={"recipient": "UK12", "amount": 10.0, "api_key": "k"})
    record_one(otel, d, call_id="call-7")
    span = otel.span()
    (rec,) = otel.sink.records
    assert rec["trace_id"] == f"{span.context.trace_id:032x}"
    assert rec["span_id"] == f"{span.context.span_id:016x}"
    assert rec["decision_id"] == d.id
    assert rec["revision"] == "rev-abc123"
    assert rec["tool"] == "send_money" and rec["call_id"] == "call-7"
    assert rec["effect"] == "deny"
    assert rec["message"] == "unknown recipient"
    assert rec["rules"] == [DENY_RULE.to_dict()]
    assert rec["repairs"] == [REPAIR.to_dict()]
    assert rec["errors"] == []
    assert rec["policies"] == ["payments"]
    assert rec["argument_names"] == ["amount", "api_key", "recipient"]
    assert rec["secret_arguments"] == ["api_key"]
    assert rec["duration_s"] == 0.002
    assert rec["timestamp"].endswith("+00:00")
    assert "arguments" not in rec


def test_record_without_a_recording_span_has_no_ids() -> None:
    sink = ListSink()
    t = GuardTelemetry(tracer_provider=trace.NoOpTracerProvider(),
                       meter_provider=metrics.NoOpMeterProvider(), decision_log=sink)
    with t.call_span(tool="t", call_id="c") as call:
        call.record(decision(Effect.HALT, rules=(HALT_RULE,)), 0.001)
    (rec,) = sink.records
    assert rec["trace_id"] is None and rec["span_id"] is None
    assert rec["effect"] == "halt"


def test_decision_record_is_usable_alone() -> None:
    rec = decision_record(decision())
    assert rec["trace_id"] is None and rec["call_id"] is None and rec["duration_s"] is None


def test_default_sink_is_python_logging(caplog: pytest.LogCaptureFixture) -> None:
    t = GuardTelemetry(tracer_provider=trace.NoOpTracerProvider(),
                       meter_provider=metrics.NoOpMeterProvider())
    assert isinstance(t.decision_log, LoggingSink)
    d = decision(Effect.DENY, rules=(DENY_RULE,))
    with (caplog.at_level(logging.INFO, logger=DECISION_LOGGER),
          t.call_span(tool="send_money", call_id="c") as call):
        call.record(d, 0.001)
    (log,) = [r for r in caplog.records if r.name == DECISION_LOGGER]
    assert log.levelno == logging.INFO
    assert json.loads(log.getMessage())["decision_id"] == d.id
    assert getattr(log, "guardrails_decision")["effect"] == "deny"  # noqa: B009


def test_logging_sink_is_silent_when_disabled(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger=DECISION_LOGGER):
        LoggingSink().write({"x": 1})
    assert [r for r in caplog.records if r.name == DECISION_LOGGER] == []


def test_sinks_satisfy_the_protocol(tmp_path: Path) -> None:
    with JsonLinesSink(tmp_path / "d.jsonl") as jsonl:
        assert isinstance(jsonl, DecisionSink)
    assert isinstance(LoggingSink(), DecisionSink)
    assert isinstance(ListSink(), DecisionSink)


def test_broken_sink_does_not_break_the_call(otel: Otel, caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        def write(self, record: Mapping[str, Any]) -> None:
            raise OSError("disk full, record hunter2")

    t = GuardTelemetry(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider,
                       decision_log=Broken())
    with t.call_span(tool="t", call_id="c") as call:
        call.record(decision(tool="t"), 0.001)
    assert (otel.span().attributes or {})["guardrails.decision.effect"] == "allow"
    (point,) = otel.points("guardrails.decision_log.errors")
    assert point.value == 1 and dict(point.attributes) == {"error.type": "OSError"}
    assert "hunter2" not in caplog.text
    assert "Broken" in caplog.text


def test_jsonl_sink_appends_one_line_per_record(otel: Otel, tmp_path: Path) -> None:
    path = tmp_path / "decisions.jsonl"
    with JsonLinesSink(path) as sink:
        t = GuardTelemetry(tracer_provider=otel.tracer_provider,
                           meter_provider=otel.meter_provider, decision_log=sink)
        for i in range(3):
            with t.call_span(tool=f"t{i}", call_id=str(i)) as call:
                call.record(decision(tool=f"t{i}"), 0.001)
    with JsonLinesSink(path) as sink:  # reopening appends, never truncates
        sink.write({"decision_id": "last", "message": "line\nbreak ünïcode"})
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["tool"] for line in lines[:3]] == ["t0", "t1", "t2"]
    assert json.loads(lines[3])["message"] == "line\nbreak ünïcode"
    assert len(lines) == 4
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_jsonl_sink_concurrent_writers_never_interleave(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    sink = JsonLinesSink(path, fsync=False)
    big = "x" * 70_000  # larger than a pipe buffer: a torn write would show

    def writer(n: int) -> None:
        for i in range(40):
            sink.write({"writer": n, "i": i, "pad": big if i % 10 == 0 else ""})

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    sink.close()
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(records) == 240
    for n in range(6):
        assert [r["i"] for r in records if r["writer"] == n] == list(range(40))


def test_jsonl_sink_refuses_writes_after_close(tmp_path: Path) -> None:
    sink = JsonLinesSink(tmp_path / "d.jsonl")
    sink.close()
    sink.close()  # idempotent
    with pytest.raises(ValueError):
        sink.write({"a": 1})


def test_approved_replay_is_marked(otel: Otel) -> None:
    rule = FiredRule("payments", "large", Action.REQUIRE_APPROVAL, "needs approval")
    with otel.telemetry.call_span(tool="send_money", call_id="c") as call:
        call.mark_approved()
        call.record(decision(Effect.REQUIRE_APPROVAL, rules=(rule,)), 0.001)
    attrs = otel.span().attributes or {}
    assert attrs["guardrails.approval.granted"] is True
    assert attrs["guardrails.decision.effect"] == "require_approval"
    assert otel.sink.records[0]["approved"] is True
