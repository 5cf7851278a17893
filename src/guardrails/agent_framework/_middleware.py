"""The guard: a run-boundary agent middleware and a function middleware.

Per tool call the function middleware, in this order: repairs the raw arguments and
evaluates the policies (one engine call: repairs run first, on the raw JSON-parsed
arguments, before the framework's final validation); binds the framework's argument
snapshot, so a later middleware that changes the arguments makes the framework fail
closed; injects secrets; then allows, denies, halts or asks for approval.

The run boundary captures the user's own words for ``request``, holds per-run state in a
context variable (so concurrent runs never see each other's), and turns a halt into
``guardrails.PolicyViolation`` only when the failure is exactly this package's private
type carrying a decision this process minted.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import logging
import math
import time
import weakref
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeAlias, cast

from agent_framework import (
    AgentContext,
    AgentMiddleware,
    Content,
    FunctionInvocationContext,
    FunctionMiddleware,
    FunctionTool,
    Message,
    MiddlewareException,
    MiddlewareFailure,
    MiddlewareTermination,
    ResponseStream,
    normalize_tools,
)
from agent_framework.exceptions import UserInputRequiredException

from guardrails.agent_framework import _private
from guardrails.agent_framework._secrets import (
    CURRENT_SCRUBBER,
    EnvironmentSecrets,
    Scrubber,
    SecretProvider,
    install_log_filter,
)
from guardrails.engine import Action, Decision, Effect, PolicySet, PolicyViolation
from guardrails.engine.decision import redact_arguments
from guardrails.model.errors import PolicyError, Problem
from guardrails.telemetry import GuardTelemetry

__all__ = ["GuardFunctionMiddleware", "GuardRunMiddleware", "guard"]

_log = logging.getLogger("guardrails.agent_framework")

PrincipalSource: TypeAlias = (
    Mapping[str, Any]
    | Callable[[FunctionInvocationContext],
               Mapping[str, Any] | Awaitable[Mapping[str, Any] | None] | None]
    | None
)

HISTORY_LIMIT = 50
"""Entries of ``history`` kept per session (or run); the engine bounds it again."""

INJECTED_MEMORY = 256
"""Distinct injected secret values a guard keeps scrubbing from every later call's output."""

STATE_KEY = "guardrails"
"""Key of this package's JSON-safe entry in ``AgentSession.state``."""

# Decisions this package minted in this process. The run boundary unwraps a halt only
# when its decision is found here (by identity), so a forged decision is never unwrapped.
_MINTED: weakref.WeakValueDictionary[str, Decision] = weakref.WeakValueDictionary()


class _GuardHalt(MiddlewareFailure):
    """The guard's fail-closed abort. Private: only the run boundary may unwrap it."""

    def __init__(self, decision: Decision) -> None:
        # Same names-only text as PolicyViolation: tracebacks of chained exceptions reach
        # logs and spans, and rule messages may quote argument values.
        super().__init__(str(PolicyViolation(decision)))
        self.decision = decision


def minted_decision(exc: BaseException, run: _RunState | None = None) -> Decision | None:
    """The decision of a halt raised by this package, or None for anything else.

    Exactly our type (a subclass could be anyone's) and a decision we minted, by identity.
    With ``run``, also one the guard halted *in that run*: a tool that re-raises a real
    halt it kept from another run (the decision is still alive) is not a halt of this one.
    """
    if type(exc) is not _GuardHalt:
        return None
    decision = vars(exc).get("decision")
    if not isinstance(decision, Decision):
        return None
    if _MINTED.get(decision.id) is not decision:
        return None
    if run is not None and decision.id not in run.halts:
        return None
    return decision


@dataclass
class _RunState:
    """What the run boundary hands to the function middleware (through a context variable)."""

    request: str
    history: list[dict[str, Any]] = field(default_factory=list)
    """History of this run, used when the run has no session."""
    halts: set[str] = field(default_factory=set)
    """Ids of the decisions the guard halted this run with: the only ones it unwraps."""


