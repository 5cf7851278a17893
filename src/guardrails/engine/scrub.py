"""The one scrubber: removes known values, then redact patterns, from text that leaves.

Used by the engine (rule and error messages, ``explain`` traces), the integration (tool
results, tool exceptions, log records, history) and telemetry (decision-log messages,
where every argument value is blanked, not only the secret ones).
"""

from __future__ import annotations

import binascii
import bisect
import codecs
import contextlib
import functools
import html.entities
import itertools
import json
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import re2

from guardrails.engine.decision import REDACTED
from guardrails.expr.textforms import EXOTIC, NORMAL_TABLE, _astral, exotic, normal

__all__ = ["MAX_ESCAPES", "MAX_OCCURRENCES", "MAX_TEXTS", "MIN_ENCODED_BYTES",
           "MIN_SUBSTRING_LENGTH", "Scrubber", "redact_escaped", "spellings"]

MAX_TEXTS = 2048
"""Distinct texts a scrubber knows, all its layers together (a guard remembers 1,024
injected values, usually one text each). Past it (a secret argument that is a huge list,
every value of a big call in a decision record) the scrubber is *opaque*: every text it is
given becomes ``[REDACTED]``. Collecting, spelling, sorting and matching stay linear up to
the bound and the bound fails closed: it can make a message less useful, never let a value
out."""

_MAX_READ = 4 * MAX_TEXTS
"""Elements read from the values before giving up: every list item, map key and value
counts, texts or not (a list of a million equal strings, or of a million empty ones, must
not be walked to the end to find it holds one text, or none)."""

MAX_LAYER_CHARS = 1 << 13
"""Characters of the values a ``with_values`` layer spells (a call's secret arguments). Each
value is searched in some twenty spellings (escaped, percent-encoded, normal forms) and its
encoded cores (``_encoded``: 7 to 11 characters a byte more), a cost linear in its length, paid on every call for what the model sent: past the bound
(8,192 characters: a PEM private key or a JWT fits) the layer is opaque, like past
``MAX_TEXTS``, and the call is blocked (its call id cannot be checked). A guard's memory
of injected values is spelled once, not per call, and is bounded by the guard instead."""

MIN_SUBSTRING_LENGTH = 4
"""Values shorter than this are not scrubbed as substrings.

The trade-off: replacing a 1-character secret everywhere would blank every occurrence of
that character (a secret ``5`` would erase every "5" in a message, turning it into noise
and telling a reader which character the secret is), and 2- or 3-character values are
as common in ordinary text. So a short value is removed only where a whole text is
exactly that value. Its *name* still protects it where it matters most: declared secret
arguments are replaced whole, by name, in decisions, history and records, whatever the
length of their value. A rule message that quotes a short secret inside other text is
what stays visible, and that is the policy author's choice to write.
"""


