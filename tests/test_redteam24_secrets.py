"""Red team 24: an injected secret spelled in forms the widened normalisation (scrub22)
did not cover, and in the places an exception or a result object carries it (promise 5),
in the framework's real loop (red team 20's harness: a tool returns the injected password
spelled each way, in prose, a dict result, an exception and a log record).

Found (each went out whole before the fix):

- the same characters in *mixed* normal forms: one accented letter decomposed, another
  not (a value built from two sources, one NFD like a macOS file name), or the combining
  marks of one letter in another order than the canonical one (``e`` + circumflex + dot
  below is ``ệ``). The scrubber searched the value's NFC and NFD forms, never the text
  composed, so only a text wholly in one form was read; also behind a fullwidth letter
  or a zero-width space between the letter and its mark, JSON ``\\u`` escapes, HTML
  numeric references and percent-encoding;
- characters that show as nothing but were not read as fillers: variation selectors
  (``U+FE00``-``U+FE0F``, ``U+E0100``-``U+E01EF``), the Mongolian free variation
  selectors, tag characters (``U+E0000``-``U+E007F``) and the combining grapheme joiner
  between a value's characters (IDNA's mapping ignores every one of them).
"""

from __future__ import annotations

import html
import logging
import unicodedata
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_framework import AgentSession, Content
from pydantic import BaseModel

import guardrails
from guardrails.agent_framework import ScriptedChatClient
from guardrails.agent_framework.scripted import call, text
from guardrails.engine import scrub
from guardrails.engine.scrub import Scrubber
from tests import test_redteam20_escapes as redteam20
from tests.af_support import agent_with, load_text, run
from tests.escape_families import decoded
from tests.leak_support import Observer, response_places, strings_in
from tests.test_redteam20_escapes import CASE, POLICY, WAYS, _leaked, fetch_mail

SECRET = "Ngệ-Café\"Zq9'vTx3mW2pL"
"""NFC, with two letters that decompose (one into a letter and two marks) and quotes."""

_INVISIBLE = ("\ufe0f", "\ufe00", "\U000e0100", "\u180b", "\u180f", "\U000e0041",
              "\U000e007f", "\U000e0001")
"""Variation selectors, Mongolian free variation selectors, tag characters."""


def _first_decomposed(value: str) -> str:
    """Only the first letter that decomposes is decomposed."""
    for i, c in enumerate(value):
        d = unicodedata.normalize("NFD", c)
        if d != c:
            return value[:i] + d + value[i + 1:]
    raise AssertionError(value)


def _last_decomposed(value: str) -> str:
    for i in range(len(value) - 1, -1, -1):
        d = unicodedata.normalize("NFD", value[i])
        if d != value[i]:
            return value[:i] + d + value[i + 1:]
    raise AssertionError(value)


def _marks_reordered(value: str) -> str:
    """Each letter decomposed, its marks in reverse order (not canonical; NFC composes
    them all the same)."""
    out = []
    for c in value:
        d = unicodedata.normalize("NFD", c)
        out.append(d[0] + d[:0:-1] if len(d) > 2 else d)
    return "".join(out)


def _fullwidth(value: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in value)


def _between(filler: str) -> Callable[[str], str]:
    return lambda value: filler.join(value)


SPELLINGS: dict[str, Callable[[str], str]] = {
    "first-decomposed": _first_decomposed,
    "last-decomposed": _last_decomposed,
    "marks-reordered": _marks_reordered,
    "fullwidth-first-decomposed": lambda v: _fullwidth(_first_decomposed(v)),
    "zero-width-before-a-mark": lambda v: "\u200b".join(_last_decomposed(v)),
    "html-numeric-first-decomposed": lambda v: html.escape(_first_decomposed(v)).encode(
        "ascii", "xmlcharrefreplace").decode(),
    "percent-first-decomposed": lambda v: urllib.parse.quote(_first_decomposed(v)),
    "repr-ascii-last-decomposed": lambda v: ascii(_last_decomposed(v)),
    **{f"between-U+{ord(f):04X}": _between(f) for f in (*_INVISIBLE, "\u034f")},
}

_INVISIBLES = str.maketrans(dict.fromkeys(map(ord, (*_INVISIBLE, "\u034f"))))


def _readable(text: str) -> str:
    """A reader composes the text and drops what shows as nothing, then decodes."""
    composed = unicodedata.normalize("NFC", text.translate(_INVISIBLES))
    return decoded(text) + "\0" + decoded(composed) + "\0" + unicodedata.normalize(
        "NFC", decoded(composed))


@pytest.fixture(autouse=True)
def _debug_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.DEBUG)
    yield


@pytest.mark.parametrize("way", list(WAYS))
@pytest.mark.parametrize("spelling", list(SPELLINGS))
async def test_a_secret_in_mixed_forms_and_invisible_characters_never_leaves(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        spelling: str, way: str) -> None:
    CASE[:] = [SPELLINGS[spelling], WAYS[way]]
    monkeypatch.setattr(redteam20, "decoded", _readable)
    assert await _leaked(tmp_path, monkeypatch, caplog, secret=SECRET) == []


@pytest.mark.parametrize("spelling", list(SPELLINGS))
def test_the_scrubber_reads_each_form_and_keeps_the_text(spelling: str) -> None:
    spelled = SPELLINGS[spelling](SECRET)
    out = Scrubber([SECRET])("before " + spelled + " after")
    assert "[REDACTED]" in out and SECRET not in _readable(out), out
    assert out.startswith("before ") and out.endswith(" after"), out


