"""Promise 6: an approval covers the arguments shown to the approver, attacked in the real loop.

The framework binds an approval response to a pending request by the call's occurrence id
(``Content.id``), which the model chooses. An approval must only ever run the exact call the
human was shown: never another call that reused the id, one reordered in its batch, one from
another session or run, or one whose arguments changed between request and replay.
"""

from __future__ import annotations

from typing import Any

from agent_framework import Content, Message

from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework.scripted import text
from tests.af_support import agent_with, approve_all, clear_calls_fixture, policies_fixture
from tests.af_tools import CALLS, send_money

_clear_calls = clear_calls_fixture()
policies = policies_fixture()


def pay(recipient: str, amount: float, *, call_id: str, occurrence: str) -> Content:
    return Content.from_function_call(call_id=call_id, name="send_money", id=occurrence,
                                      arguments={"recipient": recipient, "amount": amount})


def shown(response: Any) -> list[tuple[str, Any]]:
    out = []
    for request in response.user_input_requests:
        arguments = request.function_call.parse_arguments() or {}
        out.append((arguments.get("recipient"), arguments.get("amount")))
    return out


async def test_a_reused_occurrence_id_cannot_carry_an_approval_to_another_call(
        policies: Any) -> None:
    client = ScriptedChatClient([
        [pay("UK12", 5000, call_id="c1", occurrence="X")],
        [pay("DE99", 99999, call_id="c2", occurrence="X")],
        [text("ok")], [text("ok")], [text("ok")],
    ])
    agent = agent_with(client, [send_money], guard(policies))
    session = agent.create_session()
    first = await agent.run("pay UK12 5000", session=session)
    assert shown(first) == [("UK12", 5000)]
    second = await agent.run("and DE99 99999", session=session)  # same id, new request
    assert shown(second) == [("DE99", 99999)]
    # The user approves what they saw first: "UK12 5000". Whatever the framework binds it
    # to, the DE99 call, which nobody approved, must not run.
    await agent.run(approve_all(first), session=session)
    assert ("send_money", {"recipient": "DE99", "amount": 99999.0}) not in CALLS


async def test_reordered_calls_in_one_batch_run_only_what_each_approval_showed(
        policies: Any) -> None:
    client = ScriptedChatClient([
        [pay("UK12", 5000, call_id="c1", occurrence="A"),
         pay("DE99", 99999, call_id="c2", occurrence="B")],
        [text("ok")], [text("ok")],
    ])
    agent = agent_with(client, [send_money], guard(policies))
    session = agent.create_session()
    first = await agent.run("pay both", session=session)
    assert sorted(shown(first)) == [("DE99", 99999), ("UK12", 5000)]
    requests = {r.function_call.parse_arguments()["recipient"]: r
                for r in first.user_input_requests}
    # Approve UK12's request, but answer it in the order and under the id of DE99's.
    approve_uk = requests["UK12"].to_function_approval_response(approved=True)
    swapped = Content.from_function_approval_response(
        approved=True, id=requests["DE99"].id, function_call=requests["DE99"].function_call,
        additional_properties=approve_uk.additional_properties)
    reject_uk = Content.from_function_approval_response(
        approved=False, id=requests["UK12"].id, function_call=requests["UK12"].function_call)
    await agent.run(Message(role="user", contents=[swapped, reject_uk]), session=session)
    assert ("send_money", {"recipient": "DE99", "amount": 99999.0}) not in CALLS


async def test_an_approval_does_not_travel_to_another_session(policies: Any) -> None:
    client = ScriptedChatClient([
        [pay("UK12", 5000, call_id="c1", occurrence="X")],
        [pay("DE99", 99999, call_id="c1", occurrence="X")],
        [text("ok")], [text("ok")],
    ])
    agent = agent_with(client, [send_money], guard(policies))
    mine, theirs = agent.create_session(), agent.create_session()
    approved_here = await agent.run("pay UK12 5000", session=mine)
    await agent.run("pay DE99 99999", session=theirs)
    await agent.run(approve_all(approved_here), session=theirs)
    assert CALLS == []


