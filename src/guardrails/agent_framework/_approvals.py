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

The fingerprint is a plain hash and the token travels in the conversation, so whoever can
rewrite the session state could make an altered call look approved. A host whose session
state passes through untrusted hands gives the guard an ``approval_key``: the held record
then carries an HMAC of the approval id, fingerprint and token, and a record without the
right MAC approves nothing. With an ``ApprovalStore`` (``guardrails.fleet.stores``) the
record is held in the shared store instead of the session, so a call approved on one
replica replays on another; ``take`` reads and deletes it in one step (used once, anywhere).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import threading
from collections.abc import Mapping
from typing import Any, Protocol

from agent_framework import Content, FunctionInvocationContext

from guardrails.engine import Action, Decision

__all__ = ["APPROVALS_LIMIT", "APPROVAL_TOKEN_KEY", "APPROVAL_TTL", "ApprovalStore",
           "answered_call", "approval_id_for", "approval_matches", "approval_record", "approval_request",
           "caller_of", "hold_approval", "is_approved_response", "new_token",
           "response_token", "spend", "take_held"]

APPROVAL_TOKEN_KEY = "guardrails_approval"
"""Key of the request's (and so the response's) token in ``additional_properties``."""

APPROVALS_LIMIT = 50
"""Unanswered approvals kept per session, oldest dropped first (as history is bounded).

A request nobody answers would otherwise stay in the session forever. Answering one
whose fingerprint was dropped is not a leak but a refusal: the replay finds nothing held
and asks again.
"""


APPROVAL_TTL = 24 * 3600
"""Seconds a held approval waits in a shared store for its answer."""


class ApprovalStore(Protocol):
    """Where held approvals live when replicas must share them."""

    blocking: bool

    def hold(self, key: str, value: str, ttl: int) -> None: ...

    def take(self, key: str) -> str | None: ...


SPENT_TOKENS = 100_000
"""Approval tokens this process remembers as used (the oldest forgotten first): about 8 MB."""

_spent: dict[str, None] = {}
_spent_lock = threading.Lock()


def new_token() -> str:
    return secrets.token_urlsafe(18)


def spend(token: str) -> bool:
    """Mark an approval's token used; False when this process already used it.

    The held record is taken out of the session state when its approval is used, but the
    state is the host's: a copy saved before the approval and restored after it (a session
    kept by the client, a retried request) holds the record again, MAC and all, and
    approved the same call once per restore. Tokens are random, so one set serves every
    guard of the process; a shared ``ApprovalStore`` is what makes it once across replicas
    and restarts (its ``take`` is global)."""
    with _spent_lock:
        if token in _spent:
            return False
        _spent[token] = None
        if len(_spent) > SPENT_TOKENS:
            del _spent[next(iter(_spent))]
        return True


def approval_record(approval_id: str, tool: str, arguments: Mapping[str, Any],
                    decision: Decision, token: str, key: bytes | None,
                    caller: Mapping[str, Any] | None = None) -> dict[str, str]:
    """What is held for a call waiting for approval: its fingerprint and the token its
    request carries, and with ``key`` an HMAC binding both to the approval id."""
    record = {"fingerprint": _fingerprint(tool, arguments, decision, caller),
              "token": token}
    if key is not None:
        record["mac"] = _mac(key, approval_id, record["fingerprint"], token)
    return record


def _mac(key: bytes, approval_id: str, fingerprint: str, token: str) -> str:
    message = f"{approval_id}\n{fingerprint}\n{token}".encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def approval_matches(held: Any, approval_id: str, token: Any, tool: str,
                     arguments: Mapping[str, Any], decision: Decision,
                     key: bytes | None, caller: Mapping[str, Any] | None = None) -> bool:
    """Whether a held record (a dict, or its JSON text from a store) approves exactly this
    call answered with ``token``. Comparisons are constant-time."""
    if isinstance(held, str):
        try:
            held = json.loads(held)
        except ValueError:
            return False
    if not (isinstance(held, dict) and isinstance(held.get("fingerprint"), str)
            and isinstance(held.get("token"), str) and isinstance(token, str)):
        return False
    if not _same_text(token, held["token"]):
        return False
    fingerprint = _fingerprint(tool, arguments, decision, caller)
    if not _same_text(fingerprint, held["fingerprint"]):
        return False
    if key is None:
        return True
    mac = held.get("mac")
    return isinstance(mac, str) and _same_text(mac, _mac(key, approval_id, fingerprint, token))


