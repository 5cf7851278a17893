"""RE2 patterns that Python's own ``re`` can run with the same result and a proven bound.

google-re2 releases the GIL on every match. One match costs about a microsecond, so two
threads evaluating policies hand the GIL to each other on every regex rule, and two threads
together did less than one alone (0.75x). Python's ``re`` keeps the GIL, but it backtracks:
a pattern such as ``(a+)+$`` takes exponential time. This module translates a pattern into
an equivalent Python pattern only when it is in a small, plainly safe subset, and computes
the longest input for which Python's worst case stays under ``WORK_BUDGET`` steps. Longer
inputs, and anything outside the subset, stay on RE2 (linear time).

Same result, by construction:

- the subset has no flags, no Unicode classes, no POSIX classes, no backreferences
  (RE2 has none) and only ASCII in the pattern; inputs go to ``re`` only when they are
  ASCII, where RE2's ASCII ``\\d \\w \\s \\b`` mean what the translation spells out;
- ``$`` (end of text in RE2) becomes ``\\Z`` (Python's ``$`` also matches before a final
  newline); ``\\z`` becomes ``\\Z``; ``\\s`` becomes ``[\\t\\n\\f\\r ]`` (Python's includes
  ``\\v``); ``\\d``, ``\\w`` become their ASCII classes;
- a rule asks only *whether* the pattern matches somewhere, which does not depend on
  leftmost-first versus other match semantics.

The bound: at one start position, a backtracking matcher explores at most the number of
ways the pattern can match a prefix of the input ("paths": a product over a sequence, a
sum over alternatives, a sum of powers for a repetition), each in at most
(pattern size + input length) steps; a search tries every start position unless the
pattern is anchored at the start. tests/test_expr_regex.py checks the results against RE2
on generated patterns and inputs.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

WORK_BUDGET: Final = 20_000
"""Worst-case steps of Python's matcher allowed for one match (roughly 100 µs)."""
MAX_INPUT: Final = 4096
"""Inputs longer than this always go to RE2."""

_SPECIAL = set("\\.^$|?*+()[]{}")
_CLASS_ESCAPES: Final = {"d": "0-9", "w": "0-9A-Za-z_", "s": "\\t\\n\\f\\r "}
_SHORTHANDS: Final = {
    "d": "[0-9]", "D": "[^0-9]", "w": "[0-9A-Za-z_]", "W": "[^0-9A-Za-z_]",
    "s": "[\\t\\n\\f\\r ]", "S": "[^\\t\\n\\f\\r ]",
}  # fmt: skip
_CONTROL_ESCAPES: Final = {"n": "\\n", "t": "\\t", "r": "\\r", "f": "\\f"}
_PUNCTUATION = set("\\.^$|?*+()[]{}-/")


class _Unsafe(Exception):
    """Outside the subset: the pattern stays on RE2."""


# ---------------------------------------------------------------------------- the tree


@dataclass(frozen=True, slots=True)
class _Atom:
    """One character, class, ``.`` or zero-width assertion (one way to match)."""


@dataclass(frozen=True, slots=True)
class _Assertion:
    """``^``, ``$``, ``\\b``...: zero-width, never repeated in the subset."""


@dataclass(frozen=True, slots=True)
class _Seq:
    items: tuple[_Node, ...]


@dataclass(frozen=True, slots=True)
class _Alt:
    options: tuple[_Node, ...]


@dataclass(frozen=True, slots=True)
class _Repeat:
    item: _Node
    low: int
    high: int | None  # None: unbounded


_Node = _Atom | _Assertion | _Seq | _Alt | _Repeat
_ATOM: Final = _Atom()
_ASSERTION: Final = _Assertion()


