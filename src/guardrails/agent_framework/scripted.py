"""An offline, scripted stand-in for a model, to test guarded agents without a network.

``ScriptedChatClient`` plugs into Agent Framework's *real* function-calling loop (the same
layers a real chat client stacks: function invocation, chat middleware, telemetry), so the
guard runs exactly as in production; only the model's replies are scripted. Use it to test
your policies and tools end to end in a unit test, or to run a demo offline::

    from agent_framework import Agent
    from guardrails.agent_framework import ScriptedChatClient, guard
    from guardrails.agent_framework.scripted import call, text

    client = ScriptedChatClient([
        [call("send_money", recipient="UK12", amount="1,500.00")],  # request 1: a tool call
        [text("paid")],                                             # request 2: the answer
    ])
    agent = Agent(client=client, tools=[send_money], middleware=guard(policies))
    response = await agent.run("pay UK12")          # or agent.run(..., stream=True)
    [result] = client.tool_results()                # what the model was told
    assert "denied" not in result_text(result)
    assert "SECRET" not in client.model_saw()       # leak check over everything it received

A turn is the list of contents the model "returns" for one request, or a callable that
receives the messages the model was sent and returns that list (to react to tool results).
When the script runs out the model gives the ``default`` turn (``text("done")``).
Streaming and non-streaming runs replay the same script.
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

__all__ = ["ScriptedChatClient", "ScriptedTurn", "call", "result_text", "text"]

ScriptedTurn = Sequence[Content] | Callable[[Sequence[Message]], Sequence[Content]]
"""What the model "returns" for one request: contents, or a function of the messages sent."""

_ids = itertools.count(1)


def call(name: str, call_id: str | None = None, /, **arguments: Any) -> Content:
    """A tool call the scripted model makes, with raw JSON-like arguments.

    ``name`` and ``call_id`` are positional-only so that a tool may take arguments of those
    names. Arguments are passed as the model would write them (``amount="1,500.00"``), so
    policies' repairs and the framework's validation see what a real model sends.
    """
    return Content.from_function_call(call_id=call_id or f"call-{next(_ids)}", name=name,
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
    """Replays ``turns`` one per model request and records every request it was sent.

    ``turns`` is a public list: append to it between runs to script the next one.
    """

    def __init__(self, turns: Sequence[ScriptedTurn] = (), *,
                 default: ScriptedTurn | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.turns: list[ScriptedTurn] = list(turns)
        self.default: ScriptedTurn = default if default is not None else [text("done")]
        self.received: list[list[Message]] = []

    def _inner_get_response(self, *, messages: Sequence[Message], stream: bool,
                            options: Mapping[str, Any], **kwargs: Any) -> Any:
        self.received.append(list(messages))
        turn = self.turns.pop(0) if self.turns else self.default
        contents = list(turn(messages) if callable(turn) else turn)
        if stream:
            async def updates() -> AsyncIterator[ChatResponseUpdate]:
                yield ChatResponseUpdate(role="assistant", contents=contents)

            return self._build_response_stream(updates())

        async def response() -> ChatResponse:
            return ChatResponse(messages=[Message(role="assistant", contents=contents)])

        return response()

    def tool_results(self) -> list[Content]:
        """The function results the model received in its latest request."""
        if not self.received:
            return []
        return [c for m in self.received[-1] for c in m.contents if c.type == "function_result"]

    def model_saw(self, *, own_calls: bool = False) -> str:
        """Everything the model received, serialized: the haystack for leak assertions.

        The model's own earlier function calls are left out unless ``own_calls``: it
        wrote those arguments itself, so they cannot be a leak *to* it.
        """
        lines: list[str] = []
        for batch in self.received:
            for message in batch:
                data = message.to_dict()
                if not own_calls:
                    data["contents"] = [
                        c for c in data.get("contents", [])
                        if not (isinstance(c, dict) and c.get("type") == "function_call")]
                lines.append(json.dumps(data, default=str, ensure_ascii=False))
        return "\n".join(lines)
