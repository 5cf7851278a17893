"""The quiet path: a call with nothing secret (no secret argument, no value the guard ever
injected, no redact pattern in the set) is not scrubbed where scrubbing would change nothing.

Each shortcut is compared with the general path: ``unchanged`` with a scrubber that knows
nothing, the history entry and the tool result walked with either (hypothesis, hostile
values included), and whole runs of the real loop with the quiet path on and forced off.
The quiet path must end the moment something becomes secret: a value injected, a reload
that brings redact patterns, a call with a secret argument.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_framework import AgentSession, Content, tool
from hypothesis import given, settings
from hypothesis import strategies as st

from guardrails.agent_framework import GuardFunctionMiddleware, ScriptedChatClient, _function, guard
from guardrails.agent_framework._history import plain_entry, redacted
from guardrails.agent_framework._secrets import plain_result, scrub_result, unchanged
from guardrails.agent_framework.scripted import call, result_text
from guardrails.engine.scrub import Scrubber
from tests.af_support import STREAMING, agent_with, load_text, run

INERT = Scrubber((), None)
"""A scrubber that knows no value and no pattern: what the quiet path stands in for."""


class Sub(str):
    """A ``str`` subclass that prints other than its data."""

    def __str__(self) -> str:
        return "printed-" + str.__str__(self)

    def __repr__(self) -> str:
        return "repr-" + str.__str__(self)


class Odd:
    def __str__(self) -> str:
        return "odd object"


def _shape(value: Any) -> Any:
    """``value`` with every type spelled out (``==`` says ``True == 1 == 1.0``)."""
    if isinstance(value, dict):
        return ("dict", type(value).__name__, [(_shape(k), _shape(v)) for k, v in value.items()])
    if isinstance(value, list | tuple):
        return (type(value).__name__, [_shape(v) for v in value])
    if isinstance(value, Content):
        return ("Content", type(value).__name__,
                sorted((k, _shape(v)) for k, v in vars(value).items()))
    if isinstance(value, float) and math.isnan(value):
        return ("float", "nan")
    if isinstance(value, str):
        return (type(value).__name__, str.__str__(value))
    return (type(value).__name__, repr(value))


texts = st.one_of(st.text(max_size=20), st.sampled_from(["", "[REDACTED]", "NaN", "a\x00b"]))
leaves = st.one_of(
    texts, texts.map(Sub), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(), st.none(), st.binary(max_size=10), st.just(Odd()))
values = st.recursive(
    leaves,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.lists(inner, max_size=4).map(tuple),
                            st.dictionaries(st.one_of(texts, texts.map(Sub), st.integers()),
                                            inner, max_size=4)),
    max_leaves=20)
arguments = st.dictionaries(st.one_of(texts, texts.map(Sub)), values, max_size=8)


@given(st.one_of(texts, texts.map(Sub)))
def test_unchanged_is_what_a_scrubber_knowing_nothing_gives(text: str) -> None:
    assert _shape(unchanged(text)) == _shape(INERT(text))
    assert type(unchanged(text)) is str


@settings(max_examples=300)
@given(arguments, st.frozensets(texts, max_size=3), st.integers(min_value=0, max_value=400))
def test_the_quiet_history_entry_is_the_scrubbed_one(args: dict[str, Any],
                                                     secret: frozenset[str],
                                                     limit: int) -> None:
    # Secret names included: the walk is the same function with another scrub.
    quiet = redacted(args, secret, unchanged, limit)
    general = redacted(args, secret, INERT, limit, names={})
    assert _shape(quiet) == _shape(general)


scalars = st.one_of(texts, st.integers(), st.integers(min_value=2**63), st.booleans(),
                    st.none(), st.floats(allow_nan=True, allow_infinity=True))
flat = st.dictionaries(texts, scalars, max_size=12)


@settings(max_examples=400)
@given(st.one_of(flat, arguments, flat.map(lambda d: {**d, 1: "int key"})),
       st.integers(min_value=0, max_value=300))
def test_the_plain_entry_is_the_general_one(args: dict[Any, Any], limit: int) -> None:
    plain = plain_entry(args, limit)
    if plain is None:  # not for the one-loop path: the caller takes ``redacted``
        assert not (all(type(k) is str for k in args) and all(
            v is None or type(v) in (str, int, bool) or (type(v) is float and v == v)
            for v in args.values()))
        return
    assert _shape(plain) == _shape(redacted(args, frozenset(), INERT, limit, names={}))


@given(flat, st.integers(min_value=0, max_value=300))
def test_the_plain_entry_takes_flat_plain_arguments(args: dict[str, Any], limit: int) -> None:
    if not any(type(v) is float and v != v for v in args.values()):
        assert plain_entry(args, limit) is not None


def _contents(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        texts.map(Content.from_text),
        st.builds(lambda t, r: Content("text", text=t, raw_representation=r), texts, values),
        st.builds(lambda c, r: Content.from_function_result(call_id=c, result=r), texts, inner),
        st.builds(lambda p: Content("text", text="x", additional_properties=p),
                  st.dictionaries(texts, inner, max_size=3)),
        texts.map(lambda t: _SubContent("text", text=t)),
    )


@given(st.lists(texts, max_size=3))
def test_a_tools_text_results_take_the_plain_path(items: list[str]) -> None:
    from agent_framework import FunctionTool
    for result in (FunctionTool.parse_result(" ".join(items)),
                   [Content.from_text(t) for t in items]):
        plain = plain_result(result)
        assert plain is not None and _shape(plain) == _shape(scrub_result(result, INERT))


class _SubContent(Content):
    def to_dict(self, **kwargs: Any) -> dict[str, Any]:
        return {"type": "text", "text": "forged"}


results = st.recursive(
    st.one_of(values, _contents(values)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), _contents(inner)),
    max_leaves=12)


@settings(max_examples=300)
@given(results)
def test_the_quiet_result_is_the_scrubbed_one(result: Any) -> None:
    quiet = scrub_result(result, unchanged)
    general = scrub_result(result, INERT)
    assert _shape(quiet) == _shape(general)
    plain = plain_result(result)
    if plain is not None:
        assert _shape(plain) == _shape(general)
        assert type(plain) is str or plain is not result  # a new list, as scrub_result makes
    # Plain types leave, as ever: a subclass's own printing never reaches the model.
    for item in quiet if isinstance(quiet, list) else [quiet]:
        assert type(item) in (str, Content) or item is None


# -- the real loop ------------------------------------------------------------------------

SECRET = "tok-QUIET-SECRET-8841"
STASH: list[str] = []

POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: api}
spec:
  match: {tools: ["call_api"]}
  secrets:
    inject:
      api_key: {env: GR_QUIET_KEY}
  rules:
    - {name: internal, when: '!args.endpoint.startsWith("https://")', action: deny}
---
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: notes}
spec:
  match: {tools: ["read_stash", "echo"]}
  rules:
    - {name: long, when: 'size(args.text) > 1000', action: deny}
"""

