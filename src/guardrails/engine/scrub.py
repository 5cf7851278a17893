"""The one scrubber: removes known values, then redact patterns, from text that leaves.

Used by the engine (rule and error messages, ``explain`` traces), the integration (tool
results, tool exceptions, log records, history) and telemetry (decision-log messages,
where every argument value is blanked, not only the secret ones).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import re2

from guardrails.engine.decision import REDACTED

__all__ = ["MAX_TEXTS", "MIN_SUBSTRING_LENGTH", "Scrubber", "value_texts"]

MAX_TEXTS = 2048
"""Distinct texts a scrubber knows. Past it (a secret argument that is a huge list, every
value of a big call in a decision record) the scrubber is *opaque*: every text it is given
becomes ``[REDACTED]``. Collecting, sorting and matching is linear up to the bound and the
bound fails closed: it can make a message less useful, never let a value out."""

_FEW = 8
"""Up to this many values, ``in`` tests (fast, and most texts hold none) decide whether to
replace; past it, one RE2 pass (``in`` for each would cost values x length)."""

_MAX_READ = 4 * MAX_TEXTS
"""Texts read from the values before giving up (repeats count: a list of a million equal
strings must not be walked to the end to find it holds one text)."""

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
    produce text to scrub. ``redact`` applies the policies' patterns; if it raises, the
    whole text becomes ``[REDACTED]`` (a broken pattern must not let a text out unscrubbed).
    """

    __slots__ = ("_needles", "_opaque", "_pending", "_redact", "_regex", "_texts")

    def __init__(self, values: Iterable[Any] | Callable[[], Iterable[Any]] = (),
                 redact: Callable[[str], str] | None = None) -> None:
        self._redact = redact
        self._pending: Callable[[], Iterable[Any]] | None = None
        self._texts: frozenset[str] = frozenset()
        self._needles: tuple[str, ...] = ()
        self._regex: Any = None
        self._opaque = False
        if callable(values):
            self._pending = values
        else:
            self._set(_texts_of(values))

    def _set(self, texts: frozenset[str] | None) -> None:
        if texts is None or len(texts) > MAX_TEXTS:
            self._opaque = True
            texts = frozenset()
        self._texts = texts
        # Longest first, so a value that contains another is removed whole.
        self._needles = tuple(sorted((t for t in texts if len(t) >= MIN_SUBSTRING_LENGTH),
                                     key=len, reverse=True))

    def _compute(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            try:
                texts = _texts_of(pending())
            except Exception:  # values that cannot be read: fail closed
                texts = None
            self._set(texts)

    @property
    def opaque(self) -> bool:
        """Whether this scrubber knows too many values to scrub by value (see ``MAX_TEXTS``):
        it then replaces every text whole."""
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
        """This scrubber plus ``values``: itself when they add no text (no rebuild, no sort)."""
        self._compute()
        if self._opaque:
            return self
        texts = _texts_of(values)
        if texts is not None and texts <= self._texts:
            return self
        out = Scrubber((), self._redact)
        out._set(None if texts is None else self._texts | texts)
        return out

    def __call__(self, text: str) -> str:
        if self._pending is not None:
            self._compute()
        if self._opaque:
            return REDACTED if text else text
        if text in self._texts:
            return REDACTED
        if len(self._needles) <= _FEW:
            for needle in self._needles:
                if needle in text:
                    text = self._replace(text)
                    break
        elif self._needles:
            text = self._replace(text)  # one linear pass, however many values
        if self._redact is None:
            return text
        try:
            return self._redact(text)
        except Exception:  # a broken pattern must not let the text out unscrubbed
            return REDACTED

    def _replace(self, text: str) -> str:
        if len(self._needles) == 1:
            return text.replace(self._needles[0], REDACTED)
        if self._regex is None:
            # One pass, longest first: a replacement is never rescanned, so it cannot splice
            # a value back together from the marker and its neighbours. RE2, not ``re``:
            # Python's alternation of hundreds of literals costs milliseconds per 100 kB of
            # text; RE2 matches them in one linear pass, leftmost and first-listed first
            # like ``re``.
            self._regex = re2.compile("|".join(map(re2.escape, self._needles)))
        return str(self._regex.sub(REDACTED, text))


def _texts_of(values: Iterable[Any]) -> frozenset[str] | None:
    """Every text form of ``values``, or None when there are more than ``MAX_TEXTS``."""
    out: set[str] = set()
    read = 0
    try:
        for t in itertools.islice((t for v in values for t in value_texts(v)), _MAX_READ + 1):
            out.add(t)
            read += 1
    except RecursionError:  # nested too deeply to walk
        return None
    if len(out) > MAX_TEXTS or read > _MAX_READ:
        return None
    return frozenset(out)


def value_texts(value: Any) -> Iterator[str]:
    """The ways a value can appear in a text (CEL and Python spellings); never ``""``."""
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield from value_texts(k)
            yield from value_texts(v)
        return
    if isinstance(value, list | tuple | set | frozenset):
        for v in value:
            yield from value_texts(v)
        return
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    texts = {str(value)}
    if isinstance(value, float) and value.is_integer():
        texts.add(str(int(value)))
    if isinstance(value, str):
        texts.add(value.strip())
    yield from (t for t in texts if t)
