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

import html
import json
import logging
import re
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_framework import AgentSession, tool
from hypothesis import given, settings
from hypothesis import strategies as st

import guardrails
from guardrails.agent_framework import ScriptedChatClient
from guardrails.agent_framework.scripted import call, result_text, text
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


# --- known values in the escapes of other serializers -------------------------------------
#
# The scrubber removes every spelling our own serializers give a value. Other serializers
# escape otherwise: PHP's json_encode writes ``/`` as ``\/`` (an AWS secret key holds
# slashes), Java's as ``\u00E9`` (upper-case hex), a web page as HTML character references
# (``&amp;``, ``&#39;``), and JSON inside JSON escapes twice. Each went out whole; now the
# scrubber also searches a text with its escapes undone (up to three levels).

SLASHED = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY+EXAMPLEKEY"
AMPERSAND = "Tr0ub4dor&3-h'orse<x>"
ACCENTED = "clé-secrète-42"
INJECTED = {"GR_RT17_SLASHED": SLASHED, "GR_RT17_AMP": AMPERSAND, "GR_RT17_ACCENT": ACCENTED}
INJECT_POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: vault}
spec:
  match: {tools: ["php_api", "html_page", "java_api", "nested_json", "dotnet_link"]}
  secrets:
    inject:
      aws_secret: {env: GR_RT17_SLASHED}
      password: {env: GR_RT17_AMP}
      token: {env: GR_RT17_ACCENT}
"""


def _upper_u(text: str) -> str:
    return re.sub(r"\\u([0-9a-f]{4})", lambda m: "\\u" + m.group(1).upper(), text)


@tool
def php_api(user: str, aws_secret: str, password: str, token: str) -> str:
    """An API written in PHP: json_encode escapes every slash."""
    return json.dumps({"user": user, "secret": aws_secret, "password": password,
                       "token": token}).replace("/", "\\/")


@tool
def html_page(user: str, aws_secret: str, password: str, token: str) -> str:
    """An admin page: the values HTML-escaped."""
    return html.escape(f'<input value="{aws_secret}"> <b>{password}</b> {token}')


@tool
def java_api(user: str, aws_secret: str, password: str, token: str) -> str:
    """A Java service: non-ASCII written as upper-case \\uXXXX."""
    return _upper_u(json.dumps({"secret": aws_secret, "password": password, "token": token}))


@tool
def nested_json(user: str, aws_secret: str, password: str, token: str) -> dict[str, Any]:
    """A result holding a JSON document as text (escaped again by the framework)."""
    return {"body": json.dumps({"secret": aws_secret, "password": password,
                                "token": token})}


@tool
def dotnet_link(user: str, aws_secret: str, password: str, token: str) -> str:
    """A signed link as .NET's UrlEncode writes it: percent-encoding in lower-case hex."""
    query = urllib.parse.urlencode({"s": aws_secret, "p": password, "t": token})
    return "https://files.example/get?" + _lower_hex(query)


def _lower_hex(text_: str) -> str:
    return re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), text_)


def _decoded_forms(text_: str) -> list[str]:
    """``text_`` and what the serializers above make readable again."""
    out = [text_, html.unescape(text_), text_.replace("\\/", "/"),
           urllib.parse.unquote_plus(text_)]
    for _ in range(3):
        try:
            text_ = json.loads(text_) if text_.startswith(("{", '"')) else text_
        except ValueError:
            break
        if isinstance(text_, dict):
            text_ = json.dumps(text_, ensure_ascii=False)
        out.append(str(text_))
    return out


@STREAMING
@pytest.mark.parametrize("tool_name", ["php_api", "html_page", "java_api", "nested_json",
                                       "dotnet_link"])
async def test_injected_values_escaped_by_other_serializers_are_scrubbed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        stream: bool, tool_name: str) -> None:
    for name, value in INJECTED.items():
        monkeypatch.setenv(name, value)
    obs = Observer()
    client = ScriptedChatClient([[call(tool_name, user="ops")], [text("done")]])
    path = tmp_path / "vault.yaml"
    path.write_text(INJECT_POLICY, encoding="utf-8")
    agent = agent_with(client, [php_api, html_page, java_api, nested_json, dotnet_link],
                       obs.guard(guardrails.load(path)))
    session = AgentSession()
    response = await run(agent, "check the vault", stream=stream, session=session)
    [result] = client.tool_results()
    seen = result_text(result)
    assert "[REDACTED]" in seen
    places = {"model": [seen, client.model_saw()], **response_places(response, session),
              **obs.places(caplog)}
    for place, value in places.items():
        for s in strings_in(value):
            for form in _decoded_forms(s):
                assert not any(v in form for v in INJECTED.values()), (place, s[:300])


_SECRET_CHARS = st.sampled_from([*"aZ09/+=&<>\"'\\-_ ", "é", "ß", "€", "😀"])


