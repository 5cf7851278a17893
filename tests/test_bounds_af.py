"""Bounded cost in the real agent loop (issue 10, section 3): every pass the guard makes.

The attacks: many empty strings (history bookkeeping once scrubbed each with every redact
pattern: seconds per call), many short keys, deep nesting, NaN hidden in arguments over the
bounds, policies that skip input errors, evaluation over the call's budget, a secret
argument that is a huge list. Each test asserts on the decision, on what history kept or on
counted work (how many texts were scrubbed), never on time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agent_framework import AgentSession, tool

import guardrails
from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework._history import HISTORY_ENTRY_BYTES
from guardrails.agent_framework.scripted import call, result_text
from guardrails.engine.evaluate import NODE_COST
from guardrails.engine.scrub import MAX_TEXTS, Scrubber
from tests.af_support import STREAMING, agent_with, run

RAN: list[Any] = []


@tool
def submit(payload: Any = None, token: Any = None) -> str:
    """Submit a payload."""
    RAN.append(payload)
    return "submitted"


@pytest.fixture(autouse=True)
def _clear() -> Any:
    RAN.clear()
    yield
    RAN.clear()


REDACTING = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: p}
spec:
  match: {tools: [submit]}
  failurePolicy: FP
  secrets: {arguments: [token]}
  rules:
    - {name: r, when: 'has(args.payload) && type(args.payload) == string && args.payload == "no"', action: deny}
  redact:
    - {name: key, regex: 'key-[0-9]{6}'}
"""


def _policies(tmp_path: Path, failure: str = "Fail") -> guardrails.PolicySet:
    path = tmp_path / f"p-{failure}.yaml"
    path.write_text(REDACTING.replace("FP", failure), encoding="utf-8")
    return guardrails.load(path)


class CountingRedact:
    """Counts the texts the guard scrubs with the policies' patterns (the work done)."""

    def __init__(self, policies: guardrails.PolicySet, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        original = policies.redact

        def counted(text: str) -> str:
            self.count += 1
            return original(text)

        monkeypatch.setattr(policies, "redact", counted)


async def _call(policies: guardrails.PolicySet, session: AgentSession | None,
                stream: bool = False, **arguments: Any) -> str:
    client = ScriptedChatClient([[call("submit", **arguments)]])
    agent = agent_with(client, [submit], guard(policies))
    await run(agent, "submit it", stream=stream, session=session)
    result = client.tool_results()[-1]
    return result_text(result)


def _history(session: AgentSession) -> list[dict[str, Any]]:
    return session.state["guardrails"]["history"]  # type: ignore[no-any-return]


@STREAMING
async def test_150000_empty_strings_are_denied_and_never_walked_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stream: bool) -> None:
    policies = _policies(tmp_path)
    counter = CountingRedact(policies, monkeypatch)
    session = AgentSession()
    text = await _call(policies, session, stream, payload=[""] * 150_000)
    assert "denied" in text and RAN == []
    [entry] = _history(session)
    assert {k: entry[k] for k in ("tool", "args", "effect", "truncated", "result")} == {
        "tool": "submit", "args": {}, "effect": "deny", "truncated": True, "result": ""}
    assert counter.count < 10  # the message texts, not 150,000 strings


@pytest.mark.parametrize("payload", [
    {f"k{i:x}": "" for i in range(95_000)},
    [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["deep"]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],
    [{"n": float("nan")}] + [""] * 100_000,   # NaN the guard must not walk to find
], ids=["short-keys", "deep", "nan-over-bound"])
async def test_inputs_over_the_bounds_are_denied_cheaply(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, payload: Any) -> None:
    policies = _policies(tmp_path)
    counter = CountingRedact(policies, monkeypatch)
    session = AgentSession()
    text = await _call(policies, session, payload=payload)
    assert "denied" in text and RAN == []
    assert _history(session)[-1]["args"] == {}
    assert counter.count < 10


