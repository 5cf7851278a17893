"""Helpers shared by the expression library modules (``lib_*.py``).

The library promises the compiler one thing above all: a call either returns a CEL value
or raises ``CelError``. ``guarded`` turns arity mistakes and any stray Python exception
into ``CelError`` so that promise does not depend on every code path being perfect.
"""

from __future__ import annotations

import datetime
import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import re2

from guardrails.expr.values import CelError, Optional, UInt, type_names

F = TypeVar("F", bound=Callable[..., Any])

RE2_OPTIONS = re2.Options()
"""Every policy regex is compiled with these, in expressions and in ``redact`` patterns
(the loader checks those with them): ``log_errors = False`` because an invalid pattern
is reported as a ``CelError`` (or a load error), and RE2's C++ logging would otherwise
write a line to stderr on every evaluation."""
RE2_OPTIONS.log_errors = False
_RE2_OPTIONS = RE2_OPTIONS


def no_overload(name: str, *args: Any) -> CelError:
    return CelError(f"no matching overload for {name}({type_names(args)})")


_MAPPED_ERRORS = (ValueError, IndexError, KeyError, OverflowError, UnicodeError,
                  AttributeError)
"""(Not ``RecursionError``: the stack ran out, an error of the call the backends note in
its meter, ``limits.too_deep``, rather than one of the rule that ``Ignore`` skips.)"""


def library_error(name: str, exc: Exception, args: tuple[Any, ...]) -> Exception:
    """What a failure of library function ``name`` called with ``args`` is to an
    expression (``guarded``): a ``CelError`` as it is; a ``TypeError`` (a wrong number of
    arguments) a CEL "no matching overload"; the other errors Python's own code raises a
    ``CelError`` naming them; anything else (an engine bug) itself, which the backends
    turn into an evaluation error (fail closed)."""
    if isinstance(exc, CelError):
        return exc
    if isinstance(exc, TypeError):
        return no_overload(name, *args)
    if isinstance(exc, _MAPPED_ERRORS):
        return CelError(f"{name}: {type(exc).__name__}: {exc}")
    return exc


def guarded(name: str) -> Callable[[F], F]:
    """Wrap a library function so only ``CelError`` ever leaves it.

    A wrong number of arguments surfaces from Python as ``TypeError``; it is a CEL
    "no matching overload". Any other non-CEL exception is a library bug, but it must
    still fail closed as an evaluation error rather than crash the decision engine.
    Generated code calls the function itself (``cel_guarded``: its name, the function and
    the wrapper, which a wrapper of the wrapper copying its attributes is not) inside its
    own handler of the same errors (``library_error``): one call less.
    """

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any) -> Any:
            try:
                return fn(*args)
            except Exception as exc:
                error = library_error(name, exc, args)
                if error is exc:
                    raise
                raise error from None

        wrapper.cel_guarded = (name, fn, wrapper)  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorate


_RE2_CACHE: dict[str, Any] = {}
_RE2_CACHE_MAX = 512


def _compile_cached(pattern: str) -> Any:
    found = _RE2_CACHE.get(pattern)
    if found is None:
        found = re2.compile(pattern, options=_RE2_OPTIONS)
        if len(_RE2_CACHE) >= _RE2_CACHE_MAX:
            _RE2_CACHE.clear()
        _RE2_CACHE[pattern] = found
    return found


def constant_pattern(fn: Callable[..., Any], pattern: Any) -> bool:
    """Whether ``pattern``, a constant argument of an expression's call to ``fn``, is a
    valid pattern: compiled now (at load), so its calls are charged their scan only (an
    invalid one stays a run-time error, charged like any pattern). ``fn`` may compile a
    form of it (``paths.glob`` compiles the RE2 pattern of a glob)."""
    if type(pattern) is not str:
        return False
    prepare = getattr(fn, "cel_pattern_prepare", None)
    try:
        compile_re2(prepare(pattern) if prepare is not None else pattern)
    except Exception:  # invalid: a run-time error, charged like any pattern
        return False
    return True


def compiles_pattern(index: int,
                     prepare: Callable[[str], str] | None = None) -> Callable[[F], F]:
    """Mark a library function whose argument ``index`` is a pattern it compiles with
    ``compile_re2`` (``prepare(pattern)`` when given): the call site charges
    ``limits.pattern_charge`` of it before the call."""

    def mark(fn: F) -> F:
        fn.cel_pattern = index  # type: ignore[attr-defined]
        fn.cel_pattern_prepare = prepare  # type: ignore[attr-defined]
        return fn

    return mark


def fixed_patterns(*patterns: str) -> Callable[[F], F]:
    """Mark a library function that compiles these patterns of its own when it runs
    (``compile_re2``, cached): a load whose policies call it compiles them then
    (``prepare_patterns``), not the first call that runs it."""

    def mark(fn: F) -> F:
        fn.cel_fixed_patterns = patterns  # type: ignore[attr-defined]
        return fn

    return mark


