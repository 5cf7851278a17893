"""Characters a text may be spelled in that read as others: fillers that show as nothing,
compatibility characters whose form (NFKC) is ASCII, and dashes that look like a hyphen.

One source for the two places that must read a value through them alike: the scrubber
(a secret spelled in fullwidth letters or with zero-width spaces between its characters
still leaves as ``[REDACTED]``) and the provenance functions (a payee spelled so is still
the payee, in the value and in every text it is compared with).
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["COMPAT_RANGES", "DASH_CHARS", "EXOTIC", "FILLER_CHARS", "IGNORABLE_RANGES",
           "NORMAL_TABLE", "exotic", "normal"]

IGNORABLE_RANGES = ((0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160),
                    (0x17B4, 0x17B5), (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E),
                    (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
                    (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
                    (0xE0000, 0xE0FFF))
"""Unicode's ``Default_Ignorable_Code_Point`` (DerivedCoreProperties.txt): what a text
shows as nothing where a font has no glyph for it, and IDNA's mapping ignores or refuses."""

FILLER_CHARS = "".join(chr(c) for low, high in IGNORABLE_RANGES for c in range(low, high + 1))
"""Characters that show as nothing, every default ignorable one: soft hyphen, zero-width
space, joiners, word joiner, direction marks and embeddings, the byte-order mark;
variation selectors (Mongolian ones too) and tag characters (red team 24:
``ev\ufe0fil.com`` hid a destination from ``untrusted()``, and a secret with one between
each of its characters went out whole); the Arabic letter mark, the Hangul fillers, the
Khmer inherent vowels, the deprecated format characters, the shorthand format controls
and the musical beam, tie, slur and phrase marks (red team 25: each hid a secret so)."""

DASH_CHARS = ("\u02d7\u058a\u2010\u2011\u2012\u2013\u2014\u2015\u2043\u2212\u2e3a"
              "\u2e3b\ufe31\ufe32\ufe58")
"""Dashes that look like a hyphen-minus, read as one: the hyphen, the non-breaking hyphen
(``U+2011``), the figure, en, em and horizontal-bar dashes, the hyphen bullet, the minus
sign, the modifier-letter minus, the Armenian hyphen, the two- and three-em dashes and the
small and vertical em dashes. NFKC keeps them (``U+2011`` is ``U+2010`` to it): a secret
with its hyphens written so went out whole (red team 25). Fullwidth and small hyphens
are compatibility characters (below)."""

COMPAT_RANGES = ((0x00A0, 0x00BA), (0x0132, 0x0133), (0x017F, 0x017F), (0x01C7, 0x01CC),
                 (0x01F1, 0x01F3), (0x02B0, 0x02B8), (0x02E1, 0x02E3), (0x037E, 0x037E),
                 (0x1D2C, 0x1D65), (0x1D9C, 0x1DBB), (0x1FEF, 0x1FEF), (0x2000, 0x200A),
                 (0x2024, 0x2049), (0x205F, 0x20A8), (0x2100, 0x2149), (0x2160, 0x217F),
                 (0x2460, 0x24EA), (0x2A74, 0x2A76), (0x2C7C, 0x2C7D), (0x3000, 0x3000),
                 (0x3250, 0x325F), (0x32B1, 0x32CF), (0x3371, 0x33FF), (0xA7F2, 0xA7F4),
                 (0xFB00, 0xFB29), (0xFE10, 0xFE6B), (0xFF01, 0xFF5E), (0x107A5, 0x107A5),
                 (0x1D400, 0x1D7FF), (0x1F100, 0x1F190), (0x1FBF0, 0x1FBF9))
"""Where the characters whose compatibility form (NFKC) is ASCII are, all of them (a test
reads every code point: tests/test_provenance_forms.py): fullwidth forms, super- and
subscripts, modifier letters, enclosed (circled, parenthesized, squared) letters and
digits, mathematical letters and digits, letterlike symbols (``ℹ``, ``ℱ``), roman numerals
(``ⅿ``), ligatures (``ﬁ``), small and vertical forms (``﹫``, ``﹒``), squared
abbreviations (``㎝``), the no-break and other spaces. A store that normalises what it
keeps, IDNA and a browser read each as that ASCII (scrub22: ``ⅿallory@evℹⅼ.com`` was a
value the model stored that a trusted tool vouched for once read back, when only
fullwidth, super- and subscript, enclosed and mathematical forms were read)."""


def _normal_table() -> dict[int, str]:
    table = {ord(c): "" for c in FILLER_CHARS}
    table.update({ord(c): "-" for c in DASH_CHARS})
    for low, high in COMPAT_RANGES:
        for code in range(low, high + 1):
            form = unicodedata.normalize("NFKC", chr(code))
            if form != chr(code) and form.isascii():
                table[code] = form
    return table


