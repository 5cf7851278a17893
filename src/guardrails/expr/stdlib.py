"""CEL's standard operators and functions over the Python value mapping of ``values.py``.

Every function takes already-evaluated arguments and either returns a CEL value or raises
``CelError``; the compiler wires them into closures. Type tests use ``type(x) is ...``
because ``bool`` is an ``int`` in Python and must never pass for a number. Functions that
build strings or lists charge their length to the evaluation's cost budget, which lives in
``Activation``.
"""

from __future__ import annotations

import base64
import datetime
import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, NoReturn

from guardrails.expr import safe_re
from guardrails.expr.limits import IN_COMPARE_COST, IN_SCAN_COST, METER, SCAN_COST, pattern_charge
from guardrails.expr.values import (
    BOOL,
    BYTES,
    DOUBLE,
    DURATION,
    INT,
    INT64_MAX,
    INT64_MIN,
    LIST,
    MAP,
    NONE,
    NULL_TYPE,
    STRING,
    TIMESTAMP,
    TYPE,
    UINT,
    UINT64_MAX,
    CelError,
    CelType,
    CostLimitExceeded,
    Optional,
    UInt,
    cel_type,
    type_name,
    type_names,
)

UTC: Final = datetime.UTC
_DT: Final = datetime.datetime
_TD: Final = datetime.timedelta
_NONE: Final = type(None)
_NUM: Final = frozenset({int, float, UInt})
NUMBER_TYPES: Final = _NUM
"""The number types (int, double, uint): two of them compare without reading anything."""
_SEQ: Final = frozenset({list, tuple})
_PRIM: Final = frozenset({int, float, UInt, str, bytes, bool, _NONE})
_SAME_EQ: Final = _PRIM | {CelType, _DT, _TD}
_ORDER: Final = {int: 0, UInt: 0, float: 0, str: 1, bytes: 2, bool: 3, _DT: 4, _TD: 5}
# Durations are bounded like cel-go's (Go's time.Duration): int64 nanoseconds.
_MAX_DURATION: Final = _TD(microseconds=INT64_MAX // 1000)
MISSING: Final = object()
FAST_EQ_TYPES: Final = frozenset(_SAME_EQ)
"""Types whose same-type equality is Python's ``==`` (the code generator inlines it)."""
ORDERED_TYPES: Final = frozenset(_ORDER)
"""Types whose same-type ordering is Python's ``<`` (the code generator inlines it)."""
FLAT_EQ_TYPES: Final = FAST_EQ_TYPES - {str, bytes}
"""Types whose equality takes constant time: a comparison of two values the call brings
is charged by ``comparison_cost`` unless both are of one of these types."""
FLAT_ORDERED_TYPES: Final = ORDERED_TYPES - {str, bytes}
"""Types whose ordering takes constant time (see ``FLAT_EQ_TYPES``)."""
COMPARE_CHARS: Final = 64
"""Characters (or bytes) of two texts compared for one cost unit: Python compares them
with ``memcmp``, 1-4 ns for 64."""


class Activation:
    """Per-evaluation state: the bindings, comprehension variable slots and the cost budget."""

    __slots__ = ("budget", "slots", "vars")

    def __init__(self, variables: Mapping[str, Any], slots: int, budget: int) -> None:
        self.vars = variables
        self.slots: list[Any] = [None] * slots
        self.budget = budget


class ErrorValue:
    """An error held as a value in a comprehension accumulator (cel-spec: errors are values)."""

    __slots__ = ("error",)

    def __init__(self, error: CelError) -> None:
        self.error = error


def charge(act: Activation, units: int) -> None:
    act.budget -= units
    if act.budget < 0:
        raise CostLimitExceeded("evaluation cost limit exceeded")


def no_overload(name: str, *args: Any) -> NoReturn:
    raise CelError(f"no matching overload for '{name}' applied to ({type_names(args)})")


# ---------------------------------------------------------------------------- equality


def eq(x: Any, y: Any) -> bool:
    tx = type(x)
    if tx is type(y) and tx in _SAME_EQ:
        return bool(x == y)
    return _eq_slow(x, y)


def _eq_slow(x: Any, y: Any) -> bool:
    tx, ty = type(x), type(y)
    if tx in _NUM and ty in _NUM:
        if tx is float or ty is float:
            return float(x) == float(y)
        return bool(x == y)
    if tx in _PRIM or ty in _PRIM:
        return False
    if tx in _SEQ:
        if ty not in _SEQ or len(x) != len(y):
            return False
        return all(eq(a, b) for a, b in zip(x, y, strict=True))
    if ty in _SEQ:
        return False
    if isinstance(x, Mapping):
        if not isinstance(y, Mapping) or len(x) != len(y):
            return False
        for k, v in x.items():
            w = map_get(y, k)
            if w is MISSING or not eq(v, w):
                return False
        return True
    if isinstance(y, Mapping):
        return False
    if tx is Optional or ty is Optional:
        if tx is not ty:
            return False
        if not x.has_value or not y.has_value:
            return bool(x.has_value == y.has_value)
        return eq(x.value, y.value)
    if cel_type(x) != cel_type(y):
        return False
    return bool(x == y)


def ne(x: Any, y: Any) -> bool:
    return not eq(x, y)


def comparison_cost(x: Any, y: Any) -> int:
    """Cost units of comparing ``x`` with ``y`` (``==``, ``<``...) when neither is a
    constant of the expression: the characters two texts share in length, and every value
    two lists or maps of one size hold (``IN_COMPARE_COST`` each, what ``in`` charges for
    CEL equality). Before, comparisons were free: two 440 kB texts compared in a loop the
    budget allowed took 0.43 s, two lists of 3,000 numbers 0.39 s."""
    tx = type(x)
    if tx is Optional and type(y) is Optional:
        return comparison_cost(x.value, y.value) if x.has_value and y.has_value else 0
    if tx is str or tx is bytes:
        if type(y) is not tx:
            return 0
        return min(len(x), len(y)) // COMPARE_CHARS
    if tx in _SEQ or tx is dict or isinstance(x, Mapping):
        if not (type(y) in _SEQ or type(y) is dict or isinstance(y, Mapping)) or len(x) != len(y):
            return 0  # answered without reading the elements
        return _weight(x)
    return 0


def _weight(value: Any) -> int:
    """What reading every value of ``value`` costs a comparison (see ``comparison_cost``)."""
    units = 0
    stack = [value]
    while stack:
        v = stack.pop()
        t = type(v)
        if t is str or t is bytes:
            units += len(v) // COMPARE_CHARS
        elif t in _SEQ:
            units += IN_COMPARE_COST * len(v)
            stack.extend(v)
        elif t is dict or isinstance(v, Mapping):
            units += 2 * IN_COMPARE_COST * len(v)
            stack.extend(v.values())
        elif t is Optional and v.has_value:
            stack.append(v.value)
    return units


def membership_cost(item: Any, items: Any) -> int:
    """Cost units of ``item in items`` for a list ``items``: each element read
    (``IN_SCAN_COST`` for a string's search, ``IN_COMPARE_COST`` for CEL equality), and
    for a list or map ``item`` every value of it again for each element of its size (what
    the comparison then reads: a list of 3,000 numbers looked for in a list holding one
    such list, in a loop, took 0.39 s at 40 units a look)."""
    if type(item) is str:
        return IN_SCAN_COST * len(items)
    units = IN_COMPARE_COST * len(items)
    t = type(item)
    if t in _SEQ or t is dict or isinstance(item, Mapping):
        n = len(item)
        alike = sum(1 for e in items if (type(e) in _SEQ or type(e) is dict
                                         or isinstance(e, Mapping)) and len(e) == n)
        if alike:
            units += alike * _weight(item)
    elif t is bytes:
        units += sum(len(item) for e in items if type(e) is bytes) // COMPARE_CHARS
    return units


def charged_compare(act: Activation, fn: Callable[[Any, Any], bool], x: Any, y: Any) -> bool:
    """``fn(x, y)`` (a comparison) charged by ``comparison_cost`` first."""
    units = comparison_cost(x, y)
    if units:
        charge(act, units)
    return fn(x, y)


# ---------------------------------------------------------------------------- ordering


def _mixed(name: str, x: Any, y: Any) -> tuple[Any, Any]:
    """Operands of different types: only int/uint/double mix, compared as cel-go does."""
    if type(x) in _NUM and type(y) in _NUM:
        if type(x) is float or type(y) is float:
            # cel-go compares an int with a double as doubles (2**63-1 == 2.0**63).
            return float(x), float(y)
        return x, y
    no_overload(name, x, y)


def lt(x: Any, y: Any) -> bool:
    t = type(x)
    if t is type(y):
        if t in _ORDER:
            return bool(x < y)
        no_overload("_<_", x, y)
    x, y = _mixed("_<_", x, y)
    return bool(x < y)


def le(x: Any, y: Any) -> bool:
    t = type(x)
    if t is type(y):
        if t in _ORDER:
            return bool(x <= y)
        no_overload("_<=_", x, y)
    x, y = _mixed("_<=_", x, y)
    return bool(x <= y)


def gt(x: Any, y: Any) -> bool:
    t = type(x)
    if t is type(y):
        if t in _ORDER:
            return bool(x > y)
        no_overload("_>_", x, y)
    x, y = _mixed("_>_", x, y)
    return bool(x > y)


def ge(x: Any, y: Any) -> bool:
    t = type(x)
    if t is type(y):
        if t in _ORDER:
            return bool(x >= y)
        no_overload("_>=_", x, y)
    x, y = _mixed("_>=_", x, y)
    return bool(x >= y)


# ---------------------------------------------------------------------------- maps, lists


def map_get(m: Mapping[Any, Any], key: Any) -> Any:
    """Look a key up with CEL semantics: numeric keys match by value, bools only bools."""
    tk = type(key)
    if tk is str:
        return m.get(key, MISSING)
    if tk is int or tk is UInt or tk is float:
        if key == 0 or key == 1:
            if m.get(key, MISSING) is MISSING:
                return MISSING  # no key equals it, bool or not: no scan (``lookup_cost``)
            # Python would let True/False stand for 1/0: look for a non-bool key.
            for k in m:
                if type(k) is not bool and type(k) in _NUM and k == key:
                    return m[k]
            return MISSING
        return m.get(key, MISSING)
    if tk is bool:
        if m.get(key, MISSING) is MISSING:
            return MISSING
        for k in m:
            if type(k) is bool and k == key:
                return m[k]
        return MISSING
    raise CelError(f"unsupported key type '{type_name(key)}'")


def lookup_cost(container: Any, key: Any) -> int:
    """Cost units of looking ``key`` up in ``container`` when ``map_get`` may scan its
    keys (a key 0, 1, true or false: Python merges them with each other), ``IN_SCAN_COST``
    a key; 0 otherwise. Before, such lookups were free: ``0 in m`` of a map of 4,000 keys
    in a loop took 0.35 s."""
    tk = type(key)
    scans = tk is bool or ((tk is int or tk is UInt or tk is float) and (key == 0 or key == 1))
    if scans and (type(container) is dict or isinstance(container, Mapping)):
        return IN_SCAN_COST * len(container)
    return 0


def index(container: Any, key: Any) -> Any:
    t = type(container)
    if t is Optional:
        return optional_index(container, key)
    if t is list or t is tuple:
        tk = type(key)
        if tk is int or tk is UInt:
            i = key
        elif tk is float:
            if not key.is_integer():
                raise CelError(f"invalid list index {key}")
            i = int(key)
        else:
            no_overload("_[_]", container, key)
        if 0 <= i < len(container):
            return container[i]
        raise CelError(f"index out of range: {key}")
    if t is dict or is_mapping(container):
        v = map_get(container, key)
        if v is MISSING:
            raise CelError(f"no such key: {key}")
        return v
    no_overload("_[_]", container, key)


_MAPPING_TYPES: set[type] = {dict}
"""Types seen to be ``Mapping``: an ``isinstance`` against the ABC costs a microsecond for
the engine's own mappings (``params`` is a ``mappingproxy``, ``variables`` computes on
demand), and rules select fields of them on every call."""


def is_mapping(value: Any) -> bool:
    t = type(value)
    if t in _MAPPING_TYPES:
        return True
    if isinstance(value, Mapping):
        if len(_MAPPING_TYPES) < 64:
            _MAPPING_TYPES.add(t)
        return True
    return False


def select(operand: Any, field: str) -> Any:
    if is_mapping(operand):
        v = operand.get(field, MISSING)
        if v is MISSING:
            raise CelError(f"no such key: {field}")
        return v
    if type(operand) is Optional:
        return optional_select(operand, field)
    raise CelError(f"type '{type_names((operand,))}' does not support field selection")


def has_field(operand: Any, field: str) -> bool:
    if type(operand) is dict:
        return field in operand
    if is_mapping(operand):
        return operand.get(field, MISSING) is not MISSING
    if type(operand) is Optional:
        return operand.has_value and has_field(operand.value, field)
    raise CelError(f"invalid type for has(): '{type_names((operand,))}'")


# ---------------------------------------------------------------------------- optionals
# cel-go's optional chaining: ``x.?f`` and ``x[?k]`` give optional.none() where plain
# selection would fail for a missing key, and a selection or index on an optional value
# stays optional (``optional.of(m).c.d`` is ``optional.none()`` when ``c`` is missing).


def optional_select(operand: Any, field: str) -> Optional:
    """``operand.?field``."""
    if type(operand) is Optional:
        if not operand.has_value:
            return NONE
        operand = operand.value
    if isinstance(operand, Mapping):
        v = operand.get(field, MISSING)
        return NONE if v is MISSING else Optional(v)
    raise CelError(f"type '{type_names((operand,))}' does not support field selection")


def optional_index(container: Any, key: Any) -> Optional:
    """``container[?key]``: a missing key or an index out of range is optional.none()."""
    if type(container) is Optional:
        if not container.has_value:
            return NONE
        container = container.value
    t = type(container)
    if t is list or t is tuple:
        tk = type(key)
        if tk is float and key.is_integer():
            key = int(key)
        elif tk is not int and tk is not UInt:
            no_overload("_[?_]", container, key)
        return Optional(container[key]) if 0 <= key < len(container) else NONE
    if t is dict or isinstance(container, Mapping):
        v = map_get(container, key)
        return NONE if v is MISSING else Optional(v)
    no_overload("_[?_]", container, key)


def in_(x: Any, container: Any) -> bool:
    t = type(container)
    if t is list or t is tuple:
        if type(x) is str:
            return x in container
        return any(eq(x, e) for e in container)
    if t is dict or is_mapping(container):
        tk = type(x)
        if tk is not str and tk not in _NUM and tk is not bool:
            return False
        return map_get(container, x) is not MISSING
    no_overload("@in", x, container)


def make_map(entries: list[tuple[Any, Any]]) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for k, v in entries:
        tk = type(k)
        if tk is not str and tk is not int and tk is not UInt and tk is not bool:
            raise CelError(f"unsupported key type '{type_names((k,))}'")
        if map_get(out, k) is not MISSING:
            raise CelError(f"Failed with repeated key: {k!r}")
        if k in out:
            # Python merges True with 1 and False with 0; CEL keeps them apart.
            raise CelError("a map cannot mix bool keys with the numeric keys 0 or 1")
        out[k] = v
    return out


def iter_range(value: Any, macro: str) -> Iterable[Any]:
    t = type(value)
    if t is list or t is tuple:
        return value  # type: ignore[no-any-return]
    if t is dict or isinstance(value, Mapping):
        return list(value)
    no_overload(macro, value)


def iter_pairs(value: Any, macro: str) -> list[tuple[Any, Any]]:
    """What a two-variable comprehension iterates: (index, element) of a list, (key,
    value) of a map."""
    t = type(value)
    if t is list or t is tuple:
        return list(enumerate(value))
    if t is dict or isinstance(value, Mapping):
        return list(value.items())
    no_overload(macro, value)


# ---------------------------------------------------------------------------- arithmetic


def _int_result(r: int) -> int:
    if INT64_MIN <= r <= INT64_MAX:
        return r
    raise CelError("integer overflow")


def _uint_result(r: int) -> UInt:
    if 0 <= r <= UINT64_MAX:
        return UInt(r)
    raise CelError("unsigned integer overflow")


def _duration_result(d: datetime.timedelta) -> datetime.timedelta:
    if -_MAX_DURATION <= d <= _MAX_DURATION:
        return d
    raise CelError("duration out of range")


def add(act: Activation, x: Any, y: Any) -> Any:
    t = type(x)
    if t is type(y):
        if t is int:
            r = x + y
            if INT64_MIN <= r <= INT64_MAX:
                return r
            raise CelError("integer overflow")
        if t is float:
            return x + y
        if t is str or t is bytes or t is list or t is tuple:
            charge(act, len(x) + len(y))
            return x + y
        if t is UInt:
            return _uint_result(x + y)
        if t is _TD:
            return _duration_result(x + y)
    elif (t is list or t is tuple) and type(y) in _SEQ:
        charge(act, len(x) + len(y))
        return [*x, *y]
    elif (t is _DT and type(y) is _TD) or (t is _TD and type(y) is _DT):
        try:
            return x + y
        except OverflowError:
            raise CelError("timestamp out of range") from None
    no_overload("_+_", x, y)


def concat(x: Any, y: Any) -> Any:
    """``x + y`` for strings, bytes and lists, without the cost charge (the caller charges)."""
    t = type(x)
    if t is type(y) and (t is str or t is bytes or t is list or t is tuple):
        return x + y
    if (t is list or t is tuple) and type(y) in _SEQ:
        return [*x, *y]
    no_overload("_+_", x, y)


def sub(x: Any, y: Any) -> Any:
    t = type(x)
    if t is type(y):
        if t is int:
            return _int_result(x - y)
        if t is float:
            return x - y
        if t is UInt:
            return _uint_result(x - y)
        if t is _TD:
            return _duration_result(x - y)
        if t is _DT:
            return _duration_result(x - y)
    elif t is _DT and type(y) is _TD:
        try:
            return x - y
        except OverflowError:
            raise CelError("timestamp out of range") from None
    no_overload("_-_", x, y)


def mul(x: Any, y: Any) -> Any:
    t = type(x)
    if t is type(y):
        if t is int:
            return _int_result(x * y)
        if t is float:
            return x * y
        if t is UInt:
            return _uint_result(x * y)
    no_overload("_*_", x, y)


def div(x: Any, y: Any) -> Any:
    t = type(x)
    if t is type(y):
        if t is int or t is UInt:
            if y == 0:
                raise CelError("division by zero")
            q = abs(x) // abs(y)
            if (x < 0) != (y < 0):
                q = -q
            return _int_result(q) if t is int else UInt(q)
        if t is float:
            if y == 0.0:
                if x == 0.0 or math.isnan(x):
                    return math.nan
                neg = (x < 0) != (math.copysign(1.0, y) < 0)
                return -math.inf if neg else math.inf
            return x / y
    no_overload("_/_", x, y)


def mod(x: Any, y: Any) -> Any:
    t = type(x)
    if t is type(y) and (t is int or t is UInt):
        if y == 0:
            raise CelError("modulus by zero")
        r = abs(x) % abs(y)
        if x < 0:
            r = -r
        return r if t is int else UInt(r)
    no_overload("_%_", x, y)


def neg(x: Any) -> Any:
    t = type(x)
    if t is int:
        return _int_result(-x)
    if t is float:
        return -x
    if t is _TD:
        return _duration_result(-x)
    no_overload("-_", x)


def not_(x: Any) -> bool:
    if x is True:
        return False
    if x is False:
        return True
    no_overload("!_", x)


# ---------------------------------------------------------------------------- strings


_REGEX_CACHE: dict[str, Any] = {}
_REGEX_CACHE_MAX: Final = 512


def regex(pattern: str) -> Any:
    """Compile an RE2 pattern, cached; RE2 keeps matching linear in the input."""
    found = _REGEX_CACHE.get(pattern)
    if found is None:
        import re2

        from guardrails.expr.lib_common import RE2_OPTIONS

        try:
            found = re2.compile(pattern, RE2_OPTIONS)
        except Exception as e:
            raise CelError(f"invalid regular expression {pattern!r}: {e}") from None
        if len(_REGEX_CACHE) >= _REGEX_CACHE_MAX:
            _REGEX_CACHE.clear()
        _REGEX_CACHE[pattern] = found
    return found


def regex_tester(compiled: Any, *, translate: bool = True) -> Callable[[str], bool]:
    """A boolean search on a compiled RE2 pattern, about ten times cheaper per call.

    Patterns and inputs ``safe_re`` proves equivalent and bounded run on Python's ``re``.

    google-re2's ``search`` builds a match object through a Python generator (about 3 µs);
    a rule only needs "does it match", which RE2's own ``Match`` answers directly. The
    wrapper's internals are pinned by the dependency range and checked by the tests; if
    they ever change, this falls back to ``search``.
    """
    import re2

    try:
        raw_match = compiled._regexp.Match
        unanchored = re2._Anchor.UNANCHORED
        no_match = (-1, -1)
    except AttributeError:
        return lambda s: compiled.search(s) is not None

    def test(s: str) -> bool:
        try:
            b = s.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates: let the wrapper decide, as before
            return compiled.search(s) is not None
        found: bool = raw_match(unanchored, b, 0, len(b))[0] != no_match
        return found

    translation = python_form(compiled) if translate else None
    if translation is None:
        return test
    python_search, limit = translation

    def test_in_python(s: str) -> bool:
        # Python's re keeps the GIL (RE2 releases it on every match, and threads then
        # trade it on every rule); safe_re proved the same answer within a bounded time.
        if len(s) <= limit and s.isascii():
            return python_search(s) is not None
        return test(s)

    return test_in_python


_TRANSLATIONS: dict[str, tuple[Callable[[str], Any], int] | None] = {}


def python_form(compiled: Any) -> tuple[Callable[[str], Any], int] | None:
    """The Python ``re`` search ``regex_tester`` runs instead of RE2 for ASCII inputs of
    at most the number of characters it gives (``safe_re``: the same answers), or None.
    Generated code runs it in line; proved once per pattern (cached), not once per use."""
    pattern = compiled.pattern
    if pattern in _TRANSLATIONS:
        return _TRANSLATIONS[pattern]
    translation = safe_re.translate(pattern)
    found = None if translation is None else (translation.search, translation.max_input)
    if len(_TRANSLATIONS) >= _REGEX_CACHE_MAX:
        _TRANSLATIONS.clear()
    _TRANSLATIONS[pattern] = found
    return found


def compiled_matches(compiled: Any) -> Callable[[Activation, Any], bool]:
    """``s.matches(<constant pattern>)`` with the pattern compiled once at load time."""
    test = regex_tester(compiled)

    def matches_const(act: Activation, s: Any) -> bool:
        if type(s) is not str:
            no_overload("matches", s, compiled.pattern)
        charge(act, SCAN_COST + len(s))
        return test(s)

    return matches_const


_TESTERS: dict[str, Callable[[str], bool]] = {}


def pattern_tester(pattern: str) -> Callable[[str], bool]:
    """A boolean search for a pattern known only at run time, compiled once and cached.

    Only RE2 (``regex_tester``'s first form): proving a pattern safe for Python's ``re``
    costs up to a millisecond, which pays off for a constant pattern (proved once, at
    load) but not for one a call may bring. Charge ``limits.pattern_charge`` first."""
    found = _TESTERS.get(pattern)
    if found is None:
        found = regex_tester(regex(pattern), translate=False)
        if len(_TESTERS) >= _REGEX_CACHE_MAX:
            _TESTERS.clear()
        _TESTERS[pattern] = found
    return found


def matches(act: Activation, s: Any, pattern: Any) -> bool:
    if type(s) is not str or type(pattern) is not str:
        no_overload("matches", s, pattern)
    charge(act, SCAN_COST + len(s) + pattern_charge(act.vars.get(METER), pattern))
    return pattern_tester(pattern)(s)


def contains(act: Activation, s: Any, sub: Any) -> bool:
    if type(s) is not str or type(sub) is not str:
        no_overload("contains", s, sub)
    charge(act, SCAN_COST + len(s))
    return sub in s


def starts_with(act: Activation, s: Any, prefix: Any) -> bool:
    if type(s) is not str or type(prefix) is not str:
        no_overload("startsWith", s, prefix)
    return s.startswith(prefix)


def ends_with(act: Activation, s: Any, suffix: Any) -> bool:
    if type(s) is not str or type(suffix) is not str:
        no_overload("endsWith", s, suffix)
    return s.endswith(suffix)


def size(act: Activation, x: Any) -> int:
    t = type(x)
    if t is str or t is bytes or t is list or t is tuple or t is dict:
        return len(x)
    if isinstance(x, Mapping):
        return len(x)
    no_overload("size", x)


# ---------------------------------------------------------------------------- conversions

_INT_RE: Final = re.compile(r"[+-]?[0-9]+")
_UINT_RE: Final = re.compile(r"\+?[0-9]+")
_FLOAT_RE: Final = re.compile(
    r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)", re.I
)


