"""Unreadable arguments are caught where the framework executes a batch, only for the guard.

The guard no longer needs a chat middleware to keep argument text the framework's parser
cannot read from ending the run: ``_private.install_batch_check`` lets it see each batch of
calls before the framework reads their arguments (``_unreadable.check_batch``). These tests
try to break that in the real loop: agents without a guard in the same process (alone, side
by side in one event loop, nested in a guarded run's tool), half a guard, approvals the
framework asks for and the replays of their answers, a batch whose calls share an id in
either order, sub-agents with a guard of their own, deep stacks, and generated hostile text.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from agent_framework import Agent, AgentSession, Content, Message, tool
from agent_framework import _tools as framework_tools
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import guardrails
from guardrails.agent_framework import (
    GuardFunctionMiddleware,
    GuardRunMiddleware,
    ScriptedChatClient,
    _private,
    guard,
)
from guardrails.agent_framework._unreadable import MARKER, PARSE_DEPTH, unreadable
from guardrails.agent_framework.scripted import call, result_text, text
from tests.af_support import STREAMING, agent_with, approve_all, load_text, run

RAN: list[Any] = []

POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: open}
spec:
  match: {tools: ["defaults_only", "note", "asks_first", "helper"]}
  rules:
    - {name: never, when: 'false', action: deny}
"""


@tool(name="defaults_only")
def defaults_only(value: Any = None, count: int = 1) -> str:
    """Every parameter has a default: the marker's key alone validates as no arguments."""
    RAN.append(("defaults_only", value))
    return f"ran {value!r}"


@tool(name="note")
def note(text: str) -> str:
    """A well-formed neighbour."""
    RAN.append(("note", text))
    return f"noted {text}"


@tool(name="asks_first", approval_mode="always_require")
def asks_first(value: Any = None) -> str:
    """The framework asks for approval before every call."""
    RAN.append(("asks_first", value))
    return f"asked {value!r}"


@pytest.fixture(autouse=True)
def _clear() -> Any:
    RAN.clear()
    yield
    RAN.clear()


SECRETISH = "RAWTEXT-batch-5c1d"
DEEP = '{"value": ["' + SECRETISH + '", ' + "[" * 5000 + "1" + "]" * 5000 + "]}"
LONG_INT = '{"value": ["' + SECRETISH + '", -' + "9" * 5000 + "]}"
HOSTILE = pytest.mark.parametrize(("arguments", "error"), [
    (DEEP, RecursionError), (LONG_INT, ValueError)], ids=["deep", "long-integer"])


def _raw(name: str, arguments: Any, call_id: str = "c1") -> Content:
    return Content.from_function_call(call_id=call_id, name=name, arguments=arguments)


def _policies(tmp_path: Path) -> guardrails.PolicySet:
    return load_text(tmp_path, POLICY)


def _results(client: ScriptedChatClient) -> dict[str, str]:
    return {r.call_id: result_text(r) for r in client.tool_results()}


def test_the_check_is_installed_once_and_guard_needs_no_chat_middleware(
        tmp_path: Path) -> None:
    middleware = guard(_policies(tmp_path))
    assert [type(m) for m in middleware] == [GuardRunMiddleware, GuardFunctionMiddleware]
    assert framework_tools._try_execute_function_call_groups is _private._checked_batch
    assert _private.install_batch_check(lambda calls, middleware: None)  # already there
    assert len(_private._BATCH_CHECK) == 1  # the first check stays


# -- agents without a guard see the framework's own behaviour ---------------------------


@STREAMING
@HOSTILE
async def test_an_unguarded_agent_in_the_same_process_ends_its_run_as_the_framework_does(
        tmp_path: Path, stream: bool, arguments: str, error: type[Exception]) -> None:
    guard(_policies(tmp_path))  # installed in this process
    with pytest.raises(error):
        Content.from_function_call(call_id="x", name="n", arguments=arguments).parse_arguments()
    client = ScriptedChatClient([[_raw("defaults_only", arguments)], [text("final")]])
    agent = agent_with(client, [defaults_only], [])
    with pytest.raises(error):
        await run(agent, "go", stream=stream)
    assert RAN == []


