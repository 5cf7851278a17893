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

__all__ = ["RUN", "STATE_KEY", "RunState", "session_state", "stored_request"]

STATE_KEY = "guardrails"
"""Key of this package's JSON-safe entry in ``AgentSession.state``."""


@dataclass
class RunState:
    """What the run boundary hands to the function middleware (through ``RUN``)."""

    request: str
    history: list[dict[str, Any]] = field(default_factory=list)
    """History of this run, used when the run has no session."""
    halts: set[str] = field(default_factory=set)
    """Ids of the decisions the guard halted this run with: the only ones it unwraps."""
    agent: tuple[str, ...] | None = None
    """The running agent's name and id, for ``match.agents`` and bindings."""


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
