"""Recognise cel-go's expansion shapes of the standard macros in a ``Comprehension``.

Both backends (closures in ``compiler``, generated code in ``codegen``) run ``all``,
``exists``, ``exists_one``, ``map`` and ``filter`` as plain loops instead of the generic
accumulator loop. That is only sound when the node has exactly the shape the parser
produces, so the test lives here once and both backends agree on which nodes qualify.
Anything else (a hand-built AST, a step that reads the accumulator) gets ``None`` and
runs through the generic comprehension.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from guardrails.expr import ast


@dataclass(frozen=True, slots=True)
class Quantifier:
    """``all`` / ``exists`` (errors absorbed like ``&&`` / ``||``) or ``exists_one``."""

    kind: Literal["all", "exists", "exists_one"]
    predicate: ast.Node


@dataclass(frozen=True, slots=True)
class MapFilter:
    """``map`` / ``filter``: keep elements where ``predicate`` holds (all if None) and
    collect ``transform`` of each (the element itself if None)."""

    kind: Literal["map", "filter"]
    predicate: ast.Node | None
    transform: ast.Node | None


MacroShape = Quantifier | MapFilter


def body_size(node: ast.Comprehension) -> int:
    """Nodes one iteration of ``node`` evaluates at most (its condition and step): what
    both backends charge an iteration by (``limits.iteration_cost``), so they agree."""
    return len(ast.walk(node.loop_condition)) + len(ast.walk(node.loop_step))


def classify(node: ast.Comprehension) -> MacroShape | None:
    """The macro ``node`` expands, when it has cel-go's expansion shape; else None."""
    if node.iter_var2:
        return None  # two-variable comprehensions run as the generic loop
    accu = node.accu_var
    step = node.loop_step

    def is_accu(n: ast.Node) -> bool:
        return isinstance(n, ast.Ident) and n.name == accu

    def uses_accu(n: ast.Node) -> bool:
        return any(isinstance(m, ast.Ident) and m.name == accu for m in ast.walk(n))

    def appends(n: ast.Node) -> ast.Node | None:
        if (
            isinstance(n, ast.Call)
            and n.function == "_+_"
            and n.target is None
            and len(n.args) == 2
            and is_accu(n.args[0])
            and isinstance(n.args[1], ast.ListLit)
            and len(n.args[1].elements) == 1
        ):
            return n.args[1].elements[0]
        return None

    if not isinstance(step, ast.Call) or step.target is not None:
        return None
    macro = node.macro
    if (
        macro in ("all", "exists")
        and step.function == ("_&&_" if macro == "all" else "_||_")
        and len(step.args) == 2
        and is_accu(step.args[0])
        and not uses_accu(step.args[1])
        and is_accu(node.result)
    ):
        return Quantifier("exists" if macro == "exists" else "all", step.args[1])
    if (
        macro in ("map", "filter", "exists_one")
        and step.function == "_?_:_"
        and len(step.args) == 3
        and is_accu(step.args[2])
        and not uses_accu(step.args[0])
    ):
        pred = step.args[0]
        if macro == "exists_one":
            inc = step.args[1]
            if (
                isinstance(inc, ast.Call)
                and inc.function == "_+_"
                and len(inc.args) == 2
                and is_accu(inc.args[0])
                and isinstance(inc.args[1], ast.Literal)
                and inc.args[1].value == 1
                and type(inc.args[1].value) is int
            ):
                return Quantifier("exists_one", pred)
            return None
        value = appends(step.args[1])
        if value is None or uses_accu(value) or not is_accu(node.result):
            return None
        if macro == "filter" and isinstance(value, ast.Ident) and value.name == node.iter_var:
            return MapFilter("filter", pred, None)
        return MapFilter("filter" if macro == "filter" else "map", pred, value)
    if macro == "map" and is_accu(node.result):
        value = appends(step)
        if value is None or uses_accu(value):
            return None
        return MapFilter("map", None, value)
    return None