class _Parser:
    """Parses the subset and writes the equivalent Python pattern as it goes."""

    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.i = 0
        self.out: list[str] = []
        self.anchored = False

    def peek(self) -> str:
        return self.p[self.i] if self.i < len(self.p) else ""

    def take(self) -> str:
        c = self.peek()
        if not c:
            raise _Unsafe("unexpected end")
        self.i += 1
        return c

    def parse(self) -> _Node:
        node = self.alternation(top=True)
        if self.i != len(self.p):
            raise _Unsafe("unbalanced")
        return node

    def alternation(self, *, top: bool = False) -> _Node:
        options = [self.sequence(top=top)]
        while self.peek() == "|":
            self.take()
            self.out.append("|")
            options.append(self.sequence(top=top))
        if top and len(options) > 1:
            self.anchored = False  # every alternative would need its own anchor
        return options[0] if len(options) == 1 else _Alt(tuple(options))

    def sequence(self, *, top: bool) -> _Node:
        items: list[_Node] = []
        first = True
        while self.peek() not in ("", "|", ")"):
            if top and first and self.peek() == "^":
                self.anchored = True
            first = False
            atom = self.atom()
            items.append(self.quantified(atom))
        return _Seq(tuple(items))

    def quantified(self, node: _Node) -> _Node:
        c = self.peek()
        if c not in ("*", "+", "?", "{"):
            return node
        if isinstance(node, _Assertion):
            raise _Unsafe("repeated assertion")
        if c == "{":
            match = re.match(r"\{([0-9]{1,4})(,([0-9]{0,4}))?\}", self.p[self.i :])
            if match is None:
                raise _Unsafe("brace that is not a repetition")
            self.i += match.end()
            low = int(match.group(1))
            high: int | None = low
            if match.group(2) is not None:
                high = int(match.group(3)) if match.group(3) else None
            self.out.append(match.group(0))
        else:
            self.take()
            self.out.append(c)
            low, high = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
        if self.peek() == "?":  # lazy: the same answer to "does it match"
            self.take()
            self.out.append("?")
        if self.peek() in ("*", "+", "?", "{"):
            raise _Unsafe("stacked quantifiers")
        return _Repeat(node, low, high)

    def atom(self) -> _Node:
        c = self.take()
        if c == "(":
            if self.peek() == "?":
                self.take()
                if self.take() != ":":
                    raise _Unsafe("group flags or names")
                self.out.append("(?:")
            else:
                self.out.append("(")
            node = self.alternation()
            if self.take() != ")":
                raise _Unsafe("unbalanced group")
            self.out.append(")")
            return node
        if c == "[":
            self.char_class()
            return _ATOM
        if c == "\\":
            return self.escape()
        if c == "^":
            self.out.append("^")
            return _ASSERTION
        if c == "$":
            self.out.append("\\Z")
            return _ASSERTION
        if c == ".":
            self.out.append(".")
            return _ATOM
        if c in _SPECIAL or not (" " <= c <= "~"):
            raise _Unsafe(f"character {c!r}")
        self.out.append(c)
        return _ATOM

    def escape(self) -> _Node:
        c = self.take()
        if c in ("b", "A"):  # not \B: Python's never matches an empty input, RE2's does
            self.out.append("\\" + c)
            return _ASSERTION
        if c == "z":
            self.out.append("\\Z")
            return _ASSERTION
        if c in _SHORTHANDS:
            self.out.append(_SHORTHANDS[c])
        elif c in _CONTROL_ESCAPES:
            self.out.append(_CONTROL_ESCAPES[c])
        elif c in _PUNCTUATION:
            self.out.append("\\" + c)
        else:
            raise _Unsafe(f"escape \\{c}")
        return _ATOM

    def char_class(self) -> None:
        parts = ["["]
        if self.peek() == "^":
            self.take()
            parts.append("^")
        count = 0
        previous = ""
        shorthand = dash = False
        while True:
            c = self.take()
            if c == "]" and count > 0:
                break
            if c in ("[", "]") or not (" " <= c <= "~"):
                raise _Unsafe("class member")
            if c in "&~|-" and previous == c:
                raise _Unsafe("doubled class operator")  # Python's set-operation syntax
            if c == "\\":
                e = self.take()
                if e in _CLASS_ESCAPES:
                    parts.append(_CLASS_ESCAPES[e])
                    shorthand = True
                elif e in _CONTROL_ESCAPES:
                    parts.append(_CONTROL_ESCAPES[e])
                elif e in _PUNCTUATION:
                    parts.append("\\" + e)
                else:
                    raise _Unsafe(f"class escape \\{e}")
                previous = ""
            else:
                parts.append("\\" + c if c in "\\^" else c)
                previous = c
                dash = dash or (c == "-" and count > 0 and self.peek() != "]")
            count += 1
        if shorthand and dash:
            raise _Unsafe("range next to a class shorthand")
        parts.append("]")
        self.out.append("".join(parts))


