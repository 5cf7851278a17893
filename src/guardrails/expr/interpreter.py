"""The reference backend: cel-python's interpreter behind the same ``Program`` interface.

It is slow (hundreds of microseconds per expression) and has cel-python's own semantics,
which differ from cel-spec in places (see tests/test_expr_differential.py); it exists to
check the compiled backend against an independent implementation. Names are checked by
the front end (``checker``) first, so both backends accept and reject the same expressions.
"""

from __future__ import annotations

import datetime
import functools
import logging
import sys
from collections.abc import Callable, Mapping
from typing import Any

import celpy
from celpy import celtypes
from celpy.evaluation import CELEvalError

from guardrails.expr import ast, values
from guardrails.expr.checker import Checked, ExpressionError
from guardrails.expr.limits import DEFAULT_LIMITS
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
    if t is dict:
        return celtypes.MapType({to_cel(k): to_cel(v) for k, v in value.items()})
    if isinstance(value, Mapping):
        return _LazyMap(value)
    if isinstance(value, datetime.datetime):
        return celtypes.TimestampType(value)
    if isinstance(value, datetime.timedelta):
        return celtypes.DurationType(value)
    if t is CelType and value in _CEL_TYPES:
        return _CEL_TYPES[value]
    return value  # extension values pass through to library functions


class _LazyMap(celtypes.MapType):
    """A mapping that computes its values on demand (the engine's ``variables``), as a
    cel-python map converted one entry at a time.

    Converting it whole would evaluate every variable, and a variable's own bindings hold
    the mapping, so the conversion recursed until RecursionError: cel-python failed every
    rule of every policy with ``variables``. An entry is converted when read; an entry
    whose computation fails reads as an error value (absorbed by ``||`` and ``&&`` like
    any CEL error). Operations over the whole map (size, iteration, equality) convert all
    of it first.
    """

    def __init__(self, source: Mapping[Any, Any]) -> None:
        super().__init__()
        self._source = source
        self._complete = False

    def _entry(self, key: Any) -> Any:
        if dict.__contains__(self, key):
            return dict.__getitem__(self, key)
        try:
            value = self._source[from_cel(key)]
        except CelError as e:
            return CELEvalError(e.message)
        converted = to_cel(value)
        dict.__setitem__(self, key, converted)
        return converted

    def _fill(self) -> None:
        if not self._complete:
            for k in self._source:
                self._entry(to_cel(k))
            self._complete = True

    def __getitem__(self, key: Any) -> Any:
        if not celtypes.MapType.valid_key_type(key):
            raise TypeError(f"unsupported key type: {type(key)}")
        return self._entry(key)

    def get(self, key: Any, default: Any = None) -> Any:
        if key not in self:
            return default
        return self[key]

    def __contains__(self, key: object) -> bool:
        try:
            return from_cel(key) in self._source
        except (CelError, TypeError):
            return False

    def __iter__(self) -> Any:
        self._fill()
        return super().__iter__()

    def __len__(self) -> int:
        self._fill()
        return super().__len__()

    def keys(self) -> Any:
        self._fill()
        return super().keys()

    def values(self) -> Any:
        self._fill()
        return super().values()

    def items(self) -> Any:
        self._fill()
        return super().items()

    def __eq__(self, other: Any) -> bool:
        self._fill()
        return bool(super().__eq__(other))

    def __ne__(self, other: Any) -> bool:
        self._fill()
        return bool(super().__ne__(other))

    __hash__ = None  # type: ignore[assignment]


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
    if isinstance(value, _LazyMap) and type(value._source) is not dict:
        # A host object (the structured ``request``): library methods need it as itself.
        return value._source
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


