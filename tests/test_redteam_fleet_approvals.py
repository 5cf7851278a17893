"""Red team of approvals held in a shared store: records moved, replayed or reused across
sessions, replicas and calls, in the framework's real loop against real stores."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from agent_framework import AgentSession, Message

import guardrails
from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework.scripted import call
from guardrails.fleet.stores import RedisStore, SQLiteStore
from tests.af_support import agent_with, approve_all, clear_calls_fixture
from tests.af_tools import CALLS, send_money
from tests.fleet_support import APPROVAL_KEY, RedisServer, approval_policies, redis_server

__all__ = ["approval_policies", "redis_server"]
_clear = clear_calls_fixture()

KEY = APPROVAL_KEY


@pytest.fixture(params=["sqlite", "redis"])
def store(request: Any, tmp_path: Path, redis_server: RedisServer) -> Any:
    if request.param == "sqlite":
        return SQLiteStore(tmp_path / "shared.db")
    return RedisStore(redis_server.url, prefix=f"rt-{uuid.uuid4().hex}:")


def _replica(policies: guardrails.PolicySet, store: Any, script: list[Any]) -> Any:
    return agent_with(ScriptedChatClient(script), [send_money],
                      guard(policies, approvals=store, approval_key=KEY))


async def test_a_record_moved_to_another_session_approves_nothing(
        policies: guardrails.PolicySet, store: Any) -> None:
    """Someone with write access to the store (not the key) moves session A's pending,
    never-approved record to session B's key and answers B with A's token: B's human
    approved nothing, so nothing runs."""
    pay = [[call("send_money", recipient="UK12", amount=2000)]]
    a = _replica(policies, store, pay)
    session_a = a.create_session()
    first_a = await a.run("pay", session=session_a)
    [request_a] = first_a.user_input_requests
    b = _replica(policies, store, pay)
    session_b = b.create_session()
    first_b = await b.run("pay", session=session_b)
    [request_b] = first_b.user_input_requests
    assert request_a.id == request_b.id  # the same call id in both conversations
    moved = store.take(f"{session_a.session_id}:{request_a.id}")
    assert moved is not None
    store.hold(f"{session_b.session_id}:{request_b.id}", moved, 60)
    # B is answered with A's request (its token), as if B's user had approved it.
    await b.run(approve_all(first_a), session=session_b)
    assert CALLS == []


async def test_one_approval_one_call_across_replicas(policies: guardrails.PolicySet,
                                                     store: Any) -> None:
    """The same approved answer replayed on two replicas at once runs the call once."""
    import asyncio

    a = _replica(policies, store, [[call("send_money", recipient="UK12", amount=2000)]])
    session = a.create_session()
    first = await a.run("pay", session=session)
    replicas = [_replica(policies, store, []) for _ in range(4)]
    await asyncio.gather(*(r.run(approve_all(first),
                                 session=AgentSession.from_dict(session.to_dict()))
                           for r in replicas))
    assert CALLS == [("send_money", {"recipient": "UK12", "amount": 2000.0})]


async def test_a_record_for_another_call_approves_nothing(policies: guardrails.PolicySet,
                                                          store: Any) -> None:
    """A genuine record (valid MAC) held for a 2,000 payment does not approve 9,999 to
    someone else under the same id, nor another tool."""
    a = _replica(policies, store, [[call("send_money", recipient="UK12", amount=2000)]])
    session = a.create_session()
    first = await a.run("pay", session=session)
    text = json.dumps(session.to_dict()).replace('"amount": 2000', '"amount": 9999')
    forged = AgentSession.from_dict(json.loads(text))
    answer = json.loads(json.dumps(approve_all(first).to_dict())
                        .replace('"amount": 2000', '"amount": 9999'))
    await _replica(policies, store, []).run(Message.from_dict(answer), session=forged)
    assert CALLS == []
