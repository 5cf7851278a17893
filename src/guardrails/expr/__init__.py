"""The CEL expression engine: compile once to Python closures, evaluate in about a microsecond.

Standalone: imports nothing else from ``guardrails``. See ``compiler`` for the design.
"""

from __future__ import annotations

from guardrails.expr.compiler import ExpressionError, Program, compile_expression
from guardrails.expr.limits import DEFAULT_LIMITS, Limits
from guardrails.expr.values import CelError, CostLimitExceeded

__all__ = [
    "DEFAULT_LIMITS",
    "CelError",
    "CostLimitExceeded",
    "ExpressionError",
    "Limits",
    "Program",
    "compile_expression",
]
