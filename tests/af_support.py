"""Test-only helpers for the Agent Framework tests (the scripted model is public).

The offline model is ``guardrails.agent_framework.ScriptedChatClient`` (tests use it as a user
would); this module adds what only tests need::

    from guardrails.agent_framework import ScriptedChatClient, guard
    from guardrails.agent_framework.scripted import call, text
    from tests.af_support import STREAMING, agent_with, policies_fixture, run

    policies = policies_fixture()          # module-scoped fixture: tests/data/af/*.yaml

    @STREAMING
    async def test_pay(policies, stream):
        client = ScriptedChatClient([[call("send_money", recipient="UK12", amount="1,500.00")]])
        response = await run(agent_with(client, [send_money], guard(policies)), "pay", stream=stream)

``RecordingTelemetry`` captures every decision the guard records; ``guarded`` is ``guard()``
with a telemetry object of the test's choosing.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from agent_framework import Agent, Message, ResponseStream

import guardrails
from guardrails.agent_framework import ScriptedChatClient
from guardrails.engine.decision import Decision
from guardrails.telemetry import CallSpan, GuardTelemetry
from tests.af_tools import CALLS

FIXTURES = Path(__file__).parent / "data" / "af"

STREAMING = pytest.mark.parametrize("stream", [False, True], ids=["run", "stream"])
"""Runs a test once non-streaming and once streaming (``stream`` parameter)."""


def policies_fixture(*names: str) -> Any:
    """A module-scoped ``policies`` fixture: assign it in a test module as ``policies = ...``.

    A factory, not an imported fixture, so ruff sees no unused import shadowed by the
    test's parameter of the same name.
    """

    @pytest.fixture(scope="module", name="policies")
    def _policies() -> guardrails.PolicySet:
        return load_fixture(*names)

    return _policies


def clear_calls_fixture() -> Any:
    """An autouse fixture emptying ``tests.af_tools.CALLS`` around each test of a module."""

    @pytest.fixture(autouse=True)
    def _clear_calls() -> Iterator[None]:
        CALLS.clear()
        yield
        CALLS.clear()

    return _clear_calls


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


ORIGIN_MAIL = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: mail}
spec:
  match: {tools: ["send_email"]}
  uses: [origin]
  params: {known: [carol@acme.com]}
  rules:
    - {name: unknown-origin, when: 'origin.unknown(args.to)', action: deny,
       message: Nobody gave that recipient.}
    - {name: from-content, when: '!origin.vouched(args.to) && !origin.unknown(args.to)',
       action: deny, message: Only content gave that recipient.}
"""
"""send_email's recipient must come from the user (the request, the deployment's list
or a trusted tool): the origin library's two rules, as the origin red teams attack them."""

UNTRUSTED_UPLOAD = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: upload}
spec:
  match: {tools: ["upload"]}
  rules:
    - {name: injected-destination, when: 'untrusted(args.url)', action: deny}
"""
"""upload's destination must not come from content (``untrusted``): the provenance tests'
one rule, normalised or charged."""
