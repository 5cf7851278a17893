"""Red team 18: secrets in the escaped forms the scrubber's views missed (promise 5).

Two ways out, both in the real loop:

- **Escapes of two families, one inside the other.** The scrubber undid up to three levels
  of JSON/``repr`` escapes, and HTML character references and percent-encoding once each,
  but every HTML and percent view was made of the text as it is, never of a JSON view (or
  the other way round). A web page's text in PHP's ``json_encode`` (``&amp;`` inside a JSON
  string that writes ``/`` as ``\\/`` and non-ASCII as ``\\u00fc``), or an HTML-escaped value
  percent-encoded into a link, went to the model whole. Now each view is made of each
  view before it, by every family, up to three levels in all.
- **Duplicate JSON keys.** A long JSON text is read as JSON first (``json.loads``, C
  speed) and, when its strings hold no value, no view is made. ``json.loads`` keeps only
  the last value of a repeated key: a value spelled in escapes the scrubber does not write
  itself (``\\u00FC``, ``\\/``) in the first ``"k"`` of ``{"k": ..., "k": "x"}`` went out
  whole, and so did a credential after a ``\\n`` (a redact pattern's ``\\b`` fails on the
  escaped text). Now every pair of every object is read.
"""

from __future__ import annotations

import html
import json
import logging
import re
import urllib.parse
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_framework import AgentSession, tool
from hypothesis import given, settings
from hypothesis import strategies as st

import guardrails
from guardrails.agent_framework import ScriptedChatClient
from guardrails.agent_framework.scripted import call, text
from guardrails.engine.scrub import MAX_ESCAPES, Scrubber
from tests.af_support import STREAMING, agent_with, load_text, run
from tests.leak_support import Observer, response_places, strings_in

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "Grüße&Co-Zq9vTx3mW2/pLr8"
AWS = "AKIAIOSFODNN7EXAMPLE"
POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: api}
spec:
  match: {tools: ["echo_back"]}
  secrets:
    inject:
      password: {env: GR_RT18_PASSWORD}
"""
PAD = "a" * 3000
"""Makes a JSON text long enough to be read as JSON first (``scrub._JSON_FIRST``)."""


def _upper_u(value: str) -> str:
    return "".join(f"\\u{ord(c):04X}" for c in value)


def _php(value: str) -> str:
    """PHP's ``json_encode``: ``/`` as ``\\/``, non-ASCII as ``\\uXXXX``."""
    return json.dumps(value).replace("/", "\\/")


SHAPES: dict[str, Callable[[str], Any]] = {
    "html-in-php-json": lambda p: _php(html.escape(p)),
    "html-in-php-json-dict": lambda p: {"page": _php(html.escape(p))},
    "html-then-percent": lambda p: urllib.parse.quote(html.escape(p)),
    "percent-in-html": lambda p: html.escape("<a href='?k=" + urllib.parse.quote(p) + "'>"),
    "html-in-java-json": lambda p: _upper_u(html.escape(p)),
    "json-in-html": lambda p: html.escape(_php(p)),
    "duplicate-key-upper-u": lambda p: '{"k": "' + _upper_u(p) + '", "k": "x", "pad": "'
                                       + PAD + '"}',
    "duplicate-key-php": lambda p: '{"k": "' + _php(p)[1:-1] + '", "k": "x", "pad": "'
                                   + PAD + '"}',
    "duplicate-key-nested": lambda p: '[{"a": {"k": "' + _upper_u(p) + '", "k": 1}}, "'
                                      + PAD + '"]',
}
SHAPE: list[str] = ["html-in-php-json"]


@tool
def echo_back(note: str, password: str) -> Any:
    """Hands the injected password back, escaped as ``SHAPE`` says."""
    return SHAPES[SHAPE[0]](password)


@pytest.fixture(autouse=True)
def _debug_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.DEBUG)
    yield


def _unescape(text_: str) -> str:
    """JSON and ``repr`` backslash escapes undone (``\\/`` included), as a reader would."""
    text_ = text_.replace("\\/", "/")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # "\\q" is kept as it is
            return text_.encode("latin-1", "backslashreplace").decode("unicode_escape")
    except UnicodeDecodeError:
        return text_