@dataclass(frozen=True, slots=True)
class InlineForm:
    """What a library function returns for its common arguments, as one Python expression
    generated code runs in line (no call): when every argument has exactly its type in
    ``types`` and ``condition`` holds, the function returns ``expression`` (both Python
    text over ``{0}``, ``{1}``...: the arguments). Anything else calls the function. A
    test compares each form with its function on generated arguments."""

    types: tuple[type, ...]
    condition: str
    expression: str


def inline(*forms: InlineForm) -> Callable[[F], F]:
    """Declare a library function's ``InlineForm``s (one per arity at most)."""

    def mark(fn: F) -> F:
        fn.cel_inline = forms  # type: ignore[attr-defined]
        return fn

    return mark


def inline_form(fn: Callable[..., Any], arity: int) -> InlineForm | None:
    """``fn``'s declared form for ``arity`` arguments (``inline``), if any."""
    for form in getattr(fn, "cel_inline", ()):
        if len(form.types) == arity:
            found: InlineForm = form
            return found
    return None


def prepare_patterns(fn: Callable[..., Any]) -> None:
    """Compile library function ``fn``'s own patterns (``fixed_patterns``), if any."""
    for pattern in getattr(fn, "cel_fixed_patterns", ()):
        compile_re2(pattern)


def re2_message(error: Exception) -> str:
    """RE2's reason for rejecting a pattern (its errors carry bytes or text)."""
    detail = error.args[0] if error.args else error
    return detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail)


def compile_re2(pattern: str) -> Any:
    """Compile (and cache, bounded) an RE2 pattern; an invalid pattern is a ``CelError``."""
    try:
        return _compile_cached(pattern)
    except re2.error as exc:
        raise CelError(f"invalid regular expression {pattern!r}: {re2_message(exc)}") from None
    except UnicodeError:
        raise CelError("invalid regular expression: not valid Unicode") from None


def values_in(value: Any) -> int:
    """How many values ``value`` holds, nested lists and maps included (keys count too):
    the work of a function that walks all of them (``distinct``, ``flatten``, ``format``)."""
    count = 0
    stack = [value]
    while stack:
        v = stack.pop()
        count += 1
        t = type(v)
        if t is list or t is tuple:
            stack.extend(v)
        elif t is dict or isinstance(v, Mapping):
            count += len(v)
            stack.extend(v.values())
        elif t is Optional and v.has_value:
            stack.append(v.value)
    return count


def is_int(x: Any) -> bool:
    return type(x) is int


def is_list(x: Any) -> bool:
    return type(x) is list or type(x) is tuple


def _is_number(x: Any) -> bool:
    t = type(x)
    return t is int or t is float or t is UInt


def cel_equal(a: Any, b: Any) -> bool:
    """CEL equality: numbers by value across int/uint/double, lists and maps deeply,
    values of unrelated types unequal (never an error), ``true != 1``."""
    ta, tb = type(a), type(b)
    if ta is bool or tb is bool:
        return ta is tb and a == b
    if _is_number(a):
        if not _is_number(b):
            return False
        if ta is float and math.isnan(a):
            return False
        return bool(a == b)
    if ta is str or ta is bytes:
        return ta is tb and a == b
    if a is None:
        return b is None
    if ta is list or ta is tuple:
        if not is_list(b) or len(a) != len(b):
            return False
        return all(cel_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping):
        if not isinstance(b, Mapping) or len(a) != len(b):
            return False
        for k, v in a.items():
            found, other = _map_get(b, k)
            if not found or not cel_equal(v, other):
                return False
        return True
    if isinstance(a, datetime.datetime | datetime.timedelta):
        return type(b) is ta and a == b
    if ta is Optional or tb is Optional:
        if ta is not tb:
            return False
        if not a.has_value or not b.has_value:
            return bool(a.has_value == b.has_value)
        return cel_equal(a.value, b.value)
    if _is_number(b) or tb is str or tb is bytes or b is None or is_list(b):
        return False
    if isinstance(b, Mapping):
        return False
    return type(b) is ta and bool(a == b)


def _map_get(m: Mapping[Any, Any], key: Any) -> tuple[bool, Any]:
    """Look a key up in a map with CEL key equality (1, 1u and 1.0 are the same key,
    ``true`` is not 1)."""
    tk = type(key)
    if tk is str or ((tk is int or tk is UInt or tk is float) and key != 0 and key != 1):
        # Python's hashing already agrees with CEL here (1.0 and 1 hash alike; no bool
        # equals a number other than 0 and 1): one lookup, not a scan of every key (two
        # maps of 4,000 int keys compared in 16 million steps).
        if tk is float and math.isnan(key):
            return False, None
        if key in m:
            return True, m[key]
        return False, None
    for k, v in m.items():
        if cel_equal(k, key):
            return True, v
    return False, None
