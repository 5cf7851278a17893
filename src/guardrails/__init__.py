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
from guardrails.expr.limits import Limits
from guardrails.fleet.source import PolicySource, SourceStatus, load, watch
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
    "PolicySource",
    "PolicyViolation",
    "Problem",
    "SourceStatus",
    "__version__",
    "load",
    "watch",
]

__version__ = "0.1.0"