def to_int(act: Activation, x: Any) -> int:
    t = type(x)
    if t is int:
        return x  # type: ignore[no-any-return]
    if t is UInt:
        return _int_result(int(x))
    if t is float:
        if math.isnan(x) or not (-(2.0**63) <= x < 2.0**63):
            raise CelError("int conversion: double out of range")
        r = int(x)
        if r == INT64_MIN and x == -(2.0**63):
            # cel-go rejects the boundary itself.
            raise CelError("int conversion: double out of range")
        return r
    if t is str:
        if not _INT_RE.fullmatch(x):
            raise CelError(f"cannot convert string {x!r} to int")
        return _int_result(int(x))
    if t is _DT:
        return int(x.timestamp() // 1)
    no_overload("int", x)


def to_uint(act: Activation, x: Any) -> UInt:
    t = type(x)
    if t is UInt:
        return x  # type: ignore[no-any-return]
    if t is int:
        return _uint_result(x)
    if t is float:
        if math.isnan(x) or not (0.0 <= x < 2.0**64):
            raise CelError("uint conversion: double out of range")
        return UInt(int(x))
    if t is str:
        if not _UINT_RE.fullmatch(x):
            raise CelError(f"cannot convert string {x!r} to uint")
        return _uint_result(int(x))
    no_overload("uint", x)


PLAIN_DECIMAL: Final = '{0}.isascii() and {0}.replace(".", "", 1).isdigit()'
"""``to_double``'s test of a text it reads as a number without its pattern (Python text
over ``{0}``, the text: the generated code's copy of that test)."""


def to_double(act: Activation, x: Any) -> float:
    t = type(x)
    if t is float:
        return x  # type: ignore[no-any-return]
    if t is int or t is UInt:
        return float(x)
    if t is str:
        # Plain decimal text (ASCII digits, at most one point) is what the pattern accepts
        # most often: known a number at half the pattern's cost (generated code tests the
        # same in line: ``PLAIN_DECIMAL``).
        if not (x.isascii() and x.replace(".", "", 1).isdigit()) and not _FLOAT_RE.fullmatch(x):
            raise CelError(f"cannot convert string {x!r} to double")
        return float(x)
    no_overload("double", x)


def format_double(f: float) -> str:
    """Go's ``strconv.FormatFloat(f, 'g', -1, 64)``, which cel-go uses for string(double)."""
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    if f == 0.0:
        return "-0" if math.copysign(1.0, f) < 0 else "0"
    sign = "-" if f < 0 else ""
    # Shortest round-trip digits come from repr.
    r = repr(abs(f))
    m = re.fullmatch(r"([0-9]*)\.?([0-9]*)(?:e([+-][0-9]+))?", r)
    if m is None:  # pragma: no cover - repr always matches
        return sign + r
    ip, fp, e = m.group(1), m.group(2), int(m.group(3) or 0)
    digits = (ip + fp).lstrip("0")
    # decimal exponent of the first significant digit
    lead_zeros = len(ip + fp) - len((ip + fp).lstrip("0"))
    exp = len(ip) - 1 - lead_zeros + e
    digits = digits.rstrip("0") or "0"
    if exp < -4 or exp >= 21:
        frac = digits[1:]
        es = f"{'-' if exp < 0 else '+'}{abs(exp):02d}"
        return f"{sign}{digits[0]}{'.' + frac if frac else ''}e{es}"
    if exp < 0:
        return f"{sign}0.{'0' * (-exp - 1)}{digits}"
    if len(digits) <= exp + 1:
        return sign + digits + "0" * (exp + 1 - len(digits))
    return f"{sign}{digits[: exp + 1]}.{digits[exp + 1 :]}"


def format_timestamp(t: datetime.datetime) -> str:
    t = t.astimezone(UTC)
    base = t.strftime("%Y-%m-%dT%H:%M:%S")
    if t.year < 1000:
        base = f"{t.year:04d}" + base[base.index("-") :]
    if t.microsecond:
        base += ("." + f"{t.microsecond:06d}").rstrip("0")
    return base + "Z"


def format_duration(d: datetime.timedelta) -> str:
    us = d // _TD(microseconds=1)
    sign = "-" if us < 0 else ""
    s, frac = divmod(abs(us), 1_000_000)
    if frac:
        return f"{sign}{s}.{f'{frac:06d}'.rstrip('0')}s"
    return f"{sign}{s}s"


def to_string(act: Activation, x: Any) -> str:
    t = type(x)
    if t is str:
        return x  # type: ignore[no-any-return]
    if t is int or t is UInt:
        return str(int(x))
    if t is bool:
        return "true" if x else "false"
    if t is float:
        return format_double(x)
    if t is bytes:
        try:
            return x.decode("utf-8")  # type: ignore[no-any-return]
        except UnicodeDecodeError:
            raise CelError("invalid UTF-8 in bytes to string conversion") from None
    if t is _DT:
        return format_timestamp(x)
    if t is _TD:
        return format_duration(x)
    if isinstance(getattr(x, "cel_type", None), CelType):
        return str(x)
    no_overload("string", x)


def to_bytes(act: Activation, x: Any) -> bytes:
    t = type(x)
    if t is bytes:
        return x  # type: ignore[no-any-return]
    if t is str:
        return x.encode("utf-8")  # type: ignore[no-any-return]
    no_overload("bytes", x)


_BOOL_STRINGS: Final = {
    "1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True,
    "0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False,
}  # fmt: skip


def to_bool(act: Activation, x: Any) -> bool:
    t = type(x)
    if t is bool:
        return x  # type: ignore[no-any-return]
    if t is str:
        found = _BOOL_STRINGS.get(x)
        if found is None:
            raise CelError(f"cannot convert string {x!r} to bool")
        return found
    no_overload("bool", x)


def dyn(act: Activation, x: Any) -> Any:
    return x


PARAM_TYPES: Final[Mapping[str, str]] = {
    "bool": "bool", "int": "int", "uint": "uint", "double": "double", "string": "string",
    "bytes": "bytes", "list": "list", "map": "map", "timestamp": "google.protobuf.Timestamp",
    "duration": "google.protobuf.Duration",
}
"""Declared parameter types of library functions (``kind: Library``) and the CEL type name
a value of that type has (``any``: no check)."""


def type_word(name: str) -> str:
    """``google.protobuf.Timestamp`` as a parameter type is written ``timestamp``."""
    return {v: k for k, v in PARAM_TYPES.items()}.get(name, name)


def check_arg(act: Activation, value: Any, expected: Any, function: Any, param: Any) -> Any:
    """``cel.@arg``: the argument of an inlined library function call (``expr.inline``),
    when it has the parameter's declared type; else the error names function and
    parameter. A standard function rather than a library one: it does constant work, and
    library calls are charged by the size of their arguments."""
    try:
        actual = cel_type(value).name
    except CelError:
        actual = type(value).__name__
    if actual != expected:
        raise CelError(f"{function}: argument '{param}' must be {type_word(str(expected))}, "
                       f"got {type_word(actual)}")
    return value


TYPE_OF: Final[Mapping[type, CelType]] = {
    bool: BOOL, int: INT, UInt: UINT, float: DOUBLE, str: STRING, bytes: BYTES, _NONE: NULL_TYPE,
    list: LIST, tuple: LIST, dict: MAP, CelType: TYPE, _DT: TIMESTAMP, _TD: DURATION,
}  # fmt: skip


def type_of(act: Activation, x: Any) -> CelType:
    found = TYPE_OF.get(type(x))
    return found if found is not None else cel_type(x)


# ---------------------------------------------------------------------------- time

_TS_RE: Final = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))"
)
_DUR_RE: Final = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")
_DUR_UNITS: Final = {
    "ns": 1e-3, "us": 1, "µs": 1, "μs": 1, "ms": 1000, "s": 1_000_000, "m": 60_000_000,
    "h": 3_600_000_000,
}  # fmt: skip
_TS_MIN: Final = _DT(1, 1, 1, tzinfo=UTC)
_TS_MAX: Final = _DT(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)


