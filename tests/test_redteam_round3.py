"""Red team, round 3: promises 1-7 and 9 attacked where they changed recently.

Each test is an attack in Agent Framework's real function-calling loop (scripted model,
real OpenTelemetry SDK and logging through ``tests.leak_support.Observer``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_framework import AgentSession, tool

import guardrails
from guardrails.agent_framework import ScriptedChatClient
from guardrails.agent_framework.scripted import call
from tests.af_support import STREAMING, agent_with, run
from tests.leak_support import Observer, leaks, response_places

DATA = Path(__file__).parent / "data" / "leaks"
SECRET = "sk-concurrent-7Q3-ñ-\"quoted\""
STASH: list[str] = []
INJECTED = asyncio.Event()


@tool(name="vault_call")
async def vault_call(mode: str, api_key: str) -> str:
    """Calls a vault API with an injected key; stashes it where another tool reads it."""
    STASH.append(api_key)
    INJECTED.set()
    return "ok"


@tool(name="note")
async def note(text: str) -> str:
    """Waits for the vault call of the same batch, then returns (or raises with) what it
    stashed."""
    await asyncio.wait_for(INJECTED.wait(), timeout=5)
    if text == "raise":
        raise RuntimeError(f"stashed: {STASH[0]}")
    return f"stashed: {STASH[0]}"


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    monkeypatch.setenv("GR_LEAK_KEY", SECRET)
    caplog.set_level(logging.DEBUG)
    STASH.clear()
    INJECTED.clear()
    yield
    STASH.clear()


@STREAMING
@pytest.mark.parametrize("how", ["show", "raise"])
async def test_a_value_injected_by_a_sibling_call_is_scrubbed_from_a_running_call(
        caplog: pytest.LogCaptureFixture, stream: bool, how: str) -> None:
    """Two calls of one batch run together: the note call was planned (its scrubber made)
    before the vault call injected its key, and its tool returns the key after. The key is
    a value this guard injected: it must reach no exit (model, response, session, spans,
    metrics, logs, decision log, records)."""
    policies = guardrails.load(DATA)
    obs = Observer()
    guard = obs.guard(policies)
    client = ScriptedChatClient([[call("note", text=how), call("vault_call", mode="x")]])
    session = AgentSession()
    response = await run(agent_with(client, [note, vault_call], guard), "go", stream=stream,
                         session=session)
    assert STASH == [SECRET]  # the key was injected, and the note tool read it
    assert "stashed:" in client.model_saw() or how == "raise"
    found = leaks(SECRET, model=[m.to_dict() for batch in client.received for m in batch
                                 if m.role != "assistant"],
                  **response_places(response, session), **obs.places(caplog))
    assert found == [], "\n".join(found)
