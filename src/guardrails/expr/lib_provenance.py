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
import itertools
import re
import unicodedata
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Final

import re2

from guardrails.expr.lib_common import RE2_OPTIONS, compile_re2, guarded, no_overload
from guardrails.expr.limits import MAX_MATCHES, Meter
from guardrails.expr.textforms import normal
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
    "mentions",
    "provenance",
    "untrusted",
    "urls",
]

MAX_TEXT: Final = 65_536
"""Characters of one text (a request, a tool result) that are searched; the rest is not."""

SCAN_BUDGET: Final = 16 * 1024 * 1024
"""Characters the provenance functions may scan in one evaluated call, across all queries."""

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

_LOWER: dict[str, tuple[str, int]] = {}
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


def _glued(cut: str) -> int:
    """How many sentences are glued in ``cut`` (``_GLUED``), looked for at RE2 speed first:
    Python's regex tries each dot of a text, uncharged (an ASCII text is read for free),
    and 100 fresh pages of ``.Ab`` cost a cold call 154 ms, ``a.`` 71 ms (red team 25);
    RE2 reads them 4-7 times as fast."""
    if compile_re2(_GLUED_SEEN).search(cut) is None:
        return 0
    return len(_GLUED.findall(cut))  # (C speed: the Python loop is what costs)


def _unglue(text: str) -> str:
    """``text`` with a sentence that starts right after a lower-case host or URL (no space
    after its full stop: ``www.x.com.They``) moved off it by a space, so the host is found
    as the writer meant it. Only a token lower-case up to that dot qualifies (a host
    written ``www.Example.Com`` stays one name). The token is the text since the last
    white space, found at C speed (``str.rsplit``, white space as ``str.isspace``) in what
    lies after the match before (white space follows every match): scanned back a
    character at a time in Python, one token of 64 K cost 4 ms a text, charged nothing.
    Linear; each match is charged (``GLUE_COST``)."""
    if _GLUED.search(text) is None:
        return text
    parts: list[str] = []
    last = after = 0
    for m in _GLUED.finditer(text):
        start = m.start()
        before = text[max(last, after):start]
        after = m.end()
        token = "" if not before or before[-1].isspace() else before.rsplit(None, 1)[-1]
        if "." in token and token == token.lower() and token[-1:].isalnum():
            parts.append(text[last:start + 1])
            parts.append(" ")
            last = start + 1
    parts.append(text[last:])
    return "".join(parts)


