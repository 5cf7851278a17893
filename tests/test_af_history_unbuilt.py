"""History entries of runs without a session, built only when the history is read.

``_history.record_unbuilt`` keeps what builds a quiet call's entry and ``history_of`` builds
it when someone reads the run's history. Compared with the eager ``record`` (hypothesis:
generated arguments, hostile and oversized ones included, results filled in before and
after the entry is built, reads anywhere in between, the oldest dropped at the limit), and
in the real loop: the same calls in a run with a session (eager) and without (unbuilt)
give the same history at every point a tool or a rule reads it, and the same decisions.
"""

from __future__ import annotations

import copy
import datetime
import json
from pathlib import Path
from typing import Any
from unittest import mock

from agent_framework import AgentSession, Content, tool
from hypothesis import given, settings
from hypothesis import strategies as st

from guardrails.agent_framework import ScriptedChatClient, _history, guard
from guardrails.agent_framework._history import (
    Unbuilt,
    history_of,
    plain_entry,
    record,
    record_unbuilt,
    redacted,
    set_result,
)
from guardrails.agent_framework._secrets import unchanged
from guardrails.agent_framework._state import RUN, RunState
from guardrails.agent_framework.scripted import call, result_text
from tests.af_support import STREAMING, agent_with, load_text, run


def _eager(history: list[Any], tool: str, arguments: dict[str, Any], effect: str, limit: int,
           trusted: bool) -> dict[str, Any] | None:
    """What the function middleware records for a quiet call (``_function._record``)."""
    kept = plain_entry(arguments)
    if kept is None:
        kept = redacted(arguments, frozenset(), unchanged)
    args, truncated = kept
    return record(history, tool, args, effect, limit, truncated=truncated, trusted=trusted)


texts = st.one_of(st.text(max_size=12), st.sampled_from(["", "[REDACTED]", "NaN", "é\x00"]),
                  st.text(min_size=1000, max_size=1200))
leaves = st.one_of(texts, st.integers(), st.integers(min_value=2**70), st.booleans(),
                   st.none(), st.floats(allow_nan=False, allow_infinity=False))
values = st.recursive(leaves, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(texts, inner, max_size=4)), max_leaves=16)
arguments = st.dictionaries(texts, values, max_size=8)
results = st.one_of(st.none(), texts, st.lists(texts.map(Content.from_text), max_size=3),
                    st.just(object()))


@st.composite
def operations(draw: st.DrawFn) -> list[tuple[Any, ...]]:
    ops: list[tuple[Any, ...]] = []
    for _ in range(draw(st.integers(min_value=1, max_value=8))):
        ops.append(("record", draw(st.sampled_from(["send", "read", "mcp:x/y"])), draw(arguments),
                    draw(st.sampled_from(["allow", "deny", "halt"])), draw(st.booleans()),
                    draw(st.integers(min_value=0, max_value=4_000_000_000_000_000))))
        if draw(st.booleans()):
            ops.append(("read",))
        if draw(st.booleans()):
            ops.append(("result", draw(st.integers(min_value=0, max_value=7)), draw(results)))
        if draw(st.booleans()):
            ops.append(("read",))
    return ops


@settings(max_examples=300, deadline=None)
@given(operations(), st.integers(min_value=1, max_value=5))
def test_built_entries_are_the_eager_ones(ops: list[tuple[Any, ...]], limit: int) -> None:
    eager: list[Any] = []
    run = RunState(request="")
    eager_entries: list[Any] = []
    lazy_entries: list[Any] = []
    for op in ops:
        if op[0] == "record":
            _, tool_name, args, effect, trusted, micros = op
            with mock.patch.object(_history.time, "time_ns", lambda m=micros: m * 1000):
                eager_entries.append(_eager(eager, tool_name, args, effect, limit, trusted))
                entry = record_unbuilt(run, tool_name, args, effect, limit, trusted=trusted)
            assert type(entry) is Unbuilt
            lazy_entries.append(entry)
        elif op[0] == "result":
            _, index, result = op
            if index < len(eager_entries):
                set_result(eager_entries[index], result)
                set_result(lazy_entries[index], result)
        else:
            # Every read sees plain entries, equal to the eager ones (the arguments the
            # entry was built from are never read again: building again changes nothing).
            seen = history_of(None, run)
            assert seen is run.history and not run.unbuilt
            assert all(type(e) is dict for e in seen)
            assert json.dumps(seen) == json.dumps(eager)
    assert json.dumps(history_of(None, run)) == json.dumps(eager)
    assert len(run.history) == min(limit, len(eager_entries))


