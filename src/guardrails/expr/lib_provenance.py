"""Provenance: where a value came from (``provenance``, ``untrusted``, ``request.mentions``,
and ``mentions`` on a text or a list of texts).

A tool argument that an e-mail put in front of the model looks the same as one the user
typed; these functions tell them apart by looking the value up in the user's request, the
policy's params and the (scrubbed, bounded) results of earlier tool calls.

Matching is value-driven: a value is classified once (e-mail address, URL, host name, date,
number or amount, phone number, identifier such as an IBAN, or plain text) and turned into
one RE2 pattern, with a literal prefilter, that is searched in the lower-cased texts. Every
pattern is bounded on both sides, so "5" is not found in "1500" and "bob" is not found in
"bobby". RE2 is linear in the text, every text is at most ``MAX_TEXT`` characters and the
total scanned per call is bounded (``SCAN_BUDGET``), so the cost of a call is bounded.
Exact rules per kind: docs/functions.md#provenance.

The call's context (request text, history, the current policy's params) is not an
argument: the engine sets it for the duration of one evaluation (``ORIGINS``); outside
one, the functions are an error.
"""

from __future__ import annotations

import bisect
import datetime
import functools
import hashlib
import ipaddress
import itertools
import math
import re
import unicodedata
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Final

import re2

from guardrails.expr.lib_common import RE2_OPTIONS, compile_re2, guarded, no_overload
from guardrails.expr.limits import MAX_MATCHES, Meter
from guardrails.expr.textforms import NORMAL_TABLE, normal
from guardrails.expr.values import CelError, MatchBoundExceeded

__all__ = [
    "MAX_TEXT",
    "ORIGINS",
    "SCAN_BUDGET",
    "SIGNATURES",
    "Origins",
    "Place",
    "Request",
    "emails",
    "kept_reading",
    "mentions",
    "provenance",
    "untrusted",
    "urls",
]

MAX_TEXT: Final = 65_536
"""Characters of one text (a request, a tool result) that are searched; the rest is not."""

UNIT_NS: Final = 2.5
"""The CPU one scan unit stands for, in ns: every cost of the provenance functions is a
measured figure divided by it (``_units``, ``_Pass``), so ``SCAN_BUDGET`` x ``UNIT_NS``
(42 ms) is what a call's scanning costs at most, within promise 8's 50 ms. Measured by
``benchmarks/scan_sweep.py`` (each scanning path on the inputs dearest per unit charged,
cold and warm: the worst at 0.94x this figure at load 4.4 on the shared 2-core machine,
1.0-1.2x before margin27) and, per pass, the ``_Pass`` figures: what each pass meets on
fresh pages, none in the CPU's cache (``benchmarks/pass_costs.py``; the best of repeated
runs over one hot text, as they were first taken, reads 0.5-0.9x of it)."""

SCAN_BUDGET: Final = 16 * 1024 * 1024
"""Scan units the provenance functions may spend in one evaluated call, across all queries
(``UNIT_NS`` each)."""


def _units(ns: float) -> int:
    """Scan units of ``ns`` nanoseconds of CPU (``UNIT_NS``), rounded up."""
    return math.ceil(ns / UNIT_NS)


@dataclass(frozen=True, slots=True)
class _Pass:
    """What one pass over a text costs: ``byte_ns`` a character of an ASCII text and
    ``wide`` times that a character of any other, ``dot_ns`` a full stop it holds (a pass
    that tries a match at every dot: ``a.a.a.`` read 25 times slower than prose), and
    ``call_ns`` the pass itself (a short text's cost is the call's). Counted by
    ``_Scan.over`` before the pass reads."""

    byte_ns: float
    dot_ns: float = 0.0
    call_ns: float = 0.0
    wide: int = 4
    """What a character of a text that is not ASCII counts as: four bytes for a pass over
    its UTF-8 (RE2's, and one that rewrites the text: the most a character takes), one
    for a search by Python's ``str`` methods, which read code points at the same speed
    whatever their width (``in`` and ``count``: 0.2-0.4 ns a character of Japanese,
    Cyrillic, accented or astral pages; charged four, a page of Japanese kept with its
    reading was charged 8 times what its search cost: ``benchmarks/pass_costs.py``)."""
    def units(self, text: str, start: int = 0, end: int | None = None) -> int:
        stop = len(text) if end is None else min(end, len(text))
        size = max(stop - start, 0)
        wide = not text.isascii() and not text[start:stop].isascii()
        ns = self.call_ns + size * self.byte_ns * (self.wide if wide else 1)
        if self.dot_ns:
            ns += _dots(text, start, stop, wide) * self.dot_ns
        return math.ceil(ns / UNIT_NS)


def _dots(text: str, start: int, stop: int, wide: bool) -> int:
    """Full stops in ``text[start:stop]``, and the characters read as one (``_forms``)."""
    dots = text.count(".", start, stop)
    if wide:
        dots += sum(text.count(c, start, stop) for c in "\u3002\uff61\uff0e\u2024")
    return dots


FIND: Final = _Pass(0.55, wide=1)
"""A C-speed count by Python's ``str`` methods: ``str.count`` (0.3-0.55 ns a character of
any width: counting a text's dots, lines and quotes)."""
LITERAL: Final = _Pass(1.4, wide=1)
"""A value's literal searched with ``in`` (``Matcher.first``): 0.2-0.5 ns a character of
prose, up to 1.4 in a text made of the literal's own characters (``e.`` repeated for
``evil.examplex.``: CPython's search skips only past characters the literal lacks), any
width alike (charged ``FIND`` until margin27: 2.5x below its cost there)."""
REWRITE: Final = _Pass(0.55)
"""A C-speed pass that makes a new text: ``str.lower``, ``bytes.translate`` (0.3-0.55 ns
a character of an ASCII text, 2.6-6.8 of any other: a text's reading lower-cased, an
ASCII field's letters)."""
DENSE: Final = _Pass(2.4, wide=2)
"""The separators of identifiers and phone numbers removed for an ASCII value
(``_dense_ascii``: a translate, 0.6-0.9 ns a character of a hot ASCII text and 1.8-2.3
of a fresh one; in a text not ASCII an encode and a translate, 1.7-4 ns a character of
the BMP on fresh pages, 6.6 past it, where a text's reading is charged ``READ_COST`` and
a kept one's check ``KEPT_ASTRAL_COST`` besides; ``DENSE_ANY`` for a value that is not
ASCII). Charged 1.1 and 4.4 until margin27."""
DENSE_ANY: Final = _Pass(2.4, wide=9)
"""``_dense`` of a text not ASCII, for a value that is not (six ``str.replace``: 6-10 ns
a character, 19 in a text dense in separators)."""
RE2_SEARCH: Final = _Pass(1.8, call_ns=4_000.0)
"""An RE2 search (a value's pattern, quoted strings, the spelling gate): 1.4-1.8 ns a byte
whatever the text holds (5.3 ns a Japanese character: three bytes; quoted strings in
``a.`` repeated, 1.95), and pyre2's call around it (1.2 µs a miss, 3.9 a match: its
``Match`` object; a short result's search cost 6.7 µs, charged 2.5)."""
GATE: Final = _Pass(3.6, call_ns=4_000.0)
"""The first pass of a text's reading, the spelling gate (``_respelled``: the text encoded
to UTF-8, a new object, and searched by RE2): the first pass over the pages a call meets,
fresh ones, none in the CPU's cache, 2.8-3.4 ns a byte of ASCII prose, links or dots
(more with the machine loaded: 100 fresh prose pages 0.99x a unit charged 3.0) and 10-12
a character of Japanese, where a hot text's search takes 1.45 (``RE2_SEARCH``, the
figure it was charged until margin27: a call over 100 fresh pages of prose cost 0.98x a
unit; ``benchmarks/pass_costs.py``, ``scan_sweep.py``)."""
GLUE_SEEN: Final = _Pass(0.2, 12.0)
"""RE2's search for a sentence glued to a host (``_GLUED_SEEN``): 0.14 ns a character and
6-12 ns a dot on fresh pages (``a.`` repeated: 3-6 ns a character; charged 8 a dot until
margin27, when 100 fresh pages of it cost a call 0.87-0.94x a unit)."""
GLUE_FIND: Final = _Pass(0.6, 36.0)
"""Python's search for them (``_GLUED``, ``_unglue``): 0.3-0.4 ns a character and up to
33 ns a dot (``.Ab`` repeated, where every dot starts a match that fails: 11 ns a
character), and the as-written reading lower-cased."""
_READING: Final = (GATE, GLUE_SEEN, REWRITE, FIND)
"""The passes of a text's reading, ASCII or not (``_Scan.read``): the spelling gate
(``_respelled``), the glued-sentence gate, lower-casing, counting its dots."""

SIGNATURES: Final[Mapping[str, tuple[str, ...]]] = {
    "provenance": ("provenance(string) -> list(map(string, dyn))",
                   "provenance(number) -> list(map(string, dyn))"),
    "untrusted": ("untrusted(string) -> bool", "untrusted(number) -> bool"),
    "mentions": ("map.mentions(string) -> bool", "map.mentions(number) -> bool",
                 "string.mentions(string) -> bool", "string.mentions(number) -> bool",
                 "list.mentions(string) -> bool", "list.mentions(number) -> bool"),
    "urls": ("string.urls() -> list(string)",),
    "emails": ("string.emails() -> list(string)",),
}
"""The types of these functions for the static checker (``library.SIGNATURES`` form);
``mentions`` is a method of ``request``, of a text and of a list of texts; ``urls`` and
``emails`` are methods of a text."""


# -------------------------------------------------------------------- lower-cased texts

_LOWER: dict[str, tuple[str, int, bool]] = {}
"""Each text's reading (``_lower``) and the sentences glued in it (``GLUE_COST``)."""
_DENSE: dict[str, str] = {}
_CACHE_SIZE = 256
"""Texts whose lower-cased (and dense) forms are kept: at most 2 x 256 x 64 KiB."""
_SEPARATOR_CHARS: Final = " -().\t"
_SEPARATORS = str.maketrans("", "", _SEPARATOR_CHARS)


_GLUED = re.compile(r"\.[A-Z][a-z]+(?=\s|$)")
"""A capitalised word after a dot at the end of a token: ``www.x.com.They sent``."""
_GLUED_SEEN = r"\.[A-Z][a-z]+(?:[\s\x{0b}\x{1c}-\x{1f}\x{85}\pZ]|$)"
"""``_GLUED``'s prefilter, for RE2: it matches wherever ``_GLUED`` does (its white space
holds what Python reads as white space and Unicode's separators)."""


_GLUED_SEEN_RE: Final = re2.compile(_GLUED_SEEN, options=RE2_OPTIONS)
"""Compiled at import, as every pattern of the provenance functions' own: RE2's compile
cache is bounded and cleared whole when full, and a pattern compiled again in a call is
work no call is charged for (calib26: quoted strings, 14 ms)."""


def _glue_seen(cut: str) -> bool:
    """Whether ``cut`` may hold a sentence glued to a host (``_GLUED_SEEN``: wherever
    ``_GLUED`` matches, and more), at RE2 speed (``GLUE_SEEN``): Python's regex tries each
    dot of a text (``GLUE_FIND``), and runs only where this finds one."""
    return _GLUED_SEEN_RE.search(cut) is not None


def _unglue(text: str, charge: Callable[[int], None] | None = None) -> str:
    """``text`` with a sentence that starts right after a lower-case host or URL (no space
    after its full stop: ``www.x.com.They``) moved off it by a space, so the host is found
    as the writer meant it. Only a token lower-case up to that dot qualifies (a host
    written ``www.Example.Com`` stays one name). The token is the text since the last
    white space, found at C speed (``str.rsplit``, white space as ``str.isspace``) in what
    lies after the match before (white space follows every match): scanned back a
    character at a time in Python, one token of 64 K cost 4 ms a text, charged nothing.
    Linear; each match is charged as it is found (``GLUE_COST``), the pass before it
    (``GLUE_FIND``, by the caller)."""
    parts: list[str] = []
    last = after = 0
    for m in _GLUED.finditer(text):
        if charge is not None:
            charge(GLUE_COST)
        start = m.start()
        before = text[max(last, after):start]
        after = m.end()
        token = "" if not before or before[-1].isspace() else before.rsplit(None, 1)[-1]
        if "." in token and token == token.lower() and token[-1:].isalnum():
            parts.append(text[last:start + 1])
            parts.append(" ")
            last = start + 1
    if not parts:
        return text
    parts.append(text[last:])
    return "".join(parts)


