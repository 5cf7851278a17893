"""Microsoft Agent Framework integration: ``Agent(middleware=guard(policies, ...))``."""

from __future__ import annotations

from guardrails.agent_framework._middleware import (
    GuardedToolError,
    GuardFunctionMiddleware,
    GuardRunMiddleware,
    PrincipalSource,
    guard,
)
from guardrails.agent_framework._secrets import (
    EnvironmentSecrets,
    SecretProvider,
    SecretUnavailable,
)

__all__ = [
    "EnvironmentSecrets",
    "GuardFunctionMiddleware",
    "GuardRunMiddleware",
    "GuardedToolError",
    "PrincipalSource",
    "SecretProvider",
    "SecretUnavailable",
    "guard",
]
