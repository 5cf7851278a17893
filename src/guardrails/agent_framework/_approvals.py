"""Approvals: what a human's approval covers, the request they see, and the replay check.

A ``require_approval`` call stops with the framework's approval request and leaves a
fingerprint in the session, with a fresh random token that the request carries (in its
``additional_properties``, which the framework copies into the response made from it).
When the approved call is replayed, the guard evaluates it again and the approval counts
only if the response carries the token of the request held for that call, and the
fingerprint still matches: same tool, same (validated) arguments, same reasons, same policy
revision. The occurrence id alone proves nothing (the model chooses it, and may reuse it):
an answer to one request never approves another call that took its id, in this session
or any other, and an answer is used once. Approval satisfies ``require_approval`` and
nothing else; deny and halt rules still apply to a replay.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Mapping
from typing import Any

from agent_framework import Content, FunctionInvocationContext

from guardrails.engine import Action, Decision

__all__ = ["APPROVALS_LIMIT", "APPROVAL_TOKEN_KEY", "approval_id_for", "approval_request",
           "approved_replay", "hold_approval"]

APPROVAL_TOKEN_KEY = "guardrails_approval"
"""Key of the request's (and so the response's) token in ``additional_properties``."""

APPROVALS_LIMIT = 50
"""Unanswered approvals kept per session, oldest dropped first (as history is bounded).

A request nobody answers would otherwise stay in the session forever. Answering one
whose fingerprint was dropped is not a leak but a refusal: the replay finds nothing held
and asks again.
"""


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
                  arguments: Mapping[str, Any], decision: Decision) -> str:
    """Keep the fingerprint of a call waiting for approval in the session's state; returns
    the token its request carries. A later request under the same id replaces it."""
    approvals = state.get("approvals")
    if not isinstance(approvals, dict):
        approvals = state["approvals"] = {}
    token = secrets.token_urlsafe(18)
    approvals.pop(approval_id, None)  # re-added last: the most recent
    approvals[approval_id] = {"fingerprint": _fingerprint(tool, arguments, decision),
                              "token": token}
    while len(approvals) > APPROVALS_LIMIT:
        del approvals[next(iter(approvals))]
    return token


def approved_replay(context: FunctionInvocationContext, state: dict[str, Any] | None,
                    approval_id: str, tool: str, arguments: Mapping[str, Any],
                    decision: Decision) -> bool:
    """Whether this call is the replay of the approved call the human was shown, unchanged.

    The response must carry the token of the request held for this id (the request the
    human answered, not another that reused its id), and the call must have the held
    fingerprint. A replay uses up what is held, matching or not: one approval, one call.
    """
    response = context.metadata.get("approval_response")
    if not (isinstance(response, Content) and response.type == "function_approval_response"
            and response.approved is True):
        return False
    held = _pop_approval(state, approval_id)
    if held is None:
        return False
    token = response.additional_properties.get(APPROVAL_TOKEN_KEY)
    return (isinstance(token, str) and secrets.compare_digest(token, held["token"])
            and held["fingerprint"] == _fingerprint(tool, arguments, decision))


def release_approval(state: dict[str, Any] | None, approval_id: str) -> bool:
    """Drop a held call a human rejected; whether this guard was holding it."""
    return _pop_approval(state, approval_id) is not None


def _pop_approval(state: dict[str, Any] | None, approval_id: str) -> dict[str, str] | None:
    if state is None:
        return None
    approvals = state.get("approvals")
    if not isinstance(approvals, dict):
        return None
    held = approvals.pop(approval_id, None)
    if not (isinstance(held, dict) and isinstance(held.get("fingerprint"), str)
            and isinstance(held.get("token"), str)):
        return None
    return held


def approval_request(context: FunctionInvocationContext, approval_id: str, decision: Decision,
                     arguments: Mapping[str, Any], message: str, token: str) -> Content:
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
        additional_properties={"reason": message, "guardrails_decision_id": decision.id,
                               APPROVAL_TOKEN_KEY: token},
    )
