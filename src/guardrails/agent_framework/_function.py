"""The function middleware: every tool call is evaluated, bound, and acted on.

Per tool call, in this order: repairs the arguments (the raw JSON-parsed ones when the
framework's own validation of them failed), validates the repaired arguments with the
tool's own validation and evaluates the policies on the JSON form of what it produced, so
the rules judge exactly the values the tool receives; binds the framework's argument
snapshot (a later middleware that changes the arguments makes the framework fail closed)
and its prepared-arguments record (the tool runs with those values, not validated again);
injects secrets; then allows, denies, halts or asks for approval. Any error of the
guard's own blocks the call, and once a run is halted nothing else in it runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import fnmatch
import inspect
import json
import logging
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, TypeAlias

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
    APPROVAL_TTL,
    ApprovalStore,
    answered_call,
    approval_id_for,
    approval_matches,
    approval_record,
    approval_request,
    caller_of,
    hold_approval,
    is_approved_response,
    new_token,
    release_approval,
    response_token,
    spend,
    take_held,
)
from guardrails.agent_framework._arguments import (
    apply_repairs,
    as_mapping,
    bounded_view,
    json_view,
    same_json,
)
from guardrails.agent_framework._boundary import _GuardHalt, mint
from guardrails.agent_framework._history import (
    HISTORY_LIMIT,
    HistoryTurn,
    Unbuilt,
    history_mark,
    history_of,
    plain_entry,
    record,
    record_unbuilt,
    redacted,
    set_result,
)
from guardrails.agent_framework._mcp import tool_aliases
from guardrails.agent_framework._secrets import (
    CURRENT_SCRUBBER,
    EnvironmentSecrets,
    Scrubber,
    SecretProvider,
    SecretUnavailable,
    enter_scrubbing,
    leave_scrubbing,
    plain_result,
    scrub_host_payload,
    scrub_result,
    scrubbed_abort,
    scrubbed_exception,
    scrubbed_failure,
    scrubbed_user_input_request,
    sensitive_telemetry_enabled,
    unchanged,
)
from guardrails.agent_framework._state import RUN, RunState, session_state, stored_request
from guardrails.agent_framework._stores import (
    STORE_TIMEOUT,
    check_timeout,
    in_background,
    round_trip,
)
from guardrails.agent_framework._unreadable import UnreadableArguments
from guardrails.agent_framework._unreadable import install as install_unreadable_check
from guardrails.agent_framework._unreadable import marker as unreadable_marker
from guardrails.agent_framework._unreadable import message as unreadable_message
from guardrails.agent_framework._unreadable import replaced as replaced_arguments
from guardrails.engine import Decision, Effect, PolicyProvider, PolicySet
from guardrails.engine.counters import (
    CounterRequest,
    CounterResult,
    CounterStore,
    MemoryStore,
    Reservation,
    StoreUnavailable,
)
from guardrails.engine.policy import SecretRef
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

_TOOLS_REMEMBERED = 1024
"""Tools whose trust label a guard keeps (cleared when full, like the engine's tool index)."""
_MEMORY_LAYER = 128
"""Injected values per layer of the memory's scrubber: a new value recompiles only its
layer's search (at most this many values' spellings), never the whole memory's."""

UNMATCHED = ("allow", "warn", "deny")
"""What ``guard(unmatched=...)`` does with a call to a tool no policy names: let it run,
let it run and log a warning, or deny it (the policies become an allowlist of tools)."""

_SETTLE_ROUNDS = 2
"""Evaluations of one call after the first, at most: again each time the tool's validation
changes what the rules read. Three evaluations in all; a repair that validation keeps
undoing is refused (a guard error that blocks the call)."""

_BLOCKING = (Effect.DENY, Effect.HALT)
"""Effects under which the call never runs: no need to know what validation makes of it."""

_HISTORY_ROUNDS = 16
"""Counts of one call, at most, each after siblings changed the history it was decided on
while the store counted it (each round waits for one counted sibling, and the calls that
do not count record at once: a batch's changes are over in a round or two). Past it the
call is a guard error (blocked)."""

_PLACEHOLDER = "guardrails-injected-secret"
"""What an argument the guard injects holds while the call is validated before the check."""

_INJECTIONS_REMEMBERED = 1024
"""Sets of matched policies whose injections a guard keeps (cleared when full, like the
engine's tool index)."""


_NO_INJECTIONS: tuple[Mapping[str, SecretRef], frozenset[str]] = ({}, frozenset())

_CALLERS: contextvars.ContextVar[tuple[GuardFunctionMiddleware, ...]] = contextvars.ContextVar(
    "guardrails_calling_guards", default=())
"""The guards whose tool is running in this context, outermost first: a sub-agent
(``agent.as_tool()``) with a guard of its own runs inside its caller's tool. What the
sub-agent's guard injects is remembered by each of them too (before the tool gets it):
the sub-agent's tool may leave it where a later tool of the caller's returns it."""

_SESSION_GUARDS: weakref.WeakKeyDictionary[AgentSession, weakref.WeakSet[GuardFunctionMiddleware]] = (
    weakref.WeakKeyDictionary())
"""Per session (the object, in this process), the guards that injected a value into one of
its calls: two agents with guards of their own may share a session, and a tool of one may
leave a key where a tool of the other returns it. Every guard scrubs the output of a
session's calls with these guards' memories too (a session restored from its saved state
is another object: it starts with none)."""
_SESSION_LOCK = threading.Lock()


def _injected_in(session: AgentSession, guard: GuardFunctionMiddleware) -> None:
    with _SESSION_LOCK:
        guards = _SESSION_GUARDS.get(session)
        if guards is None:
            guards = _SESSION_GUARDS[session] = weakref.WeakSet()
        guards.add(guard)


def _others_in(session: AgentSession | None,
               guard: GuardFunctionMiddleware) -> tuple[GuardFunctionMiddleware, ...]:
    """The other guards that injected a value into ``session``'s calls (usually none)."""
    if session is None or not _SESSION_GUARDS:
        return ()
    with _SESSION_LOCK:
        guards = _SESSION_GUARDS.get(session)
        return () if guards is None else tuple(g for g in guards if g is not guard)


class _Plan(NamedTuple):
    """What ``_plan`` decided for one call (immutable; a tuple: built on every call, where
    a frozen dataclass's guarded writes cost more than the rest of the record)."""

    policies: PolicySet
    """The set this call was decided on: it finishes on it, whatever a reload does."""
    decision: Decision
    effect: Effect
    """The effect to act on: the decision's, except an approved replay of require_approval."""
    entry_arguments: dict[str, Any]
    arguments: dict[str, Any]
    """The arguments as the rules read them: the JSON form of the validated, repaired
    arguments (no injected secrets). Approvals show and cover these."""
    secret_names: frozenset[str]
    approval_id: str
    approved_replay: bool
    run: RunState | None
    validated: dict[str, Any] | None = None
    """What the tool's validation made of ``arguments``: the values the tool receives
    (None when the tool has no validation the guard can run: ``arguments`` run as they are)."""
    invalid: Exception | None = None
    """The tool's validation error: the call cannot run, whatever the rules say."""
    deferred: bool = False
    """Only the injected placeholder failed validation: validate with the real secret, and
    run only if that changes nothing the rules read."""
    over_bounds: bool = False
    """The inputs are over the engine's bounds (or not JSON): the call never runs and no
    later pass (validation, the snapshot, history) reads them."""
    aliases: tuple[str, ...] = ()
    """The other names the tool answers to (``tool_aliases``), looked up once per call."""
    quiet: bool = False
    """Nothing this call knows is secret: no secret argument, no value the guard injected,
    no redact pattern in the set. Every scrub of it leaves a text as it is (as a plain
    ``str``), so the guard skips scrubbing where the result would be the same."""
    injects: bool = False
    """``_ToolFacts.injects`` of the call's tool on its set."""
    principal: Mapping[str, Any] | None = None
    """The principal the call was decided for: an approval covers it, and the agent
    (``_approvals.caller_of``)."""


class _ToolFacts(NamedTuple):
    """What one policy set says of one tool (by its name and aliases), whatever the call:
    worked out on the tool's first call on the set and kept with it (``_facts_of``)."""

    named: bool
    """Some policy names the tool (``unmatched`` applies to the others)."""
    counts: bool
    """Some policy naming it has counters: a call that runs is evaluated with the store."""
    injects: bool
    """Some policy naming it injects a secret: only then are the decision's injections
    looked up (validation's placeholder, the secret fetched for a call that runs)."""


_NO_NAMES: frozenset[str] = frozenset()


class _Settled(NamedTuple):
    """What ``_settle`` worked out (see there)."""

    decision: Decision
    arguments: dict[str, Any]
    validated: dict[str, Any] | None = None
    invalid: Exception | None = None
    deferred: bool = False


def _approval_key(context: FunctionInvocationContext, approval_id: str) -> str:
    """A held approval's key in a shared store: the session's id and the call's approval id
    (call ids are only unique within a conversation)."""
    session = context.session
    session_id = getattr(session, "session_id", None) if session is not None else None
    return f"{session_id or '-'}:{approval_id}"


def _refuse_unmetered(policies: PolicySet) -> None:
    """Promise 8 (every call's cost is bounded) holds for the compiled and closure
    backends only: the cel-python reference backend keeps no budget (measured: one call of
    seconds), so a guard never decides a call on a set loaded with it."""
    if not policies.metered:
        raise ValueError("these policies were loaded with backend='interpreter', which keeps "
                         "no cost budget (a call could run for seconds): guard() needs the "
                         "'compiled' (default) or 'closures' backend")


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
        unmatched: str = "allow",
        counters: CounterStore | None = None,
        approvals: ApprovalStore | None = None,
        approval_key: bytes | None = None,
        trusted_tools: TrustLabels = None,
        store_timeout: float = STORE_TIMEOUT,
    ) -> None:
        if unmatched not in UNMATCHED:
            raise ValueError(f"unmatched must be one of {', '.join(UNMATCHED)}, not {unmatched!r}")
        if approvals is not None and not approval_key:
            raise ValueError("a shared approval store needs an approval_key: its records "
                             "are only trusted with a valid HMAC")
        if approval_key is not None and not isinstance(approval_key, bytes):
            raise TypeError("approval_key must be bytes")
        # The framework's own argument checks of guarded calls, with equal tokens built
        # faster (see _private.install_fast_tokens); and each batch of calls checked for
        # arguments the framework's parser cannot read (see _unreadable.check_batch).
        _private.install_fast_tokens()
        if not install_unreadable_check(GuardFunctionMiddleware):
            # Something else replaced the framework's batch execution: a call whose
            # arguments its parser cannot read then ends the run as without a guard (no
            # tool runs), which the host must hear of rather than find out.
            _log.warning("guardrails: the framework's batch execution was replaced by other "
                         "code, so arguments its parser cannot read end the run (no tool "
                         "runs) instead of being denied one call at a time")
        self._unmatched = unmatched
        self._store_timeout = check_timeout(store_timeout)
        self._approvals = approvals
        self._approval_key = approval_key or None
        self._counters: CounterStore = counters if counters is not None else MemoryStore()
        self._policies = policies
        self._trust_labels = _trust_labels(trusted_tools)
        self._trusted: dict[tuple[str, ...], bool] = {}
        self._principal = principal
        # A mapping (or none) is the principal of every call: no coroutine to resolve it.
        self._fixed_principal: Mapping[str, Any] | None = (
            {} if principal is None else principal if isinstance(principal, Mapping) else None)
        self._secrets: SecretProvider = secrets if secrets is not None else EnvironmentSecrets()
        self._telemetry = telemetry if telemetry is not None else GuardTelemetry()
        self._history_limit = history_limit
        # Every value this guard injected (bounded, never forgotten): a tool may stash a
        # secret where another tool, with no secret policy of its own, returns it later.
        self._injected: dict[str, None] = {}
        self._injected_chars = 0
        self._memory_lock = threading.Lock()
        """Held while the memory of injected values changes (threads may share a guard)."""
        # The scrubber of those values, rebuilt only when one is added: every call starts
        # from it instead of re-collecting and re-sorting them.
        first = policies.current
        _refuse_unmetered(first)
        self._memory = Scrubber((), _patterns(first))
        self._quiet_memory: Scrubber | None = self._memory if _patterns(first) is None else None
        """The memory scrubber when it knows no value and the set no redact pattern: it
        changes no text, so a call with no secret of its own scrubs nothing (``_Plan.quiet``)."""
        # Per revision and set of matched policies, what they inject.
        self._injects: dict[tuple[str, tuple[str, ...]],
                            tuple[Mapping[str, SecretRef], frozenset[str]]] = {}
        self._names: tuple[Scrubber, dict[str, str]] = (self._memory, {})
        self._facts: tuple[PolicySet, dict[Any, _ToolFacts]] = (first, {})
        """The set whose tools ``_facts_of`` knows, with what it knows (replaced whole)."""
        self._set_memory: tuple[PolicySet, Scrubber] = (first, self._memory)
        """The set whose redact patterns ``_memory`` holds, with that memory: one pair, read
        at once, so a thread swapping in another set's memory between reading the set and
        reading the memory cannot hand a call the other set's patterns (``_memory_for``)."""

    async def process(
        self,
        context: FunctionInvocationContext,
        call_next: Callable[[], Awaitable[None]],
    ) -> None:
        tool = context.function.name
        run = RUN.get()
        # (A run nested in none and not halted, the usual one, is stopped by nothing.)
        stopped = (run.stopped_by() if run is not None and (run.halted or run.parent is not None)
                   else None)
        if stopped is not None:
            # The run (or one it is nested in) was halted, by a sibling call or a sub-agent:
            # nothing else runs.
            raise _GuardHalt(stopped)
        raw_call_id = context.metadata.get("call_id")
        call_id = raw_call_id if isinstance(raw_call_id, str) else None
        with self._telemetry.call_span(tool=tool, call_id=call_id) as span:
            unreadable = unreadable_message(context.arguments)
            if unreadable is None and run is not None and run.unreadable:
                # Replaced before the batch ran, and the marker dropped by the framework's
                # validation (a tool whose every parameter has a default): denied all the same.
                reason = replaced_arguments(run, call_id)
                if reason is not None:
                    unreadable = unreadable_message(unreadable_marker(reason))
            if unreadable is not None:
                # The guard replaced text the framework's parser cannot read: an
                # input error, decided before anything reads the arguments.
                span.fail(UnreadableArguments())
                self._deny_unreadable(context, tool, unreadable)
                return
            if (is_approved_response(context)
                    and getattr(context.function, "approval_mode", None) == "always_require"
                    and not _answered_by_the_user(context, run)):
                # The framework's own approval carries no token of ours, and the model knows
                # its id (it chose the call's): the model's own answer, kept in the
                # session's history, ran the tool on the user's next message (red team 27).
                span.fail(UnansweredApproval())
                self._record_blocked(context, tool)
                context.result = (f"Error: the call to {tool} was denied by policy. Its "
                                  "approval did not come from the user.")
                return
            started = time.perf_counter()
            turn = HistoryTurn()
            try:
                try:
                    plan = await self._plan(context, run, turn)
                    if call_id is not None:
                        # (A quiet call knows no secret: its decision leaves every text as
                        # it is.)
                        if not plan.quiet and plan.decision.scrub(call_id) != call_id:
                            # The model chose a call id holding a secret: the framework's own
                            # execute_tool span and logs would carry it, so the call does
                            # not run.
                            self._release(plan.decision)
                            raise ValueError("the call id the model chose carries a secret "
                                             "value")
                        span.mark_call_id_clean(plan.decision)
                except Exception as exc:  # fail closed: a guard error never lets a call through
                    span.fail(exc)
                    self._block_on_guard_error(context, tool, exc)
                    return
                if plan.approved_replay:
                    span.mark_approved()
                span.record(plan.decision, time.perf_counter() - started)
                await self._act(context, call_next, plan, span, turn)
            finally:
                turn.done()  # (usually held by nobody: nothing to do)

    # -- evaluation ---------------------------------------------------------------------

    async def _plan(self, context: FunctionInvocationContext, run: RunState | None,
                    turn: HistoryTurn) -> _Plan:
        """What to do with the call, decided on one policy set. ``run``: the run's state,
        as ``process`` read it (a call's context does not change while it is decided);
        ``turn``: the history's turn, held by a call its counter store counts in a thread
        from then until it is recorded."""
        policies = self._policies.current  # once: the whole call uses this set
        memory = self._memory_for(policies)  # its redact patterns, whatever a thread swaps in
        tool = context.function.name
        entry = as_mapping(context.arguments)
        # NaN and infinities are refused by ``json_view`` on arguments within the bounds;
        # arguments over them are an input error, never walked to find one.
        principal = self._fixed_principal
        if principal is None:
            principal = await self._resolve_principal(context)
        # (Made now if missing: the call reads the history it is recorded in.)
        state = session_state(context.session, create=True)
        request = run.request if run is not None else stored_request(state)
        # From reading the history to recording the call, no call of another thread reads
        # or records it (``HistoryTurn.enter``; a call decided again below leaves and
        # enters again for its last look).
        await turn.enter(state)
        # The engine copies what it reads; an empty history is no history (None: the engine
        # skips reading it, with the same result).
        history = history_of(state, run) or None
        aliases = tool_aliases(context.function)
        facts = self._facts_of(policies, tool, aliases)
        unmatched = Effect.DENY if self._unmatched == "deny" else Effect.ALLOW

        agent = run.agent if run is not None else None
        judged: list[Any] = []  # what the latest evaluation read

        def evaluate(arguments: Any, counters: CounterStore | None) -> Decision:
            return policies.evaluate(
                tool, arguments, principal=principal, history=history, request=request,
                description=context.function.description or "",
                known_secrets=memory, aliases=aliases, unmatched=unmatched,
                agent=agent, counters=counters)

        def decide(arguments: Any) -> Decision:
            # Settling may evaluate up to three times: none of them counts (no store).
            judged[:] = [arguments]
            return evaluate(arguments, None)

        raw = entry

        def settle() -> _Settled:
            if raw is None:  # not a mapping: fails closed
                return _Settled(decide(context.arguments), {})
            if policies.input_error(raw) is not None:
                # Values the framework's validation made that JSON has no type for (a
                # datetime, a Decimal) are judged by their JSON form, when that is within
                # the bounds (found without converting what is over them). The model's own
                # JSON (its validation failed) is judged as it is: no second walk.
                view = (bounded_view(raw, policies.limits)
                        if _private.validated_by_framework(context) else None)
                if view is None or policies.input_error(view) is not None:
                    # Over the bounds: one evaluation (an input error, found by a walk that
                    # stops at the bound) and nothing else reads them: no JSON view, no
                    # validation.
                    found = decide(raw)
                    return _Settled(found, dict(found.arguments))
            return self._settle(context, raw, decide, policies, facts.injects)

        settled = settle()
        if entry is None:
            entry = {}
        counts = facts.counts
        replaying = is_approved_response(context)
        approval_id = approval_id_for(context)
        held: Any = None
        taken = False  # the held approval, used up (matching or not) once taken
        owner = context.session if context.session is not None else run
        if owner is not None and ((counts and self._counters.blocking
                                   and settled.decision.effect not in _BLOCKING) or (
                replaying and self._approvals is not None
                and getattr(self._approvals, "blocking", True))):
            # A store's round trip (in its thread) lets sibling calls decide and record
            # meanwhile: the call holds its history's turn (such siblings take turns), and
            # is decided (and counted) again until no sibling was recorded between its
            # reading of the history and its last store call (red team 19: five parallel
            # payments of 400, or five approved replays, passed a structuring limit of 1,000).
            read = history_mark(context.session, run)
            turn.leave()  # (nothing is awaited in a section)
            for _ in range(_HISTORY_ROUNDS):
                await turn.take(owner)  # (held from the second round on)
                seen = history_mark(context.session, run)
                if seen != read:  # a sibling was recorded: decide on what it left
                    history = history_of(session_state(context.session), run) or None
                    seen = read = history_mark(context.session, run)  # (entries built now)
                    settled = settle()
                if replaying and not taken:
                    held, taken = await self._take_held(context, state, approval_id), True
                counted: Decision | None = None
                if counts and settled.decision.effect not in _BLOCKING:
                    # Read in the store's thread while sibling calls record on the loop: a
                    # copy of its own (a run's entries not built yet never reach the
                    # engine, which reads only ``history_of``'s plain entries).
                    live = history
                    history = list(live) if live is not None else None
                    counted = await self._counted(
                        settled.decision, lambda counters: evaluate(judged[0], counters))
                    history = live
                await turn.enter(state)  # (the last look, and on to the record)
                if history_mark(context.session, run) == seen:
                    if counted is not None:
                        settled = settled._replace(decision=counted)
                    break
                turn.leave()
                if counted is not None:
                    self._release(counted)
            else:
                raise ValueError("the history kept changing while the call was decided")
        elif counts and settled.decision.effect not in _BLOCKING:
            # The one evaluation that reserves, on the settled arguments. (A call the rules
            # block anyway is not counted: no need to ask the store.)
            settled = settled._replace(decision=await self._counted(
                settled.decision, lambda counters: evaluate(judged[0], counters)))
        decision, arguments = settled.decision, settled.arguments
        validated, invalid, deferred = settled.validated, settled.invalid, settled.deferred
        # From here on the call may hold a reservation: anything that fails blocks the
        # call (``process``), and a blocked call is not counted.
        try:
            if self._unmatched == "warn" and not facts.named:
                _log.warning("guardrails: no policy names the tool %s; the call runs unguarded",
                             tool)
            secret_names = decision.secret_arguments  # declared and injected names
            replay = False
            if replaying:
                # One approval, one call: the held record is used up, matching or not.
                if not taken:
                    held = await self._take_held(context, state, approval_id)
                token = response_token(context)
                agent_name = _agent_name(run)
                # Given by the human in this run's own user messages (``RunState.answers``):
                # never an answer the model returned, which the framework replays too. Used
                # once in this process too: a session state saved before the approval and
                # restored after it holds the record again.
                replay = (run is not None and isinstance(token, str) and token in run.answers
                          and approval_matches(held, self._mac_id(context, approval_id), token,
                                               tool, arguments, decision, self._approval_key,
                                               caller_of(principal, agent_name))
                          and spend(token))
            effect = decision.effect
            if effect is Effect.REQUIRE_APPROVAL and replay:
                effect = Effect.ALLOW  # approval satisfies require_approval, nothing else
            over_bounds = bool(decision.errors) and any(e.element == "input"
                                                        for e in decision.errors)
            if over_bounds and effect not in _BLOCKING:
                # Inputs over the bounds (or not JSON) never run, whatever the policies'
                # failurePolicy: the guard cannot bind, record or scrub what it cannot afford
                # to read (``Ignore`` only skips the policy's own rules).
                effect = Effect.DENY
            # ``entry`` is already this call's own copy (``as_mapping``); the engine only
            # reads it.
            quiet = memory is self._quiet_memory and not secret_names
            return _Plan(policies, decision, effect, entry, arguments, secret_names,
                         approval_id, replay, run, validated, invalid, deferred, over_bounds,
                         aliases, quiet, facts.injects, principal)
        except BaseException:
            self._release(decision)
            raise

    async def _counted(self, settled: Decision,
                       evaluate: Callable[[CounterStore], Decision]) -> Decision:
        """The settled call evaluated once more, with the counter store (off the event loop
        when the store does I/O). Counters never change arguments: if these differ, the
        call is refused rather than run on arguments the reservation did not judge."""
        if self._counters.blocking:
            # Bounded (``_stores``): a store that does not answer in time is unavailable,
            # its counters decided by their ``failurePolicy`` as for a store that is down
            # (one more evaluation, with no I/O). A call cancelled while the store reserves
            # for it (a sibling's halt cancels a parallel batch) never runs. Either way the
            # store's thread runs on, and what it reserved goes back once it is done.
            try:
                decision = await round_trip(evaluate, self._counters,
                                            timeout=self._store_timeout, late=self._release)
            except StoreUnavailable as exc:
                decision = evaluate(_Unanswered(str(exc)))
        else:
            decision = evaluate(self._counters)
        if not same_json(dict(decision.arguments), dict(settled.arguments)):
            self._release(decision)
            raise ValueError("the counted evaluation repaired the arguments differently")
        return decision

    def _settle(self, context: FunctionInvocationContext, entry: dict[str, Any],
                decide: Callable[[Any], Decision], policies: PolicySet,
                injects: bool) -> _Settled:
        """Evaluate the values the tool will receive: the rules of the returned decision
        read exactly (the JSON form of) what the tool's own validation made of the
        repaired arguments.

        Returns the decision, the arguments as rules read them, the validated values the
        tool will receive (None for a tool without validation: the repaired values run),
        and the validation error when they do not validate (the call must not run).
        Arguments the guard will inject are validated with a placeholder (the secret is
        fetched only for a call that runs) and left out: the model's value never runs.

        One evaluation when nothing changes: the framework hands over arguments it already
        validated, or the repairs' output validates unchanged. Otherwise the values are
        evaluated again, until repairs and validation agree.

        When only the placeholder fails the tool's constraints (a minimum length, a pattern),
        validation waits for the real secret: the call runs only if validating it then
        changes none of the values the rules read (``deferred``).

        ``injects``: whether the tool's policies inject anything (``_ToolFacts``); without,
        no decision's injections are looked up.
        """
        validated = _private.prepared_arguments(context, entry)
        seen: dict[str, Any] | None = None
        if validated is not None:
            seen = json_view(validated)
            decision = decide(seen)
            if injects:
                injected = self._injected_names(policies, decision)
                if injected & validated.keys():
                    validated = _without(validated, injected)
                    seen = json_view(validated)
            if decision.effect in _BLOCKING:
                # Judged on validated values, the call does not run: nothing more to
                # settle. (A decision on raw values is not final: validation may change
                # what rules read.)
                return _Settled(decision, seen, validated)
            if same_json(seen, decision.arguments):
                # Nothing repaired: the values validated as they are (the loop's first
                # test below, which would return the same).
                return _Settled(decision, seen, validated)
        else:
            decision = decide(json_view(entry))
        # The values that run: the repaired ones, or raw ones the framework could not validate.
        candidate = apply_repairs(validated if validated is not None else entry, decision)
        try:
            validated = self._validate(context, candidate, decision, policies, injects)
        except Exception as exc:
            return self._not_validated(exc, decision, candidate, policies, injects)
        if validated is None:  # no validation the guard can run: the repaired values run
            return _Settled(decision, candidate)
        seen = json_view(validated)
        for _ in range(_SETTLE_ROUNDS):
            if same_json(seen, decision.arguments):
                return _Settled(decision, seen, validated)
            # Validation changed a value (``"true"`` became ``True``, a default was filled
            # in, an extra field was dropped): the rules must judge the values that run.
            decision = decide(seen)
            if decision.effect in _BLOCKING or same_json(decision.arguments, seen):
                return _Settled(decision, seen, validated)
            candidate = apply_repairs(validated, decision)
            try:
                revalidated = self._validate(context, candidate, decision, policies, injects)
            except Exception as exc:
                return self._not_validated(exc, decision, candidate, policies, injects)
            validated = revalidated if revalidated is not None else candidate
            seen = json_view(validated)
        raise ValueError("the arguments do not settle: repairs and the tool's validation "
                         "keep changing them")

    def _not_validated(self, exc: Exception, decision: Decision,
                       candidate: dict[str, Any], policies: PolicySet,
                       injects: bool) -> _Settled:
        if not _private.is_argument_validation_error(exc):
            raise exc
        injected = self._injected_names(policies, decision) if injects else _NO_NAMES
        fields = _private.invalid_fields(exc)
        if injected and fields is not None and fields <= injected:
            return _Settled(decision, json_view(candidate), deferred=True)
        return _Settled(decision, json_view(candidate), invalid=exc)

    def _validate(self, context: FunctionInvocationContext, candidate: dict[str, Any],
                  decision: Decision, policies: PolicySet,
                  injects: bool) -> dict[str, Any] | None:
        injected = self._injected_names(policies, decision) if injects else _NO_NAMES
        validated = _private.prepare_arguments(
            context, {**candidate, **dict.fromkeys(injected, _PLACEHOLDER)} if injected
            else candidate)
        if validated is None or not injected:
            return validated
        return _without(validated, injected)

    def _injected_names(self, policies: PolicySet, decision: Decision) -> frozenset[str]:
        return self._injects_of(policies, decision)[1]

    def _matched_injections(self, policies: PolicySet,
                            decision: Decision) -> Mapping[str, SecretRef]:
        return self._injects_of(policies, decision)[0]

    def _injects_of(self, policies: PolicySet,
                    decision: Decision) -> tuple[Mapping[str, SecretRef], frozenset[str]]:
        """What the policies that matched inject, and the names (by matched set: an MCP
        tool's policy may name it by its ``mcp:`` name, which the tool's own name does not
        show; and by revision: a reload may change what a policy of the same name injects)."""
        if not decision.policies:
            return _NO_INJECTIONS
        key = (decision.revision, decision.policies)
        found = self._injects.get(key)
        if found is None:
            injections = policies.injections(decision)
            found = (injections, frozenset(injections))
            if len(self._injects) >= _INJECTIONS_REMEMBERED:
                self._injects.clear()
            self._injects[key] = found
        return found

    def _facts_of(self, policies: PolicySet, tool: str,
                  aliases: tuple[str, ...]) -> _ToolFacts:
        """What ``policies`` say of ``tool`` (``_ToolFacts``), kept with the set: a reload
        starts over, and each call reads the facts of the set it is decided on. Bounded
        like the other caches."""
        held, table = self._facts  # one read: the pair is replaced whole
        if held is not policies:
            table = {}
            self._facts = (policies, table)
        key = (tool, *aliases) if aliases else tool
        found = table.get(key)
        if found is None:
            named = policies.for_tool(tool, aliases)
            found = _ToolFacts(bool(named), policies.counts(tool, aliases),
                               any(p.inject for p in named))
            if len(table) >= _TOOLS_REMEMBERED:
                table.clear()
            table[key] = found
        return found

    def _mac_id(self, context: FunctionInvocationContext, approval_id: str) -> str:
        """What an approval record's MAC binds it to. In a shared store that is the record's
        key (session and approval id): a record moved to another session's key (by someone
        who can write to the store but lacks the key) then approves nothing there. In the
        session's own state it is the approval id (the record cannot leave the session)."""
        if self._approvals is not None:
            return _approval_key(context, approval_id)
        return approval_id

    async def _take_held(self, context: FunctionInvocationContext,
                         state: dict[str, Any] | None, approval_id: str) -> Any:
        """The record held for the approved call (used up): from the shared store, else
        from the session's state."""
        if self._approvals is not None:
            return await self._store(self._approvals.take, _approval_key(context, approval_id))
        return take_held(state, approval_id)

    async def _store(self, call: Callable[..., Any], *args: Any) -> Any:
        """A shared-store call, off the event loop (and bounded in time) when the store
        does I/O."""
        if getattr(self._approvals, "blocking", True):
            return await round_trip(call, *args, timeout=self._store_timeout)
        return call(*args)

    def _memory_for(self, policies: PolicySet) -> Scrubber:
        """The memory of injected values with ``policies``' redact patterns. When a reload
        swapped the set, the memory takes its patterns (the values themselves are never
        forgotten), and the one built is returned: re-reading ``_memory`` afterwards could
        find another thread's set's memory, without this set's patterns. A set without a
        cost bound is refused: the call is blocked (as every call on that set), never
        decided on it."""
        held, memory = self._set_memory
        if held is policies:
            return memory
        _refuse_unmetered(policies)
        redact = _patterns(policies)
        with self._memory_lock:  # (the values as they are, and no injection meanwhile)
            memory = Scrubber(tuple(self._injected), redact)
            self._memory = memory
            self._quiet_memory = memory if redact is None and not self._injected else None
            self._set_memory = (policies, memory)
        return memory

    def _release(self, decision: Decision) -> None:
        """The call does not run: give its counter reservations back. A store that does
        I/O is not waited for (``_stores.in_background``): its round trip cannot hold up
        the event loop, and no call's outcome depends on it."""
        if decision.reservations:
            if self._counters.blocking:
                in_background(self._counters.release, decision.reservations)
                return
            try:
                self._counters.release(decision.reservations)
            except Exception as exc:  # the count stays high: errs towards refusing
                _log.warning("guardrails: giving back counter reservations failed (%s)",
                             type(exc).__name__)

    async def _resolve_principal(self, context: FunctionInvocationContext) -> Mapping[str, Any]:
        source = self._principal
        if source is None:
            return {}
        if isinstance(source, Mapping):
            return source
        value = source(context)
        if inspect.isawaitable(value):
            # Bounded as a store's round trip (``store_timeout``): a directory that never
            # answers held the call, and the run, forever (red team 27d). Not answering
            # in time blocks the call (``TimeoutError``). (``timeout``, not ``wait_for``:
            # in the call's own task, about half the cost.)
            async with asyncio.timeout(self._store_timeout):
                value = await value
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise TypeError(f"principal callable returned {type(value).__name__}, not a mapping")
        return value

    # -- acting on the effect -------------------------------------------------------------

    async def _act(self, context: FunctionInvocationContext, call_next: Callable[[], Awaitable[None]],
                   plan: _Plan, span: Any, turn: HistoryTurn) -> None:
        tool = context.function.name
        decision = plan.decision
        if plan.invalid is not None and plan.effect in (Effect.ALLOW, Effect.REQUIRE_APPROVAL):
            self._release(decision)
            # The tool's validation refused the arguments: the call cannot run, and the model
            # gets the framework's own "Argument parsing failed" result, scrubbed.
            scrub = self._scrubber(plan, ())
            with contextlib.suppress(Exception):
                _private.record_argument_snapshot(context, as_mapping(context.arguments) or {})
            self._record(context, plan, "deny", scrub)
            raise scrubbed_exception(plan.invalid, scrub)
        if plan.effect is Effect.ALLOW:
            injected: dict[str, str] = {}
            try:
                if plan.injects:
                    injected = self._injections(plan.policies, decision)
                if injected and context.session is not None:
                    _injected_in(context.session, self)
                running = self._running(context, plan, injected)
                context.arguments = running
                _private.record_argument_snapshot(
                    context, running, prepared=plan.validated is not None or plan.deferred)
                if plan.approved_replay:
                    # What the approval covered: the framework compares it with the approved
                    # call, which never holds injected values.
                    context.metadata["original_arguments_for_messages"] = dict(
                        plan.validated if plan.validated is not None else plan.arguments)
            except Exception as exc:
                self._release(decision)
                if _private.is_argument_validation_error(exc):
                    # The injected secret itself fails the tool's validation.
                    raise scrubbed_exception(exc, self._scrubber(plan, injected.values())) from None
                span.fail(exc)
                self._block_on_guard_error(context, tool, exc)
                return
            memory = self._memory_for(plan.policies)  # (``scrub``'s: see _call_tool)
            scrub = self._scrubber(plan, injected.values(), memory)
            entry = self._record(context, plan, "allow", scrub)
            turn.done()  # recorded: the tool runs without the history's turn
            await self._run_tool(context, call_next, scrub, plan.run,
                                 lambda: self._scrubber(plan, injected.values()), memory)
            set_result(entry, context.result)  # the scrubbed text the model gets
            return

        # The call does not run: give back any reservation (of a require_approval, or of a
        # decision the guard overrode: only calls that run are counted); bind the snapshot
        # to the arguments as they stand (not when they are over the bounds: the
        # framework's token walks every value).
        self._release(decision)
        if not plan.over_bounds:
            with contextlib.suppress(Exception):
                _private.record_argument_snapshot(context, as_mapping(context.arguments) or {})
        base_scrub = self._scrubber(plan, ())
        message = base_scrub(decision.message)
        if plan.effect is Effect.HALT:
            self._record(context, plan, "halt", base_scrub)
            # Minted where it halts, the one place a decision becomes a halt: only a halt
            # carrying a decision this process minted is ever unwrapped.
            mint(decision)
            if plan.run is not None:
                plan.run.halt(decision)
            _log.warning("guardrails: %s halted the run (decision %s)", tool, decision.id)
            raise _GuardHalt(decision)
        if plan.effect is Effect.REQUIRE_APPROVAL:
            # (Its reservation went back above: counted when the approved replay runs.)
            # Not recorded: the history's turn and section end here (a store is awaited).
            turn.done()
            state = session_state(context.session, create=True)
            if state is None:
                self._record(context, plan, "deny", base_scrub)
                context.result = (
                    f"Error: the call to {tool} requires human approval, but approval is "
                    f"unavailable (no session to hold the request), so it was denied. {message}"
                ).strip()
                return
            if self._approvals is not None:
                token = new_token()
                record = approval_record(self._mac_id(context, plan.approval_id), tool,
                                         plan.arguments, decision, token, self._approval_key,
                                         caller_of(plan.principal, _agent_name(plan.run)))
                try:
                    await self._store(self._approvals.hold,
                                      _approval_key(context, plan.approval_id),
                                      json.dumps(record), APPROVAL_TTL)
                except Exception as exc:
                    span.fail(exc)
                    self._block_on_guard_error(context, tool, exc)
                    return
            else:
                token = hold_approval(state, plan.approval_id, tool, plan.arguments, decision,
                                      key=self._approval_key,
                                      caller=caller_of(plan.principal, _agent_name(plan.run)))
            context.result = approval_request(context, plan.approval_id, decision,
                                              plan.arguments, message, token)
            return
        self._record(context, plan, "deny", base_scrub)
        context.result = f"Error: the call to {tool} was denied by policy. {message}".strip()

    async def _run_tool(self, context: FunctionInvocationContext,
                        call_next: Callable[[], Awaitable[None]], scrub: Scrubber,
                        run: RunState | None, fresh: Callable[[], Scrubber],
                        memory: Scrubber) -> None:
        """Run the tool. A sub-agent the tool ran (``agent.as_tool()``) that was halted
        halted this run too: the call ends with the halt, whatever the tool made of it
        (the framework turns the sub-agent's ``PolicyViolation`` into "Function failed")."""
        try:
            await self._call_tool(context, call_next, scrub, fresh, memory)
        except Exception:
            if run is None or not run.halted:
                raise
        else:
            if run is None or not run.halted:
                return
        raise _GuardHalt(run.halted[0])  # outside the handler: nothing of the tool's chained

    async def _call_tool(self, context: FunctionInvocationContext,
                         call_next: Callable[[], Awaitable[None]], call_scrub: Scrubber,
                         fresh: Callable[[], Scrubber], memory: Scrubber) -> None:
        """Run the tool and scrub what comes out of it: its result, its exception, the host's
        payload and the framework's log records while it runs. With ``call_scrub`` (made
        of ``memory``, the guard's memory of injected values, before the tool ran) while the
        memory stays as it was, and once it changed while this tool ran (a concurrent call,
        a sibling of the batch or another run, injected a value the tool may return from a
        shared stash or a cache; a reload) with ``fresh()`` (the call's scrubber over the
        memory as it is now) as well: never instead, since the call finishes on the set it
        started with, whose redact patterns a reload may have dropped.

        A call made inside another guarded call's tool (a sub-agent, ``agent.as_tool()``,
        guarded by a guard of its own) is scrubbed with that call's scrubber as well: what
        the enclosing guard injected must not reach the sub-agent's model either."""
        enclosing = CURRENT_SCRUBBER.get()
        current: Callable[[str], str] = call_scrub

        def own() -> Callable[[str], str]:
            # Rebuilt only when the memory changed: usually one identity check.
            nonlocal current, memory
            if self._memory is not memory:
                memory = self._memory
                current = _both(fresh(), call_scrub)
            others = _others_in(context.session, self)
            if others:  # another agent's guard injected into this session's calls
                return _both(current, _memories_of(others))
            return current

        def scrub(text: str) -> str:
            text = own()(text)
            return text if enclosing is None else enclosing(text)

        running = enter_scrubbing(scrub)
        token = CURRENT_SCRUBBER.set(scrub)
        callers = _CALLERS.set((*_CALLERS.get(), self))
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
            _CALLERS.reset(callers)
            leave_scrubbing(running)
            CURRENT_SCRUBBER.reset(token)
            # Attached by the framework after the guard returns (an MCP tool's raw result).
            # (A handler, not ``contextlib.suppress``: no object to build on every call.)
            try:  # noqa: SIM105
                scrub_host_payload(context, scrub)
            except Exception:  # (it fails closed inside: the host loses its copy)
                pass
        if failure is not None:
            raise failure
        result_scrub: Callable[[str], str] = own() if enclosing is None else scrub
        # The quiet memory changes no text: the result is still rebuilt of plain types.
        if result_scrub is self._quiet_memory:
            plain = plain_result(context.result)
            context.result = plain if plain is not None else scrub_result(context.result,
                                                                          unchanged)
        else:
            context.result = scrub_result(context.result, result_scrub)

    @staticmethod
    def _running(context: FunctionInvocationContext, plan: _Plan,
                 injected: Mapping[str, str]) -> dict[str, Any]:
        """The exact values the tool receives: the validated arguments the rules judged, and
        the injected secrets, validated by the tool like any argument."""
        if plan.deferred:
            running = _private.prepare_arguments(context, {**plan.arguments, **injected})
            if running is None or not same_json(
                    json_view({k: v for k, v in running.items() if k not in injected}),
                    plan.arguments):
                raise ValueError("validating the injected secrets changed the arguments")
            return running
        if plan.validated is None:
            return {**plan.arguments, **injected}
        if not injected:
            return dict(plan.validated)
        running = _private.prepare_arguments(context, {**plan.arguments, **injected})
        if running is None or not same_json(
                json_view({k: v for k, v in running.items() if k not in injected}),
                plan.arguments):
            raise ValueError("injecting secrets changed the validated arguments")
        return running

    def _injections(self, policies: PolicySet, decision: Decision) -> dict[str, str]:
        values: dict[str, str] = {}
        injections = self._matched_injections(policies, decision)
        if not injections:
            return values
        if sensitive_telemetry_enabled():
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
            if type(value) is not str:
                # A str subclass (a vault's "masked" string) has its own equality, hash and
                # printing: the guard remembers, injects and scrubs the data itself, never
                # what the subclass says it is (two secrets equal by their mask were one).
                value = str.__str__(value)
            values[name] = value
            if value not in self._injected:
                self._remember(ref.env, value)
            for caller in _CALLERS.get():  # (usually none)
                if value not in caller._injected:
                    caller._remember(ref.env, value)
        return values

    def _remember(self, ref: str, value: str) -> None:
        """Add an injected value to the memory, before the tool can see it. Under the
        memory's lock: a guard shared by threads must not rebuild the memory (``_memory_for``)
        from the values as they were before this one and store it over the memory holding
        it (the value would never be scrubbed again)."""
        with self._memory_lock:
            if value in self._injected:
                return
            if (len(self._injected) >= INJECTED_MEMORY
                    or self._injected_chars + len(value) > INJECTED_MEMORY_CHARS):
                raise SecretUnavailable(
                    f"refusing to inject {ref!r}: this guard already remembers "
                    f"{len(self._injected)} injected values (INJECTED_MEMORY), and forgetting "
                    "one could let it leak; build a new guard()")
            self._quiet_memory = None  # (the memory below knows a value now)
            if self._memory.top_layer_size >= _MEMORY_LAYER:
                self._memory = self._memory.with_values([value])  # a new layer on top
            else:
                self._memory = self._memory.merged([value])
            self._set_memory = (self._set_memory[0], self._memory)
            # Counted once the memory holds it: a call that counts it reads that memory.
            self._injected[value] = None
            self._injected_chars += len(value)

    def _scrubber(self, plan: _Plan, injected: Iterable[str],
                  memory: Scrubber | None = None) -> Scrubber:
        """Every secret this call knows: its secret arguments (as the model sent them and as
        repaired), what it injects, and every value this guard injected before (``memory``,
        ``_memory_for`` of the call's set: read now when not given)."""
        names = plan.secret_names
        values: list[Any] = list(injected)
        if names:
            values += [v for k, v in plan.entry_arguments.items() if k in names]
            values += [v for k, v in plan.arguments.items() if k in names]
        if memory is None:
            memory = self._memory_for(plan.policies)
        return memory.with_values(values) if values else memory

    def _deny_unreadable(self, context: FunctionInvocationContext, tool: str,
                         why: str) -> None:
        self._record_blocked(context, tool)
        context.result = f"Error: the call to {tool} was denied by policy. {why}"
        _logged(logging.WARNING, "guardrails: the arguments of a call to %s could not be "
                "read; the call was denied", tool)

    def _block_on_guard_error(self, context: FunctionInvocationContext, tool: str,
                              exc: BaseException) -> None:
        self._record_blocked(context, tool)
        context.result = (f"Error: the guard could not evaluate the call to {tool}, "
                          "so it was blocked.")
        # Type only: an exception's text may hold argument or secret values. A
        # SecretUnavailable's text names references, never values: it says what to fix.
        reason = type(exc).__name__
        if isinstance(exc, SecretUnavailable):  # scrubbed all the same: a provider wrote it
            with contextlib.suppress(Exception):
                reason = self._memory(f"{type(exc).__name__}: {exc}")
        _logged(logging.ERROR, "guardrails: evaluating a call to %s failed (%s); the call "
                "was blocked", tool, reason)

    def _record_blocked(self, context: FunctionInvocationContext, tool: str) -> None:
        """A call blocked before its arguments could be read (or trusted): history keeps
        that it was denied, none of its arguments. Best effort: the block stands anyway."""
        with contextlib.suppress(Exception):
            history = history_of(session_state(context.session), RUN.get())
            record(history, tool, {}, "deny", self._history_limit)

    def _record(self, context: FunctionInvocationContext, plan: _Plan, effect: str,
                scrub: Scrubber) -> dict[str, Any] | Unbuilt | None:
        state = session_state(context.session, create=True)
        tool = context.function.name
        # The quiet memory changes no text: the walk keeps every text as it is (as the
        # scrubber would), without a scrubber call per text.
        quiet = scrub is self._quiet_memory and not plan.secret_names
        if (state is None and plan.run is not None and quiet and plan.validated is not None
                and not plan.over_bounds):
            # A run without a session, nothing secret, and arguments that are the guard's
            # own JSON copy: the entry is built only if the run's history is read.
            return record_unbuilt(plan.run, tool, plan.arguments, effect, self._history_limit,
                                  trusted=self.trusted(tool, plan.aliases))
        history = history_of(state, plan.run)
        if history is None:
            return None
        args: dict[str, Any]
        if plan.over_bounds:  # nothing of arguments over the bounds is read again
            args, truncated = {}, True
        else:
            kept = plain_entry(plan.arguments) if quiet else None
            if kept is None:
                kept = redacted(plan.arguments, plan.secret_names, unchanged if quiet else scrub,
                                names=None if quiet else self._scrubbed_names(scrub))
            args, truncated = kept
        return record(history, tool, args, effect, self._history_limit, truncated=truncated,
                      trusted=self.trusted(tool, plan.aliases))

    def _scrubbed_names(self, scrub: Scrubber) -> dict[str, str] | None:
        """Argument names as the guard's memory of injected values scrubs them (the same
        names come on every call), for that scrubber only: a call's own secret values make
        another scrubber, whose names are not kept. Bounded like the other caches."""
        if scrub is not self._memory:
            return None
        kept = self._names
        if kept[0] is not scrub or len(kept[1]) >= _TOOLS_REMEMBERED:
            kept = self._names = (scrub, {})
        return kept[1]

    def trusted(self, tool: str, aliases: tuple[str, ...] = ()) -> bool:
        """Whether ``tool``'s results are trusted content: some label (a policy's
        ``spec.results`` or the host's ``trusted_tools``, by name or alias) says trusted
        and none says untrusted. Unlabelled tools are untrusted."""
        policies = self._policies.current  # labels follow a reloaded policy set
        names = (tool, *aliases)
        key = (policies.revision, *names)
        found = self._trusted.get(key)
        if found is None:
            labels = [policies.results_trusted(tool, aliases)]
            labels += [v for glob, v in self._trust_labels
                       if any(fnmatch.fnmatchcase(n, glob) for n in names)]
            found = False not in labels and True in labels
            if len(self._trusted) >= _TOOLS_REMEMBERED:
                self._trusted.clear()
            self._trusted[key] = found
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
                policies = self._policies.current
                names = policies.secret_arguments(call.name)
                memory = self._memory_for(policies)
                scrub = memory.with_values(
                    [v for k, v in arguments.items() if k in names]) if names else memory
                args, truncated = redacted(arguments, names, scrub)
                record(history, call.name, args, "rejected", self._history_limit,
                       truncated=truncated, trusted=self.trusted(call.name))


