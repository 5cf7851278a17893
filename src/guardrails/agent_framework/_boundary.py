"""The run boundary, and the halt: the one failure it turns into ``PolicyViolation``.

An agent middleware around the whole run captures the user's own words for ``request``
(a nested run, an agent used as a tool, inherits the outermost human's), holds the per-run
state (``_state.RUN``) and translates a halt. A halt is unwrapped only when the failure is
exactly this package's private type carrying a decision this process minted (by identity)
and halted this run with: a forged or laundered ``MiddlewareFailure`` propagates exactly as
raised. A run that was genuinely halted ends with ``PolicyViolation`` whatever else ended
it (a sibling's failure, a swallowed halt, a halted sub-agent).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import weakref
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from typing import Any

from agent_framework import (
    AgentContext,
    AgentMiddleware,
    FunctionTool,
    Message,
    MiddlewareFailure,
    ResponseStream,
    normalize_tools,
)
from opentelemetry.trace import Span

from guardrails.agent_framework._approvals import APPROVAL_TOKEN_KEY, answered_call
from guardrails.agent_framework._mcp import (
    RUN_MCP_TOOLS,
    register_servers,
    run_mcp_tools,
    tool_aliases,
)
from guardrails.agent_framework._state import RUN, RunState, session_state
from guardrails.engine import Decision, PolicyProvider, PolicyViolation
from guardrails.model.errors import PolicyError, Problem
from guardrails.telemetry import GuardTelemetry

__all__ = ["GuardRunMiddleware", "_GuardHalt", "mint", "minted_decision", "run_request"]

# Decisions this package minted in this process. The run boundary unwraps a halt only
# when its decision is found here (by identity), so a forged decision is never unwrapped.
_MINTED: weakref.WeakValueDictionary[str, Decision] = weakref.WeakValueDictionary()


def mint(decision: Decision) -> None:
    """Register a decision the guard made, so a halt carrying it can be unwrapped."""
    _MINTED[decision.id] = decision


class _GuardHalt(MiddlewareFailure):
    """The guard's fail-closed abort. Private: only the run boundary may unwrap it."""

    def __init__(self, decision: Decision) -> None:
        # Same names-only text as PolicyViolation: tracebacks of chained exceptions reach
        # logs and spans, and rule messages may quote argument values.
        super().__init__(str(PolicyViolation(decision)))
        self.decision = decision


def minted_decision(exc: BaseException, run: RunState | None = None) -> Decision | None:
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
    if run is not None and not run.halted_with(decision):
        return None
    return decision


