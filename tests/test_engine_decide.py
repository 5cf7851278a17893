"""``evaluate.decide`` reads a call's inputs itself (plain data in its own frame,
anything else through ``read_call``), and a tool's generated short path
(``evaluate.short_path``, taken by ``PolicySet.evaluate``) runs ``decide``'s steps for its
plan in one function; both decide exactly as the general path does.

The short path bounds plain arguments with its own top-level look and hands everything
else to the general walkers; these tests aim at where the two could part: inputs exactly
at, one under and one over the size bound (the bound found by bisecting ``read_call``, the
general reader, so no charge is restated here), depth bounds of 0 and 1, integers at the
int64 edges, keys that are not strings, subclasses of ``str``, ``dict`` and ``datetime``,
naive and aware clocks, inputs no policy reads and hostile ones; on generated policies
(variables, repairs, params, ``match.when``, ``failurePolicy`` Ignore, message
expressions, erroring rules, a small cost budget) and both backends. Every field of the
two decisions must be equal (``record``), input errors included.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import guardrails
from guardrails.engine.evaluate import SHORT_MAX_POLICIES, decide, read_call
from guardrails.engine.scrub import Scrubber
from guardrails.expr.limits import Limits
from tests.test_engine_fast_path import (
    ACTIONS,
    ARG_CONDITIONS,
    CONDITIONS,
    MESSAGES,
    SAFE_VALUES,
    VALUES,
    OddMapping,
    _load,
    _q,
    both,
    calls,
    policy_sets,
    record,
)

BACKENDS = ("compiled", "closures")


@pytest.fixture(autouse=True, scope="module")
def _every_shape_compiled() -> Any:
    """Short paths of every shape these tests generate (a process compiles at most
    ``_SHORT_FACTORIES_MAX``, then runs ``decide``: see the last test; conftest drops
    them after the file)."""
    from guardrails.engine import evaluate

    was = evaluate._SHORT_FACTORIES_MAX
    evaluate._SHORT_FACTORIES_MAX = 10**6
    yield
    evaluate._SHORT_FACTORIES_MAX = was

_INT64_MAX = 2**63 - 1


class Text(str):
    """A ``str`` subclass: read by its data, never taken for a plain text."""


class Clock(datetime.datetime):
    """A ``datetime`` subclass."""


READS_ALL = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: all}
spec:
  match: {tools: [t]}
  failurePolicy: %s
  params: {limit: 4}
  variables:
    - {name: v, expression: 'string(args.a) + "!"'}
  rules:
    - {name: a, when: 'has(args.a) && string(args.a).size() > 3', action: deny}
    - {name: p, when: 'principal.role == "admin"', action: require_approval}
    - {name: h, when: 'history.size() > 1', action: warn}
    - {name: r, when: 'request.text.contains("pay")', action: warn,
       messageExpression: '"asked " + dyn(variables.v)'}
    - {name: n, when: 'now.getFullYear() < 2000', action: halt}
    - {name: d, when: 'tool.description == "x"', action: deny}
"""

READS_ARGS = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: args}
spec:
  match: {tools: [t]}
  rules:
    - {name: a, when: 'has(args.a)', action: deny}