NORMAL_TABLE = _normal_table()
"""What each filler (nothing) and compatibility character (its ASCII form) becomes, for
``str.translate`` (C speed). Each character becomes at most four (a parenthesized
``⒇`` is ``(20)``), most one or none: a text's normal form is at most four times as long."""


def _bmp_table() -> list[int | str | None]:
    table: list[int | str | None] = list(range(max(c for c in NORMAL_TABLE if c < 0x10000) + 1))
    for code, form in NORMAL_TABLE.items():
        if code < len(table):
            table[code] = form or None
    return table


_BMP_TABLE: list[int | str | None] = _bmp_table()
"""``NORMAL_TABLE`` for a text without characters past the BMP, indexed by code point (each
character that stays itself maps to its own code; None deletes; a code past its end is
left as it is): ``str.translate`` with the dictionary raises and clears a ``KeyError`` for
every character that stays, the list does not (a dense 64 KiB page 1.3x faster, one where
most characters stay 1.7-3x; about 2.6 MB once per process)."""


def _ranges(codes: list[int], gap: int) -> str:
    spans: list[list[int]] = []
    for code in codes:
        if spans and code - spans[-1][1] <= gap:
            spans[-1][1] = code
        else:
            spans.append([code, code])
    return "".join(chr(a) if a == b else f"{chr(a)}-{chr(b)}" for a, b in spans)


_BMP = "[" + _ranges(sorted(c for c in NORMAL_TABLE if c < 0x10000), 1) + "]"
_ASTRAL = "[" + _ranges(sorted(c for c in NORMAL_TABLE if c >= 0x10000), 1024) + "]"
_EXOTIC_BMP = re.compile(_BMP)
_EXOTIC_ASTRAL = re.compile(_ASTRAL)

EXOTIC = re.compile(f"({_BMP}|{_ASTRAL})")
"""A filler or a compatibility character, one a match (a few ranges past the BMP stand
for themselves where they hold none of ``NORMAL_TABLE``'s): for ``re.split``. To tell
whether a text holds one, ``exotic`` is faster."""


def _astral(text: str) -> bool:
    """Whether ``text`` holds a character past the BMP: it then takes two UTF-16 units.
    Encoding is a copy at C speed (0.03 ms for 64 K); ``max(text)`` compares character
    objects one by one (2.1 ms, 43% of ``normal`` on a dense page)."""
    return len(text.encode("utf-16-le", "surrogatepass")) != 2 * len(text)


def exotic(text: str) -> bool:
    """Whether ``text`` holds a filler or a compatibility character. The BMP's are one
    exact class (a bitmap to ``re``: 25 µs for 2 kB of text); the class of the few past it
    is searched only in a text that holds a character past the BMP (``re`` reads a class
    of many ranges a range at a time: one class of all of them took 700 µs)."""
    if text.isascii():
        return False
    if _EXOTIC_BMP.search(text) is not None:
        return True
    return _astral(text) and _EXOTIC_ASTRAL.search(text) is not None


def normal(text: str) -> str:
    """``text`` with its fillers removed and its compatibility characters in their ASCII
    form (an ASCII text, or one with none of them, as it is). Where they are few (a page
    with a soft hyphen or a zero-width space, the usual case) only they are looked up, at
    C speed around them; from where they run denser than one in ``_FEW`` (past a first
    ``_SPARSE``), the rest of the text is translated whole, a list lookup a character in a
    text of the BMP (``_BMP_TABLE``: 25-55 ns, 1.6-3.7 ms for 64 K), a dictionary lookup
    in one with characters past it. Each character is read at most once either way, so no
    arrangement of them costs more than the whole text translated (a text dense from its
    start took twice that when its characters were looked up one by one first)."""
    if text.isascii():
        return text
    astral = _astral(text)
    pattern = EXOTIC if astral else _EXOTIC_BMP
    parts: list[str] = []
    last = 0
    for seen, m in enumerate(pattern.finditer(text)):
        start = m.start()
        if seen > _SPARSE + start // _FEW:
            parts.append(text[last:].translate(NORMAL_TABLE if astral else _BMP_TABLE))
            return "".join(parts)
        parts += (text[last:start], NORMAL_TABLE.get(ord(text[start]), text[start]))
        last = start + 1
    if not parts:
        return text
    parts.append(text[last:])
    return "".join(parts)


_FEW = 16
"""Characters of a text per such character, at most, where only they are looked up."""

_SPARSE = 64
"""Such characters looked up one by one before their density decides (a short text's
few are never a reason to translate it whole)."""
