"""Red team, round 4: what the model's output can do to the run itself (promise 1), in the
framework's real loop, streaming and not.

A chat client may hand the loop arguments it parsed itself (a mapping, not text). The
guard's chat middleware read only text for depth, so a mapping nested 1,000 levels deep (or
one containing itself) reached the framework's argument token, which recurses once a level,
and ``RecursionError`` ended the run before any function middleware ran.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from agent_framework import Content, tool

from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework.scripted import call, result_text, text
from tests.af_support import STREAMING, agent_with, load_text, run

RAN: list[Any] = []

POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: open}
spec:
  match: {tools: ["take_map", "take_any", "note"]}
  rules:
    - {name: never, when: 'false', action: deny}
"""


@tool(name="take_map")
def take_map(data: dict[str, Any]) -> str:
    """Runs with a mapping."""
    RAN.append("take_map")
    return "ran"


@tool(name="take_any")
def take_any(data: Any) -> str:
    """Runs with whatever it is given."""
    RAN.append("take_any")
    return "ran"


@tool(name="note")
def note(text: str) -> str:
    """A well-formed neighbour."""
    RAN.append(("note", text))
    return f"noted {text}"


@pytest.fixture(autouse=True)
def _clear() -> Iterator[None]:
    RAN.clear()
    yield
    RAN.clear()