class _Unanswered:
    """The counter store of a call whose store did not answer in time: unavailable, so
    the engine decides its counters as for a store that is down."""

    blocking = False

    def __init__(self, why: str) -> None:
        self._why = why

    def reserve(self, requests: Sequence[CounterRequest]) -> list[CounterResult]:
        raise StoreUnavailable(self._why)

    def release(self, reservations: Sequence[Reservation]) -> None:
        return None


class UnansweredApproval(Exception):
    """A replay of a call the framework asks approval for, whose answer the user did not give."""


def _answered_by_the_user(context: FunctionInvocationContext, run: RunState | None) -> bool:
    """Whether the approval being replayed is one the user gave, for this very call: by the
    answer's id or the id of the call it answers, in this run's user messages (or its
    caller's, for a nested run) or an earlier run's of the session
    (``_boundary.remember_answers``: the framework replays a batch once all of it is
    answered), and carrying the call that is replayed (``answered_call``: an answer the
    user gave for "delete tmp", carried to another session whose model reused the call id
    for "delete everything", ran that). Used up: the model may reuse a call id in this
    session too, and an answer the user gave for it once approves no later request."""
    if run is None:
        return False
    response = context.metadata.get("approval_response")
    digest = answered_call(getattr(response, "function_call", None))
    if digest is None:
        return False
    call = getattr(response, "function_call", None)
    ids = [i for i in (getattr(response, "id", None), getattr(call, "id", None))
           if isinstance(i, str)]
    state = session_state(context.session)
    asked = state.get("asked") if state is not None else None
    if isinstance(asked, dict) and any(isinstance(asked.get(i), str)
                                       and asked[i] != (run.agent_name or "") for i in ids):
        return False  # asked for another agent's call (``_boundary.remember_requests``)
    given = run.answer_calls
    found = given is not None and any(given.get(i) == digest for i in ids)
    kept = state.get("answered") if state is not None else None
    if isinstance(kept, dict):
        for i in ids:
            if kept.get(i) == digest:
                found = True
                del kept[i]
    return found


