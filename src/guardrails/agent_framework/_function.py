"""The function middleware: every tool call is evaluated, bound, and acted on.

Per tool call, in this order: repairs the raw arguments and evaluates the policies (one
engine call: repairs run first, on the raw JSON-parsed arguments, before the framework's
final validation); binds the framework's argument snapshot, so a later middleware that
changes the arguments makes the framework fail closed; injects secrets; then allows,
denies, halts or asks for approval. Any error of the guard's own blocks the call.
"""

from __future__ import annotations

import contextlib
import fnmatch
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias, cast

from agent_framework import (
    AgentSession,
    Content,
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
    release_approval,
)
from guardrails.agent_framework._arguments import apply_repairs, as_mapping, json_numbers
from guardrails.agent_framework._boundary import _GuardHalt, mint
from guardrails.agent_framework._history import (
    HISTORY_LIMIT,
    history_of,
    record,
    redacted,
    set_result,
)
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
from guardrails.engine import Decision, Effect, PolicySet
from guardrails.telemetry import GuardTelemetry

__all__ = ["INJECTED_MEMORY", "GuardFunctionMiddleware", "PrincipalSource", "TrustLabels"]

_log = logging.getLogger("guardrails.agent_framework")

PrincipalSource: TypeAlias = (
    Mapping[str, Any]
    | Callable[[FunctionInvocationContext],
               Mapping[str, Any] | Awaitable[Mapping[str, Any] | None] | None]
    | None
)

TrustLabels: TypeAlias = Mapping[str, bool] | Iterable[str] | None
"""Host labels for tools' results: names (or globs) of trusted tools, or a mapping of
names (or globs) to True (trusted) / False (untrusted)."""

INJECTED_MEMORY = 256
"""Distinct injected secret values a guard keeps scrubbing from every later call's output."""

_TOOLS_REMEMBERED = 1024
"""Tools whose "does a policy inject" answer a guard keeps (cleared when full, like the engine's tool index)."""


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
        trusted_tools: TrustLabels = None,
    ) -> None:
        self._policies = policies
        self._trust_labels = _trust_labels(trusted_tools)
        self._trusted: dict[str, bool] = {}
        self._principal = principal
        self._secrets: SecretProvider = secrets if secrets is not None else EnvironmentSecrets()
        self._telemetry = telemetry if telemetry is not None else GuardTelemetry()
        self._history_limit = history_limit
        # Every value this guard injected (most recent last, bounded): a tool may stash a
        # secret where another tool, with no secret policy of its own, returns it later.
        self._injected: dict[str, None] = {}
        # The scrubber of those values, rebuilt only when one is added: every call starts
        # from it instead of re-collecting and re-sorting them.
        self._memory = Scrubber((), policies.redact)
        # Per tool, whether any policy naming it injects a secret (policies never change).
        self._injects: dict[str, bool] = {}

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
        tool = context.function.name
        entry = as_mapping(context.arguments)
        if entry is not None and not json_numbers(entry):
            raise ValueError("arguments hold a number JSON cannot express (NaN or Infinity)")
        principal = await self._resolve_principal(context)
        run = RUN.get()
        state = session_state(context.session)
        request = run.request if run is not None else stored_request(state)
        history = history_of(state, run) or ()  # the engine copies what it reads
        decision = self._policies.evaluate(
            tool,
            entry if entry is not None else cast(Any, context.arguments),  # fails closed
            principal=principal,
            history=history,
            request=request,
            description=context.function.description or "",
        )
        mint(decision)
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

    def _tool_injects(self, tool: str) -> bool:
        injects = self._injects.get(tool)
        if injects is None:
            injects = any(p.inject for p in self._policies.for_tool(tool))
            if len(self._injects) >= _TOOLS_REMEMBERED:
                self._injects.clear()
            self._injects[tool] = injects
        return injects

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
            entry = self._record(context, plan, "allow", scrub)
            await self._run_tool(context, call_next, scrub)
            set_result(entry, context.result)  # the scrubbed text the model gets
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

    def _injections(self, decision: Decision) -> dict[str, str]:
        values: dict[str, str] = {}
        if not self._tool_injects(decision.tool):
            return values
        for name, ref in self._policies.injections(decision).items():
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
                self._memory = Scrubber(self._injected, self._policies.redact)
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
                scrub: Scrubber) -> dict[str, Any] | None:
        history = history_of(session_state(context.session, create=True), plan.run)
        if history is None:
            return None
        tool = context.function.name
        args = redacted(plan.arguments, plan.secret_names, scrub)
        return record(history, tool, args, effect, self._history_limit,
                      trusted=self.trusted(tool))

    def trusted(self, tool: str) -> bool:
        """Whether ``tool``'s results are trusted content: some label (a policy's
        ``spec.results`` or the host's ``trusted_tools``) says trusted and none says
        untrusted. Unlabelled tools are untrusted."""
        found = self._trusted.get(tool)
        if found is None:
            labels = [self._policies.results_trusted(tool)]
            labels += [v for glob, v in self._trust_labels if fnmatch.fnmatchcase(tool, glob)]
            found = False not in labels and True in labels
            if len(self._trusted) >= _TOOLS_REMEMBERED:
                self._trusted.clear()
            self._trusted[tool] = found
        return found

    # Private framework capability (see _private.APPROVAL_OBSERVER): the framework tells
    # its function middleware about approval responses that will not run the call.
    def _on_approval_responses(self, responses: Sequence[Content], *,
                               session: AgentSession | None) -> None:
        """A human rejected a held call: history records it with effect "rejected"."""
        with contextlib.suppress(Exception):  # bookkeeping must never break a run
            state = session_state(session)
            history = history_of(state, RUN.get())
            for response in responses:
                call = response.function_call
                if (response.type != "function_approval_response" or response.approved is True
                        or call is None or not isinstance(call.name, str)):
                    continue
                if not isinstance(response.id, str) or not release_approval(state, response.id):
                    continue  # not a call this guard held
                arguments = call.parse_arguments() or {}
                names = self._policies.secret_arguments(call.name)
                scrub = self._memory.with_values(
                    [v for k, v in arguments.items() if k in names]) if names else self._memory
                record(history, call.name, redacted(arguments, names, scrub), "rejected",
                       self._history_limit, trusted=self.trusted(call.name))


def _trust_labels(labels: TrustLabels) -> tuple[tuple[str, bool], ...]:
    if labels is None:
        return ()
    if isinstance(labels, str):
        raise TypeError("trusted_tools must be a list of tool names or a mapping, not a string")
    if isinstance(labels, Mapping):
        out = []
        for name, value in labels.items():
            if not isinstance(name, str) or not isinstance(value, bool):
                raise TypeError("trusted_tools mapping must map tool names to True or False")
            out.append((name, value))
        return tuple(out)
    names = list(labels)
    if not all(isinstance(n, str) for n in names):
        raise TypeError("trusted_tools must hold tool names")
    return tuple((n, True) for n in names)
