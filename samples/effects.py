"""A guarded agent showing each effect, offline (a scripted stand-in for the model).

    .venv/bin/python samples/effects.py

The policies are tests/data/af/*.yaml-style documents written inline below.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from agent_framework import Agent, Content, Message, tool

import guardrails
from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework.scripted import call, result_text

POLICY = """
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: payments}
spec:
  match: {tools: [send_money]}
  params: {known: [UK12, DE99]}
  repairs:
    - name: amount-as-string
      when: 'type(args.amount) == string'
      set: {amount: 'double(args.amount.replace(",", ""))'}
  rules:
    - name: unknown-recipient
      when: '!(args.recipient in params.known)'
      action: deny
      message: Recipient is not a known payee.
    - name: absurd-amount
      when: 'args.amount > 100000.0'
      action: halt
      message: Amount is absurd; the run stops.
    - name: large-amount
      when: 'args.amount > 1000.0'
      action: require_approval
      message: Payments above 1000 need a human approval.
"""


@tool
def send_money(recipient: str, amount: float) -> str:
    """Send money to a payee."""
    return f"sent {amount:.2f} to {recipient}"


def model_call(recipient: str, amount: Any) -> list[Content]:
    """The model's next move: one call to send_money (then it answers "done")."""
    return [call("send_money", f"c-{recipient}-{amount}", recipient=recipient, amount=amount)]


def tool_result(response: Any) -> str:
    for message in response.messages:
        for content in message.contents:
            if content.type == "function_result":
                return result_text(content)
    return ""


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "payments.yaml"
        path.write_text(POLICY, encoding="utf-8")
        policies = guardrails.load(path)
    model = ScriptedChatClient()
    agent = Agent(client=model, tools=[send_money], middleware=guard(policies))

    model.turns = [model_call("UK12", "12.50")]
    print("allow:   ", tool_result(await agent.run("pay UK12 12.50")))

    model.turns = [model_call("XX00", 5)]
    print("deny:    ", tool_result(await agent.run("pay XX00 5")))

    session = agent.create_session()
    model.turns = [model_call("UK12", "1,500.00")]
    paused = await agent.run("pay UK12 1,500.00", session=session)
    [request] = paused.user_input_requests
    assert request.function_call is not None
    print("approval:", request.additional_properties["reason"],
          request.function_call.parse_arguments())
    answer = Message(role="user", contents=[request.to_function_approval_response(approved=True)])
    print("approved:", tool_result(await agent.run(answer, session=session)))

    model.turns = [model_call("UK12", 500000)]
    try:
        await agent.run("pay UK12 500000")
    except guardrails.PolicyViolation as violation:
        print("halt:    ", violation.decision.message, [r.rule for r in violation.decision.rules])


if __name__ == "__main__":
    asyncio.run(main())
