"""The guarded call's fast paths (issue 14) decide exactly as the general paths do.

- ``same_json`` tells plain JSON apart by exact type first: compared with the general
  comparison it replaced on generated values, hostile ones included (subclasses, tuples,
  read-only views, NaN, ``True``/``1``/``1.0``, ``0.0``/``-0.0``).
- The framework's own argument checks run the guard's fast tokens once a guard is built
  (``_private.install_fast_tokens``): a middleware after the guard that changes the
  arguments in any of the ways the tokens must tell apart still makes the framework refuse
  the call, in the real loop.
- Telemetry starts no span when none can record; a halt still marks the span around the
  call (a host's own tracer), and the decision log still gets every record.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import pytest
from agent_framework import FunctionInvocationContext, FunctionMiddleware, MiddlewareFailure, tool
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import guardrails
from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework._arguments import same_json
from guardrails.agent_framework.scripted import call, text
from guardrails.telemetry import EVENT_HALT, GuardTelemetry
from tests.af_support import agent_with, guarded, load_fixture, load_text
from tests.af_tools import CALLS, send_money


def _general_same_json(left: Any, right: Any) -> bool:
    """The comparison ``same_json`` had before its fast path (the reference)."""
    if isinstance(left, Mapping):
        return (isinstance(right, Mapping) and len(left) == len(right)
                and all(k in right and _general_same_json(v, right[k]) for k, v in left.items()))
    if isinstance(left, list | tuple):
        return (isinstance(right, list | tuple) and len(left) == len(right)
                and all(_general_same_json(x, y) for x, y in zip(left, right, strict=True)))
    return type(left) is type(right) and bool(left == right)


class _Str(str):
    pass


class _Dict(dict):  # type: ignore[type-arg]
    pass


class _List(list):  # type: ignore[type-arg]
    pass


_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-2, 2), st.sampled_from([0.0, -0.0, 1.0, math.nan,
                                                                    math.inf]),
    st.text(max_size=3), st.builds(_Str, st.text(max_size=2)), st.binary(max_size=2),
)
_json = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=3).map(tuple),
        st.lists(inner, max_size=3).map(_List),
        st.dictionaries(st.text(max_size=2), inner, max_size=3),
        st.dictionaries(st.text(max_size=2), inner, max_size=3).map(_Dict),
        st.dictionaries(st.text(max_size=2), inner, max_size=3).map(MappingProxyType),
        st.dictionaries(st.one_of(st.integers(0, 2), st.text(max_size=1)), inner, max_size=2),
    ),
    max_leaves=12,
)


@settings(max_examples=600, deadline=None)
@given(_json, _json)
def test_same_json_equals_the_general_comparison(left: Any, right: Any) -> None:
    assert same_json(left, right) is _general_same_json(left, right)
    assert same_json(left, left) is _general_same_json(left, left)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=3), _json, max_size=4), st.data())
def test_same_json_of_near_copies_equals_the_general_comparison(
    value: dict[str, Any], data: st.DataObject,
) -> None:
    """Pairs that differ in one leaf, or only in the container types: the cases that decide
    whether validation changed what rules read."""
    other = dict(value)
    if other:
        key = data.draw(st.sampled_from(sorted(other)))
        other[key] = data.draw(_scalars)
    for right in (other, MappingProxyType(other), _Dict(other)):
        assert same_json(value, right) is _general_same_json(value, right)


def test_same_json_keeps_the_distinctions_json_makes() -> None:
    assert not same_json({"a": 1}, {"a": True})
    assert not same_json({"a": 1}, {"a": 1.0})
    assert not same_json({"a": "x"}, {"a": _Str("x")})
    assert not same_json({"a": math.nan}, {"a": math.nan})
    assert same_json({"a": [1, "b"]}, MappingProxyType({"a": (1, "b")}))
    assert not same_json({"a": "b"}, {"a": "b", "c": "d"})
    assert not same_json({"a": "b"}, {"c": "b"})


# --------------------------------------------------------------------------- the framework's check

@tool
def store(value: Any) -> str:
    """Store a value as it comes (no coercion: the tool takes any JSON)."""
    CALLS.append(("store", {"value": value}))
    return "stored"


_CHANGES = [
    (1.0, 1), (1, True), (0.0, -0.0), ("x", _Str("x")), ([1, 2], (1, 2)), ([1, 2], [2, 1]),
    ({"a": 1}, {"a": 1.0}), ({"a": [1]}, {"a": [1], "b": None}), ("abc", "abd"),
    (1.5, math.nan), ({"a": "b"}, {"a": "B"}),
]


@pytest.mark.parametrize(("sent", "changed"), _CHANGES, ids=[repr(c) for c in _CHANGES])
async def test_a_later_change_fails_closed_with_the_fast_tokens(
    tmp_path: Any, sent: Any, changed: Any,
) -> None:
    from agent_framework import _tools

    from guardrails.agent_framework import _private

    class Tamper(FunctionMiddleware):
        async def process(self, context: FunctionInvocationContext, call_next: Any) -> None:
            context.arguments = {**dict(context.arguments), "value": changed}
            await call_next()

    policies = load_text(tmp_path, """
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: store}
spec:
  match: {tools: [store]}
  rules:
    - {name: never, when: 'false', action: deny}
