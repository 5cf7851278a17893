"""Every private Agent Framework name this package depends on, in one place.

agent-framework-core 1.23 has no public API for three things the guard needs:

- the *security argument snapshot*: a token stored in the invocation context's metadata
  that makes the framework fail closed (``MiddlewareFailure``) when any middleware running
  after the guard changes the arguments, and that makes validation errors use their
  redacted text;
- the *function-result carrier*: host-only properties (an MCP tool's raw result under
  ``_mcp_tool_result_host_payload``, its ``_meta``) that the framework keeps in the
  invocation context's metadata and attaches to the function result after the guard
  returned; the guard scrubs them where they wait;
- the argument-validation error type, which the guard re-raises with scrubbed text so
  the framework still reports "Argument parsing failed" rather than "Function failed".

``tests/test_af_private.py`` pins the behaviour of each name here: a framework upgrade
that changes them fails those tests loudly instead of silently weakening the guard.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agent_framework import FunctionInvocationContext
from agent_framework._tools import (
    _FUNCTION_RESULT_CARRIER_CONTEXT_KEY,
    _SECURITY_ARGUMENTS_SNAPSHOT_CONTEXT_KEY,
    _argument_authority_token,
    _FunctionArgumentValidationError,
)

__all__ = [
    "SNAPSHOT_KEY",
    "function_result_carrier",
    "has_argument_snapshot",
    "is_argument_validation_error",
    "mcp_remote_name",
    "record_argument_snapshot",
    "scrubbed_validation_error",
]

SNAPSHOT_KEY: str = _SECURITY_ARGUMENTS_SNAPSHOT_CONTEXT_KEY


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


def function_result_carrier(context: FunctionInvocationContext) -> Any | None:
    """The host-only properties waiting to be attached to this call's function result."""
    return context.metadata.get(_FUNCTION_RESULT_CARRIER_CONTEXT_KEY)



_MCP_REMOTE_NAME_KEY = "_mcp_remote_name"
"""Where an MCP tool's ``FunctionTool`` keeps the server's own name for the tool
(``agent_framework._mcp._MCP_REMOTE_NAME_KEY``; pinned by tests/test_af_mcp.py)."""


def mcp_remote_name(function: Any) -> str | None:
    """The MCP server's name for a generated MCP ``FunctionTool`` (before any
    ``tool_name_prefix``), or None for a tool that is not an MCP tool."""
    properties = getattr(function, "additional_properties", None) or {}
    remote = properties.get(_MCP_REMOTE_NAME_KEY) if isinstance(properties, Mapping) else None
    return remote if isinstance(remote, str) else None
