"""The public offline model, used exactly as a user testing a guarded agent would use it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from agent_framework import Agent, Content, Message, tool

import guardrails
import guardrails.agent_framework as integration
from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework.scripted import call, result_text, text

POLICY = """
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: payments}
spec:
  match: {tools: [pay]}
  repairs:
    - name: amount-as-text
      when: 'type(args.amount) == string'
      set: {amount: 'double(args.amount.replace(",", ""))'}
  rules:
    - name: unknown-payee
      when: 'args.payee != "UK12"'
      action: deny
      message: Unknown payee.
"""

PAID: list[tuple[str, float]] = []


@tool
def pay(payee: str, amount: float) -> str:
    """Pay an amount to a payee."""
    PAID.append((payee, amount))
    return f"paid {amount:.2f} to {payee}"


@pytest.fixture
def policies(tmp_path: Path) -> guardrails.PolicySet:
    PAID.clear()
    path = tmp_path / "payments.yaml"
    path.write_text(POLICY, encoding="utf-8")
    return guardrails.load(path)


def test_public_names_are_exported() -> None:
    """The client is on the package; its generic helpers stay in their own module."""
    assert "ScriptedChatClient" in integration.__all__
    assert integration.ScriptedChatClient is integration.scripted.ScriptedChatClient
    for name in ("ScriptedTurn", "call", "text", "result_text"):
        assert name not in integration.__all__
        assert name in integration.scripted.__all__


@pytest.mark.parametrize("stream", [False, True], ids=["run", "stream"])
async def test_a_user_tests_a_guarded_agent_offline(policies: guardrails.PolicySet,
                                                    stream: bool) -> None:
    client = ScriptedChatClient([
        [call("pay", payee="UK12", amount="1,500.00"), call("pay", payee="XX00", amount=5)],
        [text("paid UK12; XX00 was refused")],
    ])
    agent = Agent(client=client, tools=[pay], middleware=guard(policies))
    if stream:
        updates = agent.run("pay my bills", stream=True)
        async for _ in updates:
            pass
        response = await updates.get_final_response()
    else:
        response = await agent.run("pay my bills")
    assert PAID == [("UK12", 1500.0)]  # repaired from text; the unknown payee never paid
    told = [result_text(r) for r in client.tool_results()]
    assert told[0] == "paid 1500.00 to UK12"
    assert told[1].startswith("Error: the call to pay was denied by policy.")
    assert response.text == "paid UK12; XX00 was refused"
    assert len(client.received) == 2
    assert "Unknown payee." in client.model_saw()
    assert "1,500.00" not in client.model_saw()  # only in the model's own call...
    assert "1,500.00" in client.model_saw(own_calls=True)  # ...which own_calls includes


async def test_a_turn_can_react_to_what_the_model_was_sent(
        policies: guardrails.PolicySet) -> None:
    def answer(messages: Sequence[Message]) -> list[Content]:
        results = [c for m in messages for c in m.contents if c.type == "function_result"]
        return [text(f"the tool said: {result_text(results[-1])}")]

    client = ScriptedChatClient([[call("pay", "my-id", payee="UK12", amount=2)]],
                                default=answer)
    response = await Agent(client=client, tools=[pay], middleware=guard(policies)).run("pay")
    assert response.text == "the tool said: paid 2.00 to UK12"
    assert client.tool_results()[0].call_id == "my-id"


async def test_when_the_script_runs_out_the_model_answers_done(
        policies: guardrails.PolicySet) -> None:
    client = ScriptedChatClient()
    response = await Agent(client=client, tools=[pay], middleware=guard(policies)).run("hi")
    assert response.text == "done"
    assert client.tool_results() == []
    client.turns.append([text("scripted later")])
    assert (await Agent(client=client).run("again")).text == "scripted later"
