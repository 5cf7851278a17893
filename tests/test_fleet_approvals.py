"""Approvals protected by an HMAC, and held in a shared store so another replica replays them."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from agent_framework import AgentSession, Content

import guardrails
from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework._approvals import approval_record, caller_of
from guardrails.agent_framework.scripted import call
from guardrails.fleet.stores import RedisStore, SQLiteStore
from tests.af_support import agent_with, approve_all, clear_calls_fixture
from tests.af_tools import CALLS, send_money
from tests.fleet_support import APPROVAL_KEY, RedisServer, approval_policies, redis_server

__all__ = ["approval_policies", "redis_server"]
_clear = clear_calls_fixture()

KEY = APPROVAL_KEY


def _forged_session(session: AgentSession, request: Content, policies: guardrails.PolicySet,
                    attacker_key: bytes | None) -> AgentSession:
    """What an attacker who holds the session state (but not the guard's key) can do: turn
    the pending 2,000 payment into 9,999 everywhere in the state (the framework's pending
    request included) and recompute the guard's record exactly as the guard would."""
    text = json.dumps(session.to_dict())
    text = text.replace('"amount": 2000.0', '"amount": 9999.0').replace('"amount": 2000',
                                                                        '"amount": 9999')
    forged = AgentSession.from_dict(json.loads(text))
    args = {"recipient": "UK12", "amount": 9999.0}
    assert request.id is not None
    token = forged.state["guardrails"]["approvals"][request.id]["token"]  # readable too
    forged.state["guardrails"]["approvals"][request.id] = approval_record(
        request.id, "send_money", args, policies.evaluate("send_money", args), token,
        attacker_key, caller_of({}, None))  # (no principal, an agent without a name)
    return forged


@pytest.mark.parametrize("attacker_key", [None, b"guessed-wrong"])
async def test_forged_session_state_approves_nothing_with_a_key(
        policies: guardrails.PolicySet, attacker_key: bytes | None) -> None:
    for key in (None, KEY):
        CALLS.clear()
        client = ScriptedChatClient([[call("send_money", recipient="UK12", amount=2000)]])
        agent = agent_with(client, [send_money], guard(policies, approval_key=key))
        session = agent.create_session()
        first = await agent.run("pay UK12 2000", session=session)
        [request] = first.user_input_requests
        forged = _forged_session(session, request, policies, attacker_key)
        await agent.run(approve_all(first), session=forged)
        if key is None:
            # Without a key the record is a plain hash: the forgery works (why keys exist).
            assert CALLS == [("send_money", {"recipient": "UK12", "amount": 9999.0})]
        else:
            assert CALLS == []  # the forged record's MAC does not verify: nothing ran


async def test_a_keyed_approval_still_works(policies: guardrails.PolicySet) -> None:
    client = ScriptedChatClient([[call("send_money", recipient="UK12", amount=2000)]])
    agent = agent_with(client, [send_money], guard(policies, approval_key=KEY))
    session = agent.create_session()
    first = await agent.run("pay", session=session)
    await agent.run(approve_all(first), session=session)
    assert CALLS == [("send_money", {"recipient": "UK12", "amount": 2000.0})]


def test_a_shared_store_needs_a_key(policies: guardrails.PolicySet, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="approval_key"):
        guard(policies, approvals=SQLiteStore(tmp_path / "s.db"))


@pytest.fixture(params=["memory", "sqlite", "redis"])
def store(request: Any, tmp_path: Path, redis_server: RedisServer) -> Any:
    if request.param == "memory":  # guards of one process
        from guardrails.engine.counters import MemoryStore
        return MemoryStore()
    if request.param == "sqlite":
        return SQLiteStore(tmp_path / "shared.db")
    return RedisStore(redis_server.url, prefix=f"ap-{uuid.uuid4().hex}:")


async def test_approved_on_one_replica_replays_on_another(policies: guardrails.PolicySet,
                                                          store: Any) -> None:
    replica_a = agent_with(ScriptedChatClient([[call("send_money", recipient="UK12",
                                                     amount=2000)]]),
                           [send_money], guard(policies, approvals=store, approval_key=KEY))
    session = replica_a.create_session()
    first = await replica_a.run("pay", session=session)
    assert first.user_input_requests and CALLS == []
    assert "approvals" not in session.state.get("guardrails", {})  # held in the store
    # The session travels (serialised) to another process with its own guard.
    moved = AgentSession.from_dict(session.to_dict())
    replica_b = agent_with(ScriptedChatClient([]), [send_money],
                           guard(policies, approvals=store, approval_key=KEY))
    await replica_b.run(approve_all(first), session=moved)
    assert CALLS == [("send_money", {"recipient": "UK12", "amount": 2000.0})]
    # One approval, one call: replaying the same answer again runs nothing.
    await replica_b.run(approve_all(first), session=AgentSession.from_dict(session.to_dict()))
    assert len(CALLS) == 1


async def test_store_holding_a_forged_record_approves_nothing(policies: guardrails.PolicySet,
                                                              store: Any) -> None:
    """Someone who can write to the store but lacks the key cannot approve a call."""
    agent = agent_with(ScriptedChatClient([[call("send_money", recipient="UK12",
                                                 amount=2000)]]),
                       [send_money], guard(policies, approvals=store, approval_key=KEY))
    session = agent.create_session()
    first = await agent.run("pay", session=session)
    [request] = first.user_input_requests
    decision = policies.evaluate("send_money", {"recipient": "UK12", "amount": 2000})
    token = request.additional_properties["guardrails_approval"]  # in the conversation
    record = approval_record(request.id or "", "send_money",
                             {"recipient": "UK12", "amount": 2000.0}, decision, token,
                             b"not-the-key")
    store.hold(f"{session.session_id}:{request.id}", json.dumps(record), 60)
    await agent.run(approve_all(first), session=session)
    assert CALLS == []


async def test_store_down_blocks_the_call(policies: guardrails.PolicySet) -> None:
    from tests.fleet_support import start_redis

    server = start_redis()
    store = RedisStore(server.url, timeout=0.2)
    server.stop()
    client = ScriptedChatClient([[call("send_money", recipient="UK12", amount=2000)]])
    agent = agent_with(client, [send_money], guard(policies, approvals=store, approval_key=KEY))
    session = agent.create_session()
    first = await agent.run("pay", session=session)
    assert not first.user_input_requests and CALLS == []
    assert "could not evaluate" in str(client.tool_results()[0].result)
