"""Arguments the framework's own parser cannot read never end a guarded run (promise 1).

The function-invocation loop runs ``json.loads`` on the model's argument text before any
function middleware; it raises ``RecursionError`` past ~990 levels and ``ValueError`` for an
integer of more than 4,300 digits. The guard sees each batch of calls before the framework
executes it and replaces such arguments; the function middleware denies the call.
All in the real loop, streaming and not, with the framework's own parser as the oracle.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from agent_framework import AgentSession, Content, tool
from hypothesis import given, settings
from hypothesis import strategies as st

import guardrails
from guardrails.agent_framework import (
    GuardChatMiddleware,
    GuardFunctionMiddleware,
    GuardRunMiddleware,
    ScriptedChatClient,
    guard,
)
from guardrails.agent_framework._unreadable import MARKER, PARSE_DEPTH, unreadable
from guardrails.agent_framework.scripted import call, result_text, text
from tests.af_support import STREAMING, agent_with, load_text, run

RAN: list[Any] = []

POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: open}
spec:
  match: {tools: ["echo_any", "note"]}
  rules:
    - {name: never, when: 'false', action: deny}
"""


@tool(name="echo_any")
def echo_any(text: Any) -> str:
    """Runs with whatever it is given."""
    RAN.append(("echo_any", text))
    return "ran"


@tool(name="note")
def note(text: str) -> str:
    """A well-formed neighbour."""
    RAN.append(("note", text))
    return f"noted {text}"


@pytest.fixture(autouse=True)
def _clear() -> Any:
    RAN.clear()
    yield
    RAN.clear()


SECRETISH = "RAWTEXT-marker-7f3a"
"""Written into every hostile argument: it must never come back to the model."""

DEEP = '{"text": ["' + SECRETISH + '", ' + "[" * 5000 + "1" + "]" * 5000 + "]}"
LONG_INT = '{"text": {"a": "' + SECRETISH + '", "b": [1, -' + "9" * 5000 + "]}}"
HOSTILE = pytest.mark.parametrize(("arguments", "why"), [
    (DEEP, f"nested deeper than {PARSE_DEPTH} levels"),
    (LONG_INT, "a number with more than 4,300 digits"),
], ids=["deep", "long-integer"])


def _raw(name: str, arguments: str, call_id: str = "c1") -> Content:
    return Content.from_function_call(call_id=call_id, name=name, arguments=arguments)


def _framework_parses(arguments: str) -> bool:
    """The oracle: does the framework's own parser return without raising?"""
    try:
        _raw("echo_any", arguments).parse_arguments()
    except (RecursionError, ValueError):
        return False
    return True


def test_guard_returns_the_two_middleware() -> None:
    """The list's shape is part of the public contract (docs/integration.md): the run
    boundary and the function middleware; no chat middleware is needed any more."""
    run_mw, fn_mw = guard(guardrails.PolicySet([], revision="empty"))
    assert isinstance(run_mw, GuardRunMiddleware)
    assert isinstance(fn_mw, GuardFunctionMiddleware)


@STREAMING
@HOSTILE
async def test_unreadable_arguments_are_denied_and_the_run_goes_on(
        tmp_path: Path, stream: bool, arguments: str, why: str) -> None:
    assert not _framework_parses(arguments)  # the attack is real on this framework
    client = ScriptedChatClient([[_raw("echo_any", arguments)], [text("final answer")]])
    agent = agent_with(client, [echo_any], guard(load_text(tmp_path, POLICY)))
    response = await run(agent, "go", stream=stream)
    [result] = [result_text(r) for r in client.tool_results()]
    assert result == ("Error: the call to echo_any was denied by policy. "
                      f"The arguments could not be read: {why}.")
    assert not RAN
    assert response.text == "final answer"
    assert SECRETISH not in client.model_saw()  # nothing of the raw text is quoted back


