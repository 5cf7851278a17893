"""A policy's rules as one generated function (``codegen.fused_rules``, run by
``evaluate.decide``) decide exactly as the rules one by one do.

Three levels: the fused function's hits and the meter it leaves equal the rule functions
evaluated one by one on the same bindings (generated rules that fire, fail, return
non-bools, read variables that fail, and run out of a small budget at every point); a
whole decision on the short path, fused, equals the general path's (``_decide``) and the
short path's with the fused function taken away, on policies with many rules, message
expressions between them (where the function stops and resumes), both failure policies,
audit mode and hostile calls, on both backends; and the fused source holds no expression
text and falls back when it cannot be built.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import guardrails
from guardrails.engine.decision import Decision
from guardrails.engine.evaluate import Candidates, decide
from guardrails.expr import codegen
from guardrails.expr.limits import METER, Limits, Meter
from guardrails.expr.values import CelError, Variables
from tests.test_engine_fast_path import (
    ACTIONS,
    MESSAGES,
    VALUES,
    _q,
    both,
    calls,
    record,
)

BACKENDS = ("compiled", "closures")

RULES = [
    'args.a > 5', 'args.a == "x"', 'has(args.b)', 'size(args.c) > 2',
    'args.a.startsWith("s")', 'string(args.a).contains("3")', 'args.b in params.known',
    'params.limit < args.a', 'dyn(variables.v1) > 3', 'dyn(variables.v2) == "sX"',
    '1 / (args.a - args.a) == 1', 'args.missing == 1', 'args.a', 'args.c',
    'principal.role == "admin"', '"ops" in principal.groups',
    'history.exists(h, h.tool == "t")', 'request.text.contains("pay")',
    'tool.name == "t" && tool.description != "x"', 'now.getFullYear() > 2000',
    'string(args.a).matches("^[a-z0-9]+$")', 'args.c.map(x, string(x) + string(x)).size() > 0',
    'args.c.all(x, string(x).size() < 100000)', 'true', 'false',
    'args.c.exists(x, x == 1) || args.a > 1', 'args.b.matches(string(args.a))',
    'string(args.c).size() + string(args.a).size() > 4',
    '[1, 2, 3].filter(x, x > 1).size() == 2 && args.a != 1',
    'cel.bind(x, string(args.a), x + x == "ss")',
]


def _load(text: str, backend: str, limits: Limits) -> guardrails.PolicySet:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "p.yaml"
        path.write_text(text)
        return guardrails.load(path, backend=backend, limits=limits)  # type: ignore[arg-type]


@st.composite
def policy(draw: st.DrawFn, index: int) -> str:
    lines = ["apiVersion: guardrails/v1", "kind: ToolPolicy",
             f"metadata: {{name: p{index}}}", "spec:",
             f"  mode: {draw(st.sampled_from(['enforce', 'enforce', 'audit']))}",
             f"  failurePolicy: {draw(st.sampled_from(['Fail', 'Ignore']))}",
             f"  defaultAction: {draw(st.sampled_from(['allow', 'deny']))}",
             "  match:", "    tools: [t]"]
    if draw(st.integers(0, 3)) == 0:
        lines.append(f"    when: {_q(draw(st.sampled_from(RULES[:8])))}")
    lines += ["  params: {limit: 4, known: [x, y, sX]}", "  variables:",
              f"    - {{name: v1, expression: {_q(draw(st.sampled_from(VALUES)))}}}",
              f"    - {{name: v2, expression: {_q(draw(st.sampled_from(VALUES)))}}}"]
    if draw(st.booleans()):
        lines += ["  repairs:", "    - name: r0",
                  f"      set: {{a: {_q(draw(st.sampled_from(VALUES)))}}}"]
    if draw(st.integers(0, 3)) == 0:
        lines.append("  secrets: {arguments: [secret]}")
    lines.append("  rules:")
    for i in range(draw(st.integers(1, 12))):
        lines += [f"    - name: rule{i}", f"      when: {_q(draw(st.sampled_from(RULES)))}",
                  f"      action: {draw(st.sampled_from(ACTIONS))}"]
        if draw(st.integers(0, 2)) == 0:
            lines.append("      message: 'static 3141'")
        if draw(st.integers(0, 2)) == 0:
            lines.append(f"      messageExpression: {_q(draw(st.sampled_from(MESSAGES)))}")
    return "\n".join(lines) + "\n"


@st.composite
def policy_sets(draw: st.DrawFn) -> str:
    return "---\n".join(draw(policy(i)) for i in range(draw(st.integers(1, 3))))


def unfused(ps: guardrails.PolicySet, tool: str) -> Candidates:
    """The tool's candidates with the fused functions taken away (rules one by one)."""
    found = Candidates(ps._candidates(tool).policies)
    assert found.plan is not None
    object.__setattr__(found, "plan", tuple(e._replace(fused=None) for e in found.plan))
    return found