class Scrubber:
    """Removes known values, then redact patterns, from a text.

    ``values`` is any JSON-like data (strings, numbers, nested lists and maps: every leaf
    and map key counts, in each spelling a message may use) or a zero-argument callable
    returning it, called on first use: the engine builds one per call and most calls never
    produce text to scrub. Values given that way are one call's, so they are bounded as a
    ``with_values`` layer is (``MAX_LAYER_CHARS``): past it the scrubber is opaque. ``redact`` applies the policies' patterns; if it raises, the
    whole text becomes ``[REDACTED]`` (a broken pattern must not let a text out unscrubbed).

    ``base`` is a scrubber whose values this one removes too (its patterns are not used). It
    is a layer, not copied: a call's few values on top of a guard's memory of up to 1,024
    injected ones cost the call only its own values' spellings, while the memory's search
    is compiled once. Every layer's occurrences are found in the original text and the
    union of what they cover is replaced, so a value containing, overlapping or contained
    in another (of any layer) is removed whole.

    A text that holds escapes is also searched with them undone (``_find_escaped``): the
    values as another serializer escapes them (``\\/``, ``\\u00E9``, ``&amp;``, JSON inside
    JSON, a mail's quoted-printable, a CSV cell's doubled quotes, fullwidth letters, a value
    wrapped over lines: ``_FAMILIES``), each occurrence replaced over the escapes it came
    from.
    """

    __slots__ = ("_anchors", "_base", "_needles", "_odd", "_opaque", "_pending", "_redact",
                 "_regex", "_sizes", "_texts")

    def __init__(self, values: Iterable[Any] | Callable[[], Iterable[Any]] = (),
                 redact: Callable[[str], str] | None = None, *,
                 base: Scrubber | None = None) -> None:
        self._redact = redact
        self._base = base
        self._pending: Callable[[], Iterable[Any]] | None = None
        self._texts: frozenset[str] = frozenset()
        self._needles: tuple[str, ...] = ()
        self._regex: Any = None
        self._anchors: tuple[tuple[str, ...], ...] | None = None
        self._sizes: tuple[int, ...] | None = None
        self._odd: str | re.Pattern[str] | None = None
        self._opaque = False
        if callable(values):
            self._pending = values
        else:
            self._set(_texts_of(values))

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # Lazily computed values are a closure, layers a chain: copies carry the texts.
        if self.opaque:
            return (_opaque, (self._redact,))
        return (Scrubber, (sorted(self.texts), self._redact))

    def _set(self, texts: frozenset[str] | None, *, per_call: bool = False,
             spelled: Scrubber | None = None) -> None:
        """This layer's values: ``texts`` on top of the base's. ``spelled`` is a layer on
        the same base whose texts are already spelled (``merged``): only the texts it does
        not hold are spelled, its needles are kept."""
        known = self._base.texts if self._base is not None else frozenset()
        done = spelled._texts if spelled is not None else known
        every = texts | known if texts is not None else frozenset()
        if texts is None or len(every) > MAX_TEXTS or (
                self._base is not None and self._base.opaque) or (
                per_call and sum(len(t) for t in texts - known) > MAX_LAYER_CHARS):
            self._opaque = True
            self._texts, self._needles = frozenset(), ()
            return
        self._texts = every
        # Every spelling our serializers give a value (see ``spellings``), longest first.
        fresh = [t for t in texts - done if len(t) >= MIN_SUBSTRING_LENGTH]
        forms = {_folded(form) for t in fresh for form in spellings(t)}
        # A non-ASCII value's other case forms, as they are (escaped, the views read them).
        forms.update(_folded(cased) for t in fresh for cased in _case_forms(t)[1:])
        if spelled is not None:
            forms.update(spelled._needles)
        self._needles = tuple(sorted(forms, key=len, reverse=True))

    def _compute(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            try:
                texts = _texts_of(pending())
            except Exception:  # values that cannot be read: fail closed
                texts = None
            # Values given lazily are one call's (the engine's secret arguments): what the
            # model sent, spelled on every call, so bounded like a ``with_values`` layer.
            self._set(texts, per_call=True)

    @property
    def opaque(self) -> bool:
        """Whether this scrubber knows too many values to scrub by value (``MAX_TEXTS``): it
        then replaces every text whole."""
        self._compute()
        return self._opaque

    @property
    def texts(self) -> frozenset[str]:
        """Every text form of the known values, short ones included."""
        self._compute()
        return self._texts

    def hides(self, text: str) -> bool:
        """Whether ``text`` is exactly a known value (a number that is a secret, say)."""
        self._compute()
        return self._opaque or text in self._texts

    def with_values(self, values: Iterable[Any]) -> Scrubber:
        """This scrubber plus ``values``, as a layer on top of it (cheap: only the new
        values' spellings are worked out); itself when they add no text."""
        self._compute()
        if self._opaque:
            return self
        texts = _texts_of(values)
        if texts is not None and texts <= self._texts:
            return self
        out = Scrubber((), self._redact, base=self)
        out._set(texts, per_call=True)
        return out

    def merged(self, values: Iterable[Any]) -> Scrubber:
        """This scrubber plus ``values`` merged into its top layer (the layers below are
        shared): for a set that grows now and then and is used on every call (a guard's
        memory of injected values, which starts a new layer every ``MEMORY_LAYER`` values
        so that a new value never recompiles the whole memory's search)."""
        self._compute()
        if self._opaque:
            return self
        texts = _texts_of(values)
        if texts is not None and texts <= self._texts:
            return self
        out = Scrubber((), self._redact, base=self._base)
        out._set(None if texts is None else self._texts | texts, spelled=self)
        return out

    def top_layer(self) -> Scrubber:
        """Only this layer's values (and the patterns), without the layers below: what a
        copy of a decision keeps, so that a pickled decision never carries the values of a
        guard's whole memory, only those of its own call."""
        self._compute()
        below = self._base.texts if self._base is not None else frozenset()
        return Scrubber(sorted(self._texts - below), self._redact)

    @property
    def top_layer_size(self) -> int:
        """How many texts the top layer holds (its own, not those of the layers below)."""
        self._compute()
        below = self._base.texts if self._base is not None else frozenset()
        return len(self._texts - below)

    def __call__(self, text: str) -> str:
        if type(text) is not str:
            # A ``str`` subclass may print (``__str__``, ``__repr__``) other than its data:
            # what leaves is always a plain string of the data that was scrubbed.
            text = str.__str__(text)
        if self._pending is not None:
            self._compute()
        if self._opaque:
            return REDACTED if text else text
        if text in self._texts:
            return REDACTED
        spans: list[tuple[int, int]] = []
        if not self._find_all(text, spans) or (
                may_escape(text) and not self._find_escaped(text, spans)):
            return REDACTED  # more occurrences than are worth finding: fail closed
        if spans:
            text = _json_kept(text, spans)
        if self._redact is None:
            return text
        try:
            return self._redact(text)
        except Exception:  # a broken pattern must not let the text out unscrubbed
            return REDACTED

    def _find_all(self, text: str, spans: list[tuple[int, int]]) -> bool:
        """Where the values of every layer occur in ``text``, in any case (see ``_find``);
        the text is lowered (``_folded``) at most once, for every layer."""
        folded: list[str] = []
        layer: Scrubber | None = self
        while layer is not None:
            if not layer._find(text, spans, folded):
                return False
            layer = layer._base
        return True

    def _find_escaped(self, text: str, spans: list[tuple[int, int]]) -> bool:
        """Where the values occur in ``text`` once its escapes are undone (``_views``: each
        family of ``_FAMILIES``, up to three levels), as spans of
        ``text``: a value a tool's serializer escaped other than ours (``\\/`` for ``/``,
        ``\\u00E9``, ``&amp;``) or escaped twice (JSON inside JSON). A text with too many
        escapes is searched in a rough view, and fails closed if a value is found there."""
        strings = _json_strings(text)
        if strings is not None and not _costly_escape(strings):
            probe: list[tuple[int, int]] = []
            for form in _plain_forms(strings):  # lines joined, doubled quotes undone...
                if not self._find_all(form, probe):
                    return False
            if not probe:
                return True  # JSON whose strings, escapes undone, hold no value
        views = _views(text)
        if views is None or isinstance(views, _CappedViews):
            probe = []
            if not self._find_all(_rough(text), probe) or probe:
                return False
            if views is None:
                return True
        for level, view in enumerate(views):
            found: list[tuple[int, int]] = []
            if not self._find_all(view.text, found):
                return False
            runs: list[tuple[int, int]] = []
            above = text if view.parent < 0 else views[view.parent].text
            for start, end in found:
                if above.startswith(view.text[start:end], view.source(start, end)[0]):
                    # The same characters in the text the view was made of, found there
                    # exactly: an escape this match only borders (``"Zq""`` read as a
                    # doubled quote where the second closes the string) must not widen it.
                    continue
                start = _view_escape_start(view.text, start, runs)
                start, end, _ = _source(views, level, start, end)
                spans.append((start, end))
            if len(spans) > MAX_OCCURRENCES:
                return False
        return True

    def _odd_folded(self, folded: list[str]) -> str:
        """The text lowered (``folded[0]``, ``_lowered``), or folded whole (``_folded``,
        kept as ``folded[1]``) when it holds one of ``_ODD_FOLDS``'s characters that folds
        to a letter of this layer's needles: an ASCII layer asks about ``ſ`` alone (one
        fast ``in``), not all 22 (a regular expression's pass, 0.15 ms on 64 kB)."""
        low = folded[0]
        if low.isascii():
            return low
        odd = self._odd
        if odd is None:
            letters = set("".join(self._needles))
            chars = "".join(chr(c) for c, t in _ODD_FOLDS.items() if chr(t) in letters)
            odd = self._odd = chars if len(chars) <= 1 else re.compile(f"[{chars}]")
        if not odd or (
                low.find(odd) < 0 if isinstance(odd, str) else odd.search(low) is None):
            return low
        if len(folded) == 1:
            folded.append(_odd_mapped(low))
        return folded[1]

    def _find(self, text: str, spans: list[tuple[int, int]], folded: list[str]) -> bool:
        """Where this layer's values occur in ``text`` in any case (added to ``spans``);
        False when all layers together found more than ``MAX_OCCURRENCES`` (the text is
        then replaced whole). The needles are lower case (``_folded``).

        A few needles: every occurrence of each, overlapping ones included, in the text
        lowered (``folded`` holds it once made). A needle's case-free parts (``_anchors``)
        must be in the text as they are for it to occur in any case, so a text of other
        scripts without them is not lowered for it (lowering costs it 6 ns a character; an
        ASCII text is lowered at once, which costs less than looking for the parts).
        Many (a guard's memory): an RE2 search per chunk of needles, ignoring case,
        leftmost-first within a chunk, so of two values in one chunk that overlap each
        other in one text the second may keep the part outside the first.
        """
        self._compute()
        needles = self._needles
        if len(needles) <= _SCAN_NEEDLES:
            if self._sizes is None:
                self._sizes = tuple(-len(n) for n in needles)
            anchors = None
            if not text.isascii():  # the parts are worked out for such a text only
                if self._anchors is None:
                    self._anchors = tuple(_anchors(n) for n in needles)
                anchors = self._anchors
            # Longest first: a text skips the needles longer than itself (a short field
            # and a value's long encoded cores).
            for i in range(bisect.bisect_left(self._sizes, -len(text)), len(needles)):
                n = needles[i]
                if anchors is not None and any(a not in text for a in anchors[i]):
                    continue
                if not folded:
                    folded.append(_lowered(text))
                low = self._odd_folded(folded)
                start = low.find(n)
                while start >= 0:
                    if len(spans) >= MAX_OCCURRENCES:
                        return False
                    spans.append((start, start + len(n)))
                    start = low.find(n, start + 1)
            return True
        if self._regex is None:
            self._regex = _chunked(needles)
        for _, regex in self._regex:
            spans.extend(itertools.islice(
                (m.span() for m in regex.finditer(text)), MAX_OCCURRENCES + 1 - len(spans)))
            if len(spans) > MAX_OCCURRENCES:
                return False
        return True


_CASE_FREE = re.compile(r"[^A-Za-z\x80-\U0010FFFF]+")


def _anchors(needle: str) -> tuple[str, ...]:
    """The runs of ``needle`` that no case changes: ASCII characters other than letters
    (digits, punctuation, spaces). No character upper- or lower-cases to one of them but
    itself (checked over every code point: tests/test_redteam25_secrets.py), so an
    occurrence of the needle in any case holds each run as it is. Longest first (the
    rarest in a text, likely), each once, and none that is part of a longer one; at most
    ``_ANCHORS`` (any of them missing skips the needle, so fewer are as sound: a long
    value's hex or base64 core holds hundreds of runs, and keeping all was quadratic)."""
    kept: list[str] = []
    for run in sorted(set(_CASE_FREE.findall(needle)), key=lambda r: (-len(r), r)):
        if not any(run in k for k in kept):
            kept.append(run)
            if len(kept) == _ANCHORS:
                break
    return tuple(kept)


_ANCHORS = 4
"""Case-free runs kept per needle (``_anchors``)."""


def _folded(text: str) -> str:
    """``text`` case-folded, character for character (the same length, so a match in it is
    a span of ``text``): a value is found whatever case a tool wrote it in (a hex key in
    capitals, a token upper-cased by a log line; red team 25's limit, closed in the
    fifteenth session). Needles are folded alike.

    ``str.lower``, then the 22 characters it leaves apart from a letter they fold with
    (``_ODD_FOLDS``: the final sigma, the micro sign, the long s, Greek symbol forms)
    mapped to it. ``str.lower`` alone is not a map of characters: it writes a capital sigma
    as a final one when no letter follows, so a value ending in ``Σ`` (its needle
    ``...ς``) handed back before a letter (``...σb``) went out verbatim (red team 27c).
    ``str.lower`` keeps the length of every character but the dotted capital I (``U+0130``,
    an ``i`` and a combining dot): a text holding one is lowered a character at a time,
    that one kept. A character that folds to several (``ß``) stays one: the case forms
    that spell it otherwise (``SS``) are needles of their own (``_case_forms``). Costs one
    pass over the text, 0.5 ns a character of ASCII, about 6 ns of other scripts, and a
    replace or a translation where an odd character occurs (Greek: its final sigma)."""
    low = _lowered(text)
    return low if text.isascii() else _odd_mapped(low)


def _lowered(text: str) -> str:
    """``text`` lowered a character at a time (the dotted capital I kept): ``_folded`` but
    ``_ODD_FOLDS`` (``_odd_mapped``)."""
    low = text.lower()
    if len(low) != len(text):
        low = "".join(c if len(f := c.lower()) != 1 else f for c in text)
    return low


def _odd_mapped(low: str) -> str:
    """A lowered text with ``_ODD_FOLDS`` applied (a final sigma by a replace: Greek)."""
    if "\u03c2" in low:
        low = low.replace("\u03c2", "\u03c3")
    if _ODD.search(low) is not None:
        low = low.translate(_ODD_FOLDS)
    return low


_ODD_FROM = ("\u00b5\u017f\u0345\u03d0\u03d1\u03d5\u03d6\u03f0\u03f1\u03f5\u1c80\u1c81"
             "\u1c82\u1c83\u1c84\u1c85\u1c86\u1c87\u1c88\u1e9b\u1fbe")
_ODD_TO = ("\u03bc\u0073\u03b9\u03b2\u03b8\u03c6\u03c0\u03ba\u03c1\u03b5\u0432\u0434"
           "\u043e\u0441\u0442\u0442\u044a\u0463\ua64b\u1e61\u03b9")
_ODD_FOLDS = str.maketrans(_ODD_FROM + "\u03c2", _ODD_TO + "\u03c3")
"""The lower-case characters ``str.lower`` leaves apart from the letter they case-fold to
(the final sigma, ``µ``, ``ſ``, ``ͅ``, Greek symbol forms, Cyrillic variants, ``ẛ``, ``ι``):
worked out over every code point by tests/test_redteam27c.py."""
_ODD = re.compile(f"[{_ODD_FROM}]")


def _case_forms(text: str) -> list[str]:
    """``text`` and the case forms of it that fold (``_folded``) to other needles: a tool's
    ``upper``, ``lower`` or ``casefold`` changes a character into others where folding one
    at a time cannot follow (``ß`` written ``SS``, ``kırmızı`` upper-cased ``KIRMIZI``,
    ``İ`` lowered to ``i`` and a combining dot), and a Turkish-unaware tool writes ``İ`` as
    ``I`` (red team 27c: each went out). An ASCII text has none (one form: the usual
    case)."""
    if text.isascii():
        return [text]
    seen = {_folded(text)}
    out = [text]
    for form in (text.upper(), text.lower(), text.casefold(), text.replace("\u0130", "I")):
        if (f := _folded(form)) not in seen:
            seen.add(f)
            out.append(form)
    return out


def _json_kept(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with ``spans`` replaced (``_replaced``), and still JSON at every level it was.

    A span that starts or ends on a quote or next to a backslash may cut an escape or a
    string's delimiter (a value holding quotes or a backslash, found in JSON inside JSON
    through a chain of views: red team 17's property, ``'0009<\\'`` in ``{"body": "..."}``
    left ``\\"a[REDACTED]"``). Only then is the result checked: where the text was JSON
    (and the JSON texts its strings hold, three levels down) and the result is not, each
    string of the text that a span touches is replaced whole (``"[REDACTED]"``: the text
    stays JSON, a string that held JSON holds the marker), and if even that is no JSON,
    the whole text. A check costs two parses, and only such a span
    pays it."""
    edges = [(text[s:s + 1], text[e - 1:e], text[s - 1:s] if s else "", text[e:e + 1])
             for s, e in spans]
    out = _replaced(text, list(spans))
    if not any(a in _EDGY or b in _EDGY or c == "\\" or d == "\\" for a, b, c, d in edges):
        return out
    levels = _json_levels(text)
    if not levels or _json_levels(out) == levels:
        return out
    tokens = [m.span() for m in _JSON_STRING.finditer(text)]
    starts = [t[0] for t in tokens]
    whole: list[tuple[int, int]] = []
    for s, e in spans:
        k = bisect.bisect_right(starts, s) - 1
        if k < 0 or tokens[k][1] < e:
            return REDACTED  # a span outside one string: the safe side
        whole.append((tokens[k][0] + 1, tokens[k][1] - 1))
    out = _replaced(text, whole)
    return out if _json_levels(out) else REDACTED


_EDGY = frozenset(('"', "\\"))

_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
"""A JSON string token (its quotes included; linear: no alternative backtracks)."""


def _json_levels(text: str, depth: int = 0) -> int:
    """How many levels of JSON ``text`` is: 0 when it is none, 1 when it parses, and one
    more for each level of a string inside it that is JSON text itself (``{...}`` or
    ``[...]``), up to three."""
    try:
        data = json.loads(text)
    except Exception:
        return 0
    if depth >= 2:
        return 1
    deepest = 0
    stack: list[Any] = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str) and item[:1] in ("{", "[") and item[-1:] in ("}", "]"):
            deepest = max(deepest, _json_levels(item, depth + 1))
    return 1 + deepest


def _replaced(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with the union of ``spans`` replaced, each run of covered characters by one
    marker. A replacement is never rescanned, so it cannot splice a value back together
    from the marker and its neighbours."""
    spans.sort()
    out: list[str] = []
    pos = 0
    start, end = spans[0]
    for s, e in spans[1:]:
        if s <= end:
            end = max(end, e)
            continue
        start = _escape_start(text, start, pos)
        out += (text[pos:start], REDACTED)
        pos, start, end = end, s, e
    start = _escape_start(text, start, pos)
    out += (text[pos:start], REDACTED, text[end:])
    return "".join(out)


def _escape_start(text: str, start: int, floor: int) -> int:
    """``start``, or the start of the run of backslashes before it: a spelling that starts
    with ``\\`` found one character into ``\\\\\\u20ac`` cuts an escape in two, and so does
    a start after an even run in a text escaped twice (JSON inside JSON: ``\\\\\\\\a`` is one
    backslash two levels down; a match a chain of views mapped to its third character left
    ``\\\\``, and the inner text an invalid ``\\[``: found by red team 17's property). The
    marker replaces the whole run, so a JSON text stays JSON at every level. The run is
    read back no further than ``floor`` (the end of the span before), so the reads of all
    spans together stay linear."""
    if start <= floor or text[start - 1] != "\\":
        return start
    return floor + len(text[floor:start].rstrip("\\"))


def _view_escape_start(text: str, start: int, runs: list[tuple[int, int]]) -> int:
    """``_escape_start`` for a match in a view's text (which the reader decodes once more),
    with the text's runs of backslashes found once (``runs``, filled on first use) and
    looked up by bisection, whatever the number of matches."""
    if start == 0 or text[start - 1] != "\\":
        return start
    if not runs:
        runs.extend(m.span() for m in _BACKSLASHES.finditer(text))
    k = bisect.bisect_left(runs, (start, start)) - 1
    first = runs[k][0] if k >= 0 and runs[k][1] >= start else start
    return start - 1 if (start - first) % 2 else start


_BACKSLASHES = re.compile(r"\\+")


MAX_OCCURRENCES = 1 << 12
"""Occurrences of known values in one text that are found and replaced one by one (each
costs a Python step, about a microsecond: a megabyte of a four-character value repeated
took 0.7 s, a second and more through a guard's memory). A text holding more (tool output
the attacker wrote around a value the model chose) is replaced whole: it fails closed, and
its cost stays bounded."""

_SCAN_NEEDLES = 32
"""Up to this many needles, ``in`` tests find out whether a text needs replacing at all;
beyond it (a guard remembers up to 1,024 injected values, each in several spellings) one
RE2 search is far cheaper than a scan per needle. 16 until red team 27, whose encoded cores
give an ASCII key 5 needles: a call's four keys then compiled an RE2 search on every call;
up to six are scanned now (measured, a call's 4-8 keys: 200 short texts 0.5x, a 64 kB text
1.0-1.2x the compiled search, ``/tmp`` script, one run)."""

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.max_mem = 256 << 20  # thousands of literals stay in one DFA (not the slow NFA)
_RE2_OPTIONS.log_errors = False
_RE2_OPTIONS.case_sensitive = False  # a value in any case (the needles are lowered)


_CHUNK_CHARS = 1 << 16
"""Pattern characters per RE2 automaton. One alternation of every needle of a full memory
(20,000 spellings of 1,024 values) outgrows RE2's memory: its DFA falls back to the slow
NFA, or the pattern to Python's ``re`` (measured: 1.3 s to scrub a 12 KB text). Chunks
this size stay fast, and the text is searched once per chunk (linear each, some 2 ns a
character whatever the chunk's size). 32 KiB until red team 27, whose encoded cores
(``_encoded``) made a layer of 128 plain keys two chunks instead of one; at 64 KiB it is
one again (``benchmarks/encoded_bench.py``)."""


_Chunks = tuple[tuple[tuple[str, ...], Any], ...]


def _chunked(needles: tuple[str, ...]) -> _Chunks:
    """Patterns for every needle, in chunks (each with its needles), longest first within
    each."""
    chunks: list[list[str]] = [[]]
    size = 0
    for n in needles:
        if size + len(n) > _CHUNK_CHARS and chunks[-1]:
            chunks.append([])
            size = 0
        chunks[-1].append(n)
        size += len(n) + 1
    return tuple((tuple(c), _alternation(tuple(c))) for c in chunks if c)


def _alternation(needles: tuple[str, ...]) -> Any:
    """One pattern for ``needles``, longest first (leftmost-first alternation, RE2's as
    Python's). RE2 for linear time; Python's ``re`` if RE2 refuses the pattern."""
    try:
        return re2.compile("|".join(map(re2.escape, needles)), _RE2_OPTIONS)
    except Exception:
        return re.compile("|".join(map(re.escape, needles)), re.IGNORECASE)


def spellings(text: str) -> set[str]:
    """The forms a text takes inside the texts that leave.

    As is; as Python's ``repr`` writes it inside a quoted string (a ``KeyError``'s text, an
    expression error quoting a value), with and without the single quote escaped (``repr``
    escapes it or not depending on the whole text), and ``ascii()``'s variant; as the
    ``repr`` of its UTF-8 bytes (``json.dumps(..., default=str)`` of a bytes value); and each
    of those JSON-escaped, with and without ``ensure_ascii`` (the framework serializes dict
    and list tool results with ``json.dumps``, so a ``repr`` inside one is escaped twice).

    And pydantic's cut form of it: a validation error quotes a long input as the first 25
    and the last 24 bytes of its ``repr`` (``input_value='sk-live-abcd...wxyz'``), enough of
    a key to hurt, which no whole spelling matches (:func:`_pydantic_cut`).

    And the forms a tool gives a value without transforming it: percent-encoded (a signed
    link or a query string built with ``urllib.parse``), the ``repr`` of its UTF-8 bytes
    (``str(b"...")``, a bytes value in an exception or a dict's text), and each Unicode
    normal form (NFC, NFD, NFKC, NFKD: the same characters, composed or not), each of
    those escaped again as above.

    And the encoded cores of a value of ``MIN_ENCODED_BYTES`` or more (``_encoded``):
    its UTF-8 bytes in base64 (either alphabet, at each byte alignment) and in hex, so a
    tool that hands it back encoded (Basic auth, a data: URI, a hex dump) is found; and
    those of its JSON-escaped forms (a JSON document base64-encoded).

    The scrubber removes each of them, so a secret holding quotes, backslashes, newlines
    or non-ASCII characters is removed in whichever serialized text carries it.
    """
    inner = _py_escaped(text)
    ascii_inner = _py_escaped(text, ascii_only=True)
    data = repr(text.encode("utf-8", "surrogatepass"))[2:-1]
    base = {text, inner, inner.replace("'", "\\'"), ascii_inner,
            ascii_inner.replace("'", "\\'"), data, data.replace("'", "\\'"),
            data.replace("\\'", "'")}
    cut = _pydantic_cut(repr(text))
    if cut is not None:
        base.add(cut)
    # As the normal and wrap views read a text (fillers and line breaks removed,
    # compatibility characters as ASCII): a value that holds a line break (a PEM key) is
    # found there however the text wraps it.
    normal = _normalized(text)
    if normal != text and len(normal) >= MIN_SUBSTRING_LENGTH:
        base.add(normal)
    # The same characters in another normal form (composed or not), as is: raw and as JSON
    # writes it. (Not every escape of every normal form: a value's spellings are searched
    # on every call.)
    variants = {text, unicodedata.normalize("NFC", text), unicodedata.normalize("NFD", text),
                unicodedata.normalize("NFKC", text), unicodedata.normalize("NFKD", text)}
    base |= variants
    forms = set(base)
    for form in base:
        forms.add(json.dumps(form)[1:-1])
        forms.add(json.dumps(form, ensure_ascii=False)[1:-1])
    for variant in variants:
        quoted = _percent_encoded(variant)
        # ``quote`` (``/`` kept) and ``quote_plus`` (space as ``+``), quoting once.
        forms |= {quoted, quoted.replace("%2F", "/"), quoted.replace("%20", "+")}
    # Encoded: the value's bytes, and those of its JSON forms (a JSON document base64'd:
    # a JWT's payload, a data: URI of JSON; the same bytes for most values).
    for form in {text, json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]}:
        forms |= _encoded(form)
    return {f for f in forms if f}


