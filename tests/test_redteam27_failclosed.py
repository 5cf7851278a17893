"""Red team 27d: promises 3 (fail closed) and 1 (every call decided before it runs).

An error in the guard, or in anything the guard depends on (the host's principal callable,
secret provider, counter store, logging handlers, OpenTelemetry processors, the tool's own
attributes), must never let a call through, crash the run, or hang it. All in the
framework's real loop (``ScriptedChatClient`` + ``Agent`` + ``guard(policies)``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_framework import tool

import guardrails
from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework.scripted import call, result_text, text
from tests.af_support import STREAMING, agent_with, load_text, run

RAN: list[tuple[str, Any]] = []

POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: pay}
spec:
  match: {tools: ["pay", "pay_later"]}
  rules:
    - {name: cap, when: 'args.amount > 100', action: deny, message: Over the cap.}
"""

ROLE_POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: pay}
spec:
  match: {tools: ["pay"]}
  rules:
    - {name: admins-only, when: 'principal.role != "admin"', action: deny}
"""

BLOCKED = "Error: the guard could not evaluate the call to pay, so it was blocked."


@tool(name="pay")
def pay(amount: int) -> str:
    """Pays an amount."""
    RAN.append(("pay", amount))
    return f"paid {amount}"


@pytest.fixture(autouse=True)
def _clear() -> Iterator[None]:
    RAN.clear()
    yield
    RAN.clear()


def _policies(tmp_path: Path, text_: str = POLICY) -> guardrails.PolicySet:
    return load_text(tmp_path, text_)


# -- the host's principal callable --------------------------------------------------------


class _Unprintable(Exception):
    """An exception whose text cannot be made: telemetry and logs must not need it."""

    def __str__(self) -> str:
        raise RuntimeError("no text")

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


class _HostDown(BaseException):
    """A host's own BaseException subclass (not a cancellation, not an exit)."""


def _raising(exc: BaseException) -> Any:
    def principal(_context: Any) -> dict[str, Any]:
        raise exc
    return principal


@STREAMING
@pytest.mark.parametrize("exc", [RuntimeError("down"), _Unprintable(), RecursionError(),
                                 MemoryError(), StopIteration(), StopAsyncIteration()],
                         ids=["runtime", "unprintable", "recursion", "memory", "stopiteration",
                              "stopasynciteration"])
async def test_a_principal_that_raises_blocks_the_call_and_the_run_goes_on(
        tmp_path: Path, stream: bool, exc: BaseException) -> None:
    client = ScriptedChatClient([[call("pay", amount=5)], [text("done")]])
    agent = agent_with(client, [pay], guard(_policies(tmp_path), principal=_raising(exc)))
    response = await run(agent, "go", stream=stream)
    assert RAN == []
    assert [result_text(r) for r in client.tool_results()] == [BLOCKED]
    assert response.text == "done"


@pytest.mark.parametrize("exc", [_HostDown(), GeneratorExit(), asyncio.CancelledError()],
                         ids=["own-baseexception", "generatorexit", "cancelled"])
async def test_a_principal_that_raises_a_base_exception_never_runs_the_call(
        tmp_path: Path, exc: BaseException) -> None:
    client = ScriptedChatClient([[call("pay", amount=5), call("pay", amount=6, call_id="c2")],
                                 [text("done")]])
    agent = agent_with(client, [pay], guard(_policies(tmp_path), principal=_raising(exc)))
    # (The run ends: asyncio's own exceptions are not the guard's to swallow. A
    # GeneratorExit raised in a coroutine becomes Python's RuntimeError.)
    with pytest.raises((type(exc), RuntimeError)):
        await agent.run("go")
    assert RAN == []


class _Liar(str):
    """Says it equals anything: the guard judges its data, never its equality."""

    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False

    def __hash__(self) -> int:
        return str.__hash__(self)


class _EvilKey(str):
    def __eq__(self, other: object) -> bool:
        raise RuntimeError("no equality")

    def __hash__(self) -> int:
        return str.__hash__(self)


def _self_referencing() -> dict[str, Any]:
    me: dict[str, Any] = {"role": "admin"}
    me["me"] = me
    return me


@pytest.mark.parametrize("value", [
    ["role", "admin"],
    "admin",
    _self_referencing(),
    {_EvilKey("role"): "admin"},
    {"role": _EvilKey("user")},
    {"role": _Liar("user")},
    {"role": "admin", "blob": "x" * 3_000_000},
    {"role": "admin", **{f"k{i}": i for i in range(200_000)}},
], ids=["list", "str", "self-reference", "evil-key", "evil-value", "liar-value", "huge-text", "huge-dict"])
async def test_a_principal_that_cannot_be_read_blocks_the_call(tmp_path: Path,
                                                               value: Any) -> None:
    client = ScriptedChatClient([[call("pay", amount=5)], [text("done")]])
    agent = agent_with(client, [pay], guard(_policies(tmp_path, ROLE_POLICY),
                                            principal=lambda _c: value))
    response = await agent.run("go")
    assert RAN == []
    assert response.text == "done"


async def test_the_admin_principal_runs_the_call(tmp_path: Path) -> None:
    """The oracle of the test above: a readable admin principal does run the call."""
    client = ScriptedChatClient([[call("pay", amount=5)], [text("done")]])
    agent = agent_with(client, [pay], guard(_policies(tmp_path, ROLE_POLICY),
                                            principal=lambda _c: {"role": "admin"}))
    await agent.run("go")
    assert RAN == [("pay", 5)]
