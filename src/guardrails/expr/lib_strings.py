"""String, set, regex and JSON functions: the cel-go strings and sets extensions, the
Kubernetes regex library and ``parseJSON``.

Indexes count code points, as in cel-go (a Python ``str`` index already does).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, Final

from guardrails.expr.lib_common import (
    InlineForm,
    cel_equal,
    compile_re2,
    compiles_pattern,
    guarded,
    inline,
    is_int,
    is_list,
    no_overload,
    values_in,
)
from guardrails.expr.limits import MAX_MATCHES
from guardrails.expr.values import (
    INT64_MAX,
    INT64_MIN,
    NONE,
    CelError,
    CelType,
    MatchBoundExceeded,
    Optional,
    UInt,
    type_names,
)

# --------------------------------------------------------------------------- strings

# Go's unicode.IsSpace, which cel-go's trim uses (strings.TrimSpace). Python's
# str.strip() would also strip U+001C..U+001F, so the set is spelled out.
_GO_SPACE: Final = (
    "\t\n\v\f\r \u0085\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)

_ASCII_LOWER: Final = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_ASCII_UPPER: Final = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


MAX_RESULT_CHARS: Final = 4_000_000
"""Longest string ``replace`` and ``join`` may build: their output can be quadratic in
their inputs (``s.replace('', big)``), so it is bounded before any memory is used."""




MAX_EXPANDED: Final = 16_384
"""Most replacement characters ``regex.replace`` expands in one call (matches times the
replacement's length): a replacement of 5,000 group references would take seconds."""
EXPAND_CHARS: Final = 8
"""Replacement characters expanded per match that weigh as one more match."""


def _too_many_matches(name: str) -> MatchBoundExceeded:
    if name == "regex.replace":
        return MatchBoundExceeded(f"regex.replace: result longer than {MAX_MATCHES} "
                                  "replacements")
    return MatchBoundExceeded(f"{name}: more than {MAX_MATCHES} matches")


def _check_size(name: str, size: int) -> None:
    if size > MAX_RESULT_CHARS:
        raise CelError(f"{name}: result longer than {MAX_RESULT_CHARS} characters")


def _out_of_range(i: int) -> CelError:
    return CelError(f"index out of range: {i}")


@guarded("charAt")
def char_at(s: Any, i: Any) -> str:
    if type(s) is not str or not is_int(i):
        raise no_overload("charAt", s, i)
    if i < 0 or i > len(s):
        raise _out_of_range(i)
    return s[i] if i < len(s) else ""


@guarded("indexOf")
def index_of(s: Any, sub: Any, offset: Any = 0) -> int:
    """Offsets must lie in [0, size(s)], else "index out of range" (the cel-spec
    conformance behaviour; current cel-go returns -1 past the end instead)."""
    if type(s) is not str or type(sub) is not str or not is_int(offset):
        raise no_overload("indexOf", s, sub, offset)
    if offset < 0 or offset > len(s):
        raise _out_of_range(offset)
    return s.find(sub, offset)


@guarded("lastIndexOf")
def last_index_of(s: Any, sub: Any, *rest: Any) -> int:
    if (
        type(s) is not str
        or type(sub) is not str
        or len(rest) > 1
        or (rest and not is_int(rest[0]))
    ):
        raise no_overload("lastIndexOf", s, sub, *rest)
    if not rest:
        if sub == "":
            return len(s)
        return s.rfind(sub)
    offset: int = rest[0]
    if offset < 0 or offset > len(s):
        raise _out_of_range(offset)
    if sub == "":
        return offset
    # offset is the last index at which a match may start.
    return s.rfind(sub, 0, offset + len(sub))


@inline(InlineForm((str,), "{0}.isascii()", "{0}.lower()"))
@guarded("lowerAscii")
def lower_ascii(s: Any) -> str:
    if type(s) is not str:
        raise no_overload("lowerAscii", s)
    # On ASCII text ``lower`` changes exactly A-Z, and is many times faster than the table.
    return s.lower() if s.isascii() else s.translate(_ASCII_LOWER)


@inline(InlineForm((str,), "{0}.isascii()", "{0}.upper()"))
@guarded("upperAscii")
def upper_ascii(s: Any) -> str:
    if type(s) is not str:
        raise no_overload("upperAscii", s)
    return s.upper() if s.isascii() else s.translate(_ASCII_UPPER)


@inline(InlineForm((str, str, str), "len({2}) <= len({1})", "{0}.replace({1}, {2})"))
@guarded("replace")
def replace(s: Any, old: Any, new: Any, *rest: Any) -> str:
    """Go's strings.Replace: n < 0 replaces all, n == 0 none; Python's str.replace
    agrees, including the empty ``old`` (insert between code points)."""
    if (
        type(s) is not str
        or type(old) is not str
        or type(new) is not str
        or len(rest) > 1
        or (rest and not is_int(rest[0]))
    ):
        raise no_overload("replace", s, old, new, *rest)
    n = rest[0] if rest else -1
    if n == 0:
        return s
    if len(new) > len(old):
        count = len(s) + 1 if old == "" else s.count(old)
        if n > 0:
            count = min(count, n)
        _check_size("replace", len(s) + count * (len(new) - len(old)))
    if n < 0:
        return s.replace(old, new)
    return s.replace(old, new, n)


@guarded("split")
def split(s: Any, sep: Any, *rest: Any) -> list[str]:
    """Go's strings.SplitN: n == 0 gives [], n < 0 all parts; an empty separator splits
    into code points (at most n parts, the last holding the rest)."""
    if (
        type(s) is not str
        or type(sep) is not str
        or len(rest) > 1
        or (rest and not is_int(rest[0]))
    ):
        raise no_overload("split", s, sep, *rest)
    n: int = rest[0] if rest else -1
    if n == 0:
        return []
    if sep == "":
        if n < 0 or n >= len(s):
            return list(s)
        return [*s[: n - 1], s[n - 1 :]]
    if n < 0:
        return s.split(sep)
    return s.split(sep, n - 1)


@inline(InlineForm((str, int), "0 <= {1} <= len({0})", "{0}[{1}:]"),
        InlineForm((str, int, int), "0 <= {1} <= {2} <= len({0})", "{0}[{1}:{2}]"))
@guarded("substring")
def substring(s: Any, start: Any, *rest: Any) -> str:
    if type(s) is not str or not is_int(start) or len(rest) > 1 or (rest and not is_int(rest[0])):
        raise no_overload("substring", s, start, *rest)
    size = len(s)
    if not rest:
        if start < 0 or start > size:
            raise _out_of_range(start)
        return s[start:]
    end: int = rest[0]
    if start > end:
        raise CelError(f"invalid substring range. start: {start}, end: {end}")
    if start < 0 or start > size:
        raise _out_of_range(start)
    if end < 0 or end > size:
        raise _out_of_range(end)
    return s[start:end]


@guarded("trim")
def trim(s: Any) -> str:
    if type(s) is not str:
        raise no_overload("trim", s)
    return s.strip(_GO_SPACE)


@guarded("reverse")
def reverse(s: Any) -> Any:
    """Strings (cel-go strings v3) and, as in cel-go's lists extension, lists."""
    if type(s) is str:
        return s[::-1]
    if is_list(s):
        return list(reversed(s))
    raise no_overload("reverse", s)


@guarded("join")
def join(items: Any, *rest: Any) -> str:
    if not is_list(items) or len(rest) > 1 or (rest and type(rest[0]) is not str):
        raise no_overload("join", items, *rest)
    for item in items:
        if type(item) is not str:
            raise CelError(f"join: invalid input: list element of type {type(item).__name__}")
    sep = rest[0] if rest else ""
    if sep and len(items) > 1:
        _check_size("join", len(sep) * (len(items) - 1) + sum(len(x) for x in items))
    return sep.join(items)


_QUOTE: Final = str.maketrans(
    {
        "\a": "\\a",
        "\b": "\\b",
        "\f": "\\f",
        "\n": "\\n",
        "\r": "\\r",
        "\t": "\\t",
        "\v": "\\v",
        "\\": "\\\\",
        '"': '\\"',
    }
)


@guarded("strings.quote")
def quote(s: Any) -> str:
    """cel-go ``strings.quote``: escapes the CEL escape sequences, replaces invalid
    code points (lone surrogates) with U+FFFD, leaves other characters as they are."""
    if type(s) is not str:
        raise no_overload("strings.quote", s)
    if not s.isascii():
        try:
            s.encode("utf-8")
        except UnicodeEncodeError:
            s = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in s)
    return '"' + str(s.translate(_QUOTE)) + '"'