def _one_by_one(ps: guardrails.PolicySet, call: dict[str, Any]) -> Decision | None:
    kw = dict(call)
    tool, args = kw.pop("tool"), kw.pop("args")
    candidates = unfused(ps, tool) if ps._candidates(tool).plan is not None else None
    if candidates is None:
        return None
    agent = kw.get("agent")
    from guardrails.engine.policyset import _agent_names

    return decide(candidates, ps._revision, kw.get("known_secrets"), ps._limits, tool, args,
                  kw.get("principal"), kw.get("history"), kw.get("request"),
                  kw.get("description", ""), kw.get("now"),
                  None if agent is None else _agent_names(agent))


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.filter_too_much])
@given(text=policy_sets(), call_list=st.lists(calls(), min_size=1, max_size=3),
       max_cost=st.sampled_from([3_000_000, 2_000, 400, 150, 60, 0]))
def test_fused_rules_decide_as_the_general_path_and_one_by_one(
        backend: str, text: str, call_list: list[dict[str, Any]], max_cost: int) -> None:
    try:
        ps = _load(text, backend, Limits(max_cost=max_cost))
    except guardrails.PolicyError:
        assume(False)
        raise
    if backend == "compiled":
        assert all(p.fused is not None and p.fused.run is not None for p in ps.policies)
    for call in call_list:
        fast, general = both(ps, call)
        assert record(fast) == record(general)
        single = _one_by_one(ps, call)
        if single is not None:
            assert record(single) == record(fast)


# --- the fused function itself, against the rule functions one by one -----------------

def _bindings(ps: guardrails.PolicySet, args: dict[str, Any], meter: Meter) -> dict[str, Any]:
    policy = ps.policies[0]
    variables = Variables(policy.variable_programs)
    b: dict[str, Any] = {"tool": {"name": "t", "description": ""}, "args": args,
                         "principal": {"role": "admin", "groups": ["ops"]},
                         "history": [{"tool": "t", "result": "", "trusted": False}],
                         "request": None, "now": None, METER: meter, "params": policy.params,
                         "variables": variables}
    variables.bindings = b
    return b


_ARGS = st.fixed_dictionaries({}, optional={
    "a": st.one_of(st.integers(-3, 9), st.sampled_from(["x", "s", "sX", "3", "ab1", ""]),
                   st.floats(allow_nan=False), st.none(), st.lists(st.integers(0, 3))),
    "b": st.sampled_from(["x", "y", "q", "[", 1]),
    "c": st.lists(st.one_of(st.integers(0, 3), st.sampled_from(["a", "bb"])), max_size=6)})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rules=st.lists(st.sampled_from([r for r in RULES if "request" not in r
                                       and "now." not in r]), min_size=1, max_size=10),
       stops=st.data(), args=_ARGS, budget=st.sampled_from([10**9, 5_000, 500, 120, 40, 1, -1]))
def test_hits_and_meter_equal_the_rules_one_by_one(rules: list[str], stops: st.DataObject,
                                                   args: dict[str, Any], budget: int) -> None:
    body = "".join(f"    - {{name: r{i}, when: {_q(r)}, action: deny}}\n"
                   for i, r in enumerate(rules))
    text = ("apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\nspec:\n"
            "  match: {tools: [t]}\n  params: {limit: 4, known: [x, y, sX]}\n"
            "  variables:\n    - {name: v1, expression: 'args.a'}\n"
            "    - {name: v2, expression: '\"s\" + args.b'}\n"
            f"  rules:\n{body}")
    try:
        ps = _load(text, "compiled", Limits())
    except guardrails.PolicyError:
        assume(False)
        raise
    programs = [r.when.program for r in ps.policies[0].rules]
    stop = stops.draw(st.lists(st.booleans(), min_size=len(programs), max_size=len(programs)))
    fused = codegen.fused_rules(programs, stop)
    assert fused is not None
    codegen.generate_pending()
    run = fused.run
    assert run is not None

    # One by one: each rule on the meter the previous ones left.
    meter = Meter(budget)
    b = _bindings(ps, dict(args), meter)
    expected = one_by_one(programs, b)
    one_left = meter.left

    # Fused: resumed after every stop, as the engine does.
    meter = Meter(budget)
    b = _bindings(ps, dict(args), meter)
    got: list[tuple[int, Any, str | None]] = []
    start = 0
    for _ in range(len(programs)):  # each resume starts further on
        hits = run(b, meter, start)
        if hits is None:
            break
        got += [(i, v, None if e is None else f"{type(e).__name__}: {e}") for i, v, e in hits]
        i, v, e = hits[-1]
        if not (e is None and v is True and stop[i] and i + 1 < len(programs)):
            break
        assert i + 1 > start
        start = i + 1
    assert got == expected
    assert meter.left == one_left