MIN_ENCODED_BYTES = 8
"""UTF-8 bytes a value needs for its encoded cores to be searched (``_encoded``). The
shortest core of 8 bytes is 10 base64 characters at every alignment (16 hex digits),
matched in any case: some 52 bits (a letter matches 2 of 64 characters, a digit 1), so a
full memory of 1,024 such values (some 7,000 cores) would meet one by chance in random
base64 about once in 500,000 megabytes (a longer value's core, far more rarely), and a
core is the value's own bytes (bar at most 4 bits at each edge), not a run ordinary text
or a hash holds. A value of 4-7 bytes has cores of 4-9 characters: a few megabytes of any
base64 image hold one by chance, so a short value is found written out, never encoded."""

def _encoded(text: str) -> set[str]:
    """The *cores* of ``text``'s UTF-8 bytes encoded (red team 27's limit: a tool that
    returns a secret base64-encoded, in ``Authorization: Basic`` of ``user:secret``, a data:
    URI ``Content.from_data`` builds, or a hex dump, gave the model a decodable form).

    A core is the run of characters the value's bytes alone determine, whatever bytes come
    before or after it in the blob: in base64, at each of the 3 alignments the value may
    start at (``k`` bytes after a 3-byte group's start), the characters whose 6 bits all
    fall inside the value, in the standard alphabet and the URL-safe one (``-_`` for
    ``+/``); in hex, its digits (folded, so either case). Replacing a core leaves the
    blob's edge characters, which hold at most 4 bits of the value's first and last byte
    (with bits of the neighbours). Base64 is matched in any case as every needle is
    (``_folded``): a core in another case is other bytes, so this is more than exact and
    errs on the safe side. Empty for a value under ``MIN_ENCODED_BYTES``.

    Not base32 (pure Python in 3.11, five alignments: 1 ms per 8 KiB value per alignment,
    paid on every call for its secret arguments), nor encodings of other bytes than the
    UTF-8 (UTF-16 base64, as PowerShell's ``-EncodedCommand``), nor hex with separators.
    """
    data = text.encode("utf-8", "surrogatepass")
    if len(data) < MIN_ENCODED_BYTES:
        return set()
    bits = 8 * len(data)
    forms = {data.hex()}
    for k in range(3):
        blob = binascii.b2a_base64(bytes(k) + data, newline=False).decode("ascii")
        core = blob[(8 * k + 5) // 6:(8 * k + bits) // 6]
        forms.add(core)
        if "+" in core or "/" in core:
            forms.add(core.replace("+", "-").replace("/", "_"))
    return forms


_PYDANTIC_INPUT_BYTES = 50
"""pydantic-core quotes an input's ``repr`` whole up to this many UTF-8 bytes, else cut."""


def _pydantic_cut(quoted: str) -> str | None:
    """How pydantic-core writes ``input_value`` for a ``repr`` over
    ``_PYDANTIC_INPUT_BYTES``: its first 25 and last 24 bytes (a character split at either
    cut is left out), joined by ``...``; None for a shorter one, which it quotes whole.
    (tests/test_redteam16_secrets.py checks this against pydantic on generated texts.)"""
    data = quoted.encode("utf-8", "surrogatepass")
    if len(data) <= _PYDANTIC_INPUT_BYTES:
        return None
    half = (_PYDANTIC_INPUT_BYTES + 1) // 2
    return (data[:half].decode("utf-8", "ignore") + "..."
            + data[len(data) - (half - 1):].decode("utf-8", "ignore"))


_URL_SAFE = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~"


def _percent_encoded(text: str) -> str:
    """``urllib.parse.quote(text, safe="")``, with C-speed built-ins only (``quote`` is a
    Python loop per byte, too slow for a long value on every call): every byte as ``%XX``,
    then the safe bytes the value holds put back (a ``%`` only ever starts a triple, so a
    replacement cannot match across two). Lone surrogates are encoded, never an error."""
    data = text.encode("utf-8", "surrogatepass")
    if not data:
        return ""
    out = "%" + data.hex("%").upper()
    for byte in set(data).intersection(_URL_SAFE):
        out = out.replace(f"%{byte:02X}", chr(byte))
    return out


def _py_escaped(text: str, *, ascii_only: bool = False) -> str:
    """``repr(text)`` without its quotes, the single quote left unescaped (``ascii()`` with
    ``ascii_only``).

    Python's own ``repr`` in C, not a loop per character (which cost 100 ms for a 700 kB
    argument value): with a double quote in front, ``repr`` always picks single quotes and
    escapes every single quote, which is then unescaped (an escaped backslash is ``\\``, so
    ``\'`` only ever is an escaped quote).
    """
    return (ascii if ascii_only else repr)('"' + text)[2:-1].replace("\\'", "'")


def _opaque(redact: Callable[[str], str] | None) -> Scrubber:
    """An opaque scrubber (what a copy of one is)."""
    out = Scrubber((), redact)
    out._set(None)
    return out


def _texts_of(values: Iterable[Any]) -> frozenset[str] | None:
    """Every text form of ``values``, or None (fail closed: an opaque scrubber) when there
    are more than ``MAX_TEXTS``, more than ``_MAX_READ`` elements, or they cannot be read.
    A walk with its own stack: no recursion, whatever the nesting."""
    out: set[str] = set()
    read = 0
    stack: list[Iterator[Any]] = [iter(values)]
    try:
        while stack:
            item = next(stack[-1], _END)
            if item is _END:
                stack.pop()
                continue
            read += 1
            if read > _MAX_READ:
                return None
            if isinstance(item, bool) or item is None:
                continue
            if isinstance(item, Mapping):
                stack.append(itertools.chain.from_iterable(item.items()))
            elif isinstance(item, list | tuple | set | frozenset):
                stack.append(iter(item))
            else:
                out.update(_leaf_texts(item))
                if len(out) > MAX_TEXTS:
                    return None
    except Exception:  # values that cannot be read
        return None
    return frozenset(out)


_END = object()


def _leaf_texts(value: Any) -> set[str]:
    """The texts of a value that is not a container."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    # A str subclass's own ``__str__`` may print other than its data (a mask): the data.
    texts = {str.__str__(value) if isinstance(value, str) else str(value)}
    if isinstance(value, float) and value.is_integer():
        texts.add(str(int(value)))
    if isinstance(value, str):
        texts.add(value.strip())
    texts.discard("")
    return texts


# -- redact patterns on escaped text ------------------------------------------------------

_ESCAPE = re.compile(r"(\\(?:u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"
                     r"|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}"
                     r"|x[cCdD][0-9a-fA-F]\\x[89abAB][0-9a-fA-F]"
                     r"|x[eE][0-9a-fA-F](?:\\x[89abAB][0-9a-fA-F]){2}"
                     r"|x[fF][0-7](?:\\x[89abAB][0-9a-fA-F]){3}|x[0-9a-fA-F]{2}"
                     r"|3[0-3][0-7]\\2[0-7]{2}|3[45][0-7](?:\\2[0-7]{2}){2}"
                     r"|36[0-7](?:\\2[0-7]{2}){3}|[0-3][0-7]{0,2}|[4-7][0-7]?"
                     r"|[\\/\"'bfnrtva]))")
"""One escape of JSON, Python's ``repr`` or C (PHP, Perl, a shell's ``$'...'``): a surrogate
pair, ``\\uXXXX``, ``\\UXXXXXXXX``, ``\\xXX`` (a character's UTF-8 bytes together, as C, Go
and a shell's ``printf`` write them, ``\\xc3\\xa9``: red team 21, read as ``Ã©`` they went
out whole; or one), an octal escape (a character's UTF-8 bytes, ``\\303\\251``, or one byte,
``\\101``; ``\\0`` is one) or one character. Each stands for one character (bytes that are
no UTF-8 character, for one each)."""

_HTML = re.compile(r"(&(?:[A-Za-z][A-Za-z0-9]{1,31};|#[0-9]{1,7};?|#[xX][0-9a-fA-F]{1,6};?))")
"""An HTML character reference (``&quot;``, ``&uuml;``, ``&sol;``, ``&#39;``, ``&#x2F;``;
a number without its ``;``, which browsers read too): one character each (a name HTML 5
does not know stands for itself). Red team 21: only five names were read, so PHP's
``htmlentities`` (``Gr&uuml;&szlig;e``) went out whole.
Undone in a view of its own: a text is HTML or JSON, and a backslash in HTML is a
backslash."""

_PERCENT = re.compile(r"(%(?:[0-7][0-9A-Fa-f]|[CDcd][0-9A-Fa-f]%[89ABab][0-9A-Fa-f]"
                      r"|[Ee][0-9A-Fa-f](?:%[89ABab][0-9A-Fa-f]){2}"
                      r"|[Ff][0-7](?:%[89ABab][0-9A-Fa-f]){3}"
                      r"|[uU][dD][89abAB][0-9A-Fa-f]{2}%[uU][dD][c-fC-F][0-9A-Fa-f]{2}"
                      r"|[uU][0-9A-Fa-f]{4}|[89A-Fa-f][0-9A-Fa-f])|\+)")
"""A percent-encoded character (its UTF-8 bytes, in either case of hex: ``%2F``, ``%2f``,
``%C3%A9``; JavaScript's ``escape``, ``%u00E9`` and a surrogate pair ``%uD83D%uDE00``; a
byte that starts no UTF-8 character, as cp1252 or Latin-1 encode one: ``%E9``) or a ``+``
(a space in a query), one character each. Undone in a view of its own (a URL or a form
body), for a text holding a ``%XX``."""

_PERCENT_BYTES = re.compile(r"(%[0-9A-Fa-f]{2}|\+)")
_PERCENT_HIGH = re.compile(r"%[89A-Fa-f][0-9A-Fa-f]")
"""Percent-encoding byte by byte, each byte a cp1252 character (a page in Windows' encoding,
``urllib.parse.quote(..., encoding="cp1252")``): a family of its own, made for a text with
a byte over 127, since bytes valid as UTF-8 read otherwise there (``%DF%80`` is ``ß€`` in
cp1252, one character in UTF-8)."""

_CSS = re.compile(r"(\\(?:[0-9A-Fa-f]{1,6}(?:\r\n|[ \t\r\n\f])?|[!#$%&()*+,.:;<=>?@\[\]^`{|}~-]))")
"""A CSS escape: up to six hex digits of a code point and the one white space that may end
them (``\\41 ``, ``\\000041``), or a punctuation character written after a backslash
(``\\.``; not a letter or a quote, which JSON and ``repr`` escapes spell). A family of its
own: ``\\b`` is a backspace in JSON and U+000B in CSS."""

_QP_BREAK = r"[ \t]*\r*\n"
"""What follows the ``=`` of a soft line break: the white space a transport may pad a line
with (RFC 2045), any carriage returns and a line feed, as ``binascii.a2b_qp`` (``quopri``)
or the ``email`` package reads one."""

_QP_PADDING = r"(?<![ \t])[ \t]+(?=\r*\n)"
"""White space at a line's end, which a quoted-printable reader deletes (RFC 2045: a
transport added it; an encoder writes a space there as ``=20``). Matched from the start of
its run only, so that a long run of spaces is read once."""

_QP_LINE_END = r"(?:2[Ee]|20|09)(?=[ \t]*(?:\r*\n|\Z))"
"""A byte alone that an encoder writes at a line's end, before a line break or at the
text's end: a line that is only a dot (``=2E``, as ``quopri`` writes it) and white space
there (``=20``, ``=09``), which a reader would otherwise delete as a transport's padding.
``a2b_qp`` reads it; ``id=20`` inside a line is still no escape."""

_QP = re.compile(rf"(=(?:(?:[0-9A-Fa-f]{{2}}|{_QP_BREAK})(?:=(?:[0-9A-Fa-f]{{2}}|{_QP_BREAK}))+"
                 rf"|3D|{_QP_BREAK}|(?<=[A-Za-z]=)[89A-F][0-9A-F]|{_QP_LINE_END})|{_QP_PADDING})")
"""A run of quoted-printable bytes (``=C3=A9``) and soft line breaks (``=`` and ``_QP_BREAK``, nothing),
or a line's padding (``_QP_PADDING``, nothing): a mail's body. Quoted-printable inside
quoted-printable meets both: a line break the outer layer split (``\\r=\\r\\n\\n``)
is ``=\\r\\r\\n`` one level down, a soft line break wrapped over lines is ``=`` and white
space before a line break (a value encoded and wrapped three times over went out whole). A
run, not a byte: a character's bytes, or a byte and a line break, stand together (a mailer
breaks a line between a character's bytes). A byte alone only as quoted-printable writes
one among a value's letters (``=3D`` for ``=``, a Latin-1 byte after a letter, in
upper-case hex: ``caf=E9``) or at a line's end (``_QP_LINE_END``): ``width=100``, ``id=20;``
or a spreadsheet's ``=A1`` is no escape."""