# --------------------------------------------------------------------------- sets


def _check_lists(name: str, a: Any, b: Any) -> None:
    if not is_list(a) or not is_list(b):
        raise no_overload(name, a, b)


def _key(x: Any) -> tuple[Any, ...] | None:
    """A hashable key with CEL equality for scalars (None for lists, maps, NaN, ...):
    Python's numeric equality and hashing already agree across int and float."""
    t = type(x)
    if t is str:
        return ("s", x)
    if t is bool:
        return ("b", x)
    if t is int or t is UInt or (t is float and not math.isnan(x)):
        return ("n", x)
    if t is bytes:
        return ("y", x)
    if x is None:
        return ("z",)
    return None


_RAW: Final = frozenset({str, int, UInt, bytes, type(None)})


def _keys(xs: Any) -> set[Any] | None:
    """The elements as a hash set with CEL equality, or None when one cannot be hashed so.
    Python's equality is CEL's for these types except ``true == 1`` (and ``false == 0``):
    bools are tagged, everything else is its own key."""
    keys: set[Any] = set()
    for x in xs:
        t = type(x)
        if t in _RAW or (t is float and x == x):
            keys.add(x)
        elif t is bool:
            keys.add(("b", x))
        else:
            return None
    return keys


_NUMBERS: Final = frozenset({int, float, UInt})


