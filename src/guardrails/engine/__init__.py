"""The decision engine: compiles loaded policies and evaluates tool calls into decisions."""

from guardrails.engine.decision import (
    Action,
    AppliedRepair,
    Decision,
    Effect,
    EvaluationError,
    FiredRule,
)
from guardrails.engine.errors import PolicyViolation
from guardrails.engine.policy import CompiledPolicy, SecretRef
from guardrails.engine.policyset import Explanation, PolicyProvider, PolicySet

__all__ = [
    "Action",
    "AppliedRepair",
    "CompiledPolicy",
    "Decision",
    "Effect",
    "EvaluationError",
    "Explanation",
    "FiredRule",
    "PolicyProvider",
    "PolicySet",
    "PolicyViolation",
    "SecretRef",
]
