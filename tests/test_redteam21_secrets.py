"""Red team 21: an injected secret in HTML and C spellings the scrubber did not read
(promise 5), in the framework's real loop (red team 20's harness: a tool returns the
injected password spelled each way, in prose, a dict result, an exception and a log record).

- ``htmlentities``: PHP's ``htmlentities`` (and any HTML writer using named references)
  spells ``ü`` as ``&uuml;`` and ``ß`` as ``&szlig;``: the HTML family knew only
  ``&quot; &amp; &apos; &lt; &gt;``, so ``Gr&uuml;&szlig;e...`` went out whole. So did
  named references for punctuation (``&QUOT;``, ``&sol;``, ``&plus;``, ``&equals;``).
- numeric references without their ``;`` (``&#71&#114...``), which every browser and
  ``html.unescape`` decode.
- every byte of the value's UTF-8 as a C ``\\xXX`` escape (C, Go, a shell's ``$'...'``,
  ``printf``): ``\\xc3\\xbc`` was read as ``Ã¼``, where octal escapes were read as UTF-8.
"""

from __future__ import annotations

import html.entities
import logging
import re
import shlex
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from guardrails.engine.scrub import Scrubber
from tests import test_redteam20_escapes as redteam20
from tests.escape_families import decoded
from tests.test_redteam20_escapes import CASE, SECRET, WAYS, _leaked

_NAMES: dict[str, str] = {}
for _name, _char in sorted(html.entities.html5.items()):
    if _name.endswith(";") and len(_char) == 1:
        _NAMES.setdefault(_char, _name)


def _htmlentities(value: str) -> str:
    """As PHP's ``htmlentities`` writes a text: a named reference for each character
    HTML 4 names."""
    return "".join(f"&{html.entities.codepoint2name[ord(c)]};"
                   if ord(c) in html.entities.codepoint2name else c for c in value)


def _named_everywhere(value: str) -> str:
    """A named reference for every character HTML 5 names (``&QUOT;``, ``&apos;``...)."""
    return "".join("&" + _NAMES[c] if c in _NAMES else c for c in value)


def _no_semicolons(value: str) -> str:
    return "".join(f"&#{ord(c)}" for c in value)


def _hex_bytes(value: str) -> str:
    return "".join(f"\\x{b:02x}" for b in value.encode("utf-8"))


def _hex_bytes_decode(text: str) -> str:
    def run(m: re.Match[str]) -> str:
        data = bytes(int(h, 16) for h in re.findall(r"\\x([0-9a-fA-F]{2})", m.group(0)))
        return data.decode("utf-8", "replace")
    return re.sub(r"(?:\\x[0-9a-fA-F]{2})+", run, text)


SPELLINGS: dict[str, Callable[[str], str]] = {
    "htmlentities": _htmlentities,
    "html5-names": _named_everywhere,
    "html-no-semicolons": _no_semicolons,
    "hex-bytes": _hex_bytes,
}


@pytest.fixture(autouse=True)
def _debug_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.DEBUG)
    yield


def _readable(text: str) -> str:
    return decoded(text) + "\0" + _hex_bytes_decode(text)


@pytest.mark.parametrize("way", list(WAYS))
@pytest.mark.parametrize("spelling", list(SPELLINGS))
async def test_a_secret_in_html_and_c_spellings_never_leaves(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        spelling: str, way: str) -> None:
    CASE[:] = [SPELLINGS[spelling], WAYS[way]]
    # (red team 20's reader reads ``\\x`` as Latin-1: read it as C does too)
    monkeypatch.setattr(redteam20, "decoded", _readable)
    assert await _leaked(tmp_path, monkeypatch, caplog) == []


@pytest.mark.parametrize("spelling", list(SPELLINGS))
def test_the_scrubber_reads_each_spelling_and_keeps_the_text(spelling: str) -> None:
    spelled = SPELLINGS[spelling](SECRET)
    out = Scrubber([SECRET])("before " + spelled + " after")
    assert "[REDACTED]" in out and SECRET not in _readable(out), out
    assert out.startswith("before ") and out.endswith(" after"), out


@pytest.mark.parametrize("text", [
    "Q&A: AT&T &copy; 2024 &nbsp; &notaname; &#169 &amp;",
    "x = '\\xff\\xfe' + b'\\x00\\x41'",
    "<p>caf&eacute; &mdash; cr&egrave;me br&ucirc;l&eacute;e</p>",
])
def test_ordinary_texts_are_unchanged(text: str) -> None:
    assert Scrubber([SECRET])(text) == text


@pytest.mark.parametrize("secret", ["''0009;<", "'Zq9vTx3mW2", "ab''cd'ef'gh"])
def test_a_value_with_leading_quotes_shell_quoted(secret: str) -> None:
    """``shlex.quote`` of a value starting with quotes writes ``''"'"''"'"'...``: the
    doubled-quote reading took the leading ``''`` (an empty shell string) for a quote and
    read the rest out of step, so the value went out whole (found by red team 20's
    property, on main as well). Shell quotes are read in a view of their own."""
    spelled = shlex.quote(secret)
    out = Scrubber([secret])("run " + spelled + " now")
    assert "[REDACTED]" in out and secret not in decoded(out), out


async def test_a_value_with_leading_quotes_shell_quoted_in_the_real_loop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    CASE[:] = [shlex.quote, WAYS["dict"]]
    assert await _leaked(tmp_path, monkeypatch, caplog, secret="''Grüße9vTx3;<") == []
