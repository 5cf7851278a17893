"""cel-guardrails: policy-as-code guardrails (YAML + CEL) for tool-using AI agents.

    import guardrails
    policies = guardrails.load("policies/")
    decision = policies.evaluate(tool="send_money", args={"amount": 50})
"""

from guardrails.engine import (
    Action,
    AppliedRepair,
    Decision,
    Effect,
    EvaluationError,
    Explanation,
    FiredRule,
    PolicySet,
    PolicyViolation,
)
from guardrails.engine.compile import load
from guardrails.expr.limits import Limits
from guardrails.model.errors import PolicyError, Problem

__all__ = [
    "Action",
    "AppliedRepair",
    "Decision",
    "Effect",
    "EvaluationError",
    "Explanation",
    "FiredRule",
    "Limits",
    "PolicyError",
    "PolicySet",
    "PolicyViolation",
    "Problem",
    "__version__",
    "load",
]

__version__ = "0.1.0"

