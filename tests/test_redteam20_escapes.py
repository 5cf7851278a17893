"""Red team 20: a secret in the escape families the scrubber did not read (promise 5).

Red team 19 measured each of these going out whole (docs/security-model.md, promise 5,
then under "Accepted limits"): quoted-printable and MIME encoded words (a mail's source),
a quote doubled by CSV, SQL or shell quoting, octal and CSS escapes, ``%uXXXX``,
percent-encoding of another encoding than UTF-8, fullwidth forms, zero-width or
soft-hyphen characters between a value's characters, a value wrapped over lines. Here a
tool in the framework's real loop receives an injected secret and returns it spelled each
way: inside prose, as a dict result (JSON), in an exception's text and in a log record made
while it runs; then each family inside JSON, ``repr``, HTML and percent-encoding (the
families the scrubber already read), and the library's redact patterns over the same
spellings. Nothing a reader could decode back to the secret may reach the model, the
response, the session, the logs, spans or the decision log.
"""

from __future__ import annotations

import html
import json
import logging
import quopri
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_framework import AgentSession, tool

import guardrails
from guardrails.agent_framework import ScriptedChatClient
from guardrails.agent_framework.scripted import call, text
from guardrails.engine.scrub import Scrubber
from tests.af_support import agent_with, load_text, run
from tests.escape_families import FAMILIES, decoded
from tests.leak_support import Observer, response_places, strings_in

ROOT = Path(__file__).resolve().parent.parent
SECRET = "Grüße\"Zq9'vTx3mW2pLr8"
"""Quotes (for the doubled-quote families), non-ASCII in cp1252 (for percent-encoding of
another encoding than UTF-8) and enough letters to be no accident."""
POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: mail}
spec:
  match: {tools: ["fetch_mail"]}
  secrets:
    inject:
      password: {env: GR_RT20_PASSWORD}
"""

WAYS: dict[str, Callable[[str], Any]] = {
    "prose": lambda s: "Subject: your account\r\n\r\nThe new password is " + s + " (keep it).",
    "dict": lambda s: {"from": "it@example.com", "body": "password: " + s, "n": 3},
    "raise": lambda s: (_ for _ in ()).throw(RuntimeError("mail server said: " + s)),
    "log": lambda s: (logging.getLogger("mail.client").warning("fetched %s", s), "ok")[1],
}
"""How the tool hands the spelled secret back."""

CASE: list[Any] = [FAMILIES["csv"], WAYS["prose"]]


@tool
def fetch_mail(folder: str, password: str) -> Any:
    """Fetches mail (and hands the injected password back, spelled as ``CASE`` says)."""
    spell, way = CASE
    return way(spell(password))


@pytest.fixture(autouse=True)
def _debug_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.DEBUG)
    yield


async def _leaked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                  caplog: pytest.LogCaptureFixture, secret: str = SECRET) -> list[str]:
    """Runs the loop once; every place whose text decodes back to ``secret``."""
    monkeypatch.setenv("GR_RT20_PASSWORD", secret)
    obs = Observer()
    client = ScriptedChatClient([[call("fetch_mail", folder="inbox")], [text("done")]])
    agent = agent_with(client, [fetch_mail], obs.guard(load_text(tmp_path, POLICY)),
                       include_detailed_errors=True)  # the exception's text to the model
    session = AgentSession()
    response = await run(agent, "read my mail", session=session)
    seen = client.model_saw()
    if CASE[1] is not WAYS["log"]:  # the secret was there, and was found
        assert "[REDACTED]" in seen, seen[-300:]
    places = {"model": seen, **response_places(response, session), **obs.places(caplog)}
    return [f"{place}: {s[:160]!r}" for place, v in places.items() for s in strings_in(v)
            if secret in decoded(s)]


@pytest.mark.parametrize("way", list(WAYS))
@pytest.mark.parametrize("family", list(FAMILIES))
async def test_a_secret_spelled_in_each_family_never_leaves(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        family: str, way: str) -> None:
    CASE[:] = [FAMILIES[family], WAYS[way]]
    assert await _leaked(tmp_path, monkeypatch, caplog) == []


_OUTER: dict[str, Callable[[str], str]] = {
    "json": lambda v: json.dumps(v),
    "json-in-json": lambda v: json.dumps({"raw": json.dumps({"v": v})}),
    "repr": repr,
    "html": html.escape,
    "percent": lambda v: urllib.parse.quote(v, safe=""),
}


@pytest.mark.parametrize("outer", list(_OUTER))
@pytest.mark.parametrize("family", list(FAMILIES))
async def test_each_family_inside_the_families_already_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        family: str, outer: str) -> None:
    """A mail's quoted-printable source in a JSON result, a CSV row HTML-escaped, a
    fullwidth key percent-encoded into a link..."""
    spell = FAMILIES[family]
    CASE[:] = [lambda s: _OUTER[outer]("see: " + spell(s) + " end"), WAYS["prose"]]
    assert await _leaked(tmp_path, monkeypatch, caplog) == []


@pytest.mark.parametrize("inner", ["json", "html", "percent"])
@pytest.mark.parametrize("family", ["quoted-printable", "fullwidth", "zero-width", "wrapped",
                                    "csv", "octal"])
def test_each_family_around_the_families_already_read(family: str, inner: str) -> None:
    """The other way round: the value first escaped by JSON, HTML or percent-encoding, and
    the result spelled in a new family (a JSON body in a quoted-printable mail)."""
    text_ = FAMILIES[family](_OUTER[inner]("k=" + SECRET + ";"))
    out = Scrubber([SECRET])(text_)
    assert SECRET not in decoded(out), (text_[:200], out[:200])


@pytest.mark.parametrize("family", list(FAMILIES))
def test_the_scrubber_replaces_only_what_the_value_came_from(family: str) -> None:
    """The marker stands where the value was; the text around it is kept."""
    spelled = FAMILIES[family](SECRET)
    out = Scrubber([SECRET])("before " + spelled + " after")
    assert "[REDACTED]" in out and SECRET not in decoded(out)
    assert out.startswith("before") and out.endswith("after"), out


# --- redact patterns over the same spellings ---------------------------------------------

CREDENTIALS = {
    "aws": ("AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    "github": ("ghp_" + "Zk3Qa9" * 6, "ghp_" + "Zk3Qa9" * 6),
    "assignment": ('password="Wq8vTx3mW2pLr"', "Wq8vTx3mW2pLr"),
}


@pytest.fixture(scope="module", name="exfiltration")
def _exfiltration() -> guardrails.PolicySet:
    return guardrails.load(ROOT / "policies" / "exfiltration.yaml")


@pytest.mark.parametrize("credential", list(CREDENTIALS))
@pytest.mark.parametrize("family", list(FAMILIES))
def test_redact_patterns_read_each_family(exfiltration: guardrails.PolicySet, family: str,
                                          credential: str) -> None:
    written, secret = CREDENTIALS[credential]
    spelled = FAMILIES[family](written)
    texts = ["log line: " + spelled + "\n(next)", json.dumps({"log": "deploy: " + spelled})]
    if not family.startswith("wrapped"):  # joined to the words around it, no \\b is left
        texts.append(FAMILIES[family]("log\n" + written + "\nnext"))
    for text_ in texts:
        out = exfiltration.redact(text_)
        assert secret not in decoded(out), (text_[:200], out[:200])


@pytest.mark.parametrize("family", ["quoted-printable", "fullwidth", "zero-width", "soft-hyphen",
                                    "wrapped", "octal", "css", "percent-u", "mime-b"])
async def test_redact_patterns_read_each_family_in_the_loop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        family: str) -> None:
    """A tool returns an AWS key (no secret injected: the patterns alone) spelled each way."""
    key = "AKIAIOSFODNN7EXAMPLE"
    policy = POLICY + """  redact:
    - name: aws-access-key-id
      regex: '\\b(?:AKIA|ASIA)[0-9A-Z]{16}\\b'