# --- the source and its fallbacks -------------------------------------------------------

def test_the_fused_source_holds_no_expression_text() -> None:
    text = ("apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\nspec:\n"
            "  match: {tools: [t]}\n  rules:\n"
            "    - {name: secretname, when: 'args.zebra_field == \"LITERAL_TEXT_42\"', "
            "action: deny}\n"
            "    - {name: other, when: 'args.a.matches(\"QUOTED_PATTERN\")', action: deny}\n")
    ps = _load(text, "compiled", Limits())
    fused = ps.policies[0].fused
    assert fused is not None
    source = fused.python_source()
    assert source.startswith("def _make(")
    for word in ("zebra_field", "LITERAL_TEXT_42", "QUOTED_PATTERN", "secretname", "args"):
        assert word not in source
    assert ps.evaluate("t", {"zebra_field": "LITERAL_TEXT_42", "a": ""}).effect == "deny"


def test_policies_of_one_shape_share_one_fused_source() -> None:
    docs = [("apiVersion: guardrails/v1\nkind: ToolPolicy\n"
             f"metadata: {{name: p{i}}}\nspec:\n  match: {{tools: [t]}}\n  rules:\n"
             f"    - {{name: r, when: 'args.a > {i}', action: deny}}\n"
             f"    - {{name: s, when: 'args.b == \"v{i}\"', action: deny}}\n")
            for i in range(5)]
    ps = _load("---\n".join(docs), "compiled", Limits())
    sources = {p.fused.python_source() for p in ps.policies if p.fused is not None}
    assert len(sources) == 1
    assert [d.effect for d in (ps.evaluate("t", {"a": 3, "b": "v9"}),
                               ps.evaluate("t", {"a": -1, "b": "v4"}),
                               ps.evaluate("t", {"a": -1, "b": "v"}))] == ["deny", "deny",
                                                                           "allow"]


def test_what_cannot_be_fused_runs_one_by_one() -> None:
    assert codegen._take_apart("def _make():\n    return 1\n") is None
    assert codegen.fused_rules([], []) is None
    ps = _load("apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\nspec:\n"
               "  match: {tools: [t]}\n  rules:\n"
               "    - {name: r, when: 'args.a > 5', action: deny}\n", "closures", Limits())
    assert ps.policies[0].fused is None  # not generated code
    assert ps.evaluate("t", {"a": 6}).effect == "deny"
    # A source Python's compiler refuses: no function, and the engine goes rule by rule.
    refused = codegen.FusedRules("def _make(:\n", ())
    refused._install(None)
    assert refused.run is None


def test_a_field_read_by_many_rules_is_read_once_and_a_failing_one_fails_each_rule() -> None:
    text = ("apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\nspec:\n"
            "  match: {tools: [t]}\n  failurePolicy: Ignore\n"
            "  variables:\n    - {name: v, expression: '1 / args.zero'}\n  rules:\n"
            "    - {name: a, when: 'args.missing == 1', action: deny}\n"
            "    - {name: b, when: 'args.missing == 2 || args.x == 1', action: deny}\n"
            "    - {name: c, when: 'variables.v > 1', action: deny}\n"
            "    - {name: d, when: 'variables.v < 1', action: deny}\n"
            "    - {name: e, when: 'args.x == 1', action: warn}\n")
    ps = _load(text, "compiled", Limits())
    fused = ps.policies[0].fused
    assert fused is not None and "_MISS" in fused.python_source()
    decision = ps.evaluate("t", {"x": 1, "zero": 0})
    general = ps._decide("t", {"x": 1, "zero": 0}, None, None, None, "", None, None)
    assert record(decision) == record(general)
    assert [e.element for e in decision.errors] == ["rules.a", "rules.c", "rules.d"]
    assert [r.rule for r in decision.rules] == ["b", "e"]  # b: the error absorbed by ||


