"""A tool result's reading kept with it (record26): the guard reads a result through the
provenance functions' normalisation once, when it records it, and later calls read the
kept form at ASCII-like cost, alike in a warm process and in a cold replica.

Before this, a call read each result that is not ASCII again (``READ_COST`` a character)
and a history of about 8 pages of 64 KiB of Japanese put every provenance-using call over
the scan budget: denied, whatever it named.
"""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest
from agent_framework import Agent, AgentSession, tool

from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework.scripted import call, result_text, text
from guardrails.expr import lib_provenance
from guardrails.expr.lib_provenance import (
    ORIGINS,
    SCAN_BUDGET,
    Origins,
    untrusted,
)
from tests.af_support import load_text

IBAN = "GB82WEST12345698765432"
"""Named by the user's request."""
EVIL = "GB33BUKB20201555555555"
"""Written (in fullwidth letters and digits) in one page only."""
EVIL_FULLWIDTH = "".join(chr(ord(c) + 0xFEE0) for c in EVIL)

POLICY = """
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: payee-origin}
spec:
  match: {tools: [send_money]}
  rules:
    - name: payee-from-untrusted-content
      when: untrusted(args.recipient)
      action: deny
      message: The payee came from content the agent read.
    - name: payee-not-named
      when: '!request.mentions(args.recipient)'
      action: deny
      message: The user did not name the payee.
"""

JAPANESE = "日本語のテキストです東京都港区株式会社様お問い合わせ請求書送金口座"


def page(n: int, *, holding: str = "") -> str:
    """A fresh 64 KiB page of Japanese (``n`` makes it unlike any other), optionally with a
    value written in it."""
    rng = random.Random(n)
    body = "".join(rng.choice(JAPANESE) for _ in range(65_536))
    return (f"頁{n} " + (f" 口座 {holding} です " if holding else "") + body)[:65_536]


paid: list[str] = []


def _pages(evil_in: int | None = None) -> Any:
    @tool
    def read_page(n: int) -> str:
        """Read a page of the user's documents."""
        return page(n, holding=EVIL_FULLWIDTH if n == evil_in else "")
    return read_page


@tool
def send_money(recipient: str, amount: float) -> str:
    """Send money."""
    paid.append(recipient)
    return f"sent {amount} to {recipient}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    paid.clear()


@pytest.fixture
def policies(tmp_path: Path) -> Any:
    return load_text(tmp_path, POLICY)


def _agent(client: ScriptedChatClient, policies: Any, evil_in: int | None = None) -> Agent:
    return Agent(client=client, tools=[_pages(evil_in), send_money],
                 middleware=guard(policies))


async def _read_pages(policies: Any, pages: int, evil_in: int | None = None,
                      ) -> tuple[Agent, ScriptedChatClient, AgentSession]:
    client = ScriptedChatClient([[call("read_page", n=n) for n in range(pages)],
                                 [text("read")]])
    agent = _agent(client, policies, evil_in)
    session = agent.create_session()
    await agent.run(f"Read my papers, then I will ask you to pay {IBAN}", session=session)
    assert len(session.state["guardrails"]["history"]) == pages
    return agent, client, session


async def _pay(agent: Agent, client: ScriptedChatClient, session: AgentSession,
               recipient: str) -> str:
    client.turns += [[call("send_money", recipient=recipient, amount=10)], [text("done")]]
    await agent.run(f"Now pay 10 to {IBAN}", session=session)
    return result_text(client.tool_results()[-1])


def _cold(session: AgentSession) -> AgentSession:
    """The session as another replica restores it (through JSON), in a process that has
    read none of its texts."""
    for cache in (lib_provenance._CHECKED, lib_provenance._LOWER,
                  lib_provenance._AS_WRITTEN, lib_provenance._DENSE):
        cache.clear()
    return AgentSession.from_dict(json.loads(json.dumps(session.to_dict())))


