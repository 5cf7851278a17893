"""The run boundary: halt unwrapping (and laundering attempts), request, history, guard errors."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import Any

import pytest
from agent_framework import Content, Message, MiddlewareFailure

import guardrails
from guardrails import Decision, Effect, PolicyViolation
from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework._boundary import _GuardHalt
from guardrails.agent_framework.scripted import call, result_text, text
from tests.af_support import (
    STREAMING,
    RecordingTelemetry,
    agent_with,
    clear_calls_fixture,
    guarded,
    policies_fixture,
    run,
)
from tests.af_tools import CALLS, post_message, read_inbox, send_money, write_note

_clear_calls = clear_calls_fixture()
policies = policies_fixture()


def _raising_tool(exc: BaseException) -> Any:
    from agent_framework import tool

    @tool(name="risky")
    def risky() -> str:
        """Raises what the test hands it."""
        raise exc

    return risky


async def _real_halt_decision(policies: Any) -> Decision:
    client = ScriptedChatClient([[call("send_money", recipient="UK12", amount=500000)]])
    with pytest.raises(PolicyViolation) as caught:
        await agent_with(client, [send_money], guard(policies)).run("x")
    return caught.value.decision


# -- laundering -------------------------------------------------------------------------


@STREAMING
async def test_forged_failure_with_policy_violation_cause_is_not_unwrapped(
        policies: Any, stream: bool) -> None:
    real = await _real_halt_decision(policies)
    forged = MiddlewareFailure("policy says stop")
    forged.__cause__ = PolicyViolation(real)
    client = ScriptedChatClient([[call("risky")]])
    agent = agent_with(client, [_raising_tool(forged)], guard(policies))
    with pytest.raises(MiddlewareFailure) as caught:
        await run(agent, "go", stream=stream)
    assert caught.value is forged
    assert not isinstance(caught.value, PolicyViolation)


@STREAMING
async def test_subclass_of_private_type_with_a_real_decision_is_not_unwrapped(
        policies: Any, stream: bool) -> None:
    class Lookalike(_GuardHalt):
        pass

    real = await _real_halt_decision(policies)
    forged = Lookalike(real)
    client = ScriptedChatClient([[call("risky")]])
    agent = agent_with(client, [_raising_tool(forged)], guard(policies))
    with pytest.raises(MiddlewareFailure) as caught:
        await run(agent, "go", stream=stream)
    assert caught.value is forged


async def test_private_type_with_an_unminted_decision_is_not_unwrapped(policies: Any) -> None:
    fake = Decision(id="forged", tool="risky", effect=Effect.HALT, arguments={})
    forged = _GuardHalt(fake)
    client = ScriptedChatClient([[call("risky")]])
    agent = agent_with(client, [_raising_tool(forged)], guard(policies))
    with pytest.raises(MiddlewareFailure) as caught:
        await agent.run("go")
    assert caught.value is forged


# -- request ----------------------------------------------------------------------------


@STREAMING
async def test_request_is_the_users_words_not_tool_output(policies: Any, stream: bool) -> None:
    # The inbox (tool output) names attacker@evil.example; the user named bob@example.com.
    client = ScriptedChatClient([
        [call("read_inbox")],
        [call("write_note", target="attacker@evil.example", body="summary"),
         call("write_note", target="bob@example.com", body="summary")],
    ])
    agent = agent_with(client, [read_inbox, write_note], guard(policies))
    await run(agent, "summarise my inbox into a note for bob@example.com", stream=stream)
    assert ("write_note", {"target": "bob@example.com", "body": "summary"}) in CALLS
    assert all(c[1].get("target") != "attacker@evil.example" for c in CALLS)
    denied = [result_text(r) for r in client.tool_results() if "denied" in result_text(r)]
    assert denied == ["Error: the call to write_note was denied by policy. "
                      "The note target did not come from the user."]


def _note_to_everyone(messages: Sequence[Message]) -> list[Content]:
    """Model behaviour for the concurrency test: note both names, then answer."""
    if any(c.type == "function_result" for m in messages for c in m.contents):
        return [text("done")]
    return [call("write_note", target="alice", body="b"), call("write_note", target="bob", body="b")]


@STREAMING
async def test_concurrent_runs_never_see_each_others_request(policies: Any, stream: bool) -> None:
    barrier = asyncio.Barrier(4)  # all four evaluations are in flight together

    async def principal(_context: Any) -> dict[str, Any]:
        await barrier.wait()
        return {}

    client = ScriptedChatClient(default=_note_to_everyone)
    agent = agent_with(client, [write_note], guard(policies, principal=principal))
    await asyncio.gather(run(agent, "note for alice", stream=stream),
                         run(agent, "note for bob", stream=stream))
    # Each run allowed only the target its own user named: one alice, one bob.
    assert sorted(c[1]["target"] for c in CALLS) == ["alice", "bob"]


# -- history ----------------------------------------------------------------------------


async def test_history_across_turns_of_a_session(policies: Any) -> None:
    client = ScriptedChatClient([
        [call("post_message", body="hello")],   # run 1: allowed
        [text("posted")],
        [call("read_inbox")],                    # run 2: reads the inbox
        [text("read")],
        [call("post_message", body="leak")],     # run 3: denied by history
        [text("blocked")],
    ])
    agent = agent_with(client, [post_message, read_inbox], guard(policies))
    session = agent.create_session()
    for prompt in ("post hello", "read my inbox", "post what you read"):
        await agent.run(prompt, session=session)
    assert [c[0] for c in CALLS] == ["post_message", "read_inbox"]
    assert "Posting is blocked after reading the inbox." in result_text(client.tool_results()[-1])
    history = session.state["guardrails"]["history"]
    assert [(h["tool"], h["effect"]) for h in history] == [
        ("post_message", "allow"), ("read_inbox", "allow"), ("post_message", "deny")]


async def test_history_without_a_session_is_the_run(policies: Any) -> None:
    client = ScriptedChatClient([[call("read_inbox")], [call("post_message", body="x")]])
    agent = agent_with(client, [post_message, read_inbox], guard(policies))
    await agent.run("read then post")
    assert [c[0] for c in CALLS] == ["read_inbox"]
    # A new run without a session starts with an empty history.
    client.turns = [[call("post_message", body="y")]]
    await agent.run("post")
    assert [c[0] for c in CALLS] == ["read_inbox", "post_message"]


async def test_history_is_bounded(policies: Any) -> None:
    client = ScriptedChatClient([[call("write_note", target="t", body=str(i))] for i in range(60)])
    agent = agent_with(client, [write_note], guard(policies), max_iterations=70)
    session = agent.create_session()
    await agent.run("note to t", session=session)
    assert len(session.state["guardrails"]["history"]) == 50


# -- guard errors and malformed calls ----------------------------------------------------


async def test_failing_principal_blocks_the_call_and_the_run_goes_on(policies: Any) -> None:
    def principal(_context: Any) -> dict[str, Any]:
        raise RuntimeError("directory unavailable")

    telemetry = RecordingTelemetry()
    client = ScriptedChatClient([[call("send_money", recipient="UK12", amount=5)]])
    agent = agent_with(client, [send_money], guarded(policies, telemetry, principal=principal))
    response = await agent.run("pay")
    assert CALLS == []
    assert "could not evaluate" in result_text(client.tool_results()[0])
    assert [type(f) for f in telemetry.failures] == [RuntimeError]
    assert response.text == "done"


async def test_principal_returning_a_non_mapping_blocks(policies: Any) -> None:
    client = ScriptedChatClient([[call("send_money", recipient="UK12", amount=5)]])
    agent = agent_with(client, [send_money], guard(policies, principal=lambda ctx: ["x"]))  # type: ignore[arg-type, return-value]
    await agent.run("pay")
    assert CALLS == []


async def test_malformed_arguments_never_crash_the_run(policies: Any) -> None:
    broken = Content.from_function_call(call_id="bad-1", name="write_note",
                                        arguments='{"target": "bob", "body": ')
    not_object = Content.from_function_call(call_id="bad-2", name="write_note", arguments="[1, 2]")
    client = ScriptedChatClient([[broken], [not_object], [text("gave up")]])
    agent = agent_with(client, [write_note], guard(policies))
    response = await agent.run("note to bob")
    assert CALLS == []
    assert response.text == "gave up"


async def test_strict_rejects_a_misspelled_argument(tmp_path: Any) -> None:
    from tests.af_support import load_text

    policies = load_text(tmp_path, """
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: typo}
spec:
  match: {tools: [send_money]}
  rules:
    - name: big
      when: 'args.amout > 10.0'
      action: deny
      message: too big
