"""Red team 17b: unreadable arguments denied by call id (``RunState.unreadable``), with
call ids the model chose: empty, repeated, one shared with a readable call. A tool whose
every parameter has a default must never run on the marker, whatever the id."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agent_framework import Content

from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework.scripted import result_text, text
from tests.af_support import STREAMING, agent_with, load_text, run
from tests.test_af_unreadable_defaults import DEEP_TEXT, POLICY, RAN, optional_only

__all__ = ["RAN"]


@pytest.fixture(autouse=True)
def _clear() -> Any:
    RAN.clear()
    yield
    RAN.clear()


@STREAMING
@pytest.mark.parametrize("call_id", ["", " ", "call-1", "0"])
async def test_an_unreadable_call_never_runs_the_tool_whatever_its_id(
        tmp_path: Path, stream: bool, call_id: str) -> None:
    client = ScriptedChatClient([
        [Content.from_function_call(call_id=call_id, name="optional_only",
                                    arguments=DEEP_TEXT)],
        [text("final answer")]])
    agent = agent_with(client, [optional_only], guard(load_text(tmp_path, POLICY)))
    await run(agent, "go", stream=stream)
    assert RAN == []
    assert all("could not be read" in result_text(r) for r in client.tool_results())


@STREAMING
async def test_a_readable_call_sharing_the_unreadable_ones_id_is_denied_too(
        tmp_path: Path, stream: bool) -> None:
    """Fail closed: the id is all the function middleware has to tell them apart."""
    client = ScriptedChatClient([
        [Content.from_function_call(call_id="same", name="optional_only",
                                    arguments=DEEP_TEXT),
         Content.from_function_call(call_id="same", name="optional_only",
                                    arguments={"value": "fine"})],
        [text("final answer")]])
    agent = agent_with(client, [optional_only], guard(load_text(tmp_path, POLICY)))
    await run(agent, "go", stream=stream)
    assert RAN == []
