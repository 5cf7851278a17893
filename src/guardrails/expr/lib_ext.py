"""List functions (cel-go lists extension names), IBAN validation, look-alike domains.

Bounded cost: the compiler charges a library call by the size of its arguments and of its
result. The few functions whose work grows faster than that refuse large inputs instead
(``domains.distance`` compares names of at most 253 characters, as DNS allows, and
``domains.lookalike`` checks "one edit away" in linear time), so no input makes one call
cost more than a bounded time.
"""

from __future__ import annotations

import datetime
import math
import unicodedata
from collections.abc import Mapping
from typing import Any, Final

from guardrails.expr import stdlib as std
from guardrails.expr.lib_common import guarded, is_list, no_overload, values_in
from guardrails.expr.stdlib import lt
from guardrails.expr.values import (
    INT64_MAX,
    INT64_MIN,
    UINT64_MAX,
    CelError,
    UInt,
    type_names,
)

# --------------------------------------------------------------------------- lists


@guarded("flatten")
def flatten(items: Any, *rest: Any) -> list[Any]:
    """``[1, [2, [3]]].flatten()`` is ``[1, 2, [3]]``; ``flatten(n)`` flattens n levels."""
    if not is_list(items) or len(rest) > 1 or (rest and type(rest[0]) is not int):
        raise no_overload("flatten", items, *rest)
    depth = rest[0] if rest else 1
    if depth < 0:
        raise CelError("flatten: depth must not be negative")
    out: list[Any] = []
    _flatten_into(out, items, depth)
    return out


def _flatten_into(out: list[Any], items: Any, depth: int) -> None:
    for x in items:
        if depth > 0 and is_list(x):
            _flatten_into(out, x, depth - 1)
        else:
            out.append(x)


def _key(value: Any) -> Any:
    """A hashable key with CEL equality: 1, 1u and 1.0 are one key; true is not 1."""
    t = type(value)
    if t is bool:
        return ("bool", value)
    if t is int or t is UInt or t is float:
        if t is float and math.isnan(value):
            return ("nan", object())  # NaN equals nothing, not even itself
        return ("num", value)
    if t is list or t is tuple:
        return ("list", tuple(_key(v) for v in value))
    if isinstance(value, Mapping):
        return ("map", frozenset((_key(k), _key(v)) for k, v in value.items()))
    return (t.__name__, value)


@guarded("distinct")
def distinct(items: Any) -> list[Any]:
    """The list without repeated elements (CEL equality), first occurrences in order."""
    if not is_list(items):
        raise no_overload("distinct", items)
    seen: set[Any] = set()
    out: list[Any] = []
    for x in items:
        k = _key(x)
        if k not in seen:
            seen.add(k)
            out.append(x)
    return out


@guarded("sum")
def sum_(items: Any) -> Any:
    """Sum of a list of ints, uints, doubles or durations (one kind); ``[].sum()`` is 0."""
    if not is_list(items):
        raise no_overload("sum", items)
    if not items:
        return 0
    kind = type(items[0])
    if kind not in (int, UInt, float, datetime.timedelta) or any(
            type(x) is not kind for x in items):
        raise CelError("sum: the list must hold numbers of one kind (int, uint or double) "
                       "or durations")
    if kind is datetime.timedelta:
        total = sum(items, datetime.timedelta())
        return total
    if kind is float:
        return math.fsum(items)
    result = sum(int(x) for x in items)
    if kind is UInt:
        if result > UINT64_MAX:
            raise CelError("unsigned integer overflow")
        return UInt(result)
    if not INT64_MIN <= result <= INT64_MAX:
        raise CelError("integer overflow")
    return result


def _extreme(name: str, items: Any, pick_left: Any) -> Any:
    if not is_list(items):
        raise no_overload(name, items)
    if not items:
        raise CelError(f"{name}: the list is empty")
    best = items[0]
    for x in items[1:]:
        if pick_left(x, best):
            best = x
    return best


@guarded("min")
def min_(items: Any) -> Any:
    """The smallest element (numbers compare across int, uint and double)."""
    return _extreme("min", items, lt)


@guarded("max")
def max_(items: Any) -> Any:
    """The largest element."""
    return _extreme("max", items, lambda x, best: lt(best, x))


# --------------------------------------------------------------------------- IBAN

