"""Promise 5 with promise 7 under threads: a call is scrubbed with its own set's redaction.

A guard shared by threads keeps one memory of injected values, holding the redact patterns
of the set it last saw. Found by the round-4 red team: when threads decide on different
sets (a reload racing calls in another thread), a call could read the set, then find the
memory swapped by the other thread for the other set's patterns, and be scrubbed without
its own set's redaction. The set and its memory are now one pair, read at once.

Here the provider hands one thread a set that allows the tool and redacts card numbers,
and the other thread a set that denies the tool and redacts nothing: every result that
reaches a model comes from a call decided on the first set, so none may carry the number.
Thread switches are forced every microsecond so that the threads interleave inside calls.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from agent_framework import tool

from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework._function import GuardFunctionMiddleware
from guardrails.agent_framework.scripted import call, result_text, text
from tests.af_support import agent_with, load_text, run

CARD = "4111 1111 1111 1111"

REDACTING = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: notes}
spec:
  match: {tools: [read_card]}
  rules:
    - {name: never, when: 'false', action: deny}
  redact:
    - {name: card, regex: '\\b(?:\\d[ -]?){13,16}\\b', replacement: '[REDACTED:card]'}
"""

DENYING = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: notes}
spec:
  match: {tools: [read_card]}
  rules:
    - {name: always, when: 'true', action: deny, message: not on this set}
"""

RUNS = 30


@tool(name="read_card")
def read_card(text: str) -> str:
    """Returns a card number."""
    return f"{text}: card {CARD}"


def test_threads_deciding_on_different_sets_each_keep_their_sets_redaction(
        tmp_path: Path) -> None:
    redacting = load_text(tmp_path, REDACTING, "redacting.yaml")
    denying = load_text(tmp_path, DENYING, "denying.yaml")
    mine = threading.local()

    class PerThread:
        """A provider whose set depends on the thread asking (a reload seen by one only)."""

        @property
        def current(self) -> object:
            return getattr(mine, "policies", redacting)

    middleware = guard(PerThread())  # type: ignore[arg-type]
    seen: list[str] = []
    failures: list[BaseException] = []

    def runs(policies: object) -> None:
        mine.policies = policies

        async def all_runs() -> None:
            for n in range(RUNS):
                client = ScriptedChatClient([[call("read_card", text=f"r{n}")], [text("ok")]])
                await run(agent_with(client, [read_card], middleware), "read")
                seen.extend(result_text(r) for r in client.tool_results())

        try:
            asyncio.run(all_runs())
        except BaseException as exc:  # reported below, in the test's thread
            failures.append(exc)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=runs, args=(p,)) for p in (redacting, denying)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert not failures
    ran = [s for s in seen if not s.startswith("Error")]
    assert len(ran) == RUNS  # the redacting thread's calls ran; the denying one's did not
    assert all(s.endswith("card [REDACTED:card]") for s in ran), ran
    assert CARD not in repr(seen)


def test_a_swap_between_deciding_and_scrubbing_keeps_the_calls_redaction(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same race made certain: another thread's set swaps the memory at the worst
    moment, after the call was decided and before its scrubber is made."""
    redacting = load_text(tmp_path, REDACTING, "redacting.yaml")
    denying = load_text(tmp_path, DENYING, "denying.yaml")
    middleware = guard(redacting)
    [function] = [m for m in middleware if isinstance(m, GuardFunctionMiddleware)]
    running = GuardFunctionMiddleware._running

    def swapped(*args: Any) -> Any:
        function._memory_for(denying)  # what a call in another thread does
        return running(*args)

    monkeypatch.setattr(GuardFunctionMiddleware, "_running", staticmethod(swapped))
    client = ScriptedChatClient([[call("read_card", text="r")], [text("ok")]])
    asyncio.run(run(agent_with(client, [read_card], middleware), "read"))
    assert [result_text(r) for r in client.tool_results()] == ["r: card [REDACTED:card]"]