_MIME_WORD = r"=\?[^?\s]{1,64}\?[QqBb]\?[^?\s]*\?="
_MIME = re.compile(f"({_MIME_WORD}(?:\\s+{_MIME_WORD})*)")
"""A run of MIME encoded words (RFC 2047, a mail header: ``=?utf-8?q?Caf=C3=A9?=``,
``=?UTF-8?B?...?=``), the white space between two of them not part of the text (a long
header folded over lines)."""

_QUOTES = re.compile(r"('(?:\\''|\"'\"'|')|\"\")")
"""A quote doubled (CSV and SQL: ``""``, ``''``) or a single quote ended, escaped and
reopened (a shell: ``'\\''``, ``'"'"'`` as ``shlex.quote`` writes it)."""

_SHELL_QUOTES = re.compile(r"('\\''|'\"'\"')")
"""A single quote ended, escaped and reopened, alone (a shell: ``'\\''``, ``'"'"'``): a view
of its own besides the plain family's, since that one reads a quoted empty string before
it as a doubled quote (``shlex.quote`` of a value starting with two quotes,
``''"'"''"'"'...``) and the value out of step (red team 21)."""

_DOUBLED = re.compile(r"(''|\"\")")
"""A quote doubled, alone (CSV and SQL: ``''``, ``""``): a view of its own besides the plain
family's, since that one reads a literal's opening quote, a backslash of the value and its
doubled quote (``('\\''00009;')``) as a shell's escaped quote, and the value out of step
(found by red team 20's property, fourteenth session)."""

