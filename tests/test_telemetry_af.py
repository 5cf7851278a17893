"""Telemetry inside Agent Framework's real function-calling loop (scripted model, real OTel SDK).

The framework opens its spans on the *global* tracer provider, so this module installs an SDK
provider globally (or joins the one another module installed) and reads one in-memory exporter.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import guardrails
from guardrails import PolicyViolation
from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework.scripted import call, result_text
from tests.af_support import (
    STREAMING,
    agent_with,
    approve_all,
    policies_fixture,
    run,
)
from tests.af_tools import CALLS, call_api, login, send_money

policies = policies_fixture("payments.yaml")


@dataclass
class ListSink:
    records: list[dict[str, Any]] = field(default_factory=list)

    def write(self, record: Mapping[str, Any]) -> None:
        self.records.append(json.loads(json.dumps(record)))


def _global_sdk_provider() -> TracerProvider:
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        trace.set_tracer_provider(TracerProvider())
    provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider), "a non-SDK global tracer provider is installed"
    return provider


@pytest.fixture(scope="module")
def exporter() -> InMemorySpanExporter:
    exp = InMemorySpanExporter()
    _global_sdk_provider().add_span_processor(SimpleSpanProcessor(exp))
    return exp


@dataclass
class World:
    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    meter_provider: MeterProvider
    sink: ListSink

    def guard(self, policies: guardrails.PolicySet, **kwargs: Any) -> list[Any]:
        return guard(policies, meter_provider=self.meter_provider, decision_log=self.sink,
                     **kwargs)

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name.startswith(prefix)]

    def guards(self) -> list[ReadableSpan]:
        return self.named("guardrails.guard ")

    def children(self, span: ReadableSpan) -> list[ReadableSpan]:
        return [s for s in self.spans()
                if s.parent is not None and s.parent.span_id == span.context.span_id]

    def parent(self, span: ReadableSpan) -> ReadableSpan:
        assert span.parent is not None
        (found,) = [s for s in self.spans() if s.context.span_id == span.parent.span_id]
        return found

    def metric_points(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        if data is None:
            return []
        return [p for rm in data.resource_metrics for sm in rm.scope_metrics
                for m in sm.metrics if m.name == name for p in m.data.data_points]

    def everything(self) -> str:
        data = self.reader.get_metrics_data()
        return "\n".join([*(s.to_json() for s in self.spans()),
                          data.to_json() if data is not None else "",
                          *(json.dumps(r) for r in self.sink.records)])


@pytest.fixture
def world(exporter: InMemorySpanExporter) -> Iterator[World]:
    exporter.clear()
    CALLS.clear()
    reader = InMemoryMetricReader()
    mp = MeterProvider(metric_readers=[reader])
    yield World(exporter, reader, mp, ListSink())
    mp.shutdown()
    exporter.clear()
    CALLS.clear()


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def assert_record_matches(world: World, span: ReadableSpan) -> dict[str, Any]:
    a = attrs(span)
    (rec,) = [r for r in world.sink.records if r["decision_id"] == a["guardrails.decision.id"]]
    assert rec["trace_id"] == f"{span.context.trace_id:032x}"
    assert rec["span_id"] == f"{span.context.span_id:016x}"
    assert rec["effect"] == a["guardrails.decision.effect"]
    assert rec["call_id"] == a["gen_ai.tool.call.id"]
    return rec


@STREAMING
async def test_guard_span_is_parent_of_execute_tool(world: World, policies: Any,
                                                    stream: bool) -> None:
    client = ScriptedChatClient([[call("send_money", "call-a", recipient="UK12",
                                       amount="1,0.50")]])
    await run(agent_with(client, [send_money], world.guard(policies)), "pay", stream=stream)
    (guard_span,) = world.guards()
    (tool_span,) = world.named("execute_tool")
    assert world.parent(tool_span).context.span_id == guard_span.context.span_id
    assert world.parent(guard_span).name.startswith("invoke_agent")
    assert tool_span.context.trace_id == guard_span.context.trace_id
    a = attrs(guard_span)
    assert a["gen_ai.tool.name"] == "send_money"
    assert a["gen_ai.tool.call.id"] == "call-a"
    assert a["guardrails.decision.effect"] == "allow"
    assert a["guardrails.policies"] == ("payments",)
    assert a["guardrails.rules"] == ()
    assert a["guardrails.repairs"] == 1
    assert a["guardrails.audit"] is False
    assert a["guardrails.policy.revision"] == policies.revision
    assert [e.name for e in guard_span.events] == ["guardrails.repair"]
    assert guard_span.status.status_code is StatusCode.UNSET
    rec = assert_record_matches(world, guard_span)
    assert rec["repairs"][0]["set"] == ["amount"]
    assert CALLS == [("send_money", {"recipient": "UK12", "amount": 10.5})]


@STREAMING
async def test_deny_span_has_no_tool_child(world: World, policies: Any, stream: bool) -> None:
    client = ScriptedChatClient([[call("send_money", "call-d", recipient="XX00", amount=5)]])
    await run(agent_with(client, [send_money], world.guard(policies)), "pay", stream=stream)
    (guard_span,) = world.guards()
    assert world.children(guard_span) == []
    a = attrs(guard_span)
    assert a["guardrails.decision.effect"] == "deny"
    assert a["guardrails.rules"] == ("payments/unknown-recipient",)
    assert guard_span.status.status_code is StatusCode.UNSET
    rec = assert_record_matches(world, guard_span)
    assert rec["message"] == "Recipient is not a known payee."
    (point,) = world.metric_points("guardrails.rules.fired")
    assert point.attributes["guardrails.rule"] == "unknown-recipient"
    assert point.attributes["guardrails.decision.effect"] == "deny"


async def test_require_approval_then_approved_replay(world: World, policies: Any) -> None:
    client = ScriptedChatClient([[call("send_money", "call-r", recipient="UK12", amount=2000)]])
    agent = agent_with(client, [send_money], world.guard(policies))
    session = agent.create_session()
    first = await agent.run("pay UK12 2000", session=session)
    (asked,) = world.guards()
    assert attrs(asked)["guardrails.decision.effect"] == "require_approval"
    assert world.children(asked) == []
    await agent.run(approve_all(first), session=session)
    replay = [s for s in world.guards() if s is not asked and s.context != asked.context]
    (replayed,) = replay
    assert attrs(replayed)["guardrails.decision.effect"] == "require_approval"
    assert [c.name for c in world.children(replayed)] == ["execute_tool send_money"]
    assert len(world.sink.records) == 2
    assert "guardrails.approval.granted" not in attrs(asked)
    assert attrs(replayed)["guardrails.approval.granted"] is True
    assert [r["approved"] for r in world.sink.records] == [False, True]
    for span in (asked, replayed):
        assert_record_matches(world, span)


@STREAMING
async def test_halted_run(world: World, policies: Any, stream: bool) -> None:
    client = ScriptedChatClient([[call("send_money", "call-h", recipient="UK12",
                                       amount=500000)]])
    agent = agent_with(client, [send_money], world.guard(policies))
    tracer = trace.get_tracer("test")
    with pytest.raises(PolicyViolation) as caught, tracer.start_as_current_span("user-request"):
        await run(agent, "pay a lot", stream=stream)
    decision = caught.value.decision
    (guard_span,) = world.guards()
    assert world.children(guard_span) == []
    assert guard_span.status.status_code is StatusCode.ERROR
    assert guard_span.status.description == "halt by rule payments/absurd-amount"
    a = attrs(guard_span)
    assert a["guardrails.decision.effect"] == "halt"
    assert a["guardrails.decision.id"] == decision.id
    assert_record_matches(world, guard_span)
    agent_span = world.parent(guard_span)
    assert agent_span.name.startswith("invoke_agent")
    assert agent_span.status.status_code is StatusCode.ERROR
    halts = [e for e in agent_span.events if e.name == "guardrails.halt"]
    assert len(halts) == 1
    assert (halts[0].attributes or {})["guardrails.decision.id"] == decision.id
    # Non-streaming: the run boundary sits outside invoke_agent and marks the caller's span.
    # Streaming: it runs inside invoke_agent's pull context, which is already marked.
    (user,) = world.named("user-request")
    user_halts = [e for e in user.events if e.name == "guardrails.halt"]
    assert len(user_halts) == (0 if stream else 1)
    assert CALLS == []


async def test_audit_mode(world: World, policies: Any) -> None:
    client = ScriptedChatClient([[call("send_money", "call-x", recipient="XX00", amount=5)]])
    await agent_with(client, [send_money], world.guard(policies, mode="audit")).run("pay")
    (guard_span,) = world.guards()
    a = attrs(guard_span)
    assert a["guardrails.decision.effect"] == "allow"
    assert a["guardrails.audit"] is True
    assert a["guardrails.rules"] == ("payments/unknown-recipient",)
    (event,) = guard_span.events
    assert (event.attributes or {})["guardrails.audit"] is True
    assert [c.name for c in world.children(guard_span)] == ["execute_tool send_money"]
    rec = assert_record_matches(world, guard_span)
    assert rec["audit"] is True and rec["rules"][0]["audit"] is True
    assert CALLS == [("send_money", {"recipient": "XX00", "amount": 5.0})]


@STREAMING
async def test_parallel_batch(world: World, policies: Any, stream: bool) -> None:
    client = ScriptedChatClient([[
        call("send_money", "call-1", recipient="UK12", amount=1),
        call("send_money", "call-2", recipient="XX00", amount=2),
        call("send_money", "call-3", recipient="DE99", amount=3),
    ]])
    await run(agent_with(client, [send_money], world.guard(policies)), "pay", stream=stream)
    guards = {attrs(s)["gen_ai.tool.call.id"]: s for s in world.guards()}
    assert sorted(guards) == ["call-1", "call-2", "call-3"]
    assert len({world.parent(s).context.span_id for s in guards.values()}) == 1
    effects = {k: attrs(s)["guardrails.decision.effect"] for k, s in guards.items()}
    assert effects == {"call-1": "allow", "call-2": "deny", "call-3": "allow"}
    for call_id, span in guards.items():
        kids = [c.name for c in world.children(span)]
        assert kids == ([] if call_id == "call-2" else ["execute_tool send_money"])
        assert_record_matches(world, span)
    counts = {p.attributes["guardrails.decision.effect"]: p.value
              for p in world.metric_points("guardrails.decisions")}
    assert counts == {"allow": 2, "deny": 1}
    (hist,) = world.metric_points("guardrails.evaluation.duration")[:1]
    assert sum(p.count for p in world.metric_points("guardrails.evaluation.duration")) == 3
    assert hist.sum >= 0


async def test_explicit_tracer_provider_still_parents_execute_tool(world: World,
                                                                   policies: Any) -> None:
    own = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(own))
    client = ScriptedChatClient([[call("send_money", "call-p", recipient="UK12", amount=1)]])
    await agent_with(client, [send_money], world.guard(policies, tracer_provider=tp)).run("pay")
    (guard_span,) = own.get_finished_spans()
    assert world.guards() == []  # not on the global provider
    (tool_span,) = world.named("execute_tool")
    assert tool_span.parent is not None
    assert tool_span.parent.span_id == guard_span.context.span_id
    assert_record_matches(world, guard_span)
    tp.shutdown()


LEAKY = """\
apiVersion: guardrails/v1
kind: ToolPolicy
metadata:
  name: leaky
