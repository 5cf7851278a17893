"""Red team of the fused rules (``codegen.fused_rules``, run by ``evaluate.decide``).

A policy's rules run as one generated function that reads a field of ``args``,
``principal``, ``params`` or ``variables`` once for all its rules. Each attack here tries
to make that function decide differently from the general path (``PolicySet._decide``)
or from the same rules one by one: names shadowed by a comprehension or ``cel.bind``
(the remembered read must not leak into the inner scope), ``has()`` and optional
selection beside plain selection, variables that fail or run the meter out, NaN,
integers at the int64 edge, doubles that equal ints, a call that runs the meter out at
every point (every budget from 0 up: the same rule must fail at the same place), message
expressions between rules (where the function stops and resumes), both failure
policies, audit mode, the 64-rule split (63, 64, 65 and 129 rules), policies of one
shape whose literals differ (a regex, a field name, a folded constant), a reload to a
policy of the same shape, and threads sharing one PolicySet.
"""

from __future__ import annotations

import random
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import guardrails
from guardrails.expr import codegen
from guardrails.expr.limits import Limits
from tests.test_engine_fast_path import _q, both, record
from tests.test_engine_fused import _load, _one_by_one

RULES = [
    "args.?x.orValue(0) == 1", "has(args.x) && args.x == 1", "args.x == 1", "args.x > 0",
    "[{'x': 2}].exists(args, args.x == 2)", "cel.bind(args, {'x': 3}, args.x) == 3",
    "[{'x': 2}].all(args, args.x == 2) && args.x == 1",
    "cel.bind(principal, {'role': 'admin'}, principal.role == 'admin') && args.x == 0",
    "[1].exists(variables, variables == 1) || variables.ok == 2",
    "variables.boom > 0", "variables.costly.size() > 1", "dyn(variables.ok) == 2",
    "args.s.matches(params.re)", 'args.s.matches("^a+$")', "args.f != args.f",
    "args.x == 1.0", "params.known.exists(k, k == args.s)", "principal.role == 'admin'",
    "principal.missing == 1", "args.x", "args.l.map(y, y * 2).exists(z, z > args.x)",
    "args['x'] == 1", "args.s == 'x'", "args.?s.hasValue() && args.s.size() > 2",
    "args.l.size() > 2 && args.l[0] == args.x", "string(args.x) == args.s",
    "args.s + args.s == 'xx'", "args.missing.size() > 0",
    "args.l.all(e, e < args.x) || args.x == 3", "variables.ok == args.x", "args.f > 0.5",
    "params.known.map(k, k + args.s).exists(k, k.size() > 3)",
    "args.l.exists(e, variables.costly.size() > e)", "true", "false",
    "args.x + 1 > args.x", "args.x * args.x > 0", "has(args.s) || args.s == 'x'",
]
ARGS: list[dict[str, Any]] = [
    {"x": 1, "s": "x", "f": float("nan"), "l": [1, 2, 3]},
    {"x": 0, "s": "aaa", "f": 0.7, "l": []},
    {"x": 3, "s": "x", "l": [1, 2, 3, 4, 5], "m": {"1": 1}},
    {"s": 1, "x": "1", "l": "nope"},
    {},
    {"x": 1.0, "s": "abc", "f": 1e308, "l": [0.5, float("inf")]},
    {"x": 2**63 - 1, "s": "", "l": [2**63 - 1]},
    {"x": True, "s": "aaaa", "f": -0.0, "l": [True, 1, 1.0]},
]
PRINCIPALS: list[dict[str, Any] | None] = [None, {"role": "admin"}, {"role": 1}]
ACTIONS = ["allow", "deny", "halt", "require_approval", "warn"]
MESSAGE_EXPRESSIONS = ["'\"m \" + string(args.?x.orValue(0))'", "'variables.costly[0]'",
                       "'string(variables.boom)'"]


def _policy(rng: random.Random, index: int, n: int) -> str:
    lines = ["apiVersion: guardrails/v1", "kind: ToolPolicy",
             f"metadata: {{name: p{index}}}", "spec:",
             f"  mode: {rng.choice(['enforce', 'enforce', 'audit'])}",
             f"  failurePolicy: {rng.choice(['Fail', 'Ignore'])}",
             f"  defaultAction: {rng.choice(['allow', 'deny'])}",
             "  match: {tools: [t]}",
             "  params: {re: '^a', known: [x, y, aaa]}",
             "  variables:",
             "    - {name: boom, expression: '1 / (args.x - args.x)'}",
             "    - {name: costly, expression: "
             "'args.l.map(a, args.l.map(b, a)).map(c, string(c))'}",
             "    - {name: ok, expression: '2'}",
             "  rules:"]
    for i in range(n):
        lines += [f"    - name: r{i}", f"      when: {_q(rng.choice(RULES))}",
                  f"      action: {rng.choice(ACTIONS)}"]
        if rng.random() < 0.35:
            lines.append(f"      messageExpression: {rng.choice(MESSAGE_EXPRESSIONS)}")
    return "\n".join(lines) + "\n"