@STREAMING
async def test_an_unguarded_agent_reads_its_calls_as_before(tmp_path: Path,
                                                           stream: bool) -> None:
    """Nothing is replaced for an agent without the guard: not even a marker it was given
    (it is the framework's to pass on, and no guard judges it)."""
    guard(_policies(tmp_path))
    client = ScriptedChatClient([
        [_raw("defaults_only", json.dumps({"value": "plain"}), "a"),
         _raw("defaults_only", {MARKER: "depth", "value": "kept"}, "b")],
        [text("final")]])
    agent = agent_with(client, [defaults_only], [])
    response = await run(agent, "go", stream=stream)
    assert sorted(RAN) == [("defaults_only", "kept"), ("defaults_only", "plain")]
    assert response.text == "final"


@HOSTILE
async def test_guarded_and_unguarded_agents_side_by_side_in_one_event_loop(
        tmp_path: Path, arguments: str, error: type[Exception]) -> None:
    policies = _policies(tmp_path)

    def pair() -> tuple[Agent, ScriptedChatClient, Agent]:
        guarded_client = ScriptedChatClient([
            [_raw("defaults_only", arguments, "bad"), call("note", "good", text="hi")],
            [text("guarded final")]])
        unguarded = agent_with(ScriptedChatClient([
            [_raw("defaults_only", arguments, "bad")], [text("unguarded final")]]),
            [defaults_only], [])
        return agent_with(guarded_client, [defaults_only, note], guard(policies)), \
            guarded_client, unguarded

    for _ in range(3):
        guarded_agent, guarded_client, unguarded_agent = pair()
        outcomes = await asyncio.gather(guarded_agent.run("go"), unguarded_agent.run("go"),
                                        return_exceptions=True)
        assert outcomes[0].text == "guarded final"
        assert isinstance(outcomes[1], error)
        assert "could not be read" in _results(guarded_client)["bad"]
    assert RAN == [("note", "hi")] * 3


@STREAMING
@HOSTILE
async def test_an_unguarded_agent_nested_in_a_guarded_runs_tool_never_runs_on_a_marker(
        tmp_path: Path, stream: bool, arguments: str, error: type[Exception]) -> None:
    """The guarded run's state is visible inside its tool, but the sub-agent's pipeline
    holds no guard: its call is left to the framework (which ends the sub-agent's run), and
    its tool, whose every parameter has a default, never runs on the marker's defaults."""
    inner = Agent(client=ScriptedChatClient([[_raw("defaults_only", arguments)],
                                             [text("inner final")]]),
                  name="helper", tools=[defaults_only])
    outer_client = ScriptedChatClient([[call("helper", "h1", task="help")],
                                       [text("outer final")]])
    outer = agent_with(outer_client, [inner.as_tool()], guard(_policies(tmp_path)))
    response = await run(outer, "go", stream=stream)
    assert RAN == []
    assert response.text == "outer final"
    assert "inner final" not in _results(outer_client)["h1"]


@STREAMING
@HOSTILE
async def test_a_guarded_sub_agent_denies_its_own_call_and_goes_on(
        tmp_path: Path, stream: bool, arguments: str, error: type[Exception]) -> None:
    policies = _policies(tmp_path)
    inner_client = ScriptedChatClient([
        [_raw("defaults_only", arguments, "inner-bad"), call("note", "inner-good", text="in")],
        [text("inner final")]])
    inner = Agent(client=inner_client, name="helper", tools=[defaults_only, note],
                  middleware=guard(policies))
    outer_client = ScriptedChatClient([
        [call("helper", "h1", task="help"), _raw("defaults_only", arguments, "outer-bad")],
        [text("outer final")]])
    outer = agent_with(outer_client, [inner.as_tool(), defaults_only], guard(policies))
    response = await run(outer, "go", stream=stream)
    assert "could not be read" in _results(inner_client)["inner-bad"]
    outer_results = _results(outer_client)
    assert "could not be read" in outer_results["outer-bad"]
    assert "inner final" in outer_results["h1"]
    assert RAN == [("note", "in")] and response.text == "outer final"


