"""Shadow rollout: run new policies in audit mode before enforcing them.

    .venv/bin/python samples/shadow_rollout.py

guard(policies, mode="audit") evaluates every rule and repair and records the would-be
outcome (audit: true in the decision log), but changes nothing: calls run as if unguarded.
Read the decision log, tune the policies, then drop mode="audit". Policies can also opt in
one by one with `spec.mode: audit`. Offline: the model is a scripted stand-in.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agent_framework import Agent, tool

import guardrails
from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework.scripted import call

_LIBRARY = Path(__file__).resolve().parent.parent / "policies"
POLICIES = [_LIBRARY / "payments.yaml", _LIBRARY / "common.yaml"]  # common: shared functions


class PrintingLog:
    """A decision-log sink (anything with write(record)); production would use
    guardrails.telemetry.JsonLinesSink or the default Python logging sink."""

    def write(self, record: Mapping[str, Any]) -> None:
        fired = [f"{r['policy']}/{r['rule']}={r['action']}" for r in record["rules"]]
        print(f"   decision log: tool={record['tool']} effect={record['effect']} "
              f"audit={record['audit']} rules={fired}")


@tool
def send_money(recipient: str, amount: float) -> str:
    """Pay an amount in EUR to an IBAN."""
    print(f"   tool ran: send_money({recipient!r}, {amount!r})")
    return f"Paid {amount:.2f} EUR to {recipient}."


async def run(policies: guardrails.PolicySet, mode: str | None) -> None:
    client = ScriptedChatClient([
        [call("send_money", recipient="FR7630006000011234567890189", amount=300)],
    ])
    agent = Agent(client=client, tools=[send_money],
                  middleware=guard(policies, mode=mode, decision_log=PrintingLog()))
    await agent.run("Summarise my inbox")


async def main() -> None:
    policies = guardrails.load(POLICIES)
    print("1. mode='audit': the unknown payee is paid, the log says what enforce would do")
    await run(policies, "audit")
    print("2. enforced: the same call is denied")
    await run(policies, None)


if __name__ == "__main__":
    asyncio.run(main())
