"""Microsoft Agent Framework integration: ``Agent(middleware=guard(policies, ...))``.

``ScriptedChatClient`` is an offline stand-in for a model, to test a guarded agent without
a network; its helpers (``call``, ``text``, ``result_text``) are in
``guardrails.agent_framework.scripted``.
"""

from __future__ import annotations

from guardrails.agent_framework._boundary import GuardRunMiddleware
from guardrails.agent_framework._function import GuardFunctionMiddleware, PrincipalSource
from guardrails.agent_framework._middleware import guard
from guardrails.agent_framework._secrets import (
    EnvironmentSecrets,
    GuardedToolAbort,
    GuardedToolError,
    SecretProvider,
    SecretUnavailable,
)
from guardrails.agent_framework._unreadable import GuardChatMiddleware
from guardrails.agent_framework.scripted import ScriptedChatClient

__all__ = [
    "EnvironmentSecrets",
    "GuardChatMiddleware",
    "GuardFunctionMiddleware",
    "GuardRunMiddleware",
    "GuardedToolAbort",
    "GuardedToolError",
    "PrincipalSource",
    "ScriptedChatClient",
    "SecretProvider",
    "SecretUnavailable",
    "guard",
]