# -- half a guard: the marker never reaches a tool no guard judges -----------------------


@STREAMING
async def test_a_run_boundary_without_the_function_middleware_replaces_nothing(
        tmp_path: Path, stream: bool) -> None:
    client = ScriptedChatClient([[_raw("defaults_only", DEEP)], [text("final")]])
    agent = agent_with(client, [defaults_only], [GuardRunMiddleware(_policies(tmp_path))])
    with pytest.raises(RecursionError):
        await run(agent, "go", stream=stream)
    assert RAN == []


@STREAMING
async def test_a_function_middleware_without_the_run_boundary_replaces_nothing(
        tmp_path: Path, stream: bool) -> None:
    """Without the run's state the call id cannot be noted, and a tool whose every
    parameter has a default would run on what validation leaves of the marker: the
    framework's own failure (the run ends, the tool never runs) is the safer one."""
    client = ScriptedChatClient([[_raw("defaults_only", DEEP)], [text("final")]])
    agent = agent_with(client, [defaults_only],
                       [GuardFunctionMiddleware(_policies(tmp_path))])
    with pytest.raises(RecursionError):
        await run(agent, "go", stream=stream)
    assert RAN == []


# -- approvals the framework asks for, and their replays --------------------------------


@STREAMING
@HOSTILE
async def test_a_call_the_framework_asks_approval_for_shows_the_marker_and_never_runs(
        tmp_path: Path, stream: bool, arguments: str, error: type[Exception]) -> None:
    """The batch is checked before the framework builds the approval request, so the host
    (and the session holding the request) sees the marker, never the raw text; the approved
    replay, in a run of its own, is denied by the marker (noted again), and the tool, whose
    every parameter has a default, never runs."""
    client = ScriptedChatClient([[_raw("asks_first", arguments, "ask")],
                                 [text("after approval")]])
    agent = agent_with(client, [asks_first], guard(_policies(tmp_path)))
    session = AgentSession()
    first = await run(agent, "go", stream=stream, session=session)
    [request] = first.user_input_requests
    assert request.function_call.arguments == {MARKER: "depth" if error is RecursionError
                                               else "digits"}
    assert SECRETISH not in json.dumps(session.to_dict(), default=str)
    second = await run(agent, approve_all(first), stream=stream, session=session)
    assert RAN == []
    assert "could not be read" in _results(client)["ask"]
    assert second.text == "after approval"


async def test_a_replayed_approval_carrying_raw_text_is_checked_too(tmp_path: Path) -> None:
    """An approval answer the host builds itself, the framework taking the call from the
    answer (``disable_approval_response_binding``), with text the parser cannot read: the
    replay batch is checked like a model's, and the run goes on."""
    client = ScriptedChatClient([[text("after approval")]])
    agent = agent_with(client, [asks_first], guard(_policies(tmp_path)),
                       disable_approval_response_binding=True)
    request = Content.from_function_approval_request(
        id="ask", function_call=_raw("asks_first", DEEP, "ask"))
    answer = request.to_function_approval_response(approved=True)
    response = await agent.run([Message(role="assistant", contents=[request]),
                                Message(role="user", contents=[answer])])
    assert RAN == []
    assert "could not be read" in _results(client)["ask"]
    assert response.text == "after approval" and SECRETISH not in client.model_saw()


