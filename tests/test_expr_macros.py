"""``macros.classify``: the one test both backends use to run a macro as a plain loop.

A node that only looks like a macro expansion must fall back to the generic
comprehension, or a specialised loop would compute something else than the AST says.
"""

from __future__ import annotations

import dataclasses

import pytest

from guardrails.expr import ast, compile_expression, macros
from guardrails.expr.compiler import Backend
from guardrails.expr.parser import parse


def comprehension(source: str) -> ast.Comprehension:
    node = parse(source)
    assert isinstance(node, ast.Comprehension)
    return node


def ident(node: ast.Node | None) -> str | None:
    return node.name if isinstance(node, ast.Ident) else None


@pytest.mark.parametrize(
    ("source", "kind"),
    [
        ("xs.all(x, x > 0)", "all"),
        ("xs.exists(x, x > 0)", "exists"),
        ("xs.exists_one(x, x > 0)", "exists_one"),
    ],
)
def test_quantifiers_are_recognised(source: str, kind: str) -> None:
    shape = macros.classify(comprehension(source))
    assert isinstance(shape, macros.Quantifier)
    assert shape.kind == kind
    assert isinstance(shape.predicate, ast.Call) and shape.predicate.function == "_>_"


def test_map_filter_and_three_argument_map() -> None:
    plain = macros.classify(comprehension("xs.map(x, x * 2)"))
    assert isinstance(plain, macros.MapFilter) and plain.kind == "map"
    assert plain.predicate is None
    assert isinstance(plain.transform, ast.Call) and plain.transform.function == "_*_"

    filtered = macros.classify(comprehension("xs.filter(x, x > 1)"))
    assert isinstance(filtered, macros.MapFilter) and filtered.kind == "filter"
    assert isinstance(filtered.predicate, ast.Call) and filtered.transform is None

    both = macros.classify(comprehension("xs.map(x, x > 1, x * 2)"))
    assert isinstance(both, macros.MapFilter) and both.kind == "map"
    assert isinstance(both.predicate, ast.Call) and both.predicate.function == "_>_"
    assert isinstance(both.transform, ast.Call) and both.transform.function == "_*_"


def test_map_of_the_element_itself_is_kept_as_a_transform() -> None:
    # Only filter drops the transform; map(x, x) still names the element explicitly.
    shape = macros.classify(comprehension("xs.map(x, x)"))
    assert isinstance(shape, macros.MapFilter) and ident(shape.transform) == "x"


def _accu(node: ast.Comprehension) -> ast.Ident:
    return ast.Ident(0, node.accu_var)


def test_result_other_than_the_accumulator_falls_back() -> None:
    node = comprehension("xs.all(x, x > 0)")
    assert macros.classify(dataclasses.replace(node, result=ast.Literal(0, True))) is None


def test_predicate_reading_the_accumulator_falls_back() -> None:
    node = comprehension("xs.exists(x, x > 0)")
    step = node.loop_step
    assert isinstance(step, ast.Call)
    reads_accu = ast.Call(0, "_||_", (_accu(node), ast.Call(0, "!_", (_accu(node),))))
    assert macros.classify(dataclasses.replace(node, loop_step=reads_accu)) is None


def test_macro_name_must_match_the_operator() -> None:
    # An "all" whose step is an || is not an all: it must run as written.
    node = comprehension("xs.exists(x, x > 0)")
    assert macros.classify(dataclasses.replace(node, macro="all")) is None


@pytest.mark.parametrize("increment", [2, 1.0, True])
def test_exists_one_counts_by_integer_one_only(increment: object) -> None:
    node = comprehension("xs.exists_one(x, x > 0)")
    step = node.loop_step
    assert isinstance(step, ast.Call)
    inc = ast.Call(0, "_+_", (_accu(node), ast.Literal(0, increment)))
    changed = dataclasses.replace(node, loop_step=dataclasses.replace(step, args=(step.args[0], inc, step.args[2])))
    assert macros.classify(changed) is None


def test_map_transform_reading_the_accumulator_falls_back() -> None:
    node = comprehension("xs.map(x, x * 2)")
    step = node.loop_step
    assert isinstance(step, ast.Call)
    appended = ast.Call(0, "_+_", (_accu(node), ast.ListLit(0, (_accu(node),))))
    assert macros.classify(dataclasses.replace(node, loop_step=appended)) is None
    not_appended = ast.Call(0, "_+_", (_accu(node), ast.ListLit(0, (ast.Ident(0, "x"), ast.Ident(0, "x")))))
    assert macros.classify(dataclasses.replace(node, loop_step=not_appended)) is None


@pytest.mark.parametrize("backend", ["compiled", "closures"])
@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("[1, 2, 3].all(x, x > 0)", True),
        ("[1, 2, 3].exists(x, x > 2)", True),
        ("[1, 2, 3].exists_one(x, x > 1)", False),
        ("[1, 2, 3].map(x, x * 2)", [2, 4, 6]),
        ("[1, 2, 3].map(x, x > 1, x * 2)", [4, 6]),
        ("[1, 2, 3].filter(x, x > 1)", [2, 3]),
        ("[[1], [2]].map(x, x.map(y, y + 1))", [[2], [3]]),
    ],
)
def test_both_backends_run_the_specialised_loops(backend: Backend, source: str, expected: object) -> None:
    program = compile_expression(source, declared=(), backend=backend)
    assert program.evaluate({}) == expected
