"""Red team, engine level: inputs that try to crash or slip past evaluation, and secret
values that try to leave through ``Decision.to_dict()`` or ``explain()``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import guardrails
from guardrails import Effect
from tests.engine_support import load_text, policy

PIN = "PIN-SECRET-884422"

PAYMENTS = policy("payments", spec="""
    match: {tools: [send_money]}
    repairs:
      - name: amount-as-string
        when: 'type(args.amount) == string'
        set:
          amount: 'double(args.amount)'
    rules:
      - name: absurd
        when: 'args.amount > 100000.0'
        action: halt
      - name: large
        when: 'args.amount > 1000.0'
        action: require_approval
""")


# -- inputs that try to make evaluation raise or pass by accident -----------------------------


# NaN and Infinity in direct ``evaluate`` calls reach the rules (policy authors catch NaN
# with ``!(x > 0.0)``, see test_policies_library); from a model they are refused by the
# guard as not JSON (tests/test_redteam_af.py).


@pytest.mark.parametrize("text", ["nan", "NaN", "inf", "-Infinity"])
def test_a_repair_producing_a_non_finite_number_is_not_applied(tmp_path: Path, text: str) -> None:
    ps = load_text(tmp_path, PAYMENTS)
    d = ps.evaluate("send_money", {"amount": text})
    assert d.effect is not Effect.ALLOW
    assert d.arguments["amount"] == text  # not repaired into a number that passes every rule
    assert any(e.element == "repairs.amount-as-string" for e in d.errors)


def test_huge_integer_never_raises(tmp_path: Path) -> None:
    # float(10**400) raises OverflowError; the engine promises never to raise on inputs.
    ps = load_text(tmp_path, PAYMENTS)
    huge = int("9" * 400)
    d = ps.evaluate("send_money", {"amount": huge})
    assert d.effect is Effect.DENY
    d = ps.evaluate("send_money", {"amount": 1}, principal={"n": huge},
                    history=[{"args": {"n": -huge}}])
    assert d.effect in (Effect.ALLOW, Effect.DENY)


def test_big_integer_within_double_range_is_compared_by_value(tmp_path: Path) -> None:
    ps = load_text(tmp_path, PAYMENTS)
    assert ps.evaluate("send_money", {"amount": 10**30}).effect is Effect.HALT


@pytest.mark.parametrize("args", [
    {1: "x", "amount": 5},
    {("a",): 1, "amount": 5},
    ["amount", 5],
    "amount=5",
    {"amount": {"nested": object()}},
    {"amount": b"5"},
], ids=["int-key", "tuple-key", "list", "string", "object", "bytes"])
def test_malformed_arguments_fail_closed(tmp_path: Path, args: object) -> None:
    ps = load_text(tmp_path, PAYMENTS)
    d = ps.evaluate("send_money", args)  # type: ignore[arg-type]
    assert d.effect is Effect.DENY
    json.dumps(d.to_dict())


def test_deeply_nested_arguments_fail_closed(tmp_path: Path) -> None:
    ps = load_text(tmp_path, PAYMENTS)
    deep: object = 5
    for _ in range(5000):
        deep = [deep]
    d = ps.evaluate("send_money", {"amount": deep})
    assert d.effect is Effect.DENY
    json.dumps(d.to_dict())


# -- secret values leaving through records ----------------------------------------------


LOGIN = policy("login", spec="""
    match:
      tools: [login]
      when: 'int(args.pin) > 0'
    secrets:
      arguments: [pin]
    variables:
      - name: k
        expression: 'args.pin + "-suffix"'
      - name: n
        expression: 'size(args.pin)'
    rules:
      - name: r
        when: 'variables.k.startsWith("zzz") || variables.n > 100'
        action: deny
        message: m
""")


def _assert_no_pin(data: object) -> None:
    assert PIN not in json.dumps(data)


def test_match_when_error_text_is_scrubbed(tmp_path: Path) -> None:
    ps = load_text(tmp_path, LOGIN)
    d = ps.evaluate("login", {"user": "u", "pin": PIN})
    assert any(e.element == "match.when" for e in d.errors)
    _assert_no_pin(d.to_dict())
    assert all(PIN not in e.message for e in d.errors)


def test_explain_never_shows_a_secret_through_a_variable(tmp_path: Path) -> None:
    ps = load_text(tmp_path, LOGIN)
    explanation = ps.explain("login", {"user": "u", "pin": PIN})
    dumped = explanation.to_dict()
    _assert_no_pin(dumped)
    steps = {s["element"]: s for t in dumped["policies"] for s in t["steps"]}
    assert steps["variables.k"]["value"] == "[REDACTED]-suffix"
    assert steps["variables.n"]["value"] == len(PIN)  # a non-secret value stays readable


def test_secret_declared_by_a_policy_that_did_not_match_is_still_secret(tmp_path: Path) -> None:
    # Secrecy is a property of the argument, not of whether a policy's condition held.
    ps = load_text(tmp_path, policy("login", spec="""
        match:
          tools: [login]
          when: 'principal.admin == true'
        secrets:
          arguments: [pin]
        rules:
          - {name: r, when: 'false', action: deny}
    """), policy("audit-all", spec="""
        rules:
          - name: quote
            when: 'true'
            action: deny
            messageExpression: '"refused " + string(args)'
    """))
    d = ps.evaluate("login", {"user": "u", "pin": PIN}, principal={"admin": False})
    assert d.policies == ("audit-all",)
    assert "pin" in d.secret_arguments
    _assert_no_pin(d.to_dict())
    _assert_no_pin(ps.explain("login", {"user": "u", "pin": PIN},
                              principal={"admin": False}).to_dict())


def test_numeric_secret_is_redacted_in_explain(tmp_path: Path) -> None:
    ps = load_text(tmp_path, policy("login", spec="""
        secrets:
          arguments: [pin]
        variables:
          - name: twice
            expression: 'args.pin'
        rules:
          - {name: r, when: 'variables.twice == 0', action: deny}
    """))
    dumped = json.dumps(ps.explain("login", {"pin": 93817265}).to_dict())
    assert "93817265" not in dumped


def test_policy_violation_text_names_rules_only(tmp_path: Path) -> None:
    ps = load_text(tmp_path, policy("login", spec="""
        secrets:
          arguments: [pin]
        rules:
          - name: r
            when: 'true'
            action: halt
            messageExpression: '"pin " + args.pin + " user " + args.user'
    """))
    d = ps.evaluate("login", {"pin": PIN, "user": "mallory-user-99"})
    text = str(guardrails.PolicyViolation(d)) + repr(guardrails.PolicyViolation(d))
    assert PIN not in text and "mallory-user-99" not in text
    assert PIN not in d.message and "[REDACTED]" in d.message