@STREAMING
@pytest.mark.parametrize("value", [SECRETISH, "depth", 5, None], ids=["text", "reason", "int", "none"])
async def test_a_parsed_marker_a_client_wrote_is_denied_whatever_the_tool(
        tmp_path: Path, stream: bool, value: Any) -> None:
    """Parsed arguments carrying the marker's key are denied by their id too (validation of
    a tool whose every parameter has a default would drop the key and run the rest), and
    the marker's own value is never kept or quoted back."""
    client = ScriptedChatClient([[_raw("defaults_only", {MARKER: value, "value": "x"}, "f")],
                                 [text("final")]])
    agent = agent_with(client, [defaults_only], guard(_policies(tmp_path)))
    response = await run(agent, "go", stream=stream)
    assert RAN == [] and "could not be read" in _results(client)["f"]
    assert SECRETISH not in client.model_saw(own_calls=True)
    assert response.text == "final"


# -- one batch, ids shared in either order, concurrent or not ---------------------------


@pytest.mark.parametrize("unreadable_first", [True, False], ids=["bad-first", "good-first"])
@pytest.mark.parametrize("concurrent", [True, False], ids=["concurrent", "sequential"])
async def test_a_readable_sibling_sharing_the_id_is_denied_in_either_order(
        tmp_path: Path, unreadable_first: bool, concurrent: bool) -> None:
    """The whole batch is checked before any of its calls runs: a readable call under the
    unreadable call's id is denied even when it comes first (its task could otherwise
    finish before its sibling's is even started). Not streamed: a stream merges updates
    that share a call id into one call."""
    bad = _raw("defaults_only", DEEP, "same")
    good = _raw("defaults_only", {"value": "fine"}, "same")
    client = ScriptedChatClient([[bad, good] if unreadable_first else [good, bad],
                                 [text("final")]])
    agent = agent_with(client, [defaults_only], guard(_policies(tmp_path)),
                       allow_concurrent_invocation=concurrent)
    response = await run(agent, "go")
    assert RAN == []
    assert response.text == "final"


@STREAMING
async def test_many_parallel_calls_each_judged_alone(tmp_path: Path, stream: bool) -> None:
    calls = []
    for i in range(12):
        arguments = (DEEP, LONG_INT, {"value": f"ok{i}"}, json.dumps({"value": f"ok{i}"}))[i % 4]
        calls.append(_raw("defaults_only", arguments, f"c{i}"))
    client = ScriptedChatClient([calls, [text("final")]])
    agent = agent_with(client, [defaults_only], guard(_policies(tmp_path)))
    response = await run(agent, "go", stream=stream)
    results = _results(client)
    for i in range(12):
        assert ("could not be read" in results[f"c{i}"]) is (i % 4 < 2), (i, results[f"c{i}"])
    assert sorted(RAN) == sorted(("defaults_only", f"ok{i}") for i in range(12) if i % 4 >= 2)
    assert response.text == "final" and SECRETISH not in client.model_saw()


# -- deep stacks --------------------------------------------------------------------------


def _frames() -> int:
    frame: Any = sys._getframe(1)
    used = 0
    while frame is not None:
        used += 1
        frame = frame.f_back
    return used


def _at_depth(levels: int, fn: Any) -> Any:
    return fn() if levels <= 0 else _at_depth(levels - 1, fn)


