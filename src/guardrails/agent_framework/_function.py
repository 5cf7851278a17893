"""The function middleware: every tool call is evaluated, bound, and acted on.

Per tool call, in this order: repairs the raw arguments and evaluates the policies (one
engine call: repairs run first, on the raw JSON-parsed arguments, before the framework's
final validation); binds the framework's argument snapshot, so a later middleware that
changes the arguments makes the framework fail closed; injects secrets; then allows,
denies, halts or asks for approval. Any error of the guard's own blocks the call.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias, cast

from agent_framework import (
    FunctionInvocationContext,
    FunctionMiddleware,
    MiddlewareFailure,
    MiddlewareTermination,
)
from agent_framework.exceptions import UserInputRequiredException

from guardrails.agent_framework import _private
from guardrails.agent_framework._approvals import (
    APPROVAL_TTL,
    ApprovalStore,
    approval_id_for,
    approval_matches,
    approval_record,
    approval_request,
    hold_approval,
    is_approved_response,
    take_held,
)
from guardrails.agent_framework._arguments import apply_repairs, as_mapping, json_numbers
from guardrails.agent_framework._boundary import _GuardHalt, mint
from guardrails.agent_framework._history import HISTORY_LIMIT, history_of, record, redacted
from guardrails.agent_framework._secrets import (
    CURRENT_SCRUBBER,
    EnvironmentSecrets,
    Scrubber,
    SecretProvider,
    scrub_result,
    scrubbed_exception,
    scrubbed_failure,
)
from guardrails.agent_framework._state import RUN, RunState, session_state, stored_request
from guardrails.engine import Decision, Effect, PolicyProvider, PolicySet
from guardrails.engine.counters import CounterStore, MemoryStore
from guardrails.telemetry import GuardTelemetry

__all__ = ["INJECTED_MEMORY", "GuardFunctionMiddleware", "PrincipalSource"]

_log = logging.getLogger("guardrails.agent_framework")

PrincipalSource: TypeAlias = (
    Mapping[str, Any]
    | Callable[[FunctionInvocationContext],
               Mapping[str, Any] | Awaitable[Mapping[str, Any] | None] | None]
    | None
)

INJECTED_MEMORY = 256
"""Distinct injected secret values a guard keeps scrubbing from every later call's output."""

_TOOLS_REMEMBERED = 1024
"""Tools whose "does a policy inject" answer a guard keeps (cleared when full, like the engine's tool index)."""


@dataclass(frozen=True)
class _Plan:
    policies: PolicySet
    """The set this call was decided on: it finishes on it, whatever a reload does."""
    decision: Decision
    effect: Effect
    """The effect to act on: the decision's, except an approved replay of require_approval."""
    entry_arguments: dict[str, Any]
    arguments: dict[str, Any]
    """The repaired arguments (no injected secrets)."""
    secret_names: frozenset[str]
    approval_id: str
    approved_replay: bool
    run: RunState | None


def _approval_key(context: FunctionInvocationContext, approval_id: str) -> str:
    """A held approval's key in a shared store: the session's id and the call's approval id
    (call ids are only unique within a conversation)."""
    session = context.session
    session_id = getattr(session, "session_id", None) if session is not None else None
    return f"{session_id or '-'}:{approval_id}"