def parse_timestamp(s: str) -> datetime.datetime:
    m = _TS_RE.fullmatch(s)
    if m is None:
        raise CelError(f"cannot parse timestamp {s!r}")
    y, mo, d, h, mi, sec = (int(m.group(i)) for i in range(1, 7))
    frac = (m.group(7) or "").ljust(6, "0")[:6]
    try:
        t = _DT(y, mo, d, h, mi, sec, int(frac), tzinfo=UTC)
        if m.group(9):
            off = _TD(hours=int(m.group(10)), minutes=int(m.group(11)))
            t = t - off if m.group(9) == "+" else t + off
    except (ValueError, OverflowError):
        raise CelError(f"timestamp out of range: {s!r}") from None
    return t


def to_timestamp(act: Activation, x: Any) -> datetime.datetime:
    t = type(x)
    if t is _DT:
        return x  # type: ignore[no-any-return]
    if t is str:
        return parse_timestamp(x)
    if t is int:
        try:
            r = _DT(1970, 1, 1, tzinfo=UTC) + _TD(seconds=x)
        except OverflowError:
            raise CelError("timestamp out of range") from None
        return r
    no_overload("timestamp", x)


def parse_duration(s: str) -> datetime.timedelta:
    """Go's ``time.ParseDuration`` at microsecond precision."""
    body = s
    negative = False
    if body[:1] in ("-", "+"):
        negative = body[0] == "-"
        body = body[1:]
    if body == "0":
        return _TD(0)
    if not body:
        raise CelError(f"invalid duration {s!r}")
    total = 0.0
    pos = 0
    for m in _DUR_RE.finditer(body):
        if m.start() != pos or m.group(1) in ("", "."):
            raise CelError(f"invalid duration {s!r}")
        total += float(m.group(1)) * _DUR_UNITS[m.group(2)]
        pos = m.end()
    if pos != len(body):
        raise CelError(f"invalid duration {s!r}")
    try:
        d = _TD(microseconds=-total if negative else total)
    except OverflowError:
        raise CelError(f"duration out of range: {s!r}") from None
    return _duration_result(d)