def _key_sets(a: Any, b: Any) -> tuple[set[Any], set[Any]] | None:
    """Hash sets of two lists with CEL equality, or None when some element cannot be
    hashed so (a list, a map, NaN). Lists of strings only, or of numbers only (the common
    cases), are their own sets: Python's equality is CEL's there, at C speed."""
    kinds = {type(x) for x in a} | {type(x) for x in b}
    if kinds <= {str} or (kinds <= _NUMBERS and (
            float not in kinds or not any(x != x for x in (*a, *b)))):
        return set(a), set(b)
    a_keys, b_keys = _keys(a), _keys(b)
    if a_keys is None or b_keys is None:
        return None
    return a_keys, b_keys


def _contains_all(big: Any, small: Any) -> bool:
    sets = _key_sets(big, small)
    if sets is not None:
        return sets[1] <= sets[0]
    return all(any(cel_equal(y, x) for y in big) for x in small)


@guarded("sets.contains")
def sets_contains(a: Any, b: Any) -> bool:
    """True when every element of ``b`` is (CEL-)equal to some element of ``a``."""
    _check_lists("sets.contains", a, b)
    return _contains_all(a, b)


@guarded("sets.intersects")
def sets_intersects(a: Any, b: Any) -> bool:
    _check_lists("sets.intersects", a, b)
    sets = _key_sets(a, b)
    if sets is not None:
        return not sets[0].isdisjoint(sets[1])
    return any(any(cel_equal(x, y) for y in b) for x in a)


@guarded("sets.equivalent")
def sets_equivalent(a: Any, b: Any) -> bool:
    _check_lists("sets.equivalent", a, b)
    return _contains_all(a, b) and _contains_all(b, a)


PAIR_COST = 150
"""Cost units of comparing one element of a list with one of another (CEL equality of
lists or maps: about 0.8 µs), charged when the ``sets`` functions cannot use a hash set
(some element is a list, a map or NaN) and compare every pair: two lists of 4,000 short
lists took 13 s, which their lengths alone did not show."""


def _pairs_cost(a: Any, b: Any) -> int:
    if not is_list(a) or not is_list(b):
        return 0  # the function refuses them
    if _hashable(a) and _hashable(b):
        return 0
    # Every pair compared, and each comparison reads at most the values of the smaller
    # element: every value of one list, once for each element of the other (a pair of one
    # list of 3,000 numbers each was charged one pair).
    reads = min(len(a) * values_in(b), len(b) * values_in(a))
    return PAIR_COST * len(a) * len(b) + NESTED_READ_COST * reads