PATTERNS = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: notes}
spec:
  match: {tools: ["echo"]}
  rules:
    - {name: long, when: 'size(args.text) > 1000', action: deny}
  redact:
    - {name: card, regex: '\\b(?:\\d[ -]?){13,16}\\b', replacement: '[REDACTED:card]'}
"""


@tool(name="call_api")
def call_api(endpoint: str, api_key: str) -> str:
    """Calls an API; keeps the key where another tool can read it."""
    STASH.append(api_key)
    return f"called {endpoint}"


@tool(name="read_stash")
def read_stash(text: str) -> str:
    """Returns what call_api kept, with the note."""
    return f"{text}: {' '.join(STASH)}"


@tool(name="echo")
def echo(text: str) -> Any:
    """Returns the note as a str subclass that prints something else."""
    return Sub(text)


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("GR_QUIET_KEY", SECRET)
    STASH.clear()
    yield
    STASH.clear()


def _function_guard(middleware: list[Any]) -> GuardFunctionMiddleware:
    [found] = [m for m in middleware if isinstance(m, GuardFunctionMiddleware)]
    return found


@STREAMING
async def test_the_quiet_path_ends_when_a_value_is_injected(tmp_path: Path, stream: bool) -> None:
    policies = load_text(tmp_path, POLICY)
    middleware = guard(policies)
    fn = _function_guard(middleware)
    assert fn._quiet_memory is not None  # nothing secret yet: the quiet path is on
    client = ScriptedChatClient([
        [call("read_stash", text="before")],
        [call("call_api", endpoint="https://api.example")],
        [call("read_stash", f"id-{SECRET}", text="after")],
        [call("read_stash", text=SECRET)],
    ])
    session = AgentSession()
    await run(agent_with(client, [call_api, read_stash], middleware), "go", stream=stream,
              session=session)
    assert STASH == [SECRET]
    assert fn._quiet_memory is None
    results = [result_text(r) for r in client.tool_results()]
    assert SECRET not in repr(results)  # (the model's own call id is its own choice)
    assert results[0] == "before: "
    assert "could not evaluate" in results[2]  # its call id carries the injected value
    assert results[3] == "[REDACTED]: [REDACTED]"
    history = session.state["guardrails"]["history"]
    assert SECRET not in repr(history)
    assert history[-1]["args"] == {"text": "[REDACTED]"}


@STREAMING
async def test_a_reload_bringing_patterns_ends_the_quiet_path(tmp_path: Path,
                                                              stream: bool) -> None:
    quiet_set = load_text(tmp_path, POLICY.replace('"read_stash", "echo"', '"echo"'))
    loud_set = load_text(tmp_path, PATTERNS, "patterns.yaml")

    class Source:
        def __init__(self) -> None:
            self.current = quiet_set

    source = Source()
    middleware = guard(source)
    card = "4111 1111 1111 1111"

    def turn(messages: Any) -> list[Content]:
        done = sum(c.type == "function_result" for m in messages for c in m.contents)
        if done == 1:
            source.current = loud_set  # reloaded between two calls of one run
        if done == 2:
            return [Content.from_text("done")]
        return [call("echo", text=f"card {card}")]

    client = ScriptedChatClient(default=turn)
    await run(agent_with(client, [echo], middleware), "go", stream=stream)
    first, second = [result_text(r) for r in client.tool_results()]
    assert first == f"card {card}"  # the str subclass's data, not its printing
    assert second == "card [REDACTED:card]"


@STREAMING
async def test_quiet_and_general_runs_agree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            stream: bool) -> None:
    """The same calls, the quiet path on and forced off (a memory with a no-op pattern
    step scrubs every text through the scrubber): identical results and history."""
    policies = load_text(tmp_path, POLICY.replace("call_api", "no_such_tool"))
    outcomes = []
    for quiet in (True, False):
        if not quiet:
            monkeypatch.setattr(_function, "_patterns", lambda _set: lambda text: text)
        middleware = guard(policies)
        assert (_function_guard(middleware)._quiet_memory is not None) is quiet
        client = ScriptedChatClient([
            [call("echo", text="plain"), call("read_stash", text="x" * 3000)],
            [call("echo", "c-1", text="ünïcode \\ \"quoted\"")],
            [call("read_stash", text="1,000.00")],
        ])
        session = AgentSession()
        await run(agent_with(client, [echo, read_stash], middleware), "go", stream=stream,
                  session=session)
        history = [{k: v for k, v in e.items() if k != "at"}
                   for e in session.state["guardrails"]["history"]]
        outcomes.append(([_shape(r.result) for r in client.tool_results()], history))
    assert outcomes[0] == outcomes[1]
    assert len(outcomes[0][1]) == 4


async def test_a_secret_argument_is_never_quiet(tmp_path: Path) -> None:
    policies = load_text(tmp_path, """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: login}