def _normal(text: str) -> str:
    """The one reading of every text and value the provenance functions compare, before
    case is ignored: its character forms (``_forms``), then its URLs as a URL parser reads
    them (``_respelled``). What it costs is charged by the caller (``_Scan.value``,
    ``_normal_charged``, ``_normal_cut``)."""
    return _respelled(_forms(text))


def _forms(text: str) -> str:
    """Fillers (zero-width spaces, joiners, direction marks) removed, compatibility
    characters (fullwidth, mathematical, circled, super- and subscript letters, digits and
    signs) in their ASCII form, IDNA's other full stops as dots, and composed (NFC: ``e``
    and U+0301 is ``é``, as IDNA reads them). IDNA's other full stops are the ideographic
    and halfwidth ideographic ones (UTS 46).
    A tool, a mail system or a browser reads them so (``ｅｖｉｌ.com`` is ``evil.com`` to
    IDNA, ``evil。com`` too): read otherwise, a value the model stored in another form
    came back vouched for by a trusted tool, and a page hid a destination from
    ``untrusted`` (scrub22). At most four times the text (``textforms.NORMAL_TABLE``);
    look-alike letters of other scripts stay themselves, so never match."""
    if text.isascii():
        return text
    text = normal(text)
    if "\u3002" in text:
        text = text.replace("\u3002", ".")  # (C speed; translating with a dict: 6 ms a 64 K)
    if "\uff61" in text:
        text = text.replace("\uff61", ".")
    if not unicodedata.is_normalized("NFC", text):
        text = unicodedata.normalize("NFC", text)
    return text


def _value_normal(value: str, scan: _Scan | None = None) -> str:
    """``_normal`` of a value, kept with the scan units undoing its URL spellings cost, and
    those charged to ``scan``, alike cold or warm (``_Scan.value``): as the work goes on a
    miss, at once on a hit. Kept because ``_matcher_of`` reads the same form, and a long
    value not ASCII costs milliseconds to read (twice, 600 K characters cost 130-150 ms a
    call); its units kept, so a call that has them charged does not respell it again."""
    found = _VALUE_NORMAL.get(value)
    if found is not None:
        if scan is not None:
            scan.charge(found[1])
        return found[0]
    spent = [0]

    def charge(units: int) -> None:
        spent[0] += units
        if scan is not None:
            scan.charge(units)

    normal_form = _respelled(_forms(value), charge)
    if len(_VALUE_NORMAL) >= _CACHE_SIZE:
        _VALUE_NORMAL.clear()
    _VALUE_NORMAL[value] = (normal_form, spent[0])
    return normal_form


_VALUE_NORMAL: dict[str, tuple[str, int]] = {}


def _normal_charged(text: str, scan: _Scan) -> str:
    """``_normal`` of a text built for this call alone (joined arguments, params), undoing
    its URL spellings charged to ``scan`` first (its reading is: ``_Scan.texts``)."""
    return _respelled(_forms(text), scan.charge)


_LAST_CUT: tuple[str, str, int] = ("", "", 0)


def _normal_cut(text: str, scan: _Scan) -> tuple[str, int]:
    """``text`` cut at ``MAX_TEXT`` and read through ``_normal``, and the scan units
    undoing its URL spellings cost (charged to ``scan`` first, once a call:
    ``_Scan.rewrite``); the last one kept, by the text's identity: ``_as_written`` reads
    the result ``_lower`` has just read, and a text dense in compatibility characters
    costs about 5 ms for 64 K to normalise (twice a result, a cold history of 100 such
    results cost 1.2 s in one call)."""
    global _LAST_CUT
    last = _LAST_CUT
    if last[0] is text:
        if last[2]:
            scan.rewrite(text, last[2])
        return last[1], last[2]
    spent = [0]

    def charge(units: int) -> None:
        spent[0] += units
        scan.rewrite(text, spent[0])

    cut = _respelled(_forms(text[:MAX_TEXT]), charge)
    _LAST_CUT = (text, cut, spent[0])
    return cut, spent[0]


def _lower(text: str, scan: _Scan) -> str:
    """``text`` cut at ``MAX_TEXT``, read through ``_normal``, a sentence glued to a host
    moved off it (``_unglue``) and lower-cased, cached (results are searched by many calls
    of a session, and their hashes are cached by the string objects)."""
    return _reading(text, scan)[0]


def _reading(text: str, scan: _Scan) -> tuple[str, int, bool]:
    """``_lower``'s reading of ``text``, the units rewriting it cost, and whether ungluing
    changed it. Its passes are charged to ``scan`` first (``_Scan.read``), and undoing its
    URL spellings and its glued sentences before they are, cached or not
    (``_Scan.rewrite``; an ASCII text with no spelling to undo (``_respelled``'s gates)
    and no glued sentence, the usual one, makes no such call)."""
    scan.read(text, MAX_TEXT)
    found = _LOWER.get(text)
    if found is None:
        cut, units = _normal_cut(text, scan)
        unglued = cut
        if _glue_seen(cut):
            # Python's regex tries each dot (``GLUE_FIND``): 100 fresh pages of ``.Ab``
            # cost a cold call 154 ms, ``a.`` 71 ms (red team 25), RE2 4-7 times less.
            spent = [units + GLUE_FIND.units(cut)]
            scan.rewrite(text, spent[0])

            def charge(n: int) -> None:
                spent[0] += n
                scan.rewrite(text, spent[0])

            unglued = _unglue(cut, charge)
            units = spent[0]
        found = (unglued.lower(), units, unglued is not cut)
        if len(_LOWER) >= _CACHE_SIZE:
            _LOWER.clear()
        _LOWER[text] = found
    elif found[1]:
        scan.rewrite(text, found[1])
    return found


def _as_written(text: str, scan: _Scan) -> str | None:
    """``text`` lower-cased as written, when ``_lower`` unglued something in it (else None):
    an untrusted result is searched in both forms. Ungluing reads the host a sentence is
    glued to, not the longer one (``www.x.com.They``), which is right for what vouches (the
    request, a trusted result) but hid a destination from ``untrusted`` when an injected
    page wrote its last label capitalised (``https://files.evil.Com now``; red team 18).
    The same reading as ``_lower``'s, charged once a call (its lower-casing with
    ungluing's, ``GLUE_FIND``): no pass of its own over a text ungluing left as it was."""
    if not _reading(text, scan)[2]:
        return None
    found = _AS_WRITTEN.get(text)
    if found is None:
        found = _normal_cut(text, scan)[0].lower()
        if len(_AS_WRITTEN) >= _CACHE_SIZE:
            _AS_WRITTEN.clear()
        _AS_WRITTEN[text] = found
    return found


_AS_WRITTEN: dict[str, str] = {}


def _dense(low: str) -> str:
    """A lower-cased text without the separators identifiers and phone numbers may hold:
    the prefilter for them (a value that is not in it cannot match)."""
    found = _DENSE.get(low)
    if found is None:
        if low.isascii():
            found = low.translate(_SEPARATORS)
        else:
            # (``translate`` raises and clears a KeyError for every character it keeps:
            # 5-7 ms for 64 K not ASCII; six replaces at C speed, 0.5 ms)
            found = low
            for separator in _SEPARATOR_CHARS:
                found = found.replace(separator, "")
        if len(_DENSE) >= _CACHE_SIZE:
            _DENSE.clear()
        _DENSE[low] = found
    return found


_SEPARATOR_BYTES: Final = _SEPARATOR_CHARS.encode("ascii")
_DENSE_ASCII: dict[str, str] = {}


def _dense_ascii(low: str) -> str:
    """``_dense`` without the characters that are not ASCII either: the prefilter for an
    ASCII value (what holds it contiguous in ``_dense(low)`` holds it contiguous here:
    only characters outside it are removed). At C speed in a text that is not ASCII
    (``encode`` ignoring them, ``bytes.translate``: 0.02-0.18 ms for 64 K where six
    replaces took 0.2-0.6 ms, charged an eighth of a unit a character; with readings
    kept, 50 pages of Russian made it half of a call's 34 ms)."""
    if low.isascii():
        return _dense(low)
    found = _DENSE_ASCII.get(low)
    if found is None:
        found = low.encode("ascii", "ignore").translate(None, _SEPARATOR_BYTES).decode("ascii")
        if len(_DENSE_ASCII) >= _CACHE_SIZE:
            _DENSE_ASCII.clear()
        _DENSE_ASCII[low] = found
    return found


# -------------------------------------------------------------------- URL spellings

_UNRESERVED: Final = {
    key.encode(): ch.encode()
    for ch in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
    for key in (f"{ord(ch):02x}", f"{ord(ch):02X}")
}
"""The two hex digits after a ``%`` that encode an unreserved character (RFC 3986 2.3),
either case: the same character to every URL parser (6.2.2.2)."""
_ESCAPE: Final = re.compile(rb"%(?:[46][1-9A-Fa-f]|[57][0-9Aa]|3[0-9]|2[DEde]|5[Ff]|7[Ee])")
"""A percent-encoded unreserved character (``_UNRESERVED``): the only escapes read. The
usual ones (``%20``, ``%2F``, ``%3D``) are not, so cost a link nothing."""
_TOKEN_END: Final = re.compile(rb"[\s<>\"'`]")
"""What ends a URL (``_unescaped``): white space, a quote or an angle bracket."""
_PUNYCODE: Final = tuple(re.compile(dashes + rb"[A-Za-z0-9-]{1,59}(?![A-Za-z0-9-])")
                         for dashes in (rb"n--", rb"N--"))
"""An IDNA label in its ASCII form (``xn--``, at most 63 characters, as DNS allows), whole:
nothing of a label after it, nor before its ``x`` (``_unicode_label``). Found from a
literal (two passes, 0.03 ms a 64 KiB text; ``(?:xn|XN|Xn|xN)--`` took 0.35 ms)."""
_LABEL_CHARS: Final = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")
_IP_HOST: Final = tuple(
    re.compile(after + rb"(\[[0-9A-Fa-f:.]{2,45}\]|[0-9][0-9A-Fa-fxX.]{0,63})(?![A-Za-z0-9._~%-])")
    for after in (rb"://", rb"@"))
"""A URL's host that may be an IP address, whole: after the scheme or after an ``@``
(user info: ``_after_scheme``), a bracketed IPv6 address or digits, ``x``, hex letters
and dots (``_canonical_address``). User info is not part of the pattern: each ``://`` of
a long token would read on to its end. Python's ``re`` from a literal (a match costs a
tenth of pyre2's; ``(?://|@)`` took ten times as long to search)."""
_DOTTED: Final = re.compile(rb"(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}"
                            rb"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])")
"""An IPv4 address as written canonically (the usual numeric host: kept as it is)."""

_NUMERIC_HOST: Final = (re.compile(rb"://[0-9\[]"), re.compile(rb"@[0-9\[]"))
"""The address passes' own gates (a digit or bracket after a scheme or ``@``), run once
``_ANY_SPELLING`` found something in the text."""

_ANY_SPELLING: Final = re2.compile(
    rb"%(?:[46][1-9A-Fa-f]|[57][0-9Aa]|3[0-9]|2[DEde]|5[Ff]|7[Ee])|[nN]--|(?:://|@)[0-9\[]",
    RE2_OPTIONS)
"""Whether a text holds anything ``_respelled`` reads (an unreserved escape, ``n--``, a
digit or bracket after a scheme or ``@``): one RE2 pass over its UTF-8, about 120 µs a
64 KiB text whatever it holds. Each pass's own gate in Python's ``re`` (and four of them
on every text) cost a text dense in ``%20`` 0.4-0.5 ms uncharged: 100 fresh such pages
took a call 61 ms and were allowed (measured by the lead, url25 merge)."""
GATES_COST: Final = _units(10)  # (ns, as measured below)
"""Scan units (per ``PASS_BYTES``) of the passes' own gates, run only on a text the
one-pass gate found something in: about 0.17 ms a 64 KiB text."""