@STREAMING
@HOSTILE
@pytest.mark.parametrize("chat", [False, True], ids=["guard", "guard-and-chat-middleware"])
async def test_a_valid_call_in_the_same_batch_still_runs(
        tmp_path: Path, stream: bool, arguments: str, why: str, chat: bool) -> None:
    """(``chat``: a list that still adds ``GuardChatMiddleware``, which is kept importable
    and does nothing, works as before.)"""
    client = ScriptedChatClient([
        [_raw("echo_any", arguments, "bad"), call("note", "good", text="hello")],
        [text("final answer")]])
    middleware = [*guard(load_text(tmp_path, POLICY)), *([GuardChatMiddleware()] if chat else [])]
    agent = agent_with(client, [echo_any, note], middleware)
    response = await run(agent, "go", stream=stream)
    results = {r.call_id: result_text(r) for r in client.tool_results()}
    assert "could not be read" in results["bad"] and why in results["bad"]
    assert results["good"] == "noted hello"
    assert RAN == [("note", "hello")]
    assert response.text == "final answer"


async def test_arguments_streamed_in_pieces_are_judged_whole(tmp_path: Path) -> None:
    """A real provider streams the argument text in fragments, each harmless alone: the
    streamed response joins them, and the whole text is judged."""
    pieces = [DEEP[i:i + 700] for i in range(0, len(DEEP), 700)]
    first = Content.from_function_call(call_id="c1", name="echo_any", arguments=pieces[0])
    rest = [Content.from_function_call(call_id="c1", name="", arguments=p) for p in pieces[1:]]
    client = ScriptedChatClient([[first, *rest], [text("final answer")]])
    agent = agent_with(client, [echo_any], guard(load_text(tmp_path, POLICY)))
    response = await run(agent, "go", stream=True)
    [result] = [result_text(r) for r in client.tool_results()]
    assert "could not be read" in result
    assert not RAN and response.text == "final answer"


@STREAMING
async def test_the_run_continues_with_a_session_over_several_turns(tmp_path: Path,
                                                                   stream: bool) -> None:
    """The replaced arguments go into the history the model is sent next (JSON data)."""
    client = ScriptedChatClient([
        [_raw("echo_any", LONG_INT)], [_raw("echo_any", DEEP)],
        [call("note", "n", text="fine")], [text("final answer")]])
    agent = agent_with(client, [echo_any, note], guard(load_text(tmp_path, POLICY)))
    session = AgentSession()
    response = await run(agent, "go", stream=stream, session=session)
    assert RAN == [("note", "fine")]
    assert response.text == "final answer"
    assert SECRETISH not in client.model_saw(own_calls=True)
    json.dumps(session.to_dict(), default=str)


@STREAMING
async def test_a_forged_marker_is_denied_with_a_fixed_text(tmp_path: Path,
                                                           stream: bool) -> None:
    """A model writing the marker itself only gets its own call denied; its value is never
    quoted back."""
    forged = json.dumps({MARKER: SECRETISH})
    client = ScriptedChatClient([[_raw("echo_any", forged)], [text("final answer")]])
    agent = agent_with(client, [echo_any], guard(load_text(tmp_path, POLICY)))
    await run(agent, "go", stream=stream)
    [result] = [result_text(r) for r in client.tool_results()]
    assert result.endswith("The arguments could not be read: not JSON the framework can parse.")
    assert not RAN and SECRETISH not in client.model_saw()


def _stack_depth() -> int:
    frame: Any = sys._getframe(1)
    used = 0
    while frame is not None:
        used += 1
        frame = frame.f_back
    return used


@STREAMING
@pytest.mark.parametrize("nesting", [150, PARSE_DEPTH - 1])
async def test_a_host_with_a_lowered_recursion_limit_keeps_its_run(
        tmp_path: Path, stream: bool, nesting: int) -> None:
    """CPython 3.11 counts the parser's nesting against the host's recursion limit together
    with the frames below it: with the limit 140 frames above the test's own stack, text
    under ``PARSE_DEPTH`` levels ended the run with ``RecursionError`` before the bound
    followed the stack. A shallow call in the same batch still runs."""
    arguments = '{"text": ' + "[" * nesting + "]" * nesting + "}"
    client = ScriptedChatClient([
        [_raw("echo_any", arguments, "bad"), call("note", "good", text="hello")],
        [text("final answer")]])
    agent = agent_with(client, [echo_any, note], guard(load_text(tmp_path, POLICY)))
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(_stack_depth() + 140)
    try:
        response = await run(agent, "go", stream=stream)
    finally:
        sys.setrecursionlimit(old)
    results = {r.call_id: result_text(r) for r in client.tool_results()}
    assert "could not be read" in results["bad"]
    assert results["good"] == "noted hello"
    assert RAN == [("note", "hello")] and response.text == "final answer"