async def test_an_approval_is_used_once(policies: Any) -> None:
    client = ScriptedChatClient([
        [pay("UK12", 5000, call_id="c1", occurrence="X")],
        [text("paid")],
        [pay("UK12", 5000, call_id="c1", occurrence="X")],
        [text("paid")], [text("paid")],
    ])
    agent = agent_with(client, [send_money], guard(policies))
    session = agent.create_session()
    first = await agent.run("pay UK12 5000", session=session)
    await agent.run(approve_all(first), session=session)
    assert CALLS == [("send_money", {"recipient": "UK12", "amount": 5000.0})]
    again = await agent.run("pay UK12 5000 again", session=session)
    assert shown(again) == [("UK12", 5000)]  # a new approval is asked for
    await agent.run(approve_all(first), session=session)  # the old answer, replayed
    assert len(CALLS) == 1


async def test_an_approval_without_the_guards_binding_is_refused(policies: Any) -> None:
    # An answer built by hand (not from the request the user was shown) carries nothing
    # that ties it to what was shown: it is not an approval of this call.
    client = ScriptedChatClient([[pay("UK12", 5000, call_id="c1", occurrence="X")],
                                 [text("ok")], [text("ok")]])
    agent = agent_with(client, [send_money], guard(policies))
    session = agent.create_session()
    first = await agent.run("pay UK12 5000", session=session)
    [request] = first.user_input_requests
    bare = Content.from_function_approval_response(approved=True, id=request.id,
                                                   function_call=request.function_call)
    await agent.run(Message(role="user", contents=[bare]), session=session)
    assert CALLS == []


async def test_the_shown_approval_runs(policies: Any) -> None:
    client = ScriptedChatClient([[pay("UK12", 5000, call_id="c1", occurrence="X")],
                                 [text("paid")]])
    agent = agent_with(client, [send_money], guard(policies))
    session = agent.create_session()
    first = await agent.run("pay UK12 5000", session=session)
    response = await agent.run(approve_all(first), session=session)
    assert CALLS == [("send_money", {"recipient": "UK12", "amount": 5000.0})]
    assert response.text == "paid"


async def test_an_approval_survives_saving_and_restoring_the_session(policies: Any) -> None:
    import json

    from agent_framework import AgentSession

    client = ScriptedChatClient([[pay("UK12", 5000, call_id="c1", occurrence="X")],
                                 [text("paid")]])
    agent = agent_with(client, [send_money], guard(policies))
    session = agent.create_session()
    first = await agent.run("pay UK12 5000", session=session)
    saved = json.loads(json.dumps(session.to_dict()))
    restored = AgentSession.from_dict(saved)
    answer = Message.from_dict(json.loads(json.dumps(approve_all(first).to_dict())))
    await agent.run(answer, session=restored)
    assert CALLS == [("send_money", {"recipient": "UK12", "amount": 5000.0})]


async def test_a_tampered_token_is_not_an_approval(policies: Any) -> None:
    client = ScriptedChatClient([[pay("UK12", 5000, call_id="c1", occurrence="X")],
                                 [text("ok")], [text("ok")]])
    agent = agent_with(client, [send_money], guard(policies))
    session = agent.create_session()
    first = await agent.run("pay UK12 5000", session=session)
    [request] = first.user_input_requests
    answer = request.to_function_approval_response(approved=True)
    answer.additional_properties = {**answer.additional_properties,
                                    "guardrails_approval": "guessed"}
    await agent.run(Message(role="user", contents=[answer]), session=session)
    assert CALLS == []


async def test_two_calls_sharing_an_id_in_one_batch_run_only_what_was_shown(
        policies: Any) -> None:
    client = ScriptedChatClient([
        [pay("UK12", 5000, call_id="c1", occurrence="X"),
         pay("DE99", 99999, call_id="c2", occurrence="X")],
        [text("ok")], [text("ok")],
    ])
    agent = agent_with(client, [send_money], guard(policies))
    session = agent.create_session()
    first = await agent.run("pay", session=session)
    seen = shown(first)
    await agent.run(approve_all(first), session=session)
    assert [(c[1]["recipient"], c[1]["amount"]) for c in CALLS] == seen
    assert ("send_money", {"recipient": "DE99", "amount": 99999.0}) not in CALLS
