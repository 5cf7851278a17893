"""Red team 27c: this session's new defences attacked (promises 5 and 6).

Found (secrets, promise 5): the few-needle scan lowered texts with ``str.lower``, which is
not a character-for-character map: it writes a capital sigma as a *final* sigma when no
cased letter follows it, so a value ending in ``Σ`` (its needle ``...ς``) handed back
verbatim with a letter after it (``key-12ΑΣb``: the text lowers to ``...σb``) went out
whole; and case forms that ``str.lower`` does not bring together went out on both paths
(the RE2 memory too): a value with a dotless ``ı`` upper-cased (``KIRMIZI``), a value with
the dotted ``İ`` lowered by Python (``i`` and a combining dot) or without its dot
(``istanbul``, ``ISTANBUL``), a value with ``ß`` written ``SS``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_framework import Agent, AgentSession, Content, Message, tool

from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework.scripted import call, text
from guardrails.engine import scrub as sc
from guardrails.engine.scrub import Scrubber
from tests import test_redteam20_escapes as redteam20
from tests.af_support import (
    STREAMING,
    agent_with,
    approve_all,
    clear_calls_fixture,
    load_text,
    policies_fixture,
    run,
)
from tests.af_tools import CALLS, send_money
from tests.escape_families import decoded
from tests.test_redteam20_escapes import CASE, WAYS, _leaked
from tests.test_redteam27_approvals import delete_all


@pytest.fixture(autouse=True)
def _debug_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.DEBUG)
    yield


def _many() -> list[str]:
    """Values past ``_SCAN_NEEDLES``: a guard's memory, searched by RE2."""
    return [f"tok-{i:04d}-{i * 7919:08x}" for i in range(40)]


CASE_FORMS: dict[str, tuple[str, str]] = {
    "final-sigma-then-letter": ("key-12ΑΣ", "key-12ΑΣb"),
    "final-sigma-upper-then-letter": ("key-12ΑΣ", "KEY-12ΑΣB"),
    "final-sigma-in-word": ("pw-ΛΟΓΟΣ", "PW-ΛΟΓΟΣΑ"),
    "dotless-i-upper": ("kırmızı-9931", "KIRMIZI-9931"),
    "dotted-I-lowered": ("İstanbul-pass-9", "İstanbul-pass-9".lower()),
    "dotted-I-turkish-lower": ("İstanbul-pass-9", "istanbul-pass-9"),
    "dotted-I-ascii-upper": ("İstanbul-pass-9", "ISTANBUL-PASS-9"),
    "sharp-s-SS": ("straße-key-77", "STRASSE-KEY-77"),
    "capital-sharp-s-ss": ("STRAẞE-KEY-77", "strasse-key-77"),
    "micro-upper": ("µ-key-12345", "Μ-KEY-12345"),
    "long-s-upper": ("ſecret-9931", "SECRET-9931"),
    "kelvin": ("Kelvin-77-abc", "\u212aelvin-77-abc"),
    "beta-symbol-upper": ("ϐeta-key-9931", "ΒETA-KEY-9931"),
    "cherokee-lower": ("ᏣᎳᎩ-key-99", "ꮳꮃꭹ-key-99"),
    "titlecase-digraph": ("ǅemal-key-99", "ǄEMAL-KEY-99"),
    "georgian-mtavruli": ("Ნino-key-99", "ნino-key-99"),
}
"""A value and a case form of it a tool may write (Python's ``upper``/``lower``, a
Turkish-insensitive ``ToLower``, German capitalisation)."""


@pytest.mark.parametrize("memory", [False, True], ids=["few", "memory"])
@pytest.mark.parametrize("case", list(CASE_FORMS))
def test_a_value_in_each_case_form_is_found(case: str, memory: bool,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Each case form, by the few-needle scan (its folding) and a memory's RE2 search (RE2's
    folding) alike; the text around it is kept."""
    secret, form = CASE_FORMS[case]
    if not memory:  # a value's case forms may take it past _SCAN_NEEDLES on their own
        monkeypatch.setattr(sc, "_SCAN_NEEDLES", 1 << 20)
    scrub = Scrubber([secret, *(_many() if memory else [])])
    assert (len(scrub._needles) > sc._SCAN_NEEDLES) is memory
    out = scrub("val " + form + " end")
    assert "[REDACTED]" in out, out
    assert out.startswith("val ") and out.endswith(" end"), out


def _upper_reader(text: str) -> str:
    """A reader who reads any case: the text's readings upper-cased."""
    return decoded(text).upper()


