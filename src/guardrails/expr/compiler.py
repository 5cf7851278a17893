"""Compile CEL source: parse, check (the front end), then one backend, chosen here only.

The pipeline, as in cel-go: ``parser`` -> ``checker`` (names, overloads, arity, folded
constants, type-checking passes: a ``Checked`` tree) -> a backend that turns the checked
tree into a ``Program``: ``codegen`` (generated Python, the default), ``closures`` (a tree
of closures) or ``interpreter`` (cel-python, the independent reference). Backends import
the front end and never each other, except that generated code falls back to the closures
of the same checked tree for what Python's compiler cannot take.

Policy sets repeat expressions that differ only in literals. For generated code, a tree
whose shape (``ast.shape``) and whose literals read at load (by folding,
``checker.fold_inputs``, and by code generation, ``codegen._shape``) match an earlier
tree's takes that tree's code and constants without being checked or generated again
(``_Variant``): the result is exactly what checking and generating it alone would give.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, Final, Literal

from guardrails.expr import ast
from guardrails.expr.checker import TYPE_CHECKERS, Checked, ExpressionError, check, fold_inputs
from guardrails.expr.closures import closure_program
from guardrails.expr.codegen import (
    FusedRules,
    Generated,
    Shape,
    fused_rules,
    generate_pending,
    generated_program,
    generated_with_source,
    program_from_source,
    shared,
)
from guardrails.expr.limits import DEFAULT_LIMITS, Limits
from guardrails.expr.parser import CelSyntaxError, parse_shaped
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


@dataclass(frozen=True, slots=True)
class _Variant:
    """The generated code of one tree, for trees of its shape (``ast.shape``) that agree
    with it on the literals that were read at load (``read``: their indices among the
    shape's literals, ``values`` theirs): those check the same way (``fold_inputs``) and
    generate the same code, with their own literals in ``slots``."""

    read: tuple[int, ...]
    values: tuple[tuple[type, str], ...]
    code: str
    consts: tuple[Any, ...]
    slots: tuple[tuple[int, int], ...]
    """``(constant index, literal index)``."""

    def matches(self, literals: list[ast.Literal]) -> bool:
        return all(_value_key(literals[i].value) == v
                   for i, v in zip(self.read, self.values, strict=True))

    def constants(self, literals: list[ast.Literal]) -> tuple[Any, ...]:
        consts = list(self.consts)
        for slot, i in self.slots:
            consts[slot] = shared(literals[i].value)
        return tuple(consts)


def _value_key(value: Any) -> tuple[type, str]:
    return (type(value), repr(value))


_ShapeKey = tuple[tuple[object, ...], frozenset[str], Limits, str]
_VARIANTS: dict[_ShapeKey, list[_Variant]] = {}
_VARIANTS_MAX: Final = 20_000
_VARIANTS_PER_SHAPE: Final = 16


def _generated(node: ast.Node, shaped: ast.TreeShape | None, source: str,
               declared: frozenset[str], limits: Limits, container: str) -> Program:
    """The generated-code program of a parsed tree, checked and generated once per shape.

    A policy set's expressions mostly differ only in literals (``x > 100`` and ``x >
    250``); checking and generating code were most of a load. A tree whose shape and
    read literals match a variant takes its code and constants without being checked:
    the checker's result depends on literal values only where it folds (``fold_inputs``),
    and code generation only where ``codegen._shape`` says; a literal read by either is
    in the variant by value.
    """
    key: _ShapeKey | None = None
    if shaped is not None and not TYPE_CHECKERS:  # a registered pass sees every tree
        key = (shaped[0], declared, limits, container)
        literals = shaped[1]
        for variant in _VARIANTS.get(key, ()):
            if variant.matches(literals):
                return program_from_source(
                    source, node, limits, variant.code, variant.constants(literals),
                    lambda: check(node, source=source, declared=declared, limits=limits,
                                  container=container))
    checked = check(node, source=source, declared=declared, limits=limits, container=container)
    try:
        program, generated, code_shape = generated_with_source(checked)
    except RecursionError:
        raise ExpressionError("expression is nested too deeply", node.offset) from None
    if key is not None and generated is not None and code_shape is not None:
        variants = _VARIANTS.get(key)
        if variants is None:
            if len(_VARIANTS) >= _VARIANTS_MAX:
                _VARIANTS.clear()
            variants = _VARIANTS[key] = []
        if len(variants) < _VARIANTS_PER_SHAPE:
            made = _variant(literals, checked, generated, code_shape)
            if made is not None:
                variants.append(made)
    return program


def _variant(literals: list[ast.Literal], checked: Checked, generated: Generated,
             code_shape: Shape) -> _Variant | None:
    index = {id(n): i for i, n in enumerate(literals)}
    read_ids = fold_inputs(checked) | code_shape.inspected
    if not all(i in index for i in read_ids) or not all(
            id(n) in index for _, n in generated[2]):
        return None  # a literal outside the shape's: not worth a variant
    read = tuple(sorted(index[i] for i in read_ids if i in index))
    return _Variant(read, tuple(_value_key(literals[i].value) for i in read), generated[0],
                    generated[1], tuple((slot, index[id(n)]) for slot, n in generated[2]))


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
        node, shaped = parse_shaped(source, limits)
    except CelSyntaxError as e:
        raise ExpressionError(e.message, e.offset) from None
    if backend == "compiled":
        program = _generated(node, shaped, source, key[1], limits, container)
    else:
        program = compile_ast(
            node, source=source, declared=key[1], limits=limits, container=container,
            backend=backend,
        )
    object.__setattr__(program, "shape", shaped)  # a new program, not yet shared
    if len(_PROGRAMS) >= _PROGRAMS_MAX:
        _PROGRAMS.clear()
    _PROGRAMS[key] = program
    return program


__all__ = [
    "BACKENDS",
    "Backend",
    "ExpressionError",
    "FusedRules",
    "Program",
    "UInt",
    "build",
    "compile_ast",
    "compile_expression",
    "fused_rules",
    "generate_pending",
]