def to_duration(act: Activation, x: Any) -> datetime.timedelta:
    t = type(x)
    if t is _TD:
        return x  # type: ignore[no-any-return]
    if t is str:
        return parse_duration(x)
    if t is int:
        return _duration_result(_TD(microseconds=x / 1000))
    no_overload("duration", x)


_OFFSET_RE: Final = re.compile(r"([+-])?(\d{1,2}):(\d{2})")


def _zone(name: Any) -> datetime.tzinfo:
    if type(name) is not str:
        no_overload("timezone", name)
    m = _OFFSET_RE.fullmatch(name)
    if m is not None:
        off = _TD(hours=int(m.group(2)), minutes=int(m.group(3)))
        return datetime.timezone(-off if m.group(1) == "-" else off)
    import zoneinfo

    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise CelError(f"unknown time zone {name!r}") from None


def _local(name: str, t: Any, tz: tuple[Any, ...]) -> datetime.datetime:
    if type(t) is not _DT or len(tz) > 1:
        no_overload(name, t, *tz)
    if tz:
        return t.astimezone(_zone(tz[0]))
    return t.astimezone(UTC)


def _ts_accessor(name: str, get: Callable[[datetime.datetime], int]) -> Callable[..., int]:
    def accessor(act: Activation, t: Any, *tz: Any) -> int:
        return get(_local(name, t, tz))

    return accessor


