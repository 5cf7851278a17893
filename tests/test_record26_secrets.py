"""Kept readings (record26) and secrets (promise 5): the reading a history entry keeps is
made from the scrubbed result, so a secret the tool echoes, in any spelling the reading
decodes (percent-encoded inside a URL, fullwidth, upper case in a host), is in neither the
result nor its reading, nor anywhere else in the session's state. Real loop."""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from agent_framework import Agent, AgentSession, tool

from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework._state import STATE_KEY
from guardrails.agent_framework.scripted import call, text
from tests.af_support import load_text
from tests.test_redteam20_history import INJECTS, POLICY

KEY = "vaultbankkey0123456789"


def _echoes(key: str) -> list[str]:
    pct = "".join(f"%{b:02X}" for b in key.encode())
    wide = "".join(chr(ord(c) + 0xFEE0) for c in key)
    # (``%41bc`` beside it: a spelling the reading undoes, so that a reading is kept)
    return [f"see https://files.example/{pct}/report ok, https://x.example/%41bc",
            f"see https://files.example/{urllib.parse.quote(key)}?k={pct.lower()} "
            "https://x.example/%41bc",
            f"日本語のページ https://{wide}.example/x です",
            f"mirror: https://{key}.example/ and {wide}, https://x.example/%41bc"]


@pytest.mark.parametrize("echo", range(4))
def test_a_kept_reading_never_holds_the_injected_secret(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, echo: int) -> None:
    monkeypatch.setenv("BANK_KEY", KEY)
    page = _echoes(KEY)[echo]

    @tool
    def pay(to: str, amount: int, api_key: str = "") -> str:
        return page.replace(KEY, api_key) if api_key == KEY else "no key"

    policies = load_text(tmp_path, POLICY % INJECTS)
    session = AgentSession()
    client = ScriptedChatClient([[call("pay", to="x", amount=1)], [text("done")]])
    agent = Agent(client=client, tools=[pay], middleware=guard(policies))
    asyncio.run(agent.run("pay", session=session))
    history: list[dict[str, Any]] = session.state[STATE_KEY]["history"]
    assert history and history[-1]["tool"] == "pay"
    assert "REDACTED" in history[-1]["result"], history[-1]  # the tool did echo the key
    assert "low" in history[-1].get("reading", {}), history[-1]  # and a reading was kept
    state = json.dumps(session.state, ensure_ascii=False, default=str)
    wide = "".join(chr(ord(c) + 0xFEE0) for c in KEY)
    for form in (KEY, KEY.upper(), wide, urllib.parse.quote(KEY)):
        assert form not in state, (form, history[-1])
    assert KEY not in client.model_saw()