@pytest.mark.parametrize("nesting", [120, PARSE_DEPTH - 1])
def test_a_run_on_a_deep_stack_keeps_its_run(tmp_path: Path, nesting: int) -> None:
    """The event loop runs on a stack already deep (the host called ``asyncio.run`` far
    down): text the default limit reads ends such a run unless the check follows the
    stack. The batch is checked on a stack at least as deep as each call's own task."""
    policies = _policies(tmp_path)
    arguments = '{"value": ' + "[" * nesting + "]" * nesting + "}"
    client = ScriptedChatClient([
        [_raw("defaults_only", arguments, "bad"), call("note", "good", text="hello")],
        [text("final")]])
    agent = agent_with(client, [defaults_only, note], guard(policies))
    outcome: list[Any] = []

    def body() -> None:
        limit = sys.getrecursionlimit()
        try:
            outcome.append(_at_depth(limit - _frames() - nesting - 60,
                                     lambda: asyncio.run(agent.run("go"))))
        except BaseException as exc:  # reported below
            outcome.append(exc)

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    [response] = outcome
    assert not isinstance(response, BaseException), repr(response)
    results = _results(client)
    assert "could not be read" in results["bad"]
    assert results["good"] == "noted hello" and RAN == [("note", "hello")]
    assert response.text == "final"


# -- generated hostile text -------------------------------------------------------------


_TEXT = st.one_of(
    st.builds(lambda d, inner: '{"value": ' + "[" * d + inner + "]" * d + "}",
              st.integers(0, 1500), st.sampled_from(["1", '"]]]"', "-" + "9" * 10, ""])),
    st.builds(lambda n, tail: '{"value": ' + "9" * n + tail + "}",
              st.integers(4290, 4310), st.sampled_from(["", ".", ".5", "e", "e5", "E+", "]"])),
    st.text(alphabet='[]{}"\\9e.-, :', max_size=40),
)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(arguments=_TEXT, stream=st.booleans())
def test_no_generated_text_ends_a_guarded_run(tmp_path: Path, arguments: str,
                                              stream: bool) -> None:
    """Whatever the text, the guarded run goes on; the call is denied as unreadable exactly
    when the scan says so, and the scan never lets through text the parser cannot read
    (what it lets through is decided like any other call: ``9`` is ``{"raw": 9}``)."""
    RAN.clear()
    client = ScriptedChatClient([[_raw("defaults_only", arguments)], [text("final")]])
    agent = agent_with(client, [defaults_only], guard(_policies(tmp_path)))
    response = asyncio.run(run(agent, "go", stream=stream))
    assert response.text == "final"
    [result] = _results(client).values()
    if unreadable(arguments) is not None:
        assert "could not be read" in result and RAN == []
        return
    Content.from_function_call(call_id="x", name="n", arguments=arguments).parse_arguments()
    assert "could not be read" not in result


# -- MCP tools --------------------------------------------------------------------------


@STREAMING
async def test_an_mcp_call_the_parser_cannot_read_is_denied_and_the_run_goes_on(
        tmp_path: Path, stream: bool) -> None:
    """An MCP tool takes its schema's arguments as given (no model drops an unknown key):
    its call is denied before anything reaches the server, and the run goes on; an agent
    without the guard, on the same server, ends its run as the framework does."""
    from agent_framework import MCPStdioTool

    from tests.test_af_mcp import SERVER

    policies = load_text(tmp_path, """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: bank}
spec:
  match: {tools: ["mcp:bank/*"]}
  rules:
    - {name: never, when: 'false', action: deny}
""")
    arguments = '{"recipient": "' + SECRETISH + '", "amount": ' + "[" * 3000 + "]" * 3000 + "}"
    bank = MCPStdioTool(name="bank", command=sys.executable, args=[str(SERVER)],
                        tool_name_prefix="bank")
    async with bank:
        client = ScriptedChatClient([[_raw("bank_send_money", arguments, "m1")],
                                     [text("final")]])
        agent = Agent(client=client, tools=[bank], middleware=guard(policies))
        response = await run(agent, "go", stream=stream)
        assert _results(client)["m1"].endswith(
            f"The arguments could not be read: nested deeper than {PARSE_DEPTH} levels.")
        assert response.text == "final" and SECRETISH not in client.model_saw()
        unguarded = Agent(client=ScriptedChatClient([[_raw("bank_send_money", arguments)],
                                                     [text("final")]]), tools=[bank])
        with pytest.raises(RecursionError):
            await run(unguarded, "go", stream=stream)
