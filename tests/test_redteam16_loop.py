"""Red team, round 4: what the model's output can do to the run itself (promise 1), in the
framework's real loop, streaming and not.

A chat client may hand the loop arguments it parsed itself (a mapping, not text). The
guard's chat middleware read only text for depth, so a mapping nested 1,000 levels deep (or
one containing itself) reached the framework's argument token, which recurses once a level,
and ``RecursionError`` ended the run before any function middleware ran.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from agent_framework import Content, tool

from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework.scripted import call, result_text, text
from tests.af_support import STREAMING, agent_with, load_text, run

RAN: list[Any] = []

POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: open}
spec:
  match: {tools: ["take_map", "take_any", "note"]}
  rules:
    - {name: never, when: 'false', action: deny}
"""


@tool(name="take_map")
def take_map(data: dict[str, Any]) -> str:
    """Runs with a mapping."""
    RAN.append("take_map")
    return "ran"


@tool(name="take_any")
def take_any(data: Any) -> str:
    """Runs with whatever it is given."""
    RAN.append("take_any")
    return "ran"


@tool(name="note")
def note(text: str) -> str:
    """A well-formed neighbour."""
    RAN.append(("note", text))
    return f"noted {text}"


@pytest.fixture(autouse=True)
def _clear() -> Iterator[None]:
    RAN.clear()
    yield
    RAN.clear()


def _deep_map(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = {"a": value}
    return value


def _deep_list(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


def _cycle() -> Any:
    loop: dict[str, Any] = {}
    loop["a"] = {"b": loop}
    return loop


class _Unreadable(Mapping[str, Any]):
    """A mapping a chat client built whose values cannot be read."""

    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("no")

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("no")

    def __len__(self) -> int:
        return 1


_DEEP = "The arguments could not be read: nested deeper than"
_NOT_JSON = "The arguments could not be read: not a JSON object."

PARSED = {
    "a map 1,000 levels deep": ("take_map", {"data": _deep_map(1000)}, _DEEP),
    "a map 5,000 levels deep": ("take_any", {"data": _deep_map(5000)}, _DEEP),
    "a list 3,000 levels deep": ("take_any", {"data": _deep_list(3000)}, _DEEP),
    "a map inside itself": ("take_any", {"data": _cycle()}, _NOT_JSON),
    # (Held before: the engine's input walk refused it.)
    "a mapping that cannot be read": ("take_any", {"data": _Unreadable()}, "was denied"),
}


@STREAMING
@pytest.mark.parametrize("case", list(PARSED.values()), ids=list(PARSED))
async def test_parsed_arguments_the_loop_cannot_take_are_denied_and_the_run_goes_on(
        tmp_path: Path, stream: bool, case: tuple[str, Any, str]) -> None:
    name, arguments, why = case
    client = ScriptedChatClient([
        [Content.from_function_call(call_id="bad", name=name, arguments=arguments),
         call("note", "good", text="hello")], [text("final answer")]])
    agent = agent_with(client, [take_map, take_any, note], guard(load_text(tmp_path, POLICY)))
    response = await run(agent, "go", stream=stream, session=agent.create_session())
    results = {r.call_id: result_text(r) for r in client.tool_results()}
    assert why in results["bad"]
    assert results["good"] == "noted hello"
    assert RAN == [("note", "hello")] and response.text == "final answer"


@STREAMING
async def test_parsed_arguments_within_the_bound_are_decided_as_usual(
        tmp_path: Path, stream: bool) -> None:
    """Held: a mapping 20 levels deep, and one value shared twice at one level (not a
    cycle: each container is read once), run; one 40 deep is over the engine's bound."""
    shared = {"x": 1}
    client = ScriptedChatClient([
        [Content.from_function_call(call_id="ok", name="take_map",
                                    arguments={"data": _deep_map(20)}),
         Content.from_function_call(call_id="deep", name="take_map",
                                    arguments={"data": _deep_map(40)}),
         Content.from_function_call(call_id="flat", name="take_any",
                                    arguments={"data": [1, 2, {"y": shared}]})],
        [text("final answer")]])
    agent = agent_with(client, [take_map, take_any, note], guard(load_text(tmp_path, POLICY)))
    await run(agent, "go", stream=stream)
    results = {r.call_id: result_text(r) for r in client.tool_results()}
    assert results["ok"] == "ran" and results["flat"] == "ran"
    assert results["deep"].startswith("Error") and "could not be read" not in results["deep"]
    assert sorted(RAN) == ["take_any", "take_map"]