async def test_twenty_japanese_pages_leave_a_named_payee_allowed(policies: Any) -> None:
    # Before: every page read again at READ_COST a character, 20 of them over the budget:
    # "provenance: the call's scanning budget is exhausted", the payee the user named denied.
    agent, client, session = await _read_pages(policies, 20)
    said = await _pay(agent, client, session, IBAN)
    assert paid == [IBAN], said


async def test_a_cold_replica_decides_as_the_warm_process(policies: Any) -> None:
    agent, client, session = await _read_pages(policies, 20, evil_in=7)
    cold = _cold(session)
    # The value written (fullwidth) in page 7 is found in its kept reading, warm and cold;
    # the payee the user named is allowed, warm and cold.
    replica = _agent(client, policies, evil_in=7)
    for who, where in ((agent, session), (replica, cold)):
        said = await _pay(who, client, where, EVIL)
        assert paid == [] and "content the agent read" in said, said
    for who, where in ((agent, session), (replica, cold)):
        paid.clear()
        said = await _pay(who, client, where, IBAN)
        assert paid == [IBAN], said
    # charged alike, whether this process checked the readings before or not
    history = _history(session.state["guardrails"]["history"])
    warm = _untrusted(history, EVIL)
    _cold(session)
    assert _untrusted(history, EVIL) == warm == (True, warm[1])


def _history(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"tool": e["tool"], "args": e["args"], "effect": e["effect"],
             "result": e["result"], "trusted": e["trusted"],
             **({"reading": e["reading"]} if "reading" in e else {})} for e in entries]


def _untrusted(history: list[dict[str, Any]], value: str) -> tuple[bool, int]:
    """``untrusted(value)`` on ``history`` as the engine sees it, and the units it cost."""
    origins = Origins("pay my bills", history)
    token = ORIGINS.set(origins)
    try:
        found = untrusted(value)
    finally:
        ORIGINS.reset(token)
    return found, SCAN_BUDGET - origins.scan.left


async def test_a_tampered_reading_hides_nothing(policies: Any) -> None:
    _, _, session = await _read_pages(policies, 2, evil_in=1)
    history = _history(session.state["guardrails"]["history"])
    assert all("reading" in h for h in history)
    found, kept_cost = _untrusted(history, EVIL)
    assert found
    forged: list[list[dict[str, Any]]] = []
    # The kept form rewritten without the value (its check left as it was)...
    h = copy.deepcopy(history)
    low = h[1]["reading"]["low"]
    assert EVIL.lower() in low
    h[1]["reading"]["low"] = low.replace(EVIL.lower(), "x" * len(EVIL))
    forged.append(h)
    # ... the other page's reading, whose check is right for its own result ...
    h = copy.deepcopy(history)
    h[1]["reading"] = h[0]["reading"]
    forged.append(h)
    # ... a version this build does not know, a check of another shape, garbage.
    for change in ({"v": 99}, {"sum": "0" * 64}, {"sum": 5}, {"low": None}):
        h = copy.deepcopy(history)
        h[1]["reading"] = {**h[1]["reading"], **change}
        forged.append(h)
    for bad in (None, "x", [], {"v": 1}):
        h = copy.deepcopy(history)
        h[1]["reading"] = bad
        forged.append(h)
    for h in forged:
        found, cost = _untrusted(h, EVIL)
        assert found, h[1].get("reading")
        # read as an entry without one is: charged its reading again
        assert cost > kept_cost + lib_provenance.READ_COST * 60_000


async def test_an_entry_without_a_reading_is_read_as_before(policies: Any) -> None:
    _, _, session = await _read_pages(policies, 2, evil_in=1)
    history = _history(session.state["guardrails"]["history"])
    old = [{k: v for k, v in h.items() if k != "reading"} for h in history]
    found, kept_cost = _untrusted(history, EVIL)
    found_old, old_cost = _untrusted(old, EVIL)
    assert found and found_old
    assert old_cost - kept_cost >= lib_provenance.READ_COST * 2 * 60_000