_PLAIN = re.compile(f"({_QUOTES.pattern[1:-1]}|{EXOTIC.pattern[1:-1]})")
"""The doubled quotes and the normal family together, in one view (the *plain* family):
neither changes what a pattern's ``\\b`` sees, and a view of each and of both would cost
three searches of the text instead of one."""

_BREAKS = re.compile(r"([\r\n][ \t\r\n]*)")
"""Line breaks and the indentation after them (a value wrapped over lines, a header
folded): the *wrap* family, undone in a view of its own. A family apart from the normal
one, since joining lines changes what a pattern's ``\\b`` sees. Only the white space after a
break, so that a run of spaces is never read twice."""


_HTML_NAMES = {"&quot;": '"', "&amp;": "&", "&apos;": "'", "&lt;": "<", "&gt;": ">"}

_SIMPLE_ESCAPES = {"\\" + k: v for k, v in {
    "\\": "\\", "/": "/", '"': '"', "'": "'", "b": "\b", "f": "\f", "n": "\n", "r": "\r",
    "t": "\t", "v": "\v", "a": "\a"}.items()}

MAX_ESCAPES = 1 << 12
"""Backslashes and ampersands of one text whose escapes are undone exactly (a split and a
lookup each, a Python call for a ``\\uXXXX`` not seen lately: about 3 µs; 65,536 of them took
0.7 s). A text with more is searched in a rough view of it, worked out at C speed (its
common escapes undone) and, if a value or pattern is found there, replaced whole (fail
closed). The families that no backslash, ampersand or percent sign marks have a bound of
their own (``_Family.most``)."""

_MAX_ESCAPED_MATCHES = 256
"""Matches in a text's unescaped views that are mapped back one by one (each some 25 µs:
spans, a search of its surroundings); a text with more is replaced whole (fail closed)."""

_VIEWS = 3
"""Levels of escaping undone: JSON, ``repr`` inside JSON (a dict's text in a JSON result),
and once more."""


class _View:
    """A text with one level of escapes undone, and where each escape was (worked out
    only when a pattern matches the view: most views match none). An escape stands for
    any number of characters: one (``\\u00e9``), none (a soft line break, a zero-width
    space) or several (a MIME encoded word)."""

    __slots__ = ("_escapes", "_literals", "_narrow", "_undone", "_where", "parent", "text")

    def __init__(self, text: str, literals: list[str], escapes: list[str], undone: list[str],
                 parent: int, narrow: bool = False) -> None:
        self.text = text
        self._narrow = narrow
        self.parent = parent
        """The view this one was made of (its index among the views; -1: the text itself)."""
        self._literals = literals
        self._escapes = escapes
        self._undone = undone
        self._where: tuple[list[int], list[int], list[int], list[int]] | None = None

    def _positions(self) -> tuple[list[int], list[int], list[int], list[int]]:
        """Where each escape's characters start and end in ``text``, and where the escape
        starts and ends in the escaped text."""
        if self._where is None:
            before = list(itertools.accumulate(map(len, self._literals[:-1])))
            escaped = list(itertools.accumulate(map(len, self._escapes), initial=0))
            undone = list(itertools.accumulate(map(len, self._undone), initial=0))
            self._where = ([b + u for b, u in zip(before, undone, strict=False)],
                           [b + u for b, u in zip(before, undone[1:], strict=True)],
                           [b + e for b, e in zip(before, escaped, strict=False)],
                           [b + e for b, e in zip(before, escaped[1:], strict=True)])
        return self._where

    def source(self, start: int, end: int) -> tuple[int, int, bool]:
        """The span of the escaped text that ``text[start:end]`` (not empty) came from, and
        whether it holds or touches an escape (one whose characters end at ``start`` or
        later and start at ``end`` or before)."""
        starts, ends = self._positions()[:2]
        first = bisect.bisect_left(ends, start)
        touches = first < len(starts) and starts[first] <= end
        return self._origin(start, True), self._origin(end - 1, False), touches

    def _origin(self, pos: int, start: bool) -> int:
        starts, ends, origins, origin_ends = self._positions()
        k = bisect.bisect_right(starts, pos) - 1
        if k >= 0 and pos < ends[k]:  # one of an escape's characters: the whole escape
            if self._narrow:  # a doubled quote at a match's edge: the quote nearest it
                return origin_ends[k] - 1 if start else origins[k] + 1
            return origins[k] if start else origin_ends[k]
        base = pos if k < 0 else origin_ends[k] + pos - ends[k]
        return base if start else base + 1


_CP1252_UNDEFINED = frozenset(b"\x81\x8d\x8f\x90\x9d")


def _cp1252_fallback(error: UnicodeError) -> tuple[str, int]:
    """A codec error handler: bytes that are no UTF-8 as cp1252 writes them (Latin-1 for
    the five it leaves undefined), the way a page in Windows' encoding meant them."""
    if not isinstance(error, UnicodeDecodeError):
        raise error
    bad = error.object[error.start:error.end]
    return "".join(chr(b) if b in _CP1252_UNDEFINED else bytes((b,)).decode("cp1252")
                   for b in bad), error.end


codecs.register_error("guardrails.cp1252", _cp1252_fallback)


def _decoded_bytes(data: bytes, encoding: str = "utf-8") -> str:
    """``data`` as ``encoding`` (UTF-8 unless a MIME word names one), bytes that are not
    as cp1252; an unknown encoding as UTF-8."""
    try:
        return data.decode(encoding, "guardrails.cp1252")
    except Exception:  # an encoding Python does not know, or not a text encoding
        return data.decode("utf-8", "guardrails.cp1252")


def _safe_char(code: int) -> str:
    """A code point as a character; a lone surrogate (or no character at all) as U+FFFD,
    which RE2 can read."""
    return "\ufffd" if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF else chr(code)


@functools.lru_cache(maxsize=4096)
def _unescaped_char(escape: str) -> str:
    """The character an escape of JSON, ``repr``, C, HTML or percent-encoding stands for
    (cached: a text's escapes repeat)."""
    simple = _SIMPLE_ESCAPES.get(escape) or _HTML_NAMES.get(escape)
    if simple is not None:
        return simple
    if escape == "+":
        return " "
    if escape[0] == "%":
        if escape[1] in "uU":  # JavaScript's escape(): UTF-16 code units
            units = escape.replace("%u", "").replace("%U", "")
            return _decoded_bytes(bytes.fromhex(units), "utf-16-be")
        char = _decoded_bytes(bytes.fromhex(escape.replace("%", "")))
        return char if len(char) == 1 else "\ufffd"
    kind = escape[1]
    if kind in "01234567":  # octal: a byte each, a character's UTF-8 bytes together
        char = _decoded_bytes(bytes(int(o, 8) & 0xFF for o in escape[1:].split("\\")))
        return char if len(char) == 1 else "\ufffd"
    if kind == "x":  # a byte each, a character's UTF-8 bytes together
        data = bytes(int(h, 16) for h in escape[2:].split("\\x"))
        char = data.decode("utf-8", "replace") if len(data) > 1 else ""
        return char if len(char) == 1 and char != "\ufffd" else data.decode("latin-1")
    if escape[0] == "&" and kind != "#":  # an HTML character reference by name
        return html.entities.html5.get(escape[1:], escape)
    if kind == "#":  # an HTML character reference by number
        digits = escape[2:].rstrip(";")
        code = int(digits[1:], 16) if digits[:1] in "xX" else int(digits)
    elif len(escape) == 12:  # a surrogate pair
        high, low = int(escape[2:6], 16), int(escape[8:12], 16)
        code = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
    else:
        code = int(escape[2:], 16)
    return _safe_char(code)


@functools.lru_cache(maxsize=512)
def _cp1252_char(escape: str) -> str:
    """The character a percent-encoded byte stands for in cp1252 (``+``: a space)."""
    return " " if escape == "+" else _decoded_bytes(bytes.fromhex(escape[1:]), "cp1252")


