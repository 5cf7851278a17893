"""``guard()``: the run boundary and the function middleware.

They must be used together (the boundary hands the request and per-run state to the
function middleware, and is the only place a halt becomes ``PolicyViolation``; inside a run
with both, the guard replaces arguments the framework's parser cannot read with a marker the
function middleware denies, ``_unreadable.check_batch``), so the public entry point builds
them together.
"""

from __future__ import annotations

from typing import Any

from agent_framework import AgentMiddleware, FunctionMiddleware

from guardrails.agent_framework._approvals import ApprovalStore
from guardrails.agent_framework._boundary import GuardRunMiddleware
from guardrails.agent_framework._function import (
    GuardFunctionMiddleware,
    PrincipalSource,
    TrustLabels,
)
from guardrails.agent_framework._secrets import SecretProvider, install_log_filter
from guardrails.agent_framework._stores import STORE_TIMEOUT
from guardrails.engine import PolicyProvider, PolicySet
from guardrails.engine.counters import CounterStore
from guardrails.engine.policy import Mode
from guardrails.telemetry import GuardTelemetry

__all__ = ["guard"]


def guard(
    policies: PolicyProvider,
    *,
    principal: PrincipalSource = None,
    secrets: SecretProvider | None = None,
    mode: str | None = None,
    tracer_provider: Any = None,
    meter_provider: Any = None,
    decision_log: Any = None,
    strict: bool = False,
    unmatched: str = "allow",
    counters: CounterStore | None = None,
    approvals: ApprovalStore | None = None,
    approval_key: bytes | None = None,
    trusted_tools: TrustLabels = None,
    store_timeout: float = STORE_TIMEOUT,
) -> list[AgentMiddleware | FunctionMiddleware]:
    """The middleware list for ``Agent(middleware=guard(policies, ...))``: the run boundary
    (``GuardRunMiddleware``) and the function middleware (``GuardFunctionMiddleware``).
    Together they also keep arguments the framework's own parser cannot read (too deep, an
    over-long integer) from ending the run: no chat middleware is needed for that (the
    framework's dispatch of one cost more than the rest of a call's guard).

    ``principal``: a mapping, or a callable of the ``FunctionInvocationContext`` (sync or
    async) returning one. ``secrets``: a :class:`SecretProvider` (environment variables by
    default). ``mode="audit"`` runs every policy as audit (shadow rollout). ``strict``
    checks the policies against the agent's tool schemas when a run starts. ``unmatched``
    is what happens to a call to a tool no policy names: ``"allow"`` (the default),
    ``"warn"`` (allowed, with a warning logged) or ``"deny"``. MCP tools also answer to
    ``mcp:<server>/<tool>`` in ``match.tools`` (see docs/integration.md).
    ``policies``: a ``PolicySet``, or a ``PolicySource`` from ``guardrails.watch()`` (each
    call is decided on the set current when it starts). ``counters``: the store the
    policies' counters live in (``guardrails.fleet``: SQLite, Redis); by default a
    ``MemoryStore`` of this guard's own. ``approval_key`` (bytes, a secret shared by the
    replicas): calls waiting for approval are held with an HMAC, so forged session state
    approves nothing. ``approvals``: a shared store (needs ``approval_key``) to hold them
    in, so an approval given on one replica replays on another.
    ``trusted_tools`` labels tools' results for the provenance functions: names (or globs)
    of trusted tools, or a mapping of them to True/False; it adds to the policies'
    ``spec.results`` labels, and an untrusted label always wins. Unlabelled: untrusted.
    ``store_timeout``: seconds a call waits for one round trip to ``counters`` or
    ``approvals`` (a store's own timeout bounds each read, not the round trip); a store
    that has not answered by then blocks the call.
    Keep other function middleware that changes arguments *before* this list.
    """
    if mode == "audit":
        policies = _WithMode(policies, "audit")
    elif mode == "enforce":
        policies = _WithMode(policies, "enforce")
    elif mode is not None:
        raise ValueError(f"mode must be 'audit', 'enforce' or None, not {mode!r}")
    telemetry = GuardTelemetry(tracer_provider=tracer_provider, meter_provider=meter_provider,
                               decision_log=decision_log)
    install_log_filter()
    return [
        GuardRunMiddleware(policies, telemetry=telemetry, strict=strict),
        GuardFunctionMiddleware(policies, principal=principal, secrets=secrets,
                                telemetry=telemetry, unmatched=unmatched, counters=counters,
                                approvals=approvals, approval_key=approval_key,
                                trusted_tools=trusted_tools, store_timeout=store_timeout),
    ]


class _WithMode:
    """A provider whose every set runs in one mode; recomputed only when the set changes."""

    def __init__(self, source: PolicyProvider, mode: Mode) -> None:
        self._source = source
        self._mode: Mode = mode
        first = source.current
        self._pair = (first, first.with_mode(mode))

    @property
    def current(self) -> PolicySet:
        now = self._source.current
        original, moded = self._pair  # one read: the pair is replaced whole
        if now is not original:
            moded = now.with_mode(self._mode)
            self._pair = (now, moded)
        return moded