_RUN: ContextVar[_RunState | None] = ContextVar("guardrails_run", default=None)


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
    run: _RunState | None


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
    ) -> None:
        self._policies = policies
        self._principal = principal
        self._secrets: SecretProvider = secrets if secrets is not None else EnvironmentSecrets()
        self._telemetry = telemetry if telemetry is not None else GuardTelemetry()
        self._history_limit = history_limit
        # Every value this guard injected (most recent last, bounded): a tool may stash a
        # secret where another tool, with no secret policy of its own, returns it later.
        self._injected: dict[str, None] = {}

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
        entry = _as_mapping(context.arguments)
        if entry is not None and not _json_numbers(entry):
            # Python's json (the framework's parser) reads NaN and Infinity; JSON has
            # neither, and NaN compares false with every limit a rule could set.
            raise ValueError("arguments hold a number JSON cannot express (NaN or Infinity)")
        principal = await self._resolve_principal(context)
        run = _RUN.get()
        state = _session_state(context)
        request = run.request if run is not None else _stored_request(state)
        history = list(self._history_target(state, run) or ())
        decision = self._policies.evaluate(
            tool,
            entry if entry is not None else cast(Any, context.arguments),  # fails closed
            principal=principal,
            history=history,
            request=request,
            description=context.function.description or "",
        )
        _MINTED[decision.id] = decision
        if entry is None:
            entry = {}
        arguments = _apply_repairs(entry, decision)
        secret_names = decision.secret_arguments | self._policies.secret_arguments(tool)
        approval_id = _approval_id(context)
        approved_replay = False
        effect = decision.effect
        if _is_approved_replay(context):
            record = _pop_approval(state, approval_id)
            approved_replay = record is not None and record == _fingerprint(tool, arguments, decision)
            if effect is Effect.REQUIRE_APPROVAL and approved_replay:
                effect = Effect.ALLOW  # approval satisfies require_approval, nothing else
        # ``entry`` is already this call's own copy (``_as_mapping``); the engine only reads it.
        return _Plan(decision, effect, entry, arguments, secret_names,
                     approval_id, approved_replay, run)

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
            _private.record_argument_snapshot(context, _as_mapping(context.arguments) or {})
        base_scrub = self._scrubber(plan, ())
        message = base_scrub(decision.message)
        if plan.effect is Effect.HALT:
            self._record(context, plan, "halt", base_scrub)
            if plan.run is not None:
                plan.run.halts.add(decision.id)
            _log.warning("guardrails: %s halted the run (decision %s)", tool, decision.id)
            raise _GuardHalt(decision)
        if plan.effect is Effect.REQUIRE_APPROVAL:
            state = _session_state(context, create=True)
            if state is None:
                self._record(context, plan, "deny", base_scrub)
                context.result = (
                    f"Error: the call to {tool} requires human approval, but approval is "
                    f"unavailable (no session to hold the request), so it was denied. {message}"
                ).strip()
                return
            approvals = state.setdefault("approvals", {})
            approvals[plan.approval_id] = _fingerprint(tool, plan.arguments, decision)
            context.result = _approval_request(context, plan, message)
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
            failure = _scrubbed_failure(exc, scrub)
            if failure is exc:
                raise
        except MiddlewareTermination as exc:
            exc.result = _scrub_result(exc.result, scrub)
            context.result = _scrub_result(context.result, scrub)
            failure = _scrubbed_failure(exc, scrub)
            if failure is exc:
                raise
        except UserInputRequiredException:
            raise
        except Exception as exc:
            # The framework does not redact tool exceptions: replace it, outside this
            # handler, so the original (and its text) is not chained to what escapes.
            failure = _scrubbed_exception(exc, scrub)
        finally:
            CURRENT_SCRUBBER.reset(token)
        if failure is not None:
            raise failure
        context.result = _scrub_result(context.result, scrub)

    def _injections(self, decision: Decision) -> dict[str, str]:
        values: dict[str, str] = {}
        for name, ref in self._policies.injections(decision).items():
            value = self._secrets.get(ref.env)
            if not isinstance(value, str):
                raise TypeError(f"secret provider returned {type(value).__name__} for {ref.env!r}")
            values[name] = value
            self._injected.pop(value, None)
            self._injected[value] = None
            while len(self._injected) > INJECTED_MEMORY:
                del self._injected[next(iter(self._injected))]
        return values

    def _scrubber(self, plan: _Plan, injected: Any) -> Scrubber:
        names = plan.secret_names
        secret_values: list[Any] = []
        if names:
            secret_values += [v for k, v in plan.entry_arguments.items() if k in names]
            secret_values += [v for k, v in plan.arguments.items() if k in names]
        secret_values += injected
        secret_values += list(self._injected)
        return Scrubber(secret_values, self._policies.redact)

    def _block_on_guard_error(self, context: FunctionInvocationContext, tool: str,
                              exc: BaseException) -> None:
        # Type only: an exception's text may hold argument or secret values.
        _log.error("guardrails: evaluating a call to %s failed (%s); the call was blocked",
                   tool, type(exc).__name__)
        with contextlib.suppress(Exception):
            target = self._history_target(_session_state(context), _RUN.get())
            if target is not None:
                target.append({"tool": tool, "args": {}, "effect": "deny"})
                del target[:-self._history_limit]
        context.result = (f"Error: the guard could not evaluate the call to {tool}, "
                          "so it was blocked.")

    # -- history ------------------------------------------------------------------------

    def _history_target(self, state: dict[str, Any] | None,
                        run: _RunState | None) -> list[dict[str, Any]] | None:
        if state is not None:
            history = state.get("history")
            if not isinstance(history, list):
                history = state["history"] = []
            return history
        return run.history if run is not None else None

    def _record(self, context: FunctionInvocationContext, plan: _Plan, effect: str,
                scrub: Scrubber) -> None:
        target = self._history_target(_session_state(context, create=True), plan.run)
        if target is None:
            return
        args = _scrub_json(redact_arguments(plan.arguments, plan.secret_names), scrub)
        target.append({"tool": context.function.name, "args": args, "effect": effect})
        del target[:-self._history_limit]