def test_a_policy_of_very_many_rules_runs_them_one_by_one() -> None:
    n = codegen.MAX_FUSED_RULES + 1
    rules = "".join(f"    - {{name: r{i}, when: 'args.a == {i}', action: deny}}\n"
                    for i in range(n))
    ps = _load("apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\nspec:\n"
               f"  match: {{tools: [t]}}\n  rules:\n{rules}", "compiled", Limits())
    assert ps.policies[0].fused is None
    assert ps.evaluate("t", {"a": n - 1}).rules[0].rule == f"r{n - 1}"
    assert ps.evaluate("t", {"a": -1}).effect == "allow"


def one_by_one(programs: Any, b: Any) -> list[tuple[int, Any, str | None]]:
    """Each rule evaluated alone on ``b`` (one meter across them, as the fused function
    shares one): the hits a fused function must give, errors as their type and text."""
    expected: list[tuple[int, Any, str | None]] = []
    for i, program in enumerate(programs):
        try:
            value = program.evaluate(b)
        except Exception as exc:
            assert isinstance(exc, CelError)
            expected.append((i, None, f"{type(exc).__name__}: {exc}"))
            continue
        if value is not False:
            expected.append((i, value, None))
    return expected


# --- Python errors inside a rule: recorded as that rule's error, as one by one ------------

class _Unprintable(Exception):
    """An exception whose text cannot be read: ``str()`` of it raises."""

    def __str__(self) -> str:
        raise LookupError("no text")


class _Raising(Mapping[str, Any]):
    """Arguments whose every read raises ``error`` (a Python error, not a CEL one)."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def __getitem__(self, key: str) -> Any:
        raise self.error

    def get(self, key: str, default: Any = None) -> Any:
        raise self.error

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 1


@pytest.mark.parametrize(("error", "expected"), [
    (RecursionError("deep"), "CelError: expression evaluation too deep"),
    (ValueError("bad"), "CelError: evaluation failed: ValueError: bad"),
    (_Unprintable(), "LookupError: no text"),
])
def test_a_python_error_inside_a_rule_is_that_rules_error(error: BaseException,
                                                          expected: str) -> None:
    rules = ["args.a > 5", "true", "args.b == 1 || false", "params.limit < 9",
             'size(args.c) > 2 && "x" in params.known', "variables.v1 > 3"]
    body = "".join(f"    - {{name: r{i}, when: {_q(r)}, action: deny}}\n"
                   for i, r in enumerate(rules))
    text = ("apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\nspec:\n"
            "  match: {tools: [t]}\n  params: {limit: 4, known: [x, y, sX]}\n"
            "  variables:\n    - {name: v1, expression: 'args.a'}\n"
            f"  rules:\n{body}")
    ps = _load(text, "compiled", Limits())
    programs = [r.when.program for r in ps.policies[0].rules]
    fused = codegen.fused_rules(programs, [False] * len(programs))
    assert fused is not None
    codegen.generate_pending()
    assert fused.run is not None
    meter = Meter(10**6)
    b = _bindings(ps, {}, meter)
    b["args"] = _Raising(error)
    hits = fused.run(b, meter, 0)
    assert hits is not None
    got = [(i, v, None if e is None else f"{type(e).__name__}: {e}") for i, v, e in hits]
    assert got[:5] == [(0, None, expected), (1, True, None), (2, None, expected),
                       (3, True, None), (4, None, expected)]
    assert got[5][:2] == (5, None) and str(got[5][2]).startswith("CelError: variable v1: ")
    for _, _, e in hits:  # kept without what holds the frame (``values.untraced``)
        assert e is None or (e.__traceback__ is None and e.__context__ is None
                             and e.__cause__ is None)
    # Rule by rule, each rule's own function raises the same.
    for i, program in enumerate(programs):
        if i in (1, 3):
            continue
        with pytest.raises(Exception) as caught:
            program.evaluate(b)
        assert f"{type(caught.value).__name__}: {caught.value}" == got[i][2]
