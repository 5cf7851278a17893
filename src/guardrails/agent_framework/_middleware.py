"""``guard()``: the run boundary and the function middleware, wired to one telemetry.

The two must be used together (the boundary hands the request and per-run state to the
function middleware, and is the only place a halt becomes ``PolicyViolation``), so the
public entry point builds them as a pair.
"""

from __future__ import annotations

from typing import Any

from agent_framework import AgentMiddleware, FunctionMiddleware

from guardrails.agent_framework._boundary import GuardRunMiddleware
from guardrails.agent_framework._function import (
    GuardFunctionMiddleware,
    PrincipalSource,
    TrustLabels,
)
from guardrails.agent_framework._secrets import SecretProvider, install_log_filter
from guardrails.engine import PolicySet
from guardrails.telemetry import GuardTelemetry

__all__ = ["guard"]


def guard(
    policies: PolicySet,
    *,
    principal: PrincipalSource = None,
    secrets: SecretProvider | None = None,
    mode: str | None = None,
    tracer_provider: Any = None,
    meter_provider: Any = None,
    decision_log: Any = None,
    strict: bool = False,
    unmatched: str = "allow",
    trusted_tools: TrustLabels = None,
) -> list[AgentMiddleware | FunctionMiddleware]:
    """The middleware list for ``Agent(middleware=guard(policies, ...))``.

    ``principal``: a mapping, or a callable of the ``FunctionInvocationContext`` (sync or
    async) returning one. ``secrets``: a :class:`SecretProvider` (environment variables by
    default). ``mode="audit"`` runs every policy as audit (shadow rollout). ``strict``
    checks the policies against the agent's tool schemas when a run starts. ``unmatched``
    is what happens to a call to a tool no policy names: ``"allow"`` (the default),
    ``"warn"`` (allowed, with a warning logged) or ``"deny"``. MCP tools also answer to
    ``mcp:<server>/<tool>`` in ``match.tools`` (see docs/integration.md).
    ``trusted_tools`` labels tools' results for the provenance functions: names (or globs)
    of trusted tools, or a mapping of them to True/False; it adds to the policies'
    ``spec.results`` labels, and an untrusted label always wins. Unlabelled: untrusted.
    Keep other function middleware that changes arguments *before* this list.
    """
    if mode == "audit":
        policies = policies.with_mode("audit")
    elif mode == "enforce":
        policies = policies.with_mode("enforce")
    elif mode is not None:
        raise ValueError(f"mode must be 'audit', 'enforce' or None, not {mode!r}")
    telemetry = GuardTelemetry(tracer_provider=tracer_provider, meter_provider=meter_provider,
                               decision_log=decision_log)
    install_log_filter()
    return [
        GuardRunMiddleware(policies, telemetry=telemetry, strict=strict),
        GuardFunctionMiddleware(policies, principal=principal, secrets=secrets,
                                telemetry=telemetry, unmatched=unmatched,
                                trusted_tools=trusted_tools),
    ]
