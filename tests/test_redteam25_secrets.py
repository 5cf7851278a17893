"""Red team 25: an injected secret in forms red team 24's view still missed, in the
framework's real loop (red team 20's harness: the tool returns the injected password
spelled each way, in prose, a dict result, an exception and a log record; the
OpenTelemetry SDK's spans and the decision log among the places read).

Found (each went out whole before the fix):

- characters Unicode lists as default ignorable (they show as nothing) that were not
  read as fillers: the Arabic letter mark ``U+061C``, the Hangul fillers (``U+115F``,
  ``U+1160``, ``U+3164``, ``U+FFA0``), the Khmer inherent vowels, the deprecated format
  characters ``U+206A``-``U+206F``, the shorthand format controls and the musical symbol
  beam, tie, slur and phrase marks, one between each of the secret's characters
  (``textforms.FILLER_CHARS`` is now the whole ``Default_Ignorable_Code_Point`` set);
- the secret's hyphens written as the look-alike dashes (``U+2010`` hyphen, ``U+2011``
  non-breaking hyphen, figure and en dashes, the minus sign ...): NFKC keeps them, so
  the normal form did not read them as ``-`` (``textforms.DASH_CHARS``).

Pinned (not a leak): Hangul in syllables, conjoining jamo, or decomposed (NFD, NFKD).
Left (xfail, strict): the secret in another case.
"""

from __future__ import annotations

import json
import logging
import unicodedata
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from guardrails.engine.scrub import Scrubber
from guardrails.expr import lib_provenance as lp
from guardrails.expr.textforms import DASH_CHARS, FILLER_CHARS
from tests import test_redteam20_escapes as redteam20
from tests.escape_families import decoded
from tests.test_redteam20_escapes import CASE, WAYS, _leaked

SECRET = "Zq9-vTx3-mW2pL-k8Rd"