def _duration_total(d: datetime.timedelta, unit: datetime.timedelta) -> int:
    # Go truncates toward zero.
    us = d // _TD(microseconds=1)
    u = unit // _TD(microseconds=1)
    q = abs(us) // u
    return -q if us < 0 else q


def _time_accessor(
    name: str, get: Callable[[datetime.datetime], int], unit: datetime.timedelta | None
) -> Callable[..., int]:
    def accessor(act: Activation, t: Any, *tz: Any) -> int:
        if type(t) is _TD and unit is not None and not tz:
            return _duration_total(t, unit)
        return get(_local(name, t, tz))

    return accessor


def _milliseconds(act: Activation, t: Any, *tz: Any) -> int:
    if type(t) is _TD and not tz:
        us = t // _TD(microseconds=1)
        q = (abs(us) % 1_000_000) // 1000
        return -q if us < 0 else q
    return _local("getMilliseconds", t, tz).microsecond // 1000


# ---------------------------------------------------------------------------- encoders


def _b64encode(act: Activation, b: Any) -> str:
    if type(b) is not bytes:
        no_overload("base64.encode", b)
    return base64.b64encode(b).decode("ascii")


def _b64decode(act: Activation, s: Any) -> bytes:
    if type(s) is not str:
        no_overload("base64.decode", s)
    padded = s + "=" * (-len(s) % 4)
    try:
        return base64.b64decode(padded, validate=True)
    except ValueError:
        raise CelError("invalid base64 text") from None


