"""Characters a text may be spelled in that read as others: fillers that show as nothing,
and compatibility characters whose form (NFKC) is ASCII.

One source for the two places that must read a value through them alike: the scrubber
(a secret spelled in fullwidth letters or with zero-width spaces between its characters
still leaves as ``[REDACTED]``) and the provenance functions (a payee spelled so is still
the payee, in the value and in every text it is compared with).
"""

from __future__ import annotations

import itertools
import re
import unicodedata

__all__ = ["COMPAT_RANGES", "EXOTIC", "FILLER_CHARS", "NORMAL_TABLE", "normal"]

FILLER_CHARS = ("\u00ad\u034f\u180e\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c"
                "\u202d\u202e\u2060\u2061\u2062\u2063\u2064\u2066\u2067\u2068\u2069\ufeff")
"""Characters that show as nothing: soft hyphen, zero-width space, joiners, word joiner,
direction marks and embeddings, the byte-order mark."""

COMPAT_RANGES = ((0x3000, 0x3000), (0xFF01, 0xFF5E), (0x2070, 0x209F), (0x2460, 0x24FF),
                 (0x1D400, 0x1D7FF))
"""Characters whose compatibility form (NFKC) is ASCII, that a value may be spelled in:
fullwidth forms, super- and subscripts, enclosed (circled) letters and digits, mathematical
letters and digits."""


def _normal_table() -> dict[int, str]:
    table = {ord(c): "" for c in FILLER_CHARS}
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

EXOTIC = re.compile("([\u00ad\u034f\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2069"
                    "\u2070-\u209f\u2460-\u24ff\u3000\ufeff\uff01-\uff5e"
                    "\U0001d400-\U0001d7ff])")
"""A filler or a compatibility character (a few ranges that hold ``NORMAL_TABLE``'s
characters: a class listing each of them is searched a range at a time, 12 ms for 2 kB of
text; one of these ranges not in the table stands for itself)."""


def normal(text: str) -> str:
    """``text`` with its fillers removed and its compatibility characters in their ASCII
    form (an ASCII text, or one with none of them, as it is). A text with few of them
    (a page with a soft hyphen or a zero-width space, the usual case) has only those looked
    up, at C speed around them; one with many (``_FEW``) is translated whole, a dictionary
    lookup a character (about 80 ns: 5 ms for 64 K), which costs a few parts in 16 more."""
    if text.isascii():
        return text
    found = list(itertools.islice(EXOTIC.finditer(text), len(text) // _FEW + 1))
    if not found:
        return text
    if len(found) > len(text) // _FEW:
        return text.translate(NORMAL_TABLE)
    parts: list[str] = []
    last = 0
    for m in found:
        start = m.start()
        parts += (text[last:start], NORMAL_TABLE.get(ord(text[start]), text[start]))
        last = start + 1
    parts.append(text[last:])
    return "".join(parts)


_FEW = 16
"""A text with at most one such character in this many has only those looked up."""