ESCAPE_COST: Final = _units(1_280)  # (ns, as measured below)
"""Scan units of each escape of an unreserved character in a text (``_unescaped``):
0.3-1 µs of Python each, with the URL around it found once for all its escapes."""
TOKEN_COST: Final = _units(2_560)  # (ns, as measured below)
"""Scan units of each token holding such an escape (found, its start and end searched for
and whether it is a URL: about 2 µs)."""
NAME_COST: Final = _units(10_240)  # (ns, as measured below)
"""Scan units of each ``xn--`` label and each URL host that may be an IP address
(``_respelled``): 4-8 µs each (decoding the label and reading it as any text, or parsing
the address; a canonical dotted address is kept at a regex's cost)."""
DOTTED_COST: Final = _units(640)  # (ns, as measured below)
"""Scan units of a URL host written as a canonical dotted IPv4 address (``_DOTTED``)."""
PROBE_COST: Final = _units(1_280)  # (ns, as measured below)
"""Scan units of each place a label or address pass tries a match at (its literal, and
for an address a digit or bracket after it): up to 64 bytes on, about 1 µs (a text of
``n--`` repeated)."""
PASS_BYTES: Final = 4
"""Bytes of a text each pass of ``_respelled`` reads for a scan unit (Python's ``re`` on
bytes from a literal: 0.03-0.04 ms a 64 KiB text, about 0.5 ns a byte; what the matches
cost is charged besides)."""