_IBAN_LENGTHS: Final[Mapping[str, int]] = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22,
    "BH": 22, "BR": 29, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18,
    "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22,
    "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22,
    "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28,
    "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "MC": 27, "MD": 24, "ME": 22,
    "MK": 19, "MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15, "PK": 24, "PL": 28,
    "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "SA": 24, "SC": 31, "SE": 24,
    "SI": 19, "SK": 24, "SM": 27, "ST": 25, "SV": 28, "TL": 23, "TN": 24, "TR": 26,
    "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}
"""IBAN lengths by country (SWIFT IBAN registry); other countries: 15 to 34 characters."""


@guarded("iban.valid")
def iban_valid(value: Any) -> bool:
    """ISO 13616: country letters, two check digits, an alphanumeric account part of the
    country's length, and the whole number mod 97 equal to 1. Spaces (the printed groups
    of four) are ignored; anything else, lower case included, makes it invalid."""
    if type(value) is not str:
        raise no_overload("iban.valid", value)
    s = value.replace(" ", "")
    if not 15 <= len(s) <= 34 or not s.isascii() or not s.isalnum():
        return False
    country, check = s[:2], s[2:4]
    if not (country.isalpha() and country.isupper() and check.isdigit()):
        return False
    rest = s[4:]
    if rest != rest.upper():
        return False
    expected = _IBAN_LENGTHS.get(country)
    if expected is not None and len(s) != expected:
        return False
    digits = "".join(c if c.isdigit() else str(ord(c) - 55) for c in rest + country + check)
    return int(digits) % 97 == 1


# --------------------------------------------------------------------------- domains

_MAX_NAME = 253

# Letters that render like ASCII ones (Unicode confusables, the ones phishing uses), and
# ASCII sequences that read like another letter.
_CONFUSABLE: Final[Mapping[str, str]] = {
    # Cyrillic
    "а": "a", "в": "b", "с": "c", "ԁ": "d", "е": "e", "һ": "h", "і": "i", "ј": "j",
    "к": "k", "ӏ": "l", "м": "m", "п": "n", "о": "o", "р": "p", "ԛ": "q", "г": "r",
    "ѕ": "s", "т": "t", "ц": "u", "ѵ": "v", "ԝ": "w", "х": "x", "у": "y", "ż": "z",
    # Greek
    "α": "a", "β": "b", "ε": "e", "η": "n", "ι": "i", "κ": "k", "ν": "v", "ο": "o",
    "ρ": "p", "τ": "t", "υ": "u", "χ": "x", "γ": "y",
    # Latin look-alikes
    "ı": "i", "ɡ": "g", "ɑ": "a", "ℓ": "l", "ǀ": "l",
    # digits
    "0": "o", "1": "l", "3": "e", "5": "s",
}
_SEQUENCES: Final = (("rn", "m"), ("vv", "w"), ("cl", "d"), ("l", "i"))


def _name(fn: str, value: Any) -> str:
    if type(value) is not str:
        raise no_overload(fn, value)
    name = value.strip().lower().rstrip(".")
    if len(name) > _MAX_NAME:
        raise CelError(f"{fn}: a domain name is at most {_MAX_NAME} characters")
    return name


def skeleton(name: str) -> str:
    """What a name looks like: NFKD without marks, confusable letters folded to ASCII."""
    decomposed = unicodedata.normalize("NFKD", name)
    plain = "".join(c for c in decomposed if not unicodedata.combining(c))
    folded = "".join(_CONFUSABLE.get(c, c) for c in plain)
    for seq, letter in _SEQUENCES:
        folded = folded.replace(seq, letter)
    return folded