def _logged(level: int, message: str, *args: object) -> None:
    """Log a blocked call, after its result is set: a host's handler that raises from
    ``emit`` (``Handler.handle`` does not catch it) replaced the guard's answer with the
    framework's "Function failed" (red team 27d). The call stays blocked either way."""
    with contextlib.suppress(Exception):  # (nothing to report it to: logging failed)
        _log.log(level, message, *args)


def _agent_name(run: RunState | None) -> str | None:
    return run.agent_name if run is not None else None


def _without(arguments: dict[str, Any], injected: frozenset[str]) -> dict[str, Any]:
    """``arguments`` without those the guard injects: the model's value never runs."""
    return {k: v for k, v in arguments.items() if k not in injected}


def _memories_of(guards: Sequence[GuardFunctionMiddleware]) -> Callable[[str], str]:
    """A scrub by each guard's memory of injected values as it is now."""

    def scrub(text: str) -> str:
        for guard in guards:
            text = guard._memory(text)
        return text

    return scrub


def _both(first: Callable[[str], str], then: Callable[[str], str]) -> Callable[[str], str]:
    """A scrub by ``first``, then by ``then``: what either removes is removed."""

    def scrub(text: str) -> str:
        return then(first(text))

    return scrub


def _patterns(policies: PolicySet) -> Callable[[str], str] | None:
    """The set's redact patterns, as the guard's memory of injected values applies them;
    None when the set has none (the memory then makes no call for them)."""
    return policies.redact if any(p.redact for p in policies.policies) else None


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
