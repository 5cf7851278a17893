"""The batch check's shortcut for flat parsed arguments decides as the general check.

The guard checks arguments a chat client delivered already parsed for what
would end the run (no mapping, nested deeper than the framework's token can recurse on this
stack, containing themselves). The general check walks every stack frame
(``parse_depth()``) and then the arguments level by level; an exact ``dict`` of scalars,
the usual call, is judged by one ``sys._getframe`` lookup instead. Hypothesis compares
``repair`` with the general check on generated arguments (nested, subclasses, cycles,
empty) at generated stack depths and recursion limits (a host may lower it, down to a
stack with no room for one level), and the real loop runs both shapes.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from agent_framework import Agent, ChatResponse, Content, Message, tool
from hypothesis import given, settings
from hypothesis import strategies as st

from guardrails.agent_framework import ScriptedChatClient, _unreadable, guard
from guardrails.agent_framework._state import RunState
from guardrails.agent_framework.scripted import text
from tests.af_support import load_text


def _frames() -> int:
    frame: Any = sys._getframe()
    count = 0
    while frame is not None:
        count += 1
        frame = frame.f_back
    return count


def _general(response: ChatResponse) -> list[Any]:
    """What the general check makes of each call's parsed arguments (``repair`` before the
    shortcut), called at the level ``repair`` is: the same stack below it."""
    depth = _unreadable.parse_depth()
    return [_unreadable._parsed_unreadable(c.arguments, depth)
            for m in response.messages for c in m.contents]


class _Dict(dict):  # type: ignore[type-arg]
    pass


class _Str(str):
    pass


_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True),
                     st.text(max_size=4), st.builds(_Str, st.text(max_size=3)))
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.text(max_size=3), inner, max_size=3),
                            st.builds(tuple, st.lists(inner, max_size=2)),
                            st.builds(_Dict, st.dictionaries(st.text(max_size=2), inner,
                                                             max_size=2))),
    max_leaves=8)
_arguments = st.one_of(
    st.dictionaries(st.text(max_size=5), _scalars, max_size=6),  # flat: the shortcut
    st.dictionaries(st.text(max_size=5), _values, max_size=4),
    st.builds(_Dict, st.dictionaries(st.text(max_size=3), _scalars, max_size=3)),
    st.lists(st.integers(), max_size=3), st.integers(), st.just({}))


def _cyclic(flat: dict[str, Any]) -> dict[str, Any]:
    flat["self"] = flat
    return flat


def _at(extra: int, response: ChatResponse) -> list[Any]:
    """The general check's reasons, then ``repair`` run, at one stack level."""
    if extra > 0:
        return _at(extra - 1, response)
    expected = _general(response)
    _unreadable.repair([c for m in response.messages for c in m.contents], RunState(request=""))
    return [reason or False for reason in expected]


def _marks(response: ChatResponse) -> list[Any]:
    """The reason each content's arguments were replaced with (False: left as they were)."""
    return [_unreadable.message(c.arguments) is not None and c.arguments[_unreadable.MARKER]
            for m in response.messages for c in m.contents]


@settings(max_examples=400, deadline=None)
@given(arguments=st.one_of(_arguments, st.builds(
           _cyclic, st.dictionaries(st.text(max_size=3), _scalars, max_size=2))),
       extra=st.integers(0, 60), headroom=st.one_of(st.integers(0, 300),
                                                    st.sampled_from([0, 1, 2, 3, 18, 19, 20, 21, 22, 23,
                                                                     24, 25])))
def test_the_shortcut_decides_as_the_general_check(arguments: Any, extra: int,
                                                   headroom: int) -> None:
    response = ChatResponse(messages=[Message(role="assistant", contents=[
        Content.from_function_call(call_id="c1", name="t", arguments=arguments),
        Content.from_text("and a text")])])
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(_frames() + extra + 30 + headroom)
    try:
        expected = _at(extra, response)
    finally:
        sys.setrecursionlimit(old)
    got = _marks(response)
    # The text content is never a call (None both ways); the call's marker is the reason.
    assert got[0] == expected[0] and not got[1] and not expected[1], (arguments, got, expected)


def test_a_stack_without_room_for_one_level_still_marks_flat_arguments() -> None:
    """The shortcut falls back where the general check says no level fits."""
    response = ChatResponse(messages=[Message(role="assistant", contents=[
        Content.from_function_call(call_id="c1", name="t", arguments={"a": 1})])])
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(_frames() + 40)  # within the parser's slack: no level fits
    try:
        expected = _at(0, response)
    finally:
        sys.setrecursionlimit(old)
    got = _marks(response)
    assert got == expected == ["depth"]


POLICY = """
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: echo}
spec:
  match: {tools: ["echo_any"]}
  rules:
    - name: no-evil
      when: 'args.value == "evil"'
      action: deny
"""


@tool
def echo_any(value: Any) -> str:
    """Echo."""
    return f"echo {value!r}"


def test_flat_and_nested_parsed_arguments_in_the_real_loop(tmp_path: Any) -> None:
    policies = load_text(tmp_path, POLICY)
    nested: Any = {"value": "ok"}
    deep: Any = nested
    for _ in range(_unreadable.PARSE_DEPTH + 5):
        deep = {"value": deep}
    turns = [
        [Content.from_function_call(call_id="flat", name="echo_any", arguments={"value": "ok"}),
         Content.from_function_call(call_id="evil", name="echo_any", arguments={"value": "evil"}),
         Content.from_function_call(call_id="deep", name="echo_any", arguments=deep)],
        [text("done")],
    ]
    client = ScriptedChatClient(turns)
    agent = Agent(client=client, tools=[echo_any], middleware=guard(policies))
    asyncio.run(agent.run("go"))
    results = {c.call_id: str(c.result) for m in client.received[-1] for c in m.contents
               if c.type == "function_result"}
    assert results["flat"] == "echo 'ok'"
    assert "denied by policy" in results["evil"]
    assert "could not be read" in results["deep"] and "nested deeper" in results["deep"]