def _same_text(a: str, b: str) -> bool:
    """Constant-time equality of two texts of any characters: ``compare_digest`` raises
    on a ``str`` that is not ASCII, and a held record is whatever the session state or
    the store holds (a record that cannot be compared must approve nothing, not error)."""
    return secrets.compare_digest(a.encode("utf-8", "surrogatepass"),
                                  b.encode("utf-8", "surrogatepass"))


def is_approved_response(context: FunctionInvocationContext) -> bool:
    """The framework is replaying a call the user approved."""
    response = context.metadata.get("approval_response")
    return (isinstance(response, Content) and response.type == "function_approval_response"
            and response.approved is True)


def response_token(context: FunctionInvocationContext) -> Any:
    """The token the approval response carries (copied by the framework from the request)."""
    response = context.metadata.get("approval_response")
    if not isinstance(response, Content):
        return None
    return response.additional_properties.get(APPROVAL_TOKEN_KEY)


def approval_id_for(context: FunctionInvocationContext) -> str:
    """The id the framework's approval response will carry for this call."""
    occurrence = context.metadata.get("function_call_occurrence_id")
    if isinstance(occurrence, str) and occurrence:
        return occurrence
    call_id = context.metadata.get("call_id")
    return call_id if isinstance(call_id, str) else ""


def _fingerprint(tool: str, arguments: Mapping[str, Any], decision: Decision,
                 caller: Mapping[str, Any] | None = None) -> str:
    """What an approval covers: the tool, the exact (repaired) arguments, the caller
    (``caller``: the principal the call was made for and the agent that made it, see
    ``caller_of``), and the reasons the human was shown (the rules asking for it, under
    that policy revision). A replay asked for by another rule, under changed policies, in
    a run the host makes for another principal (a session two users share: the tool may
    act for whoever the principal is), or in another agent's run (two agents sharing a
    session, each with a tool of that name; red team 27) needs a new approval. A caller
    JSON cannot write (a cycle, keys of mixed types) gets a fingerprint nothing matches:
    its call is asked for again, never approved by another's answer.
    """
    reasons = sorted(f"{r.policy}/{r.rule}" for r in decision.rules
                     if r.action is Action.REQUIRE_APPROVAL and not r.audit)
    try:
        payload = json.dumps({"tool": tool, "args": dict(arguments), "reasons": reasons,
                              "revision": decision.revision,
                              "caller": dict(caller) if caller else {}},
                             sort_keys=True, default=str, ensure_ascii=False,
                             separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        return secrets.token_hex(32)
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()


def answered_call(call: Any) -> str | None:
    """What an answer to one of the framework's own requests was given for: a digest of
    its copy of the call (the name and the arguments the user was shown), None when it has
    none. A replay runs only the call its answer carries (``_function``)."""
    if not isinstance(call, Content) or call.type != "function_call":
        return None
    try:
        payload = json.dumps({"name": call.name, "args": call.parse_arguments()},
                             sort_keys=True, default=str, ensure_ascii=False,
                             separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        return None
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()


def caller_of(principal: Mapping[str, Any] | None, agent: str | None) -> dict[str, Any]:
    """Who an approval is bound to: the principal the host gave the call, and the name of
    the agent that made it (its id is random per object unless the host sets one)."""
    return {"principal": principal if principal is not None else {}, "agent": agent}


def hold_approval(state: dict[str, Any], approval_id: str, tool: str,
                  arguments: Mapping[str, Any], decision: Decision, *,
                  key: bytes | None = None, caller: Mapping[str, Any] | None = None) -> str:
    """Keep the record of a call waiting for approval in the session's state; returns
    the token its request carries. A later request under the same id replaces it."""
    approvals = state.get("approvals")
    if not isinstance(approvals, dict):
        approvals = state["approvals"] = {}
    token = new_token()
    approvals.pop(approval_id, None)  # re-added last: the most recent
    approvals[approval_id] = approval_record(approval_id, tool, arguments, decision, token,
                                             key, caller)
    while len(approvals) > APPROVALS_LIMIT:
        del approvals[next(iter(approvals))]
    return token


def release_approval(state: dict[str, Any] | None, approval_id: str) -> bool:
    """Drop a held call a human rejected; whether this guard was holding it."""
    return take_held(state, approval_id) is not None


def take_held(state: dict[str, Any] | None, approval_id: str) -> dict[str, str] | None:
    """Remove and return the record held in the session for ``approval_id``."""
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
