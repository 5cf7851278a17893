"""The CEL expression engine: compile once, evaluate in well under a microsecond.

The pipeline, as in cel-go: ``parser`` -> ``checker`` (the front end: names, overloads,
arity, folded constants; type-checking passes plug in at ``checker.TYPE_CHECKERS``) -> one
backend, chosen in ``compiler``: "compiled" (default) generates one Python function per
expression (``codegen``), "closures" builds a tree of closures (``closures``),
"interpreter" runs cel-python (the reference, ``interpreter``). Backends depend on the
front end, never the reverse. Standalone: imports nothing else from ``guardrails``.
"""

from __future__ import annotations

from guardrails.expr.checker import ExpressionError
from guardrails.expr.compiler import FusedRules, compile_expression, generate_pending
from guardrails.expr.limits import DEFAULT_LIMITS, Limits
from guardrails.expr.program import FusedRun, Hit, Program
from guardrails.expr.values import CelError, CostLimitExceeded

__all__ = [
    "DEFAULT_LIMITS",
    "CelError",
    "CostLimitExceeded",
    "ExpressionError",
    "FusedRules",
    "FusedRun",
    "Hit",
    "Limits",
    "Program",
    "compile_expression",
    "generate_pending",
]