def _same(ps: guardrails.PolicySet, call: dict[str, Any]) -> None:
    fast, general = both(ps, call)
    assert record(fast) == record(general)
    single = _one_by_one(ps, call)
    if single is not None:
        assert record(single) == record(fast)


def _calls() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for args in ARGS:
        for principal in PRINCIPALS:
            call: dict[str, Any] = {"tool": "t", "args": dict(args)}
            if principal is not None:
                call["principal"] = principal
            out.append(call)
    return out


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 12), others=st.integers(0, 2),
       max_cost=st.one_of(st.integers(0, 500), st.integers(500, 4000), st.just(10**7)))
def test_hostile_rules_decide_as_the_general_path(seed: int, n: int, others: int,
                                                  max_cost: int) -> None:
    rng = random.Random(seed)
    text = "---\n".join([_policy(rng, 0, n)] +
                        [_policy(rng, j, rng.randint(1, 5)) for j in range(1, others + 1)])
    try:
        ps = _load(text, "compiled", Limits(max_cost=max_cost))
    except guardrails.PolicyError:
        assume(False)
        raise
    assert all(p.fused is not None and p.fused.run is not None for p in ps.policies)
    for call in _calls():
        _same(ps, call)


@pytest.mark.parametrize("n", [63, 64, 65, 129])
def test_the_64_rule_split_decides_the_same(n: int) -> None:
    rng = random.Random(n)
    text = _policy(rng, 0, n)
    for max_cost in (10**7, 3000, 700, 90):
        ps = _load(text, "compiled", Limits(max_cost=max_cost))
        fused = ps.policies[0].fused
        assert (fused is not None) == (n <= codegen.MAX_FUSED_RULES)
        for call in _calls():
            _same(ps, call)


def test_every_budget_fails_closed_at_the_same_rule() -> None:
    """Every budget from 0 to past the call's whole cost: the fused function charges what
    the rules one by one charge, so the meter runs out at the same rule, with the same
    errors and the same (denying) decision."""
    text = ("apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\nspec:\n"
            "  match: {tools: [t]}\n  params: {known: [x, y, aaa]}\n"
            "  variables:\n"
            "    - {name: costly, expression: 'args.l.map(a, args.l.map(b, a + 1))'}\n"
            "  rules:\n"
            "    - {name: a, when: 'args.l.exists(e, e > 100)', action: allow}\n"
            "    - {name: b, when: 'variables.costly.size() > 100', action: deny}\n"
            "    - name: c\n      when: 'args.s.matches(\"^a+b$\")'\n      action: warn\n"
            "      messageExpression: 'string(variables.costly.size()) + args.s'\n"
            "    - {name: d, when: 'params.known.exists(k, k + args.s == \"xa\")', "
            "action: deny}\n"
            "    - {name: e, when: 'args.l.all(e, e < 100) && args.s.size() < 100', "
            "action: warn}\n")
    call = {"tool": "t", "args": {"l": list(range(4)), "s": "aaab"}}
    full = _load(text, "compiled", Limits()).evaluate("t", call["args"])
    assert not full.errors
    seen = set()
    for max_cost in range(0, 1600, 3):
        ps = _load(text, "compiled", Limits(max_cost=max_cost))
        assert ps.policies[0].fused is not None
        fast, general = both(ps, call)
        assert record(fast) == record(general)
        single = _one_by_one(ps, call)
        assert single is not None and record(single) == record(fast)
        if fast.errors:
            assert fast.effect.value == "deny"  # failurePolicy Fail: out of budget denies
        seen.add(tuple(e.element for e in fast.errors))
    assert len(seen) > 4  # the meter ran out at several different rules


def test_policies_of_one_shape_with_different_literals_keep_their_own() -> None:
    """One fused source serves policies of one shape: each keeps its own regex, field
    name and folded constant."""
    docs = []
    for i, (pattern, field, const) in enumerate(
            [("^a+$", "x", 1), ("^b+$", "y", 2), ("^(a|b)$", "z", 3)]):
        docs.append(
            "apiVersion: guardrails/v1\nkind: ToolPolicy\n"
            f"metadata: {{name: p{i}}}\nspec:\n  match: {{tools: [t]}}\n  rules:\n"
            f"    - {{name: r, when: 'args.s.matches(\"{pattern}\")', action: deny}}\n"
            f"    - {{name: s, when: 'args.{field} == {const} + 1', action: deny}}\n"
            f"    - {{name: u, when: 'args.{field} == {const} * 10', action: warn}}\n")
    ps = _load("---\n".join(docs), "compiled", Limits())
    assert len({p.fused.python_source() for p in ps.policies if p.fused is not None}) == 1
    cases = [({"s": "aa"}, ["p0/r"]), ({"s": "bb"}, ["p1/r"]), ({"s": "a"}, ["p0/r", "p2/r"]),
             ({"s": "", "x": 2}, ["p0/s"]), ({"s": "", "y": 2}, []),
             ({"s": "", "y": 3}, ["p1/s"]), ({"s": "", "z": 30}, ["p2/u"]),
             ({"s": "", "x": 10, "y": 20}, ["p0/u", "p1/u"])]
    for given_args, fired in cases:
        args = {"s": "", "x": 0, "y": 0, "z": 0, **given_args}
        decision = ps.evaluate("t", args)
        assert [f"{r.policy}/{r.rule}" for r in decision.rules] == fired
        _same(ps, {"tool": "t", "args": args})


