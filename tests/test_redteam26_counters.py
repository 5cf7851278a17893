"""Red team 26, promise 9: a counter's own expressions cannot be made to skip it.

A counter's ``failurePolicy`` is documented for a store that cannot be reached. It was
applied to every error of the counter, its ``key``, ``when`` and ``cost`` too, and those
read the arguments the model chose: under ``Ignore``, ``cost: int(args.amount)`` with an
amount of 2^53, a negative amount, or one ``int()`` cannot read made the counter read 0
and the call was admitted uncounted, past any daily total. Such an error now denies the
call whatever the ``failurePolicy``; a store that is down is still the policy's choice.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import guardrails
from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework.scripted import call, text
from guardrails.engine.counters import MemoryStore
from tests.af_support import agent_with
from tests.engine_support import load_text, policy


def _daily_total(failure: str, key: str = "principal.user") -> str:
    return policy("daily-total", spec=f"""
        match: {{tools: [send_money]}}
        counters:
          - {{name: spent, key: '{key}', window: 1d, limit: 1000,
              cost: 'int(args.amount)', failurePolicy: {failure}}}
        rules:
          - {{name: over, when: 'counters.spent.exceeded', action: deny,
              message: daily total over 1000}}
    """)


class _Down:
    """A counter store that cannot be reached (its every call fails)."""

    def reserve(self, requests: Any) -> Any:
        raise ConnectionError("down")

    def release(self, reservations: Any) -> None:
        raise ConnectionError("down")


CHOSEN = [2**53, 2**60, -5, "lots", 1e300, float("nan")]
"""Amounts the model chooses that the counter's cost cannot count."""


@pytest.mark.parametrize("failure", ["Ignore", "Fail"])
@pytest.mark.parametrize("amount", CHOSEN, ids=repr)
def test_a_cost_the_counter_cannot_count_denies_whatever_the_failure_policy(
        tmp_path: Path, failure: str, amount: Any) -> None:
    ps = load_text(tmp_path, _daily_total(failure))
    store = MemoryStore()
    decision = ps.evaluate("send_money", {"amount": amount}, principal={"user": "u"},
                           counters=store)
    assert decision.effect == guardrails.Effect.DENY, decision
    # Nothing was counted: the next honest payment is counted from zero and allowed.
    assert ps.evaluate("send_money", {"amount": 999}, principal={"user": "u"},
                       counters=store).effect == guardrails.Effect.ALLOW


def test_a_key_that_errors_denies_under_ignore(tmp_path: Path) -> None:
    """The key reads the arguments too (``args.account``, which the model may leave out)."""
    ps = load_text(tmp_path, _daily_total("Ignore", key="args.account"))
    decision = ps.evaluate("send_money", {"amount": 5}, counters=MemoryStore())
    assert decision.effect == guardrails.Effect.DENY


def test_a_store_that_is_down_is_still_the_failure_policys_choice(tmp_path: Path) -> None:
    """Held: Ignore reads an unreachable store's counter as 0 (documented), Fail denies."""
    for failure, effect in (("Ignore", guardrails.Effect.ALLOW),
                            ("Fail", guardrails.Effect.DENY)):
        ps = load_text(tmp_path, _daily_total(failure))
        decision = ps.evaluate("send_money", {"amount": 5}, principal={"user": "u"},
                               counters=_Down())  # type: ignore[arg-type]
        assert decision.effect == effect, (failure, decision)


def test_in_the_real_loop_the_huge_amount_is_not_sent(tmp_path: Path) -> None:
    sent: list[Any] = []

    def send_money(amount: int) -> str:
        """Send money."""
        sent.append(amount)
        return "sent"

    ps = load_text(tmp_path, _daily_total("Ignore"))
    store = MemoryStore()
    client = ScriptedChatClient([[call("send_money", amount=2**53)],
                                 [call("send_money", amount=999)], [text("done")]])
    agent = agent_with(client, [send_money],
                       guard(ps, principal={"user": "u"}, counters=store))
    asyncio.run(agent.run("pay"))
    assert sent == [999]