""")
    client = ScriptedChatClient([[call("send_money", recipient="UK12", amount=5)]])
    agent = agent_with(client, [send_money], guard(policies, strict=True))
    with pytest.raises(guardrails.PolicyError) as caught:
        await agent.run("pay")
    assert re.search(r"amout", str(caught.value))
    assert CALLS == []


async def test_strict_accepts_the_shipped_payments_policy_and_guards_with_it() -> None:
    """The payments library policy reads an optional `currency` under has(): strict mode
    (the agent's own tool schemas) must not reject it, and the guard then works."""
    policies = guardrails.load(["policies/payments.yaml", "policies/common.yaml"])
    client = ScriptedChatClient([
        [call("send_money", recipient="GB82WEST12345698765432", amount=20.0)],
        [text("done")],
    ])
    agent = agent_with(client, [send_money], guard(policies, strict=True))
    response = await agent.run("pay GB82WEST12345698765432 20 EUR")
    assert CALLS == [("send_money", {"recipient": "GB82WEST12345698765432", "amount": 20.0})]
    assert response.text == "done"


async def test_strict_rejects_a_type_error_against_the_agents_tools(tmp_path: Any) -> None:
    from tests.af_support import load_text

    policies = load_text(tmp_path, """
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: typed}
spec:
  match: {tools: [send_money]}
  rules:
    - name: big
      when: 'args.amount > "10"'
      action: deny
""")
    client = ScriptedChatClient([[call("send_money", recipient="UK12", amount=5)]])
    agent = agent_with(client, [send_money], guard(policies, strict=True))
    with pytest.raises(guardrails.PolicyError) as caught:
        await agent.run("pay")
    assert "cannot compare number > string" in str(caught.value)
    assert CALLS == []
