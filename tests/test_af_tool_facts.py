"""What a policy set says of a tool is worked out once per set and tool, and follows reloads.

The function middleware keeps, per policy set (by identity) and tool, whether some policy
names the tool, has counters or injects a secret (``_function._ToolFacts``), so a call to a
tool that injects nothing never looks up injections and one without counters never asks
the store. These tests swap the set under a running guard (between the calls of one run,
and between runs) and check that every call acts on the facts of the set it is decided
on: a reload that adds an injection injects from the next call, one that adds a counter
counts from the next call, one that names a tool ends ``unmatched="warn"``'s warning.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from agent_framework import Content, tool
from hypothesis import given, settings
from hypothesis import strategies as st

import guardrails
from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework._function import GuardFunctionMiddleware
from guardrails.agent_framework.scripted import call, result_text
from tests.af_support import STREAMING, agent_with, load_text, run

SECRET = "sk-facts-7Q2v9Lm4Xc81"

PLAIN = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: api}
spec:
  match: {tools: ["call_api"]}
  rules:
    - {name: never, when: 'false', action: deny}
"""

INJECTING = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: api}
spec:
  match: {tools: ["call_api"]}
  secrets:
    inject:
      api_key: {env: GR_FACTS_KEY}
  rules:
    - {name: never, when: 'false', action: deny}
"""

COUNTING = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: api}
spec:
  match: {tools: ["call_api"]}
  counters:
    - {name: calls, key: '"k"', window: 60, limit: 1}
  rules:
    - {name: many, when: 'counters.calls.exceeded', action: deny, message: too many calls}
"""

OTHER = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: other}
spec:
  match: {tools: ["something_else"]}
  rules:
    - {name: never, when: 'false', action: deny}
"""

RECEIVED: list[str] = []


@tool(name="call_api")
def call_api(endpoint: str, api_key: str = "none") -> str:
    """Calls an API with a key."""
    RECEIVED.append(api_key)
    return f"called {endpoint}"


class Source:
    """A provider whose set the test swaps (as a hot reload does)."""

    def __init__(self, current: guardrails.PolicySet) -> None:
        self.current = current


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GR_FACTS_KEY", SECRET)
    RECEIVED.clear()


def _swapping(source: Source, sets: list[guardrails.PolicySet]) -> Any:
    """A scripted model calling call_api once per set in ``sets``, the source swapped to
    the next set before each call (within one run)."""

    def turn(messages: Any) -> list[Content]:
        done = sum(c.type == "function_result" for m in messages for c in m.contents)
        if done == len(sets):
            return [Content.from_text("done")]
        source.current = sets[done]
        return [call("call_api", f"c{done}", endpoint=f"https://api/{done}", api_key="model")]

    return turn


@STREAMING
async def test_an_injection_a_reload_adds_is_injected_from_the_next_call(
        tmp_path: Path, stream: bool) -> None:
    plain = load_text(tmp_path, PLAIN, "plain.yaml")
    injecting = load_text(tmp_path, INJECTING, "injecting.yaml")
    source = Source(plain)
    middleware = guard(source)  # the first call's set is the one built with
    order = [plain, injecting, plain, injecting]
    client = ScriptedChatClient(default=_swapping(source, order))
    await run(agent_with(client, [call_api], middleware), "go", stream=stream)
    assert RECEIVED == ["model", SECRET, "model", SECRET]
    assert SECRET not in repr([result_text(r) for r in client.tool_results()])


@STREAMING
async def test_a_counter_a_reload_adds_counts_from_the_next_call(tmp_path: Path,
                                                                 stream: bool) -> None:
    plain = load_text(tmp_path, PLAIN, "plain.yaml")
    counting = load_text(tmp_path, COUNTING, "counting.yaml")
    source = Source(plain)
    middleware = guard(source)
    order = [plain, plain, counting, counting, plain]
    client = ScriptedChatClient(default=_swapping(source, order))
    await run(agent_with(client, [call_api], middleware), "go", stream=stream)
    results = [result_text(r) for r in client.tool_results()]
    assert [r.startswith("Error") for r in results] == [False, False, False, True, False], results
    assert "too many calls" in results[3]
    assert len(RECEIVED) == 4


async def test_a_reload_naming_the_tool_ends_the_unmatched_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    other = load_text(tmp_path, OTHER, "other.yaml")
    plain = load_text(tmp_path, PLAIN, "plain.yaml")
    source = Source(other)
    middleware = guard(source, unmatched="warn")
    warned: list[bool] = []
    for current in (other, plain, other):
        source.current = current
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="guardrails.agent_framework"):
            client = ScriptedChatClient([[call("call_api", endpoint="https://api", api_key="k")]])
            await run(agent_with(client, [call_api], middleware), "go")
        warned.append(any("no policy names the tool call_api" in r.getMessage()
                          for r in caplog.records))
    assert warned == [True, False, True]
    assert RECEIVED == ["k", "k", "k"]


_SETS: dict[str, guardrails.PolicySet] = {}


def _sets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, guardrails.PolicySet]:
    if not _SETS:
        folder = tmp_path_factory.mktemp("facts")
        for name, text in (("plain", PLAIN), ("injecting", INJECTING),
                           ("counting", COUNTING), ("other", OTHER)):
            _SETS[name] = load_text(folder, text, f"{name}.yaml")
        _SETS["both"] = guardrails.load([folder / "injecting.yaml", folder / "other.yaml"])
    return _SETS


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["plain", "injecting", "counting", "other", "both"]),
                          st.sampled_from(["call_api", "something_else", "nothing"]),
                          st.sampled_from([(), ("mcp:bank/call_api",), ("mcp:x/y",)])),
                min_size=1, max_size=12))
def test_the_kept_facts_are_the_sets_own(tmp_path_factory: pytest.TempPathFactory,
                                         lookups: list[tuple[str, str, tuple[str, ...]]]) -> None:
    """Any sequence of lookups on alternating sets gives what each set says itself."""
    sets = _sets(tmp_path_factory)
    [function] = [m for m in guard(sets["plain"]) if isinstance(m, GuardFunctionMiddleware)]
    for name, tool_name, aliases in lookups:
        policies = sets[name]
        named = policies.for_tool(tool_name, aliases)
        expected = (bool(named), policies.counts(tool_name, aliases),
                    any(p.inject for p in named))
        assert tuple(function._facts_of(policies, tool_name, aliases)) == expected
