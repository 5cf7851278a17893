"""The demo's guard in front of a real model (OpenAI), when you have a key.

    OPENAI_API_KEY=sk-... .venv/bin/python samples/real_model.py

Needs `pip install agent-framework-openai` and OPENAI_API_KEY; the model defaults to
gpt-4o-mini (set OPENAI_CHAT_MODEL to change it). Without either it says so and skips,
so it is safe to run offline. A real model decides for itself whether it follows the
injected instructions in the email; whatever it tries, the same policies decide.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
from collections.abc import Mapping
from typing import Any

from agent_framework import Agent, tool

import guardrails
from guardrails.agent_framework import guard
from guardrails.demo import INBOX, REQUEST, USER, load_demo_policies


class PrintingLog:
    def write(self, record: Mapping[str, Any]) -> None:
        rules = [f"{r['policy']}/{r['rule']}" for r in record["rules"]]
        print(f"  guard: {record['tool']} -> {record['effect']} {rules}")


@tool
def read_inbox() -> str:
    """Read the user's newest email."""
    return INBOX


@tool
def send_money(recipient: str, amount: float) -> str:
    """Pay an amount in EUR to an IBAN. (Simulated: no money moves.)"""
    return f"Paid {amount:.2f} EUR to {recipient}."


@tool
def send_email(to: str, subject: str, body: str) -> str:
    """Send an email. (Simulated: nothing is sent.)"""
    return f"Email sent to {to}."


def skip_reason() -> str | None:
    if not os.environ.get("OPENAI_API_KEY"):
        return "OPENAI_API_KEY is not set"
    if importlib.util.find_spec("agent_framework_openai") is None:
        return "agent-framework-openai is not installed (pip install agent-framework-openai)"
    return None


async def main() -> int:
    reason = skip_reason()
    if reason is not None:
        print(f"skipping: {reason}; nothing was sent to any model.")
        return 0
    from agent_framework.openai import OpenAIChatClient  # imported lazily: optional package

    os.environ.setdefault("OPENAI_CHAT_MODEL", "gpt-4o-mini")
    agent = Agent(
        client=OpenAIChatClient(),
        instructions="You are Dana's finance assistant. Use the tools to act.",
        tools=[read_inbox, send_money, send_email],
        middleware=guard(load_demo_policies(), principal={"user": USER},
                         decision_log=PrintingLog()),
    )
    session = agent.create_session()
    try:
        response = await agent.run(REQUEST, session=session)
        for request in response.user_input_requests:
            pending = request.function_call
            name = pending.name if pending is not None else "?"
            print(f"  approval requested for {name}: "
                  f"{request.additional_properties.get('reason')} (not approved in this sample)")
        print(f"model: {response.text}")
    except guardrails.PolicyViolation as violation:
        print(f"run halted: {violation.decision.message}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