class GuardRunMiddleware(AgentMiddleware):
    """The run boundary: request capture, per-run state, halt translation, strict checks."""

    def __init__(self, policies: PolicyProvider, *, telemetry: GuardTelemetry | None = None,
                 strict: bool = False) -> None:
        self._policies = policies
        self._telemetry = telemetry if telemetry is not None else GuardTelemetry()
        self._strict = strict
        self._checked: set[tuple[str, frozenset[tuple[str, str]]]] = set()

    async def process(self, context: AgentContext, call_next: Callable[[], Awaitable[None]]) -> None:
        if self._strict:
            self._check_tools(context)
        parent = RUN.get()
        state = RunState(request=run_request(context, parent), parent=parent,
                         agent=agent_names(context.agent), agent_name=agent_name(context.agent))
        if parent is not None:
            state.answers, state.answer_calls = parent.answers, parent.answer_calls
        elif _resumes_approval(context):
            state.answers, state.answer_calls = run_answers(context)
            remember_answers(session_state(context.session), state.answer_calls)
        mcp_tools = run_mcp_tools(context.agent, context.tools)
        telemetry = self._telemetry
        run_span = telemetry.run_span()  # (nearly always None: no span of ours is needed)
        token = RUN.set(state)
        mcp_token = _set_mcp_tools(mcp_tools)
        span_token = telemetry.attach_run_span(run_span) if run_span is not None else None
        streaming = False
        try:
            try:
                await call_next()
            except Exception as exc:
                violation = self._violation(state, exc)
                if violation is None:
                    raise
                raise violation from _cause(violation, exc)
            result = context.result
            session = context.session
            if context.stream and isinstance(result, ResponseStream):
                result.with_pull_context_manager(
                    lambda: self._stream_scope(state, run_span, mcp_tools))
                result.with_result_hook(
                    lambda final: remember_requests(session, final, state.agent_name))
                if run_span is not None:
                    result.with_cleanup_hook(lambda: telemetry.end_run_span(run_span))
                    streaming = True
            else:
                if state.halted:
                    # Halted, yet the run went on (a middleware or tool swallowed the halt):
                    # it still ends as a halt.
                    raise self._violation(state, None) or PolicyViolation(state.halted[0])
                remember_requests(session, result, state.agent_name)
        finally:
            if run_span is not None:
                telemetry.detach_run_span(span_token)
            if mcp_token is not None:
                RUN_MCP_TOOLS.reset(mcp_token)
            RUN.reset(token)
            if run_span is not None and not streaming:
                telemetry.end_run_span(run_span)

    @contextlib.contextmanager
    def _stream_scope(self, state: RunState, run_span: Span | None,
                      mcp_tools: tuple[Any, ...] = ()) -> Iterator[None]:
        """Around every pull of a streamed run: the tools run while the stream is consumed."""
        telemetry = self._telemetry
        token = RUN.set(state)
        mcp_token = _set_mcp_tools(mcp_tools)
        span_token = telemetry.attach_run_span(run_span) if run_span is not None else None
        try:
            try:
                yield
            except Exception as exc:
                violation = self._violation(state, exc)
                if violation is None:
                    raise
                raise violation from _cause(violation, exc)
            if state.halted:
                raise self._violation(state, None) or PolicyViolation(state.halted[0])
        finally:
            if run_span is not None:
                telemetry.detach_run_span(span_token)
            if mcp_token is not None:
                RUN_MCP_TOOLS.reset(mcp_token)
            RUN.reset(token)

    def _violation(self, state: RunState, exc: Exception | None) -> PolicyViolation | None:
        """The ``PolicyViolation`` a run ends with, or None when it was not halted.

        A halt is ours when the failure is our private type carrying a decision this run
        halted with. Any other failure ending a run that was halted (a third-party
        ``MiddlewareFailure`` from a sibling call in the same batch won the race) still
        ends it as the first halt, the other failure kept as ``other_failure``, as the
        cause, and named in a note.
        """
        if (type(exc) is PolicyViolation and exc.other_failure is None
                and state.halted_with(exc.decision) and _MINTED.get(exc.decision.id) is exc.decision):
            return None  # a boundary nested in this one (two guards) translated it already
        decision = minted_decision(exc, state) if isinstance(exc, MiddlewareFailure) else None
        other = None
        if decision is None:
            if not state.halted:
                return None
            decision, other = state.halted[0], exc
        self._telemetry.record_halt(decision)
        violation = PolicyViolation(decision, other_failure=other)
        if other is not None:
            violation.add_note(f"the run was also failed by {type(other).__name__} "
                               "(see other_failure)")
        return violation

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
        mcp_tools = run_mcp_tools(context.agent, context.tools)
        register_servers(mcp_tools)
        mcp_functions = [f for m in mcp_tools for f in getattr(m, "functions", ())]
        for source in (declared, context.tools, mcp_functions):
            for item in normalize_tools(source):
                if isinstance(item, FunctionTool):
                    schemas[item.name] = item.parameters()
                    for alias in tool_aliases(item):  # a policy may name it mcp:<server>/<tool>
                        schemas[alias] = schemas[item.name]
        policies = self._policies.current
        key = (policies.revision, frozenset((name, json.dumps(schema, sort_keys=True, default=str))
                                            for name, schema in schemas.items()))
        if key in self._checked:
            return
        findings = lint_module.lint(policies, schemas, unguarded_typo="error")
        errors = [f for f in findings if f.severity == "error"]
        if errors:
            raise PolicyError(Problem(f.file, f.line, f.column, f.message) for f in errors)
        self._checked.add(key)


def _set_mcp_tools(tools: tuple[Any, ...]) -> contextvars.Token[tuple[Any, ...]] | None:
    """Hand the run's MCP tool objects to its calls; None when nothing changes (no MCP
    tool in this run, none in the run it is nested in: the common case, one set fewer)."""
    if not tools and not RUN_MCP_TOOLS.get():
        return None
    return RUN_MCP_TOOLS.set(tools)


def _cause(violation: PolicyViolation, exc: Exception) -> BaseException | None:
    """What a violation is raised from: another failure that also ended the run, never
    the guard's private halt (noise in a traceback, where the public type should show)."""
    return exc if violation.other_failure is not None else None


def agent_names(agent: Any) -> tuple[str, ...]:
    """The names ``match.agents`` can use for an agent: its name and its id."""
    name, ident = getattr(agent, "name", None), getattr(agent, "id", None)
    if not (isinstance(ident, str) and ident):
        ident = None
    if not (isinstance(name, str) and name):
        return (ident,) if ident is not None else ()
    return (name, ident) if ident is not None and ident != name else (name,)


def agent_name(agent: Any) -> str | None:
    """The agent's name, if it has one (``RunState.agent_name``)."""
    name = getattr(agent, "name", None)
    return name if isinstance(name, str) and name else None


def _user_text(messages: Iterable[Message]) -> str:
    """The text of the user messages, each message's texts joined by a newline and the
    messages (those with any text) by another: always a plain ``str`` (a ``str`` subclass
    in a message is joined into one, as ``join`` does). Loops, not generators: per run."""
    texts: list[str] = []
    for m in messages:
        if m.role != "user":
            continue
        parts = [c.text for c in m.contents if c.type == "text" and c.text]
        if parts:
            first = parts[0]
            texts.append(first if len(parts) == 1 and type(first) is str else "\n".join(parts))
    return texts[0] if len(texts) == 1 else "\n".join(texts)