@functools.lru_cache(maxsize=4096)
def _css_char(escape: str) -> str:
    """The character a CSS escape stands for (U+0000 as U+FFFD, as CSS reads it)."""
    digits = escape[1:].rstrip(" \t\r\n\f")
    if not digits or digits[0] not in "0123456789abcdefABCDEF":
        return escape[1]
    code = int(digits, 16)
    return _safe_char(code) if code else "\ufffd"


@functools.lru_cache(maxsize=4096)
def _qp_run(run: str) -> str:
    """The characters a run of quoted-printable bytes and soft line breaks stands for (a
    line's padding: nothing)."""
    if run[0] != "=":
        return ""
    return _decoded_bytes(binascii.a2b_qp(_QP_NOTHING.sub("", run).encode("ascii")))


_QP_NOTHING = re.compile(f"={_QP_BREAK}|{_QP_PADDING}")
"""Soft line breaks and a line's padding: what a quoted-printable reader deletes."""


_MIME_PARTS = re.compile(r"=\?([^?\s]{1,64})\?([QqBb])\?([^?\s]*)\?=")


@functools.lru_cache(maxsize=1024)
def _mime_run(run: str) -> str:
    """The text a run of MIME encoded words stands for, each in the encoding it names."""
    out = []
    for charset, kind, data in _MIME_PARTS.findall(run):
        raw = data.encode("ascii", "replace")
        if kind in "Qq":
            raw = binascii.a2b_qp(raw, header=True)
        else:
            with contextlib.suppress(binascii.Error, ValueError):  # else: as they are
                raw = binascii.a2b_base64(raw + b"=" * (-len(raw) % 4))
        out.append(_decoded_bytes(raw, charset.split("*")[0]))
    return "".join(out)


_QUOTE_PAIRS = {"''": "'", '""': '"', "'\\''": "'", "'\"'\"'": "'"}


def _plain_char(escape: str) -> str:
    """What a doubled quote, a filler or a compatibility character stands for."""
    return _QUOTE_PAIRS.get(escape) or NORMAL_TABLE.get(ord(escape), escape)


def _no_break(escape: str) -> str:
    return ""


class _Family(NamedTuple):
    """One family of escapes a view undoes."""

    present: Callable[[str], bool]
    """A cheap test: whether a text may hold one (a character every escape holds)."""
    pattern: re.Pattern[str]
    """One escape a match, the whole match its one group (for ``re.split``)."""
    undo: Callable[[str], str]
    """What an escape stands for."""
    most: int
    """Escapes of one view undone exactly; a view with more is not made, and the text is
    searched in the rough view too (``_CappedViews``). The families of the backslash, the
    ampersand and the percent sign are bounded by ``MAX_ESCAPES`` before (``_views``)."""
    narrow: bool = False
    """Whether a match that starts or ends at an escape's character starts or ends at the
    escape's last or first character instead of covering it whole: a doubled quote at the
    end of a value (``"Zq""``) is often the value's quote and the quote closing the string
    (a value ending in ``"`` JSON-escaped, ``\\"`` and the JSON string's own ``"``), and
    the marker must leave the closing one (a JSON text stays JSON). Either quote alone
    gives nothing of the value away."""
    undo_all: Callable[[list[str]], list[str]] | None = None
    """What the escapes of a view stand for, all at once (``undo`` of each, at C speed)."""


def _has_quotes(text: str) -> bool:
    return "''" in text or '""' in text or "'\"'" in text


def _has_normal(text: str) -> bool:
    return exotic(text)


def _has_breaks(text: str) -> bool:
    return "\n" in text or "\r" in text


_COMPOSE_RANGES = (
    (0x0300, 0x0387), (0x0483, 0x0487), (0x0591, 0x074A), (0x07EB, 0x108D), (0x1161, 0x11C2),
    (0x135D, 0x135F), (0x1714, 0x1734), (0x17D2, 0x17DD), (0x18A9, 0x18A9), (0x1939, 0x193B),
    (0x1A17, 0x1C37), (0x1CD0, 0x1CF9), (0x1DC0, 0x1DFF), (0x1F71, 0x2001), (0x20D0, 0x212B),
    (0x2329, 0x232A), (0x2ADC, 0x2ADC), (0x2CEF, 0x2CF1), (0x2D7F, 0x2DFF), (0x302A, 0x309A),
    (0xA66F, 0xA6F1), (0xA806, 0xA82C), (0xA8C4, 0xA9C0), (0xAAB0, 0xAAF6), (0xABED, 0xABED),
    (0xF900, 0xFB4E), (0xFE20, 0xFE2F), (0x101FD, 0x101FD), (0x102E0, 0x102E0),
    (0x10376, 0x1037A), (0x10A0D, 0x10A3F), (0x10AE5, 0x10AE6), (0x10D24, 0x10D27),
    (0x10EAB, 0x10EAC), (0x10F46, 0x10F85), (0x11046, 0x11236), (0x112E9, 0x11374),
    (0x11442, 0x114C3), (0x115AF, 0x1172B), (0x11839, 0x1183A), (0x11930, 0x11943),
    (0x119E0, 0x11A99), (0x11C3F, 0x11C3F), (0x11D42, 0x11D97), (0x16AF0, 0x16B36),
    (0x16FF0, 0x16FF1), (0x1BC9E, 0x1BC9E), (0x1D15E, 0x1D1C0), (0x1D242, 0x1D244),
    (0x1E000, 0x1E02A), (0x1E130, 0x1E136), (0x1E2AE, 0x1E2EF), (0x1E8D0, 0x1E94A),
    (0x2F800, 0x2FA1D))
"""Where the characters are that composing a text (NFC) joins to the character before
them (combining marks, the second of a canonical pair, conjoining vowels and finals) or
changes alone (singletons: the angstrom sign, compatibility ideographs), all of them (a
test reads every code point: tests/test_redteam24_secrets.py)."""


def _class(codes: Iterable[int]) -> str:
    spans: list[list[int]] = []
    for code in sorted(codes):
        if spans and code == spans[-1][1] + 1:
            spans[-1][1] = code
        else:
            spans.append([code, code])
    return "".join(re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
                   for a, b in spans)


def _composing_among(codes: Iterable[int]) -> tuple[set[int], set[int]]:
    """Of ``codes``, the characters NFC joins to the one before them (combining marks, the
    second of a canonical pair, and the Hangul vowels and finals), and those it changes
    alone (one reading: ``_COMPOSE_RANGES`` is checked against it over every code point,
    tests/test_redteam24_secrets.py)."""
    joined: set[int] = {*range(0x1161, 0x1176), *range(0x11A8, 0x11C3)}  # Hangul vowels, finals
    alone: set[int] = set()
    for code in codes:
        char = chr(code)
        if unicodedata.combining(char):
            joined.add(code)
        decomposition = unicodedata.decomposition(char)
        if decomposition and decomposition[0] != "<" and len(decomposition.split()) == 2:
            joined.add(int(decomposition.split()[1], 16))
        if not unicodedata.is_normalized("NFC", char):
            alone.add(code)
    return joined, alone


def _composing() -> tuple[str, str]:
    """The characters NFC joins to the one before them, and those it changes alone (as
    classes for ``re``)."""
    joined, alone = _composing_among(
        code for low, high in _COMPOSE_RANGES for code in range(low, high + 1))
    return _class(joined), _class(alone)


_JOINED, _ALONE = _composing()


def _composed_pattern(joined: str, alone: str) -> re.Pattern[str]:
    return re.compile(f"((?s:.)[{joined}]+|[{alone}][{joined}]*)")


def _bmp(chars: str) -> str:
    """The part of a class of ``_class`` within the BMP: ``re`` reads a class of BMP
    characters as one bitmap, and one with any past it a range at a time (a CJK page of
    2 kB took 0.36 ms, ten times its scrub, searched with the whole class)."""
    return "".join(m.group(0) for m in re.finditer(
        r"\\?(?s:.)(?:-\\?(?s:.))?", chars) if ord(m.group(0)[-1]) < 0x10000)


_COMPOSED = _composed_pattern(_bmp(_JOINED), _bmp(_ALONE))
"""A character and the marks NFC joins to it, or one NFC changes alone: one match a run
that composing may change (a text in mixed forms, or with marks out of their canonical
order, reads as its NFC form only so). The BMP's; ``_COMPOSED_ALL`` for a text that holds
a character past it."""
_COMPOSED_ALL = _composed_pattern(_JOINED, _ALONE)
_COMPOSABLE = re.compile(f"[{_bmp(_JOINED)}{_bmp(_ALONE)}]")
_COMPOSABLE_ALL = re.compile(f"[{_JOINED}{_ALONE}]")


def _has_composable(text: str) -> bool:
    return not text.isascii() and _COMPOSABLE.search(text) is not None


def _has_composable_astral(text: str) -> bool:
    return (not text.isascii() and _astral(text)
            and _COMPOSABLE_ALL.search(text) is not None)


@functools.lru_cache(maxsize=1 << 12)
def _composed_run(run: str) -> str:
    """A run composed; remembered, as a text's runs repeat (the same letters and marks):
    a decomposed 2 kB page holds some 450 runs and few distinct ones."""
    return unicodedata.normalize("NFC", run)


def _composed_runs(runs: list[str]) -> list[str]:
    """Every run composed, in one ``normalize`` at C speed: the runs joined by NUL, which
    composes with nothing and is never reordered (a starter), so each comes back as it
    composes alone. Composed one by one, 32,768 distinct runs (a CJK letter and a mark
    each) missed the 4,096 remembered every time: one 64 KiB result cost its scrub 116 ms
    (red team 25). Runs holding a NUL are composed one by one."""
    joined = "\0".join(runs)
    if joined.count("\0") == len(runs) - 1:
        composed = unicodedata.normalize("NFC", joined).split("\0")
        if len(composed) == len(runs):
            return composed
    return list(map(_composed_run, runs))


_MOST_RUNS = 1 << 12
"""Runs a composed view composes exactly; a text with more is searched composed in the
rough view (one ``normalize`` of the whole text, at C speed). Each run costs a view
a few list entries and positions to map back, and a text is read in several views (with
fillers undone, line breaks...): 32,768 runs, a CJK letter and a mark each, cost one
64 KiB result's scrub 100-135 ms (red team 25)."""

