"""The call's arguments as the guard reads them: its own copy, JSON numbers only, repaired.

The guard evaluates, fingerprints and binds a copy it owns, so nothing a tool or another
middleware holds can change what was checked. Repairs replace only what they touch, so
untouched arguments keep the framework's exact objects (an approval or snapshot over
them is unchanged by the guard's own round trip). Rules read the JSON form of the values
the tool's validation produced (``json_view``); ``same_json`` tells whether two such
forms are equal without Python's ``True == 1 == 1.0``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal
from types import MappingProxyType
from typing import Any

from pydantic import Secret, SecretBytes, SecretStr
from pydantic_core import to_jsonable_python

from guardrails.engine import Decision
from guardrails.engine.evaluate import NODE_COST
from guardrails.expr.limits import Limits

__all__ = ["apply_repairs", "as_mapping", "bounded_view", "json_numbers", "json_view",
           "same_json"]


def as_mapping(arguments: Any) -> dict[str, Any] | None:
    """A fresh dict of the call's arguments, or None when they are not a mapping at all."""
    if arguments is None:
        return {}
    if type(arguments) is dict or isinstance(arguments, Mapping):
        return dict(arguments)
    dump = getattr(arguments, "model_dump", None)
    if callable(dump):
        dumped = dump(exclude_unset=True)
        return dict(dumped) if isinstance(dumped, Mapping) else None
    return None


def json_numbers(value: Any) -> bool:
    """Whether every number in ``value`` is one JSON can express.

    Python's json (the framework's parser) reads NaN and Infinity; JSON has neither, and
    NaN compares false with every limit a rule could set. Recursive on purpose: a value
    nested too deeply (or a cycle) raises RecursionError, a guard error that blocks the call.
    """
    if isinstance(value, float):
        return math.isfinite(value)
    items: Any
    if isinstance(value, Mapping):
        items = value.values()
    elif isinstance(value, list | tuple):
        items = value
    else:
        return True
    for item in items:  # noqa: SIM110 - a loop, not all(): no generator per container
        if type(item) is not str and not json_numbers(item):  # str: the common leaf
            return False
    return True


def apply_repairs(entry: Mapping[str, Any], decision: Decision) -> dict[str, Any]:
    """Entry arguments with only what enforcing repairs touched replaced."""
    arguments = dict(entry)
    for repair in decision.repairs:
        if repair.audit:
            continue
        for name in repair.set:
            if name in decision.arguments:
                arguments[name] = decision.arguments[name]
        for name in repair.unset:
            arguments.pop(name, None)
    return arguments