def _serialized(kind: str, value: str) -> str:
    doc = {"k": value, "n": [value]}
    if kind == "php":
        return json.dumps(doc).replace("/", "\\/")
    if kind == "java":
        return _upper_u(json.dumps(doc))
    if kind == "html":
        return html.escape(f"<p title='{value}'>{value}</p>")
    if kind == "percent-lower":
        return "https://x.example/?" + _lower_hex(urllib.parse.urlencode(doc, doseq=True))
    if kind == "json-in-json":
        return json.dumps({"body": json.dumps(doc)})
    if kind == "json-in-json-ascii":
        return json.dumps({"body": json.dumps(doc)}, ensure_ascii=False)
    return json.dumps([repr(doc)])  # a repr inside JSON


def _readable(kind: str, text_: str) -> str:
    if kind == "html":
        return html.unescape(text_)
    if kind == "percent-lower":
        return urllib.parse.unquote_plus(text_)
    data = json.loads(text_)
    if kind.startswith("json-in-json"):
        data = json.loads(data["body"]) if data["body"].startswith("{") else data
    return json.dumps(data, ensure_ascii=False) if not isinstance(data, str) else data


@settings(max_examples=400, deadline=None)
@given(secret=st.text(_SECRET_CHARS, min_size=6, max_size=24).filter(
           lambda s: s.strip() == s and len(set(s)) > 3),
       kind=st.sampled_from(["php", "java", "html", "percent-lower", "json-in-json",
                             "json-in-json-ascii", "repr-in-json"]),
       around=st.text(st.sampled_from([*"ab /&\\\"'\n", "é"]), max_size=6))
def test_a_known_value_is_gone_from_what_the_serializer_would_decode(
        secret: str, kind: str, around: str) -> None:
    """Scrubbed in the escaped text, the value is not in the text decoded either."""
    scrub = Scrubber([secret])
    form = _serialized(kind, around + secret + around)
    out = scrub(form)
    assert secret not in out
    if kind != "repr-in-json":
        assert secret not in _readable(kind, out)


def test_many_escapes_fail_closed_for_known_values() -> None:
    scrub = Scrubber([SLASHED])
    many = json.dumps({"pad": "\n" * (scrub_module.MAX_ESCAPES + 1), "k": SLASHED})
    assert scrub(many.replace("/", "\\/")) == "[REDACTED]"
    clean = json.dumps({"pad": "\n" * (scrub_module.MAX_ESCAPES + 1), "k": "nothing"})
    assert scrub(clean) == clean


def test_credentials_in_url_encoded_text_are_redacted(policies: guardrails.PolicySet) -> None:
    """A redirect or callback URL carrying a header or an assignment URL-encoded."""
    token = "abcdefghijklmnopqrstuvwxyz0123"
    for link in (f"https://cb.example/r?auth=Bearer%20{token}&x=1",
                 f"https://cb.example/r?q=password%3D{PASSWORD}&y=2",
                 f"https://cb.example/r?q=password%3d{PASSWORD}",
                 "https://cb.example/r?k=%0A" + AWS):
        out = policies.redact(link)
        assert token not in out and PASSWORD not in out and AWS not in out, out
        assert out.startswith("https://cb.example/r?")
    plain = "50% off, 100%, caf%C3%A9 %e2%82%ac"
    assert policies.redact(plain) == plain


@pytest.mark.parametrize("around", ["\\a", "\\\\a", "\\", "a\\"])
def test_a_replacement_never_starts_inside_a_run_of_backslashes(around: str) -> None:
    """Found by the property above (``secret='<0009='``, ``around='\\a'``): in JSON inside
    JSON, a chain of views (a CSS escape ``\\a``, its line break dropped, ``\\<`` read as
    ``<``) mapped the match to the third of four backslashes, which left ``\\[REDACTED]``
    in the inner text: no JSON. The marker now replaces the whole run."""
    for secret in ("<0009=", "Zq9-vTx3"):
        form = _serialized("json-in-json", around + secret + around)
        out = Scrubber([secret])(form)
        assert secret not in _readable("json-in-json", out)


@pytest.mark.parametrize(("kind", "secret", "around"), [
    ("php", '""009<', "\n"), ("php", '009<""', "\n"), ("json-in-json", "0009<\\", "a"),
    ("json-in-json", "<0009=", "\\a"), ("json-in-json-ascii", '"Zq9\\', "\\")])
def test_a_value_of_quotes_and_backslashes_leaves_the_json_json(
        kind: str, secret: str, around: str) -> None:
    """Found by the property above: a value that starts or ends with quotes or a backslash,
    in JSON (or JSON inside JSON), was replaced over a string's delimiter or half an
    escape, and the result was no JSON. Such a span's result is checked, and where it broke
    the JSON, the strings it touches are replaced whole (``scrub._json_kept``)."""
    form = _serialized(kind, around + secret + around)
    out = Scrubber([secret])(form)
    assert "[REDACTED]" in out and secret not in _readable(kind, out)
    assert json.loads(out)