_BACKSLASH_FAMILY = _Family(lambda t: "\\" in t, _ESCAPE, _unescaped_char, 1 << 30)
_FAMILIES = (
    _BACKSLASH_FAMILY,
    _Family(lambda t: "&" in t, _HTML, _unescaped_char, 1 << 30),
    _Family(lambda t: "%" in t, _PERCENT, _unescaped_char, 1 << 30),
    _Family(lambda t: "%" in t and _PERCENT_HIGH.search(t) is not None, _PERCENT_BYTES,
            _cp1252_char, 1 << 30),
    _Family(lambda t: "\\" in t, _CSS, _css_char, 1 << 30),
    _Family(lambda t: "=" in t, _QP, _qp_run, MAX_ESCAPES),
    _Family(lambda t: "=?" in t, _MIME, _mime_run, MAX_ESCAPES),
    _Family(lambda t: _has_quotes(t) or _has_normal(t), _PLAIN, _plain_char, 1 << 16,
            narrow=True),
    _Family(lambda t: "'\"'\"'" in t or "'\\''" in t, _SHELL_QUOTES, _plain_char, 1 << 16,
            narrow=True),
    _Family(lambda t: "''" in t or '""' in t, _DOUBLED, _plain_char, 1 << 16, narrow=True),
    _Family(_has_breaks, _BREAKS, _no_break, 1 << 16),
    _Family(_has_composable, _COMPOSED, _composed_run, _MOST_RUNS, undo_all=_composed_runs),
    _Family(_has_composable_astral, _COMPOSED_ALL, _composed_run, _MOST_RUNS,
            undo_all=_composed_runs),
)
"""The escapes a view undoes. The quotes and the normal family cost a dictionary lookup an
escape, so they are bounded only to keep a view's memory in proportion."""

_ANY_ESCAPE = re.compile("|".join(f.pattern.pattern for f in _FAMILIES))

_TOO_MANY = object()
"""What ``_view`` returns for a text with more escapes of a family than it undoes."""


def _view(text: str, family: _Family, parent: int) -> _View | object | None:
    """``text`` with one level of ``family`` undone; None if it has none, ``_TOO_MANY``
    past the family's bound. (A split and C-speed lookups, not a loop per escape: a JSON
    text holds an escape per line.)"""
    parts = family.pattern.split(text)
    if len(parts) == 1:
        return None
    if len(parts) > 2 * family.most + 1:
        return _TOO_MANY
    literals = parts[0::2]
    escapes = parts[1::2]
    undone = list(map(family.undo, escapes)) if family.undo_all is None else family.undo_all(
        escapes)
    parts[1::2] = undone
    return _View("".join(parts), literals, escapes, undone, parent, family.narrow)


_ROUGH_HTML = (("&amp;", "&"), ("&quot;", '"'), ("&#39;", "'"), ("&#x27;", "'"), ("&lt;", "<"),
               ("&gt;", ">"))
"""The common HTML character references, ``&amp;`` first: a reference escaped twice
(``&amp;lt;``, a web page's text HTML-escaped again) is undone too. (Listing the others
before ``&amp;`` as well, as the rough view once did, changes nothing: undoing one of them
never makes or unmakes an ``&amp;``.)"""

_ROUGH = (("\\n", "\n"), ("\\t", "\t"), ("\\r", "\r"), ('\\"', '"'), ("\\'", "'"),
          ("\\/", "/"), *_ROUGH_HTML, ("%20", " "), ("%3D", "="), ("%3d", "="),
          ("%3A", ":"), ("%3a", ":"), ("%2F", "/"), ("%2f", "/"), ("%2B", "+"), ("%2b", "+"),
          ("%22", '"'), ("%27", "'"), ("\\\\", "\\"))
"""The common escapes the rough view undoes with C-speed replacements."""