def json_view(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON form of validated arguments: what rules read.

    pydantic's own conversion (the one the framework uses for approval requests): enums
    become their values, datetimes ISO text, sets and tuples lists, models dicts. A value
    with no JSON form, NaN or an infinity raises, a guard error that blocks the call: a
    rule cannot judge what it cannot read.
    """
    plain = _plain_copy(arguments) if type(arguments) is dict else None
    if type(plain) is dict:
        return plain
    view = to_jsonable_python(dict(arguments), fallback=_mapping)
    if not isinstance(view, dict):  # pragma: no cover - a dict always converts to a dict
        raise TypeError("arguments have no JSON form")
    if not _faithful(arguments, view):
        # Validation makes NaN and infinities of text ("nan", "-inf"), as the framework's
        # JSON parser does of NaN and Infinity: no limit a rule sets can judge them.
        raise ValueError("arguments hold a number JSON cannot express (NaN or Infinity), "
                         "or map keys it cannot tell apart")
    return view


def _faithful(value: Any, view: Any) -> bool:
    """Whether ``view``, the JSON form of ``value``, tells what ``value`` holds: every
    number finite (``json_numbers``), every map with all its keys, none of them a number
    JSON cannot express, and no pydantic secret (its JSON form is a mask).

    JSON keys are text: pydantic's conversion writes a non-text key as text, and two keys
    with one spelling become one, the last value winning. A map of floats validated from
    ``"nan"`` and ``"NaN"`` holds two NaN keys (NaN equals nothing): the rules would read
    one payee, the tool pay both (red team 27). A NaN or infinite key is refused like such
    a value, and so is a ``Decimal`` one (``allow_inf_nan``), which the conversion writes
    as text (``"NaN"``) that a walk of the view cannot tell from a name.

    One walk of ``value`` beside ``view``, as far as the conversion kept the shape (maps,
    lists, tuples, sets); below anything it converted otherwise (a model, a dataclass: field
    names for keys; an enum, a datetime) the view's numbers are checked. Recursive on
    purpose, like ``json_numbers``."""
    kind = type(value)
    if kind is dict:
        if type(view) is not dict or len(view) != len(value):
            return False
        for key in value:
            if type(key) is not str and not _finite(key):
                return False
        pairs: Any = zip(value.values(), view.values(), strict=True)
    elif kind is list or kind is tuple or kind is set or kind is frozenset:
        if type(view) is not list or len(view) != len(value):  # pragma: no cover - kept
            return json_numbers(view)
        pairs = zip(value, view, strict=True)
    elif kind is Decimal or kind is float:
        return _finite(value)
    else:
        seen_kind = type(view)
        if seen_kind is str or seen_kind is int or seen_kind is bool or view is None:
            if isinstance(value, _SECRETS):
                return False  # its JSON form is a mask, not what the tool gets
            return not isinstance(value, Decimal) or value.is_finite()  # (an enum, a date)
        if isinstance(value, Mapping | tuple | list | set | frozenset):  # a subclass
            return _faithful(_exact(value), view)
        return json_numbers(view)  # (a model, a dataclass, a float: its JSON form)
    for item, seen in pairs:
        tv = type(item)
        if tv is str or tv is int or tv is bool or item is None:  # the common leaves
            continue
        if tv is float:
            if not math.isfinite(item):
                return False
            continue
        seen_kind = type(seen)
        if (seen_kind is str or seen_kind is int or seen_kind is bool) and not isinstance(
                item, _CHECKED_LEAVES):
            continue  # a leaf written as text or a whole number (an enum, a date)
        if not _faithful(item, seen):
            return False
    return True


def _exact(value: Any) -> Any:
    """A container subclass (a read-only view, a named tuple) as an exact ``dict`` or
    ``list``, in the order the conversion read it."""
    return dict(value) if isinstance(value, Mapping) else list(value)


_SECRETS = (SecretStr, SecretBytes, Secret)
"""pydantic's secret types: their JSON form is ``"**********"``, the tool gets the value."""
_CHECKED_LEAVES = (Decimal, *_SECRETS)
"""Leaves written as text that ``_faithful`` looks at all the same."""


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, Decimal):
        return value.is_finite()
    return True


def bounded_view(arguments: Mapping[str, Any], limits: Limits) -> dict[str, Any] | None:
    """``json_view`` of validated arguments that hold values JSON has no type for (the
    engine's bounds walk refuses a ``datetime``, a ``Decimal``, a set, a map keyed by
    numbers as not JSON data), or None when they are over the input bounds.

    The framework hands the guard the values its validation produced when the model's
    arguments validated as they were: rules judge their JSON form, as for values the guard
    validated itself (red team 27: such a tool could never run unrepaired). The conversion
    walks everything, so a walk that stops at the bound, charged as the engine charges
    (``NODE_COST`` a value besides its text, no deeper than the depth bound), comes first:
    what is over it is never converted, and the engine's own walk of the view decides."""
    budget = limits.max_input_bytes
    stack: list[tuple[Any, int]] = [(arguments, 0)]
    while stack:
        value, depth = stack.pop()
        budget -= NODE_COST
        kind = type(value)
        if kind is str or kind is bytes:
            budget -= len(value)
        elif isinstance(value, Mapping | list | tuple | set | frozenset):
            if depth >= limits.max_input_depth:
                return None
            budget -= NODE_COST * len(value)
            if budget < 0:
                return None
            if isinstance(value, Mapping):
                for key, item in value.items():
                    stack.append((key, depth + 1))
                    stack.append((item, depth + 1))
            else:
                stack.extend((item, depth + 1) for item in value)
        elif isinstance(value, _SECRETS):
            return None  # its JSON form is a mask: not JSON data, an input error
        elif isinstance(value, Decimal):
            budget -= len(value.as_tuple().digits)  # (its text: "1E+999999" is short)
        elif kind is int:
            budget -= value.bit_length() // 3  # about its digits
        if budget < 0:
            return None
    return json_view(arguments)


