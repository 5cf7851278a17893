"""Approvals: what a human's approval covers, the request they see, and the replay check.

A ``require_approval`` call stops with the framework's approval request and leaves a
fingerprint in the session. When the approved call is replayed, the guard evaluates it
again and the approval counts only if the fingerprint still matches: same tool, same
(repaired) arguments, same reasons, same policy revision. Approval satisfies
``require_approval`` and nothing else; deny and halt rules still apply to a replay.

The fingerprint is a plain hash anyone can compute, so a host that lets session state
travel through untrusted hands gives the guard an ``approval_key``: the held record is then
the fingerprint plus an HMAC of it and the approval id, and a record without the right MAC
approves nothing. With an ``ApprovalStore`` (``guardrails.fleet.stores``) the record is held
in the shared store instead of the session, so a call approved on one replica replays on
another; ``take`` reads and deletes it in one step, so it is used once, anywhere.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any, Protocol

from agent_framework import Content, FunctionInvocationContext

from guardrails.engine import Action, Decision

__all__ = ["APPROVALS_LIMIT", "APPROVAL_TTL", "ApprovalStore", "approval_id_for",
           "approval_matches", "approval_record", "approval_request", "approved_replay",
           "hold_approval", "is_approved_response", "take_held"]

APPROVALS_LIMIT = 50
"""Unanswered approvals kept per session, oldest dropped first (as history is bounded).

A request nobody answers would otherwise stay in the session forever. Answering one
whose fingerprint was dropped is not a leak but a refusal: the replay finds nothing held
and asks again.
"""


APPROVAL_TTL = 24 * 3600
"""Seconds a held approval waits in a shared store for its answer."""


class ApprovalStore(Protocol):
    """Where held approvals live when they must be shared by replicas."""

    blocking: bool

    def hold(self, key: str, value: str, ttl: int) -> None: ...

    def take(self, key: str) -> str | None: ...


def approval_record(approval_id: str, tool: str, arguments: Mapping[str, Any],
                    decision: Decision, key: bytes | None) -> str:
    """What is held for a call waiting for approval: its fingerprint, MAC'd with ``key``."""
    fingerprint = _fingerprint(tool, arguments, decision)
    if key is None:
        return fingerprint
    mac = hmac.new(key, f"{approval_id}\n{fingerprint}".encode(), hashlib.sha256).hexdigest()
    return f"{fingerprint}.{mac}"


def approval_matches(held: str | None, approval_id: str, tool: str,
                     arguments: Mapping[str, Any], decision: Decision,
                     key: bytes | None) -> bool:
    """Whether a held record approves exactly this call (constant-time comparison)."""
    if not isinstance(held, str):
        return False
    expected = approval_record(approval_id, tool, arguments, decision, key)
    return hmac.compare_digest(held.encode(), expected.encode())


def is_approved_response(context: FunctionInvocationContext) -> bool:
    """The framework is replaying a call the user approved."""
    response = context.metadata.get("approval_response")
    return (isinstance(response, Content) and response.type == "function_approval_response"
            and response.approved is True)


def approval_id_for(context: FunctionInvocationContext) -> str:
    """The id the framework's approval response will carry for this call."""
    occurrence = context.metadata.get("function_call_occurrence_id")
    if isinstance(occurrence, str) and occurrence:
        return occurrence
    call_id = context.metadata.get("call_id")
    return call_id if isinstance(call_id, str) else ""


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


def hold_approval(state: dict[str, Any], approval_id: str, tool: str,
                  arguments: Mapping[str, Any], decision: Decision, *,
                  key: bytes | None = None) -> None:
    """Keep the record of a call waiting for approval in the session's state."""
    approvals = state.get("approvals")
    if not isinstance(approvals, dict):
        approvals = state["approvals"] = {}
    approvals.pop(approval_id, None)  # re-added last: the most recent
    approvals[approval_id] = approval_record(approval_id, tool, arguments, decision, key)
    while len(approvals) > APPROVALS_LIMIT:
        del approvals[next(iter(approvals))]


def approved_replay(context: FunctionInvocationContext, state: dict[str, Any] | None,
                    approval_id: str, tool: str, arguments: Mapping[str, Any],
                    decision: Decision, *, key: bytes | None = None) -> bool:
    """Whether this call is the replay of an approved call, unchanged since the approval
    (the record held in the session).

    A replay uses up its held record, matching or not: one approval, one call.
    """
    if not is_approved_response(context):
        return False
    held = take_held(state, approval_id)
    return approval_matches(held, approval_id, tool, arguments, decision, key)


def take_held(state: dict[str, Any] | None, approval_id: str) -> str | None:
    if state is None:
        return None
    approvals = state.get("approvals")
    if not isinstance(approvals, dict):
        return None
    held = approvals.pop(approval_id, None)
    return held if isinstance(held, str) else None


def approval_request(context: FunctionInvocationContext, approval_id: str, decision: Decision,
                     arguments: Mapping[str, Any], message: str) -> Content:
    """The framework's approval request for this call, as the user will be shown it."""
    call_id = context.metadata.get("call_id")
    occurrence = context.metadata.get("function_call_occurrence_id")
    call = Content.from_function_call(
        call_id=call_id if isinstance(call_id, str) else approval_id,
        name=context.function.name,
        arguments=dict(arguments),
        id=occurrence if isinstance(occurrence, str) else None,
    )
    return Content.from_function_approval_request(
        id=approval_id,
        function_call=call,
        additional_properties={"reason": message, "guardrails_decision_id": decision.id},
    )