def _normal(text: str) -> str:
    """The one reading of every text and value the provenance functions compare, before
    case is ignored: fillers (zero-width spaces, joiners, direction marks) removed,
    compatibility characters (fullwidth, mathematical, circled, super- and subscript
    letters, digits and signs) in their ASCII form, IDNA's other full stops as dots, and
    composed (NFC: ``e`` and U+0301 is ``é``, as IDNA reads them). IDNA's other full
    stops are the ideographic and halfwidth ideographic ones (UTS 46).
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


_LAST_CUT: tuple[str, str] = ("", "")


def _normal_cut(text: str) -> str:
    """``text`` cut at ``MAX_TEXT`` and read through ``_normal``; the last one kept, by the
    text's identity: ``_as_written`` reads the result ``_lower`` has just read, and a
    text dense in compatibility characters costs about 5 ms for 64 K to normalise (twice
    a result, a cold history of 100 such results cost 1.2 s in one call)."""
    global _LAST_CUT
    last = _LAST_CUT
    if last[0] is text:
        return last[1]
    cut = _normal(text[:MAX_TEXT])
    _LAST_CUT = (text, cut)
    return cut


def _lower(text: str, scan: _Scan) -> str:
    """``text`` cut at ``MAX_TEXT``, read through ``_normal``, a sentence glued to a host
    moved off it (``_unglue``) and lower-cased, cached (results are searched by many calls
    of a session, and their hashes are cached by the string objects). Its reading is
    charged to ``scan`` first, and its glued sentences before they are moved, cached or
    not (``_Scan.read``, ``_Scan.unglue``; an ASCII text without glued sentences, the
    usual one, makes neither call)."""
    if not text.isascii():
        scan.read(text, MAX_TEXT)
    found = _LOWER.get(text)
    if found is None:
        cut = _normal_cut(text)
        glued = _glued(cut)
        if glued:
            scan.unglue(text, glued)
        found = (_unglue(cut).lower() if glued else cut.lower(), glued)
        if len(_LOWER) >= _CACHE_SIZE:
            _LOWER.clear()
        _LOWER[text] = found
    elif found[1]:
        scan.unglue(text, found[1])
    return found[0]


def _as_written(text: str, scan: _Scan) -> str | None:
    """``text`` lower-cased as written, when ``_lower`` unglued something in it (else None):
    an untrusted result is searched in both forms. Ungluing reads the host a sentence is
    glued to, not the longer one (``www.x.com.They``), which is right for what vouches (the
    request, a trusted result) but hid a destination from ``untrusted`` when an injected
    page wrote its last label capitalised (``https://files.evil.Com now``; red team 18).
    The same reading as ``_lower``'s, charged once a call."""
    if not text.isascii():
        scan.read(text, MAX_TEXT)
    found = _AS_WRITTEN.get(text, _NO_GLUE)
    if found is _NO_GLUE:
        cut = _normal_cut(text)
        found = None if not _glued(cut) else cut.lower()
        if found == _lower(text, scan):
            found = None
        if len(_AS_WRITTEN) >= _CACHE_SIZE:
            _AS_WRITTEN.clear()
        _AS_WRITTEN[text] = found
    return found


_AS_WRITTEN: dict[str, str | None] = {}
_NO_GLUE = ""


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


SEARCH_COST: Final = 1_000
"""Scan units of one search of one text for one value besides its length (about 1-3 µs of
Python around the scan: a call of many values over many history results is bounded by the
searches it makes, not only by the characters they read)."""
COMPILE_SCAN_COST: Final = 1_000_000
"""Scan units (``SCAN_BUDGET``) of the first use of a value's pattern in a call. RE2 takes
1-2.5 ms to compile one (its word boundaries are Unicode classes): thousands of distinct
values found in a call's texts would otherwise cost seconds. Charged per call, whatever the
process compiled before, so a call is decided alike cold or warm; a value whose literal is
in no text never needs its pattern, and costs nothing of this."""
CLASS_SCAN_COST: Final = 200_000
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
        budget.charge(SEARCH_COST + len(low) // 8)
        if self.literal not in low:
            return None
        if self.dense:
            budget.charge(len(low) // 8)
            if self.dense not in _dense(low):
                return None
        budget.charge(len(low))
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
_KEY = re.compile(r"[\w .-]{1,64}")
_OPENERS = frozenset({"", "[", "{", ",", ":", "(", "\n"})
_CLOSERS = frozenset({"", "]", "}", ",", ":", ")", "\n"})


def _fields_of(low: str) -> Iterator[str]:
    """The fields of a result as tools print records: each quoted string (``{'email':
    'a@b.c'}``, JSON) and each line without its YAML list dash or ``key:``
    (``- email: a@b.c``, ``recipient: GB29...``). Linear in the text."""
    for m in compile_re2(_QUOTED).finditer(low):
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
LETTERS_COST: Final = 64
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


def _partial(low: str) -> tuple[str, str, str, bool] | None:
    """``_classify`` of a value longer than ``VALUE_CHARS`` or of more than ``VALUE_WORDS``
    words: plain text, its first word the literal, the pattern its first words, up to
    ``VALUE_WORDS`` of them and ``VALUE_CHARS`` characters (blanks and fillers before and
    between them do not count), with no boundary after the last (what follows is the
    value's ``words``)."""
    words: list[str] = []
    size = 0
    for m in _WORD.finditer(low):
        word = m.group()[:VALUE_CHARS - size]
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
    ``https://evil.com/drop`` from ``untrusted()``)."""
    cut = min((i for i in (rest.find("/"), rest.find("\\"), rest.find("?"), rest.find("#"))
               if i >= 0), default=len(rest))
    host, path = rest[:cut], rest[cut:].replace("\\", "/")
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
    words = _WORD.findall(low)
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
    normal_form = _normal(value) if type(value) is str else str(value)
    found = _classify(value, normal_form)
    if found is None:
        return None
    kind, literal, pattern, partial = found
    low = normal_form.lower()
    words = _wordless(low)
    # compared with a text's letters and digits (``_letters``: no marks), so without marks
    parts = tuple(itertools.islice((_wordless(m.group()) for m in _WORD.finditer(low)),
                                   VALUE_WORDS))
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
    if type(value) is str and not value.isascii():
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


READ_COST: Final = 32
"""Scan units of each character of a text that is not ASCII, for reading it: through
``_normal`` (``textforms.normal``, NFC), ungluing and lower-casing, 25-60 ns a character
on a 64 KiB page dense in compatibility characters where a unit is about 2.5 ns. An
ASCII text is not rewritten: it costs nothing to read (an ``isascii`` test, a flag of the
string). Charged once per text per call, before it is read, whether the process has its
reading cached or not (``_Scan.read``): a cold history of 100 such pages, 6.5 M
characters, cost the first call 0.4-0.8 s uncharged; a call now reads at most
``SCAN_BUDGET // READ_COST`` (524,288) such characters, fewer as it searches."""


GLUE_COST: Final = 1024
"""Scan units of each sentence glued to a token (``_GLUED``: ``www.x.com.They``) in a text
read, ASCII or not: ``_unglue`` looks back over its token in Python, about 1.3 µs a match,
charged as twice that (at 512, the budget's worth of them took 41-47 ms on a loaded
machine). A fresh ASCII page of 64 KiB made of ``a.b.Com`` cost 10 ms, 100 of them 0.6-1 s
a call, charged nothing; a page with a few costs a few thousand units."""


VALUE_COST: Final = 16_384
"""Scan units of a value's first use in a call (``matcher``): reading its kind and building
its search, 15-40 µs uncached, charged alike cached or not. The values of the recorded
calls whose results name the value are each looked up in the request
(``Origins.requested``): 3,600 fresh ones cost a call 85-120 ms, charged their searches
only; a call now looks up about a thousand."""
FIELD_COST: Final = 1024
"""Scan units of each line and quoted string of a result read as fields (``_fields_of``,
``Origins.whole``: a result that names the value), charged before they are read: about
1.1 µs of Python each, charged as twice that. 100 untrusted results of 13,000 short lines
each cost one call 1.4-1.6 s, charged an eighth of a unit a character; a result of a few
hundred records costs a few hundred thousand units."""


class _Scan:
    """One evaluated call's scan budget (``SCAN_BUDGET``): what the provenance functions
    read and search is charged to it before they do, and a call that runs it out is an
    error of the rule (its ``failurePolicy``)."""

    __slots__ = ("glued", "left", "read_chars", "used", "values")

    def __init__(self, left: int) -> None:
        self.left = left
        self.used: set[str] = set()
        """Patterns this call has been charged for (``COMPILE_SCAN_COST``)."""
        self.read_chars: dict[str, int] = {}
        """Texts this call has been charged for reading (``READ_COST``): how many of
        their characters (a result is read up to ``MAX_TEXT``, a value whole)."""
        self.glued: set[str] = set()
        """Texts this call has been charged for ungluing (``GLUE_COST``)."""
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
        return True

    def read(self, text: str, limit: int) -> None:
        """Charge reading ``text``'s first ``limit`` characters, unless they are ASCII,
        before they are read; once per text per call, alike cold or warm (the texts'
        cached readings, ``_LOWER`` and ``matcher``'s, never decide a call)."""
        if text.isascii():
            return
        size = min(len(text), limit)
        charged = self.read_chars.get(text, 0)
        if size <= charged or (size < len(text) and text[:size].isascii()):
            return
        self.charge(READ_COST * (size - charged))
        self.read_chars[text] = size

    def unglue(self, text: str, glued: int) -> None:
        """Charge moving the ``glued`` sentences of ``text`` off their hosts (some),
        once per text per call, cold or warm."""
        if text not in self.glued:
            self.charge(GLUE_COST * glued)
            self.glued.add(text)

    def texts(self, text: str) -> None:
        """Charge reading a text built for this call alone (joined arguments, params),
        unless it is ASCII, before it is read."""
        if not text.isascii():
            self.charge(READ_COST * len(text))

    def charge(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise CelError("provenance: the call's scanning budget is exhausted")

    def use(self, pattern: str) -> None:
        """Charge a pattern's first use in this call (before it is compiled)."""
        if pattern not in self.used:
            self.charge(COMPILE_SCAN_COST + CLASS_SCAN_COST * pattern.count("\\p"))
            self.used.add(pattern)


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
                unglued = m.found(_lower(result, self.scan), self.scan)
                if not unglued:
                    written = _as_written(result, self.scan)
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
                                 self.whole(i, result, m)))
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

    def whole(self, index: int, result: str, m: Matcher) -> bool:
        """Whether some field of the result at ``index`` is the value and nothing more:
        the same letters and digits, and found in it under the value's matching."""
        fields = self._fields.get(index)
        if fields is None:
            low = _lower(result, self.scan)
            # (counted at C speed: each line and quoted string is Python's to read)
            pieces = low.count("\n") + 1 + (low.count("'") + low.count('"')) // 2
            self.scan.charge(len(low) // 8 + FIELD_COST * pieces)
            fields = {}
            for f in _fields_of(low):
                if not f.isascii():  # (an ASCII field's letters are taken at C speed)
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
                self.scan.charge(SEARCH_COST + len(m.parts) * len(letters) // 8)
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
            found = _normal(text).lower()[:MAX_TEXT * 16]
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
    separated = _normal(separated).lower()
    if len(separated) > MAX_TEXT:
        return None
    joined = "".join(values)
    scan.texts(joined)
    return separated, _normal(joined).lower()


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