_PLAIN_DEPTH = 32
"""Nesting the plain-JSON copy walks; deeper values take pydantic's conversion."""


def _plain_copy(value: Any, depth: int = 0) -> Any:
    """``json_view`` of data that is JSON already (exact ``dict`` with ``str`` keys,
    ``list``, ``str``, ``int``, ``bool``, ``None``, finite ``float``): a copy, which is what
    pydantic's conversion gives for it, without the conversion and the number check (the
    common case: the framework's validation of JSON arguments). None for anything else
    (an enum, a datetime, a model, a tuple, NaN, a deep value): the general path decides."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is float:
        return value if math.isfinite(value) else None
    if depth >= _PLAIN_DEPTH:
        return None
    if kind is dict:
        out = {}
        for k, v in value.items():
            if type(k) is not str:
                return None
            kv = type(v)
            if kv is str or kv is int or kv is bool or v is None:  # scalars without a call
                out[k] = v
                continue
            if kv is float:  # (a repaired amount: the common non-text leaf)
                if not math.isfinite(v):
                    return None
                out[k] = v
                continue
            copied = _plain_copy(v, depth + 1)
            if copied is None:
                return None
            out[k] = copied
        return out
    if kind is list:
        items = []
        for v in value:
            copied = _plain_copy(v, depth + 1)
            if copied is None and v is not None:
                return None
            items.append(copied)
        return items
    return None


def _mapping(value: Any) -> Any:
    if isinstance(value, Mapping):  # the engine's read-only views
        return dict(value)
    raise TypeError(f"{type(value).__name__} has no JSON form")


def same_json(left: Any, right: Any) -> bool:
    """Whether two JSON-like values are the same JSON: ``true``, ``1`` and ``1.0`` differ
    (Python's ``==`` says they are equal), a list and a tuple of the same items do not.

    Recursive on purpose, like ``json_numbers``: a value nested too deeply raises
    RecursionError, a guard error that blocks the call. Exact ``str``, ``dict`` and ``list``
    (what JSON parsing and ``json_view`` produce) are told apart by their type first: the
    ``Mapping`` check is an ABC check, the slow part of comparing plain JSON.
    """
    kind = type(left)
    if kind is str:
        return type(right) is str and left == right
    if kind is dict or (kind is not list and isinstance(left, Mapping)):
        other_kind = type(right)  # a decision's arguments: a read-only view
        if not (other_kind is dict or other_kind is MappingProxyType
                or isinstance(right, Mapping)) or len(left) != len(right):
            return False
        for k, v in left.items():
            if k not in right:
                return False
            other = right[k]
            kv = type(v)
            if kv is str or kv is float or kv is int or kv is bool or v is None:
                # A leaf, without a call: what the last line below says of it.
                if type(other) is not kv or v != other:
                    return False
            elif not same_json(v, other):
                return False
        return True
    if kind is list or isinstance(left, tuple | list):
        return (isinstance(right, list | tuple) and len(left) == len(right)
                and all(same_json(x, y) for x, y in zip(left, right, strict=True)))
    return kind is type(right) and bool(left == right)