def test_the_reading_is_the_results_reading() -> None:
    # What is kept is what a call would read; an ASCII result has none to keep.
    result = page(3, holding=EVIL_FULLWIDTH)
    reading = lib_provenance.kept_reading(result)
    assert reading is not None
    scan = lib_provenance._Scan(SCAN_BUDGET)
    assert reading["low"] == lib_provenance._lower(result, scan)
    assert lib_provenance.kept_reading("plain ascii text, https://acme.com/x") is None


def test_a_reading_past_the_record_budget_is_not_kept() -> None:
    # 64 KiB of xn-- labels: its respelling alone is several times RECORD_BUDGET, so the
    # record stops early and keeps none (later calls read it as an entry without one).
    dense = ("https://xn--bcher-kva.example/ " * 3000)[:65_536]
    assert lib_provenance.kept_reading(dense) is None
    # a page with a few such links keeps its respelled reading
    few = "see https://xn--bcher-kva.example/ and " + "a " * 30_000
    reading = lib_provenance.kept_reading(few)
    assert reading is not None and "bücher.example" in reading["low"]


def test_the_engine_keeps_a_reading_only_with_its_whole_result() -> None:
    from guardrails.engine.evaluate import Budget, normalize_history
    from guardrails.expr.limits import Limits

    result = page(4)
    reading = lib_provenance.kept_reading(result)
    assert reading is not None
    entry = {"tool": "t", "args": {}, "effect": "allow", "result": result, "trusted": False,
             "reading": reading}
    [whole] = normalize_history([entry], Limits(), Budget(1_000_000))
    assert whole["reading"] == reading and whole["reading"] is not reading
    [cut] = normalize_history([entry], Limits(max_result_chars=1000), Budget(1_000_000))
    assert "reading" not in cut and len(cut["result"]) == 1000
    # not charged as input: a full history of readings stays within the input bound
    normalize_history([entry] * 100, Limits(), Budget(1_000_000))
    odd = {**entry, "reading": {**reading, "low": [1]}}
    [dropped] = normalize_history([odd], Limits(), Budget(1_000_000))
    assert "reading" not in dropped


PINNED = ("Ｐａｙ\u200b bob@ＡＣＭＥ.com, e\u0301 東京。jp https://%65vil.com/x "
          "https://xn--bcher-kva.example/ http://0x7f.1/ ⒇ \u2011 Straße")


def test_the_reading_is_pinned() -> None:
    # Readings travel in session state: one made by another build is used only if that
    # build reads texts alike. A change of the reading fails here: raise READING_VERSION
    # (the sums then differ, and every older reading is read again), then update this.
    assert lib_provenance.READING_VERSION == 1
    reading = lib_provenance.kept_reading(PINNED)
    assert reading is not None
    assert reading["low"] == ("pay bob@acme.com, é 東京.jp https://evil.com/x "
                              "https://bücher.example/ http://127.0.0.1/ (20) - straße")
    assert reading["low"] == lib_provenance._lower(PINNED, lib_provenance._Scan(SCAN_BUDGET))


@pytest.mark.parametrize(("value", "within", "found"), [
    (IBAN, "счёт GB82 WEST 1234 5698 7654 32, спасибо", True),   # ASCII value: _dense_ascii
    (IBAN, "счёт GB82 WEST 1234 5698 7654 3, спасибо", False),
    (IBAN, "счёт GB82 WEST 1234 5698 7654 3ё2, спасибо", False),
    ("٠١٢٣٤٥٦٧٨٩", "رقم ٠١٢٣ ٤٥٦٧٨٩ هنا", True),                  # not ASCII: _dense
])
def test_the_identifier_prefilter_in_a_text_that_is_not_ascii(value: str, within: str,
                                                              found: bool) -> None:
    assert lib_provenance.mentioned(value, within) is found
