"""Offline Agent Framework test kit: a scripted chat client and helpers.

Import it from any test that needs a guarded agent inside the framework's *real*
function-calling loop, without a model or network::

    from tests.af_support import ScriptedChatClient, call, text, load_fixture, agent_with

    client = ScriptedChatClient([
        [call("send_money", recipient="UK12", amount="1,500.00")],   # turn 1: the model calls a tool
        [text("done")],                                               # turn 2: the model answers
    ])
    agent = agent_with(client, [send_money], guard(load_fixture()))
    response = await agent.run("pay UK12")
    client.model_saw()        # every text the model received, JSON-serialized: for leak checks

A turn is a list of ``Content`` the model "returns", or a callable receiving the messages
the model was sent and returning that list (to react to tool results). When the script
runs out the model answers ``"done"``. Streaming and non-streaming runs use the same
script. ``RecordingTelemetry`` captures every decision the guard records.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agent_framework import (
    Agent,
    BaseChatClient,
    ChatResponse,
    ChatResponseUpdate,
    Content,
    FunctionInvocationLayer,
    Message,
    ResponseStream,
)
from agent_framework._middleware import ChatMiddlewareLayer
from agent_framework.observability import ChatTelemetryLayer

import guardrails
from guardrails.engine.decision import Decision
from guardrails.telemetry import CallSpan, GuardTelemetry

FIXTURES = Path(__file__).parent / "data" / "af"

Turn = Sequence[Content] | Callable[[Sequence[Message]], Sequence[Content]]

_ids = itertools.count(1)


def call(name: str, call_id: str | None = None, /, **arguments: Any) -> Content:
    """A function call the scripted model makes (arguments as raw JSON-parsed values)."""
    return Content.from_function_call(call_id=call_id or f"call-{next(_ids)}", name=name,
                                      arguments=arguments)


def text(value: str) -> Content:
    return Content.from_text(value)


class ScriptedChatClient(FunctionInvocationLayer, ChatMiddlewareLayer, ChatTelemetryLayer,  # type: ignore[misc]
                         BaseChatClient):
    """A chat client whose "model" replays a script; it records what it was sent."""

    def __init__(self, turns: Sequence[Turn] = (), *, default: Turn | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.turns: list[Turn] = list(turns)
        self.default: Turn = default if default is not None else [text("done")]
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
                    data["contents"] = [c for c in data.get("contents", [])
                                        if not (isinstance(c, dict) and c.get("type") == "function_call")]
                lines.append(json.dumps(data, default=str, ensure_ascii=False))
        return "\n".join(lines)

    def tool_results(self) -> list[Content]:
        """The function results the model received in its latest request."""
        if not self.received:
            return []
        return [c for m in self.received[-1] for c in m.contents if c.type == "function_result"]


def result_text(result: Content) -> str:
    """The text of a function_result as the model sees it."""
    value = result.result
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(getattr(i, "text", None) or "" for i in value)
    return json.dumps(value, default=str)


def load_fixture(*names: str) -> guardrails.PolicySet:
    """Load policy fixtures from tests/data/af (all of them by default)."""
    if not names:
        return guardrails.load(FIXTURES)
    return guardrails.load([FIXTURES / n for n in names])


def load_text(tmp_path: Path, yaml_text: str, name: str = "policy.yaml") -> guardrails.PolicySet:
    """Write a policy document to tmp_path and load it (for one-off policies in a test)."""
    path = tmp_path / name
    path.write_text(yaml_text, encoding="utf-8")
    return guardrails.load(path)


def agent_with(client: ScriptedChatClient, tools: Sequence[Any], middleware: Sequence[Any],
               **options: Any) -> Agent:
    """An Agent on the scripted client. ``options`` go to the function-invocation config."""
    if options:
        client.function_invocation_configuration.update(options)  # type: ignore[typeddict-item]
    return Agent(client=client, tools=list(tools), middleware=list(middleware))


async def run(agent: Agent, message: Any, *, stream: bool = False, **kwargs: Any) -> Any:
    """Run non-streaming or streaming (consuming every update) and return the final response."""
    if not stream:
        return await agent.run(message, **kwargs)
    response_stream: ResponseStream[Any, Any] = agent.run(message, stream=True, **kwargs)
    async for _ in response_stream:
        pass
    return await response_stream.get_final_response()


class RecordingSpan(CallSpan):
    def __init__(self, owner: RecordingTelemetry, tool: str) -> None:
        self.owner = owner
        self.tool = tool

    def record(self, decision: Decision, duration_s: float) -> None:
        self.owner.decisions.append(decision)

    def fail(self, error: BaseException) -> None:
        self.owner.failures.append(error)


class RecordingTelemetry(GuardTelemetry):
    """Captures what the guard hands to telemetry: decisions, guard failures, halts."""

    def __init__(self) -> None:
        super().__init__()
        self.decisions: list[Decision] = []
        self.failures: list[BaseException] = []
        self.halts: list[Decision] = []

    @contextmanager
    def call_span(self, *, tool: str, call_id: str | None) -> Iterator[CallSpan]:
        yield RecordingSpan(self, tool)

    def record_halt(self, decision: Decision) -> None:
        self.halts.append(decision)


def guarded(policies: guardrails.PolicySet, telemetry: GuardTelemetry | None = None,
            *, strict: bool = False, **function_kwargs: Any) -> list[Any]:
    """Like ``guard()`` but with a telemetry object of the test's choosing."""
    from guardrails.agent_framework import GuardFunctionMiddleware, GuardRunMiddleware
    from guardrails.agent_framework._secrets import install_log_filter

    install_log_filter()
    return [GuardRunMiddleware(policies, telemetry=telemetry, strict=strict),
            GuardFunctionMiddleware(policies, telemetry=telemetry, **function_kwargs)]


def approve_all(response: Any, approved: bool = True) -> Message:
    """The user's answer to every approval request in a response."""
    return Message(role="user", contents=[r.to_function_approval_response(approved=approved)
                                          for r in response.user_input_requests])