# ---------------------------------------------------------------------------- math ext
# The cel-go math extension (ext/math.go): helpful in policies (caps, rounding amounts).


def _extremum(name: str, args: tuple[Any, ...], pick: Callable[[Any, Any], bool]) -> Any:
    if len(args) == 1 and type(args[0]) in _SEQ:
        args = tuple(args[0])
        if not args:
            raise CelError(f"{name}(list) argument must not be empty")
    best = args[0]
    for v in args:
        if type(v) not in _NUM:
            no_overload(name, *args)
    for v in args[1:]:
        if pick(v, best):
            best = v
    return best


def _greatest(act: Activation, first: Any, *rest: Any) -> Any:
    return _extremum("math.greatest", (first, *rest), gt)


def _least(act: Activation, first: Any, *rest: Any) -> Any:
    return _extremum("math.least", (first, *rest), lt)


def _double_fn(name: str, fn: Callable[[float], float]) -> Callable[[Activation, Any], Any]:
    def double_fn(act: Activation, x: Any) -> Any:
        if type(x) is not float:
            no_overload(name, x)
        if math.isnan(x) or math.isinf(x):
            return x
        return fn(x)

    return double_fn


def _round_half_away(x: float) -> float:
    r = math.floor(abs(x) + 0.5)
    return math.copysign(float(r), x)


