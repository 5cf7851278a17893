"""The function middleware: every tool call is evaluated, bound, and acted on.

Per tool call, in this order: repairs the raw arguments and evaluates the policies (one
engine call: repairs run first, on the raw JSON-parsed arguments, before the framework's
final validation); binds the framework's argument snapshot, so a later middleware that
changes the arguments makes the framework fail closed; injects secrets; then allows,
denies, halts or asks for approval. Any error of the guard's own blocks the call.
"""

from __future__ import annotations

import contextlib
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
    approval_id_for,
    approval_request,
    approved_replay,
    hold_approval,
)
from guardrails.agent_framework._arguments import apply_repairs, as_mapping, json_numbers
from guardrails.agent_framework._boundary import _GuardHalt, mint
from guardrails.agent_framework._history import HISTORY_LIMIT, history_of, record, redacted
from guardrails.agent_framework._mcp import tool_aliases
from guardrails.agent_framework._secrets import (
    CURRENT_SCRUBBER,
    EnvironmentSecrets,
    Scrubber,
    SecretProvider,
    SecretUnavailable,
    scrub_host_payload,
    scrub_result,
    scrubbed_abort,
    scrubbed_exception,
    scrubbed_failure,
    scrubbed_user_input_request,
    sensitive_telemetry_enabled,
)
from guardrails.agent_framework._state import RUN, RunState, session_state, stored_request
from guardrails.engine import Decision, Effect, PolicySet
from guardrails.engine.decision import REDACTED
from guardrails.telemetry import GuardTelemetry

__all__ = ["INJECTED_MEMORY", "GuardFunctionMiddleware", "PrincipalSource"]

_log = logging.getLogger("guardrails.agent_framework")

PrincipalSource: TypeAlias = (
    Mapping[str, Any]
    | Callable[[FunctionInvocationContext],
               Mapping[str, Any] | Awaitable[Mapping[str, Any] | None] | None]
    | None
)

INJECTED_MEMORY = 1024
"""Distinct injected secret values a guard remembers, and keeps scrubbing from every later
call's output, records and telemetry: every version of every secret it ever injected (a
rotated token a tool stashed is still scrubbed when another tool returns it later).

Nothing is forgotten: when the memory is full the guard refuses to inject a value it has
not injected before (the call is blocked with ``SecretUnavailable``), failing closed rather
than dropping an old value it could then leak. A host whose secrets rotate more often
than that over one guard's life builds a new ``guard()`` (per session, say)."""

INJECTED_MEMORY_CHARS = 1 << 20
"""Total characters of the remembered values (the same refusal applies beyond it)."""

UNMATCHED = ("allow", "warn", "deny")
"""What ``guard(unmatched=...)`` does with a call to a tool no policy names: let it run,
let it run and log a warning, or deny it (the policies become an allowlist of tools)."""


@dataclass(frozen=True)
class _Plan:
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