def run_request(context: AgentContext, parent: RunState | None = None) -> str:
    """The text of the user messages that started the run (never tool or assistant text).

    A nested run (an agent used as a tool by a guarded agent) has no user of its own: its
    "user message" is the orchestrating model's tool argument, which an injected document
    can fill. It inherits the outermost human's words instead. A run that only resumes
    approvals carries no user text: the request is then the one that started the paused
    run, kept in the session. Any other run without user text has an empty request.
    """
    state = session_state(context.session, create=True)
    if parent is not None:
        if state is not None:
            state["request"] = parent.request
        return parent.request
    text = _user_text(context.messages)
    if state is None:
        return text
    if text:
        state["request"] = text
        return text
    if not _resumes_approval(context):
        return ""
    stored = state.get("request")
    return stored if isinstance(stored, str) else ""


def run_answers(context: AgentContext) -> tuple[frozenset[str], dict[str, str]]:
    """The approval tokens of the answers in the user messages that started the run, and
    their ids (the answer's and its call's) with the digest of the call each carries: the
    only answers that approve a replay in it (``RunState.answers``,
    ``RunState.answer_calls``).

    The framework replays every answer it finds, the model's own included: an approval
    response the model returned ends its run, is kept in the session's history as the
    model's message, and was replayed as approved by the user's next message (red team
    27; for the guard's own requests the model needs the request's token, for the
    framework's, ``approval_mode="always_require"``, only the call id it chose). A nested
    run (an agent used as a tool) has no human of its own: it inherits its caller's
    answers, never the orchestrating model's (``GuardRunMiddleware.process``).
    """
    tokens: list[str] = []
    calls: dict[str, str] = {}
    for m in context.messages:
        if m.role != "user":
            continue
        for c in m.contents:
            if c.type == "function_approval_response" and c.approved is True:
                token = c.additional_properties.get(APPROVAL_TOKEN_KEY)
                if type(token) is str:
                    tokens.append(token)
                call = c.function_call
                digest = answered_call(call)
                if digest is None:
                    continue
                for ident in (c.id, call.id if call is not None else None):
                    if type(ident) is str:
                        calls[ident] = digest
    return frozenset(tokens), calls


ANSWERS_KEPT = 100
"""The user's answers a session keeps (``remember_answers``), oldest dropped first."""


def remember_answers(state: dict[str, Any] | None, calls: dict[str, str] | None) -> None:
    """Keep the user's answers (id: digest of the call answered) in the session: the
    framework waits until every call of a batch it asks approval for is answered, so a
    replay may come in a later run than its answer (``_function._answered_by_the_user``
    takes them out as they are used)."""
    if state is None or not calls:
        return
    try:
        kept = state.get("answered")
        if not isinstance(kept, dict):
            kept = state["answered"] = {}
        for ident, digest in calls.items():
            kept.pop(ident, None)
            kept[ident] = digest
        while len(kept) > ANSWERS_KEPT:
            del kept[next(iter(kept))]
    except Exception:  # a session state that cannot be written (restored garbage): the
        return  # answers are not kept, so their replays are not the user's: none runs


def remember_requests(session: Any, response: Any, agent: str | None) -> None:
    """Keep, for each of the framework's own approval requests a run ends with (those
    without our token: ``approval_mode="always_require"``), the agent that made the call
    (its name, "" without one), by the request's id and its call's: the guard never sees
    such a call until it is replayed, and an answer handed to another agent's run of the
    session ran that agent's tool of the same name (red team 27c;
    ``_function._answered_by_the_user`` compares). Returns nothing, changes no response."""
    try:
        _remember_requests(session, response, agent)
    except Exception:  # a session state that cannot be written (restored garbage) must not
        return  # end the run: the guard reads that state on every call and blocks them


def _remember_requests(session: Any, response: Any, agent: str | None) -> None:
    state = session_state(session, create=True) if session is not None else None
    messages = getattr(response, "messages", None)
    if state is None or not isinstance(messages, list):
        return
    asked = state.get("asked")
    for message in messages:
        for c in getattr(message, "contents", None) or ():
            if (getattr(c, "type", None) != "function_approval_request"
                    or APPROVAL_TOKEN_KEY in (c.additional_properties or {})):
                continue
            if not isinstance(asked, dict):
                asked = state["asked"] = {}
            call = c.function_call
            for ident in (c.id, call.id if call is not None else None,
                          call.call_id if call is not None else None):
                if type(ident) is str:
                    asked.pop(ident, None)
                    asked[ident] = agent or ""
    while isinstance(asked, dict) and len(asked) > 3 * ANSWERS_KEPT:
        del asked[next(iter(asked))]


def _resumes_approval(context: AgentContext) -> bool:
    return any(c.type == "function_approval_response"
               for m in context.messages for c in m.contents)