""")
    CALLS.clear()
    middleware = guard(policies)
    assert _tools._argument_authority_token is not _private.FRAMEWORK_AUTHORITY_TOKEN
    client = ScriptedChatClient([[call("store", value=sent)], [text("done")]])
    with pytest.raises(MiddlewareFailure, match="changed after security middleware"):
        await agent_with(client, [store], [*middleware, Tamper()]).run("store it")
    assert CALLS == []
    # Unchanged, the same call runs.
    client = ScriptedChatClient([[call("store", value=sent)], [text("done")]])
    await agent_with(client, [store], middleware).run("store it")
    assert len(CALLS) == 1
    CALLS.clear()


async def test_an_in_place_change_of_a_nested_value_fails_closed() -> None:
    CALLS.clear()

    class Tamper(FunctionMiddleware):
        async def process(self, context: FunctionInvocationContext, call_next: Any) -> None:
            context.arguments["value"]["to"].append("attacker")  # type: ignore[index]
            await call_next()

    policies = load_fixture("payments.yaml")
    client = ScriptedChatClient([[call("store", value={"to": ["bob"]})], [text("done")]])
    with pytest.raises(MiddlewareFailure, match="changed after security middleware"):
        await agent_with(client, [store], [*guard(policies), Tamper()]).run("store it")
    assert CALLS == []


# --------------------------------------------------------------------------- quiet telemetry

async def test_a_halt_marks_the_hosts_span_when_the_guard_starts_none() -> None:
    """No span of the guard's can record (a no-op tracer): none is started, yet a halt
    still marks the span around the call, here the host's own SDK span."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry = GuardTelemetry(tracer_provider=trace.NoOpTracerProvider())
    assert not telemetry._can_record()
    CALLS.clear()
    client = ScriptedChatClient([[call("send_money", recipient="UK12", amount=500000)]])
    agent = agent_with(client, [send_money], guarded(load_fixture("payments.yaml"), telemetry))
    with provider.get_tracer("host").start_as_current_span("host request"), \
            pytest.raises(guardrails.PolicyViolation):
        await agent.run("pay")
    assert CALLS == []
    [host] = [s for s in exporter.get_finished_spans() if s.name == "host request"]
    assert [e.name for e in host.events] == [EVENT_HALT]
    assert not [s for s in exporter.get_finished_spans() if s.name.startswith("guardrails.")]


async def test_the_decision_log_gets_every_record_without_spans(
    caplog: pytest.LogCaptureFixture,
) -> None:
    telemetry = GuardTelemetry(tracer_provider=trace.NoOpTracerProvider())
    CALLS.clear()
    client = ScriptedChatClient([[call("send_money", recipient="UK12", amount=5),
                                  call("send_money", recipient="XX00", amount=5)],
                                 [text("done")]])
    agent = agent_with(client, [send_money], guarded(load_fixture("payments.yaml"), telemetry))
    with caplog.at_level(logging.INFO, logger="guardrails.decisions"):
        await agent.run("pay")
    records = [r.guardrails_decision for r in caplog.records  # type: ignore[attr-defined]
               if r.name == "guardrails.decisions"]
    assert sorted(r["effect"] for r in records) == ["allow", "deny"]
    assert all(r["call_id"] and r["trace_id"] is None for r in records)
    CALLS.clear()


# --------------------------------------------------------------------------- history and results