_DECODERS = (html.unescape, urllib.parse.unquote, _unescape)


def _decoded(seen: str) -> str:
    """Every decoding an attacker would try on what the model saw (each sequence of up to
    three of HTML, percent and backslash unescaping), joined."""
    out = {seen}
    for _ in range(3):
        out |= {decode(s) for s in out for decode in _DECODERS}
    return "\n".join(out)


@STREAMING
@pytest.mark.parametrize("shape", list(SHAPES))
async def test_a_secret_escaped_twice_by_two_families_never_reaches_the_model(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        stream: bool, shape: str) -> None:
    monkeypatch.setenv("GR_RT18_PASSWORD", PASSWORD)
    SHAPE[0] = shape
    obs = Observer()
    client = ScriptedChatClient([[call("echo_back", note="n")], [text("done")]])
    agent = agent_with(client, [echo_back], obs.guard(load_text(tmp_path, POLICY)))
    session = AgentSession()
    response = await run(agent, "go", stream=stream, session=session)
    [_] = client.tool_results()
    seen = client.model_saw()
    assert "[REDACTED]" in seen
    assert PASSWORD not in _decoded(seen), seen[:300]
    places = {**response_places(response, session), **obs.places(caplog)}
    assert [s[:200] for v in places.values() for s in strings_in(v)
            if PASSWORD in _decoded(s)] == []


@pytest.mark.parametrize("shape", list(SHAPES))
def test_the_scrubber_finds_each_shape(shape: str) -> None:
    value = SHAPES[shape](PASSWORD)
    value = value if isinstance(value, str) else json.dumps(value)
    out = Scrubber([PASSWORD])(value)
    assert PASSWORD not in _decoded(out), out[:300]


@pytest.mark.parametrize("shape", list(SHAPES))
def test_past_the_exact_bound_each_shape_is_replaced_whole(shape: str) -> None:
    """Padded past ``MAX_ESCAPES``, the rough view decides: it composes the families too."""
    value = SHAPES[shape](PASSWORD)
    value = value if isinstance(value, str) else json.dumps(value)
    for padded in ("\\n" * (MAX_ESCAPES + 1) + value, "&amp;" * (MAX_ESCAPES + 1) + value):
        assert PASSWORD not in _decoded(Scrubber([PASSWORD])(padded))


@pytest.fixture(scope="module", name="exfiltration")
def _exfiltration() -> guardrails.PolicySet:
    return guardrails.load(ROOT / "policies" / "exfiltration.yaml")


@pytest.mark.parametrize("text_", [
    '{"log": "deploy\\n' + AWS + '", "log": "ok", "pad": "' + PAD + '"}',
    '{"log": "deploy\\n' + AWS + '", "pad": "' + PAD + '", "log": "ok"}',
    '[{"a": {"cfg": "password=\\"Wq8vTx3mW2pLr\\"", "cfg": null}}, "' + PAD + '"]',
    '{"log": "' + html.escape('password="Wq8vTx3mW2pLr"') + '\\u00e9", "log": 1, "p": "'
    + PAD + '"}',
])
def test_redact_patterns_read_every_duplicate_key(exfiltration: guardrails.PolicySet,
                                                  text_: str) -> None:
    out = exfiltration.redact(text_)
    assert AWS not in out and "Wq8vTx3mW2pLr" not in out, out[:200]
    assert PAD in out  # the rest is kept


def test_text_with_mixed_escapes_and_no_value_is_unchanged() -> None:
    scrub = Scrubber([PASSWORD])
    for shape in SHAPES.values():
        harmless = shape("harmless-value/with&more")
        harmless = harmless if isinstance(harmless, str) else json.dumps(harmless)
        assert scrub(harmless) == harmless