def _abs(act: Activation, x: Any) -> Any:
    t = type(x)
    if t is int:
        return _int_result(abs(x))
    if t is float or t is UInt:
        return abs(x) if t is float else x
    no_overload("math.abs", x)


def _sign(act: Activation, x: Any) -> Any:
    t = type(x)
    if t is int:
        return (x > 0) - (x < 0)
    if t is UInt:
        return UInt(1 if x else 0)
    if t is float:
        if math.isnan(x):
            return x
        return 1.0 if x > 0 else -1.0 if x < 0 else 0.0
    no_overload("math.sign", x)


def _float_test(name: str, fn: Callable[[float], bool]) -> Callable[[Activation, Any], bool]:
    def test(act: Activation, x: Any) -> bool:
        if type(x) is not float:
            no_overload(name, x)
        return fn(x)

    return test


def _to_int64(v: int) -> int:
    v &= UINT64_MAX
    return v - (1 << 64) if v > INT64_MAX else v


def _bitwise(name: str, fn: Callable[[int, int], int]) -> Callable[[Activation, Any, Any], Any]:
    def bitwise(act: Activation, x: Any, y: Any) -> Any:
        t = type(x)
        if t is type(y) and (t is int or t is UInt):
            r = fn(x, y)
            return r if t is int else UInt(r)
        no_overload(name, x, y)

    return bitwise


def _bit_not(act: Activation, x: Any) -> Any:
    if type(x) is int:
        return ~x
    if type(x) is UInt:
        return UInt(UINT64_MAX ^ x)
    no_overload("math.bitNot", x)


def _shift(name: str, left: bool) -> Callable[[Activation, Any, Any], Any]:
    def shift(act: Activation, x: Any, n: Any) -> Any:
        t = type(x)
        if (t is not int and t is not UInt) or type(n) is not int:
            no_overload(name, x, n)
        if n < 0:
            raise CelError(f"{name}() negative offset: {n}")
        if n >= 64:
            return 0 if t is int else UInt(0)
        unsigned = x & UINT64_MAX
        r = (unsigned << n) & UINT64_MAX if left else unsigned >> n
        return _to_int64(r) if t is int else UInt(r)

    return shift


MATH: Final[Mapping[str, Callable[..., Any]]] = {
    "math.greatest": _greatest,
    "math.least": _least,
    "math.ceil": _double_fn("math.ceil", lambda x: float(math.ceil(x))),
    "math.floor": _double_fn("math.floor", lambda x: float(math.floor(x))),
    "math.round": _double_fn("math.round", _round_half_away),
    "math.trunc": _double_fn("math.trunc", lambda x: float(math.trunc(x))),
    "math.abs": _abs,
    "math.sign": _sign,
    "math.isNaN": _float_test("math.isNaN", math.isnan),
    "math.isInf": _float_test("math.isInf", math.isinf),
    "math.isFinite": _float_test("math.isFinite", math.isfinite),
    "math.bitAnd": _bitwise("math.bitAnd", lambda a, b: a & b),
    "math.bitOr": _bitwise("math.bitOr", lambda a, b: a | b),
    "math.bitXor": _bitwise("math.bitXor", lambda a, b: a ^ b),
    "math.bitNot": _bit_not,
    "math.bitShiftLeft": _shift("math.bitShiftLeft", left=True),
    "math.bitShiftRight": _shift("math.bitShiftRight", left=False),
}


# ---------------------------------------------------------------------------- tables

TYPE_CONSTANTS: Final[Mapping[str, CelType]] = {
    "int": INT,
    "uint": UINT,
    "double": DOUBLE,
    "bool": BOOL,
    "string": STRING,
    "bytes": BYTES,
    "list": LIST,
    "map": MAP,
    "null_type": NULL_TYPE,
    "type": TYPE,
    "google.protobuf.Timestamp": TIMESTAMP,
    "google.protobuf.Duration": DURATION,
    "optional_type": Optional.cel_type,
}

_TS_ACCESSORS: Final[Mapping[str, Callable[..., Any]]] = {
    "getFullYear": _ts_accessor("getFullYear", lambda t: t.year),
    "getMonth": _ts_accessor("getMonth", lambda t: t.month - 1),
    "getDate": _ts_accessor("getDate", lambda t: t.day),
    "getDayOfMonth": _ts_accessor("getDayOfMonth", lambda t: t.day - 1),
    "getDayOfWeek": _ts_accessor("getDayOfWeek", lambda t: (t.weekday() + 1) % 7),
    "getDayOfYear": _ts_accessor("getDayOfYear", lambda t: t.timetuple().tm_yday - 1),
    "getHours": _time_accessor("getHours", lambda t: t.hour, _TD(hours=1)),
    "getMinutes": _time_accessor("getMinutes", lambda t: t.minute, _TD(minutes=1)),
    "getSeconds": _time_accessor("getSeconds", lambda t: t.second, _TD(seconds=1)),
    "getMilliseconds": _milliseconds,
}

# Every stdlib function takes the Activation first (for cost), then its CEL arguments.
GLOBALS: Final[Mapping[str, Callable[..., Any]]] = {
    "size": size,
    "int": to_int,
    "uint": to_uint,
    "double": to_double,
    "string": to_string,
    "bytes": to_bytes,
    "bool": to_bool,
    "dyn": dyn,
    "type": type_of,
    "timestamp": to_timestamp,
    "duration": to_duration,
    "matches": matches,
    "base64.encode": _b64encode,
    "base64.decode": _b64decode,
    "cel.@arg": check_arg,
    **MATH,
}

METHODS: Final[Mapping[str, Callable[..., Any]]] = {
    "size": size,
    "contains": contains,
    "startsWith": starts_with,
    "endsWith": ends_with,
    "matches": matches,
    **_TS_ACCESSORS,
}

# ---------------------------------------------------------------------------- costs
# What each standard function costs beyond the loop or expression around it, as a function
# of its arguments (``cel_extra_cost``, read by ``limits.extra_cost``; both backends charge
# it before the call). Every function of ``GLOBALS`` and ``METHODS`` declares one here, 0
# for the constant-time ones (tests/test_redteam_cost.py holds every function to it).
# Before, no standard function was charged: ``string(bytes(t))`` of a 440 kB text in a
# loop took 45 s, ``double(t)`` 26 s, ``math.greatest(l)`` of 6,000 numbers 5.8 s, a
# ``duration`` of 220,000 units 90 ms in one call, unknown time zones a file lookup each.

