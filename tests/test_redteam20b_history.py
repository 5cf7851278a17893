"""Red team 20b: the history section (``HistoryTurn.enter``) after a call that ended in it
abnormally: a halt raised inside it, a guard error inside it (a secret provider that
fails), a call cancelled while it waits for the counted turn. None may leave the section
held: the next call of the session, on this thread or another, is decided (not blocked
with "held by another call"), and the guard error blocked its own call (fail closed)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from agent_framework import Agent, AgentSession, tool

import guardrails
from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework._history import _SECTIONS
from guardrails.agent_framework._state import STATE_KEY
from guardrails.agent_framework.scripted import call, text
from tests.af_support import load_text

POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: payments}
spec:
  match: {tools: ["pay"]}
  secrets: {inject: {api_key: {env: BANK_KEY}}}
  rules:
    - name: stop
      when: args.amount == 13
      action: halt
      message: halted
"""
PAID: list[int] = []


@tool
def pay(to: str, amount: int, api_key: str = "") -> str:
    PAID.append(amount)
    return "paid"


class Vault:
    """Fails for the amount 7's call (a vault error, inside the section)."""

    fail = False

    def get(self, ref: str) -> str:
        if Vault.fail:
            raise RuntimeError("vault unreachable")
        return "vault-bank-key-0123456789"


@pytest.fixture(name="policies")
def _policies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> guardrails.PolicySet:
    monkeypatch.setenv("BANK_KEY", "unused")
    PAID.clear()
    Vault.fail = False
    return load_text(tmp_path, POLICY)


def _agent(middleware: Any, amount: int) -> tuple[Agent, ScriptedChatClient]:
    client = ScriptedChatClient([[call("pay", to="x", amount=amount)], [text("done")]])
    return Agent(client=client, tools=[pay], middleware=middleware), client


def _free(session: AgentSession) -> bool:
    section = _SECTIONS.get(id(session.state[STATE_KEY]))
    return section is None or (not section.lock.locked() and section.users == 0)


async def test_a_halt_and_a_vault_error_leave_the_section_free(
        policies: guardrails.PolicySet) -> None:
    middleware = guard(policies, secrets=Vault())
    session = AgentSession()
    agent, _ = _agent(middleware, 13)
    with pytest.raises(guardrails.PolicyViolation):  # the halt, inside the section
        await agent.run("pay", session=session)
    assert _free(session)
    Vault.fail = True
    agent, client = _agent(middleware, 7)
    await agent.run("pay", session=session)
    assert PAID == []  # the vault error blocked its call
    assert "blocked" in str(client.tool_results()[0].result)
    assert _free(session)
    Vault.fail = False
    errors: list[BaseException] = []

    def other_thread() -> None:
        try:
            asyncio.run(_agent(middleware, 5)[0].run("pay", session=session))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    thread = threading.Thread(target=other_thread)
    thread.start()
    thread.join(timeout=30)
    assert not errors and PAID == [5]
    agent, client = _agent(middleware, 6)
    await agent.run("pay", session=session)
    assert PAID == [5, 6]
    assert _free(session)
    effects = [e["effect"] for e in session.state[STATE_KEY]["history"]]
    assert effects == ["halt", "deny", "allow", "allow"], effects
