"""``history``: the executed and blocked calls of the session (or run) that rules read.

Kept in the session's state when the run has one (so it survives across runs), else in
the run's state. Bounded (oldest dropped first), and redacted before it is stored:
declared secret arguments become ``[REDACTED]`` and every other string is scrubbed, since
the session may be saved, logged or shown, and a later decision record quotes history.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from guardrails.agent_framework._secrets import Scrubber
from guardrails.agent_framework._state import RunState
from guardrails.engine.decision import REDACTED

__all__ = ["HISTORY_LIMIT", "history_of", "record", "redacted"]

HISTORY_LIMIT = 50
"""Entries of ``history`` kept per session (or run); the engine bounds it again."""


def history_of(state: dict[str, Any] | None, run: RunState | None) -> list[dict[str, Any]] | None:
    """The history list to read and append to: the session's, else the run's, else None."""
    if state is not None:
        history = state.get("history")
        if not isinstance(history, list):
            history = state["history"] = []
        return history
    return run.history if run is not None else None


def redacted(arguments: Mapping[str, Any], secret_names: frozenset[str],
             scrub: Scrubber) -> dict[str, Any]:
    """The arguments as history keeps them: secret ones ``[REDACTED]``, every string and
    every name scrubbed.

    One walk giving what ``scrub_json(redact_arguments(arguments, secret_names), scrub)``
    gives (the engine's JSON-safe form, then scrubbed), without building the middle copy,
    and with map keys scrubbed as well.
    """
    # Names are scrubbed too: the model chooses them, and may choose a secret.
    return {scrub(k): scrub(REDACTED) if k in secret_names else _kept(v, scrub)
            for k, v in arguments.items()}


def _kept(value: Any, scrub: Scrubber) -> Any:
    # The engine's _json_safe (decision.redact_arguments), each resulting string scrubbed.
    if isinstance(value, str):
        return scrub(value)
    if value is None or isinstance(value, bool | int | float):
        return value if not (isinstance(value, float) and value != value) else scrub("NaN")
    if isinstance(value, Mapping):
        return {scrub(str(k)): _kept(v, scrub) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_kept(v, scrub) for v in value]
    if isinstance(value, bytes):
        return scrub(value.decode("utf-8", "replace"))
    return scrub(str(value))


def record(history: list[dict[str, Any]] | None, tool: str, args: dict[str, Any],
           effect: str, limit: int) -> None:
    """Append one call (``args`` already ``redacted``), dropping the oldest beyond ``limit``."""
    if history is None:
        return
    history.append({"tool": tool, "args": args, "effect": effect})
    del history[:-limit]