PARSE_COST: Final = 200
"""Cost units of parsing or formatting one text (a regex match and a conversion: 1-3 µs),
before the characters it reads."""
ZONE_COST: Final = 2_000
"""Cost units of a time zone named by the call: an unknown name is a file-system lookup
(20-40 µs) every time."""
ELEMENT_COST: Final = 10
"""Cost units of each element a standard function reads in Python (a CEL comparison of
two numbers: about 150 ns)."""


def no_cost(*args: Any) -> int:
    """The cost of a constant-time standard function (none is charged)."""
    return 0


def _text_cost(per: int, other: int = 0) -> Callable[..., int]:
    """A conversion's cost: ``PARSE_COST`` and ``per`` a character for a text, ``other``
    for any other argument."""

    def cost(x: Any, *rest: Any) -> int:
        t = type(x)
        if t is str or t is bytes:
            return PARSE_COST + per * len(x)
        return other

    cost.text_units = (PARSE_COST, per)  # type: ignore[attr-defined]  # generated code's
    return cost


def _string_cost(x: Any) -> int:
    t = type(x)
    if t is bytes:
        return PARSE_COST + len(x)
    if t is float or t is _DT or t is _TD:
        return PARSE_COST
    return 0


def _prefix_cost(s: Any, prefix: Any) -> int:
    """``startsWith``/``endsWith`` compare the prefix's characters (``COMPARE_CHARS``)."""
    t = type(prefix)
    return len(prefix) // COMPARE_CHARS if t is str or t is bytes else 0


def _extremum_cost(first: Any, *rest: Any) -> int:
    if not rest and type(first) in _SEQ:
        return ELEMENT_COST * len(first)
    return ELEMENT_COST * (1 + len(rest))


def _zone_cost(t: Any, *tz: Any) -> int:
    return ZONE_COST if tz else 0


_COSTS: Final[Mapping[Callable[..., Any], Callable[..., int]]] = {
    size: no_cost, dyn: no_cost, type_of: no_cost, check_arg: no_cost, to_bool: no_cost,
    matches: no_cost, contains: no_cost,  # charged where they scan (``SCAN_COST``)
    starts_with: _prefix_cost, ends_with: _prefix_cost,
    to_string: _string_cost, to_bytes: _text_cost(1),
    to_int: _text_cost(4), to_uint: _text_cost(4), to_double: _text_cost(2),
    to_timestamp: _text_cost(1, 40), to_duration: _text_cost(16, 40),
    _b64encode: _text_cost(2), _b64decode: _text_cost(2),
    _greatest: _extremum_cost, _least: _extremum_cost,
    **{fn: _zone_cost for fn in _TS_ACCESSORS.values()},
    **{fn: no_cost for name, fn in MATH.items() if name not in ("math.greatest", "math.least")},
}


def _declare_costs() -> None:
    for fn, cost in _COSTS.items():
        fn.cel_extra_cost = cost  # type: ignore[attr-defined]


_declare_costs()


SIGNATURES: Final[Mapping[str, tuple[str, ...]]] = {
    "cel.@arg": ("cel.@arg(dyn, string, string, string) -> dyn",),
    "size": ("size(string) -> int", "size(bytes) -> int", "size(list) -> int",
             "size(map) -> int", "string.size() -> int", "bytes.size() -> int",
             "list.size() -> int", "map.size() -> int"),
    "int": ("int(dyn) -> int",),
    "uint": ("uint(dyn) -> uint",),
    "double": ("double(dyn) -> double",),
    "string": ("string(dyn) -> string",),
    "bytes": ("bytes(dyn) -> bytes",),
    "bool": ("bool(dyn) -> bool",),
    "dyn": ("dyn(dyn) -> dyn",),
    "type": ("type(dyn) -> type",),
    "timestamp": ("timestamp(string) -> timestamp", "timestamp(int) -> timestamp",
                  "timestamp(timestamp) -> timestamp"),
    "duration": ("duration(string) -> duration", "duration(duration) -> duration"),
    "matches": ("matches(string, string) -> bool", "string.matches(string) -> bool"),
    "contains": ("string.contains(string) -> bool",),
    "startsWith": ("string.startsWith(string) -> bool",),
    "endsWith": ("string.endsWith(string) -> bool",),
    "base64.encode": ("base64.encode(bytes) -> string",),
    "base64.decode": ("base64.decode(string) -> bytes",),
    **{f"math.{n}": (f"math.{n}(double) -> double",)
       for n in ("ceil", "floor", "round", "trunc")},
    **{f"math.{n}": (f"math.{n}(double) -> bool",) for n in ("isNaN", "isInf", "isFinite")},
    **{n: (f"timestamp.{n}() -> int", f"timestamp.{n}(string) -> int")
       for n in ("getFullYear", "getMonth", "getDate", "getDayOfMonth", "getDayOfWeek",
                 "getDayOfYear")},
    **{n: (f"timestamp.{n}() -> int", f"timestamp.{n}(string) -> int",
           f"duration.{n}() -> int")
       for n in ("getHours", "getMinutes", "getSeconds", "getMilliseconds")},
}
"""The types of the functions above, for the type checker (``guardrails.expr.typechecker``):
``receiver.name(params) -> result`` for a method, ``name(params) -> result`` for a global.
A function without an entry is typed ``dyn`` (never reported); ``dyn`` parameters accept
anything."""


# Pure functions whose constant calls may be folded at compile time.
FOLDABLE: Final = frozenset(
    {"size", "int", "uint", "double", "string", "bytes", "bool", "dyn", "type", "duration",
     "timestamp", "contains", "startsWith", "endsWith", "matches"}
)  # fmt: skip

__all__ = [
    "FAST_EQ_TYPES",
    "GLOBALS",
    "METHODS",
    "MISSING",
    "ORDERED_TYPES",
    "SIGNATURES",
    "TYPE_CONSTANTS",
    "Activation",
    "ErrorValue",
    "add",
    "charge",
    "concat",
    "div",
    "eq",
    "ge",
    "gt",
    "has_field",
    "in_",
    "index",
    "iter_range",
    "le",
    "lt",
    "make_map",
    "map_get",
    "mod",
    "mul",
    "ne",
    "neg",
    "no_overload",
    "not_",
    "select",
    "sub",
]
