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

import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from guardrails.engine import scrub as sc
from guardrails.engine.scrub import Scrubber
from tests import test_redteam20_escapes as redteam20
from tests.escape_families import decoded
from tests.test_redteam20_escapes import CASE, WAYS, _leaked


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
    whatever the neighbours: the sigma), to one character (spans fit the text), and never to
    an ASCII character other than a letter but that character itself (``_anchors`` stays
    sound)."""
    import sys

    for x in range(sys.maxunicode + 1):
        c = chr(x)
        if 0xD800 <= x < 0xE000:
            continue
        f = sc._folded(c)
        assert len(f) == 1, hex(x)
        assert not (f.isascii() and not f.isalpha() and f != c), hex(x)
        assert sc._folded("A" + c + "b") == "a" + f + "b", hex(x)
    text = "ΟΔΟΣ straße İstanbul ΣΑΣ ẞ ﬁ x"
    assert sc._folded(text) == "".join(sc._folded(c) for c in text)