class _Namespace:
    """The value bound to a function namespace (``credentials`` in ``credentials.found(x)``).

    cel-python reads ``ns.fn(x)`` as the method ``fn`` on a variable ``ns``; the front end
    has resolved such calls to the global ``ns.fn``, so the namespace is bound to this
    marker and the method ``fn`` dispatches on it.
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


def _library_functions(checked: Checked) -> dict[str, Callable[..., Any]]:
    """cel-python's function table for ``checked``: the library functions it calls, as the
    front end resolved them.

    cel-python has one table for functions and methods; where a name is both (``ip()`` and
    ``cidr.ip()``) and the expression uses both, the one whose arity fits runs (the global
    first). Namespaced globals (``credentials.found(x)``) dispatch on ``_Namespace``.
    """
    overloads: dict[str, dict[tuple[bool, int], Callable[..., Any]]] = {}
    namespaced: dict[str, Callable[..., Any]] = {}
    for node in ast.walk(checked.ast):
        if not isinstance(node, ast.Call):
            continue
        overload = checked.overloads.get(id(node))
        if overload is None or overload.kind not in ("std", "lib"):
            continue
        assert overload.fn is not None
        if overload.kind == "std":
            if node.target is None or overload.method:
                continue  # cel-python's own standard functions
            namespaced[overload.name] = _wrap(functools.partial(_std_global, overload.fn))
            continue
        fn = _wrap(overload.fn)
        if node.target is not None and not overload.method:
            namespaced[overload.name] = fn
            continue
        arity = len(node.args) + (1 if overload.method else 0)
        overloads.setdefault(overload.name, {})[(overload.method, arity)] = fn
    table: dict[str, Callable[..., Any]] = {
        name: _by_arity(found) for name, found in overloads.items()
    }
    for name in namespaced:
        method = name.rsplit(".", 1)[1]
        table[method] = _dispatch(method, namespaced, table.get(method))
    return table


def _by_arity(found: Mapping[tuple[bool, int], Callable[..., Any]]) -> Callable[..., Any]:
    if len(found) == 1:
        return next(iter(found.values()))
    ordered = sorted(found.items())  # globals (False) before methods (True)

    def call(*args: Any) -> Any:
        for (_, arity), fn in ordered:
            if arity == len(args):
                return fn(*args)
        return CELEvalError("no such overload")

    return call


def _std_global(fn: Callable[..., Any], *args: Any) -> Any:
    """A ``stdlib`` global (it takes the activation first; cel-python keeps no budget)."""
    return fn(Activation({}, 0, DEFAULT_LIMITS.max_cost), *args)


def _dispatch(
    method: str, namespaced: Mapping[str, Callable[..., Any]], plain: Callable[..., Any] | None
) -> Callable[..., Any]:
    def call(target: Any, *args: Any) -> Any:
        if isinstance(target, _Namespace):
            return namespaced[f"{target.name}.{method}"](*args)
        if plain is None:
            return CELEvalError(f"no such overload: {method}")
        return plain(target, *args)

    return call


def interpreted_program(checked: Checked) -> Program:
    """A ``Program`` that evaluates ``checked.source`` with cel-python (names were checked
    by the front end, so every backend accepts the same expressions)."""
    two = next((n for n in ast.walk(checked.ast)
                if isinstance(n, ast.Comprehension) and n.iter_var2), None)
    if two is not None:
        # cel-python has no two-variable comprehensions; the two production backends
        # (held to cel-spec's macros2 cases) are the reference for them.
        raise ExpressionError(f"the cel-python reference backend has no two-variable "
                              f"comprehensions ({two.macro})", two.offset)
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
    functions = _library_functions(checked)
    namespaces = {
        o.name.rsplit(".", 1)[0]
        for o in checked.overloads.values()
        if o.kind in ("std", "lib") and not o.method and "." in o.name
    }
    runner = env.program(tree, functions=functions)
    names = tuple(checked.declared)

    def run(a: Activation) -> Any:
        bound = a.vars
        context = {name: to_cel(bound[name]) for name in names if name in bound}
        for namespace in namespaces:
            context[namespace] = _Namespace(namespace)
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

    return Program(checked.source, checked.ast, run, 0, checked.limits, metered=False)


__all__ = ["from_cel", "interpreted_program", "to_cel"]