def _respelled(text: str, charge: Callable[[int], None] | None = None) -> str:
    """``text`` with its URLs as RFC 3986 (6.2.2) and the WHATWG URL parser read them: each
    percent-encoded unreserved character of a URL (``%65``, ``%2E``, ``%7e``;
    ``_unescaped``) as the character, then each ``xn--`` label as the Unicode label it
    encodes (``xn--bcher-kva`` is ``bücher``), then a URL's numeric host as its canonical
    address (``0x7f.1``, ``2130706433`` and ``0177.0.0.1`` are ``127.0.0.1``; ``[0:0::1]``
    is ``[::1]``). The value and every text are read so, so each spelling is found wherever
    another one is written (url25: a page writing ``https://%65vil.com/%64rop`` hid
    ``https://evil.com/drop`` from ``untrusted()``). Other escapes (``%2f`` is not a slash,
    ``%25`` not an escape) stay: a parser reads them as other URLs.

    Each pass runs only where the text holds what it reads (``_ESCAPE``, ``n--``,
    ``_NUMERIC_HOST``: C speed; the usual text runs none), is one linear search of the
    text's UTF-8, and its Python per match is given to ``charge`` first (``PASS_BYTES``,
    ``PROBE_COST``, ``ESCAPE_COST``, ``TOKEN_COST``, ``NAME_COST``)."""
    data = out = text.encode("utf-8", "surrogatepass")
    if _ANY_SPELLING.search(data) is None:
        return text  # (the usual text: one linear RE2 pass, whatever it holds)
    if charge is not None:
        charge(GATES_COST * (len(data) // PASS_BYTES))
    escapes = _ESCAPE.search(out) is not None
    if escapes:
        out = _unescaped(out, charge)
    for dashes, pattern in zip((b"n--", b"N--"), _PUNYCODE, strict=True):
        if dashes in out:
            out = _substituted(pattern, out, out.count(dashes), _unicode_label, charge,
                               lambda m: NAME_COST)
    for gate, pattern in zip(_NUMERIC_HOST, _IP_HOST, strict=True):
        if gate.search(out) is not None:
            out = _substituted(pattern, out, len(gate.findall(out)), _canonical_address,
                               charge, _address_cost)
    return text if out is data else out.decode("utf-8", "surrogatepass")


def _substituted(pattern: Any, data: bytes, probes: int, replace: Any,
                 charge: Callable[[int], None] | None, cost: Any) -> bytes:
    """``data`` with each match of ``pattern`` replaced (``replace(data, match)``: where
    the replaced part starts, at the match or before it, and what replaces it up to the
    match's end; None: kept), the pass charged first (its bytes and the ``probes`` places
    it tries a match at, each up to 64 bytes on) and each match before it is replaced
    (``charge``, ``cost``); ``data`` itself when nothing is replaced."""
    if charge is not None:
        charge(len(data) // PASS_BYTES + PROBE_COST * probes)
    parts: list[bytes] = []
    last = 0
    for m in pattern.finditer(data):
        if charge is not None:
            charge(cost(m))  # (as they are found: a text of many runs the budget out early)
        new = replace(data, m)
        if new is not None:
            start, replaced = new
            parts += (data[last:start], replaced)
            last = m.end()
    if not parts:
        return data
    parts.append(data[last:])
    return b"".join(parts)


def _unescaped(data: bytes, charge: Callable[[int], None] | None) -> bytes:
    """``data`` with each escape of an unreserved character in a URL decoded: in a token
    (up to white space, a quote or an angle bracket: ``_TOKEN_END``) with ``://`` or
    ``www.`` (any case) before the escape. A text's other escapes are words: an IBAN
    written ``%46%52%37...`` in an e-mail is a disguise the model decoded, of unknown
    origin (tests/test_redteam16_provenance.py), not a link. Linear: each token is looked
    through once, from its first escape (back to its start in the reversed text, on to its
    end), and each escape charged as it is found."""
    if charge is not None:
        charge(len(data) // PASS_BYTES)
    size = len(data)
    reversed_data = b""
    parts: list[bytes] = []
    last = 0
    start = end = searched = -1
    in_url = False
    for m in _ESCAPE.finditer(data):
        if charge is not None:
            charge(ESCAPE_COST)
        at = m.start()
        if at >= end:  # the first escape of another token
            if charge is not None:
                charge(TOKEN_COST)
            if not reversed_data:
                reversed_data = data[::-1]
            found = _TOKEN_END.search(data, at)
            end = size if found is None else found.start()
            found = _TOKEN_END.search(reversed_data, size - at)
            start = searched = 0 if found is None else size - found.start()
            in_url = False
        if not in_url:
            head = data[max(start, searched - 3):at]
            in_url = b"://" in head or b"www." in head.lower()
            searched = at
        if in_url:
            parts += (data[last:at], _UNRESERVED[m.group()[1:]])
            last = m.end()
    if not parts:
        return data
    parts.append(data[last:])
    return b"".join(parts)


def _unicode_label(data: bytes, m: Any) -> tuple[int, bytes] | None:
    """An ``xn--`` label as the Unicode it encodes, read as any text is (``_forms``); as
    written when it is the end of a longer label or encodes nothing (a browser would not
    open it)."""
    start = m.start()
    if start < 1 or data[start - 1] not in b"xX" or (start > 1
                                                     and data[start - 2] in _LABEL_CHARS):
        return None
    unicode = _label(m.group()[3:].lower())
    return None if unicode is None else (start - 1, unicode)


@functools.lru_cache(maxsize=1024)
def _label(encoded: bytes) -> bytes | None:
    """The UTF-8 of the Unicode label ``xn--`` + ``encoded`` stands for, read as any text
    is (``_forms``), kept (a page names its hosts many times; charged alike, kept or not:
    ``NAME_COST``); None when it encodes nothing or ASCII only."""
    try:
        label = encoded.decode("punycode")
    except UnicodeError:
        return None
    if not label or label.isascii():
        return None  # (an ASCII label is never encoded: not a name a browser opens)
    return _forms(label).encode("utf-8", "surrogatepass")


def _address_cost(m: Any) -> int:
    """A numeric host's cost: ``NAME_COST``, or ``DOTTED_COST`` when it is canonical
    already (the usual one: a regex's test, kept as it is)."""
    return DOTTED_COST if _DOTTED.fullmatch(m.group(1)) is not None else NAME_COST


def _canonical_address(data: bytes, m: Any) -> tuple[int, bytes] | None:
    """A URL's numeric host as its canonical address (``_ipv4``, IPv6 compressed)."""
    start = m.start()
    if _DOTTED.fullmatch(m.group(1)) is not None:
        return None
    if data[start] == 0x40 and not _after_scheme(data, start):
        return None  # "@10" in prose, or in an e-mail address: not a URL's host
    host = m.group(1).decode("ascii")
    if host.startswith("["):
        try:
            canonical = "[" + ipaddress.IPv6Address(host[1:-1]).compressed + "]"
        except ValueError:
            return None
    else:
        found = _ipv4(host)
        if found is None:
            return None
        canonical = found
    return m.start(1), canonical.encode()


_AUTHORITY_ENDS: Final = re.compile(rb"[/\\?#\s]")


def _after_scheme(data: bytes, at: int) -> bool:
    """Whether the ``@`` at ``at`` ends a URL's user info: ``://`` before it in the same
    authority (no ``/ \\ ? #`` or white space between), looked for in the 256 bytes
    before it (a longer user info hides a numeric host from this reading)."""
    before = data[max(0, at - 256):at]
    scheme = before.rfind(b"://")
    return scheme >= 0 and _AUTHORITY_ENDS.search(before, scheme + 3) is None


_IPV4_PART: Final = re.compile(r"0[xX][0-9a-fA-F]*|0[0-7]*|[1-9][0-9]*")


def _ipv4(host: str) -> str | None:
    """A host as the WHATWG URL parser reads an IPv4 address (up to four dot-separated
    numbers, each decimal, octal with a leading ``0`` or hex with ``0x``; the last fills
    the bytes left; a trailing dot ignored), dotted; None when it is not one."""
    parts = host.split(".")
    if len(parts) > 1 and parts[-1] == "":
        parts.pop()
    if not 1 <= len(parts) <= 4:
        return None
    numbers: list[int] = []
    for part in parts:
        if _IPV4_PART.fullmatch(part) is None:
            return None
        if part[:2] in ("0x", "0X"):
            numbers.append(int(part[2:] or "0", 16))
        elif len(part) > 1 and part[0] == "0":
            numbers.append(int(part[1:], 8))
        else:
            numbers.append(int(part))
    if any(n > 255 for n in numbers[:-1]) or numbers[-1] >= 256 ** (5 - len(numbers)):
        return None
    address = numbers[-1]
    for i, n in enumerate(numbers[:-1]):
        address += n << (8 * (3 - i))
    return str(ipaddress.IPv4Address(address))


# -------------------------------------------------------------------- value -> pattern

_B_L = r"(?:^|[^\pL\pN\pM])"
_B_R = r"(?:$|[^\pL\pN\pM])"
_GAP = r"[^\pL\pN\pM\x00]+"
"""What may stand between two words of a plain text: anything but a letter, a digit, a
combining mark (part of the letter before it) or the NUL that ends a text."""

_EMAIL = re.compile(r"[a-z0-9.!#$%&'*+/=?^_`{|}~-]+@[a-z0-9-]+(?:\.[a-z0-9-]+)+")
_EMAIL_LEFT = (r"(?:^|[^a-z0-9.!#$%&'*+/=?^_`{|}~-]"
               r"|(?:^|[^a-z0-9.!#$%&'*+/=?^_`{|}~-])['`])")
"""What may precede an address: a character no address holds, or a quote that opens a
quoted address (itself after such a character): ``'bob@x.com'`` in a request, and every
address in a result printed as a Python dict (``{'email': 'bob@x.com'}``). A quote inside
a local part stays part of it: ``brien@x.com`` is not in ``o'brien@x.com``."""
_URL = re.compile(r"(?:[a-z][a-z0-9+.-]*://|www\.)\S+")
_HOST = re.compile(r"(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z]{2,63}\.?")
_ISO_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?:[t ][0-9:.]+(?:z|[+-]\d{2}:?\d{2})?)?")
_AMOUNT = re.compile(r"[-+]?(?:[$€£¥]\s?)?((?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)")
_PHONE = re.compile(r"\+?[0-9][0-9 ().-]{5,}[0-9]")
_IDENTIFIER = re.compile(r"[a-z0-9]+(?:[ -][a-z0-9]+)*")
_WORD = re2.compile(r"[\pL\pN\pM]+")
"""A word: letters and digits, with the combining marks on them. A mark is part of its
letter, never a gap between words (scrub22: ``acme`` + U+0301, the domain ``acmé.com``
an attacker can register, was plain text of the words ``acme`` and ``com``, named by a
request that names ``acme.com``)."""
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
           "september", "october", "november", "december")


SEARCH_COST: Final = _units(2_500)  # (ns, as measured below)
"""Scan units of one search of one text for one value besides its length (about 1-3 µs of
Python around the scan: a call of many values over many history results is bounded by the
searches it makes, not only by the characters they read)."""
COMPILE_SCAN_COST: Final = _units(2_500_000)  # (ns, as measured below)
"""Scan units (``SCAN_BUDGET``) of the first use of a value's pattern in a call. RE2 takes
1-2.5 ms to compile one (its word boundaries are Unicode classes): thousands of distinct
values found in a call's texts would otherwise cost seconds. Charged per call, whatever the
process compiled before, so a call is decided alike cold or warm; a value whose literal is
in no text never needs its pattern, and costs nothing of this."""
CLASS_SCAN_COST: Final = _units(500_000)  # (ns, as measured below)
"""Scan units of each Unicode class (``\\pL``, ``\\pN``) in a pattern, on top of
``COMPILE_SCAN_COST``: RE2 compiles each in about 0.4 ms, and a text's pattern holds two
between each pair of its words (red team 21: a value of 200 words took 150-260 ms to
compile, charged as one pattern; 40 of them, 7 s in one call)."""


@dataclass(frozen=True, slots=True)
class Matcher:
    """One value's search: a literal every match contains, then the bounded pattern
    (compiled only when the literal is found: most values appear in no text)."""

    kind: str
    literal: str
    pattern: str
    """RE2 source of the bounded pattern."""
    dense: str = ""
    """For identifiers and phone numbers: what the text without separators must contain."""
    words: str = ""
    """The value's letters and digits, lower-cased: what a field that is the value holds."""
    parts: tuple[str, ...] = ()
    """The value's words (runs of letters and digits), its first ``VALUE_WORDS``: what a
    call given the value split over its arguments holds, each somewhere
    (``Origins._first_given``)."""
    partial: bool = False
    """The value is longer than its pattern reads (``VALUE_CHARS``): a text holds it only
    where the pattern matches and ``words``, all of them, run on in it (``_letters``)."""

    def found(self, low: str, budget: _Scan) -> bool:
        return self.first(low, budget) is not None

    def first(self, low: str, budget: _Scan) -> int | None:
        """Where the first match in ``low`` is (a position inside the matched value, never
        on a boundary character), or None."""
        budget.charge(SEARCH_COST)
        if self.literal:  # (an identifier's or a phone number's is "": no search)
            budget.over(LITERAL, low)
            if self.literal not in low:
                return None
        if self.dense:
            ascii_value = self.dense.isascii()  # (made once a text, cached: charged alike)
            budget.over(DENSE if ascii_value else DENSE_ANY, low)
            if self.dense not in (_dense_ascii(low) if ascii_value else _dense(low)):
                return None
        budget.over(RE2_SEARCH, low)
        budget.use(self.pattern)
        match = compile_re2(self.pattern).search(low)
        if match is None:
            return None
        if self.partial and self.words not in _letters(low, budget):
            return None
        return int(match.start() + match.end()) // 2


_WORDLESS = re.compile(r"[^\w]|_")
"""What is not a letter or digit (removed to compare a field with a value: ``_wordless``)."""
_ASCII_WORDLESS = bytes(c for c in range(128) if not chr(c).isalnum())


def _wordless(text: str) -> str:
    """``text``'s letters and digits: an ASCII text's at C speed (``bytes.translate``),
    any other's one regex substitution a character that is not one (100-150 ns a
    character: ``LETTERS_COST``, which the caller charges first). Taken by the regex, a
    value of 450,000 ``a_`` cost its first call 92 ms, charged a value's ``VALUE_COST``,
    and one of a letter and 300,000 combining marks 87-117 ms (red team 25)."""
    if text.isascii():
        return text.encode("ascii").translate(None, _ASCII_WORDLESS).decode("ascii")
    return _WORDLESS.sub("", text)
_QUOTED = "'([^'\\n]{1,1000})'|\"([^\"\\n]{1,1000})\""
_QUOTED_RE: Final = re2.compile(_QUOTED, options=RE2_OPTIONS)
"""Compiled at import (14 ms: its bounded repetitions; see ``_GLUED_SEEN_RE``)."""
_KEY = re.compile(r"[\w .-]{1,64}")
_OPENERS = frozenset({"", "[", "{", ",", ":", "(", "\n"})
_CLOSERS = frozenset({"", "]", "}", ",", ":", ")", "\n"})


def _fields_of(low: str) -> Iterator[str]:
    """The fields of a result as tools print records: each quoted string (``{'email':
    'a@b.c'}``, JSON) and each line without its YAML list dash or ``key:``
    (``- email: a@b.c``, ``recipient: GB29...``). Linear in the text."""
    for m in _QUOTED_RE.finditer(low):
        # a quoted string in a record, not in prose: "he said 'Bob' twice" is no field
        start, end = m.start(), m.end()
        before = low[max(0, start - 8):start].rstrip(" \t")[-1:] or (
            "" if start <= 8 else "\x01")  # only blanks in reach: the text's start, or prose
        after = low[end:end + 8].lstrip(" \t")[:1] or ("" if end + 8 >= len(low) else "\x01")
        if before in _OPENERS and after in _CLOSERS:
            yield m.group(1) or m.group(2) or ""
    for line in low.split("\n"):
        line = line.strip(" \t,")
        if line.startswith("- "):
            line = line[2:].lstrip(" ")
        key, colon, rest = line.partition(": ")
        if colon and _KEY.fullmatch(key):
            line = rest.strip(" \t,")
        yield line


_LETTERLESS = re.compile(r"(?:[^\w\x00]|_)+")
"""What is not a letter or digit, NUL aside (NUL parts texts no value crosses)."""
_ASCII_LETTERLESS = bytes(c for c in range(1, 128) if not chr(c).isalnum())
_LETTERS: dict[str, str] = {}
LETTERS_COST: Final = _units(160)  # (ns, as measured below)
"""Scan units a character of a text that is not ASCII costs ``_letters`` (a regex
substitution, 100-150 ns a character where a scan unit is about 2.5 ns; an ASCII text is
one C-speed ``bytes.translate``, charged as a scan)."""


def _letters(low: str, budget: _Scan) -> str:
    """``low``'s letters and digits (and NULs), cached: where a value longer than its
    pattern reads must run on whole (``Matcher.partial``). Charged alike cached or not (a
    call is decided alike cold or warm)."""
    ascii_only = low.isascii()
    budget.charge(len(low) if ascii_only else LETTERS_COST * len(low))
    found = _LETTERS.get(low)
    if found is None:
        if ascii_only:
            found = low.encode("ascii").translate(None, _ASCII_LETTERLESS).decode("ascii")
        else:
            found = _LETTERLESS.sub("", low)
        if len(_LETTERS) >= _CACHE_SIZE:
            _LETTERS.clear()
        _LETTERS[low] = found
    return found


VALUE_CHARS: Final = 1024
"""Characters of a value its pattern is made of, and ``VALUE_WORDS`` the words of a plain
text's. A longer value is matched as plain text by its first words, and then found only
where its letters and digits, every one, run on in the text (``Matcher.partial``): its
first characters alone named what they did not hold (red team 21: ``"bob@acme.com"``,
1,020 blanks, ``",mallory@evil.com"`` was named by a request naming bob), and a value cut
inside a word was found nowhere (an untrusted page's long text copied whole was not
untrusted)."""
VALUE_WORDS: Final = 16
"""Words of a plain text's pattern (two Unicode classes each: ``CLASS_SCAN_COST``)."""


@functools.lru_cache(maxsize=16)
def _first_words(low: str) -> tuple[str, ...]:
    """A value's first ``VALUE_WORDS + 1`` words (``_WORD``), found once for its
    classification, its pattern and its parts: pyre2 maps each match's offsets on a
    ``str`` (5-15 µs a word on a value of 1,000 characters), and the three passes over
    them cost a value of many words 0.4 ms, all of its words 3.5 ms."""
    return tuple(m.group() for m in itertools.islice(_WORD.finditer(low), VALUE_WORDS + 1))


def _partial(low: str) -> tuple[str, str, str, bool] | None:
    """``_classify`` of a value longer than ``VALUE_CHARS`` or of more than ``VALUE_WORDS``
    words: plain text, its first word the literal, the pattern its first words, up to
    ``VALUE_WORDS`` of them and ``VALUE_CHARS`` characters (blanks and fillers before and
    between them do not count), with no boundary after the last (what follows is the
    value's ``words``)."""
    words: list[str] = []
    size = 0
    for found in _first_words(low):
        word = found[:VALUE_CHARS - size]
        words.append(word)
        size += len(word)
        if size >= VALUE_CHARS or len(words) >= VALUE_WORDS:
            break
    if not words:
        return None
    return ("text", words[0], _B_L + _GAP.join(re.escape(w) for w in words),
            True)


def _number_pattern(d: Decimal) -> str:
    text = format(abs(d).normalize(), "f")
    whole, _, frac = text.partition(".")
    groups: list[str] = []
    while len(whole) > 3:
        groups.insert(0, whole[-3:])
        whole = whole[:-3]
    groups.insert(0, whole)
    body = ",?".join(groups)
    body += (r"\." + frac + "0*") if frac else r"(?:\.0+)?"
    return r"(?:^|[^\pL\pN.,])" + body + r"(?:$|[^\pL\pN.,]|[.,](?:$|[^0-9]))"


def _identifier_pattern(compact: str) -> str:
    return _B_L + "[ -]?".join(re.escape(c) for c in compact) + _B_R


_NO_YEAR = r"(?:$|[^\pL\pN ,]|,$|,? +(?:$|[^\pN ]|\pN{1,3}(?:$|[^\pN])))"
"""What may follow a month and day that have no year: not a letter or digit, and after an
optional comma and blanks no number of four digits or more (a time, "at 10:00", is fine)."""


def _date_pattern(date: datetime.date) -> str:
    y, m, d = date.year, date.month, date.day
    month = _MONTHS[m - 1]
    names = f"(?:{month}|{month[:3]}\\.?)"
    day = f"0?{d}" if d < 10 else str(d)
    mon = f"0?{m}" if m < 10 else str(m)
    nth = "(?:st|nd|rd|th)?"
    forms = [
        f"{y}-{m:02d}-{d:02d}", f"{y}/{m:02d}/{d:02d}",
        f"{day}[./-]{mon}[./-]{y}", f"{mon}/{day}/{y}",
        f"{names} {day}{nth},? {y}", f"{day}{nth} (?:of )?{names},? {y}",
    ]
    # A month and day with no year after them ("May 1st to May 5th", "on 15 April"): any
    # year, as people write dates; not when a year follows ("May 1st, 2023" is 2023's).
    yearless = f"(?:{names} {day}{nth}|{day}{nth} (?:of )?{names})" + _NO_YEAR
    return (r"(?:^|[^\pL\pN])(?:(?:" + "|".join(forms) + r")(?:$|[^\pL\pN])|"
            + yearless + ")")


def _as_date(low: str) -> datetime.date | None:
    m = _ISO_DATE.fullmatch(low)
    if m is None:
        return None
    try:
        return datetime.date(int(m[1]), int(m[2]), int(m[3]))
    except ValueError:
        return None


def _classify(value: Any, normal_form: str) -> tuple[str, str, str, bool] | None:
    """(kind, literal, RE2 pattern, partial: ``Matcher.partial``) for a value (a text read
    as ``normal_form``, its ``_normal``); None when nothing can contain it.

    For identifiers and phone numbers the literal is the value's digits and letters without
    separators, to look for in the dense text (see ``Matcher.dense``)."""
    if type(value) is int or type(value) is float:
        if value != value or value in (float("inf"), float("-inf")):
            return None
        d = Decimal(str(value)) if type(value) is float else Decimal(value)
        whole = format(abs(d).normalize(), "f").partition(".")[0]
        return "number", whole[-3:], _number_pattern(d), False
    if type(value) is not str:
        return None
    low = normal_form.strip().lower()
    if len(low) > VALUE_CHARS:
        return _partial(low)
    found = _classify_short(low)
    if found is _TOO_MANY_WORDS:
        return _partial(low)
    return None if found is None else (*found, False)


def _url_parts(rest: str) -> tuple[str, str, bool]:
    """A URL (its scheme cut off) as a URL parser reads it: the host without a trailing
    dot and without the scheme's default port (with any other port), the path with its dot
    segments (``/./``) and an empty fragment removed and backslashes as slashes, and
    whether the host has a port of its own (red team 24: a page that wrote
    ``https://evil.com./drop``, ``:443``, ``/./`` or a backslash hid
    ``https://evil.com/drop`` from ``untrusted()``). User info before the host
    (``https://acme.com@evil.com/``) is left out: the destination is its host, and a text
    naming that URL with any or no user info names it (url25)."""
    cut = min((i for i in (rest.find("/"), rest.find("\\"), rest.find("?"), rest.find("#"))
               if i >= 0), default=len(rest))
    host, path = rest[:cut], rest[cut:].replace("\\", "/")
    host = host.rpartition("@")[2] or host  # user info is not the host (url25)
    name, colon, port = host.rpartition(":")
    if not (colon and port.isdigit()):
        name, port = host, ""
    name = name.rstrip(".") or name
    if port in ("80", "443"):
        port = ""
    while "/./" in path:
        path = path.replace("/./", "/")
    if path.endswith("#"):  # an empty fragment
        path = path[:-1].rstrip("/")
    return name + (":" + port if port else ""), path, bool(port)


def _url_pattern(host: str, path: str, ported: bool) -> str:
    """The host and path of a URL as a text may write them and a parser still read them
    alike: the host with a trailing dot and, without a port of its own, a default port;
    each slash of the path as a backslash, or followed by dot segments; the query and the
    fragment as written."""
    query = min((i for i in (path.find("?"), path.find("#")) if i >= 0), default=len(path))
    slash = r"[/\\](?:\.[/\\])*"
    return (re.escape(host) + ("" if ported else r"\.?(?::(?:80|443))?")
            + slash.join(re.escape(part) for part in path[:query].split("/"))
            + re.escape(path[query:]))


_TOO_MANY_WORDS: Final = ("text", "", "")
"""What ``_classify_short`` gives a plain text of more than ``VALUE_WORDS`` words."""


def _classify_short(low: str) -> tuple[str, str, str] | None:
    """``_classify`` of a value of at most ``VALUE_CHARS`` characters."""
    if not low:
        return None
    if _EMAIL.fullmatch(low):
        return "email", low, (_EMAIL_LEFT + re.escape(low)
                              + r"(?:$|[^a-z0-9.-]|\.(?:$|[^a-z0-9-]))")
    if _URL.fullmatch(low):
        rest = re.sub(r"^[a-z][a-z0-9+.-]*://", "", low).rstrip("/")
        if not rest:
            return None
        host, path, ported = _url_parts(rest)
        return "url", host, (r"(?:^|[^a-z0-9.-])(?:[a-z][a-z0-9+.-]*://)?" + _url_pattern(
            host, path, ported) + r"[/\\]?#?(?:$|[^a-z0-9_~%/?#&=+@:.,;!-]|[.,;:!?](?:$|\s))")
    if _HOST.fullmatch(low):
        host = low.rstrip(".")
        return "host", host, (r"(?:^|[^a-z0-9.-])" + re.escape(host)
                              + r"(?:$|[^a-z0-9.-]|\.(?:$|[^a-z0-9-]))")
    date = _as_date(low)
    if date is not None:
        # the day's digits are in every form, with or without a year
        return "date", str(date.day), _date_pattern(date)
    amount = _AMOUNT.fullmatch(low)
    if amount is not None:
        digits = amount[1].replace(",", "")
        compact = digits.replace(".", "")
        d = Decimal(digits)
        pattern = _number_pattern(d)
        if (digits[0] == "0" and len(digits.partition(".")[0]) > 1) or (
                "." not in digits and len(digits) >= 7):
            # An account number, not an amount: its digits may be grouped with spaces.
            if digits[0] == "0":
                return "identifier", compact, _identifier_pattern(compact)
            # Also an amount (1,500,000): no dense prefilter, which commas would defeat.
            return "identifier", "", f"(?:{pattern})|(?:{_identifier_pattern(compact)})"
        whole = digits.partition(".")[0]
        return "number", whole[-3:], pattern
    if _PHONE.fullmatch(low) and sum(c.isdigit() for c in low) >= 7:
        digits = "".join(c for c in low if c.isdigit())
        return "phone", digits, (r"(?:^|[^\pL\pN+])\+?" + "[ ().-]{0,3}".join(digits) + _B_R)
    if _IDENTIFIER.fullmatch(low) and any(c.isdigit() for c in low):
        compact = low.replace(" ", "").replace("-", "")
        if len(compact) >= 4:
            return "identifier", compact, _identifier_pattern(compact)
    words = list(_first_words(low))
    if not words:
        return None
    if len(words) > VALUE_WORDS:
        return _TOO_MANY_WORDS
    literal = max(words, key=len)
    return "text", literal, (_B_L + _GAP.join(re.escape(w) for w in words) + _B_R)


@functools.lru_cache(maxsize=4096)
def _matcher_of(value: Any, type_name: str) -> Matcher | None:
    # read once: classified and matched alike (twice, a value of 600 K characters not
    # ASCII cost 130-150 ms a call)
    normal_form = _value_normal(value) if type(value) is str else str(value)
    found = _classify(value, normal_form)
    if found is None:
        return None
    kind, literal, pattern, partial = found
    low = normal_form.lower()
    words = _wordless(low)
    # compared with a text's letters and digits (``_letters``: no marks), so without marks
    parts = tuple(_wordless(w) for w in _first_words(normal_form.strip().lower())[:VALUE_WORDS])
    if kind in ("identifier", "phone"):
        return Matcher(kind, "", pattern, dense=literal, words=words, parts=parts)
    return Matcher(kind, literal, pattern, words=words, parts=parts, partial=partial)


def matcher(value: Any, scan: _Scan) -> Matcher | None:
    """The search for ``value`` (cached); None when no text can contain it. Its first use
    in a call is charged to ``scan`` first (``VALUE_COST``, and a text's letters and digits
    unless it is ASCII: ``LETTERS_COST``), and a text's reading, whole, cached or not
    (``_Scan.read``)."""
    if type(value) is bool:
        return None
    if scan.value(value) and type(value) is str and not value.isascii():
        scan.charge(LETTERS_COST * len(value))  # (``_wordless``)
    if type(value) is str:
        scan.read(value, len(value))
    try:
        return _matcher_of(value, type(value).__name__)  # 1 and 1.0 hash alike
    except TypeError:  # unhashable
        return None


def kind_of(value: Any) -> str:
    """How ``value`` is matched: email, url, host, date, number, phone, identifier, text."""
    m = matcher(value, _Scan(SCAN_BUDGET))
    return m.kind if m is not None else "none"


def mentioned(value: Any, text: str) -> bool:
    """Whether ``text`` contains ``value`` under the documented normalisation (no budget)."""
    scan = _Scan(SCAN_BUDGET)
    m = matcher(value, scan)
    return m is not None and m.found(_lower(text, scan), scan)


# -------------------------------------------------------------------- the call's context


READ_COST: Final = _units(80)  # (ns, as measured below)
"""Scan units of each character of a text that is not ASCII, for reading it: through
``_normal`` (``textforms.normal``, NFC), ungluing and lower-casing, 25-60 ns a character
on a 64 KiB page dense in compatibility characters where a unit is about 2.5 ns. An
ASCII text is not rewritten: it costs nothing to read (an ``isascii`` test, a flag of the
string). Charged once per text per call, before it is read, whether the process has its
reading cached or not (``_Scan.read``): a cold history of 100 such pages, 6.5 M
characters, cost the first call 0.4-0.8 s uncharged; a call now reads at most
``SCAN_BUDGET // READ_COST`` (524,288) such characters, fewer as it searches."""


GLUE_COST: Final = _units(2_560)  # (ns, as measured below)
"""Scan units of each sentence glued to a token (``_GLUED``: ``www.x.com.They``) in a text
read, ASCII or not: ``_unglue`` looks back over its token in Python, about 1.3 µs a match,
charged as twice that (at 512, the budget's worth of them took 41-47 ms on a loaded
machine). A fresh ASCII page of 64 KiB made of ``a.b.Com`` cost 10 ms, 100 of them 0.6-1 s
a call, charged nothing; a page with a few costs a few thousand units."""


VALUE_COST: Final = _units(40_960)  # (ns, as measured below)
"""Scan units of a value's first use in a call (``matcher``): reading its kind and building
its search, 10-35 µs uncached for a value of a few words (a number, a date, a host, an
IBAN), charged alike cached or not, and for a text ``WORD_COST`` a word and
``VALUE_CHAR_COST`` a character besides (``_value_units``). The values of the recorded
calls whose results name the value are each looked up in the request
(``Origins.requested``): 3,600 fresh ones cost a call 85-120 ms, charged their searches
only; a call now looks up a few hundred."""
WORD_COST: Final = _units(8_000)  # (ns, as measured below)
"""Scan units of each word of a text value its classification reads (``_first_words``,
its pattern, its parts: at most ``VALUE_WORDS`` + 1), counted before it is read by the
separators of its first ``VALUE_CHARS`` characters: pyre2 maps each match's offsets
and each word is escaped and read again, 5-6 µs a word, up to 8 on a loaded machine (a
value of 16 words cost 103-153 µs to classify, charged 41: ``benchmarks/value_cost.py``)."""
VALUE_CHAR_COST: Final = _units(200)  # (ns, as measured below)
"""Scan units of each of a text value's first ``VALUE_CHARS`` characters, read by its
classification's patterns and escaped into its own (a URL of 60 path segments cost
123 µs, a host of 500 labels 135 µs)."""


def _value_units(normal_form: str) -> int:
    """What classifying a text value read as ``normal_form`` costs besides ``VALUE_COST``:
    its words (``WORD_COST``; as many as separators plus one, counted at C speed in an
    ASCII text; in any other, one a character: its separators may be any script's) and its
    characters (``VALUE_CHAR_COST``, four times that in a text not ASCII: 16 accented words
    or words with combining marks cost 110-220 µs to classify), both only as far as
    classification reads."""
    head = normal_form[:VALUE_CHARS]
    if head.isascii():
        words = len(head) - len(head.encode("ascii").translate(None, _ASCII_WORDLESS)) + 1
        return WORD_COST * min(words, VALUE_WORDS + 1) + VALUE_CHAR_COST * len(head)
    return WORD_COST * min(len(head), VALUE_WORDS + 1) + 4 * VALUE_CHAR_COST * len(head)
FIELD_COST: Final = _units(2_560)  # (ns, as measured below)
"""Scan units of each line and quoted string of a result read as fields (``_fields_of``,
``Origins.whole``: a result that names the value), charged before they are read: about
1.1 µs of Python each, charged as twice that. 100 untrusted results of 13,000 short lines
each cost one call 1.4-1.6 s, charged an eighth of a unit a character; a result of a few
hundred records costs a few hundred thousand units."""


def _reading_units(text: str, start: int, end: int) -> int:
    """Scan units of reading ``text[start:end]`` (``_READING``; ``READ_COST`` a character
    when it is not ASCII)."""
    units = sum(kind.units(text, start, end) for kind in _READING)
    if not text.isascii() and not text[start:end].isascii():
        units += READ_COST * (end - start)
    return units


class _Scan:
    """One evaluated call's scan budget (``SCAN_BUDGET``): what the provenance functions
    read and search is charged to it before they do, and a call that runs it out is an
    error of the rule (its ``failurePolicy``)."""

    __slots__ = ("left", "read_chars", "rewritten", "used", "values")

    def __init__(self, left: int) -> None:
        self.left = left
        self.used: set[str] = set()
        """Patterns this call has been charged for (``COMPILE_SCAN_COST``)."""
        self.read_chars: dict[str, int] = {}
        """Texts this call has been charged for reading (``READ_COST``): how many of
        their characters (a result is read up to ``MAX_TEXT``, a value whole)."""
        self.rewritten: dict[str, int] = {}
        """Texts this call has been charged for rewriting (undoing URL spellings,
        ``_respelled``; ungluing, ``GLUE_COST``): how many units."""
        self.values: set[tuple[type, Any]] = set()
        """Values this call has been charged for (``VALUE_COST``)."""

    def value(self, value: Any) -> bool:
        """Charge a value's first use in this call, cold or warm (``matcher``'s cache):
        whether this was it."""
        try:
            key = (type(value), value)
            if key in self.values:
                return False
        except TypeError:  # unhashable: no matcher, nothing to charge
            return False
        self.charge(VALUE_COST)
        self.values.add(key)
        if type(value) is str:
            # ``_matcher_of``'s reading, its URL spellings charged; then its words
            self.charge(_value_units(_value_normal(value, self)))
        return True

    def read(self, text: str, limit: int) -> None:
        """Charge reading ``text``'s first ``limit`` characters before they are read (its
        passes, ``_READING``, and for one not ASCII its rewriting, ``READ_COST``); once per
        text per call, alike cold or warm (the texts' cached readings, ``_LOWER`` and
        ``matcher``'s, never decide a call)."""
        size = min(len(text), limit)
        charged = self.read_chars.get(text, 0)
        if size <= charged:
            return
        self.charge(_reading_units(text, charged, size))
        self.read_chars[text] = size

    def over(self, kind: _Pass, text: str, passes: int = 1) -> None:
        """Charge ``passes`` passes of ``kind`` over ``text`` before they read it: the one
        way a pass over a text is charged (``_Pass``)."""
        self.charge(passes * kind.units(text))

    def rewrite(self, text: str, units: int) -> None:
        """Charge rewriting ``text`` (its URL spellings undone, then its glued sentences
        moved off their hosts): ``units`` in all, once per text per call, cold or warm
        (a cold reading charges each step before it, a warm one their sum)."""
        charged = self.rewritten.get(text, 0)
        if units > charged:
            self.charge(units - charged)
            self.rewritten[text] = units

    def texts(self, text: str) -> None:
        """Charge reading a text built for this call alone (joined arguments, params)
        before it is read, as any text's reading (``_reading_units``)."""
        self.charge(_reading_units(text, 0, len(text)))

    def charge(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise CelError("provenance: the call's scanning budget is exhausted")

    def use(self, pattern: str) -> None:
        """Charge a pattern's first use in this call (before it is compiled)."""
        if pattern not in self.used:
            self.charge(COMPILE_SCAN_COST + CLASS_SCAN_COST * pattern.count("\\p"))
            self.used.add(pattern)


# -------------------------------------------------------------------- kept readings

READING_VERSION: Final = 1
"""The version of the normalisation a kept reading (``kept_reading``) was made with: a
reading of another version is not this build's reading of its result (a character added
to ``textforms`` since, say), so is never used. Raise it whenever what ``_lower`` gives
a text changes."""

KEPT_COST: Final = 1
"""Scan units of each character of a result and of its kept reading, for checking the
reading is the result's (``_checked_reading``: both hashed, 0.11 ms a 64 KiB page of
Japanese each, about 1.7 ns a character where a unit is about 2.5 ns); charged once per
text per call in place of its reading (``READ_COST``, 32), cold or warm."""

KEPT_ASTRAL_COST: Final = _units(12)  # (ns, as measured below)
"""Scan units of each character past the BMP of a result and of its kept reading, besides
``KEPT_COST``: its UTF-16 is a surrogate pair, encoded at 3-8 ns a character and hashed
four bytes, and an identifier's prefilter reads it at 6.6 ns where ``DENSE`` charges 4.4
(50 fresh kept pages of mathematical letters and emoji cost a call 46 ms,
charged as 23: margin27, ``benchmarks/kept_readings.py``). Learned from the check's own
encoding (at most one page's, before the charge) and kept with the checked reading."""

RECORD_BUDGET: Final = 4 * 1024 * 1024
"""Scan units the reading of one result may cost when it is recorded (``kept_reading``),
counted as a call counts them: every 64 KiB page's normalisation (2 Mi at ``READ_COST``)
and 2 Mi units of URL spellings (about 500 ``xn--`` labels). A result past it keeps no
reading (later calls read it as an entry without one: charged as they are for it)."""

_READING_TAG: Final = b"guardrails/reading/%d/%s/%s\x00" % (
    READING_VERSION, unicodedata.unidata_version.encode(),
    hashlib.sha256(repr(sorted(NORMAL_TABLE.items())).encode()).hexdigest()[:16].encode())
"""What every sum is made under: the version, the Unicode data (NFC, case) and the table
of ``textforms`` (a filler or a compatibility character added there changes every sum:
no reading made before is used). A change elsewhere in the reading needs
``READING_VERSION`` raised (tests/test_record26_readings.py pins one reading)."""


def _reading_sum(text: str, low: str, wide: Sequence[bytes] = ()) -> str:
    """The check binding a reading to its result: SHA-256 of both (UTF-16, ``wide`` when
    the caller has encoded them, one length prefixed: no two pairs hash alike) under the
    version's tag."""
    digest = hashlib.sha256(_READING_TAG)
    digest.update(len(text).to_bytes(8, "little"))
    for data in wide or [t.encode("utf-16-le", "surrogatepass") for t in (text, low)]:
        digest.update(data)
    return digest.hexdigest()


def _past_bmp_units(text: str, low: str) -> tuple[list[bytes], int]:
    """The UTF-16 of a result and its reading, and what their characters past the BMP
    cost to check besides ``KEPT_COST`` (``KEPT_ASTRAL_COST``: surrogate pairs)."""
    wide = [t.encode("utf-16-le", "surrogatepass") for t in (text, low)]
    past = (len(wide[0]) + len(wide[1])) // 2 - len(text) - len(low)
    return wide, KEPT_ASTRAL_COST * past


def kept_reading(result: str) -> dict[str, Any] | None:
    """The reading of a tool result that its history entry keeps (``reading``): the text
    as the provenance functions search it (``_lower``: cut at ``MAX_TEXT``, normalised,
    its URLs respelled, lower-cased), its version and its check (``_reading_sum``). Made
    once, when the guard records the result, so that later calls read it at
    ``KEPT_COST`` a character instead of ``READ_COST`` and the respelling units (a page of
    Japanese cost a call 2 Mi units, an eighth of its budget; every call of the session).

    None where there is nothing to gain or it is not this simple reading: an ASCII text
    with no URL spelling (read free; without ``%``, ``n--``, ``://`` or ``@``, the
    ``_ANY_SPELLING`` gate's literals, it is not even searched for one), a text with a sentence glued to a host (read in two
    forms: ``_as_written``), or one whose reading costs more than ``RECORD_BUDGET``
    (bounded, as a call is). Charged to no call: its cost is the record's (at most
    ``RECORD_BUDGET``, about 1 ms for a 64 KiB page of Japanese)."""
    text = result[:MAX_TEXT]
    if text.isascii() and "%" not in text and "n--" not in text and "N--" not in text \
            and "://" not in text and "@" not in text:  # (the usual result: no frame)
        return None
    scan = _Scan(RECORD_BUDGET)
    try:
        scan.read(text, MAX_TEXT)
        cut = _respelled(_forms(text), scan.charge)
    except CelError:
        return None
    if cut is text and text.isascii():
        return None  # (nothing respelled: free to read)
    if _glue_seen(cut) and _GLUED.search(cut) is not None:  # (read in two forms)
        return None
    low = cut.lower()
    wide, past = _past_bmp_units(text, low)
    check = _reading_sum(text, low, wide)
    _remember(check, text, low, past)  # (this process need not check it again: it made it)
    return {"v": READING_VERSION, "low": low, "sum": check}


_CHECKED: dict[str, tuple[str, str, int]] = {}
"""Readings checked by this process, by their check: the text, the reading and the units
their characters past the BMP cost to check (``KEPT_ASTRAL_COST``), charged again when
it is found here: a call is charged alike cold or warm."""


def _checked_reading(reading: Any, result: str, scan: _Scan) -> str | None:
    """The kept ``reading`` of ``result`` (``kept_reading``) when it is one this build
    makes and its check is the result's and its own (``_reading_sum``), else None: then
    the result is read as a text without one, and charged so. The check is charged to
    ``scan`` (``KEPT_COST``) before it is made, alike whether this process has made it
    before: a cold replica decides as a warm one. A reading can only be trusted to be
    the result's reading: rewritten, moved from another entry, of another version, it
    fails its check (who can rewrite the session state can rewrite the result and the
    check with it: history is as safe as the session state)."""
    if type(reading) is not dict:
        return None
    low, check, version = reading.get("low"), reading.get("sum"), reading.get("v")
    if type(version) is not int or version != READING_VERSION or type(low) is not str \
            or type(check) is not str or len(check) != 64:
        return None
    text = result[:MAX_TEXT]
    if len(low) > 4 * len(text):  # (no text's reading is longer: ``NORMAL_TABLE``)
        return None
    scan.charge(KEPT_COST * (len(text) + len(low)))
    found = _CHECKED.get(check)
    if found is not None and found[0] == text and found[1] == low:
        scan.charge(found[2])
        return found[1]
    wide, past = _past_bmp_units(text, low)
    scan.charge(past)  # (before the hash; learned from the encoding, at most one page's)
    if _reading_sum(text, low, wide) != check:
        return None
    _remember(check, text, low, past)
    return low


def _remember(check: str, text: str, low: str, units: int = 0) -> None:
    if len(_CHECKED) >= _CACHE_SIZE:
        _CHECKED.clear()
    _CHECKED[check] = (text, low, units)


@dataclass(frozen=True, slots=True)
class Place:
    """One place a value appears (``provenance()`` gives them as maps)."""

    source: str
    """"request", "params" or "result"."""
    tool: str
    index: int
    trusted: bool
    requested: bool
    """For a result: the user's request names an argument of the call that produced it."""
    whole: bool = False
    """For a result: the value is a whole field of it (``fields``), not words inside a
    longer text such as a transfer's subject or a channel's name."""

    def as_map(self) -> dict[str, Any]:
        return {"source": self.source, "tool": self.tool, "index": self.index,
                "trusted": self.trusted, "requested": self.requested, "whole": self.whole}


@dataclass
class Origins:
    """What one evaluated call knows of where values came from: set by the engine."""

    request: str
    history: Sequence[Mapping[str, Any]]
    params: Any = None
    scan: _Scan = field(default_factory=lambda: _Scan(SCAN_BUDGET))
    _places: dict[Any, tuple[Place, ...]] = field(default_factory=dict)
    _params_text: dict[int, str] = field(default_factory=dict)
    _requested: dict[int, bool] = field(default_factory=dict)
    _given: tuple[str, list[int], list[int], int, list[str]] | None = None
    _fields: dict[int, dict[str, list[str]]] = field(default_factory=dict)
    _kept: dict[int, str | None] = field(default_factory=dict)

    def _kept_low(self, index: int, entry: Mapping[str, Any], result: str) -> str | None:
        """The reading kept with the result at ``index`` (``kept_reading``), checked, once
        a call; None without one that checks (the result is read as any text)."""
        if index in self._kept:
            return self._kept[index]
        found = _checked_reading(entry.get("reading"), result, self.scan)
        self._kept[index] = found
        return found

    def places(self, value: Any) -> tuple[Place, ...]:
        """Every place ``value`` appears, memoised per value."""
        key = (type(value), value) if _hashable(value) else None
        if key is not None:
            found = self._places.get(key)
            if found is not None:
                return found
        m = matcher(value, self.scan)
        out: list[Place] = []
        if m is not None:
            if self.request and m.found(_lower(self.request, self.scan), self.scan):
                out.append(Place("request", "", -1, True, True))
            params = self._params_lower()
            if params and m.found(params, self.scan):
                out.append(Place("params", "", -1, True, False))
            given: int | None = None  # the first call that ran and was given the value
            for i, entry in enumerate(self.history):
                result = entry.get("result") if isinstance(entry, Mapping) else None
                if type(result) is not str or not result:
                    continue
                kept = self._kept_low(i, entry, result)
                low = kept if kept is not None else _lower(result, self.scan)
                unglued = m.found(low, self.scan)
                if not unglued:
                    # (a kept reading has no glued sentence: none to read as written)
                    written = None if kept is not None else _as_written(result, self.scan)
                    if written is None or not m.found(written, self.scan):
                        continue
                tool = entry.get("tool")
                # Found only as written (a longer host than the unglued text reads):
                # it counts against the value, never for it.
                trusted = unglued and entry.get("trusted") is True
                if trusted:
                    # A trusted tool vouches for nothing the model gave it, or gave an
                    # earlier call: an echo ("no contact named X"), or a value stored
                    # by one tool and read back by a trusted one (an address book the
                    # model wrote to) came from the model.
                    if given is None:
                        given = self._first_given(m)
                    trusted = i < given
                out.append(Place("result", tool if type(tool) is str else "", i,
                                 trusted, self.requested(i, entry),
                                 self.whole(i, low, m)))
        places = tuple(out)
        if key is not None and len(self._places) < 4096:
            self._places[key] = places
        return places

    def requested(self, index: int, entry: Mapping[str, Any]) -> bool:
        """Whether the user's request names an argument of the call at ``index`` (the user
        pointed the agent at that content: "pay the bill in bill.txt")."""
        found = self._requested.get(index)
        if found is None:
            args = entry.get("args")
            values: list[Any] = []
            if isinstance(args, Mapping):
                for v in list(args.values())[:16]:
                    values += v[:16] if isinstance(v, list) else [v]
            low = _lower(self.request, self.scan) if self.request else ""
            found = bool(low) and any(
                (m := matcher(v, self.scan)) is not None and m.kind != "number"
                and m.found(low, self.scan)
                for v in values if type(v) is str)
            self._requested[index] = found
        return found

    def whole(self, index: int, low: str, m: Matcher) -> bool:
        """Whether some field of the result at ``index`` (read as ``low``) is the value and
        nothing more: the same letters and digits, and found in it under the value's
        matching."""
        fields = self._fields.get(index)
        if fields is None:
            # (counted at C speed: each line and quoted string is Python's to read)
            self.scan.over(FIND, low, 3)
            pieces = low.count("\n") + 1 + (low.count("'") + low.count('"')) // 2
            self.scan.over(RE2_SEARCH, low)  # (the quoted strings, ``_QUOTED``)
            self.scan.charge(FIELD_COST * pieces)
            fields = {}
            for f in _fields_of(low):
                if f.isascii():  # (an ASCII field's letters are taken at C speed)
                    self.scan.over(REWRITE, f)
                else:
                    self.scan.charge(LETTERS_COST * len(f))
                fields.setdefault(_wordless(f), []).append(f)
            self._fields[index] = fields
        return any(m.found(f, self.scan) for f in fields.get(m.words, ())[:4])

    def _first_given(self, m: Matcher) -> int:
        """The index of the first call in history that ran and may have been given the
        value (``len(history)`` if none): it is in the call's arguments, one by one or run
        together (a tool that joins a bank code and an account number echoes the IBAN
        neither holds alone), each of its words is in them, in any order, with anything
        between (a tool that joins ``user``, ``@`` and ``domain``; scrub22: the value
        split over arguments a tool joins with a separator was not given), or some of its
        arguments are not known (the entry was cut for size, or they are nested deeper
        than ``_ARGS_DEPTH``): then it cannot be told, and the answer is yes. Calls that
        did not run (denied, halted) were given nothing. One search of every call's texts
        together (see ``_given_texts``), and for a value of several words a look for each
        in each call's letters and digits before that."""
        text, ends, indices, unknown, joined = self._given_texts()
        at = m.first(text, self.scan) if text else None
        first = unknown if at is None else indices[bisect.bisect_right(ends, at)]
        if len(m.parts) > 1:
            for index, values in zip(indices, joined, strict=True):
                if index >= first:
                    break
                letters = _letters(values, self.scan)
                self.scan.charge(SEARCH_COST)
                self.scan.over(LITERAL, letters, len(m.parts))
                if all(part in letters for part in m.parts):
                    return index
        return first

    def _given_texts(self) -> tuple[str, list[int], list[int], int, list[str]]:
        """The argument texts of the calls that ran, up to the first whose arguments are
        not all known, in one text: per call its texts, each ended by ``\\x00``, which no
        pattern matches across; where each call's part ends, its index, the index of
        that first unknown call (``len(history)`` if none), and per call its values run
        together. Built once per evaluated call."""
        found = self._given
        if found is None:
            parts: list[str] = []
            ends: list[int] = []
            indices: list[int] = []
            joined: list[str] = []
            unknown, end = len(self.history), 0
            for i, entry in enumerate(self.history):
                if not isinstance(entry, Mapping) or entry.get("effect") in _DID_NOT_RUN:
                    continue
                texts = _args_lower(entry, self.scan)
                if texts is None:
                    unknown = i
                    break
                part = "".join(t + "\x00" for t in texts)
                parts.append(part)
                end += len(part)
                ends.append(end)
                indices.append(i)
                joined.append(texts[1])
            found = self._given = ("".join(parts), ends, indices, unknown, joined)
        return found

    def _params_lower(self) -> str:
        params = self.params
        if not params:
            return ""
        found = self._params_text.get(id(params))
        if found is None:
            text = "\x00".join(_strings(params, 0))
            self.scan.texts(text)
            found = _normal_charged(text, self.scan).lower()[:MAX_TEXT * 16]
            self._params_text[id(params)] = found
        return found


def _hashable(value: Any) -> bool:
    return type(value) in (str, int, float)


def _args_lower(entry: Mapping[str, Any], scan: _Scan) -> tuple[str, str] | None:
    """A recorded call's argument texts (names and values), lower-cased: separated, and
    run together; None when they are not all known. Both readings charged to ``scan``."""
    args = entry.get("args")
    if entry.get("truncated") is True or not isinstance(args, Mapping):
        return None
    names: list[str] = []
    values: list[str] = []
    if not _all_strings(args, 0, names, values):
        return None
    separated = "\x00".join(names + values)
    scan.texts(separated)
    separated = _normal_charged(separated, scan).lower()
    if len(separated) > MAX_TEXT:
        return None
    joined = "".join(values)
    scan.texts(joined)
    return separated, _normal_charged(joined, scan).lower()


_DID_NOT_RUN: Final = ("deny", "halt", "rejected")
"""History effects of calls that never ran (so were given nothing a tool could keep)."""

_ARGS_DEPTH: Final = 8
"""Nesting of a recorded call's arguments read to tell whether a tool echoed them."""


def _all_strings(value: Any, depth: int, names: list[str], values: list[str]) -> bool:
    """Append every text in a recorded call's arguments to ``values`` (strings, numbers)
    and ``names`` (map keys); False when some part is nested deeper than ``_ARGS_DEPTH``.
    (History keeps at most ``HISTORY_ENTRY_BYTES`` of a call's arguments: a short walk.)"""
    if type(value) is str:
        values.append(value)
    elif type(value) in (int, float):
        values.append(str(value))
    elif isinstance(value, Mapping | list | tuple):
        if depth >= _ARGS_DEPTH:
            return False
        items = value.items() if isinstance(value, Mapping) else enumerate(value)
        for k, v in items:
            if type(k) is str:
                names.append(k)
            if not _all_strings(v, depth + 1, names, values):
                return False
    return True


def _strings(value: Any, depth: int) -> Iterator[str]:
    if type(value) is str:
        yield value
    elif depth < 8 and isinstance(value, Mapping):
        for v in value.values():
            yield from _strings(v, depth + 1)
    elif depth < 8 and isinstance(value, list | tuple):
        for v in value:
            yield from _strings(v, depth + 1)
    elif type(value) in (int, float):
        yield str(value)


ORIGINS: ContextVar[Origins | None] = ContextVar("guardrails_origins", default=None)


def _origins(name: str) -> Origins:
    found = ORIGINS.get()
    if found is None:
        raise CelError(f"{name}() is only available while a call is evaluated")
    return found


def _arg(name: str, value: Any) -> None:
    if type(value) not in (str, int, float):
        raise no_overload(name, value)


@guarded("provenance")
def provenance(value: Any) -> list[dict[str, Any]]:
    """Every place ``value`` appears: ``{source, tool, index, trusted, requested, whole}``
    maps, in the order request, params, then tool results oldest first."""
    _arg("provenance", value)
    return [p.as_map() for p in _origins("provenance").places(value)]


@guarded("untrusted")
def untrusted(value: Any) -> bool:
    """True when ``value`` appears in the result of an untrusted tool and not in the request."""
    _arg("untrusted", value)
    places = _origins("untrusted").places(value)
    if any(p.source == "request" for p in places):
        return False
    return any(p.source == "result" and not p.trusted for p in places)


# -------------------------------------------------------------------- the request

_SPACE: Final = r"\s\x{0b}\x{1c}-\x{1f}\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}"
r"""White space as Python's ``str.isspace`` reads it, for RE2 (whose ``\s`` is ASCII's)."""
_RE_EMAIL: Final = (r"(?:^|[^\pL\pN_.%+-])"
                    r"([A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)")
"""An address: local-part characters (after none of them, nor a letter or digit), ``@``, a
domain of two labels or more."""
_RE_URL: Final = (r"(?:^|[^\pL\pN@])((?i:https?://|www\.)[^" + _SPACE
                  + r"<>\"'()\[\]{}]+)")
"""A link: ``http://``, ``https://`` or ``www.`` (after no letter, digit or ``@``: the domain
of ``info@www.x.com`` is not a link; ``_`` is no letter: ``_https://x.com_`` is a link in
italics to Markdown, red team 20b), up to white space, a quote or a bracket."""
_SPACE_UTF8: Final = (rb"[\t-\r\x1c-\x20]|\xc2[\x85\xa0]|\xe1\x9a\x80|\xe2\x80[\x80-\x8a\xa8\xa9\xaf]"
                      rb"|\xe2\x81\x9f|\xe3\x80\x80")
"""``_SPACE`` in UTF-8, for Python's ``re`` on bytes (a search is a tenth of an RE2 call's
3 µs; one character class or a fixed sequence: linear)."""
_URL_SPACE: Final = re.compile(_SPACE_UTF8)
_URL_AUTHORITY_END: Final = re.compile(rb"[/?#\\]|" + _SPACE_UTF8)
_EX_HOST = re.compile(r"(?i)(?<![\w.@/-])(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+"
                      r"(?:com|org|net|edu|gov|io|ai|co|uk|de|fr|eu|info|biz|app|dev|me)"
                      r"(?![\w-])")
_EX_IBAN = re.compile(r"(?<![A-Za-z0-9])[A-Za-z]{2}[0-9]{2}(?:[A-Za-z0-9]{11,30}|"
                      r"(?: ?[A-Z0-9]{1,4}){3,8})(?![A-Za-z0-9])")
_EX_PHONE = re.compile(r"(?<![\w+])\+?[0-9][0-9 ().-]{5,18}[0-9](?![\w])")
_EX_NUMBER = re.compile(r"(?<![\w.,])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w]|[.,]\d)")
_EX_DATE = re.compile(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)")
_EX_QUOTED = re.compile(r"\"([^\"\n]{1,200})\"|'([^'\n]{1,200})'|“([^”\n]{1,200})”|`([^`\n]{1,200})`")

_LINK_CHARGE: Final = 4
"""Cost units (``limits``) of each character ``urls()`` and ``emails()`` read: two RE2
passes over the text's UTF-8 (up to 20-40 ns a character each on the texts that cost them
most: a run of ``www.``); each link found is charged as regex matches besides (``LINK_MATCHES``)."""

_LINK_PATTERNS: Final = tuple(re2.compile(p.encode(), options=RE2_OPTIONS)
                              for p in (_RE_EMAIL, _RE_URL))
"""Compiled once, on bytes (the ``str`` interface converts offsets at every match: 8 times
slower a match)."""
_CAPITALISED = re.compile(r"[A-Z][a-z]+")


def _meant(raw: str) -> str | None:
    """``www.x.com`` for a link written ``www.x.com.They`` (a sentence glued to it, as
    ``_unglue`` reads one: lower case up to the dot), else None."""
    dot = raw.rfind(".")
    meant = raw[:dot]
    if (dot > 0 and _CAPITALISED.fullmatch(raw, dot + 1) is not None and "." in meant
            and meant == meant.lower() and meant[-1].isalnum()):
        return meant
    return None


class _Cut:
    """The links of one text that a quote or a bracket cut inside their host, read on to
    the white space after them (red team 20b): ``https://acme.com'@evil.com/x`` is one
    link to a Markdown renderer and a mail client, and a browser opens ``evil.com`` (all
    before the ``@`` is userinfo), where ``_RE_URL`` alone read ``https://acme.com``, a
    link an allow-list vouched for. Only where an ``@`` after the cut is still in the
    host's part (before ``/ ? # \\`` and white space): ``("https://acme.com")`` and
    ``{"u":"https://acme.com"}`` stay as they are.

    Linear in the text: the next end of a host's part, ``@`` and white space are each
    searched from a position no earlier than the last search's (a cached answer holds
    until it is passed), and a link starting inside one already read on is not read
    again (``www.a'@www.a'@...`` would copy the text once a link)."""

    __slots__ = ("_at", "_authority", "_covered", "_space", "data", "read")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self._covered = 0
        self.read = 0
        # links cut at a quote or a bracket: each one read past its cut costs a link again
        self._authority = self._at = self._space = (-1, -1)

    def _next(self, cached: tuple[int, int], pos: int, find: Any) -> tuple[int, int]:
        if cached[0] <= pos <= cached[1]:
            return cached
        found = find(pos)
        return (pos, len(self.data) if found is None or found < 0 else found)

    def reading(self, start: int, end: int) -> str | None:
        """The link matched at ``data[start:end]`` as read on past its cut, or None."""
        data = self.data
        if end >= len(data) or data[end:end + 1] not in _CUTTING or start < self._covered:
            return None
        self._at = self._next(self._at, end, lambda p: data.find(b"@", p))
        if self._at[1] == len(data):
            return None  # (no "@" after it: the usual case, one search for the text)
        self.read += 1
        scheme = data.find(b"://", start, end)
        if _URL_AUTHORITY_END.search(data, scheme + 3 if scheme >= 0 else start,
                                     end) is not None:
            return None  # the host ended inside the match: the cut is in the path
        self._authority = self._next(self._authority, end, lambda p: _at_start(
            _URL_AUTHORITY_END.search(data, p)))
        if self._at[1] >= self._authority[1]:
            return None
        self._space = self._next(self._space, end,
                                 lambda p: _at_start(_URL_SPACE.search(data, p)))
        self._covered = self._space[1]
        return data[start:self._covered].decode().rstrip(_TRAILING)


_TRAILING: Final = ".,;:!?*_~"
"""What ends a sentence or an emphasis after a link, and is not part of it (GitHub's
Markdown drops the same: ``_https://x.com/a_`` is a link to ``https://x.com/a``)."""
_CUTTING: Final = frozenset(bytes([c]) for c in b"<>\"'()[]{}")


def _at_start(m: Any) -> int | None:
    return None if m is None else int(m.start())


def _links(text: str, limit: int | None = None) -> tuple[list[str], list[str], str, int]:
    """The e-mail addresses (lower-cased) and URLs (as written, without the sentence's
    punctuation after them) of ``text``, the text with both blanked (so the request's other
    kinds are not read inside them), and the matches gone through: at most ``limit``
    (``MatchBoundExceeded`` past it; a link cut at a quote or a bracket counts twice in
    the count returned, the work charged: ``_Cut``). A URL holding an address (``https://u@evil.com/x``,
    ``?to=a@b.com``) is one URL, whole. RE2 on the text's UTF-8 (linear, no per-match
    conversion of offsets).

    Where a sentence is glued to a link (``www.x.com.They sent``, as ``_unglue`` reads it:
    lower case up to the dot, white space or the end after the word), the reading without
    the word comes first, and the link as written (what a browser or mail client would
    open) after it: neither the link the user named nor one an attacker glued a capital to
    (``https://acme.com.Ru now``) is lost."""
    data = text.encode("utf-8", "replace")  # a lone surrogate is a "?"
    spans: list[tuple[int, int]] = []
    matches = 0
    found: list[list[str]] = []
    cut = _Cut(data)
    for kind, pattern in enumerate(_LINK_PATTERNS):
        out: list[str] = []
        for m in pattern.finditer(data):
            matches += 1
            if limit is not None and matches > limit:
                raise MatchBoundExceeded(f"more than {limit} links in one text")
            start, end = m.span(1)
            spans.append((start, end))
            raw = data[start:end].decode()
            if raw[-1].islower() and raw != raw.lower() and (
                    end == len(data) or data[end:end + 4].decode("utf-8", "ignore")[:1]
                    .isspace()):
                meant = _meant(raw)
                if meant is not None:
                    out.append(meant)
            out.append(raw.lower() if kind == 0 else raw.rstrip(_TRAILING))
            if kind == 1:
                longer = cut.reading(start, end)
                if longer is not None:
                    out.append(longer)
        found.append(out)
    if spans:
        spans.sort()
        parts: list[bytes] = []
        last = 0
        for start, end in spans:
            if start >= last:
                parts += (data[last:start], b" " * (end - start))
                last = end
            elif end > last:
                parts.append(b" " * (end - last))
                last = end
        parts.append(data[last:])
        text = b"".join(parts).decode()
    return _unique(found[0]), _unique(found[1]), text, matches + cut.read


class _Spans:
    """A text whose matches are blanked kind by kind (so the next kind is not read inside
    them), one pass per kind: blanking match by match copied the text once per match
    (quadratic in a long text)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def take(self, pattern: re.Pattern[str], keep: Any = None) -> list[re.Match[str]]:
        """Every match of ``pattern`` (those ``keep`` accepts, when given), blanked."""
        found = [m for m in pattern.finditer(self.text) if keep is None or keep(m)]
        if found:
            parts: list[str] = []
            last = 0
            for m in found:
                parts += (self.text[last:m.start()], " " * (m.end() - m.start()))
                last = m.end()
            parts.append(self.text[last:])
            self.text = "".join(parts)
        return found


def _extract(text: str) -> dict[str, list[Any]]:
    """The targets a request names. Each kind's spans are blanked before the next kind is
    read, so the digits of an IBAN or a date are not also phone numbers or amounts."""
    emails, urls, rest, _ = _links(text[:MAX_TEXT], MAX_MATCHES)
    spans = _Spans(rest)
    hosts: dict[str, None] = {}
    for u in urls:
        h = re.sub(r"(?i)^[a-z]+://", "", u).split("/", 1)[0].split("?", 1)[0]
        h = h.rsplit("@", 1)[-1].split(":", 1)[0].lower().rstrip(".")
        if h:
            hosts[h] = None
    for e in emails:
        hosts.setdefault(e.rsplit("@", 1)[1], None)
    for m in spans.take(_EX_HOST):
        hosts[m[0].lower()] = None
    ibans = [m[0].replace(" ", "").upper() for m in spans.take(_EX_IBAN)]
    dates = []
    for m in spans.take(_EX_DATE):
        try:
            dates.append(datetime.date(int(m[1]), int(m[2]), int(m[3])).isoformat())
        except ValueError:
            continue
    quoted = [next(g for g in m.groups() if g) for m in _EX_QUOTED.finditer(spans.text)]

    def phone(m: re.Match[str]) -> bool:
        p = m[0]
        digits = sum(c.isdigit() for c in p)
        return 7 <= digits <= 15 and (p[0] in "+(" or re.search(r"[0-9][ ().-][0-9]", p)
                                      is not None) \
            and not re.fullmatch(r"[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?", p)

    phones = [("+" if m[0].startswith("+") else "") + "".join(c for c in m[0] if c.isdigit())
              for m in spans.take(_EX_PHONE, phone)]
    numbers: list[Any] = []
    for n in _EX_NUMBER.findall(spans.text):
        try:
            numbers.append(float(Decimal(n.replace(",", ""))))
        except InvalidOperation:
            continue
    return {
        "emails": emails,
        "urls": urls,
        "hosts": list(hosts),
        "ibans": _unique(ibans),
        "phones": _unique(phones),
        "numbers": _unique(numbers),
        "dates": _unique(dates),
        "quoted": _unique(quoted),
    }


def _unique(items: Any) -> list[Any]:
    return list(dict.fromkeys(items))


_REQUEST_KEYS: Final = ("text", "emails", "urls", "hosts", "ibans", "phones", "numbers",
                        "dates", "quoted")


class Request(Mapping[str, Any]):
    """``request``: the user's words and what they name, extracted on first use."""

    __slots__ = ("_extracted", "_meter", "_over", "text")
    _defs: Final = frozenset(_REQUEST_KEYS)
    """The keys it holds: generated code reads them directly (see ``values.Variables``)."""

    def __init__(self, text: str, meter: Meter | None = None) -> None:
        self.text = text
        self._extracted: dict[str, list[Any]] | None = None
        self._over = ""
        self._meter = meter
        """The call's cost meter: a request over its bound of links puts the call over
        its cost bound (red team 25)."""

    def __getitem__(self, key: str) -> Any:
        if key == "text":
            return self.text
        if key not in _REQUEST_KEYS:
            raise KeyError(key)
        if self._extracted is None and not self._over:
            # At most ``MAX_MATCHES`` links, as ``s.urls()``: a request of 64 K of links
            # cost a call 111-234 ms uncharged (red team 20b). Past it the lists are an
            # error of the rule, the same one on every later read, and the call is over
            # its cost bound (as a regex function over its bound of matches): denied
            # whatever the failurePolicy, an error ``||`` absorbed or ``Ignore`` skipped
            # (red team 25: a request padded with links turned an Ignore policy off).
            try:
                self._extracted = _extract(self.text)
            except MatchBoundExceeded as exc:
                self._over = str(exc)
        if self._extracted is None:
            if self._meter is not None:
                self._meter.left = min(self._meter.left, -1)
            raise MatchBoundExceeded(self._over)
        return self._extracted[key]

    def __iter__(self) -> Iterator[str]:
        return iter(_REQUEST_KEYS)

    def __len__(self) -> int:
        return len(_REQUEST_KEYS)

    def __repr__(self) -> str:
        return f"Request({self.text!r})"


@guarded("mentions")
def mentions(within: Any, value: Any) -> bool:
    """``request.mentions(value)``: the user's words contain ``value``; ``s.mentions(v)``
    and ``l.mentions(v)``: a text, or one of a list of texts, does (``params.payees``
    written with spaces, in another case). The same matching as ``provenance``: one
    concept, one name, wherever the texts come from."""
    if isinstance(within, Request):
        text = within.text
    elif type(within) is str:
        text = within[:MAX_TEXT]  # the searched part only: the text cache keys on it
    elif type(within) is list and all(type(t) is str for t in within):
        # One text whose parts no match can cross (NUL is no word, address or number
        # character), searched once: a long list costs one scan, not one per element.
        parts, size = [], 0
        for t in within:
            if size >= MAX_TEXT:
                break
            parts.append(t)
            size += len(t) + 1
        text = "\x00".join(parts)[:MAX_TEXT]
    else:
        raise no_overload("mentions", within, value)
    _arg("mentions", value)
    origins = ORIGINS.get()
    scan = origins.scan if origins is not None else _Scan(SCAN_BUDGET)
    m = matcher(value, scan)
    return m is not None and bool(text) and m.found(_lower(text, scan), scan)


def _links_work(name: str, s: Any) -> tuple[list[str], list[str], int]:
    if type(s) is not str:
        raise no_overload(name, s)
    emails_found, urls_found, _, matches = _links(s, MAX_MATCHES)
    return emails_found, urls_found, LINK_MATCHES * matches


LINK_MATCHES: Final = 2
"""Regex matches (``limits.match_units``) each link found is charged as: RE2's own per-match
cost and the Python around it (decoding, the glued reading) took 12-18 µs a link where
``findAll`` takes 6-7 µs a match (``benchmarks/cost_sweep.py``, ``urls (many links)``: 1.35x
the bound's rate at one match a link, on a loaded machine)."""


@guarded("urls")
def _urls_work(s: Any) -> tuple[list[str], int]:
    """``urls`` and the matches it went through (``limits.with_work``)."""
    _, found, matches = _links_work("urls", s)
    return found, matches


@guarded("emails")
def _emails_work(s: Any) -> tuple[list[str], int]:
    """``emails`` and the matches it went through (``limits.with_work``)."""
    found, _, matches = _links_work("emails", s)
    return found, matches


@guarded("urls")
def urls(s: Any) -> list[str]:
    """``s.urls()``: the URLs of any text as ``request.urls`` lists the request's (the
    same function on the same text): ``http://``, ``https://`` or ``www.``, as written,
    without the sentence's punctuation after them, and both readings of one glued to the
    next sentence. The whole text is read (a link past ``MAX_TEXT`` is still a link), at
    most ``MAX_MATCHES`` links (more puts the call over its cost bound)."""
    return _urls_work(s)[0]


@guarded("emails")
def emails(s: Any) -> list[str]:
    """``s.emails()``: the e-mail addresses of any text, lower-cased, as
    ``request.emails`` lists the request's (see ``urls``)."""
    return _emails_work(s)[0]


urls.cel_with_work = _urls_work  # type: ignore[attr-defined]
emails.cel_with_work = _emails_work  # type: ignore[attr-defined]


# What one value's search costs besides the texts it scans (``limits.cost_of``): reading
# the value's kind and building its pattern, about 15-40 µs a value. Without it a call of
# thousands of distinct values was bounded only by the characters its searches read.
_searching: tuple[Any, ...] = (provenance, untrusted, mentions)
for _fn in _searching:
    _fn.cel_cost = 5_000