@pytest.mark.parametrize("text", [
    "Tiếng Việt có dấu: người, được, những",                  # composed
    unicodedata.normalize("NFD", "Tiếng Việt có dấu: người"),  # decomposed
    "नमस्ते दुनिया, क़िला",                                         # marks, a nukta
    "I \u2764\ufe0f caf\u00e9 and cafe\u0301 \U0001f44d\U0001f3fd",  # emoji presentation
    "\u212b is an angstrom, \u2126 an ohm",                    # singletons NFC changes
    "\u1100\u1161\u11a8 and \uac01",                           # conjoining jamo
])
def test_ordinary_texts_with_marks_are_unchanged(text: str) -> None:
    assert Scrubber([SECRET])(text) == text


# --- the places an exception or a result object carries the value -----------------------

class _Receipt(BaseModel):
    account: str
    note: str


def _group(s: str) -> Any:
    raise ExceptionGroup("two failures", [ValueError("first"), KeyError(s)])


def _noted(s: str) -> Any:
    error = RuntimeError("mail server refused the login")
    error.add_note("while sending " + s)
    raise error


def _caused(s: str) -> Any:
    try:
        raise ConnectionError("login " + s)
    except ConnectionError as inner:
        raise RuntimeError("could not fetch") from inner


def _context(s: str) -> Any:
    try:
        raise ConnectionError("login " + s)
    except ConnectionError:
        raise RuntimeError("could not fetch") from None


def _bytes_arg(s: str) -> Any:
    raise RuntimeError(b"AUTH " + s.encode("utf-8"), 535)


PLACES: dict[str, Callable[[str], Any]] = {
    "exception-group": _group,
    "notes": _noted,
    "cause": _caused,
    "suppressed-context": _context,
    "bytes-argument": _bytes_arg,
    "pydantic-model": lambda s: _Receipt(account="it@example.com", note="pw " + s),
    "contents": lambda s: [Content.from_text("ok"),
                           Content.from_uri("https://mail.example/login?pw="
                                            + urllib.parse.quote(s), media_type="text/html",
                                            additional_properties={"pw": s})],
    "nested-list": lambda s: [{"k": [s, {"deep": (s,)}]}],
}


async def _leaked_anywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                           caplog: pytest.LogCaptureFixture) -> list[str]:
    """Red team 20's ``_leaked`` for a place the framework may not show the model at all
    (an exception's notes or cause): every place whose text a reader decodes back to the
    secret, the model's view among them."""
    monkeypatch.setenv("GR_RT20_PASSWORD", SECRET)
    obs = Observer()
    client = ScriptedChatClient([[call("fetch_mail", folder="inbox")], [text("done")]])
    agent = agent_with(client, [fetch_mail], obs.guard(load_text(tmp_path, POLICY)),
                       include_detailed_errors=True)
    session = AgentSession()
    response = await run(agent, "read my mail", session=session)
    places = {"model": client.model_saw(), **response_places(response, session),
              **obs.places(caplog)}
    return [f"{place}: {s[:160]!r}" for place, v in places.items() for s in strings_in(v)
            if SECRET in _readable(s)]


@pytest.mark.parametrize("spelling", ["as-is", "first-decomposed", "between-U+FE0F"])
@pytest.mark.parametrize("place", list(PLACES))
async def test_each_place_carries_no_form_of_the_secret(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        place: str, spelling: str) -> None:
    spell = SPELLINGS.get(spelling, lambda v: v)
    CASE[:] = [spell, PLACES[place]]
    assert await _leaked_anywhere(tmp_path, monkeypatch, caplog) == []


def test_every_character_composing_joins_or_changes_is_read() -> None:
    """``scrub._COMPOSE_RANGES`` hold every combining mark, every second character of a
    canonical pair and every character NFC changes alone: read from every code point."""
    joined, alone = scrub._composing_among(range(0x110000))
    assert (scrub._class(joined), scrub._class(alone)) == (scrub._JOINED, scrub._ALONE)
    # The BMP's pattern (a bitmap to ``re``) reads every one of them there, the whole
    # pattern those past it.
    for code in joined:
        pattern = scrub._COMPOSED if code < 0x10000 else scrub._COMPOSED_ALL
        assert pattern.fullmatch("a" + chr(code)), hex(code)
    for code in alone:
        pattern = scrub._COMPOSED if code < 0x10000 else scrub._COMPOSED_ALL
        assert pattern.fullmatch(chr(code)), hex(code)


@pytest.mark.parametrize("padding", ["\\n" * 5000, "caf\u00e9 \u200b" * 40000])
def test_mixed_forms_past_the_view_bounds_are_still_found(padding: str) -> None:
    """Past ``MAX_ESCAPES`` (the rough view decides: the text replaced whole) and past
    the views' size (one family's view at a time), the composed reading still applies."""
    spelled = _marks_reordered(SECRET)
    out = Scrubber([SECRET])(padding + " " + spelled + " end")
    assert SECRET not in _readable(out) and "[REDACTED]" in out


@pytest.mark.parametrize("filler", ["\ufe0f", "\U000e0041", "\u180b"])
@pytest.mark.parametrize("credential", ["AKIAIOSFODNN7EXAMPLE", "ghp_" + "Zk3Qa9" * 6])
def test_redact_patterns_read_through_invisible_selectors(credential: str,
                                                          filler: str) -> None:
    """The library's redact patterns over a credential with a selector between each of
    its characters (read as fillers, as the values are)."""
    policies = guardrails.load(Path(__file__).resolve().parent.parent / "policies"
                               / "exfiltration.yaml")
    out = policies.redact("deploy key: " + filler.join(credential) + " (rotate)")
    assert credential not in _readable(out) and "[REDACTED]" in out, out
