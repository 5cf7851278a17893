"""Red team, round 5: redact patterns against the escaped texts that leave (promise 5).

A redact pattern is written for text as it reads. The texts that leave a guarded call often
carry other texts escaped: a tool's dict or list result reaches the model as JSON (the
framework's ``json.dumps``), an exception's text holds a ``repr``, an MCP server's result is
JSON text. There the library's own patterns missed: a key on a line of its own
(``"log": "line1\\nAKIA..."``: after the ``n`` of ``\\n`` the ``\\b`` of the key pattern does
not hold), a token after a tab, a quoted password (``password=\\"...\\"``: the quote is a
backslash). The same text returned as a ``str`` was redacted; as a dict it went to the
model, the session and the history whole. Now the patterns also search the text with JSON
and ``repr`` escapes undone (up to three levels), and a match there is replaced in the text
as it is.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_framework import AgentSession, tool
from hypothesis import given, settings
from hypothesis import strategies as st

import guardrails
from guardrails.agent_framework import ScriptedChatClient
from guardrails.agent_framework.scripted import call, text
from guardrails.engine import scrub as scrub_module
from guardrails.engine.scrub import Scrubber
from tests.af_support import STREAMING, agent_with, run
from tests.leak_support import Observer, response_places, strings_in

ROOT = Path(__file__).resolve().parent.parent
AWS = "AKIAIOSFODNN7EXAMPLE"
GITHUB = "ghp_" + "Zk3Qa9" * 6
PASSWORD = "Wq8vTx3mW2pLr"
CREDENTIALS = (AWS, GITHUB, PASSWORD)
LOG = f'deploy ok\n{AWS}\nretry\t{GITHUB}\ndb.password="{PASSWORD}"'


@pytest.fixture(scope="module", name="policies")
def _policies() -> guardrails.PolicySet:
    return guardrails.load(ROOT / "policies" / "exfiltration.yaml")


@pytest.fixture(autouse=True)
def _debug_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.DEBUG)
    yield


@tool
def read_log_dict(name: str) -> dict[str, Any]:
    """A log as a dict (the framework sends it to the model as JSON)."""
    return {"name": name, "log": LOG}


@tool
def read_log_list(name: str) -> list[Any]:
    """A log as a list of records."""
    return [{"line": line} for line in LOG.split("\n")] + [LOG]


@tool
def read_log_repr(name: str) -> dict[str, Any]:
    """A dict whose field is another dict's text (a repr inside JSON: escaped twice)."""
    return {"name": name, "config": str({"log": LOG})}


@tool
def read_log_json_text(name: str) -> str:
    """JSON text of its own (an MCP server's structured result), non-ASCII escaped."""
    return json.dumps({"name": name, "note": "café", "log": LOG})


@tool
def failing_with_log(name: str) -> str:
    """Raises with a dict argument: its text is the dict's repr."""
    raise RuntimeError({"name": name, "log": LOG})


TOOLS = [read_log_dict, read_log_list, read_log_repr, read_log_json_text, failing_with_log]


def _found(places: dict[str, Any]) -> list[str]:
    return [f"{place}: {s[:200]!r}" for place, v in places.items() for s in strings_in(v)
            if any(c in s for c in CREDENTIALS)]


@STREAMING
@pytest.mark.parametrize("tool_name", [t.name for t in TOOLS])
async def test_credentials_in_escaped_results_are_redacted(
        policies: guardrails.PolicySet, caplog: pytest.LogCaptureFixture, stream: bool,
        tool_name: str) -> None:
    obs = Observer()
    client = ScriptedChatClient([[call(tool_name, name="prod")], [text("done")]])
    agent = agent_with(client, TOOLS, obs.guard(policies), include_detailed_errors=True)
    session = AgentSession()
    response = await run(agent, "read the deploy log", stream=stream, session=session)
    assert len(client.tool_results()) == 1
    seen = client.model_saw()
    assert "deploy ok" in seen or tool_name == "failing_with_log"  # the rest is still there
    places = {"model": seen, **response_places(response, session), **obs.places(caplog)}
    assert _found(places) == []


