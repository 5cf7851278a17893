"""Quickstart: load the policy library, evaluate calls directly, then guard an agent.

    .venv/bin/python samples/quickstart.py

Runs offline: a scripted stand-in replaces the model (swap in any Agent Framework chat
client, e.g. OpenAIChatClient, see samples/real_model.py); the agent loop and the guard
are the real ones.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from agent_framework import Agent, tool

import guardrails
from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework.scripted import call, result_text, text

POLICIES = Path(__file__).resolve().parent.parent / "policies"


def evaluate_directly(policies: guardrails.PolicySet) -> None:
    """PolicySet.evaluate is pure and synchronous: usable without any agent."""
    print("1. policies.evaluate(...)")
    decision = policies.evaluate(
        tool="send_money",
        args={"recipient": "GB82 WEST 1234 5698 7654 32", "amount": "120.00"},
        request="Pay Acme 120.00",
    )
    print(f"   effect={decision.effect} arguments={dict(decision.arguments)}")
    print(f"   repairs={[r.repair for r in decision.repairs]}")
    decision = policies.evaluate(
        tool="send_money",
        args={"recipient": "FR7630006000011234567890189", "amount": 50},
        request="Summarise my inbox",
    )
    print(f"   effect={decision.effect} rules={[f'{r.policy}/{r.rule}' for r in decision.rules]}")
    print(f"   message={decision.message}")


@tool
def send_money(recipient: str, amount: float) -> str:
    """Pay an amount in EUR to an IBAN."""
    print(f"   tool ran: send_money({recipient!r}, {amount!r})")
    return f"Paid {amount:.2f} EUR to {recipient}."


async def guard_an_agent(policies: guardrails.PolicySet) -> None:
    """guard() returns the middleware list for Agent(middleware=...)."""
    print("2. Agent(middleware=guard(policies))")
    client = ScriptedChatClient([
        [call("send_money", recipient="GB82WEST12345698765432", amount="120.00")],
        [call("send_money", recipient="FR7630006000011234567890189", amount=50)],
        [text("Paid Acme; the second payment was refused.")],
    ])
    agent = Agent(client=client, tools=[send_money], middleware=guard(policies))
    response = await agent.run("Pay Acme 120.00")
    print(f"   model was told: {result_text(client.tool_results()[-1])}")
    print(f"   agent answered: {response.text}")


def main() -> None:
    policies = guardrails.load(POLICIES)
    print(f"loaded {len(policies.policies)} policies, revision {policies.revision[:12]}")
    evaluate_directly(policies)
    asyncio.run(guard_an_agent(policies))


if __name__ == "__main__":
    main()