@pytest.mark.parametrize("way", list(WAYS))
@pytest.mark.parametrize("case", ["final-sigma-then-letter", "dotless-i-upper",
                                  "dotted-I-turkish-lower", "sharp-s-SS"])
async def test_a_case_form_never_leaves_the_loop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        case: str, way: str) -> None:
    """Real loop: the injected secret handed back in the case form (prose, a dict result,
    an exception, a log line); a reader who upper-cases what it sees finds nothing."""
    secret, form = CASE_FORMS[case]
    CASE[:] = [lambda s: form if s == secret else s, WAYS[way]]
    monkeypatch.setattr(redteam20, "decoded", _upper_reader)
    monkeypatch.setattr(redteam20, "SECRET", secret)
    target = secret.upper() if case != "dotted-I-turkish-lower" else "ISTANBUL-PASS-9"
    assert target in _upper_reader(form)
    # _leaked injects ``secret`` and looks for ``target`` in what the reader gets back
    assert await _leaked_as(tmp_path, monkeypatch, caplog, secret, target) == []


async def _leaked_as(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                     caplog: pytest.LogCaptureFixture, secret: str, target: str) -> list[str]:
    reader: Callable[[str], str] = redteam20.decoded
    monkeypatch.setattr(redteam20, "decoded",
                        lambda text: secret if target in reader(text) else "")
    return await _leaked(tmp_path, monkeypatch, caplog, secret=secret)


def test_the_fold_is_one_character_each_and_keeps_anchors() -> None:
    """``_folded`` maps each character on its own (a text and any slice of it fold alike,
    whatever the neighbours: the sigma), to one character (spans fit the text), never to an
    ASCII character other than a letter but that character itself (``_anchors`` stays
    sound), and alike for a character and each one-character case form of it, but the
    dotless i's ``I`` (a case form of the value: ``_case_forms``); ``_ODD_FOLDS`` is what
    ``str.lower`` leaves apart, worked out here over every code point."""
    import sys

    image = set()
    for x in range(sys.maxunicode + 1):
        if 0xD800 <= x < 0xE000:
            continue
        c = chr(x)
        if len(c.lower()) == 1:
            image.add(c.lower())
        f = sc._folded(c)
        assert len(f) == 1, hex(x)
        assert not (f.isascii() and not f.isalpha() and f != c), hex(x)
        assert sc._folded("A" + c + "b") == "a" + f + "b", hex(x)
        assert sc._folded("A" + c) == "a" + f, hex(x)
        for form in (c.lower(), c.upper(), c.casefold()):
            if len(form) == 1 and c != "\u0131":
                assert sc._folded(form) == f, (hex(x), form)
    odd = {ord(x): ord(x.casefold()) for x in image
           if len(x.casefold()) == 1 and x.casefold() != x and x.casefold() in image
           and x.casefold().lower() == x.casefold()}
    assert odd == sc._ODD_FOLDS
    text = "ΟΔΟΣ straße İstanbul ΣΑΣ ẞ ﬁ µ ſ x"
    assert sc._folded(text) == "".join(sc._folded(c) for c in text)


# --- approvals (promise 6): the legit flows still work, the attacks do not ----------------

_clear_calls = clear_calls_fixture()
policies = policies_fixture()


def _pay(recipient: str, amount: float, call_id: str) -> Content:
    return Content.from_function_call(call_id=call_id, name="send_money", id=call_id,
                                      arguments={"recipient": recipient, "amount": amount})


def _restored(session: Any) -> Any:
    """The session saved as JSON and read back (a process restart in between)."""
    return AgentSession.from_dict(json.loads(json.dumps(session.to_dict())))