class GuardFunctionMiddleware(FunctionMiddleware):
    """Evaluates every tool call against the policies and acts on the effect."""

    def __init__(
        self,
        policies: PolicySet,
        *,
        principal: PrincipalSource = None,
        secrets: SecretProvider | None = None,
        telemetry: GuardTelemetry | None = None,
        history_limit: int = HISTORY_LIMIT,
        unmatched: str = "allow",
    ) -> None:
        if unmatched not in UNMATCHED:
            raise ValueError(f"unmatched must be one of {', '.join(UNMATCHED)}, not {unmatched!r}")
        self._unmatched = unmatched
        self._policies = policies
        self._principal = principal
        self._secrets: SecretProvider = secrets if secrets is not None else EnvironmentSecrets()
        self._telemetry = telemetry if telemetry is not None else GuardTelemetry()
        self._history_limit = history_limit
        # Every value this guard injected (bounded, never forgotten): a tool may stash a
        # secret where another tool, with no secret policy of its own, returns it later.
        self._injected: dict[str, None] = {}
        self._injected_chars = 0
        # The scrubber of those values, rebuilt only when one is added: every call starts
        # from it instead of re-collecting and re-sorting them.
        self._memory = Scrubber((), policies.redact)

    async def process(
        self,
        context: FunctionInvocationContext,
        call_next: Callable[[], Awaitable[None]],
    ) -> None:
        tool = context.function.name
        call_id = self._safe_call_id(context)
        with self._telemetry.call_span(tool=tool, call_id=call_id) as span:
            started = time.perf_counter()
            try:
                if call_id == REDACTED and context.metadata.get("call_id") != REDACTED:
                    # The framework's own execute_tool span and logs would carry it.
                    raise ValueError("the call id the model chose carries a secret value")
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
        tool = context.function.name
        entry = as_mapping(context.arguments)
        if entry is not None and not json_numbers(entry):
            raise ValueError("arguments hold a number JSON cannot express (NaN or Infinity)")
        principal = await self._resolve_principal(context)
        run = RUN.get()
        state = session_state(context.session)
        request = run.request if run is not None else stored_request(state)
        history = history_of(state, run) or ()  # the engine copies what it reads
        aliases = tool_aliases(context.function)
        decision = self._policies.evaluate(
            tool,
            entry if entry is not None else cast(Any, context.arguments),  # fails closed
            principal=principal,
            history=history,
            request=request,
            description=context.function.description or "",
            known_secrets=self._memory,
            aliases=aliases,
            unmatched=Effect.DENY if self._unmatched == "deny" else Effect.ALLOW,
        )
        mint(decision)
        if self._unmatched == "warn" and not decision.policies and not self._policies.for_tool(
                tool, aliases):
            _log.warning("guardrails: no policy names the tool %s; the call runs unguarded", tool)
        if entry is None:
            entry = {}
        arguments = apply_repairs(entry, decision)
        secret_names = decision.secret_arguments  # declared and injected names
        approval_id = approval_id_for(context)
        replay = approved_replay(context, state, approval_id, tool, arguments, decision)
        effect = decision.effect
        if effect is Effect.REQUIRE_APPROVAL and replay:
            effect = Effect.ALLOW  # approval satisfies require_approval, nothing else
        # ``entry`` is already this call's own copy (``as_mapping``); the engine only reads it.
        return _Plan(decision, effect, entry, arguments, secret_names,
                     approval_id, replay, run)

    def _safe_call_id(self, context: FunctionInvocationContext) -> str | None:
        """The model chose the call id: blanked when it carries a known secret (an injected
        value, a secret argument's value, a redact-pattern match) before any span or record
        holds it."""
        call_id = context.metadata.get("call_id")
        if not isinstance(call_id, str):
            return None
        try:
            scrub = self._memory
            arguments = as_mapping(context.arguments)
            names = self._policies.secret_arguments(context.function.name,
                                                    tool_aliases(context.function))
            if arguments is not None and names:
                scrub = scrub.with_values([v for k, v in arguments.items() if k in names])
            return call_id if scrub(call_id) == call_id else REDACTED
        except Exception:
            return REDACTED

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

    # -- acting on the effect -------------------------------------------------------------

    async def _act(self, context: FunctionInvocationContext, call_next: Callable[[], Awaitable[None]],
                   plan: _Plan, span: Any) -> None:
        tool = context.function.name
        decision = plan.decision
        if plan.effect is Effect.ALLOW:
            try:
                injected = self._injections(decision)
                running = {**plan.arguments, **injected}
                context.arguments = running
                _private.record_argument_snapshot(context, running)
                if plan.approved_replay:
                    # What the approval covered: the framework compares it with the approved
                    # call, which never holds injected values.
                    context.metadata["original_arguments_for_messages"] = dict(plan.arguments)
            except Exception as exc:
                span.fail(exc)
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
            state = session_state(context.session, create=True)
            if state is None:
                self._record(context, plan, "deny", base_scrub)
                context.result = (
                    f"Error: the call to {tool} requires human approval, but approval is "
                    f"unavailable (no session to hold the request), so it was denied. {message}"
                ).strip()
                return
            hold_approval(state, plan.approval_id, tool, plan.arguments, decision)
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
        except UserInputRequiredException as exc:
            # Its contents reach the model, the user-input requests and the session.
            failure = scrubbed_user_input_request(exc, scrub)
        except Exception as exc:
            # The framework does not redact tool exceptions: replace it, outside this
            # handler, so the original (and its text) is not chained to what escapes.
            failure = scrubbed_exception(exc, scrub)
        except BaseException as exc:
            # Not a tool error (a cancellation, an exit, a tool's own BaseException): it
            # ends the run and reaches the host as is, so its text is scrubbed too.
            failure = scrubbed_abort(exc, scrub)
            if failure is exc:
                raise
        finally:
            CURRENT_SCRUBBER.reset(token)
            # Attached by the framework after the guard returns (an MCP tool's raw result).
            with contextlib.suppress(Exception):
                scrub_host_payload(context, scrub)
        if failure is not None:
            raise failure
        context.result = scrub_result(context.result, scrub)

    def _injections(self, decision: Decision) -> dict[str, str]:
        values: dict[str, str] = {}
        if not decision.policies:
            return values
        injections = self._policies.injections(decision)
        if injections and sensitive_telemetry_enabled():
            # The framework's execute_tool span would record the injected value (the
            # arguments, and the tool's exception) while sensitive-data telemetry is on.
            raise SecretUnavailable(
                f"refusing to inject {', '.join(sorted(injections))} into {decision.tool}: "
                "Agent Framework's sensitive-data telemetry is on (enable_sensitive_data / "
                "ENABLE_SENSITIVE_DATA) and its execute_tool span would record the value")
        for name, ref in injections.items():
            value = self._secrets.get(ref.env)
            if not isinstance(value, str):
                raise TypeError(f"secret provider returned {type(value).__name__} for {ref.env!r}")
            values[name] = value
            if value in self._injected:
                continue
            if (len(self._injected) >= INJECTED_MEMORY
                    or self._injected_chars + len(value) > INJECTED_MEMORY_CHARS):
                raise SecretUnavailable(
                    f"refusing to inject {ref.env!r}: this guard already remembers "
                    f"{len(self._injected)} injected values (INJECTED_MEMORY), and forgetting "
                    "one could let it leak; build a new guard()")
            self._injected[value] = None
            self._injected_chars += len(value)
            self._memory = self._memory.with_values([value])
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
        # Type only: an exception's text may hold argument or secret values. A
        # SecretUnavailable's text names references, never values: it says what to fix.
        reason = type(exc).__name__
        if isinstance(exc, SecretUnavailable):  # scrubbed all the same: a provider wrote it
            with contextlib.suppress(Exception):
                reason = self._memory(f"{type(exc).__name__}: {exc}")
        _log.error("guardrails: evaluating a call to %s failed (%s); the call was blocked",
                   tool, reason)
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