async def test_over_the_bounds_never_runs_even_when_the_policy_ignores_errors(
        tmp_path: Path) -> None:
    """``failurePolicy: Ignore`` skips a policy whose own rule errs, not one whose call is
    over the bounds: the engine denies it (race 24; it was allowed, an ``input`` error
    skipped), and the guard refuses to run a call it could not afford to read (bind,
    record, scrub) whatever the decision."""
    policies = _policies(tmp_path, "Ignore")
    assert policies.evaluate("submit", {"payload": [""] * 150_000}).effect.value == "deny"
    session = AgentSession()
    text = await _call(policies, session, payload=[""] * 150_000)
    assert "denied" in text and RAN == []
    # a call within the bounds still runs under Ignore
    assert await _call(policies, session, payload="fine") == "submitted"


async def test_history_keeps_a_bounded_scrubbed_prefix_of_a_big_allowed_call(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    policies = _policies(tmp_path)
    counter = CountingRedact(policies, monkeypatch)
    session = AgentSession()
    payload = [f"key-{i:06d}" for i in range(5_000)]  # within the input bound
    assert await _call(policies, session, payload=payload) == "submitted"
    assert [payload] == RAN  # the tool got all of it
    [entry] = _history(session)
    assert entry["truncated"] is True
    kept = entry["args"]["payload"]
    assert 0 < len(kept) < HISTORY_ENTRY_BYTES // NODE_COST
    assert all(v in ("[REDACTED]", None) for v in kept), kept[:3]  # scrubbed, never raw
    assert counter.count < HISTORY_ENTRY_BYTES // NODE_COST + 10


async def test_a_small_call_is_kept_whole(tmp_path: Path) -> None:
    policies = _policies(tmp_path)
    session = AgentSession()
    assert await _call(policies, session, payload=["a", "b"]) == "submitted"
    [entry] = _history(session)
    assert entry["args"]["payload"] == ["a", "b"] and "truncated" not in entry


async def test_evaluation_over_the_call_budget_is_denied_in_the_loop(tmp_path: Path) -> None:
    rules = "\n".join(f"    - {{name: r{i}, when: 'args.payload.exists(x, x == \"{i}\")', "
                      "action: allow}" for i in range(60))
    path = tmp_path / "many.yaml"
    path.write_text("apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: many}\n"
                    f"spec:\n  match: {{tools: [submit]}}\n  rules:\n{rules}\n")
    policies = guardrails.load(path)
    session = AgentSession()
    text = await _call(policies, session, payload=["z"] * 5_000)  # 60 x 5,000 iterations
    assert "denied" in text and RAN == []
    assert await _call(policies, session, payload=["z"] * 50) == "submitted"


async def test_a_secret_argument_that_is_a_huge_list_makes_messages_opaque(
        tmp_path: Path) -> None:
    """The scrubber would have to know 20,000 values: it blanks every text instead."""
    policies = _policies(tmp_path)
    session = AgentSession()
    token = [f"value-{i}" for i in range(MAX_TEXTS + 10)]
    text = await _call(policies, session, payload="no", token=token)
    # Denied, or blocked outright: an opaque scrubber hides every text, the call id too,
    # and a call id the guard must hide blocks the call (fail closed either way).
    assert ("denied" in text or "blocked" in text) and RAN == []
    assert "value-1" not in text and "value-1" not in repr(_history(session))


def test_scrubber_is_opaque_past_its_bound_and_exact_below() -> None:
    many = Scrubber([f"secret-{i}" for i in range(MAX_TEXTS + 1)])
    assert many.opaque and many("secret-3 and more") == "[REDACTED]" and many("") == ""
    assert many.with_values(["x"]) is many
    few = Scrubber([f"secret-{i}" for i in range(100)])
    assert not few.opaque
    assert few("a secret-42 b secret-7") == "a [REDACTED] b [REDACTED]"
    # a value made of many repeats is read only up to a bound, then opaque
    repeated = Scrubber(lambda: [["same"] * 10**6])
    assert repeated.opaque
    # deep nesting is walked without recursion: exact within the element bound, else opaque
    nested: list[Any] = ["x-deep"]
    for _ in range(5000):
        nested = [nested]
    assert Scrubber([nested])("a x-deep b") == "a [REDACTED] b"
    for _ in range(5000):
        nested = [nested]
    assert Scrubber([nested]).opaque