@STREAMING
@pytest.mark.parametrize("arguments", [[1, 2], 5, True, b"ab", ("a",), [["text"]]],
                         ids=["list", "int", "bool", "bytes", "tuple", "short-pair"])
async def test_arguments_delivered_parsed_but_not_a_mapping_are_denied(
        tmp_path: Path, stream: bool, arguments: Any) -> None:
    """A chat client may hand over arguments it parsed itself: the loop's
    ``dict(parse_arguments())`` raised TypeError or ValueError on a list of numbers, a number,
    bytes, and ended the run."""
    client = ScriptedChatClient([
        [Content.from_function_call(call_id="bad", name="echo_any", arguments=arguments),
         call("note", "good", text="hello")], [text("final answer")]])
    agent = agent_with(client, [echo_any, note], guard(load_text(tmp_path, POLICY)))
    response = await run(agent, "go", stream=stream)
    results = {r.call_id: result_text(r) for r in client.tool_results()}
    assert results["bad"].endswith("The arguments could not be read: not a JSON object.")
    assert results["good"] == "noted hello"
    assert RAN == [("note", "hello")] and response.text == "final answer"


@pytest.mark.parametrize("arguments", [[["text", "x"]], (("text", "x"),)])
async def test_a_list_of_pairs_is_left_to_the_framework(tmp_path: Path,
                                                        arguments: Any) -> None:
    """The framework reads a list of pairs as the mapping it spells: no rewrite, and the
    policy decides on what runs."""
    client = ScriptedChatClient([
        [Content.from_function_call(call_id="c1", name="echo_any", arguments=arguments)],
        [text("final answer")]])
    agent = agent_with(client, [echo_any], guard(load_text(tmp_path, POLICY)))
    await run(agent, "go")
    assert RAN == [("echo_any", "x")]


_N = "9" * 4301
"""One digit over the limit: the forms below are integers to the parser (``_json.c`` reads a
float only when ``.`` is followed by a digit or ``e``/``E`` by an optional sign and a digit),
so each raised ValueError out of the run before the scan's lookahead followed that rule."""


@STREAMING
@pytest.mark.parametrize("arguments", [
    '{"text": ' + _N + ".}",                                # a dot and no fraction
    '{"text": [' + _N + ".x]}",
    '{"text": [' + _N + "e]}",                              # an e and no exponent digits
    '{"text": [-' + _N + "E+]}",
    '{"text": [' + _N + "e-x]}",
    '{"text": [' + _N + "\u0663]}",                        # a non-ASCII digit after it
], ids=["dot", "dot-x", "e", "E-plus", "e-minus-x", "arabic-digit"])
async def test_a_long_integer_before_a_dot_or_e_without_digits_is_caught(
        tmp_path: Path, stream: bool, arguments: str) -> None:
    assert not _framework_parses(arguments)  # the attack is real on this framework
    assert unreadable(arguments) == "digits"
    client = ScriptedChatClient([[_raw("echo_any", arguments)], [text("final answer")]])
    agent = agent_with(client, [echo_any], guard(load_text(tmp_path, POLICY)))
    response = await run(agent, "go", stream=stream)
    [result] = [result_text(r) for r in client.tool_results()]
    assert result.endswith("a number with more than 4,300 digits.")
    assert not RAN and response.text == "final answer"


