"""Red team, round 5: the scrubber's cost on results full of a known value (promise 8).

The scrubber finds every occurrence of each known value and replaces their union, one
Python step per occurrence. The model chooses a declared secret argument's value (a
four-character ``pin``), and the attacker writes the page the tool returns: a megabyte of
that value repeated cost the call 0.7 s of the event loop (a guard's memory, searched with
RE2, over two seconds), ten megabytes ten times that. Now a text holding more than
``MAX_OCCURRENCES`` occurrences is replaced whole (it holds the secret anyway), and the
escaped redaction stops the same way; below the bound every occurrence is replaced as before.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_framework import AgentSession, tool

from guardrails.agent_framework import ScriptedChatClient
from guardrails.agent_framework.scripted import call, result_text, text
from guardrails.engine import scrub as scrub_module
from guardrails.engine.scrub import Scrubber
from tests.af_support import STREAMING, agent_with, load_text, run

POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: portal}
spec:
  match: {tools: ["portal_page"]}
  secrets:
    arguments: [pin]
"""
PAGES: dict[str, str] = {}


@tool
def portal_page(user: str, pin: str, page: str) -> str:
    """Fetches a page of the portal (the attacker wrote it)."""
    return PAGES[page]


@pytest.fixture(autouse=True)
def _pages() -> None:
    PAGES.clear()


@STREAMING
@pytest.mark.parametrize("repeats", [scrub_module.MAX_OCCURRENCES + 1, 250_000])
async def test_a_page_full_of_the_chosen_secret_is_replaced_whole(
        tmp_path: Path, stream: bool, repeats: int) -> None:
    PAGES["flood"] = "abab " * repeats
    client = ScriptedChatClient([[call("portal_page", user="u", pin="abab", page="flood")],
                                 [text("done")]])
    agent = agent_with(client, [portal_page], [*_guard(tmp_path)])
    await run(agent, "open the portal", stream=stream, session=AgentSession())
    [result] = client.tool_results()
    assert result_text(result) == "[REDACTED]"


@STREAMING
async def test_below_the_bound_every_occurrence_is_replaced(tmp_path: Path,
                                                           stream: bool) -> None:
    PAGES["some"] = "pin abab ok " * 100
    client = ScriptedChatClient([[call("portal_page", user="u", pin="abab", page="some")],
                                 [text("done")]])
    agent = agent_with(client, [portal_page], [*_guard(tmp_path)])
    await run(agent, "open the portal", stream=stream, session=AgentSession())
    [result] = client.tool_results()
    assert result_text(result) == "pin [REDACTED] ok " * 100


def _guard(tmp_path: Path) -> list[object]:
    from guardrails.agent_framework import guard

    return list(guard(load_text(tmp_path, POLICY)))


@pytest.mark.parametrize("many_needles", [False, True], ids=["scan", "re2"])
def test_the_scrubber_stops_at_the_bound(many_needles: bool) -> None:
    extra = [f"zzzz{i:04d}" for i in range(40)] if many_needles else []
    scrub = Scrubber(["abab", *extra])
    bound = scrub_module.MAX_OCCURRENCES
    assert scrub("x abab " * bound) == "x [REDACTED] " * bound
    assert scrub("abab" * (bound + 1)) == "[REDACTED]"  # overlapping ones count too
    assert scrub("x abab " * (bound + 1)) == "[REDACTED]"
    # The layers together: a guard's memory below a call's own values.
    layered = Scrubber(extra or ["cdcd"]).with_values(["abab"])
    assert layered("abab cdcd zzzz0001 " * bound) == "[REDACTED]"


def test_the_escaped_redaction_stops_at_the_bound() -> None:
    import guardrails

    policies = guardrails.load(Path(__file__).resolve().parent.parent / "policies"
                               / "exfiltration.yaml")
    key = "AKIAIOSFODNN7EXAMPLE"
    few = '"' + "\\n" + key + '"'
    assert key not in policies.redact(few)
    # A replacement the pattern matches again, next to an escape: left as it is...
    again = '{"u": "\\"https://u:pw12345@h\\""}'
    assert policies.redact(again) == '{"u": "\\"https://u:[REDACTED:password]@h\\""}'
    # ...but every match is looked at: past the bound the text is replaced whole.
    many = "\\n" + "https://u:pw12345@h " * (scrub_module._MAX_ESCAPED_MATCHES + 1)
    assert policies.redact(many) == "[REDACTED]"
    keys = ("\\n" + key) * (scrub_module._MAX_ESCAPED_MATCHES + 1)
    assert policies.redact(keys) == "[REDACTED]"
    fewer = ("\\n" + key) * scrub_module._MAX_ESCAPED_MATCHES
    assert policies.redact(fewer) == "\\n[REDACTED]" * scrub_module._MAX_ESCAPED_MATCHES