class GuardFunctionMiddleware(FunctionMiddleware):
    """Evaluates every tool call against the policies and acts on the effect."""

    def __init__(
        self,
        policies: PolicyProvider,
        *,
        principal: PrincipalSource = None,
        secrets: SecretProvider | None = None,
        telemetry: GuardTelemetry | None = None,
        history_limit: int = HISTORY_LIMIT,
        counters: CounterStore | None = None,
        approvals: ApprovalStore | None = None,
        approval_key: bytes | None = None,
    ) -> None:
        if approvals is not None and not approval_key:
            raise ValueError("a shared approval store needs an approval_key: its records "
                             "are only trusted with a valid HMAC")
        if approval_key is not None and not isinstance(approval_key, bytes):
            raise TypeError("approval_key must be bytes")
        self._approvals = approvals
        self._approval_key = approval_key or None
        self._policies = policies
        self._counters: CounterStore = counters if counters is not None else MemoryStore()
        self._principal = principal
        self._secrets: SecretProvider = secrets if secrets is not None else EnvironmentSecrets()
        self._telemetry = telemetry if telemetry is not None else GuardTelemetry()
        self._history_limit = history_limit
        # Every value this guard injected (most recent last, bounded): a tool may stash a
        # secret where another tool, with no secret policy of its own, returns it later.
        self._injected: dict[str, None] = {}
        # The scrubber of those values, rebuilt only when one is added: every call starts
        # from it instead of re-collecting and re-sorting them.
        first = policies.current
        self._memory = Scrubber((), first.redact)
        # Per tool, whether any policy naming it injects a secret, for the set in
        # ``_cached_for`` (both are reset when a source swaps its set).
        self._injects: dict[str, bool] = {}
        self._cached_for: PolicySet = first

    async def process(
        self,
        context: FunctionInvocationContext,
        call_next: Callable[[], Awaitable[None]],
    ) -> None:
        tool = context.function.name
        call_id = context.metadata.get("call_id")
        with self._telemetry.call_span(
            tool=tool, call_id=call_id if isinstance(call_id, str) else None
        ) as span:
            started = time.perf_counter()
            try:
                plan = await self._plan(context)
            except Exception as exc:  # fail closed: a guard error never lets a call through
                span.fail(exc)
                self._block_on_guard_error(context, tool, exc)
                return
            if plan.approved_replay:
                span.mark_approved()
            span.record(plan.decision, time.perf_counter() - started)
            await self._act(context, call_next, plan, span)

    # -- evaluation ---------------------------------------------------------------------

    async def _plan(self, context: FunctionInvocationContext) -> _Plan:
        policies = self._policies.current  # once: the whole call uses this set
        tool = context.function.name
        entry = as_mapping(context.arguments)
        if entry is not None and not json_numbers(entry):
            raise ValueError("arguments hold a number JSON cannot express (NaN or Infinity)")
        principal = await self._resolve_principal(context)
        run = RUN.get()
        state = session_state(context.session)
        request = run.request if run is not None else stored_request(state)
        history = history_of(state, run) or ()  # the engine copies what it reads
        evaluate = functools.partial(
            policies.evaluate,
            tool,
            entry if entry is not None else cast(Any, context.arguments),  # fails closed
            principal=principal,
            history=history,
            request=request,
            description=context.function.description or "",
            agent=run.agent if run is not None else None,
            counters=self._counters,
        )
        if self._counters.blocking and policies.counts(tool):
            # The store does network or disk I/O: the event loop must not wait on it.
            decision = await asyncio.to_thread(evaluate)
        else:
            decision = evaluate()
        mint(decision)
        if entry is None:
            entry = {}
        arguments = apply_repairs(entry, decision)
        secret_names = decision.secret_arguments  # declared and injected names
        approval_id = approval_id_for(context)
        replay = False
        if is_approved_response(context):
            # One approval, one call: the held record is used up, matching or not.
            if self._approvals is not None:
                held = await self._store(self._approvals.take,
                                         _approval_key(context, approval_id))
            else:
                held = take_held(state, approval_id)
            replay = approval_matches(held, approval_id, tool, arguments, decision,
                                      self._approval_key)
        effect = decision.effect
        if effect is Effect.REQUIRE_APPROVAL and replay:
            effect = Effect.ALLOW  # approval satisfies require_approval, nothing else
        # ``entry`` is already this call's own copy (``as_mapping``); the engine only reads it.
        return _Plan(policies, decision, effect, entry, arguments, secret_names,
                     approval_id, replay, run)

    async def _resolve_principal(self, context: FunctionInvocationContext) -> Mapping[str, Any]:
        source = self._principal
        if source is None:
            return {}
        if isinstance(source, Mapping):
            return source
        value = source(context)
        if inspect.isawaitable(value):
            value = await value
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise TypeError(f"principal callable returned {type(value).__name__}, not a mapping")
        return value

    async def _store(self, call: Callable[..., Any], *args: Any) -> Any:
        """A shared-store call, off the event loop when the store does I/O."""
        if getattr(self._approvals, "blocking", True):
            return await asyncio.to_thread(call, *args)
        return call(*args)

    def _for_set(self, policies: PolicySet) -> None:
        """Reset what this guard worked out from the policies when a reload swapped them."""
        if policies is not self._cached_for:
            self._injects = {}
            self._memory = Scrubber(self._injected, policies.redact)
            self._cached_for = policies

    def _release(self, decision: Decision) -> None:
        """The call does not run: give its counter reservations back."""
        if decision.reservations:
            try:
                self._counters.release(decision.reservations)
            except Exception as exc:  # the count stays high: errs towards refusing
                _log.warning("guardrails: giving back counter reservations failed (%s)",
                             type(exc).__name__)

    def _tool_injects(self, policies: PolicySet, tool: str) -> bool:
        self._for_set(policies)
        injects = self._injects.get(tool)
        if injects is None:
            injects = any(p.inject for p in policies.for_tool(tool))
            if len(self._injects) >= _TOOLS_REMEMBERED:
                self._injects.clear()
            self._injects[tool] = injects
        return injects

    # -- acting on the effect -------------------------------------------------------------

    async def _act(self, context: FunctionInvocationContext, call_next: Callable[[], Awaitable[None]],
                   plan: _Plan, span: Any) -> None:
        tool = context.function.name
        decision = plan.decision
        self._for_set(plan.policies)
        if plan.effect is Effect.ALLOW:
            try:
                injected = self._injections(plan.policies, decision)
                running = {**plan.arguments, **injected}
                context.arguments = running
                _private.record_argument_snapshot(context, running)
                if plan.approved_replay:
                    # What the approval covered: the framework compares it with the approved
                    # call, which never holds injected values.
                    context.metadata["original_arguments_for_messages"] = dict(plan.arguments)
            except Exception as exc:
                span.fail(exc)
                self._release(decision)
                self._block_on_guard_error(context, tool, exc)
                return
            scrub = self._scrubber(plan, injected.values())
            self._record(context, plan, "allow", scrub)
            await self._run_tool(context, call_next, scrub)
            return

        # The call does not run: bind the snapshot to the arguments as they stand.
        with contextlib.suppress(Exception):
            _private.record_argument_snapshot(context, as_mapping(context.arguments) or {})
        base_scrub = self._scrubber(plan, ())
        message = base_scrub(decision.message)
        if plan.effect is Effect.HALT:
            self._record(context, plan, "halt", base_scrub)
            if plan.run is not None:
                plan.run.halts.add(decision.id)
            _log.warning("guardrails: %s halted the run (decision %s)", tool, decision.id)
            raise _GuardHalt(decision)
        if plan.effect is Effect.REQUIRE_APPROVAL:
            self._release(decision)  # counted when the approved call is replayed and runs
            state = session_state(context.session, create=True)
            if state is None:
                self._record(context, plan, "deny", base_scrub)
                context.result = (
                    f"Error: the call to {tool} requires human approval, but approval is "
                    f"unavailable (no session to hold the request), so it was denied. {message}"
                ).strip()
                return
            if self._approvals is not None:
                record = approval_record(plan.approval_id, tool, plan.arguments, decision,
                                         self._approval_key)
                try:
                    await self._store(self._approvals.hold,
                                      _approval_key(context, plan.approval_id), record,
                                      APPROVAL_TTL)
                except Exception as exc:
                    span.fail(exc)
                    self._block_on_guard_error(context, tool, exc)
                    return
            else:
                hold_approval(state, plan.approval_id, tool, plan.arguments, decision,
                              key=self._approval_key)
            context.result = approval_request(context, plan.approval_id, decision,
                                              plan.arguments, message)
            return
        self._record(context, plan, "deny", base_scrub)
        context.result = f"Error: the call to {tool} was denied by policy. {message}".strip()

    async def _run_tool(self, context: FunctionInvocationContext,
                        call_next: Callable[[], Awaitable[None]], scrub: Scrubber) -> None:
        token = CURRENT_SCRUBBER.set(scrub)
        failure: BaseException | None = None
        try:
            await call_next()
        except MiddlewareFailure as exc:
            # Fatal and never converted by the framework: it reaches the host's logs as is.
            # Our own halt carries names only and must keep its identity for the boundary.
            failure = exc if type(exc) is _GuardHalt else scrubbed_failure(exc, scrub)
            if failure is exc:
                raise
        except MiddlewareTermination as exc:
            exc.result = scrub_result(exc.result, scrub)
            context.result = scrub_result(context.result, scrub)
            failure = scrubbed_failure(exc, scrub)
            if failure is exc:
                raise
        except UserInputRequiredException:
            raise
        except Exception as exc:
            # The framework does not redact tool exceptions: replace it, outside this
            # handler, so the original (and its text) is not chained to what escapes.
            failure = scrubbed_exception(exc, scrub)
        finally:
            CURRENT_SCRUBBER.reset(token)
        if failure is not None:
            raise failure
        context.result = scrub_result(context.result, scrub)

    def _injections(self, policies: PolicySet, decision: Decision) -> dict[str, str]:
        values: dict[str, str] = {}
        if not self._tool_injects(policies, decision.tool):
            return values
        for name, ref in policies.injections(decision).items():
            value = self._secrets.get(ref.env)
            if not isinstance(value, str):
                raise TypeError(f"secret provider returned {type(value).__name__} for {ref.env!r}")
            values[name] = value
            known = value in self._injected
            self._injected.pop(value, None)  # re-added last: the most recently used
            self._injected[value] = None
            while len(self._injected) > INJECTED_MEMORY:
                del self._injected[next(iter(self._injected))]
            if not known:
                self._memory = Scrubber(self._injected, policies.redact)
        return values

    def _scrubber(self, plan: _Plan, injected: Iterable[str]) -> Scrubber:
        """Every secret this call knows: its secret arguments (as the model sent them and as
        repaired), what it injects, and every value this guard injected before."""
        names = plan.secret_names
        values: list[Any] = list(injected)
        if names:
            values += [v for k, v in plan.entry_arguments.items() if k in names]
            values += [v for k, v in plan.arguments.items() if k in names]
        return self._memory.with_values(values) if values else self._memory

    def _block_on_guard_error(self, context: FunctionInvocationContext, tool: str,
                              exc: BaseException) -> None:
        # Type only: an exception's text may hold argument or secret values.
        _log.error("guardrails: evaluating a call to %s failed (%s); the call was blocked",
                   tool, type(exc).__name__)
        with contextlib.suppress(Exception):
            history = history_of(session_state(context.session), RUN.get())
            record(history, tool, {}, "deny", self._history_limit)
        context.result = (f"Error: the guard could not evaluate the call to {tool}, "
                          "so it was blocked.")

    def _record(self, context: FunctionInvocationContext, plan: _Plan, effect: str,
                scrub: Scrubber) -> None:
        history = history_of(session_state(context.session, create=True), plan.run)
        if history is None:
            return
        args = redacted(plan.arguments, plan.secret_names, scrub)
        record(history, context.function.name, args, effect, self._history_limit)