spec:
  match:
    tools: ["send_money", "login"]
  secrets:
    arguments: [pin]
  rules:
    - name: quote-recipient
      when: 'has(args.recipient) && args.recipient.startsWith("LEAK")'
      action: deny
      message: denied
      messageExpression: '"will not pay " + args.recipient + " the sum " + string(args.amount)'
    - name: quote-pin
      when: 'has(args.user) && args.user == "admin-zq81"'
      action: deny
      message: denied
      messageExpression: '"admin-zq81 refused for pin " + string(args.pin)'
    - name: halt-quoting
      when: 'has(args.recipient) && args.recipient.startsWith("HALT")'
      action: halt
      message: halted
      messageExpression: '"halting on " + args.recipient'
    - name: note-everything
      when: 'true'
      action: warn
      message: noted
      messageExpression: '"saw " + string(args)'
"""


@STREAMING
async def test_no_argument_or_secret_value_in_any_telemetry(
        world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stream: bool) -> None:
    secret_key = "sk-injected-9d8c7b6a5f"
    monkeypatch.setenv("GR_AF_TEST_API_KEY", secret_key)
    (tmp_path / "leaky.yaml").write_text(LEAKY)
    policies = guardrails.load([tmp_path / "leaky.yaml",
                                Path(__file__).parent / "data" / "af" / "secrets.yaml"])
    recipient, amount, pin = "LEAK-GB29NWBK6016", 31337.25, 987654321
    endpoint = "https://api.internal/boom"
    client = ScriptedChatClient([[
        call("send_money", "call-1", recipient=recipient, amount=amount),
        call("login", "call-2", user="admin-zq81", pin=pin),
        call("call_api", "call-3", endpoint=endpoint),
    ]])
    agent = agent_with(client, [send_money, login, call_api], world.guard(policies))
    await run(agent, "go", stream=stream)
    assert len(world.guards()) == 3
    haystack = world.everything()
    for value in (recipient, str(amount), str(pin), "admin-zq81", secret_key, endpoint):
        assert value not in haystack, value
    (rec,) = [r for r in world.sink.records if r["tool"] == "send_money"]
    assert rec["rules"][0]["message"].startswith("will not pay [REDACTED]")  # messages kept
    # the model still got its deny messages (that path is the integration's, not telemetry's)
    assert any("will not pay" in result_text(r) for r in client.tool_results())

    # a halt whose message quotes the argument: guard span, agent span, caller's span, record
    world.exporter.clear()
    halting = "HALT-DE44500105175407324931"
    client = ScriptedChatClient([[call("send_money", "call-9", recipient=halting, amount=1)]])
    agent = agent_with(client, [send_money], world.guard(policies))
    # The caller's span must not record the exception: PolicyViolation's text is the rule
    # message (see test_policy_violation_text_reaches_a_callers_span below).
    with pytest.raises(PolicyViolation), trace.get_tracer("test").start_as_current_span(
            "user", record_exception=False, set_status_on_exception=False):
        await run(agent, "go", stream=stream)
    (halted,) = world.guards()
    assert attrs(halted)["guardrails.decision.effect"] == "halt"
    assert halting not in world.everything()


async def test_policy_violation_text_never_reaches_a_callers_span(world: World, tmp_path: Path) -> None:
    (tmp_path / "leaky.yaml").write_text(LEAKY)
    policies = guardrails.load(tmp_path / "leaky.yaml")
    halting = "HALT-DE44500105175407324931"
    client = ScriptedChatClient([[call("send_money", "call-9", recipient=halting, amount=1)]])
    agent = agent_with(client, [send_money], world.guard(policies))
    with pytest.raises(PolicyViolation), trace.get_tracer("test").start_as_current_span("user"):
        await agent.run("go")
    assert halting not in world.everything()
