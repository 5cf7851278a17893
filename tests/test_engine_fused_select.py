"""A fused function's field reads (``codegen._fused_select``): one type test in line, the
type the operand has on the engine's paths, and every other case through
``codegen._select_any``. Both must read exactly what the generated select line of a
rule alone reads (``_Gen.select``): the same value or the same error, for any operand.

Two levels: ``_select_any`` against the generated line itself, on hostile operands (maps
of every kind, the engine's lazy records computed, uncomputed and failing, values that are
not maps, objects whose lookups raise); and fused functions against their rules one by
one on bindings whose every root has a type other than the engine's (read-only views,
dict subclasses, plain dicts for ``variables``, ``params`` and ``request``), so that each read takes
the out-of-line case.
"""

from __future__ import annotations

import contextlib
import tempfile
import types
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import guardrails
from guardrails.expr import codegen
from guardrails.expr.lib_provenance import Request
from guardrails.expr.limits import METER, Limits, Meter
from guardrails.expr.values import Variables
from tests.test_engine_fast_path import _q
from tests.test_engine_fused import RULES, one_by_one

_LINE = ("v[k] if (type(v) is _dict or type(v) is _proxy) and k in v "
         "else v._done[k] if type(v) is _vars and k in v._done "
         "else v[k] if type(v) in _LAZY and k in v._defs else _select(v, k)")
"""``_Gen.select``'s generated line, with ``v`` and ``k`` for its operand and field."""

_generated = eval(f"lambda v, k: {_LINE}", dict(codegen._GLOBALS))


class _Sub(dict[str, Any]):
    pass


class _Raising(Mapping[str, Any]):
    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("lookup refused")

    def __iter__(self) -> Iterator[str]:
        return iter(["a"])

    def __len__(self) -> int:
        return 1

    def __contains__(self, key: object) -> bool:
        return True


def _outcome(fn: Any, value: Any, field: str) -> tuple[str, Any]:
    try:
        return "value", fn(value, field)
    except Exception as exc:
        return "error", (type(exc).__name__, str(exc))


def _variables(computed: bool, failing: bool) -> Variables:
    source = "1 / 0" if failing else "args.a"
    ps = _policies("    - {name: r, when: 'variables.a == 1', action: deny}\n",
                   variables=f"  variables:\n    - {{name: a, expression: {_q(source)}}}\n")
    policy = ps.policies[0]
    variables = Variables(policy.variable_programs)
    variables.bindings = {"args": {"a": 1}, METER: Meter(10**6)}
    if computed:
        with contextlib.suppress(Exception):
            variables["a"]
    return variables


_OPERANDS = st.sampled_from([
    "dict", "dict-missing", "proxy", "proxy-missing", "sub", "vars", "vars-done",
    "vars-failing", "request", "list", "text", "none", "int", "raising"])


def _operand(kind: str) -> Any:
    return {
        "dict": lambda: {"a": 1, "b": None},
        "dict-missing": lambda: {"b": 2},
        "proxy": lambda: types.MappingProxyType({"a": [1]}),
        "proxy-missing": lambda: types.MappingProxyType({}),
        "sub": lambda: _Sub(a=3),
        "vars": lambda: _variables(False, False),
        "vars-done": lambda: _variables(True, False),
        "vars-failing": lambda: _variables(True, True),
        "request": lambda: Request("pay GB12"),
        "list": lambda: [1, 2],
        "text": lambda: "a",
        "none": lambda: None,
        "int": lambda: 7,
        "raising": lambda: _Raising(),
    }[kind]()


@settings(max_examples=400, deadline=None)
@given(kind=_OPERANDS, field=st.sampled_from(["a", "b", "text", "missing", ""]))
def test_select_any_reads_what_the_generated_line_reads(kind: str, field: str) -> None:
    assert _outcome(codegen._select_any, _operand(kind), field) == _outcome(
        _generated, _operand(kind), field)