"""

leaves = st.one_of(
    st.sampled_from(["", "x", "pay 314", "s3cret-value", "ä" * 3, Text("sub")]),
    st.integers(-3, 3), st.sampled_from([_INT64_MAX, _INT64_MAX + 1, -(2**63), -(2**63) - 1,
                                         2**2000]),
    st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.none())
values = st.recursive(leaves, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["a", "k"]), inner,
                                                 max_size=2),
    st.tuples(inner)), max_leaves=5)


@st.composite
def plain_calls(draw: st.DrawFn) -> dict[str, Any]:
    """Calls of plain data for the most part (the short path reads these itself)."""
    args: dict[Any, Any] = {}
    for key in draw(st.lists(st.sampled_from(["a", "b", "c", "long-key" * 5, Text("t")]),
                             max_size=5, unique=True)):
        args[key] = draw(st.one_of(leaves, leaves, values))
    if draw(st.integers(0, 12)) == 0:
        args[draw(st.sampled_from([3, None, (1,)]))] = "not a string key"
    kw: dict[str, Any] = {"tool": "t", "args": draw(st.one_of(
        st.just(args), st.just(args), st.just(args), st.just(None),
        st.just(OddMapping(dict(args)) if all(type(k) is str for k in args) else args),
        st.just(collections.OrderedDict(args))))}
    if draw(st.booleans()):
        kw["principal"] = draw(st.one_of(
            st.fixed_dictionaries({"role": st.sampled_from(["admin", "user", Text("admin")])},
                                  optional={"n": values}),
            st.sampled_from([{}, OddMapping({"role": "admin"}), ("role",), "admin", 5])))
    if draw(st.booleans()):
        kw["history"] = draw(st.one_of(
            st.lists(st.fixed_dictionaries({"tool": st.just("t")},
                                           optional={"result": st.sampled_from(["", "ok"]),
                                                     "x": values}), max_size=3),
            st.sampled_from([(), ({"tool": "t"},), "no", [1]])))
    if draw(st.booleans()):
        kw["request"] = draw(st.sampled_from(["please pay", "", Text("pay me"), 5, b"pay"]))
    if draw(st.booleans()):
        kw["description"] = draw(st.sampled_from(["", "x", Text("x"), 7, None]))
    if draw(st.booleans()):
        kw["now"] = draw(st.sampled_from([
            datetime.datetime(1999, 1, 1), datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
            Clock(1999, 1, 1), "1999-01-01", 5]))
    if draw(st.integers(0, 3)) == 0:
        kw["known_secrets"] = Scrubber(["pay 314"])
    if draw(st.integers(0, 3)) == 0:
        kw["agent"] = draw(st.sampled_from(["alpha", ("beta", "id-1")]))
    return kw


def _cost(ps: guardrails.PolicySet, call: dict[str, Any]) -> int | None:
    """The smallest ``max_input_bytes`` the general reader accepts ``call`` at (None when
    it refuses it for another reason than its size)."""
    names = ps._candidates("t").names

    def error(limit: int) -> str | None:
        limits = dataclasses.replace(ps.limits, max_input_bytes=limit)
        return read_call(limits, "t", call.get("args"), call.get("principal"),
                         call.get("history"), call.get("request"),
                         call.get("description", ""), call.get("now"), names)[1]

    if error(10**7) is not None:
        return None
    low, high = -1, 10**7  # error(low) is over the bound, error(high) is None
    while high - low > 1:
        mid = (low + high) // 2
        if error(mid) is None:
            high = mid
        else:
            low = mid
    return high


def _at(ps: guardrails.PolicySet, **limits: int) -> guardrails.PolicySet:
    return guardrails.PolicySet(ps.policies, revision=ps.revision,
                                limits=dataclasses.replace(ps.limits, **limits))


def _same(ps: guardrails.PolicySet, call: dict[str, Any]) -> guardrails.Decision:
    fast, general = both(ps, call)
    assert record(fast) == record(general)
    return fast


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("failure", ["Fail", "Ignore"])
@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(call=plain_calls(), which=st.sampled_from(["all", "args"]),
       depth=st.sampled_from([32, 32, 2, 1, 0]))
def test_decide_at_the_size_bound_decides_as_the_general_path(
        backend: str, failure: str, call: dict[str, Any], which: str, depth: int) -> None:
    text = READS_ALL % failure if which == "all" else READS_ARGS
    ps = _at(_load(text, backend, Limits()), max_input_depth=depth)
    assert ps._candidates("t").plan is not None
    _same(ps, call)
    cost = _cost(ps, call)
    if cost is None:
        return
    for limit in (cost - 1, cost, cost + 1):
        bounded = _at(ps, max_input_bytes=limit)
        decision = _same(bounded, call)
        over = any(e.element == "input" and "size bound" in e.message
                   for e in decision.errors)
        assert over == (limit < cost)


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.filter_too_much])
@given(text=policy_sets(), call_list=st.lists(st.one_of(calls(), plain_calls()), min_size=1,
                                              max_size=3),
       max_cost=st.sampled_from([3_000_000, 400, 60, 0]),
       max_bytes=st.sampled_from([1_000_000, 1_000_000, 2_000, 300]))
def test_decide_on_generated_policies_decides_as_the_general_path(
        backend: str, text: str, call_list: list[dict[str, Any]], max_cost: int,
        max_bytes: int) -> None:
    try:
        ps = _load(text, backend, Limits(max_cost=max_cost, max_input_bytes=max_bytes))
    except guardrails.PolicyError:
        assume(False)
        raise
    for call in call_list:
        _same(ps, call)


@pytest.mark.parametrize("backend", BACKENDS)
def test_decide_reads_plain_inputs_and_refuses_the_rest_as_the_general_path(
        backend: str) -> None:
    """Fixed cases at each input's own check (the messages are the general reader's)."""
    ps = _load(READS_ALL % "Fail", backend, Limits(max_input_bytes=5_000))
    cases: list[tuple[dict[str, Any], str | None]] = [
        ({"args": {"a": "x" * 4_000}}, None),
        ({"args": {"a": "x" * 5_000}}, "inputs exceed the size bound"),
        ({"args": {f"k{i}": 1 for i in range(25)}}, "inputs exceed the size bound"),
        ({"args": {"a": 1}, "principal": {"role": "x" * 5_000}},
         "inputs exceed the size bound"),
        ({"args": {"a": 1}, "request": "x" * 5_000}, "inputs exceed the size bound"),
        ({"args": {"a": _INT64_MAX + 1}}, None),
        ({"args": {"a": 2**2000}}, "input number is beyond the double range"),
        ({"args": {3: "x"}}, "map keys in inputs must be strings"),
        ({"args": {"a": {"b": {"c": 1}}}}, None),
        ({"args": {"a": object()}}, "input value of type object is not JSON data"),
        ({"args": "text"}, "arguments must be a JSON object, got str"),
        ({"args": {}, "principal": "admin"}, "principal must be a map"),
        ({"args": {}, "history": "no"}, "history must be a list, got str"),
        ({"args": {}, "request": 5}, "request must be text"),
        ({"args": {}, "now": "1999-01-01"}, "now must be a datetime, got str"),
        ({"args": {}, "now": Clock(1999, 1, 1)}, None),
        ({"args": {}, "description": Text("x")}, None),
        ({"args": None}, None),
    ]
    for kw, error in cases:
        decision = _same(ps, {"tool": "t", **kw})
        found = [e.message for e in decision.errors if e.element == "input"]
        assert found == ([] if error is None else [error]), kw
    deep = _at(ps, max_input_depth=1)
    decision = _same(deep, {"tool": "t", "args": {"a": {"b": 1}}})
    assert [e.message for e in decision.errors] == ["input nested deeper than 1 levels"]
    flat = _at(ps, max_input_depth=0)
    decision = _same(flat, {"tool": "t", "args": {}})
    assert [e.message for e in decision.errors] == ["input nested deeper than 0 levels"]


# --- the generated short path ------------------------------------------------------


@st.composite
def simple_policy(draw: st.DrawFn, index: int) -> str:
    """A policy whose tool's plan has a generated short path (no ``match.when`` or agent
    selector): variables, params, secrets, redact patterns, audit mode, both failure
    policies, rules that fire, fail and return non-bools, message expressions, and repairs
    that fire, do not, fail (their ``when`` or a ``set``), change an argument's type, set
    or unset a secret argument, and cost (``REPAIR_VALUES``)."""
    lines = ["apiVersion: guardrails/v1", "kind: ToolPolicy",
             f"metadata: {{name: s{index}}}", "spec:",
             f"  mode: {draw(st.sampled_from(['enforce', 'enforce', 'audit']))}",
             f"  failurePolicy: {draw(st.sampled_from(['Fail', 'Ignore']))}",
             f"  defaultAction: {draw(st.sampled_from(['allow', 'allow', 'deny']))}",
             f"  match: {{tools: [{draw(st.sampled_from(['t', 't*']))}]}}",
             "  params: {limit: 4, known: [x, y, sX]}"]
    if draw(st.booleans()):
        lines += ["  variables:",
                  f"    - {{name: v1, expression: {_q(draw(st.sampled_from(VALUES)))}}}",
                  f"    - {{name: v2, expression: {_q(draw(st.sampled_from(VALUES)))}}}"]
    if draw(st.integers(0, 2)) == 0:
        lines.append("  secrets: {arguments: [secret]}")
    if draw(st.integers(0, 2)) == 0:
        lines.append("  redact: [{name: digits, regex: '[0-9]{3}'}]")
    repairs = draw(st.integers(0, 3))
    if repairs:
        lines.append("  repairs:")
    for i in range(repairs):
        lines.append(f"    - name: r{i}")
        if draw(st.booleans()):
            lines.append(f"      when: {_q(draw(st.sampled_from(REPAIR_CONDITIONS)))}")
        target = draw(st.sampled_from(["a", "a", "b", "secret", "d"]))
        value = draw(st.sampled_from(SAFE_VALUES if draw(st.booleans()) else REPAIR_VALUES))
        sets = f"{target}: {_q(value)}"
        if draw(st.integers(0, 2)) == 0:  # a second argument set by the same repair
            second = draw(st.sampled_from([t for t in ["a", "b", "secret", "e"] if t != target]))
            sets += f", {second}: {_q(draw(st.sampled_from(REPAIR_VALUES)))}"
        lines.append(f"      set: {{{sets}}}")
        if draw(st.integers(0, 2)) == 0:
            lines.append(f"      unset: [{draw(st.sampled_from(['b', 'c', 'secret']))}]")
    lines.append("  rules:")
    conditions = [c for c in CONDITIONS if "variables" not in c] if not any(
        "variables:" in line for line in lines) else CONDITIONS
    for i in range(draw(st.integers(1, 5))):
        lines += [f"    - name: rule{i}", f"      when: {_q(draw(st.sampled_from(conditions)))}",
                  f"      action: {draw(st.sampled_from(ACTIONS))}"]
        if draw(st.booleans()):
            lines.append("      message: 'static 3141 s3cret-value'")
        if draw(st.integers(0, 2)) == 0 and "variables:" in "".join(lines):
            lines.append(f"      messageExpression: {_q(draw(st.sampled_from(MESSAGES)))}")
        elif draw(st.integers(0, 3)) == 0:
            lines.append(f"      messageExpression: {_q(MESSAGES[0])}")
    return "\n".join(lines) + "\n"


REPAIR_CONDITIONS = [*ARG_CONDITIONS, 'type(args.a) == string', 'args.a == "1,5"',
                     '"3" + 4 == "x"']
"""A repair's ``when``: those of the general differential tests, one that holds for a
type, and one that fails on every call (not a bool: a type error)."""
REPAIR_VALUES = [*VALUES, 'double(string(args.a).replace(",", ""))', 'int(args.a)',
                 'args.c.map(x, string(x) + string(x))', 'string(args.secret) + "!"']
"""A repair's ``set``: the general tests' values, the 20-rule benchmark's repair (a text
with a comma to a number), one that fails on most calls, one whose cost grows with the
arguments (to run out of budget inside a repair) and one that copies a secret."""


@st.composite
def simple_sets(draw: st.DrawFn) -> str:
    return "---\n".join(draw(simple_policy(i)) for i in range(draw(st.integers(1, 3))))


def _three(ps: guardrails.PolicySet, call: dict[str, Any]) -> None:
    """The generated short path (``evaluate``), ``decide`` itself and the general path."""
    fast, general = both(ps, call)
    assert record(fast) == record(general)
    kw = dict(call)
    tool, args = kw.pop("tool"), kw.pop("args")
    candidates = ps._candidates(tool)
    if candidates.plan is None:
        return
    from guardrails.engine.policyset import _agent_names

    agent = kw.get("agent")
    direct = decide(candidates, ps._revision, kw.get("known_secrets"), ps._limits, tool, args,
                    kw.get("principal"), kw.get("history"), kw.get("request"),
                    kw.get("description", ""), kw.get("now"),
                    None if agent is None else _agent_names(agent))
    assert record(direct) == record(general)


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.filter_too_much])
@given(text=simple_sets(), call_list=st.lists(st.one_of(calls(), plain_calls()), min_size=1,
                                              max_size=4),
       max_cost=st.sampled_from([3_000_000, 3_000_000, 400, 120, 60, 0]),
       max_bytes=st.sampled_from([1_000_000, 1_000_000, 1_000, 250]))
def test_the_generated_short_path_decides_as_decide_and_the_general_path(
        backend: str, text: str, call_list: list[dict[str, Any]], max_cost: int,
        max_bytes: int) -> None:
    try:
        ps = _load(text, backend, Limits(max_cost=max_cost, max_input_bytes=max_bytes))
    except guardrails.PolicyError:
        assume(False)
        raise
    if backend == "compiled":
        assert ps._candidates("t").short is not None  # what is compared is the generated path
    for call in call_list:
        _three(ps, call)


def test_which_plans_have_a_generated_short_path() -> None:
    """Generated for plans without conditions (with repairs too), every policy fused, at most
    ``SHORT_MAX_POLICIES``; otherwise ``decide`` runs (and a closures plan has none)."""
    ps = _load(READS_ARGS, "compiled", Limits())
    assert ps._candidates("t").short is not None
    assert _load(READS_ARGS, "closures", Limits())._candidates("t").short is None
    conditional = READS_ARGS.replace("tools: [t]}", "tools: [t], when: 'has(args.b)'}")
    assert _load(conditional, "compiled", Limits())._candidates("t").short is None
    repaired = READS_ARGS.replace("  rules:", "  repairs:\n    - {name: r, set: {a: '1'}}\n"
                                  "  rules:")
    assert _load(repaired, "compiled", Limits())._candidates("t").short is not None
    many = "---\n".join(READS_ARGS.replace("name: args}", f"name: a{i}}}")
                        for i in range(SHORT_MAX_POLICIES + 1))
    big = _load(many, "compiled", Limits())
    assert big._candidates("t").short is None
    assert _load("---\n".join(many.split("---\n")[1:]), "compiled",
                 Limits())._candidates("t").short is not None
    for text in (READS_ARGS, conditional, repaired, many):
        for backend in BACKENDS:
            ps = _load(text, backend, Limits())
            for args in ({"a": 1}, {"b": 2}, {"a": {"deep": [1]}}, {3: 1}, None):
                _three(ps, {"tool": "t", "args": args})


def test_a_generated_short_path_is_readable_python_shared_by_shape() -> None:
    """One template per shape (its constants are the defaults), plain Python source."""
    import inspect

    from guardrails.engine import evaluate

    a = _load(READS_ARGS, "compiled", Limits())._candidates("t").short
    b = _load(READS_ARGS.replace("has(args.a)", "args.b == 3"), "compiled",
              Limits())._candidates("t").short
    assert a is not None and b is not None and a is not b
    assert a.__code__ is b.__code__  # the same shape: one compile
    source = next(s for s, f in evaluate._SHORT_FACTORIES.items()
                  if f.__code__.co_consts and a.__code__ in f.__code__.co_consts)
    assert "def _short(" in source and "has(args.a)" not in source
    assert "_F0(b, meter, 0)" in source and inspect.isfunction(a)


def test_past_the_bound_of_shapes_a_plan_runs_decide() -> None:
    from guardrails.engine import evaluate

    was = evaluate._SHORT_FACTORIES_MAX
    evaluate._SHORT_FACTORIES_MAX = len(evaluate._SHORT_FACTORIES)
    try:
        text = READS_ARGS.replace("has(args.a)", 'has(args.a) && request.text == "q"')
        text = "---\n".join(text.replace("name: args}", f"name: a{i}}}") for i in range(7))
        ps = _load(text, "compiled", Limits())
        assert ps._candidates("t").plan is not None and ps._candidates("t").short is None
        for args in ({"a": 1}, {"b": 1}):
            _three(ps, {"tool": "t", "args": args, "request": "q"})
    finally:
        evaluate._SHORT_FACTORIES_MAX = was


BENCHMARK_POLICIES = Path(__file__).resolve().parent.parent / "benchmarks" / "engine_policies.yaml"


@st.composite
def payments(draw: st.DrawFn) -> dict[str, Any]:
    """Calls of the 20-rule benchmark's tool: amounts as numbers and as texts its repair
    turns into numbers (or fails on), recipients, memos, principals, histories and
    requests that make each rule fire or not, and the hostile inputs of ``plain_calls``."""
    amount = draw(st.one_of(
        st.sampled_from([1500.0, 50.0, 0.0, -3.0, 9999.0, 10001.0, 6000, 2**63, "1,500",
                         "1,500.5", "12", "", "nan", "1e400", "x", Text("5"), None, True]),
        st.floats(allow_nan=True, allow_infinity=True), st.integers(), st.text(max_size=4)))
    args: dict[str, Any] = {
        "recipient": draw(st.sampled_from(["GB12ABCD", "KP12ABCD", "gb1", "", 5])),
        "amount": amount,
        "currency": draw(st.sampled_from(["EUR", "JPY", 1])),
        "memo": draw(st.sampled_from(["rent", "URGENT http://x", "m" * 141, 3])),
    }
    if draw(st.booleans()):
        args["reference"] = draw(st.sampled_from(["INV-1", "r" * 36, 7]))
    if draw(st.integers(0, 4)) == 0:
        args = draw(plain_calls())["args"]
    kw: dict[str, Any] = {"tool": "send_money", "args": args}
    if draw(st.integers(0, 5)):
        kw["principal"] = draw(st.one_of(
            st.fixed_dictionaries({"roles": st.sampled_from([["payments"], [], "payments"]),
                                   "tenant": st.sampled_from(["acme", "other", 3])}),
            st.sampled_from([{}, {"roles": [object()]}, OddMapping({"tenant": "acme"}),
                             {"roles": ["x" * 2_000]}, "admin"])))
    if draw(st.integers(0, 5)):
        entry = st.fixed_dictionaries(
            {"tool": st.sampled_from(["send_money", "read"])},
            optional={"args": st.fixed_dictionaries({"recipient": st.just("GB12ABCD")}),
                      "result": st.sampled_from(["", "ok"])})
        kw["history"] = draw(st.one_of(st.lists(entry, max_size=5),
                                       st.sampled_from([[1], ({"tool": "read"},), "no"])))
    if draw(st.integers(0, 5)):
        kw["request"] = draw(st.sampled_from(["pay GB12ABCD 1500", "", "x" * 2_000, 5]))
    if draw(st.integers(0, 3)) == 0:
        kw["known_secrets"] = Scrubber(["GB12ABCD"])
    return kw


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(call=payments(), max_cost=st.sampled_from([3_000_000, 3_000_000, 500, 150, 40, 0]),
       max_bytes=st.sampled_from([1_000_000, 1_000_000, 2_500, 400, 120]))
def test_the_benchmark_plan_short_path_decides_as_decide_and_the_general_path(
        backend: str, call: dict[str, Any], max_cost: int, max_bytes: int) -> None:
    """The 20-rule plan (a repair; principal, history, request and the clock read) runs
    the generated short path, at small cost budgets (which run out in the repair or the
    rules) and size bounds (which the principal, history or request cross)."""
    ps = guardrails.load(BENCHMARK_POLICIES, backend=backend,  # type: ignore[arg-type]
                         limits=Limits(max_cost=max_cost, max_input_bytes=max_bytes))
    if backend == "compiled":
        assert ps._candidates("send_money").short is not None
    fast, general = both(ps, call)
    assert record(fast) == record(general)
    kw = dict(call)
    candidates = ps._candidates("send_money")
    direct = decide(candidates, ps._revision, kw.get("known_secrets"), ps._limits,
                    "send_money", kw["args"], kw.get("principal"), kw.get("history"),
                    kw.get("request"), "", None, None)
    assert record(direct) == record(general)


def test_the_benchmark_plan_repairs_on_the_short_path() -> None:
    """The repair's record, the arguments after it and a failed repair's error, as
    ``decide`` makes them (fixed cases the generated ones above may not hit)."""
    ps = guardrails.load(BENCHMARK_POLICIES)
    assert ps._candidates("send_money").short is not None
    base = {"recipient": "GB12ABCD", "currency": "EUR", "memo": "rent",
            "reference": "INV-1"}
    kw: dict[str, Any] = {"principal": {"roles": ["payments"], "tenant": "acme"},
                          "request": "pay GB12ABCD"}
    repaired = _same(ps, {"tool": "send_money", "args": {**base, "amount": "1,500"}, **kw})
    assert [(r.policy, r.repair, r.set) for r in repaired.repairs] == [
        ("payments", "amount-as-string", ("amount",))]
    assert repaired.arguments["amount"] == 1500.0
    assert [(f.policy, f.rule) for f in repaired.rules] == [("payments", "large")]
    failed = _same(ps, {"tool": "send_money", "args": {**base, "amount": "lots"}, **kw})
    assert failed.repairs == () and failed.arguments["amount"] == "lots"
    assert next((e.element, e.handled_as) for e in failed.errors) == (
        "repairs.amount-as-string", "not-applied")
    assert failed.effect == "deny"  # the rules that read the amount fail closed
    plain = _same(ps, {"tool": "send_money", "args": {**base, "amount": 50.0}, **kw})
    assert plain.repairs == () and plain.effect == "allow"


def test_a_secret_set_by_a_repair_after_the_scrubber_was_used_is_scrubbed() -> None:
    """A repair's error is scrubbed (the scrubber reads the secret's value then); a later
    repair sets the secret to a new value, which a rule's message quotes: the short path
    rebuilds the scrubber as ``decide`` does, so the new value is scrubbed too."""
    text = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: s}
spec:
  match: {tools: [t]}
  secrets: {arguments: [secret]}
  repairs:
    - {name: broken, set: {b: 'int(args.a)'}}
    - {name: rotate, set: {secret: '"fresh-" + string(args.secret)'}}
  rules:
    - {name: r, when: 'true', action: warn, messageExpression: '"key " + args.secret'}
"""
    for backend in BACKENDS:
        ps = _load(text, backend, Limits())
        decision = _same(ps, {"tool": "t", "args": {"a": "not a number", "secret": "k1"}})
        assert [e.element for e in decision.errors] == ["repairs.broken"]
        assert "fresh-k1" not in decision.rules[0].message
        assert "fresh-k1" not in repr(decision.to_dict())


