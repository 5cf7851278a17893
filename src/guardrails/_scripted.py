"""An offline stand-in for a model, for ``guardrails demo`` and the samples.

The chat client plugs into Agent Framework's real function-calling loop (the same layers
a real client uses), so the guard is exercised exactly as in production; only the model's
replies are scripted. Not a public API: tests use their own copy in tests/af_support.py.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from agent_framework import (
    BaseChatClient,
    ChatMiddlewareLayer,
    ChatResponse,
    ChatResponseUpdate,
    Content,
    FunctionInvocationLayer,
    Message,
)
from agent_framework.observability import ChatTelemetryLayer

__all__ = ["ScriptedChatClient", "Turn", "call", "result_text", "text"]

Turn = Sequence[Content] | Callable[[Sequence[Message]], Sequence[Content]]
"""What the model "returns" for one request: contents, or a function of the messages sent."""

_ids = itertools.count(1)


def call(name: str, /, **arguments: Any) -> Content:
    """A tool call the scripted model makes, with raw JSON-like arguments."""
    return Content.from_function_call(call_id=f"call-{next(_ids)}", name=name,
                                      arguments=arguments)


def text(value: str) -> Content:
    """A text answer from the scripted model."""
    return Content.from_text(value)


def result_text(result: Content) -> str:
    """The text of a ``function_result`` as a model receives it."""
    value = result.result
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(getattr(item, "text", None) or "" for item in value)
    return json.dumps(value, default=str)


class ScriptedChatClient(FunctionInvocationLayer, ChatMiddlewareLayer,
                         ChatTelemetryLayer, BaseChatClient):
    """Replays ``turns`` one per model request; answers ``"done"`` when they run out."""

    def __init__(self, turns: Sequence[Turn] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.turns: list[Turn] = list(turns)
        self.received: list[list[Message]] = []

    def _inner_get_response(self, *, messages: Sequence[Message], stream: bool,
                            options: Mapping[str, Any], **kwargs: Any) -> Any:
        self.received.append(list(messages))
        turn = self.turns.pop(0) if self.turns else [text("done")]
        contents = list(turn(messages) if callable(turn) else turn)
        if stream:
            async def updates() -> AsyncIterator[ChatResponseUpdate]:
                yield ChatResponseUpdate(role="assistant", contents=contents)

            return self._build_response_stream(updates())

        async def response() -> ChatResponse:
            return ChatResponse(messages=[Message(role="assistant", contents=contents)])

        return response()
