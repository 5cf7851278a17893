"""Human approval: a require_approval rule pauses the call until someone decides.

    .venv/bin/python samples/approval_flow.py

The guard turns the call into the framework's function_approval_request. The request is
held in the AgentSession; the host shows it to a person and sends the answer back in the
same session. An approved call is evaluated again when it is replayed (deny and halt rules
still apply); a rejected one never runs; without a session there is nobody to ask, so the
call is denied (fail closed). Offline: the model is a scripted stand-in.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from agent_framework import Agent, Message, tool

import guardrails
from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework.scripted import call, result_text

_LIBRARY = Path(__file__).resolve().parent.parent / "policies"
POLICIES = [_LIBRARY / "payments.yaml", _LIBRARY / "common.yaml"]  # common: shared functions
ACME = "GB82WEST12345698765432"
PAID: list[float] = []


@tool
def send_money(recipient: str, amount: float) -> str:
    """Pay an amount in EUR to an IBAN."""
    print(f"   tool ran: send_money({recipient!r}, {amount!r})")
    PAID.append(amount)
    return f"Paid {amount:.2f} EUR to {recipient}."


def agent_for(policies: guardrails.PolicySet, amount: str) -> Agent:
    client = ScriptedChatClient([[call("send_money", recipient=ACME, amount=amount)]])
    return Agent(client=client, tools=[send_money], middleware=guard(policies))


async def ask(policies: guardrails.PolicySet, approve: bool) -> None:
    PAID.clear()
    agent = agent_for(policies, "2,500.00")
    session = agent.create_session()
    first = await agent.run("Pay Acme's invoice of 2,500.00", session=session)
    for request in first.user_input_requests:
        pending = request.function_call
        assert pending is not None
        print(f"   approval requested: {pending.name}{pending.parse_arguments()}")
        print(f"   reason: {request.additional_properties.get('reason')}")
    print(f"   the approver {'approves' if approve else 'rejects'}")
    answer = Message(role="user", contents=[
        r.to_function_approval_response(approved=approve) for r in first.user_input_requests])
    await agent.run(answer, session=session)
    print(f"   payments made: {PAID}")


async def without_session(policies: guardrails.PolicySet) -> None:
    agent = agent_for(policies, "2,500.00")
    client = agent.client
    assert isinstance(client, ScriptedChatClient)
    response = await agent.run("Pay Acme's invoice of 2,500.00")
    print(f"   approval requests: {len(response.user_input_requests)}")
    print(f"   model was told: {result_text(client.tool_results()[-1])}")


async def main() -> None:
    policies = guardrails.load(POLICIES)
    print("1. approved: the call runs once approved, with the repaired amount")
    await ask(policies, approve=True)
    print("2. rejected: the call never runs")
    await ask(policies, approve=False)
    print("3. no session: nobody can approve, so the call is denied")
    await without_session(policies)


if __name__ == "__main__":
    asyncio.run(main())