@pytest.mark.parametrize("arguments", [
    '{"text": "' + "[" * 5000 + '"}',                         # brackets inside a string
    '{"text": "' + "9" * 5000 + '"}',                         # digits inside a string
    '{"text": "\\"' + "[" * 5000 + '"}',                      # after an escaped quote
    '{"text": "' + '\\"[' * 5000,                           # never closed: not JSON
    '{"text": "' + "\\\n[" * 5000 + '"}',                     # escaped newlines: not JSON
    '{"text": ' + "9" * 5000 + ".5}",                         # a float: any length reads
    '{"text": 0.' + "9" * 5000 + "}",                         # a long fraction
    '{"text": 1e' + "9" * 5000 + "}",                         # a long exponent
    '{"text": [' + "9" * 5000 + "e5, " + "9" * 5000 + "E-5]}",  # a float's integer part
    '{"text": ' + "[" * (PARSE_DEPTH - 1) + "]" * (PARSE_DEPTH - 1) + "}",  # at the bound
    '{"text": [' + "[1], " * 3000 + "1]}",                      # many brackets, shallow
    '{"text": ' + "9" * 4300 + "}",                           # at the digit limit
])
async def test_what_the_parser_reads_is_left_alone(tmp_path: Path, arguments: str) -> None:
    """No false positive: these parse, so the chat middleware leaves them as they are (the
    function middleware then decides on them as on any other)."""
    assert unreadable(arguments) is None
    assert _framework_parses(arguments)
    client = ScriptedChatClient([[_raw("echo_any", arguments)], [text("final answer")]])
    agent = agent_with(client, [echo_any], guard(load_text(tmp_path, POLICY)))
    response = await run(agent, "go")
    [result] = [result_text(r) for r in client.tool_results()]
    assert "could not be read" not in result
    assert response.text == "final answer"


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-10**30, 10**30) | st.floats(allow_nan=False,
                                                                          allow_infinity=False)
    | st.text(alphabet='[]{}"\\9e.-x', max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.text(alphabet='[]{}"\\9', max_size=5), inner, max_size=3),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(value=_JSON, depth=st.integers(0, 5000), digits=st.integers(1, 6000),
       wrap=st.sampled_from(["[", "{\"k\": "]), where=st.sampled_from(["deep", "int", "none"]))
def test_the_scan_agrees_with_the_frameworks_parser(value: Any, depth: int, digits: int,
                                                    wrap: str, where: str) -> None:
    """Differential: the scan says unreadable exactly when the framework's parser raises
    (within the margin of ``PARSE_DEPTH``: anything deeper is flagged, and denied by the
    engine's input bound anyway), on generated JSON holding hostile strings, deep wrappers
    and long integers."""
    inner = json.dumps(value)
    if where == "int":
        inner = f"[{inner}, -{'9' * digits}]"
    if where == "deep":
        close = "]" if wrap == "[" else "}"
        inner = wrap * depth + inner + close * depth
    arguments = '{"text": ' + inner + "}"
    reason = unreadable(arguments)
    limit = sys.get_int_max_str_digits()
    text_depth = 1 + (depth if where == "deep" else 0) + _depth(value) + (where == "int")
    expected = None
    if text_depth > PARSE_DEPTH:
        expected = "depth"
    elif where == "int" and digits > limit:
        expected = "digits"
    assert reason == expected
    if reason is None:
        assert _framework_parses(arguments)
    elif reason == "digits" or text_depth > sys.getrecursionlimit():  # (the stack runs out)
        assert not _framework_parses(arguments)


def _depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    return 0


@settings(max_examples=500, deadline=None)
@given(before=st.text(alphabet="0123456789.eE+- ,[", max_size=6),
       after=st.text(alphabet="0123456789.eE+- ,]x\u0663", max_size=6),
       digits=st.integers(4295, 4310), key=st.booleans())
def test_every_long_integer_the_parser_refuses_is_found(before: str, after: str, digits: int,
                                                        key: bool) -> None:
    """Differential on the text around a long run of digits (signs, dots, exponents, spaces,
    a non-ASCII digit): whenever the framework's parser raises on it, the scan says so. (The
    converse may fail only on text that is no JSON at all, ``[0999...`` say, which the parser
    refuses with a JSONDecodeError and the framework would not run either.)"""
    body = before + "9" * digits + after
    arguments = ('{"text": ' if key else "[") + body + ("}" if key else "]")
    if not _framework_parses(arguments):
        assert unreadable(arguments) == "digits"
    if unreadable(arguments) is not None:
        with pytest.raises(ValueError):
            json.loads(arguments)