_NOT_AN_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\(?![\\'\"abfnrtv0-7xuU\n])")
"""A backslash that starts no escape of Python's ``unicode_escape`` codec (``\\N`` included:
a name is no JSON or ``repr`` escape): doubled before decoding, so the codec warns of none.
Only a backslash after an even run of them starts an escape (``\\\\`` is one, and the
backslash after it starts the next): the run is matched whole and kept."""


def _rough(text: str) -> str:
    """The common escapes of ``text`` undone once, at C speed (for a text with very many),
    cached for the last text (the values and the patterns read it one after the other).

    And, after it, ``text`` with every JSON and ``repr`` backslash escape undone, by the
    ``unicode_escape`` codec (C speed too): a key spelled in ``\\u`` or ``\\x`` escapes
    and padded past ``MAX_ESCAPES`` went out whole (red team 17b). A match across the two
    parts only replaces the text whole, the safe side. Each codec decoding is made once
    and read in each encoding its bytes may be in (``_backslash_bytes``,
    ``_percent_bytes``)."""
    found = _RECENT_ROUGH.get(text)
    if isinstance(found, str):
        return found
    rough = text
    for escaped, char in _ROUGH:
        rough = rough.replace(escaped, char)
    parts = [rough]
    backslash = _backslash_bytes(text) if "\\" in text else None
    if backslash is not None:
        decoded = backslash
        if "&" in decoded or "%" in decoded:  # a web page's text in a JSON string
            for escaped, char in _ROUGH:
                decoded = decoded.replace(escaped, char)
        parts.append(decoded)
    percent = _percent_bytes(text) if "%" in text else None
    if percent is not None:
        parts.append(_html_undone(_as_bytes(percent, "utf-8")))
    parts += _rough_more(text, backslash, percent)
    rough = "\n\0\n".join(parts)
    if _has_quotes(rough):
        rough += "\n\0\n" + _unquoted(rough)
    if _has_normal(rough) or _has_breaks(rough):
        rough += "\0" + _normalized(_normalized(rough, breaks=False))
    if _has_composable(rough) or _has_composable_astral(rough):
        rough += "\0" + unicodedata.normalize("NFC", rough)
    _RECENT_ROUGH.put(text, rough)
    return rough


def _backslash_bytes(text: str) -> str:
    """``text`` with every backslash escape undone by the ``unicode_escape`` codec (a
    backslash that starts none kept as it is): ``\\u`` escapes as their characters, ``\\x``
    and octal ones as the Latin-1 characters of their bytes. For the rough view only."""
    plain = _NOT_AN_ESCAPE.sub(r"\1\\\\", text.replace("\\/", "/"))
    return plain.encode("latin-1", "backslashreplace").decode("unicode_escape", "replace")


def _percent_bytes(text: str) -> str:
    """Every ``%XX`` of ``text`` undone (and ``+`` as a space), each byte as the Latin-1
    character of it, at C speed: each ``%`` becomes a ``\\x`` escape that the
    ``unicode_escape`` codec turns into its byte (one not followed by two hex digits into
    U+FFFD). For the rough view only: a literal non-ASCII character of ``text`` comes out
    mangled (the text as it is is the rough view's first part)."""
    marked = text.replace("\\", "\\\\").replace("%", "\\x").replace("+", " ")
    return marked.encode("latin-1", "backslashreplace").decode("unicode_escape", "replace")


def _as_bytes(latin: str, encoding: str) -> str:
    """A codec decoding's Latin-1 characters read as the bytes of ``encoding`` (a character
    no byte stands for, as its escape)."""
    return latin.encode("latin-1", "backslashreplace").decode(encoding, "replace")


def _rough_more(text: str, backslash: str | None, percent: str | None) -> Iterator[str]:
    """The rough view's parts for the families added by red team 20, at C speed: octal
    escapes as UTF-8 bytes, ``%uXXXX``, percent-encoded cp1252, quoted-printable; and CSS
    escapes and MIME words, which only a Python step each undoes, when there are at most
    ``MAX_ESCAPES`` of them (past that, not read: see docs/security-model.md). The doubled
    quotes and the normal family are undone over all parts (``_rough``). ``backslash``
    and ``percent`` are ``text``'s codec decodings (``_backslash_bytes``,
    ``_percent_bytes``), when it holds those signs."""
    if backslash is not None:
        if _OCTAL_HIGH.search(text) is not None:  # octal bytes, the codec read as Latin-1
            yield backslash.encode("latin-1", "replace").decode("utf-8", "guardrails.cp1252")
        if len(_CSS.findall(text, 0, len(text))) <= MAX_ESCAPES:
            yield _CSS.sub(lambda m: _css_char(m.group(1)), text)
    if percent is not None:
        if "%u" in text or "%U" in text:
            marked = text.replace("\\", "\\\\").replace("%u", "\\u").replace("%U", "\\u")
            yield marked.encode("latin-1", "backslashreplace").decode("unicode_escape",
                                                                       "replace")
        yield _as_bytes(percent, "cp1252")
    if "=" in text:
        yield _decoded_bytes(binascii.a2b_qp(
            _QP_NOTHING.sub("", text).encode("utf-8", "surrogatepass")))
        if text.count("=?") <= MAX_ESCAPES:
            yield _MIME.sub(lambda m: _mime_run(m.group(1)), text)


_OCTAL_HIGH = re.compile(r"\\[23][0-7]{2}")


def _html_undone(text: str) -> str:
    """The common HTML character references of ``text`` undone (C-speed replacements): what
    the rough view's codecs decoded may have been HTML-escaped first (a web page's text in
    a JSON string, an HTML-escaped value percent-encoded into a link)."""
    if "&" in text:
        for escaped, char in _ROUGH_HTML:
            text = text.replace(escaped, char)
    return text


class _Recent:
    """What a function made of the last few texts, by the text's identity (each text kept
    alive with it): the scrubber's values and the redact patterns read the same text one
    after the other, and a JSON text's strings once more."""

    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: dict[int, tuple[str, Any]] = {}

    def get(self, text: str) -> Any:
        item = self._items.get(id(text))
        return item[1] if item is not None and item[0] is text else None

    def put(self, text: str, value: Any) -> None:
        if len(self._items) >= 8:
            self._items.clear()
        self._items[id(text)] = (text, value)


_JSON_FIRST = 2048
"""Characters from which a JSON document is read as JSON before any view is made (a short
one's views cost less than walking what ``json`` made of it)."""

_RECENT_ROUGH = _Recent()
_RECENT_VIEWS = _Recent()
_RECENT_JSON = _Recent()
_NONE = object()
"""What ``_Recent`` holds for a text whose answer is None."""


def may_escape(text: str) -> bool:
    """Whether ``text`` may hold an escape: a backslash, an HTML character reference (an
    ampersand alone, as in "Q&A" or a query string, is none), a percent-encoded character,
    a quoted-printable byte or MIME word, a doubled quote, a line break, a filler or a
    compatibility character (``_FAMILIES``)."""
    return (_costly_escape(text) or _has_quotes(text) or _has_breaks(text)
            or _has_normal(text) or _has_composable(text) or _has_composable_astral(text))


def _costly_escape(text: str) -> bool:
    """Whether ``text`` may hold an escape of a family that C-speed replacements cannot
    undo exactly (all but the quotes and the normal family)."""
    return "\\" in text or ("&" in text and _HTML.search(text) is not None) or (
        "%" in text and _PERCENT.search(text) is not None) or (
        "=" in text and ("=?" in text or _QP.search(text) is not None))


def _plain_forms(text: str) -> list[str]:
    """``text``, and it with its doubled quotes and its normal family undone (one and both),
    at C speed: for a text that holds no other escape, every form a value may take in it
    (``_find_escaped``'s probe of a JSON document's strings)."""
    forms = [text]
    if _has_quotes(text):
        forms.append(_unquoted(text))
    if _has_normal(text) or _has_breaks(text):
        forms += [_normalized(form) for form in forms]
        if _has_quotes(forms[-1]):
            forms.append(_unquoted(forms[-1]))
    if any(_has_composable(f) or _has_composable_astral(f) for f in forms):  # mixed forms
        forms += [unicodedata.normalize("NFC", form) for form in forms]
    return forms


def _unquoted(text: str) -> str:
    """``text`` with its doubled and shell-escaped quotes undone (C-speed replacements)."""
    for escaped in ("'\\''", "'\"'\"'", "''", '""'):
        text = text.replace(escaped, _QUOTE_PAIRS[escaped])
    return text


def _normalized(text: str, *, breaks: bool = True) -> str:
    """``text`` with its line breaks (and the indentation after them; not with ``breaks``
    false) and fillers removed, and its compatibility characters in their ASCII form
    (``textforms.normal``, as provenance reads them)."""
    if breaks and ("\n" in text or "\r" in text):
        text = _BREAKS.sub("", text)
    return normal(text)


def _views(text: str) -> list[_View] | None:
    """``text`` with up to ``_VIEWS`` levels of escapes undone, each level by each family
    (``_FAMILIES``: JSON, ``repr`` and C escapes, HTML character references,
    percent-encoding, CSS escapes, quoted-printable, MIME words, doubled quotes, the normal
    family) of each view before it, as far as it still has escapes of that family: JSON in
    JSON, and a web page's text in a JSON string (``&amp;`` inside ``\\u00fc`` and ``\\/``),
    or an HTML-escaped value percent-encoded into a link (red team 18: every HTML and
    percent view was made of the text itself, so a value escaped by two families went out
    whole), a mail's quoted-printable source in a JSON result. A view whose text
    another view already has is not made twice. None when ``text``, or all views together,
    hold more than ``MAX_ESCAPES`` backslashes, ampersands, percent and plus signs (too many
    to decode one by one: see ``_rough``). When its views would hold more characters than
    ``_VIEW_COPIES`` copies of it (and ``_VIEW_SMALL``), or ``_VIEW_CHARS``, the views of
    one family at a time (``_CappedViews``: the rough view is searched too); so too when a
    view would hold more escapes of a family than the family's bound (``_Family.most``).
    (A view holds no more of those signs than the text it was made of: each escape undone
    is one character, or characters a MIME word's bytes stand for, and the literal text is
    the same.)"""
    found = _RECENT_VIEWS.get(text)
    if found is not None:
        return None if found is _NONE else found
    if _escape_marks(text) > MAX_ESCAPES:
        _RECENT_VIEWS.put(text, _NONE)
        return None
    views: list[_View] = []
    seen = {text}
    level: list[tuple[str, int]] = [(text, -1)]
    chars, allowed = 0, min(_VIEW_CHARS, _VIEW_COPIES * len(text) + _VIEW_SMALL)
    too_many = False
    for _ in range(_VIEWS):
        below: list[tuple[str, int]] = []
        for current, parent in level:
            for family in _FAMILIES:
                if not family.present(current):
                    continue
                view = _view(current, family, parent)
                if view is _TOO_MANY:
                    too_many = True
                    continue
                if not isinstance(view, _View) or view.text in seen:
                    continue
                chars += len(view.text)
                if chars > allowed:
                    # Too many to make: the views of one family at a time (what was made
                    # before views were made of views), searched exactly, and the rough
                    # view for what mixes them (``_CAPPED``).
                    capped = _CappedViews(_family_views(text))
                    _RECENT_VIEWS.put(text, capped)
                    return capped
                seen.add(view.text)
                views.append(view)
                below.append((view.text, len(views) - 1))
        level = below
    if too_many:
        views = _CappedViews(views)
    _RECENT_VIEWS.put(text, views)
    return views


class _CappedViews(list):  # type: ignore[type-arg]
    """The views of a text whose views of views were too many, or whose escapes of a
    family were (see ``_views``): besides them, the rough view is searched, and a value or
    pattern found there replaces the text whole (fail closed)."""

    __slots__ = ()


def _family_views(text: str) -> list[_View]:
    """Up to ``_VIEWS`` levels of JSON and ``repr`` escapes undone, and the text's escapes
    of each other family undone once each: a copy of the text for each."""
    views: list[_View] = []
    current, parent = text, -1
    while "\\" in current and len(views) < _VIEWS:
        view = _view(current, _BACKSLASH_FAMILY, parent)
        if not isinstance(view, _View):
            break
        views.append(view)
        current, parent = view.text, len(views) - 1
    for family in _FAMILIES[1:]:
        if family.present(text):
            view = _view(text, family, -1)
            if isinstance(view, _View):
                views.append(view)
    return views


def _escape_marks(text: str) -> int:
    """The characters of ``text`` that may start an escape (what a view's cost grows with)."""
    return text.count("\\") + text.count("&") + text.count("%") + text.count("+")


_VIEW_COPIES = 12
"""Views of one text, in copies of it (each is searched by every value and pattern): a
text whose escapes make more (a page padded with escapes of each family inside the others
made 37 views) is searched in the rough view instead. Five was the most before views were
made of views; a JSON result holding a web page's text with links makes ten."""

_VIEW_SMALL = 1 << 16
"""Characters of views any text may have besides ``_VIEW_COPIES`` copies: a short text
has every view its escapes make (cheap, and the rough view is coarser)."""

_VIEW_CHARS = 1 << 22
"""Characters of all views of one text together, at most: past them (a megabyte result
whose escapes make more than four views) the rough view decides, so a hostile text costs a
few copies of itself."""


def _json_strings(text: str) -> str | None:
    """The strings of ``text`` (keys and values), joined by newlines, when it is a JSON
    document (a dict or list result as the framework serializes it); else None. ``json``
    undoes its escapes at C speed: a text whose strings hold no value and no pattern match
    and no further escape needs no view worked out."""
    recent = _RECENT_JSON.get(text)
    if recent is not None:
        return None if recent is _NONE else recent
    found: str | None = None
    if len(text) >= _JSON_FIRST and text[:1] in ("{", "[", '"'):
        try:
            # Every pair of every object, a repeated key's earlier values too: ``json``
            # keeps only a key's last value, and a value escaped in the first ``"k"`` of
            # ``{"k": ..., "k": "x"}`` went out whole (red team 18).
            data = json.loads(text, object_pairs_hook=list)
        except Exception:  # not JSON (or too deep to parse): the views decide
            data = _END
        if data is not _END:
            strings: list[str] = []
            stack: list[Any] = [data]
            while stack:
                item = stack.pop()
                kind = type(item)
                if kind is str:
                    strings.append(item)
                elif kind is not list:
                    continue
                elif item and type(item[0]) is tuple:  # an object's (key, value) pairs
                    for key, value in item:
                        strings.append(key)
                        if type(value) is str:
                            strings.append(value)
                        else:
                            stack.append(value)
                else:  # an array
                    stack.extend(item)
            found = "\n".join(strings)
    _RECENT_JSON.put(text, _NONE if found is None else found)
    return found


def _source(views: list[_View], level: int, start: int, end: int) -> tuple[int, int, bool]:
    """Where ``views[level].text[start:end]`` came from in the text the views were made of,
    and whether it holds or touches an escape of some level."""
    touches = False
    while level >= 0:
        view = views[level]
        start, end, near = view.source(start, end)
        touches = touches or near
        level = view.parent
    return start, end, touches


def redact_escaped(text: str, patterns: Sequence[Any],
                   matches: Callable[[str], bool] | None = None, depth: int = 0) -> str:
    """``text`` with what ``patterns`` (compiled RE2) match in its unescaped forms replaced.

    A redact pattern is written for text as it reads, but a text that leaves often carries
    another text escaped: a tool's dict or list result is JSON (``"line1\\nAKIA..."``: after
    ``n`` the ``\\b`` of a key pattern fails; ``password=\\"...\\"``: the quote is a
    backslash), an exception's text holds a ``repr``. Up to ``_VIEWS`` levels of JSON and
    ``repr`` escapes are undone; a match in an unescaped form that holds or touches an
    escape is replaced, in the text as it is, by one ``[REDACTED]`` over the characters it
    came from (the pattern's replacement could not be written back escaped). A match
    touching no escape was in the text itself, where the patterns already applied; so was
    one next to an escape that the pattern also matches there as the text is (a
    replacement the pattern matches again, such as ``://user:[REDACTED:password]@``).
    ``matches`` (all patterns at once) skips a view none of them matches. A JSON document
    is first read as JSON (``_json_strings``, at C speed): when no pattern matches its
    strings, and none matches what their own escapes hide, no view is worked out.
    """
    if not may_escape(text):
        return text

    def any_match(view: str) -> bool:
        if matches is not None:
            return matches(view)
        return any(p.search(view) is not None for p in patterns)

    strings = _json_strings(text)
    if strings is not None and not any_match(strings) and (
            not may_escape(strings) or depth >= _VIEWS
            or redact_escaped(strings, patterns, matches, depth + 1) == strings):
        return text  # JSON whose strings, escapes undone, no pattern matches
    views = _views(text)
    if views is None or isinstance(views, _CappedViews):
        if any_match(_rough(text)):
            return REDACTED
        if views is None:
            return text
    spans: list[tuple[int, int]] = []
    seen = 0
    for level, view in enumerate(views):
        if not any_match(view.text):
            continue
        runs: list[tuple[int, int]] = []
        for pattern in patterns:
            for m in pattern.finditer(view.text):
                start, end = m.span()
                if start == end:  # (a pattern that matches nothing matches everywhere)
                    continue
                if (seen := seen + 1) > _MAX_ESCAPED_MATCHES:
                    return REDACTED  # more matches than are worth mapping: fail closed
                start = _view_escape_start(view.text, start, runs)
                start, end, touches = _source(views, level, start, end)
                if touches and (_ANY_ESCAPE.search(text, start, end) or pattern.search(
                        text[max(0, start - 1):end + 1]) is None):
                    spans.append((start, end))
    return _replaced(text, spans) if spans else text