def test_a_reload_to_the_same_shape_uses_the_new_literals() -> None:
    def text(limit: int, field: str) -> str:
        return ("apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\nspec:\n"
                "  match: {tools: [t]}\n  rules:\n"
                f"    - {{name: r, when: 'args.{field} > {limit}', action: deny}}\n"
                f"    - {{name: s, when: 'args.{field} > {limit} * 2', action: halt}}\n")
    old = _load(text(10, "a"), "compiled", Limits())
    new = _load(text(100, "b"), "compiled", Limits())
    assert old.policies[0].fused is not None and new.policies[0].fused is not None
    assert old.policies[0].fused.python_source() == new.policies[0].fused.python_source()
    assert old.evaluate("t", {"a": 50, "b": 0}).effect.value == "halt"
    assert new.evaluate("t", {"a": 50, "b": 0}).effect.value == "allow"
    assert new.evaluate("t", {"a": 0, "b": 150}).effect.value == "deny"
    assert old.evaluate("t", {"a": 0, "b": 150}).effect.value == "allow"


def test_threads_sharing_a_policy_set_decide_as_one_thread() -> None:
    rng = random.Random(5)
    text = "---\n".join(_policy(rng, j, 10) for j in range(3))
    ps = _load(text, "compiled", Limits(max_cost=2000))
    calls = _calls()
    expected = [record(ps._decide("t", c["args"], c.get("principal"), None, None, "", None,
                                  None, None, (), guardrails.Effect.ALLOW)) for c in calls]
    failures: list[str] = []

    def work(offset: int) -> None:
        for k in range(len(calls) * 4):
            i = (k + offset) % len(calls)
            c = calls[i]
            got = record(ps.evaluate("t", c["args"], principal=c.get("principal")))
            if got != expected[i]:
                failures.append(f"call {i}")

    threads = [threading.Thread(target=work, args=(j * 7,)) for j in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


OVER_BUDGET_THEN_ALLOW = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: p}
spec:
  match: {tools: [send_money]}
  failurePolicy: Ignore
  defaultAction: deny
  rules:
    - {name: costly, when: 'args.recipient.split("").map(a, args.recipient + a).size() < 0',
       action: deny}
    - {name: cheap, when: 'args.amount > 0.5', action: allow}
"""


async def test_a_call_over_the_budget_never_runs_whatever_a_later_cheap_rule_says(
        tmp_path: Path) -> None:
    """Finding (redteam15c): generated code of an expression that charges nothing did not
    look at the meter, so after the call ran out a cheap ``allow`` rule still fired on the
    compiled backend (fused or not) where closures failed it: under ``Ignore`` with a
    ``deny`` default, ``evaluate`` allowed the call on one backend and denied it on the
    other. Now every generated expression refuses a meter already run out, as closures
    do. (The guard denies every call over the budget whatever the failurePolicy, so in the
    loop nothing ran on either: pinned here too.)"""
    from guardrails.agent_framework import ScriptedChatClient, guard
    from guardrails.agent_framework.scripted import call, text
    from tests.af_support import agent_with
    from tests.af_tools import CALLS, send_money

    path = tmp_path / "p.yaml"
    path.write_text(OVER_BUDGET_THEN_ALLOW)
    args = {"recipient": "x" * 400, "amount": 10}
    found = []
    for backend in ("compiled", "closures"):
        ps = guardrails.load(path, backend=backend,  # type: ignore[arg-type]
                             limits=Limits(max_cost=3000))
        decision = ps.evaluate("send_money", args)
        assert decision.effect.value == "deny" and decision.rules == ()
        assert [e.element for e in decision.errors] == ["rules.costly", "rules.cheap", "input"]
        found.append(record(decision))
        CALLS.clear()
        client = ScriptedChatClient([[call("send_money", **args)], [text("done")]])
        await agent_with(client, [send_money], guard(ps)).run("pay")
        assert CALLS == []
    assert found[0] == found[1]


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 12),
       max_cost=st.one_of(st.integers(0, 600), st.integers(600, 4000)))
def test_both_backends_decide_alike_when_the_budget_runs_out(seed: int, n: int,
                                                              max_cost: int) -> None:
    text = _policy(random.Random(seed), 0, n)
    try:
        compiled = _load(text, "compiled", Limits(max_cost=max_cost))
        closures = _load(text, "closures", Limits(max_cost=max_cost))
    except guardrails.PolicyError:
        assume(False)
        raise
    for call in _calls():
        args, principal = call["args"], call.get("principal")
        assert record(compiled.evaluate("t", args, principal=principal)) == record(
            closures.evaluate("t", args, principal=principal))
