"""Differential tests: the compiled backend against the cel-python reference backend,
and the generated-code backend against the closure backend.

Hypothesis builds random well-typed expressions over ints, doubles, strings, bools and
lists, with random bindings, and both backends must agree: the same value (types
included) or both an error. Known cel-python deviations
from cel-spec are kept out of the generated language, each asserted in
test_known_deviations so an exclusion can be dropped when cel-python changes:

- heterogeneous numeric comparison (`1 < 1.5`): cel-python has no overload; cel-spec
  compares by numeric value. Only same-type comparisons are generated.
- equality across unrelated types (`1 == 'a'`, `[1, 'a'] == [1, 2]`): cel-python raises;
  cel-spec says false. Only same-type equality is generated.
- non-bool operands of `||` / `&&` (`true && 1`): cel-python returns 1; cel-spec (and
  we) report an error. Only bool operands are generated.
- NaN equality: cel-python says NaN == NaN. Doubles are generated without NaN and
  division is not generated for doubles.
- string(double): cel-python prints Python's repr ("1.0"), cel-go Go's 'g' format ("1").
  Not generated.
- `(x + x).contains(x)`: cel-python finds no `contains` overload on a concatenation
  result; method receivers are generated as leaves only.
- int('1_000'), double('1_0'): cel-python accepts Python's underscores; cel-go does
  not. String-to-number conversions are not generated.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guardrails.expr import CelError, compile_expression

DECLARED = ("i1", "i2", "d1", "s1", "b1", "l1")

small_ints = st.integers(min_value=-1000, max_value=1000)
doubles = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
texts = st.text(alphabet="abcxyzAB _-é", max_size=6)


def _lit_double(f: float) -> str:
    r = repr(float(f))
    return r if ("." in r or "e" in r) else r + ".0"


def _lit_string(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


@functools.cache
def exprs(kind: str, depth: int) -> st.SearchStrategy[str]:
    """A strategy for CEL source of the given type (int, double, string, bool, list)."""
    leaves: dict[str, st.SearchStrategy[str]] = {
        "int": st.one_of(small_ints.map(str), st.sampled_from(["i1", "i2"])),
        "double": st.one_of(doubles.map(_lit_double), st.just("d1")),
        "string": st.one_of(texts.map(_lit_string), st.just("s1")),
        "bool": st.sampled_from(["true", "false", "b1"]),
        "list": st.sampled_from(["l1", "[]", "[1, 2, 3]", "[i1, i2]"]),
    }
    if depth <= 0:
        return leaves[kind]
    sub = depth - 1

    def bin_(k: str, ops: list[str], rk: str | None = None) -> st.SearchStrategy[str]:
        return st.tuples(exprs(k, sub), st.sampled_from(ops), exprs(rk or k, sub)).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"
        )

    def cond(k: str) -> st.SearchStrategy[str]:
        return st.tuples(exprs("bool", sub), exprs(k, sub), exprs(k, sub)).map(
            lambda t: f"({t[0]} ? {t[1]} : {t[2]})"
        )

    options: dict[str, list[st.SearchStrategy[str]]] = {
        "int": [
            bin_("int", ["+", "-", "*", "/", "%"]),
            exprs("int", sub).map(lambda e: f"(-{e})"),
            exprs("string", sub).map(lambda e: f"size({e})"),
            exprs("list", sub).map(lambda e: f"size({e})"),
            st.tuples(exprs("list", sub), st.integers(0, 3)).map(lambda t: f"{t[0]}[{t[1]}]"),
            cond("int"),
        ],
        "double": [
            bin_("double", ["+", "-", "*"]),
            exprs("int", sub).map(lambda e: f"double({e})"),
            cond("double"),
        ],
        "string": [
            bin_("string", ["+"]),
            exprs("int", sub).map(lambda e: f"string({e})"),
            cond("string"),
        ],
        "bool": [
            bin_("int", ["<", "<=", ">", ">=", "==", "!="]),
            bin_("double", ["<", ">", "=="]),
            bin_("string", ["<", ">=", "==", "!="]),
            bin_("bool", ["&&", "||", "==", "!="]),
            bin_("list", ["=="]),
            exprs("bool", sub).map(lambda e: f"!{e}"),
            st.tuples(
                exprs("string", 0),
                st.sampled_from(["contains", "startsWith", "endsWith"]),
                exprs("string", sub),
            ).map(lambda t: f"{t[0]}.{t[1]}({t[2]})"),
            bin_("int", ["in"], "list"),
            st.tuples(
                exprs("list", sub), st.sampled_from(["all", "exists", "exists_one"]), small_ints
            ).map(lambda t: f"{t[0]}.{t[1]}(x, x > {t[2]})"),
            cond("bool"),
        ],
        "list": [
            bin_("list", ["+"]),
            exprs("list", sub).map(lambda e: f"{e}.map(x, x * 2)"),
            st.tuples(exprs("list", sub), small_ints).map(
                lambda t: f"{t[0]}.filter(x, x > {t[1]})"
            ),
            st.tuples(exprs("int", sub), exprs("int", sub)).map(lambda t: f"[{t[0]}, {t[1]}]"),
        ],
    }
    return st.one_of(leaves[kind], *options[kind])


bindings = st.fixed_dictionaries(
    {
        "i1": small_ints,
        "i2": small_ints,
        "d1": doubles,
        "s1": texts,
        "b1": st.booleans(),
        "l1": st.lists(small_ints, max_size=4),
    }
)


def outcome(source: str, backend: str, env: dict[str, Any]) -> tuple[str, Any]:
    program = compile_expression(source, declared=DECLARED, backend=backend)  # type: ignore[arg-type]
    try:
        return ("value", program.evaluate(env))
    except CelError:
        return ("error", None)


def same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(["int", "double", "string", "bool", "list"]),
    data=st.data(),
    env=bindings,
)
def test_compiled_agrees_with_cel_python(
    kind: str, data: st.DataObject, env: dict[str, Any]
) -> None:
    source = data.draw(exprs(kind, 3), label="source")
    compiled = outcome(source, "compiled", env)
    reference = outcome(source, "interpreter", env)
    assert compiled[0] == reference[0], (source, compiled, reference)
    assert same(compiled[1], reference[1]), (source, compiled, reference)


@pytest.mark.parametrize(
    ("source", "cel_spec", "cel_python"),
    [
        ("1 < 1.5", True, "error"),
        ("1 == 'a'", False, "error"),
        ("[1, 'a'] == [1, 2]", False, "error"),
        ("42 || false", "error", 42),
        ("true && 1", "error", 1),
        ("0.0 / 0.0 == 0.0 / 0.0", False, True),
        ("string(1.0)", "1", "1.0"),
        ("int('1_000')", "error", 1000),
        ("(s1 + s1).contains(s1)", True, "error"),
    ],
)
def test_known_deviations(source: str, cel_spec: Any, cel_python: Any) -> None:
    """The deviations excluded above still exist (remove an exclusion when one goes away)."""
    env = {"s1": "a"}
    assert outcome(source, "compiled", env) == (
        ("error", None) if cel_spec == "error" else ("value", cel_spec)
    )
    assert outcome(source, "interpreter", env) == (
        ("error", None) if cel_python == "error" else ("value", cel_python)
    )


any_kind = st.sampled_from(["int", "double", "string", "bool", "list"])


@st.composite
def wild_exprs(draw: st.DrawFn, depth: int = 3) -> str:
    """Ill-typed expressions too (`1 && 'a'`, `[1] < 2`, `1 == 1.0`): both of our backends
    follow cel-spec there, so they must agree even where cel-python does not."""
    if depth <= 0 or draw(st.booleans()):
        return draw(exprs(draw(any_kind), 2))
    op = draw(st.sampled_from(["&&", "||", "==", "!=", "<", ">=", "+", "-", "*", "in", "?:"]))
    left, right = draw(wild_exprs(depth - 1)), draw(wild_exprs(depth - 1))
    if op == "?:":
        return f"({draw(wild_exprs(depth - 1))} ? {left} : {right})"
    return f"({left} {op} {right})"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(source=wild_exprs(), env=bindings)
def test_generated_code_agrees_with_closures(source: str, env: dict[str, Any]) -> None:
    generated = outcome(source, "compiled", env)
    closures = outcome(source, "closures", env)
    assert generated[0] == closures[0], (source, generated, closures)
    assert same(generated[1], closures[1]), (source, generated, closures)