@settings(max_examples=100, deadline=None)
@given(arguments)
def test_an_entry_never_read_costs_no_copy_and_is_built_once(args: dict[str, Any]) -> None:
    run = RunState(request="")
    entry = record_unbuilt(run, "t", args, "allow", 5)
    assert entry.entry is None and run.unbuilt
    built = history_of(None, run)
    assert built is not None
    assert built[0] is entry.build() and history_of(None, run) == built
    stamped = datetime.datetime.fromisoformat(built[0]["at"])
    assert stamped.tzinfo is not None


def test_a_session_keeps_eager_entries(tmp_path: Path) -> None:
    state: dict[str, Any] = {}
    history = history_of(state, RunState(request=""))
    assert history is state["history"] == []


# -- the real loop: a run without a session records the history a run with one does ----------

POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: notes}
spec:
  match: {tools: ["echo", "peek", "collect"]}
  results: trusted
  rules:
    - name: repeated
      when: 'history.exists(h, h.tool == "echo" && has(h.args.text) && h.args.text == "again")
             && args.text == "again"'
      action: deny
      message: Said already.
    - name: third
      when: 'size(history) >= 6 && args.text == "late"'
      action: deny
"""

SEEN: list[Any] = []
SESSION: list[AgentSession] = []


def _history_now() -> list[dict[str, Any]]:
    if SESSION:
        found = SESSION[0].state.get("guardrails", {}).get("history", [])
        return copy.deepcopy(found)
    run_state = RUN.get()
    return copy.deepcopy(history_of(None, run_state) or [])


@tool(name="echo")
def echo(text: str, times: int = 1) -> str:
    """Echoes the text."""
    return text * times


@tool(name="peek")
def peek(text: str) -> str:
    """Notes the history as the guard holds it while this tool runs."""
    SEEN.append(_history_now())
    return f"peeked {text}"


@tool(name="collect")
def collect(items: list[str], text: str = "t") -> str:
    """Mutates the list it was given, after the guard recorded the call."""
    items.append("added-by-the-tool")
    return f"{len(items)} items"


def _script() -> list[list[Content]]:
    return [
        [call("echo", text="first")],
        [call("echo", text="again"), call("peek", text="parallel")],
        [call("echo", text="again")],
        [call("collect", items=["a", "b"]), call("echo", text="x" * 5000)],
        [call("echo", text="ünïcode \\ \"q\"", times=2), call("echo", text=["not", "text"])],
        [call("peek", text="late")],
        [call("echo", text="late")],
        [call("peek", text="end")],
    ]


def _without_at(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for entry in history:
        stamped = datetime.datetime.fromisoformat(entry["at"])
        assert stamped.utcoffset() == datetime.timedelta(0)
        out.append({k: v for k, v in entry.items() if k != "at"})
    return out


@STREAMING
async def test_runs_with_and_without_a_session_record_the_same(tmp_path: Path,
                                                               stream: bool) -> None:
    policies = load_text(tmp_path, POLICY)
    outcomes = []
    for with_session in (True, False):
        SEEN.clear()
        SESSION.clear()
        session = AgentSession() if with_session else None
        if session is not None:
            SESSION.append(session)
        client = ScriptedChatClient(_script())
        kwargs: dict[str, Any] = {"session": session} if session is not None else {}
        await run(agent_with(client, [echo, peek, collect], guard(policies)), "go",
                  stream=stream, **kwargs)
        results = [result_text(r) for r in client.tool_results()]
        outcomes.append((results, [_without_at(h) for h in SEEN]))
        SESSION.clear()
    assert outcomes[0] == outcomes[1]
    results, seen = outcomes[0]
    assert "Said already." in results[3] and "denied" in results[8]  # the rules read it
    assert len(seen) == 2 and len(seen[-1]) == 11
    assert seen[-1][4]["args"] == {"items": ["a", "b"], "text": "t"}  # not the tool's change
    assert seen[-1][5].get("truncated") is True


async def test_the_last_entry_of_a_run_is_never_built(tmp_path: Path) -> None:
    """What the change removes: the run's last call leaves its entry unbuilt."""
    policies = load_text(tmp_path, POLICY)
    runs: list[RunState] = []

    @tool(name="peek")
    def grab(text: str) -> str:
        """Keeps the run's state."""
        state = RUN.get()
        assert state is not None
        runs.append(state)
        return text

    client = ScriptedChatClient([[call("echo", text="one")], [call("peek", text="two")]])
    await run(agent_with(client, [echo, grab], guard(policies)), "go")
    [state] = runs
    assert [type(e) for e in state.history] == [dict, Unbuilt]
    last = state.history[-1]
    assert last.result == "two" and last.trusted is True
    built = history_of(None, state)
    assert built is not None and built[-1]["result"] == "two"
    assert built[-1]["args"] == {"text": "two"}