@STREAMING
async def test_a_batch_of_guard_approvals_answered_across_two_messages(
        policies: Any, stream: bool) -> None:
    """Two payments that need approval in one batch; the user answers one, then the other
    in a later message. The framework replays the batch once both are answered: each runs
    once."""
    client = ScriptedChatClient([[_pay("UK12", 5000, "c1"), _pay("DE99", 6000, "c2")]],
                                default=[text("done")])
    agent = agent_with(client, [send_money], guard(policies))
    session = agent.create_session()
    first = await agent.run("pay both", session=session)
    answers = [r.to_function_approval_response(approved=True)
               for r in first.user_input_requests]
    assert len(answers) == 2
    for group in (answers[:1], answers[1:]):
        await run(agent, Message(role="user", contents=group), session=session, stream=stream)
    assert sorted(CALLS, key=str) == [("send_money", {"recipient": "DE99", "amount": 6000.0}),
                                      ("send_money", {"recipient": "UK12", "amount": 5000.0})]


@pytest.mark.parametrize("framework", [False, True], ids=["guard", "always-require"])
async def test_an_answer_after_a_restart(policies: Any, framework: bool) -> None:
    """The session saved after the request and restored before the answer: the answer
    runs the call once."""
    first_call = (call("delete_all", "d1", what="tmp") if framework
                  else _pay("UK12", 5000, "c1"))
    client = ScriptedChatClient([[first_call]], default=[text("done")])
    tools = [delete_all] if framework else [send_money]
    agent = agent_with(client, tools, guard(policies))
    session = agent.create_session()
    first = await agent.run("go", session=session)
    session = _restored(session)
    agent = agent_with(client, tools, guard(policies))  # a new process: a new agent and guard
    await agent.run(approve_all(first), session=session)
    await agent.run(approve_all(first), session=_restored(session))
    ran = [("delete_all", {"what": "tmp"})] if framework else [
        ("send_money", {"recipient": "UK12", "amount": 5000.0})]
    assert ran == CALLS


async def test_an_answer_beside_the_users_words(policies: Any) -> None:
    """The user's message holds words and the answer: it runs the call."""
    client = ScriptedChatClient([[_pay("UK12", 5000, "c1")]], default=[text("done")])
    agent = agent_with(client, [send_money], guard(policies))
    session = agent.create_session()
    first = await agent.run("pay", session=session)
    [request] = first.user_input_requests
    await agent.run(Message(role="user", contents=[
        Content.from_text("yes, go ahead"), request.to_function_approval_response(approved=True),
        Content.from_text("thanks")]), session=session)
    assert CALLS == [("send_money", {"recipient": "UK12", "amount": 5000.0})]


class _Principal(dict):  # type: ignore[type-arg]
    """A host's principal object: a mapping with behaviour."""

    def can(self, what: str) -> bool:
        return what in self.get("roles", [])


PRINCIPALS: dict[str, Any] = {
    "callable": lambda context: {"sub": "alice", "roles": ["payer"]},
    "async-callable": None,  # filled below
    "object": _Principal(sub="alice", roles=["payer"]),
    "callable-of-object": lambda context: _Principal(sub="alice", roles=["payer"]),
}


async def _async_principal(context: Any) -> Any:
    return {"sub": "alice", "roles": ["payer"]}

PRINCIPALS["async-callable"] = _async_principal


@pytest.mark.parametrize("principal", list(PRINCIPALS))
async def test_an_answer_with_a_principal_source(policies: Any, principal: str) -> None:
    """The principal given as a callable (sync or async) or an object: the approval the
    user gives runs the call."""
    client = ScriptedChatClient([[_pay("UK12", 5000, "c1")]], default=[text("done")])
    agent = agent_with(client, [send_money], guard(policies, principal=PRINCIPALS[principal]))
    session = agent.create_session()
    first = await agent.run("pay", session=session)
    await agent.run(approve_all(first), session=session)
    assert CALLS == [("send_money", {"recipient": "UK12", "amount": 5000.0})]


@tool(name="delete_all", approval_mode="always_require")
def treasury_delete_all(what: str) -> str:
    """Delete everything of the treasury's (another agent's tool of the same name)."""
    CALLS.append(("treasury_delete_all", {"what": what}))
    return "deleted from the treasury"