spec:
  match: {tools: ["echo"]}
  secrets: {arguments: [text]}
  rules:
    - {name: never, when: 'false', action: deny}
""")
    client = ScriptedChatClient([[call("echo", "pin-55117733", text="pin-55117733")],
                                 [call("echo", text="pin-55117733")]])
    await run(agent_with(client, [echo], guard(policies)), "go")
    first, second = [result_text(r) for r in client.tool_results()]
    assert "could not evaluate" in first
    assert second == "[REDACTED]"


def test_a_guard_over_patterns_is_not_quiet(tmp_path: Path) -> None:
    fn = _function_guard(guard(load_text(tmp_path, PATTERNS)))
    assert fn._quiet_memory is None


# -- attacks on the quiet path in the real loop -----------------------------------------

SEEN: list[Any] = []


@tool(name="collect")
def collect(items: list[str], tag: str = "t") -> str:
    """Mutates the list it was given, after the guard recorded the call."""
    SEEN.append((list(items), tag))
    items.append("added-by-the-tool")
    return f"{len(items)} items"


@tool(name="explode")
def explode(text: str) -> str:
    """Raises with what call_api kept."""
    raise RuntimeError(f"failed with {' '.join(STASH)} for {text}")


ATTACKS = POLICY.replace('"read_stash", "echo"', '"read_stash", "echo", "collect", "explode"')


@STREAMING
async def test_a_tool_mutating_its_arguments_does_not_change_what_was_recorded(
        tmp_path: Path, stream: bool) -> None:
    SEEN.clear()
    policies = load_text(tmp_path, ATTACKS.replace("size(args.text) > 1000", "false"))
    client = ScriptedChatClient([[call("collect", items=["a", "b"])],
                                 [call("collect", items=["c"], tag="x")]])
    session = AgentSession()
    await run(agent_with(client, [collect], guard(policies)), "go", stream=stream,
              session=session)
    assert SEEN == [(["a", "b"], "t"), (["c"], "x")]  # the default is what the rules read
    history = session.state["guardrails"]["history"]
    assert [e["args"] for e in history] == [{"items": ["a", "b"], "tag": "t"},
                                            {"items": ["c"], "tag": "x"}]


@STREAMING
async def test_exceptions_and_spans_after_the_quiet_path_ended_carry_no_secret(
        tmp_path: Path, stream: bool) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    policies = load_text(tmp_path, ATTACKS)
    middleware = guard(policies, tracer_provider=provider)
    client = ScriptedChatClient([
        [call("explode", text="quiet")],  # before anything is secret
        [call("call_api", endpoint="https://api.example")],
        [call("explode", text="loud")],
        [call("echo", f"c-{SECRET}", text="id")],
    ])
    await run(agent_with(client, [call_api, explode, echo], middleware), "go", stream=stream)
    results = [result_text(r) for r in client.tool_results()]
    assert SECRET not in repr(results)
    assert "could not evaluate" in results[3]
    spans = exporter.get_finished_spans()
    assert [s for s in spans if s.name.startswith("guardrails.guard")]
    assert SECRET not in repr([(s.name, dict(s.attributes or {}), s.events) for s in spans])
