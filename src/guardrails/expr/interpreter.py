"""The reference backend: cel-python's interpreter behind the same ``Program`` interface.

It is slow (hundreds of microseconds per expression) and has cel-python's own semantics,
which differ from cel-spec in places (see tests/test_expr_differential.py); it exists to
check the compiled backend against an independent implementation. Names are checked by
the front end (``checker``) first, so both backends accept and reject the same expressions.
"""

from __future__ import annotations

import datetime
import logging
import sys
from collections.abc import Callable, Mapping
from typing import Any

import celpy
from celpy import celtypes
from celpy.evaluation import CELEvalError

from guardrails.expr import values
from guardrails.expr.checker import LIB_FUNCTIONS, LIB_METHODS, Checked, ExpressionError
from guardrails.expr.program import Program
from guardrails.expr.stdlib import Activation
from guardrails.expr.values import CelError, CelType, UInt

logging.getLogger("celpy").setLevel(logging.CRITICAL)

_TYPES: dict[Any, CelType] = {
    celtypes.BoolType: values.BOOL,
    celtypes.IntType: values.INT,
    celtypes.UintType: values.UINT,
    celtypes.DoubleType: values.DOUBLE,
    celtypes.StringType: values.STRING,
    celtypes.BytesType: values.BYTES,
    celtypes.ListType: values.LIST,
    celtypes.MapType: values.MAP,
    type(None): values.NULL_TYPE,
    celtypes.TypeType: values.TYPE,
    celtypes.TimestampType: values.TIMESTAMP,
    celtypes.DurationType: values.DURATION,
}
_CEL_TYPES: dict[CelType, Any] = {v: k for k, v in _TYPES.items()}


def to_cel(value: Any) -> Any:
    """A guardrails CEL value as the cel-python value it stands for."""
    t = type(value)
    if t is bool:
        return celtypes.BoolType(value)
    if t is UInt:
        return celtypes.UintType(int(value))
    if t is int:
        return celtypes.IntType(value)
    if t is float:
        return celtypes.DoubleType(value)
    if t is str:
        return celtypes.StringType(value)
    if t is bytes:
        return celtypes.BytesType(value)
    if value is None:
        return None
    if t is list or t is tuple:
        return celtypes.ListType([to_cel(v) for v in value])
    if isinstance(value, Mapping):
        return celtypes.MapType({to_cel(k): to_cel(v) for k, v in value.items()})
    if isinstance(value, datetime.datetime):
        return celtypes.TimestampType(value)
    if isinstance(value, datetime.timedelta):
        return celtypes.DurationType(value)
    if t is CelType and value in _CEL_TYPES:
        return _CEL_TYPES[value]
    return value  # extension values pass through to library functions


def from_cel(value: Any) -> Any:
    """A cel-python result as a guardrails CEL value (errors raise ``CelError``)."""
    if isinstance(value, CELEvalError):
        raise CelError(str(value.args[0]) if value.args else "evaluation error")
    if isinstance(value, celtypes.BoolType) or type(value) is bool:
        return bool(value)
    if isinstance(value, celtypes.UintType):
        return UInt(int(value))
    if isinstance(value, celtypes.IntType):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bytes):
        return bytes(value)
    if value is None:
        return None
    if isinstance(value, list):
        return [from_cel(v) for v in value]
    if isinstance(value, dict):
        return {from_cel(k): from_cel(v) for k, v in value.items()}
    if isinstance(value, datetime.datetime):
        utc = datetime.UTC
        v = (value if value.tzinfo else value.replace(tzinfo=utc)).astimezone(utc)
        return datetime.datetime(
            v.year, v.month, v.day, v.hour, v.minute, v.second, v.microsecond, tzinfo=utc
        )
    if isinstance(value, datetime.timedelta):
        return datetime.timedelta(value.days, value.seconds, value.microseconds)
    if isinstance(value, type):
        found = _TYPES.get(value)
        if found is None:
            raise CelError(f"unsupported cel-python type value {value!r}")
        return found
    return value


def _wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        try:
            return to_cel(fn(*(from_cel(a) for a in args)))
        except CelError as e:
            return CELEvalError(e.message)

    return call


def interpreted_program(checked: Checked) -> Program:
    """A ``Program`` that evaluates ``checked.source`` with cel-python (names were checked
    by the front end, so every backend accepts the same expressions)."""
    container = checked.container
    limit = sys.getrecursionlimit()
    try:
        env = celpy.Environment(package=container or None)
    finally:
        sys.setrecursionlimit(limit)  # cel-python raises it for the whole process
    try:
        tree = env.compile(checked.source)
    except Exception as e:
        raise ExpressionError(f"cel-python cannot parse the expression: {e}", 0) from None
    functions = {name: _wrap(fn) for name, fn in {**LIB_FUNCTIONS, **LIB_METHODS}.items()}
    runner = env.program(tree, functions=functions)
    names = tuple(checked.declared)

    def run(a: Activation) -> Any:
        bound = a.vars
        context = {name: to_cel(bound[name]) for name in names if name in bound}
        try:
            result = runner.evaluate(context)
        except CELEvalError as e:
            raise CelError(str(e.args[0]) if e.args else "evaluation error") from None
        except RecursionError:
            raise CelError("expression evaluation too deep") from None
        except CelError:
            raise
        except Exception as e:  # cel-python leaks Python exceptions for some inputs
            raise CelError(f"cel-python failed: {type(e).__name__}: {e}") from None
        return from_cel(result)

    return Program(checked.source, checked.ast, run, 0, checked.limits)


__all__ = ["from_cel", "interpreted_program", "to_cel"]