# ---------------------------------------------------------------------------- the bound


def _paths(node: _Node, n: int, *, last: bool = False) -> int:
    """Most ways ``node`` can match a prefix of an input of length ``n``; ``last`` when
    nothing follows it in the pattern (then a repetition of one character never backtracks:
    once it has its minimum the match is found, and fewer repetitions cannot help)."""
    if isinstance(node, _Atom | _Assertion):
        return 1
    if isinstance(node, _Seq):
        total = 1
        for i, item in enumerate(node.items):
            total *= _paths(item, n, last=last and i == len(node.items) - 1)
            if total > WORK_BUDGET:
                return WORK_BUDGET + 1
        return total
    if isinstance(node, _Alt):
        return min(sum(_paths(o, n, last=last) for o in node.options), WORK_BUDGET + 1)
    inner = _paths(node.item, n)
    if last and isinstance(node.item, _Atom):
        return 1
    high = n if node.high is None else min(node.high, n)
    if high < node.low:
        return 1  # cannot match: fails after at most ``low`` steps
    if inner == 1:
        return high - node.low + 1
    total = 0
    for k in range(node.low, high + 1):
        total += inner**k
        if total > WORK_BUDGET:
            return WORK_BUDGET + 1
    return total


def _longest(node: _Node) -> int | None:
    """The most characters ``node`` can match (None: unbounded)."""
    if isinstance(node, _Atom):
        return 1
    if isinstance(node, _Assertion):
        return 0
    if isinstance(node, _Seq | _Alt):
        parts = [_longest(i) for i in (node.items if isinstance(node, _Seq) else node.options)]
        if any(p is None for p in parts):
            return None
        found = [p for p in parts if p is not None]
        return sum(found) if isinstance(node, _Seq) else max(found, default=0)
    inner = _longest(node.item)
    if node.high is None or inner is None:
        return None if inner != 0 else 0
    return inner * node.high


def _size(node: _Node) -> int:
    if isinstance(node, _Atom | _Assertion):
        return 1
    if isinstance(node, _Seq):
        return sum(_size(i) for i in node.items) + 1
    if isinstance(node, _Alt):
        return sum(_size(o) for o in node.options) + 1
    return _size(node.item) + 1


def _work(node: _Node, anchored: bool, n: int) -> int:
    """Worst-case steps of a backtracking search: for each start position, every way the
    pattern can match, each in at most (pattern size + the longest match) steps."""
    starts = 1 if anchored else n + 1
    longest = _longest(node)
    reach = n if longest is None else min(longest, n)
    return starts * _paths(node, n, last=True) * (_size(node) + reach) + n


def _longest_safe_input(node: _Node, anchored: bool) -> int:
    """The longest input whose worst case is within ``WORK_BUDGET`` (work grows with n)."""
    if _work(node, anchored, 0) > WORK_BUDGET:
        return -1
    low, high = 0, MAX_INPUT
    while low < high:
        mid = (low + high + 1) // 2
        if _work(node, anchored, mid) <= WORK_BUDGET:
            low = mid
        else:
            high = mid - 1
    return low


@dataclass(frozen=True, slots=True)
class Translation:
    """A Python pattern equivalent to the RE2 one on ASCII inputs up to ``max_input``."""

    python: str
    max_input: int
    search: Callable[[str], re.Match[str] | None]


def translate(pattern: str) -> Translation | None:
    """The equivalent Python pattern and its safe input length, or None (stay on RE2)."""
    if not pattern.isascii() or len(pattern) > 200:
        return None
    parser = _Parser(pattern)
    try:
        node = parser.parse()
    except (_Unsafe, RecursionError):
        return None
    limit = _longest_safe_input(node, parser.anchored)
    if limit < 1:
        return None
    python = "".join(parser.out)
    try:
        compiled = re.compile(python, re.ASCII)
    except (re.error, RecursionError, OverflowError):
        return None
    return Translation(python, limit, compiled.search)


__all__ = ["MAX_INPUT", "WORK_BUDGET", "Translation", "translate"]