def test_the_same_text_unescaped_was_always_redacted(policies: guardrails.PolicySet) -> None:
    """The reference: the log as plain text (what the patterns were written for)."""
    out = policies.redact(LOG)
    assert all(c not in out for c in CREDENTIALS)
    assert "deploy ok" in out


# --- the escaped search, against generated texts ------------------------------------------

_SURROUND = st.text(st.sampled_from([*"ab Z9_-.:=\"'\\/\t\n\r", "é", "ü", "€", "😀", "\x00",
                                     "\u2028"]), max_size=8)


def _serializations(value: str) -> list[str]:
    return [json.dumps(value), json.dumps(value, ensure_ascii=False), repr(value),
            ascii(value), json.dumps({"v": value}), json.dumps([repr({"v": value})]),
            str({"v": value}), json.dumps(json.dumps(value))]


@settings(max_examples=300, deadline=None)
@given(before=_SURROUND, after=_SURROUND,
       secret=st.sampled_from([AWS, GITHUB, "sk-proj-" + "a1B2c3D4" * 4, "xoxb-" + "12ab" * 5]))
def test_a_credential_between_any_characters_is_redacted_in_every_serialization(
        policies: guardrails.PolicySet, before: str, after: str, secret: str) -> None:
    """Wherever plain text with the credential is redacted, so is every serialization of it
    (JSON with and without ``ensure_ascii``, ``repr``, a ``repr`` inside JSON, JSON twice)."""
    plain = before + "\n" + secret + "\n" + after
    assert secret not in policies.redact(plain)
    for form in _serializations(plain):
        out = policies.redact(form)
        assert secret not in out, form
        assert secret[4:-4] not in out, form


@settings(max_examples=300, deadline=None)
@given(value=st.text(max_size=40), secret=st.sampled_from([AWS, GITHUB]),
       where=st.integers(0, 40))
def test_redacting_escaped_json_keeps_it_valid_json(
        policies: guardrails.PolicySet, value: str, secret: str, where: int) -> None:
    """A match is replaced over whole escapes, never cutting one: JSON stays JSON."""
    plain = value[:where] + "\n" + secret + "\n" + value[where:]
    for ensure_ascii in (True, False):
        form = json.dumps({"v": plain, "w": [plain]}, ensure_ascii=ensure_ascii)
        out = policies.redact(form)
        assert secret not in out
        parsed = json.loads(out)
        assert secret not in parsed["v"]


@settings(max_examples=200, deadline=None)
@given(value=st.text(st.sampled_from([*"ab \"'\\\n\t", "é", "😀"]), max_size=30))
def test_text_without_a_credential_is_unchanged(policies: guardrails.PolicySet,
                                                value: str) -> None:
    """The escaped search only ever replaces what a pattern matches."""
    for form in _serializations(value):
        assert policies.redact(form) == form


def test_a_text_with_very_many_escapes_is_bounded_and_fails_closed(
        policies: guardrails.PolicySet) -> None:
    """Past ``MAX_ESCAPES`` the exact search is not run: a text a rough view finds a
    credential in is replaced whole; one without any is left as it is."""
    many = "\n" * (scrub_module.MAX_ESCAPES + 1)
    with_key = json.dumps({"log": many + AWS})
    assert policies.redact(with_key) == "[REDACTED]"
    without = json.dumps({"log": many + "nothing here"})
    assert policies.redact(without) == without
    quoted = json.dumps({"log": many + f'password="{PASSWORD}"'})
    assert policies.redact(quoted) == "[REDACTED]"


def test_the_scrubber_applies_it_with_known_values_too(policies: guardrails.PolicySet) -> None:
    scrub = Scrubber(["known-secret-value"], policies.redact)
    form = json.dumps({"a": "x\nknown-secret-value\n" + AWS})
    out = scrub(form)
    assert "known-secret-value" not in out and AWS not in out