NESTED_READ_COST: Final = 40
"""Cost units of each value a pair's comparison reads (``IN_COMPARE_COST``)."""


_HASHABLE: Final = frozenset({str, bool, int, UInt, bytes, type(None)})


def _hashable(xs: Any) -> bool:
    """Whether ``_keys`` can hash every element (a cheap check of their types)."""
    for x in xs:
        t = type(x)
        if t not in _HASHABLE and (t is not float or math.isnan(x)):
            return False
    return True


def _pairs_cost_both_ways(a: Any, b: Any) -> int:
    return 2 * _pairs_cost(a, b)


sets_contains.cel_extra_cost = _pairs_cost  # type: ignore[attr-defined]
sets_intersects.cel_extra_cost = _pairs_cost  # type: ignore[attr-defined]
sets_equivalent.cel_extra_cost = _pairs_cost_both_ways  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- regex


@compiles_pattern(1)
@guarded("find")
def find(s: Any, pattern: Any) -> str:
    """Kubernetes ``find``: the leftmost match of an RE2 pattern, or ""."""
    if type(s) is not str or type(pattern) is not str:
        raise no_overload("find", s, pattern)
    m = compile_re2(pattern).search(s)
    return "" if m is None else str(m.group(0))


@guarded("findAll")
def _find_all_work(s: Any, pattern: Any, *rest: Any) -> tuple[list[str], int]:
    """Kubernetes ``findAll`` (Go's FindAllString): at most ``n`` matches when n >= 0;
    an empty match right after the previous match is dropped, as Go does."""
    if (
        type(s) is not str
        or type(pattern) is not str
        or len(rest) > 1
        or (rest and not is_int(rest[0]))
    ):
        raise no_overload("findAll", s, pattern, *rest)
    n: int = rest[0] if rest else -1
    regex = compile_re2(pattern)
    if n == 0:
        return [], 0
    out: list[str] = []
    prev_end = -1
    seen = 0
    for m in regex.finditer(s):
        seen += 1
        if seen > MAX_MATCHES:
            raise _too_many_matches("findAll")
        start, end = m.span()
        accept = not (start == end and start == prev_end)
        prev_end = end
        if accept:
            out.append(str(m.group(0)))
            if n > 0 and len(out) >= n:
                break
    return out, seen


def _one_group(name: str, regex: Any) -> int:
    """cel-go's extract and extractAll return one capture group's text (or the whole
    match): a pattern with two or more groups is ambiguous, so it is an error."""
    groups: int = regex.groups
    if groups > 1:
        raise CelError(f"{name}: regular expression has more than one capturing group: "
                       f"{regex.pattern!r}")
    return groups


def _go_matches(regex: Any, s: str, name: str) -> Any:
    """Go's FindAll*: non-overlapping matches, skipping an empty match directly after
    the previous match; at most ``MAX_MATCHES`` looked at."""
    prev_end = -1
    for seen, m in enumerate(regex.finditer(s)):
        if seen >= MAX_MATCHES:
            raise _too_many_matches(name)
        start, end = m.span()
        if not (start == end and start == prev_end):
            yield m
        prev_end = end


@compiles_pattern(1)
@guarded("regex.extract")
def regex_extract(s: Any, pattern: Any) -> Optional:
    """cel-go ``regex.extract``: the first match's capture group (the whole match when
    the pattern has no group), or none when nothing matches or the group is empty."""
    if type(s) is not str or type(pattern) is not str:
        raise no_overload("regex.extract", s, pattern)
    regex = compile_re2(pattern)
    groups = _one_group("regex.extract", regex)
    m = regex.search(s)
    if m is None:
        return NONE
    text = m.group(groups)
    return NONE if not text and groups else Optional(str(text or ""))


@guarded("regex.extractAll")
def _regex_extract_all_work(s: Any, pattern: Any) -> tuple[list[str], int]:
    """cel-go ``regex.extractAll``: the capture group (or whole match) of every
    non-overlapping match; matches whose group is empty are left out."""
    if type(s) is not str or type(pattern) is not str:
        raise no_overload("regex.extractAll", s, pattern)
    regex = compile_re2(pattern)
    groups = _one_group("regex.extractAll", regex)
    out: list[str] = []
    seen = 0
    for m in _go_matches(regex, s, "regex.extractAll"):
        seen += 1
        text = m.group(groups)
        if text or not groups:
            out.append(str(text or ""))
    return out, seen