def _distance(a: str, b: str) -> int:
    """Damerau-Levenshtein (optimal string alignment): edits, with swaps of neighbours."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        row = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            row[j] = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], prev2[j - 2] + 1)
        prev2, prev = prev, row
    return prev[len(b)]


def _within_one(a: str, b: str) -> bool:
    """``_distance(a, b) <= 1`` in linear time: a list of known names costs its length."""
    if a == b:
        return True
    la, lb = len(a), len(b)
    if abs(la - lb) > 1:
        return False
    i = 0
    while i < min(la, lb) and a[i] == b[i]:
        i += 1
    if la == lb:
        return a[i + 1:] == b[i + 1:] or (
            i + 1 < la and a[i] == b[i + 1] and a[i + 1] == b[i] and a[i + 2:] == b[i + 2:])
    if la < lb:
        return a[i:] == b[i + 1:]
    return a[i + 1:] == b[i:]


@guarded("domains.distance")
def domains_distance(a: Any, b: Any) -> int:
    """Edits (insert, delete, replace, swap two neighbours) between two lower-cased names."""
    return _distance(_name("domains.distance", a), _name("domains.distance", b))


DISTANCE_CELL_COST: Final = 32
"""Cost units of one cell of the edit-distance table (about 160 ns): two names of 253
characters cost 10 ms, which their lengths alone (charged per character) did not show."""


def _distance_cost(a: Any, b: Any, *_: Any) -> int:
    if type(a) is not str or type(b) is not str:
        return 0  # the function refuses them
    return DISTANCE_CELL_COST * len(a) * len(b)


domains_distance.cel_extra_cost = _distance_cost  # type: ignore[attr-defined]


@guarded("domains.lookalike")
def domains_lookalike(name: Any, known: Any) -> bool:
    """True when ``name`` is not one of the ``known`` names (a string or a list) but looks
    like one: the same skeleton (``exаmple.com`` with a Cyrillic а, ``examp1e.com``,
    ``rnicrosoft.com``), or, for names of 6 characters or more, one edit away from one
    (``exmaple.com``, ``examples.com``)."""
    n = _name("domains.lookalike", name)
    names = [known] if type(known) is str else known
    if not is_list(names):
        raise no_overload("domains.lookalike", name, known)
    targets = [_name("domains.lookalike", k) for k in names]
    if n in targets:
        return False
    s = skeleton(n)
    for t in targets:
        st = skeleton(t)
        if s == st:
            return True
        if min(len(n), len(t)) >= 6 and _within_one(s, st):
            return True
    return False


# --------------------------------------------------------------------------- two-variable
# comprehensions: the results of transformMap and transformMapEntry (see parser.expand_two)


@guarded("transformMap")
def pairs_to_map(pairs: Any) -> dict[Any, Any]:
    """The ``[key, value]`` pairs ``transformMap`` collected, as a map."""
    if not is_list(pairs):
        raise no_overload("transformMap", pairs)
    return std.make_map([(p[0], p[1]) for p in pairs])


@guarded("transformMapEntry")
def merge_maps(entries: Any) -> dict[Any, Any]:
    """The one-entry maps ``transformMapEntry`` collected, merged; a key two of them
    give is an error (as cel-go: "insert failed: key already exists")."""
    if not is_list(entries):
        raise no_overload("transformMapEntry", entries)
    merged: list[tuple[Any, Any]] = []
    for entry in entries:
        if not isinstance(entry, Mapping):
            raise CelError(f"transformMapEntry: the expression must give a map, not "
                           f"{type_names((entry,))}")
        merged.extend(entry.items())
    try:
        return std.make_map(merged)
    except CelError as e:
        raise CelError(f"transformMapEntry: insert failed: {e}") from None


# --------------------------------------------------------------------------- costs
# Work their arguments' lengths do not show (``limits.extra_cost``): nested values walked,
# characters of each name in a list. Before, ``distinct`` of one map of 4,000 keys and
# ``flatten(2)`` of 8,000 empty lists were charged one element each (a loop of them took
# 0.2-0.5 s), and ``domains.lookalike`` of 3,000 long names 66 ms in one call.
NESTED_VALUE_COST: Final = 64
"""Cost units of each value ``distinct`` hashes (a map's entries become a frozenset of
tuples: up to a microsecond an entry; in the real loop, with the collector walking the
guard's objects, 8,000 short lists cost 50 ms at 40 units a value)."""
FLATTEN_VALUE_COST: Final = 16
"""Cost units of each value ``flatten`` walks (100-170 ns)."""
NAME_CHAR_COST: Final = 8
"""Cost units of each character ``domains.lookalike`` folds (NFKD, confusables: 100 ns)."""


def _distinct_cost(items: Any, *_: Any) -> int:
    return NESTED_VALUE_COST * values_in(items) if is_list(items) else 0


def _flatten_cost(items: Any, *_: Any) -> int:
    return FLATTEN_VALUE_COST * values_in(items) if is_list(items) else 0


def _lookalike_cost(name: Any, known: Any = None, *_: Any) -> int:
    names = [known] if type(known) is str else known if is_list(known) else []
    chars = sum(len(k) for k in names if type(k) is str)
    return NAME_CHAR_COST * (chars + (len(name) if type(name) is str else 0))


distinct.cel_extra_cost = _distinct_cost  # type: ignore[attr-defined]
flatten.cel_extra_cost = _flatten_cost  # type: ignore[attr-defined]
domains_lookalike.cel_extra_cost = _lookalike_cost  # type: ignore[attr-defined]