"""
    spell = FAMILIES[family]
    CASE[:] = [lambda s: spell(key), WAYS["dict"]]
    monkeypatch.setenv("GR_RT20_PASSWORD", SECRET)
    obs = Observer()
    client = ScriptedChatClient([[call("fetch_mail", folder="inbox")], [text("done")]])
    agent = agent_with(client, [fetch_mail], obs.guard(load_text(tmp_path, policy)))
    session = AgentSession()
    response = await run(agent, "read my mail", session=session)
    places = {"model": client.model_saw(), **response_places(response, session),
              **obs.places(caplog)}
    assert [s[:160] for v in places.values() for s in strings_in(v) if key in decoded(s)] == []


# --- what must not change ----------------------------------------------------------------

ORDINARY = [
    "x = 1; y = 2; if x == y: print('equal')  # a=b, c=d",
    "width=100 height=200 color=FF0000 opacity=0.5",
    "SELECT * FROM t WHERE name = 'O''Brien' AND note = ''",
    'id,name,quote\n1,Bob,"He said ""hi"" twice"\n2,Ann,""\n',
    "int mode = 0755; char c = '\\101'; printf(\"%o\\n\", 0644);",
    "chmod 644 file && echo 'it'\\''s done'",
    "a { content: \"\\201C\"; } .b::before { content: '\\2014 '; }",
    "progress: 50% done, 75%u of the rest, 100%",
    "ｆｕｌｌｗｉｄｔｈ　ｔｅｘｔ and ﬁne ligatures",
    "soft\u00adhyphen\u00adated and zero\u200bwidth\u200bspaced words",
    "a paragraph that wraps\nover several lines\n  with indentation\r\nand CRLF too",
    "Subject: =?utf-8?q?Caf=C3=A9_menu?= and =?UTF-8?B?SGVsbG8=?=",
    "soft=\r\nbreak and =3D and =C3=A9 in a mail body",
]


@pytest.mark.parametrize("text_", ORDINARY)
def test_ordinary_texts_are_unchanged(text_: str, exfiltration: guardrails.PolicySet) -> None:
    """Prose with ``=`` signs, CSV and SQL with doubled quotes, code with octal numbers,
    CSS, fullwidth, fillers, wrapped lines, mail headers: none holds the secret or a
    credential, and none is changed."""
    assert Scrubber([SECRET, "AKIAIOSFODNN7EXAMPLE", "tok-9Zq2"])(text_) == text_
    assert exfiltration.redact(text_) == text_
    assert exfiltration.redact(json.dumps({"t": text_})) == json.dumps({"t": text_})


@pytest.mark.parametrize("way", list(WAYS))
@pytest.mark.parametrize("secret", ["Zq9x\n.\nw8&yTv3", "Zq9x \nw8&yTv3", "Zq9x\t\r\nw8&yTv3",
                                    "Zq9x&w8yTv3 "])
async def test_a_secret_whose_mail_source_ends_a_line_in_a_lone_byte_never_leaves(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        secret: str, way: str) -> None:
    """In the real loop: ``quopri`` writes a line that is only a dot as ``=2E`` and white
    space at a line's end as ``=20`` or ``=09``, bytes alone that the scrubber did not read
    until session 10 (an accepted limit then)."""
    CASE[:] = [lambda s: quopri.encodestring(s.encode()).decode(), WAYS[way]]
    assert any(lone in quopri.encodestring(secret.encode()).decode()
               for lone in ("=2E", "=20", "=09"))
    assert await _leaked(tmp_path, monkeypatch, caplog, secret) == []
