"""The run boundary's per-run set-up (issue 14) gives exactly what its general form gave.

- ``_user_text`` (loops) against the generator expression it replaced, on generated
  conversations: every role, empty and several text parts, non-text contents.
- ``run_mcp_tools`` with its shortcut for a run without MCP tools against the plain walk,
  on generated sources (none, empty, lists and tuples mixing MCP and other tools, a single
  MCP tool object, other types).
- A run without MCP tools nested in one with MCP tools still hands its calls none of the
  parent's (``_set_mcp_tools`` skips the set only when nothing would change).
"""

from __future__ import annotations

import sys
from typing import Any

from agent_framework import Content, MCPStdioTool, Message
from hypothesis import given, settings
from hypothesis import strategies as st

from guardrails.agent_framework._boundary import _set_mcp_tools, _user_text
from guardrails.agent_framework._mcp import _MCP_TYPES, RUN_MCP_TOOLS, run_mcp_tools


def _general_user_text(messages: list[Message]) -> str:
    """The form ``run_request`` used before: a generator per message and one overall."""
    def message_text(message: Message) -> str:
        return "\n".join(c.text for c in message.contents if c.type == "text" and c.text)
    return "\n".join(t for m in messages if m.role == "user" and (t := message_text(m)))


class _Text(str):
    """A hostile text: a ``str`` subclass that claims to equal everything."""

    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = str.__hash__


def _text_content(value: str, subclass: bool) -> Content:
    content = Content.from_text(value)
    if subclass:
        content.text = _Text(value)
    return content


_TEXTS = st.text(alphabet=st.sampled_from(["a", "b", "\n", " ", "é"]), max_size=4)
_CONTENT = st.one_of(
    st.builds(_text_content, _TEXTS, st.booleans()),
    st.just(Content.from_uri("https://example.com/x", media_type="text/plain")),
    st.builds(lambda n: Content.from_function_call(call_id=f"c{n}", name="t", arguments="{}"),
              st.integers(0, 3)),
)
_MESSAGE = st.builds(lambda role, contents: Message(role, contents),
                     st.sampled_from(["user", "assistant", "tool", "system"]),
                     st.lists(_CONTENT, max_size=4))


@settings(max_examples=400, deadline=None)
@given(st.lists(_MESSAGE, max_size=5))
def test_user_text_is_the_general_join(messages: list[Message]) -> None:
    text, general = _user_text(messages), _general_user_text(messages)
    assert type(text) is str and type(general) is str  # never a subclass: the engine reads it
    assert str.__eq__(text, general)


def _mcp(name: str) -> MCPStdioTool:
    return MCPStdioTool(name=name, command=sys.executable, args=["-c", "pass"])


_MCP_OBJECTS = [_mcp("bank"), _mcp("mail")]


def _general_run_mcp_tools(agent: Any, tools: Any) -> tuple[Any, ...]:
    found: list[Any] = []
    for source in (getattr(agent, "mcp_tools", None), tools):
        if isinstance(source, list | tuple):
            found += [i for i in source if isinstance(i, _MCP_TYPES)]
        elif isinstance(source, _MCP_TYPES):
            found.append(source)
    return tuple(found)


class _Agent:
    def __init__(self, mcp_tools: Any) -> None:
        self.mcp_tools = mcp_tools


_ITEM = st.one_of(st.sampled_from(_MCP_OBJECTS), st.just("a tool"), st.none(), st.integers())
_SOURCE = st.one_of(st.none(), st.just([]), st.just(()), st.lists(_ITEM, max_size=4),
                    st.lists(_ITEM, max_size=4).map(tuple), st.sampled_from(_MCP_OBJECTS),
                    st.just("text"), st.just({"k": _MCP_OBJECTS[0]}), st.just(0))


@settings(max_examples=400, deadline=None)
@given(_SOURCE, _SOURCE, st.booleans())
def test_run_mcp_tools_is_the_general_walk(agent_tools: Any, run_tools: Any,
                                           has_attribute: bool) -> None:
    agent = _Agent(agent_tools) if has_attribute else object()
    assert run_mcp_tools(agent, run_tools) == _general_run_mcp_tools(agent, run_tools)


def test_a_nested_run_without_mcp_tools_sees_none_of_its_parents() -> None:
    assert _set_mcp_tools(()) is None  # nothing to change at the top
    outer = _set_mcp_tools(tuple(_MCP_OBJECTS))
    assert outer is not None and RUN_MCP_TOOLS.get() == tuple(_MCP_OBJECTS)
    inner = _set_mcp_tools(())
    assert inner is not None and RUN_MCP_TOOLS.get() == ()
    RUN_MCP_TOOLS.reset(inner)
    assert RUN_MCP_TOOLS.get() == tuple(_MCP_OBJECTS)
    RUN_MCP_TOOLS.reset(outer)
    assert RUN_MCP_TOOLS.get() == ()