@STREAMING
@pytest.mark.parametrize("shared_guard", [True, False], ids=["one-guard", "a-guard-each"])
async def test_a_framework_approval_for_one_agent_runs_nothing_of_another(
        policies: Any, shared_guard: bool, stream: bool) -> None:
    """Promise 6 says an approval covers the agent that made the call; the framework's own
    approvals (``always_require``) too: the user's answer to the personal agent's request,
    handed to the treasury agent's run in the same session, must not run the treasury's
    tool of the same name."""
    personal_guard = guard(policies)
    personal = Agent(client=ScriptedChatClient([[call("delete_all", "d1", what="tmp")]],
                                               default=[text("done")]),
                     tools=[delete_all], middleware=personal_guard, name="personal")
    treasury = Agent(client=ScriptedChatClient(default=[text("done")]),
                     tools=[treasury_delete_all], name="treasury",
                     middleware=personal_guard if shared_guard else guard(policies))
    session = personal.create_session()
    first = await run(personal, "clean tmp", session=session, stream=stream)
    assert len(first.user_input_requests) == 1
    await run(treasury, approve_all(first), session=session, stream=stream)
    assert CALLS == []


@STREAMING
async def test_a_framework_approval_runs_for_the_agent_that_asked(policies: Any,
                                                                  stream: bool) -> None:
    """The control: a named agent's request, answered in its own run, runs once."""
    personal = Agent(client=ScriptedChatClient([[call("delete_all", "d1", what="tmp")]],
                                               default=[text("done")]),
                     tools=[delete_all], middleware=guard(policies), name="personal")
    session = personal.create_session()
    first = await run(personal, "clean tmp", session=session, stream=stream)
    await run(personal, approve_all(first), session=session, stream=stream)
    assert CALLS == [("delete_all", {"what": "tmp"})]


FRAMEWORK_PER_PRINCIPAL = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: deletes}
spec:
  match: {tools: ["delete_all"]}
  rules:
    - {name: frozen, when: 'principal.user == "frozen"', action: deny}
"""


@pytest.mark.parametrize("answered_as", [
    "alice", pytest.param("mallory", marks=pytest.mark.xfail(strict=True, reason=(
        "limit: the guard never sees a call the framework asks approval for, so it cannot "
        "resolve the principal the call was made for")))])
async def test_a_framework_approval_for_one_principal_runs_for_no_other(
        tmp_path: Path, answered_as: str) -> None:
    """The framework asked, for alice's call, approval of ``delete_all``; the answer given
    in a run the host makes for mallory (a shared session, a forwarded answer) must not run
    it as mallory's call."""
    who = {"user": "alice"}
    client = ScriptedChatClient([[call("delete_all", "d1", what="tmp")]],
                                default=[text("done")])
    agent = agent_with(client, [delete_all],
                       guard(load_text(tmp_path, FRAMEWORK_PER_PRINCIPAL),
                             principal=lambda _ctx: dict(who)))
    session = agent.create_session()
    first = await agent.run("clean tmp", session=session)
    assert len(first.user_input_requests) == 1
    who["user"] = answered_as
    await agent.run(approve_all(first), session=session)
    assert ([("delete_all", {"what": "tmp"})] if answered_as == "alice" else []) == CALLS


@pytest.mark.parametrize("order", ["ascii-below", "greek-below"])
def test_layers_asking_about_other_odd_characters(order: str) -> None:
    """A layer looks at the ``_ODD_FOLDS`` characters that fold to its needles' letters
    only (``Scrubber._odd_folded``); the text lowered once serves every layer, folded whole
    once for those that need it: an ASCII layer's ``ſ`` and a Greek layer's final sigma in
    one text, whichever layer comes first."""
    ascii_value, greek_value = "password-77", "κλειδισ-99"
    below, above = ((ascii_value, greek_value) if order == "ascii-below"
                    else (greek_value, ascii_value))
    scrub = Scrubber([below]).with_values([above])
    for given, out in {"PAſſWORD-77 and ΚΛΕΙΔΙΣ-99": "[REDACTED] and [REDACTED]",
                      "ΚΛΕΙΔΙΣ-99 and paſsword-77": "[REDACTED] and [REDACTED]",
                      "κλειδις-99 only": "[REDACTED] only",
                      "paßword-77 kept": "paßword-77 kept"}.items():
        assert scrub(given) == out, given
