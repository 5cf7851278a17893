"""The CEL expression engine: compile once, evaluate in well under a microsecond.

Backends: "compiled" (default) generates one Python function per expression (``codegen``),
"closures" builds a tree of closures (``compiler``), "interpreter" runs cel-python (the
reference). Standalone: imports nothing else from ``guardrails``.
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
