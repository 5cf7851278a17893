"""Compile CEL source: parse, check (the front end), then one backend, chosen here only.

The pipeline, as in cel-go: ``parser`` -> ``checker`` (names, overloads, arity, folded
constants, type-checking passes: a ``Checked`` tree) -> a backend that turns the checked
tree into a ``Program``: ``codegen`` (generated Python, the default), ``closures`` (a tree
of closures) or ``interpreter`` (cel-python, the independent reference). Backends import
the front end and never each other, except that generated code falls back to the closures
of the same checked tree for what Python's compiler cannot take.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Final, Literal

from guardrails.expr import ast
from guardrails.expr.checker import Checked, ExpressionError, check
from guardrails.expr.closures import closure_program
from guardrails.expr.codegen import generate_pending, generated_program
from guardrails.expr.limits import DEFAULT_LIMITS, Limits
from guardrails.expr.parser import CelSyntaxError, parse
from guardrails.expr.program import Program
from guardrails.expr.values import UInt

Backend = Literal["compiled", "closures", "interpreter"]


def _interpreted(checked: Checked) -> Program:
    # Imported on first use: cel-python is slow to import and only the reference backend.
    from guardrails.expr.interpreter import interpreted_program

    return interpreted_program(checked)


BACKENDS: Final[dict[str, Callable[[Checked], Program]]] = {
    "compiled": generated_program,
    "closures": closure_program,
    "interpreter": _interpreted,
}
"""The one place a backend is chosen, by name."""


# ``generate_pending()`` (from ``codegen``): compile the generated code of every program
# built since the last call in one batch; loaders call it once at the end of a load.


def build(checked: Checked, backend: Backend) -> Program:
    """The program of ``backend`` for a checked tree."""
    make = BACKENDS.get(backend)
    if make is None:
        raise ValueError(f"unknown backend {backend!r}")
    try:
        return make(checked)
    except RecursionError:
        raise ExpressionError("expression is nested too deeply", checked.ast.offset) from None


def compile_ast(
    node: ast.Node,
    *,
    source: str = "",
    declared: Collection[str],
    limits: Limits = DEFAULT_LIMITS,
    container: str = "",
    backend: Backend = "closures",
) -> Program:
    """Compile an already-parsed tree (the parser's output, or one built by hand in tests)."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}")
    checked = check(node, source=source, declared=declared, limits=limits, container=container)
    return build(checked, backend)


_PROGRAMS: dict[tuple[str, frozenset[str], Limits, str, str], Program] = {}
_PROGRAMS_MAX: Final = 20_000


def compile_expression(
    source: str,
    *,
    declared: Collection[str],
    limits: Limits = DEFAULT_LIMITS,
    backend: Backend = "compiled",
    container: str = "",
) -> Program:
    """Parse, check and compile ``source`` once; raise ``ExpressionError`` for load-time errors.

    Programs are immutable, so identical expressions (same text, names, limits) share one:
    policy sets repeat conditions, and loading 10,000 rules must stay fast.
    """
    key = (source, frozenset(declared), limits, container, backend)
    found = _PROGRAMS.get(key)
    if found is not None:
        return found
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}")
    try:
        node = parse(source, limits)
    except CelSyntaxError as e:
        raise ExpressionError(e.message, e.offset) from None
    program = compile_ast(
        node, source=source, declared=key[1], limits=limits, container=container, backend=backend
    )
    if len(_PROGRAMS) >= _PROGRAMS_MAX:
        _PROGRAMS.clear()
    _PROGRAMS[key] = program
    return program


__all__ = [
    "BACKENDS",
    "Backend",
    "ExpressionError",
    "Program",
    "UInt",
    "build",
    "compile_ast",
    "compile_expression",
    "generate_pending",
]