ONE_RULE = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: one}
spec:
  mode: %s
  defaultAction: %s
  match: {tools: [t]}
  rules:
    - {name: quiet, when: 'args.a > 5', action: deny}
    - {name: fires, when: 'args.a == 1', action: %s%s}
    - {name: also, when: 'args.a == 1 && has(args.b)', action: warn}
"""


@pytest.mark.parametrize("action", ACTIONS)
@pytest.mark.parametrize("default", ["allow", "deny"])
@pytest.mark.parametrize("mode", ["enforce", "audit"])
@pytest.mark.parametrize("message", ["", ", message: 'why  so\\n spaced'",
                                     ", messageExpression: '\"m \" + string(args.a)'"])
def test_one_rule_fired_again_decides_as_the_general_path(
        action: str, default: str, mode: str, message: str) -> None:
    """A rule that fires alone a second time takes its shared record by a lookup on the
    short path: the same record and effect as the general path's, for every action,
    default, mode and kind of message; with a known secret, another rule firing too, or a
    rule that fails, the general steps."""
    ps = _load(ONE_RULE % (mode, default, action, message), "compiled", Limits())
    assert ps._candidates("t").short is not None
    first = _same(ps, {"tool": "t", "args": {"a": 1}})
    again = _same(ps, {"tool": "t", "args": {"a": 1}})
    assert [r.rule for r in again.rules] == ["fires"]
    if "messageExpression" not in message:  # the shared record (``_shared_fired``)
        assert again.rules[0] is first.rules[0]
    secret = _same(ps, {"tool": "t", "args": {"a": 1}, "known_secrets": Scrubber(["so"])})
    assert [r.rule for r in secret.rules] == ["fires"]
    two = _same(ps, {"tool": "t", "args": {"a": 1, "b": 2}})
    assert [r.rule for r in two.rules] == ["fires", "also"]
    failed = _same(ps, {"tool": "t", "args": {"a": "1"}})
    assert failed.errors and all(e.element.startswith("rules.") for e in failed.errors)