def _general_redacted(arguments: Mapping[str, Any], secret_names: frozenset[str], scrub: Any,
                      limit: int) -> tuple[dict[str, Any], bool]:
    """``redacted`` before its fast path for text values (the reference)."""
    from guardrails.agent_framework._history import _kept, _Left
    from guardrails.engine.decision import REDACTED
    from guardrails.engine.evaluate import NODE_COST

    left = _Left(limit)
    out: dict[str, Any] = {}
    for k, v in arguments.items():
        left.bytes -= NODE_COST + len(str(k))
        if left.bytes < 0:
            break
        out[scrub(str(k))] = scrub(REDACTED) if k in secret_names else _kept(v, scrub, left)
    return out, left.bytes < 0


def _general_scrub_value(value: Any, scrub: Any, depth: int = 0) -> Any:
    """``scrub_value`` before its exact-type checks (the reference)."""
    from agent_framework import Content

    from guardrails.agent_framework._secrets import MAX_CONTENT_DEPTH, _safe_text, scrub_content
    from guardrails.engine.decision import REDACTED

    if isinstance(value, str):
        if type(value) is not str:
            return scrub(str.__str__(value))
        out = scrub(value)
        return value if out == value else out
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        text = str(value)
        return REDACTED if scrub(text) != text else value
    if depth >= MAX_CONTENT_DEPTH:
        return REDACTED
    if isinstance(value, Content):
        return scrub_content(value, scrub, depth + 1)
    if isinstance(value, Mapping):
        pairs = [(_general_scrub_value(k, scrub, depth + 1),
                  _general_scrub_value(v, scrub, depth + 1), k, v) for k, v in value.items()]
        if type(value) is dict and all(k2 is k and v2 is v for k2, v2, k, v in pairs):
            return value
        return {k2: v2 for k2, v2, _, _ in pairs}
    if isinstance(value, list | tuple):
        items = [_general_scrub_value(v, scrub, depth + 1) for v in value]
        if type(value) in (list, tuple) and all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, bytes):
        text = value.decode("utf-8", "replace")
        return value if scrub(text) == text else REDACTED
    return scrub(_safe_text(value))


_SECRET = "s3cr3t-value"
_texts = st.one_of(st.text(max_size=6), st.just(_SECRET), st.just(f"x{_SECRET}y"),
                   st.builds(_Str, st.just(_SECRET)), st.just(""))
_hostile = st.recursive(
    st.one_of(_texts, st.none(), st.booleans(), st.integers(-3, 3), st.just(math.nan),
              st.binary(max_size=3)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.lists(inner, max_size=2).map(tuple),
                            st.dictionaries(_texts, inner, max_size=3),
                            st.dictionaries(_texts, inner, max_size=2).map(_Dict),
                            st.just({})),
    max_leaves=10,
)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(_texts, _hostile, max_size=5),
       st.frozensets(st.sampled_from(["", _SECRET, "a"]), max_size=2),
       st.sampled_from([0, 8, 40, 120, 4096]))
def test_redacted_equals_the_general_walk(arguments: dict[str, Any], names: frozenset[str],
                                          limit: int) -> None:
    from guardrails.agent_framework._history import redacted
    from guardrails.engine.scrub import Scrubber

    scrub = Scrubber([_SECRET])
    general = _general_redacted(arguments, names, scrub, limit)
    assert redacted(arguments, names, scrub, limit) == general
    kept: dict[str, str] = {}  # the guard's names of this scrubber, cold then warm
    assert redacted(arguments, names, scrub, limit, kept) == general
    assert redacted(arguments, names, scrub, limit, kept) == general
    assert all(_SECRET not in name for name in kept.values())
    out, _ = redacted(arguments, names, scrub, limit)
    assert _SECRET not in repr(out)


async def test_the_kept_names_follow_the_guards_memory(tmp_path: Any) -> None:
    """Names are kept for the guard's memory of injected values only: once it injects a
    value, a name holding that value is scrubbed in later history entries."""
    import os

    from agent_framework import AgentSession

    from tests.af_tools import call_api

    os.environ["GUARDRAILS_TEST_FASTPATH_KEY"] = "k3y-0f-the-fastpath-test"
    policies = load_text(tmp_path, """
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: api}
spec:
  match: {tools: [call_api]}
  secrets:
    inject:
      api_key: {env: GUARDRAILS_TEST_FASTPATH_KEY}
""")
    session = AgentSession()
    middleware = guard(policies)
    name = "k3y-0f-the-fastpath-test"
    for _ in range(2):
        client = ScriptedChatClient([[call("store", **{name: 1}), call("call_api",
                                                                     endpoint="/a")],
                                     [text("done")]])
        await agent_with(client, [store, call_api], middleware).run("go", session=session)
    history = session.state["guardrails"]["history"]
    stores = [h for h in history if h["tool"] == "store"]
    assert len(stores) == 2
    assert name in stores[0]["args"] or name not in repr(stores[0]["args"])
    assert name not in repr(stores[1]["args"])  # injected before the second call
    CALLS.clear()