def test_each_fused_select_form_reads_what_the_generated_line_reads() -> None:
    """Each form ``_fused_select`` writes (by root), on every operand kind."""
    line = ("    _t2 = _t1[_k0] if (type(_t1) is _dict or type(_t1) is _proxy) and _k0 in _t1 "
            "else _t1._done[_k0] if type(_t1) is _vars and _k0 in _t1._done "
            "else _t1[_k0] if type(_t1) in _LAZY and _k0 in _t1._defs else _select(_t1, _k0)")
    found = codegen._SELECT.search(line)
    assert found is not None
    forms = {}
    for root in ("variables", "params", "request", "args", None):
        rewritten = codegen._fused_select(found, {} if root is None else {"_t1": root})
        forms[root] = eval(
            "lambda _t1, _k0: " + rewritten.split(" = ", 1)[1], dict(codegen._GLOBALS))
    kinds = ["dict", "dict-missing", "proxy", "proxy-missing", "sub", "vars", "vars-done",
             "vars-failing", "request", "list", "text", "none", "int", "raising"]
    for root, form in forms.items():
        for kind in kinds:
            for field in ("a", "b", "text", "missing"):
                assert _outcome(form, _operand(kind), field) == _outcome(
                    _generated, _operand(kind), field), (root, kind, field)


def _policies(rules: str, variables: str = "") -> guardrails.PolicySet:
    text = ("apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\nspec:\n"
            "  match: {tools: [t]}\n  params: {limit: 4, known: [x, y, sX]}\n"
            f"{variables}  rules:\n{rules}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "p.yaml"
        path.write_text(text)
        return guardrails.load(path, limits=Limits())


_ROOTS = st.fixed_dictionaries({
    "args": st.sampled_from(["dict", "proxy", "sub"]),
    "principal": st.sampled_from(["dict", "proxy", "sub"]),
    "params": st.sampled_from(["proxy", "dict", "sub"]),
    "variables": st.sampled_from(["vars", "dict"]),
    "entry": st.sampled_from(["dict", "proxy", "sub"]),
    "request": st.sampled_from(["request", "dict", "proxy"]),
})


def _as(kind: str, value: dict[str, Any]) -> Any:
    if kind == "proxy":
        return types.MappingProxyType(value)
    if kind == "sub":
        return _Sub(value)
    return value


_ARGS = st.fixed_dictionaries({}, optional={
    "a": st.one_of(st.integers(-3, 9), st.sampled_from(["x", "s", "sX", "3", ""]),
                   st.none(), st.lists(st.integers(0, 3))),
    "b": st.sampled_from(["x", "y", "q", 1]),
    "c": st.lists(st.one_of(st.integers(0, 3), st.sampled_from(["a", "bb"])), max_size=4)})


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rules=st.lists(st.sampled_from([r for r in RULES if "now." not in r]),
                      min_size=1, max_size=8),
       roots=_ROOTS, args=_ARGS, budget=st.sampled_from([10**9, 500, 60, -1]))
def test_fused_rules_on_roots_of_other_types_equal_the_rules_one_by_one(
        rules: list[str], roots: dict[str, str], args: dict[str, Any], budget: int) -> None:
    body = "".join(f"    - {{name: r{i}, when: {_q(r)}, action: deny}}\n"
                   for i, r in enumerate(rules))
    try:
        ps = _policies(body, "  variables:\n    - {name: v1, expression: 'args.a'}\n"
                             "    - {name: v2, expression: '\"s\" + args.b'}\n")
    except guardrails.PolicyError:
        assume(False)
        raise
    policy = ps.policies[0]
    programs = [r.when.program for r in policy.rules]
    fused = codegen.fused_rules(programs, [False] * len(programs))
    assert fused is not None
    codegen.generate_pending()
    assert fused.run is not None

    def bindings(meter: Meter) -> dict[str, Any]:
        b: dict[str, Any] = {
            "tool": {"name": "t", "description": ""}, "args": _as(roots["args"], dict(args)),
            "principal": _as(roots["principal"], {"role": "admin", "groups": ["ops"]}),
            "history": [_as(roots["entry"], {"tool": "t", "result": ""})],
            "request": Request("pay x") if roots["request"] == "request" else _as(
                roots["request"], {"text": "pay x"}),
            "now": None, METER: meter,
            "params": _as(roots["params"], dict(policy.params))}
        if roots["variables"] == "vars":
            variables = Variables(policy.variable_programs)
            variables.bindings = b
            b["variables"] = variables
        else:
            b["variables"] = {"v1": args.get("a"), "v2": "s"}
        return b

    meter = Meter(budget)
    b = bindings(meter)
    expected = one_by_one(programs, b)
    one_left = meter.left
    meter = Meter(budget)
    hits = fused.run(bindings(meter), meter, 0) or []
    got = [(i, v, None if e is None else f"{type(e).__name__}: {e}") for i, v, e in hits]
    assert got == expected
    assert meter.left == one_left
