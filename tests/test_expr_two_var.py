"""cel-go's two-variable comprehensions (all, exists, existsOne, transformList,
transformMap, transformMapEntry) on both production backends: index/key and value
binding, filters, errors, scoping, nesting and cost bounds."""

from __future__ import annotations

from typing import Any

import pytest

from guardrails.expr import CelError, ExpressionError, Limits, compile_expression

BACKENDS = ["compiled", "closures"]


def ev(source: str, backend: str, **bindings: Any) -> Any:
    return compile_expression(source, declared=set(bindings) | {"x"},
                              backend=backend).evaluate(bindings)  # type: ignore[arg-type]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("source", "expected"), [
    ("[10, 20].all(i, v, v == (i + 1) * 10)", True),
    ("[10, 21].all(i, v, v == (i + 1) * 10)", False),
    ("{'a': 1, 'b': 2}.exists(k, v, k == 'b' && v == 2)", True),
    ("{'a': 1, 'b': 2}.exists(k, v, k == 'a' && v == 2)", False),
    ("[1, 2, 3].existsOne(i, v, v > 2)", True),
    ("[1, 2, 3].existsOne(i, v, v > 1)", False),
    ("[1, 2, 3].transformList(i, v, i * v)", [0, 2, 6]),
    ("[1, 2, 3].transformList(i, v, i > 0, v * 2)", [4, 6]),
    ("{'a': 1, 'b': 2}.transformList(k, v, k + string(v))", ["a1", "b2"]),
    ("{'a': 1, 'b': 2}.transformMap(k, v, v + 1)", {"a": 2, "b": 3}),
    ("{'a': 1, 'b': 2}.transformMap(k, v, v > 1, k + '!')", {"b": "b!"}),
    ("['x', 'y'].transformMap(i, v, v + string(i))", {0: "x0", 1: "y1"}),
    ("{'a': 1, 'b': 2}.transformMapEntry(k, v, {v: k})", {1: "a", 2: "b"}),
    ("{'a': 1, 'b': 2}.transformMapEntry(k, v, v > 1, {v: k})", {2: "b"}),
    ("[].all(i, v, false)", True),
    ("{}.exists(k, v, true)", False),
    # errors are absorbed like && and || when another element decides
    ("[0, 1].exists(i, v, 1 / v == 1)", True),
    ("[0, 1].all(i, v, 1 / v == 2)", False),
    # the two variables shadow outer names, nest, and the outer ones come back
    ("[[1, 2], [3]].all(i, row, row.all(j, v, v > i))", True),
    ("{'k': [1]}.all(k, v, v.exists(k, v2, k == 0)) && x == 'outer'", True),
])
def test_values(source: str, expected: Any, backend: str) -> None:
    value = ev(source, backend, x="outer")
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("source", "message"), [
    ("[1, 2].transformMapEntry(i, v, {'x': v})", "insert failed"),
    ("[1, 2].transformMapEntry(i, v, v)", "must give a map"),
    ("x.all(k, v, true)", "no matching overload"),
    ("[0].all(i, v, 1 / v == 1)", "division by zero"),
    ("[0].transformList(i, v, 1 / v)", "division by zero"),
])
def test_errors(source: str, message: str, backend: str) -> None:
    with pytest.raises(CelError, match=message):
        ev(source, backend, x=5)


@pytest.mark.parametrize(("source", "message"), [
    ("[1].all(i, i, true)", "must differ"),
    ("[1].transformList(i, 1, v)", "must be simple names"),
    ("[1].existsOne(i, v)", "undeclared reference to .i."),  # 2 arguments: no macro
    ("[1].all(a, b, [1].all(c, d, [1].all(e, f, [1].all(g, h, true))))", "nested too deeply"),
    ("[1].all(i, v, w)", "w"),  # an unknown name is a load error
])
def test_mistakes_are_load_errors(source: str, message: str) -> None:
    with pytest.raises(ExpressionError, match=message):
        compile_expression(source, declared=set())


@pytest.mark.parametrize("backend", BACKENDS)
def test_iteration_variables_are_not_visible_after_the_macro(backend: str) -> None:
    with pytest.raises(ExpressionError, match="v"):
        compile_expression("[1].all(i, v, true) && v == 1", declared=set(),
                           backend=backend)  # type: ignore[arg-type]


@pytest.mark.parametrize("backend", BACKENDS)
def test_iterations_are_charged(backend: str) -> None:
    prog = compile_expression("x.transformList(i, v, v).size() > 0", declared={"x"},
                              limits=Limits(max_cost=20_000),
                              backend=backend)  # type: ignore[arg-type]
    assert prog.evaluate({"x": list(range(10))}) is True
    with pytest.raises(CelError, match="cost"):
        prog.evaluate({"x": list(range(5_000))})
    quadratic = compile_expression("x.all(i, a, x.all(j, b, i + j >= 0))", declared={"x"},
                                   backend=backend)  # type: ignore[arg-type]
    with pytest.raises(CelError, match="cost"):
        quadratic.evaluate({"x": list(range(2_000))})


def test_the_cel_python_reference_says_why_it_has_no_two_variable_macros() -> None:
    with pytest.raises(ExpressionError, match="two-variable comprehensions"):
        compile_expression("[1].all(i, v, true)", declared=set(), backend="interpreter")