@settings(max_examples=400, deadline=None)
@given(_hostile, st.integers(0, 17))
def test_scrub_value_equals_the_general_walk(value: Any, depth: int) -> None:
    from guardrails.agent_framework._secrets import scrub_value
    from guardrails.engine.scrub import Scrubber

    scrub = Scrubber([_SECRET])
    fast, general = scrub_value(value, scrub, depth), _general_scrub_value(value, scrub, depth)
    assert repr(fast) == repr(general)
    assert (fast is value) is (general is value)
    assert _SECRET not in repr(fast)


# --------------------------------------------------------------------------- an empty history

@pytest.mark.parametrize("tool", ["send_money", "send_email", "fetch_url", "run_command"])
def test_an_empty_history_decides_as_no_history(tool: str) -> None:
    """The guard passes None for an empty history (the engine then skips reading it)."""
    from pathlib import Path

    library = guardrails.load(Path(__file__).resolve().parent.parent / "policies")
    args = {"send_money": {"recipient": "GB12ABCD", "amount": "1,500.00"},
            "send_email": {"to": ["a@example.com"], "subject": "hi", "body": "x"},
            "fetch_url": {"url": "https://example.com/a"},
            "run_command": {"command": "git log | head"}}[tool]
    empty, none = (library.evaluate(tool, args, history=h, request="pay GB12ABCD")
                   for h in ((), None))
    assert {**empty.to_dict(), "id": None} == {**none.to_dict(), "id": None}


# --------------------------------------------------------------------------- the JSON view

def _general_json_view(arguments: Mapping[str, Any]) -> Any:
    """``json_view`` through pydantic's conversion only (the reference), or the type of
    what it raised."""
    from pydantic_core import to_jsonable_python

    from guardrails.agent_framework._arguments import _mapping, json_numbers

    try:
        view = to_jsonable_python(dict(arguments), fallback=_mapping)
        if not json_numbers(view):
            raise ValueError("NaN or Infinity")
        return view
    except Exception as exc:
        return type(exc)


import datetime as _dt  # noqa: E402
import enum as _enum  # noqa: E402


class _Colour(_enum.Enum):
    RED = "red"


def _deep(n: int) -> Any:
    value: Any = "leaf"
    for _ in range(n):
        value = {"a": [value]}
    return value


_views = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.integers(min_value=2**70),
              st.floats(allow_nan=True, allow_infinity=True), st.just(-0.0),
              st.text(max_size=3), st.builds(_Str, st.text(max_size=2)),
              st.just(_Colour.RED), st.just(_dt.date(2026, 12, 1)), st.just(b"ab")),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.lists(inner, max_size=2).map(tuple),
        st.dictionaries(st.text(max_size=2), inner, max_size=3),
        st.dictionaries(st.integers(0, 3), inner, max_size=2),
        st.dictionaries(st.text(max_size=2), inner, max_size=2).map(_Dict),
        st.frozensets(st.integers(0, 3), max_size=2),
        st.sampled_from([_deep(20), _deep(40)]),
    ),
    max_leaves=14,
)


@settings(max_examples=600, deadline=None)
@given(st.dictionaries(st.text(max_size=4), _views, max_size=5))
def test_json_view_equals_pydantics_conversion(arguments: dict[str, Any]) -> None:
    from guardrails.agent_framework._arguments import json_view

    general = _general_json_view(arguments)
    try:
        fast: Any = json_view(arguments)
    except Exception as exc:
        fast = type(exc)
    if isinstance(general, type):
        assert fast is general
    else:
        assert same_json(fast, general) and repr(fast) == repr(general)
        assert fast is not arguments  # a copy the guard owns


# --------------------------------------------------------------------------- the run boundary

class _Named:
    def __init__(self, name: Any, ident: Any) -> None:
        self.name, self.id = name, ident


@pytest.mark.parametrize("name", [None, "", "a", "b", _Str("a"), 5])
@pytest.mark.parametrize("ident", [None, "", "a", "b", _Str("b"), 7])
def test_agent_names_are_the_name_then_a_different_id(name: Any, ident: Any) -> None:
    from guardrails.agent_framework._boundary import agent_names

    general = tuple(dict.fromkeys(n for n in (name, ident) if isinstance(n, str) and n))
    assert agent_names(_Named(name, ident)) == general
