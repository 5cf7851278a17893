"""Unreadable arguments of a tool whose every parameter has a default never run it.

``GuardChatMiddleware`` replaces argument text the framework's parser cannot read with a
marker mapping; the framework then validates the marker before any function middleware.
A tool with a required parameter refuses it, and the function middleware sees the marker
and denies the call. A tool whose every parameter has a default accepts it: the marker's
key is dropped as unknown, the middleware got ``{}`` and the tool ran with its defaults
(found by agent17: the promise says the tool never runs). The chat middleware now also
notes the call's id in the run's state, and the function middleware denies it by that.
In the real loop, streaming and not, text and parsed arguments.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agent_framework import Content, tool

from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework._unreadable import PARSE_DEPTH
from guardrails.agent_framework.scripted import call, result_text, text
from tests.af_support import STREAMING, agent_with, load_text, run

RAN: list[Any] = []

POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: open}
spec:
  match: {tools: ["optional_only"]}
  rules:
    - {name: never, when: 'false', action: deny}
"""


@tool(name="optional_only")
def optional_only(value: Any = None, count: int = 1) -> str:
    """Every parameter has a default."""
    RAN.append(value)
    return f"ran {value!r}"


@pytest.fixture(autouse=True)
def _clear() -> Any:
    RAN.clear()
    yield
    RAN.clear()


def _nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = {"value": value}
    return value


DEEP_TEXT = '{"value": ' + "[" * 5000 + "1" + "]" * 5000 + "}"
LONG_INT_TEXT = '{"value": -' + "9" * 5000 + "}"
UNREADABLE = pytest.mark.parametrize(("arguments", "why"), [
    (DEEP_TEXT, f"nested deeper than {PARSE_DEPTH} levels"),
    (LONG_INT_TEXT, "a number with more than 4,300 digits"),
    (_nested(PARSE_DEPTH + 10), f"nested deeper than {PARSE_DEPTH} levels"),
], ids=["deep-text", "long-integer-text", "deep-parsed"])


@STREAMING
@UNREADABLE
async def test_the_tool_never_runs_and_the_run_goes_on(tmp_path: Path, stream: bool,
                                                       arguments: Any, why: str) -> None:
    client = ScriptedChatClient([
        [Content.from_function_call(call_id="bad", name="optional_only", arguments=arguments),
         call("optional_only", "good", value="fine")],
        [text("final answer")]])
    agent = agent_with(client, [optional_only], guard(load_text(tmp_path, POLICY)))
    response = await run(agent, "go", stream=stream)
    results = {r.call_id: result_text(r) for r in client.tool_results()}
    assert results["bad"] == ("Error: the call to optional_only was denied by policy. "
                              f"The arguments could not be read: {why}.")
    assert results["good"] == "ran 'fine'"  # its neighbour, another id, runs
    assert RAN == ["fine"]
    assert response.text == "final answer"


async def test_a_later_run_is_not_denied_by_an_earlier_runs_ids(tmp_path: Path) -> None:
    """The ids are the run's: the next run's call with the same id runs."""
    client = ScriptedChatClient([
        [Content.from_function_call(call_id="c1", name="optional_only", arguments=DEEP_TEXT)],
        [text("first")],
        [call("optional_only", "c1", value="again")],
        [text("second")]])
    agent = agent_with(client, [optional_only], guard(load_text(tmp_path, POLICY)))
    await run(agent, "one")
    await run(agent, "two")
    assert RAN == ["again"]


async def test_a_later_call_of_the_run_reusing_the_id_is_denied(tmp_path: Path) -> None:
    """Fail closed: within the run, the id is the unreadable call's, whatever comes later
    under it (a model cannot launder the call by sending readable arguments under its id)."""
    client = ScriptedChatClient([
        [Content.from_function_call(call_id="c1", name="optional_only", arguments=DEEP_TEXT)],
        [call("optional_only", "c1", value="again")],
        [text("done")]])
    agent = agent_with(client, [optional_only], guard(load_text(tmp_path, POLICY)))
    await run(agent, "go")
    assert RAN == []
    assert "could not be read" in result_text(client.tool_results()[0])
