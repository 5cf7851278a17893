"""Where the guard keeps what outlives one tool call: per run and per session.

The run boundary writes it and the function middleware reads it; both go through this
module so the shapes (the context variable, the session entry's keys) are defined once.
Per-run state lives in a context variable, so concurrent runs never see each other's;
per-session state is a JSON-safe dict in ``AgentSession.state`` so a session can be saved.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from agent_framework import AgentSession

from guardrails.engine import Decision

__all__ = ["RUN", "STATE_KEY", "RunState", "session_state", "stored_request"]

STATE_KEY = "guardrails"
"""Key of this package's JSON-safe entry in ``AgentSession.state``."""


@dataclass(slots=True)
class RunState:
    """What the run boundary hands to the function middleware (through ``RUN``). Slotted:
    one is built per run."""

    request: str
    """The outermost human's words: a nested run (an agent used as a tool) inherits its
    parent's, never the orchestrating model's tool argument."""
    history: list[Any] = field(default_factory=list)
    """History of this run, used when the run has no session. Read it through
    ``_history.history_of``: it may hold entries not built yet (``unbuilt``)."""
    parent: RunState | None = None
    """The guarded run this one is nested in (through ``agent.as_tool()``), if any."""
    halted: list[Decision] = field(default_factory=list)
    """The decisions this run was halted with, first first: the only ones the boundary
    unwraps. Once there is one, no further call of the run runs and the run ends with
    ``PolicyViolation``, whatever else a sibling call or a middleware raised."""

    agent: tuple[str, ...] | None = None
    """The running agent's name and id, for ``match.agents`` and bindings."""
    agent_name: str | None = None
    """The running agent's name (None without one): an approval covers the agent whose
    call it was. Its id is not used: an agent built without one gets a random id, per
    object (a server that builds its agent per request has a new one each time)."""
    answers: frozenset[str] = frozenset()
    """The approval tokens of the answers the human gave in the user messages that started
    the run (a nested run inherits its caller's: its "user" is the orchestrating model).
    Only these approve a replay: the framework also replays answers it finds elsewhere (the
    model's own message kept in the session's history), which no human gave."""
    answer_calls: dict[str, str] | None = None
    """The ids of those answers, and of the calls they answer (``function_call.id``), each
    with the digest of the call the answer carries (``_approvals.answered_call``): what a
    replay of a call the framework itself asks approval for (``approval_mode=
    "always_require"``) is checked against, its request carrying no token of ours."""
    unbuilt: bool = False
    """Whether ``history`` holds an entry not built yet (``_history.Unbuilt``)."""
    unreadable: dict[str, str] | None = None
    """Call ids whose arguments the guard replaced before their batch ran
    (``_unreadable.marker``), with the reason. The framework's validation drops the marker as an unknown key when every
    parameter of the tool has a default, and the call would run with the defaults: the
    function middleware denies these calls by their id too. None until there is one."""

    def halt(self, decision: Decision) -> None:
        """Record a genuine halt of this run, and of every run it is nested in: a halt in a
        sub-agent stops the agents that called it too."""
        run: RunState | None = self
        while run is not None:
            if all(d is not decision for d in run.halted):
                run.halted.append(decision)
            run = run.parent

    def stopped_by(self) -> Decision | None:
        """The halt that stopped this run or a run it is nested in, if any: no call runs."""
        run: RunState | None = self
        while run is not None:
            if run.halted:
                return run.halted[0]
            run = run.parent
        return None

    def halted_with(self, decision: Decision) -> bool:
        return any(d is decision for d in self.halted)


RUN: ContextVar[RunState | None] = ContextVar("guardrails_run", default=None)


def session_state(session: AgentSession | None, *, create: bool = False) -> dict[str, Any] | None:
    """This package's entry in the session's state (made when ``create``), or None."""
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


def stored_request(state: Mapping[str, Any] | None) -> str | None:
    """The request that started the session's latest run, kept for runs that only resume."""
    value = state.get("request") if state is not None else None
    return value if isinstance(value, str) else None