@pytest.mark.parametrize("secret", ["€0009<", "\\n-Zq9vTx3mW2", "Zq9v\\Tx3mW2"])
@pytest.mark.parametrize("around", ["\\", "\\\\", "\\\\\\", "a\\"])
def test_a_match_starting_inside_an_escape_leaves_whole_escapes(secret: str,
                                                                around: str) -> None:
    """A spelling that starts with a backslash was found one character into an escape
    (``\\\\`` + ``\\u20ac``: the needle ``\\u20ac...`` of the ``repr`` form matched from the
    second backslash of ``\\\\``), and the marker left half the escape: the scrubbed JSON no
    longer parsed (found by tests/test_redteam17_secrets.py's property, pre-existing)."""
    scrub = Scrubber([secret])
    value = around + secret + around
    for form in (json.dumps({"k": value}), json.dumps({"b": json.dumps({"k": value})}),
                 json.dumps([repr(value)]), json.dumps(value).replace("/", "\\/")):
        out = scrub(form)
        assert secret not in out
        decoded = json.loads(out)
        if isinstance(decoded, dict) and "b" in decoded:
            decoded = json.loads(decoded["b"])
        assert secret not in json.dumps(decoded, ensure_ascii=False)


# --- every composition of up to three serializers, generated --------------------------------

def _lower_percent(value: str) -> str:
    """.NET's ``UrlEncode``: percent-encoding in lower-case hex."""
    return re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), urllib.parse.quote(value, safe=""))


def _upper_u_nonascii(value: str) -> str:
    """Java's JSON: non-ASCII as ``\\uXXXX`` in upper case."""
    return "".join(json.dumps(c)[1:-1].upper().replace("\\U", "\\u") if not c.isascii()
                   else json.dumps(c)[1:-1] for c in value)


_ESCAPERS: dict[str, Callable[[str], str]] = {
    "json": lambda v: json.dumps(v)[1:-1],
    "json-utf8": lambda v: json.dumps(v, ensure_ascii=False)[1:-1],
    "php": lambda v: _php(v)[1:-1],
    "java": _upper_u_nonascii,
    "repr": lambda v: repr(v)[1:-1],
    "html": html.escape,
    "percent": lambda v: urllib.parse.quote(v, safe=""),
    "percent-plus": urllib.parse.quote_plus,
    "percent-lower": _lower_percent,
}


_CHARS = st.sampled_from([*"aZ09/+=&<>\"'\\-_ %;#.", "é", "ß", "€", "😀", "\n"])


@settings(max_examples=400, deadline=None)
@given(secret=st.text(_CHARS, min_size=8, max_size=20).filter(
           lambda s: s.strip() == s and len(set(s)) > 4),
       chain=st.lists(st.sampled_from(list(_ESCAPERS)), min_size=1, max_size=3),
       around=st.text(st.sampled_from([*"ab &\\\"'\n%<", "é"]), max_size=5))
def test_a_secret_escaped_by_any_three_serializers_is_not_in_any_decoding(
        secret: str, chain: list[str], around: str) -> None:
    """Any sequence of up to three serializers (JSON, PHP's and Java's JSON, ``repr``,
    HTML, percent-encoding in its three forms), the value between arbitrary characters:
    the scrubbed text decoded every way holds no trace of it."""
    text_ = around + secret + around
    for name in chain:
        text_ = _ESCAPERS[name](text_)
    out = Scrubber([secret])(text_)
    assert secret not in _decoded(out), (chain, text_[:200], out[:200])


@settings(max_examples=300, deadline=None)
@given(credential=st.sampled_from([AWS, "ghp_" + "Zk3Qa9" * 6, 'password="Wq8vTx3mW2pLr"']),
       chain=st.lists(st.sampled_from(list(_ESCAPERS)), min_size=1, max_size=3),
       around=st.text(st.sampled_from([*"ab &\\\"'\n\t%<", "é"]), max_size=5))
def test_a_credential_escaped_by_any_three_serializers_is_redacted(
        exfiltration: guardrails.PolicySet, credential: str, chain: list[str],
        around: str) -> None:
    """The library's redact patterns, on the same chains: nothing of the credential is in
    any decoding of the redacted text."""
    text_ = around + "\n" + credential + "\n" + around
    for name in chain:
        text_ = _ESCAPERS[name](text_)
    out = exfiltration.redact(text_)
    secret = credential.split('"')[1] if '"' in credential else credential
    assert secret not in _decoded(out), (chain, text_[:200], out[:200])