class GuardRunMiddleware(AgentMiddleware):
    """The run boundary: request capture, per-run state, halt translation, strict checks."""

    def __init__(self, policies: PolicySet, *, telemetry: GuardTelemetry | None = None,
                 strict: bool = False) -> None:
        self._policies = policies
        self._telemetry = telemetry if telemetry is not None else GuardTelemetry()
        self._strict = strict
        self._checked: set[frozenset[tuple[str, str]]] = set()

    async def process(self, context: AgentContext, call_next: Callable[[], Awaitable[None]]) -> None:
        if self._strict:
            self._check_tools(context)
        state = _RunState(request=_run_request(context))
        token = _RUN.set(state)
        try:
            await call_next()
        except MiddlewareFailure as exc:
            decision = minted_decision(exc, state)
            if decision is None:
                raise
            self._telemetry.record_halt(decision)
            raise PolicyViolation(decision) from exc
        finally:
            _RUN.reset(token)
        result = context.result
        if context.stream and isinstance(result, ResponseStream):
            result.with_pull_context_manager(lambda: self._stream_scope(state))

    @contextlib.contextmanager
    def _stream_scope(self, state: _RunState) -> Iterator[None]:
        """Around every pull of a streamed run: the tools run while the stream is consumed."""
        token = _RUN.set(state)
        try:
            yield
        except MiddlewareFailure as exc:
            decision = minted_decision(exc, state)
            if decision is None:
                raise
            self._telemetry.record_halt(decision)
            raise PolicyViolation(decision) from exc
        finally:
            _RUN.reset(token)

    # STRICT HOOK: schema-aware checking against the agent's tools (guardrails.engine.lint).
    # Skipped when that module is absent. Errors reject the run before any tool can run.
    def _check_tools(self, context: AgentContext) -> None:
        try:
            from guardrails.engine import lint as lint_module
        except ImportError:  # pragma: no cover - the lint engineer's module is optional here
            return
        schemas: dict[str, Mapping[str, Any]] = {}
        options = getattr(context.agent, "default_options", None)
        declared = options.get("tools") if isinstance(options, Mapping) else None
        for source in (declared, context.tools):
            for item in normalize_tools(source):
                if isinstance(item, FunctionTool):
                    schemas[item.name] = item.parameters()
        key = frozenset((name, json.dumps(schema, sort_keys=True, default=str))
                        for name, schema in schemas.items())
        if key in self._checked:
            return
        findings = lint_module.lint(self._policies, schemas)
        errors = [f for f in findings if f.severity == "error"]
        if errors:
            raise PolicyError(Problem(f.file, f.line, f.column, f.message) for f in errors)
        self._checked.add(key)


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
) -> list[AgentMiddleware | FunctionMiddleware]:
    """The middleware list for ``Agent(middleware=guard(policies, ...))``.

    ``principal``: a mapping, or a callable of the ``FunctionInvocationContext`` (sync or
    async) returning one. ``secrets``: a :class:`SecretProvider` (environment variables by
    default). ``mode="audit"`` runs every policy as audit (shadow rollout). ``strict``
    checks the policies against the agent's tool schemas when a run starts.
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
                                telemetry=telemetry),
    ]


# -- helpers ----------------------------------------------------------------------------


def _as_mapping(arguments: Any) -> dict[str, Any] | None:
    if arguments is None:
        return {}
    if isinstance(arguments, Mapping):
        return dict(arguments)
    dump = getattr(arguments, "model_dump", None)
    if callable(dump):
        dumped = dump(exclude_unset=True)
        return dict(dumped) if isinstance(dumped, Mapping) else None
    return None


def _json_numbers(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, Mapping):
        return all(_json_numbers(v) for v in value.values())
    if isinstance(value, list | tuple):
        return all(_json_numbers(v) for v in value)
    return True


def _apply_repairs(entry: Mapping[str, Any], decision: Decision) -> dict[str, Any]:
    """Entry arguments with only what enforcing repairs touched replaced.

    Untouched arguments keep the exact objects the framework gave us, so an approval or
    snapshot token over them is unchanged by the guard's own round trip.
    """
    arguments = dict(entry)
    for repair in decision.repairs:
        if repair.audit:
            continue
        for name in repair.set:
            if name in decision.arguments:
                arguments[name] = decision.arguments[name]
        for name in repair.unset:
            arguments.pop(name, None)
    return arguments


def _session_state(context: FunctionInvocationContext,
                   *, create: bool = False) -> dict[str, Any] | None:
    session = context.session
    if session is None:
        return None
    state = session.state.get(STATE_KEY)
    if isinstance(state, dict):
        return state
    if not create:
        return None
    fresh: dict[str, Any] = {}
    session.state[STATE_KEY] = fresh
    return fresh


def _stored_request(state: Mapping[str, Any] | None) -> str | None:
    value = state.get("request") if state is not None else None
    return value if isinstance(value, str) else None


def _message_text(message: Message) -> str:
    return "\n".join(c.text for c in message.contents if c.type == "text" and c.text)


def _run_request(context: AgentContext) -> str:
    """The text of the user messages that started the run (never tool or assistant text).

    A run that only resumes approvals carries no user text: the request is then the one
    that started the paused run, kept in the session.
    """
    text = "\n".join(t for m in context.messages if m.role == "user" and (t := _message_text(m)))
    session = context.session
    if session is None:
        return text
    state = session.state.get(STATE_KEY)
    if not isinstance(state, dict):
        state = session.state[STATE_KEY] = {}
    if text:
        state["request"] = text
        return text
    stored = state.get("request")
    return stored if isinstance(stored, str) else ""


def _approval_id(context: FunctionInvocationContext) -> str:
    occurrence = context.metadata.get("function_call_occurrence_id")
    if isinstance(occurrence, str) and occurrence:
        return occurrence
    call_id = context.metadata.get("call_id")
    return call_id if isinstance(call_id, str) else ""


def _is_approved_replay(context: FunctionInvocationContext) -> bool:
    response = context.metadata.get("approval_response")
    return (isinstance(response, Content) and response.type == "function_approval_response"
            and response.approved is True)


def _pop_approval(state: dict[str, Any] | None, approval_id: str) -> str | None:
    if state is None:
        return None
    approvals = state.get("approvals")
    if not isinstance(approvals, dict):
        return None
    record = approvals.pop(approval_id, None)
    return record if isinstance(record, str) else None


def _fingerprint(tool: str, arguments: Mapping[str, Any], decision: Decision) -> str:
    """What an approval covers: the tool, the exact (repaired) arguments, and the reasons the
    human was shown (the rules asking for it, under that policy revision). A replay asked
    for by another rule, or under changed policies, needs a new approval.
    """
    reasons = sorted(f"{r.policy}/{r.rule}" for r in decision.rules
                     if r.action is Action.REQUIRE_APPROVAL and not r.audit)
    payload = json.dumps({"tool": tool, "args": dict(arguments), "reasons": reasons,
                          "revision": decision.revision}, sort_keys=True, default=str,
                         ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


def _approval_request(context: FunctionInvocationContext, plan: _Plan, message: str) -> Content:
    call_id = context.metadata.get("call_id")
    occurrence = context.metadata.get("function_call_occurrence_id")
    call = Content.from_function_call(
        call_id=call_id if isinstance(call_id, str) else plan.approval_id,
        name=context.function.name,
        arguments=dict(plan.arguments),
        id=occurrence if isinstance(occurrence, str) else None,
    )
    return Content.from_function_approval_request(
        id=plan.approval_id,
        function_call=call,
        additional_properties={"reason": message, "guardrails_decision_id": plan.decision.id},
    )


def _scrub_json(value: Any, scrub: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, Mapping):
        return {k: _scrub_json(v, scrub) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub_json(v, scrub) for v in value]
    return value


def _scrub_result(result: Any, scrub: Callable[[str], str]) -> Any:
    """Tool results reach the model: scrub the text the framework will send."""
    if result is None:
        return None
    if isinstance(result, str):
        return scrub(result)
    if isinstance(result, Content) and result.type == "function_approval_request":
        return _scrub_approval_request(result, scrub)
    items: Sequence[Any]
    if isinstance(result, list) and all(isinstance(i, Content) for i in result):
        items = result
    else:
        try:
            items = FunctionTool.parse_result(result)
        except Exception:
            return scrub(str(result))
    scrubbed: list[Content] = []
    for item in items:
        if item.type == "text" and item.text is not None:
            scrubbed.append(Content.from_text(scrub(item.text),
                                              additional_properties=dict(item.additional_properties)))
        else:
            scrubbed.append(_scrub_content(item, scrub))
    return scrubbed


def _scrub_approval_request(item: Content, scrub: Callable[[str], str]) -> Content:
    """An approval request coming back from inside the guard (a nested guard's, or one a
    tool made up) is shown to the user and kept in the transcript: scrub what it quotes."""
    call = item.function_call
    if call is not None and isinstance(call.arguments, Mapping):
        scrubbed = _scrub_json(dict(call.arguments), scrub)
        if scrubbed != call.arguments:
            call.arguments = scrubbed
    elif call is not None and isinstance(call.arguments, str):
        call.arguments = scrub(call.arguments)
    properties = _scrub_json(dict(item.additional_properties or {}), scrub)
    if properties != item.additional_properties:
        item.additional_properties = properties
    return item


def _scrub_content(item: Content, scrub: Callable[[str], str]) -> Content:
    """Non-text items: keep binary payloads, scrub any text they carry."""
    if item.type == "function_approval_request":
        return _scrub_approval_request(item, scrub)
    for name in ("text", "message", "error_details"):
        value = getattr(item, name, None)
        if isinstance(value, str):
            with contextlib.suppress(Exception):
                setattr(item, name, scrub(value))
    return item


class GuardedToolError(RuntimeError):
    """A tool (or middleware inside the guard) raised; this carries its scrubbed text."""


def _exception_texts(exc: BaseException) -> Iterator[str]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield str(current)
        yield from (str(n) for n in getattr(current, "__notes__", ()))
        current = current.__cause__ or current.__context__


def _scrubbed_failure(exc: MiddlewareException, scrub: Callable[[str], str]) -> BaseException:
    """``exc`` itself when nothing in it or its chain is secret, else a scrubbed copy.

    Our own halt carries names only and must keep its identity for the run boundary.
    """
    if type(exc) is _GuardHalt or all(scrub(t) == t for t in _exception_texts(exc)):
        return exc
    copy: MiddlewareException
    if isinstance(exc, MiddlewareTermination):
        copy = MiddlewareTermination(scrub(str(exc)), result=exc.result)
    else:
        copy = MiddlewareFailure(scrub(str(exc)))
    return copy


def _scrubbed_exception(exc: Exception, scrub: Callable[[str], str]) -> Exception:
    if _private.is_argument_validation_error(exc):
        return _private.scrubbed_validation_error(exc, scrub)
    return GuardedToolError(scrub(f"{type(exc).__name__}: {exc}"))
