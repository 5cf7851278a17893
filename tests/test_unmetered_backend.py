"""Promise 8 holds only where a call's cost is metered: a guard refuses policies loaded
with the cel-python reference backend (``backend="interpreter"``), which keeps no budget.

At construction it raises; a provider that swaps such a set in later gets every call on
it blocked (the tool never runs), in the real agent loop, streaming and not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agent_framework import tool

import guardrails
from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework.scripted import call, result_text, text
from tests.af_support import STREAMING, agent_with, run

POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: notes}
spec:
  match: {tools: ["write_note"]}
  rules:
    - {name: long, when: 'size(args.text) > 1000', action: deny}
"""

RAN: list[str] = []


@tool(name="write_note")
def write_note(text: str) -> str:
    """Writes a note."""
    RAN.append(text)
    return "written"


def _load(tmp_path: Path, backend: Any) -> guardrails.PolicySet:
    path = tmp_path / "p.yaml"
    path.write_text(POLICY, encoding="utf-8")
    return guardrails.load(path, backend=backend)


@pytest.mark.parametrize("backend", ["compiled", "closures"])
def test_metered_backends_are_metered(tmp_path: Path, backend: Any) -> None:
    assert _load(tmp_path, backend).metered


def test_the_reference_backend_is_not_metered_and_guard_refuses_it(tmp_path: Path) -> None:
    ps = _load(tmp_path, "interpreter")
    assert not ps.metered
    with pytest.raises(ValueError, match=r"interpreter.*no cost budget"):
        guard(ps)
    with pytest.raises(ValueError, match="interpreter"):
        guard(ps, mode="audit")


class _Swapping:
    """A policy provider whose set is replaced after the guard is built (a host's own
    reload), by one loaded with the reference backend."""

    def __init__(self, first: guardrails.PolicySet) -> None:
        self.current = first


@STREAMING
async def test_a_swapped_in_unmetered_set_blocks_every_call(tmp_path: Path,
                                                            stream: bool) -> None:
    RAN.clear()
    source = _Swapping(_load(tmp_path, "compiled"))
    client = ScriptedChatClient([[call("write_note", text="one")], [text("ok")],
                                 [call("write_note", text="two")], [text("done")]])
    agent = agent_with(client, [write_note], guard(source))
    await run(agent, "first", stream=stream)
    assert RAN == ["one"]
    source.current = _load(tmp_path, "interpreter")
    await run(agent, "second", stream=stream)
    assert RAN == ["one"], "a call was decided on a set without a cost bound"
    results = [result_text(c) for c in client.tool_results()]
    assert results and all("written" not in r and "guard" in r for r in results), results