IGNORABLE = ((0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160),
             (0x17B4, 0x17B5), (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E),
             (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
             (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
             (0xE0000, 0xE0FFF))
"""Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt, 15.0)."""

NEW_FILLERS = ("\u061c", "\u115f", "\u1160", "\u17b4", "\u17b5", "\u206a", "\u206f",
               "\u3164", "\uffa0", "\U0001bca0", "\U0001d173", "\U0001d17a")
DASHES = ("\u2010", "\u2011", "\u2012", "\u2013", "\u2014", "\u2015", "\u2212", "\u2043",
          "\u02d7", "\u058a", "\u2e3a", "\ufe58")

def _between(filler: str) -> Callable[[str], str]:
    return lambda value: filler.join(value)


def _dashed(dash: str) -> Callable[[str], str]:
    return lambda value: value.replace("-", dash)


SPELLINGS: dict[str, Callable[[str], str]] = {
    **{f"between-U+{ord(f):04X}": _between(f) for f in NEW_FILLERS},
    **{f"dash-U+{ord(d):04X}": _dashed(d) for d in DASHES},
}

_SHOWN = str.maketrans({**dict.fromkeys(map(ord, NEW_FILLERS)),
                        **dict.fromkeys(map(ord, DASHES), "-")})


def _readable(text: str) -> str:
    """A reader drops what shows as nothing and reads a dash as the hyphen it looks like."""
    return decoded(text) + "\0" + decoded(text.translate(_SHOWN))


@pytest.fixture(autouse=True)
def _debug_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.DEBUG)
    yield


@pytest.mark.parametrize("way", list(WAYS))
@pytest.mark.parametrize("spelling", list(SPELLINGS))
async def test_a_secret_between_ignorables_or_with_look_alike_dashes_never_leaves(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        spelling: str, way: str) -> None:
    CASE[:] = [SPELLINGS[spelling], WAYS[way]]
    monkeypatch.setattr(redteam20, "decoded", _readable)
    assert await _leaked(tmp_path, monkeypatch, caplog, secret=SECRET) == []


def test_no_character_cases_to_an_anchor_but_itself() -> None:
    """``scrub._anchors`` skips lowering a text that lacks a needle's case-free runs: sound
    only if no code point upper- or lower-cases to an ASCII character other than a letter
    but that character itself."""
    import sys

    from guardrails.engine import scrub as sc

    for x in range(sys.maxunicode + 1):
        c = chr(x)
        for cased in (c.lower(), c.upper()):
            assert not (len(cased) == 1 and cased.isascii() and not cased.isalpha()
                        and cased != c), hex(x)
    assert sc._anchors("zq9-vtx3-mw2pl-k8rd") == ("3-", "9-", "2", "8")
    assert sc._anchors("correcthorse") == ()
    # A text without the runs is not lowered; one with them is, and the value is found.
    assert Scrubber(["Zq9-vTx3"])("ZQ9-VTX3 and ZQ9_VTX3") == "[REDACTED] and ZQ9_VTX3"


CASED: dict[str, Callable[[str], str]] = {
    "upper": str.upper,
    "swapped": str.swapcase,
    "title": str.title,
    "upper-json-escaped": lambda v: json.dumps(v.upper()).replace("-", "\\u002D"),
    "upper-percent": lambda v: urllib.parse.quote(v, safe="").replace("-", "%2d").upper(),
    "upper-fullwidth": lambda v: "".join(chr(ord(c) + 0xFEE0) if c.isalnum() else c
                                         for c in v.upper()),
}
"""A tool writing the value in another case: as it is, and inside the escapes and forms the
scrubber undoes."""


@pytest.mark.parametrize("way", list(WAYS))
@pytest.mark.parametrize("cased", list(CASED))
async def test_a_secret_in_another_case_never_leaves(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        cased: str, way: str) -> None:
    """Real loop: the injected secret handed back upper-cased (in a result, an exception, a
    log line) is found; a reader who lowers the text finds nothing. Before the fifteenth
    session every one of these forms went out (24 of 24)."""
    CASE[:] = [CASED[cased], WAYS[way]]
    monkeypatch.setattr(redteam20, "decoded", lambda text: decoded(text).lower())
    assert await _leaked(tmp_path, monkeypatch, caplog, secret=SECRET.lower()) == []


def test_every_default_ignorable_character_is_a_filler() -> None:
    fillers = set(FILLER_CHARS)
    missed = [f"U+{c:04X}" for low, high in IGNORABLE for c in range(low, high + 1)
              if chr(c) not in fillers]
    assert missed == []
    scrub = Scrubber([SECRET])
    for low, high in IGNORABLE:
        for c in range(low, high + 1, 7):
            assert "[REDACTED]" in scrub("key " + chr(c).join(SECRET)), f"U+{c:04X}"


def test_dashes_read_as_hyphens_and_texts_keep_them() -> None:
    scrub = Scrubber([SECRET])
    for d in DASH_CHARS:
        assert scrub("key " + SECRET.replace("-", d) + " end") == "key [REDACTED] end", hex(ord(d))
    prose = "pages 10\u201312 \u2014 the author\u2019s non\u2011breaking view \u2212 2"
    assert scrub(prose) == prose
    # the provenance functions read them alike (one normal form)
    assert lp.mentioned("evil-corp.example", "see evil\u2011corp.example now")
    assert not lp.mentioned("evilcorp.example", "see evil\u2011corp.example now")


@pytest.mark.parametrize("text", ["비밀번호가나다라", unicodedata.normalize("NFD", "비밀번호가나다라")])
def test_hangul_in_either_form_is_found(text: str) -> None:
    for secret in ("비밀번호가나다라", unicodedata.normalize("NFD", "비밀번호가나다라")):
        assert Scrubber([secret])("x " + text + " y") == "x [REDACTED] y"


def test_a_secret_in_another_case_is_found() -> None:
    """Found in any case (``scrub._folded``): upper, lower, swapped, in escapes and in a
    guard's memory (the RE2 path) alike; the rest of the text keeps its case."""
    from guardrails.engine import scrub as sc

    many = [f"Zq{i:04d}-pad-{i * 7919:08x}" for i in range(40)]  # past _SCAN_NEEDLES
    assert len(Scrubber(many)._needles) > sc._SCAN_NEEDLES
    for values in ([SECRET], [SECRET, *many]):
        scrub = Scrubber(values)
        for form in (SECRET.upper(), SECRET.lower(), SECRET.swapcase(),
                     SECRET.upper().replace("-", "\\u002D"), json.dumps(SECRET.upper()),
                     urllib.parse.quote(SECRET.upper())):
            out = scrub("Key " + form + " END")
            assert out.startswith("Key ") and out.endswith(" END"), (form, out)
            assert "[REDACTED]" in out and "vtx3" not in out.lower(), (form, out)
    # The dotted capital I lowers to two characters; the spans still fit the text.
    assert Scrubber(["i-am-a-key"])("\u0130\u0130 I-AM-A-KEY \u0130") == (
        "\u0130\u0130 [REDACTED] \u0130")


# ------------------------------------------------------------------ the composing view's cost


def test_runs_composed_together_read_as_each_alone() -> None:
    """``_composed_runs`` (one ``normalize`` over the runs joined by NUL) gives what each
    run composed alone gives: runs as ``_COMPOSED`` cuts them from texts of every kind."""
    import random

    from guardrails.engine import scrub as sc

    rng = random.Random(25)
    marks = [chr(c) for c in (0x0301, 0x0323, 0x0302, 0x0308, 0x1161, 0x11A8, 0x0B3E,
                              0x0CD5, 0x3099, 0x05B4, 0x0E31)]
    bases = [chr(c) for c in (0x65, 0x41, 0x1100, 0x0B47, 0x0CC6, 0x304B, 0x05D0, 0x0E01,
                              0x4E00, 0x212B, 0xF900, 0x0301, 0x0000)]
    for _ in range(300):
        text = "".join(rng.choice(bases) + "".join(rng.choices(marks, k=rng.randint(0, 3)))
                       for _ in range(rng.randint(1, 40)))
        runs = sc._COMPOSED.split(text)[1::2]
        assert sc._composed_runs(runs) == [unicodedata.normalize("NFC", r) for r in runs]


def test_many_distinct_runs_are_read_composed_in_the_rough_view() -> None:
    """A result of 32,768 distinct runs (a CJK letter and a mark each) is past the runs a
    view composes exactly (``_MOST_RUNS``; run by run they cost its scrub 100-185 ms): it
    is searched composed in the rough view, and replaced whole where a value is found
    there (the safe side). A result within the bound keeps its text."""
    from guardrails.engine import scrub as sc

    secret = "Ngệ-Café-Zq9vTx3mW2pL"
    spelled = " " + "\u200b".join(unicodedata.normalize("NFD", secret))
    for runs, whole in ((32_768, True), (sc._MOST_RUNS // 2, False)):
        page = "".join(chr(0x4E00 + i) + "\u0301" for i in range(runs))
        sc._composed_run.cache_clear()
        out = Scrubber([secret])(page + spelled)
        assert "Ng" not in out and "[REDACTED]" in out
        assert (out == "[REDACTED]") is whole, out[-80:]
        assert sc._composed_run.cache_info().misses < 1_000