def _expand(replacement: str, m: Any, groups: int) -> str:
    """cel-go's replacement syntax: ``\\N`` (N a digit) is group N, ``\\\\`` a backslash;
    any other backslash, or a group the pattern lacks, is an error."""
    out: list[str] = []
    i = 0
    while i < len(replacement):
        c = replacement[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        if i + 1 >= len(replacement):
            raise CelError(f"regex.replace: invalid replacement string {replacement!r}: "
                           "\\ not allowed at end")
        nxt = replacement[i + 1]
        if "0" <= nxt <= "9":
            n = ord(nxt) - ord("0")
            if n > groups:
                raise CelError(f"regex.replace: replacement string references group {n} "
                               f"but the regular expression has only {groups} group(s)")
            out.append(str(m.group(n) or ""))
        elif nxt == "\\":
            out.append("\\")
        else:
            raise CelError(f"regex.replace: invalid replacement string {replacement!r}: "
                           "\\ must be followed by a digit or \\")
        i += 2
    return "".join(out)


@guarded("regex.replace")
def _regex_replace_work(s: Any, pattern: Any, replacement: Any, *rest: Any) -> tuple[str, int]:
    """cel-go ``regex.replace``: replace every match (the first ``count`` when
    ``count >= 0``) with ``replacement``, where ``\\1`` is capture group 1."""
    if (
        type(s) is not str
        or type(pattern) is not str
        or type(replacement) is not str
        or len(rest) > 1
        or (rest and not is_int(rest[0]))
    ):
        raise no_overload("regex.replace", s, pattern, replacement, *rest)
    count: int = rest[0] if rest else -1
    regex = compile_re2(pattern)
    if count == 0:
        return s, 0
    out: list[str] = []
    size = 0
    last = 0
    done = 0
    for m in _go_matches(regex, s, "regex.replace"):
        if 0 < count <= done:
            break
        done += 1
        if done * (1 + len(replacement)) > MAX_EXPANDED:
            raise MatchBoundExceeded(f"regex.replace: result longer than {MAX_EXPANDED} "
                                     "characters of replacement expanded")
        start, end = m.span()
        piece = _expand(replacement, m, regex.groups)
        size += start - last + len(piece)
        _check_size("regex.replace", size)
        out.append(s[last:start])
        out.append(piece)
        last = end
    out.append(s[last:])
    # Each match expands the replacement character by character (a group reference costs
    # about a microsecond): a long replacement weighs as several matches.
    return "".join(out), done * (1 + len(replacement) // EXPAND_CHARS)


@compiles_pattern(1)
@guarded("findAll")
def find_all(s: Any, pattern: Any, *rest: Any) -> list[str]:
    """Kubernetes ``findAll`` (``_find_all_work``)."""
    return _find_all_work(s, pattern, *rest)[0]


@compiles_pattern(1)
@guarded("regex.extractAll")
def regex_extract_all(s: Any, pattern: Any) -> list[str]:
    """cel-go ``regex.extractAll`` (``_regex_extract_all_work``)."""
    return _regex_extract_all_work(s, pattern)[0]


@compiles_pattern(1)
@guarded("regex.replace")
def regex_replace(s: Any, pattern: Any, replacement: Any, *rest: Any) -> str:
    """cel-go ``regex.replace`` (``_regex_replace_work``)."""
    return _regex_replace_work(s, pattern, replacement, *rest)[0]


# The call sites run the variant that reports its matches' work (``limits.with_work``).
find_all.cel_with_work = _find_all_work  # type: ignore[attr-defined]
regex_extract_all.cel_with_work = _regex_extract_all_work  # type: ignore[attr-defined]
regex_replace.cel_with_work = _regex_replace_work  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- JSON

MAX_JSON_CHARS: Final = 1_000_000
"""Longest text ``parseJSON`` decodes (same bound as a call's serialized arguments)."""
MAX_JSON_DEPTH: Final = 32
"""Deepest nesting of arrays/objects ``parseJSON`` accepts (as ``Limits.max_input_depth``)."""

_STRING_RE: Final = r'"(?:[^"\\]|\\.)*"'


def _reject_constant(name: str) -> Any:
    raise CelError(f"parseJSON: {name} is not valid JSON")


def _parse_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise CelError(f"parseJSON: a number of {len(text)} characters is out of range for a double")
    return value


def _parse_int(text: str) -> int:
    value = int(text)
    if not INT64_MIN <= value <= INT64_MAX:
        raise CelError(f"parseJSON: an integer of {len(text)} digits is out of range for int64")
    return value


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise CelError(f"parseJSON: duplicate key {k!r}")
            seen.add(k)
    return obj


def _check_depth(text: str) -> None:
    """Reject nesting deeper than MAX_JSON_DEPTH before decoding (the decoder recurses)."""
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return
    stripped = compile_re2(_STRING_RE).sub("", text) if '"' in text else text
    depth = 0
    for m in compile_re2(r"[\[\]{}]").finditer(stripped):
        if m.group(0) in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                raise CelError(f"parseJSON: nesting deeper than {MAX_JSON_DEPTH}")
        else:
            depth -= 1


def _has_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        v = stack.pop()
        if type(v) is str:
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif type(v) is list:
            stack.extend(v)
        elif type(v) is dict:
            stack.extend(v.keys())
            stack.extend(v.values())
    return False


_DECODER: Final = json.JSONDecoder(
    object_pairs_hook=_object,
    parse_float=_parse_float,
    parse_int=_parse_int,
    parse_constant=_reject_constant,
)


@guarded("parseJSON")
def parse_json(text: Any) -> Any:
    """Decode JSON text into CEL values.

    Strict so that the value a policy inspects is the value any other JSON parser
    would see: duplicate keys, NaN/Infinity, numbers out of range and lone surrogate
    escapes are errors, not silently resolved one way.
    """
    if type(text) is not str:
        raise no_overload("parseJSON", text)
    if len(text) > MAX_JSON_CHARS:
        raise CelError(f"parseJSON: text longer than {MAX_JSON_CHARS} characters")
    _check_depth(text)
    try:
        value = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise CelError(f"parseJSON: {exc}") from None
    # (A RecursionError is not caught: the depth was checked above, so the stack ran out,
    # which the backends note as an error of the call, ``limits.too_deep``.)
    except ValueError as exc:  # e.g. int() digit limit
        raise CelError(f"parseJSON: {exc}") from None
    if (
        "\\u" in text
        and compile_re2(r"\\u[dD][89a-fA-F]").search(text) is not None
        and _has_surrogate(value)
    ):
        raise CelError("parseJSON: lone UTF-16 surrogate escape")
    return value


# --------------------------------------------------------------------------- format

_FORMAT_VERBS: Final = frozenset("sdfeboxX")


def _format_special(f: float) -> str | None:
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "Infinity" if f > 0 else "-Infinity"
    return None


def _format_error(message: str) -> CelError:
    return CelError(f"error during formatting: {message}")


def _format_s(x: Any) -> str:
    """The ``%s`` clause: CEL values as text, lists and maps recursively (map entries
    sorted by their formatted key), strings inside them unquoted."""
    import datetime

    from guardrails.expr import stdlib  # lazily: stdlib is the compiler's module

    t = type(x)
    if t is str:
        return str(x)
    if t is bool:
        return "true" if x else "false"
    if t is int or t is UInt:
        return str(int(x))
    if t is float:
        return _format_special(x) or stdlib.format_double(x)
    if t is bytes:
        return bytes(x).decode("utf-8", "replace")
    if x is None:
        return "null"
    if is_list(x):
        return "[" + ", ".join(_format_s(v) for v in x) + "]"
    if isinstance(x, Mapping):
        items = sorted((_format_s(k), _format_s(v)) for k, v in x.items())
        return "{" + ", ".join(f"{k}: {v}" for k, v in items) + "}"
    if isinstance(x, datetime.datetime):
        return str(stdlib.format_timestamp(x))
    if isinstance(x, datetime.timedelta):
        return str(stdlib.format_duration(x))
    if isinstance(x, CelType) or isinstance(getattr(x, "cel_type", None), CelType):
        return str(x)
    raise _format_error(
        "string clause can only be used on strings, bools, bytes, ints, doubles, maps, "
        f"lists, types, durations, and timestamps, was given {type_names((x,))}"
    )


def _format_clause(verb: str, precision: int | None, x: Any) -> str:
    t = type(x)
    integer = t is int or t is UInt
    if verb == "s":
        return _format_s(x)
    if verb == "d":
        if integer:
            return str(int(x))
        if t is float and _format_special(x) is not None:
            return str(_format_special(x))
        raise _format_error(
            f"decimal clause can only be used on integers, was given {type_names((x,))}"
        )
    if verb in "fe":
        if t is not float and not integer:
            kind = "fixed-point" if verb == "f" else "scientific"
            raise _format_error(
                f"{kind} clause can only be used on doubles, was given {type_names((x,))}"
            )
        f = float(x)
        special = _format_special(f)
        if special is not None:
            return special
        digits = 6 if precision is None else precision
        return format(f, f".{digits}{verb}")
    if verb == "b":
        if t is bool:
            return "1" if x else "0"
        if integer:
            return format(int(x), "b")
        raise _format_error(
            f"only integers and bools can be formatted as binary, was given {type_names((x,))}"
        )
    if verb == "o":
        if integer:
            return format(int(x), "o")
        raise _format_error(
            f"octal clause can only be used on integers, was given {type_names((x,))}"
        )
    # x / X
    if integer:
        out = format(int(x), "x")
    elif t is str:
        out = x.encode("utf-8", "surrogatepass").hex()
    elif t is bytes:
        out = bytes(x).hex()
    else:
        raise _format_error(
            "only integers, byte buffers, and strings can be formatted as hex, "
            f"was given {type_names((x,))}"
        )
    return out.upper() if verb == "X" else out


@guarded("format")
def format_string(s: Any, args: Any) -> str:
    """cel-go ``s.format(list)`` as cel-spec specifies it: ``%s %d %f %e %b %o %x %X``,
    an optional precision (``%.3f``) for ``f`` and ``e``, ``%%`` for a percent sign."""
    if type(s) is not str or not is_list(args):
        raise no_overload("format", s, args)
    out: list[str] = []
    i, n, arg_index = 0, len(s), 0
    while i < n:
        pct = s.find("%", i)
        if pct < 0:
            out.append(s[i:])
            break
        out.append(s[i:pct])
        j = pct + 1
        if j < n and s[j] == "%":
            out.append("%")
            i = j + 1
            continue
        precision: int | None = None
        if j < n and s[j] == ".":
            k = j + 1
            while k < n and "0" <= s[k] <= "9":
                k += 1
            if k == j + 1 or k - j > 4:
                raise CelError("could not parse formatting clause: invalid precision")
            precision = int(s[j + 1 : k])
            j = k
        if j >= n:
            raise CelError("could not parse formatting clause: unexpected end of string")
        verb = s[j]
        if verb not in _FORMAT_VERBS:
            raise CelError(
                f'could not parse formatting clause: unrecognized formatting clause "{verb}"'
            )
        if arg_index >= len(args):
            raise CelError(f"index {arg_index} out of range")
        out.append(_format_clause(verb, precision, args[arg_index]))
        arg_index += 1
        i = j + 1
    result = "".join(out)
    _check_size("format", len(result))
    return result


# --------------------------------------------------------------------------- costs
FORMAT_VALUE_COST: Final = 60
"""Cost units of each value ``format`` writes out (``%s`` of a nested list or map: up to
a microsecond a value; before, charged one unit a top-level element: 0.5 s in a loop)."""
QUOTE_CHAR_COST: Final = 10
"""Cost units of each character of a non-ASCII text ``strings.quote`` checks one by one."""


def _format_cost(s: Any, args: Any = None, *_: Any) -> int:
    return FORMAT_VALUE_COST * values_in(args) if is_list(args) else 0


def _quote_cost(s: Any, *_: Any) -> int:
    return QUOTE_CHAR_COST * len(s) if type(s) is str and not s.isascii() else 0


format_string.cel_extra_cost = _format_cost  # type: ignore[attr-defined]
quote.cel_extra_cost = _quote_cost  # type: ignore[attr-defined]