def _deep_map(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = {"a": value}
    return value


def _deep_list(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


def _cycle() -> Any:
    loop: dict[str, Any] = {}
    loop["a"] = {"b": loop}
    return loop


class _Unreadable(Mapping[str, Any]):
    """A mapping a chat client built whose values cannot be read."""

    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("no")

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("no")

    def __len__(self) -> int:
        return 1


_DEEP = "The arguments could not be read: nested deeper than"
_NOT_JSON = "The arguments could not be read: not a JSON object."

PARSED = {
    "a map 1,000 levels deep": ("take_map", {"data": _deep_map(1000)}, _DEEP),
    "a map 5,000 levels deep": ("take_any", {"data": _deep_map(5000)}, _DEEP),
    "a list 3,000 levels deep": ("take_any", {"data": _deep_list(3000)}, _DEEP),
    "a map inside itself": ("take_any", {"data": _cycle()}, _NOT_JSON),
    # (Held before: the engine's input walk refused it.)
    "a mapping that cannot be read": ("take_any", {"data": _Unreadable()}, "was denied"),
}


@STREAMING
@pytest.mark.parametrize("case", list(PARSED.values()), ids=list(PARSED))
async def test_parsed_arguments_the_loop_cannot_take_are_denied_and_the_run_goes_on(
        tmp_path: Path, stream: bool, case: tuple[str, Any, str]) -> None:
    name, arguments, why = case
    client = ScriptedChatClient([
        [Content.from_function_call(call_id="bad", name=name, arguments=arguments),
         call("note", "good", text="hello")], [text("final answer")]])
    agent = agent_with(client, [take_map, take_any, note], guard(load_text(tmp_path, POLICY)))
    response = await run(agent, "go", stream=stream, session=agent.create_session())
    results = {r.call_id: result_text(r) for r in client.tool_results()}
    assert why in results["bad"]
    assert results["good"] == "noted hello"
    assert RAN == [("note", "hello")] and response.text == "final answer"


@STREAMING
async def test_parsed_arguments_within_the_bound_are_decided_as_usual(
        tmp_path: Path, stream: bool) -> None:
    """Held: a mapping 20 levels deep, and one value shared twice at one level (not a
    cycle: each container is read once), run; one 40 deep is over the engine's bound."""
    shared = {"x": 1}
    client = ScriptedChatClient([
        [Content.from_function_call(call_id="ok", name="take_map",
                                    arguments={"data": _deep_map(20)}),
         Content.from_function_call(call_id="deep", name="take_map",
                                    arguments={"data": _deep_map(40)}),
         Content.from_function_call(call_id="flat", name="take_any",
                                    arguments={"data": [1, 2, {"y": shared}]})],
        [text("final answer")]])
    agent = agent_with(client, [take_map, take_any, note], guard(load_text(tmp_path, POLICY)))
    await run(agent, "go", stream=stream)
    results = {r.call_id: result_text(r) for r in client.tool_results()}
    assert results["ok"] == "ran" and results["flat"] == "ran"
    assert results["deep"].startswith("Error") and "could not be read" not in results["deep"]
    assert sorted(RAN) == ["take_any", "take_map"]


# -- approvals: one approval, one call, whatever happens to the session state ---------------

def _pay(recipient: str, amount: float, occurrence: str) -> Content:
    return Content.from_function_call(call_id=f"c-{occurrence}", name="send_money",
                                      id=occurrence,
                                      arguments={"recipient": recipient, "amount": amount})


@pytest.mark.parametrize("key", [None, b"k" * 32], ids=["no key", "approval key"])
async def test_a_session_state_restored_after_its_approval_replays_nothing(
        key: bytes | None) -> None:
    """The host keeps the session as JSON (a client-held blob, a retried request). The
    state saved while the call waited holds the record, MAC and all: restoring it after the
    approval paid the same payment once per restore."""
    import json

    from agent_framework import AgentSession, Message

    from tests.af_support import approve_all, load_fixture
    from tests.af_tools import CALLS, send_money

    CALLS.clear()
    client = ScriptedChatClient([[_pay("UK12", 5000, "X")]], default=[text("paid")])
    agent = agent_with(client, [send_money], guard(load_fixture(), approval_key=key))
    first = await agent.run("pay UK12 5000", session=(session := agent.create_session()))
    saved = json.dumps(session.to_dict())
    answer = json.dumps(approve_all(first).to_dict())
    for _ in range(3):
        restored = AgentSession.from_dict(json.loads(saved))
        await agent.run(Message.from_dict(json.loads(answer)), session=restored)
    assert CALLS == [("send_money", {"recipient": "UK12", "amount": 5000.0})]
    # Another guard of the same process (one per request, say) knows it too.
    other = agent_with(ScriptedChatClient(default=[text("paid")]), [send_money],
                       guard(load_fixture(), approval_key=key))
    await other.run(Message.from_dict(json.loads(answer)),
                    session=AgentSession.from_dict(json.loads(saved)))
    assert len(CALLS) == 1
    CALLS.clear()


async def test_an_approval_answered_for_another_tool_or_changed_arguments_runs_nothing() -> None:
    """Held: the answer's function call rewritten (another amount, another recipient, the
    same arguments reordered with an extra one) runs only what each request showed."""
    from agent_framework import Message

    from tests.af_support import load_fixture
    from tests.af_tools import CALLS, send_money

    CALLS.clear()
    client = ScriptedChatClient([[_pay("UK12", 5000, "A"), _pay("UK12", 7000, "B"),
                                  _pay("UK12", 8000, "C")]], default=[text("paid")])
    agent = agent_with(client, [send_money], guard(load_fixture()))
    first = await agent.run("pay UK12", session=(session := agent.create_session()))
    requests = {r.id: r for r in first.user_input_requests}
    answers = []
    for occurrence, arguments in [("A", {"recipient": "UK12", "amount": 50000}),
                                  ("B", {"recipient": "DE99", "amount": 7000}),
                                  ("C", {"amount": 8000, "recipient": "UK12", "memo": "x"})]:
        original = requests[occurrence].to_function_approval_response(approved=True)
        call_ = Content.from_function_call(call_id=f"c-{occurrence}", name="send_money",
                                           id=occurrence, arguments=arguments)
        answers.append(Content.from_function_approval_response(
            approved=True, id=original.id, function_call=call_,
            additional_properties=original.additional_properties))
    await agent.run(Message(role="user", contents=answers), session=session)
    assert sorted(CALLS, key=str) == [("send_money", {"recipient": "UK12", "amount": a})
                                      for a in (5000.0, 7000.0, 8000.0)]
    CALLS.clear()


# -- telemetry whose exporter fails ------------------------------------------------------------

async def test_a_failing_span_exporter_hides_no_halt_and_leaks_no_secret(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """Held: the guard's own tracer provider exports through an exporter that raises (with
    the span's attributes in its text) on every span: the halt still ends the run with
    ``PolicyViolation``, nothing after it runs, and no injected value reaches a log."""
    import logging
    from collections.abc import Sequence

    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter

    import guardrails
    from tests.af_support import load_fixture
    from tests.af_tools import CALLS, call_api, send_money

    class Failing(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> Any:
            raise RuntimeError(f"collector down: {[dict(s.attributes or {}) for s in spans]}")

    secret = "sk-export-" + "Q7w" * 12
    monkeypatch.setenv("GR_AF_TEST_API_KEY", secret)
    caplog.set_level(logging.DEBUG)
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(Failing()))
    CALLS.clear()
    client = ScriptedChatClient([
        [call("call_api", endpoint="https://api.internal/v1")],
        [Content.from_function_call(call_id="h", name="send_money",
                                    arguments={"recipient": "UK12", "amount": 500000})],
        [call("send_money", recipient="UK12", amount=5)],
    ], default=[text("done")])
    agent = agent_with(client, [call_api, send_money],
                       guard(load_fixture(), tracer_provider=provider))
    with pytest.raises(guardrails.PolicyViolation):
        await agent.run("call the api, then pay", session=agent.create_session())
    assert [name for name, _ in CALLS] == ["call_api"]
    texts = [r.getMessage() for r in caplog.records] + [caplog.text]
    assert "collector down" in caplog.text  # the exporter did fail, and the SDK logged it
    assert not [t for t in texts if secret in t or secret[:16] in t]
    CALLS.clear()


# -- a streaming client that sends each fragment in an update of its own ----------------------

class _Fragments(ScriptedChatClient):
    """Streams every content of a turn in its own update, as a provider streams argument
    text (the framework joins them by call id when the stream ends)."""

    def _inner_get_response(self, *, messages: Any, stream: bool, options: Any,
                            **kwargs: Any) -> Any:
        if not stream:
            return super()._inner_get_response(messages=messages, stream=stream,
                                               options=options, **kwargs)
        from agent_framework import ChatResponseUpdate

        self.received.append(list(messages))
        contents = list(self.turns.pop(0) if self.turns else self.default)  # type: ignore[arg-type]

        async def updates() -> Any:
            for content in contents:
                yield ChatResponseUpdate(role="assistant", contents=[content], message_id="m1")

        return self._build_response_stream(updates())


_DEEP_TEXT = '{"data": ' + "[" * 1500 + "]" * 1500 + "}"


@pytest.mark.parametrize("later_id", ["bad", ""], ids=["same call id", "no call id"])
async def test_fragments_streamed_in_updates_of_their_own_are_judged_whole(
        tmp_path: Path, later_id: str) -> None:
    """Held: 700-character fragments, each in its own update (the later ones with the call
    id or none, as providers send them), are judged as the joined text."""
    fragments = [_DEEP_TEXT[i:i + 700] for i in range(0, len(_DEEP_TEXT), 700)]
    first = Content.from_function_call(call_id="bad", name="take_any", arguments=fragments[0])
    rest = [Content.from_function_call(call_id=later_id, name="", arguments=f)
            for f in fragments[1:]]
    client = _Fragments([[first, *rest], [text("final answer")]])
    agent = agent_with(client, [take_map, take_any, note], guard(load_text(tmp_path, POLICY)))
    response = await run(agent, "go", stream=True)
    [result] = [result_text(r) for r in client.tool_results()]
    assert _DEEP in result
    assert RAN == [] and response.text == "final answer"


async def test_an_approval_a_guarded_sub_agent_needs_runs_nothing() -> None:
    """Held: a guarded sub-agent (``agent.as_tool()``) whose call needs an approval cannot
    hold it (its run is the caller's tool call): the framework fails the tool, nothing is
    paid, and no approval request surfaces that could be answered to run it."""
    from agent_framework import Agent

    from tests.af_support import load_fixture
    from tests.af_tools import CALLS, send_money

    CALLS.clear()
    policies = load_fixture()
    sub_client = ScriptedChatClient([[call("send_money", recipient="UK12", amount=5000)]],
                                    default=[text("sub done")])
    sub = Agent(client=sub_client, tools=[send_money], middleware=guard(policies),
                name="payer", description="Pays.")
    top_client = ScriptedChatClient([[call("payer", task="pay UK12 5000")]],
                                    default=[text("top done")])
    top = Agent(client=top_client, tools=[sub.as_tool()], middleware=guard(policies))
    response = await top.run("pay UK12 5000", session=top.create_session())
    assert CALLS == [] and response.user_input_requests == []
    [result] = top_client.tool_results()
    assert result_text(result).startswith("Error")
