"""Every private Agent Framework name this package depends on, in one place.

agent-framework-core 1.23 has no public API for two things the guard needs:

- the *security argument snapshot*: a token stored in the invocation context's metadata
  that makes the framework fail closed (``MiddlewareFailure``) when any middleware running
  after the guard changes the arguments, and that makes validation errors use their
  redacted text;
- the argument-validation error type, which the guard re-raises with scrubbed text so
  the framework still reports "Argument parsing failed" rather than "Function failed";
- the *approval response observer*: a function middleware with a method named
  ``APPROVAL_OBSERVER`` is told of approval responses that will not run their call
  (rejections), which history records with effect "rejected".

``tests/test_af_private.py`` pins the behaviour of each name here: a framework upgrade
that changes them fails those tests loudly instead of silently weakening the guard.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agent_framework import FunctionInvocationContext
from agent_framework._middleware import _ApprovalResponseObserver
from agent_framework._tools import (
    _SECURITY_ARGUMENTS_SNAPSHOT_CONTEXT_KEY,
    _argument_authority_token,
    _FunctionArgumentValidationError,
)

__all__ = [
    "APPROVAL_OBSERVER",
    "SNAPSHOT_KEY",
    "ApprovalObserver",
    "has_argument_snapshot",
    "is_argument_validation_error",
    "record_argument_snapshot",
    "scrubbed_validation_error",
]

SNAPSHOT_KEY: str = _SECURITY_ARGUMENTS_SNAPSHOT_CONTEXT_KEY

ApprovalObserver: Any = _ApprovalResponseObserver
"""The runtime-checkable protocol the framework tests its function middleware against."""
APPROVAL_OBSERVER = "_on_approval_responses"
"""The method the framework calls with the approval responses it will not execute."""


def record_argument_snapshot(context: FunctionInvocationContext,
                             arguments: Mapping[str, Any]) -> None:
    """Bind the call to ``arguments``: any later change makes the framework fail closed.

    Raises the framework's ``MiddlewareFailure`` for arguments that cannot be bound
    (opaque mutable objects); the guard treats that as a guard error.
    """
    context.metadata[SNAPSHOT_KEY] = _argument_authority_token(
        dict(arguments), boundary="security policy")


def has_argument_snapshot(context: FunctionInvocationContext) -> bool:
    return SNAPSHOT_KEY in context.metadata


def is_argument_validation_error(exc: BaseException) -> bool:
    return isinstance(exc, _FunctionArgumentValidationError)


def scrubbed_validation_error(exc: BaseException, scrub: Callable[[str], str]) -> Exception:
    """The same framework validation error, its detailed and redacted texts scrubbed."""
    redacted = getattr(exc, "redacted_message", None)
    return _FunctionArgumentValidationError(
        scrub(str(exc)),
        redacted_message=scrub(redacted) if isinstance(redacted, str) else None,
    )
