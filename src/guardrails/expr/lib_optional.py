"""Optional values (cel-go's optional library): ``optional.of``, ``optional.none``,
``optional.ofNonZeroValue``, ``hasValue``, ``value``, ``orValue``, ``or``, and the runtime
of the optional syntax the parser desugars (``x.?f``, ``x[?k]``, ``[?e]``, ``{?k: v}``,
``optMap``, ``optFlatMap``).

The syntax arrives as calls in the ``optional`` namespace whose names start with ``@``
(``optional.@select``): a user cannot write those names, and every backend resolves and
calls them like any other library function, so no backend needs to know about optionals.
"""

from __future__ import annotations

import datetime
from typing import Any

from guardrails.expr import stdlib as std
from guardrails.expr.lib_common import guarded, no_overload
from guardrails.expr.values import NONE, CelError, Optional, UInt


@guarded("optional.of")
def of(value: Any) -> Optional:
    return Optional(value)


@guarded("optional.none")
def none() -> Optional:
    return NONE


def _is_zero(value: Any) -> bool:
    t = type(value)
    if value is None:
        return True
    if t is bool:
        return value is False
    if t is int or t is UInt or t is float:
        return bool(value == 0)
    if t is str or t is bytes or t is list or t is tuple or t is dict:
        return len(value) == 0
    if t is datetime.timedelta:
        return bool(value == datetime.timedelta(0))
    if t is datetime.datetime:
        return bool(value == datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC))
    if t is Optional:
        return not value.has_value
    return False


@guarded("optional.ofNonZeroValue")
def of_non_zero_value(value: Any) -> Optional:
    """optional.none() for the zero value of its type (null, false, 0, "", [], {}, ...)."""
    return NONE if _is_zero(value) else Optional(value)


def _optional(name: str, value: Any, *rest: Any) -> Optional:
    if type(value) is not Optional:
        raise no_overload(name, value, *rest)
    return value


@guarded("hasValue")
def has_value(opt: Any) -> bool:
    return _optional("hasValue", opt).has_value


@guarded("value")
def value(opt: Any) -> Any:
    return _optional("value", opt).value


@guarded("orValue")
def or_value(opt: Any, default: Any) -> Any:
    o = _optional("orValue", opt, default)
    return o.value if o.has_value else default


@guarded("or")
def or_(opt: Any, other: Any) -> Optional:
    o = _optional("or", opt, other)
    if o.has_value:
        return o
    return _optional("or", other)


# --- the desugared syntax --------------------------------------------------------------


@guarded("_?._")
def select(operand: Any, field: Any) -> Optional:
    return std.optional_select(operand, field)


@guarded("_[?_]")
def index(container: Any, key: Any) -> Optional:
    return std.optional_index(container, key)


@guarded("optMap")
def items(opt: Any) -> list[Any]:
    """What ``optMap`` / ``optFlatMap`` iterate over: no element or the one value."""
    o = _optional("optMap", opt)
    return [o.value] if o.has_value else []


@guarded("optFlatMap")
def flat_result(result: Any) -> Optional:
    """``optFlatMap``'s step must itself give an optional."""
    return _optional("optFlatMap", result)


@guarded("list literal")
def make_list(mask: Any, *elements: Any) -> list[Any]:
    """``[a, ?b]``: ``mask`` has a '1' for each optional element, kept only with a value."""
    out: list[Any] = []
    for flag, element in zip(mask, elements, strict=True):
        if flag == "1":
            if type(element) is not Optional:
                raise CelError("an optional list element (?e) must be an optional value")
            if element.has_value:
                out.append(element.value)
        else:
            out.append(element)
    return out


@guarded("map literal")
def make_map(mask: Any, *flat: Any) -> dict[Any, Any]:
    """``{?k: v}``: keys and values alternate in ``flat``; an optional entry is kept only
    when its value has one."""
    entries: list[tuple[Any, Any]] = []
    for i, flag in enumerate(mask):
        k, v = flat[2 * i], flat[2 * i + 1]
        if flag == "1":
            if type(v) is not Optional:
                raise CelError("an optional map entry (?k: v) must have an optional value")
            if not v.has_value:
                continue
            v = v.value
        entries.append((k, v))
    return std.make_map(entries)




def _index_cost(container: Any, key: Any = None, *_: Any) -> int:
    """``m[?k]`` looks ``k`` up like ``m[k]`` (``stdlib.lookup_cost``)."""
    inner = container.value if type(container) is Optional and container.has_value else container
    return std.lookup_cost(inner, key)


index.cel_extra_cost = _index_cost  # type: ignore[attr-defined]
