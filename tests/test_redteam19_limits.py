"""Red team 19: attacks that held, pinned where the line between held and a stated limit is.

- **Halts through a sub-agent a tool runs in a worker thread** (promise 4). A tool that runs
  a guarded sub-agent with ``asyncio.to_thread`` (which copies the caller's context) halts
  its caller when the sub-agent halts, even when it catches the ``PolicyViolation``; a run
  started where the context does not follow (a bare ``threading.Thread``) is a run of its
  own (docs/security-model.md, promise 4's limits).
- **A stash of a rotated key read in another session** (promise 5). One guard for the
  agents whose tools share state scrubs a key it injected in an earlier session, rotated
  since, when a tool returns it from a cache; a guard built per session cannot (stated in
  promise 5's memory paragraph).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from agent_framework import Agent, AgentSession, tool

from guardrails import PolicyViolation
from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework.scripted import call, text
from tests.af_support import STREAMING, load_text, run

RAN: list[str] = []
STASH: list[str] = []

HALTS = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: halts}
spec:
  match: {tools: ["wipe", "delegate", "after"]}
  rules:
    - {name: no-wiping, when: 'tool.name == "wipe"', action: halt, message: no wiping}
"""
INJECTS = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: api}
spec:
  match: {tools: ["fetch"]}
  secrets:
    inject:
      api_key: {env: GR_RT19_KEY}
"""


@pytest.fixture(autouse=True)
def _clear() -> Any:
    RAN.clear()
    STASH.clear()
    yield
    RAN.clear()
    STASH.clear()


@tool
def wipe() -> str:
    RAN.append("wipe")
    return "wiped"


@tool
def after() -> str:
    RAN.append("after")
    return "after ran"


@STREAMING
async def test_a_sub_agent_in_a_worker_thread_still_halts_its_caller(tmp_path: Path,
                                                                    stream: bool) -> None:
    middleware = guard(load_text(tmp_path, HALTS))

    @tool
    async def delegate() -> str:
        async def sub() -> str:
            client = ScriptedChatClient([[call("wipe")], [text("sub done")]])
            try:
                return (await Agent(client=client, tools=[wipe],
                                    middleware=middleware).run("wipe")).text
            except PolicyViolation:
                return "nothing happened"  # the tool hides the halt

        return await asyncio.to_thread(lambda: asyncio.run(sub()))

    client = ScriptedChatClient([[call("delegate")], [call("after")], [text("done")]])
    agent = Agent(client=client, tools=[delegate, after], middleware=middleware)
    with pytest.raises(PolicyViolation):
        await run(agent, "go", stream=stream)
    assert RAN == []  # neither the wipe nor anything after it


@tool
def fetch(url: str, api_key: str) -> str:
    STASH.append(f"GET {url}?key={api_key}")  # a response cache shared by sessions
    return "fetched"


@tool
def recent() -> str:
    return "recent requests: " + " | ".join(STASH)


async def test_one_guard_scrubs_a_rotated_key_another_session_stashed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    middleware = guard(load_text(tmp_path, INJECTS))
    seen: list[str] = []
    for key in ("sk-rotated-old-7d1c40a9", "sk-rotated-new-52be77f3"):
        monkeypatch.setenv("GR_RT19_KEY", key)
        client = ScriptedChatClient([[call("fetch", url="https://api.example")],
                                     [call("recent")], [text("done")]])
        agent = Agent(client=client, tools=[fetch, recent], middleware=middleware)
        await agent.run("go", session=AgentSession())
        seen.append(client.model_saw())
    assert "7d1c40a9" not in seen[1] and "52be77f3" not in seen[1]
    assert "[REDACTED]" in seen[1]
