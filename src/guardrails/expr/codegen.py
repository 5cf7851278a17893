"""Compile a checked CEL AST into the source of one Python function per expression.

A tree of closures pays a Python call per AST node; generated code pays none for the hot
operations (field select on dicts, same-type comparisons and equality, ``!``, ``&&``,
``||``, ``?:``, ``in``, ``size``, string tests, macros as loops), and falls back to the
``stdlib`` functions for everything else, so CEL semantics stay those of the closure
backend. Names, overloads and folded constants come from the front end (``checker``);
the closures of the same checked tree are the fallback for what Python's compiler refuses
(too deeply nested code).

Safety: the generated text never contains expression text. Every literal, field name,
variable name, pattern and library function reaches the code through the arguments of a
factory function (``_k0``, ``_k1``, ...), and every identifier in the code is generated
here. Because constants are not in the text, expressions that differ only in literals
share one compiled code object (policy sets repeat shapes), which keeps load time low.

Errors are values: ``&&``/``||`` chains and ``all``/``exists`` absorb ``CelError`` with
try/except, never ``CostLimitExceeded``. The cost budget is a local integer charged per
comprehension iteration and by string building/scanning, as in the closure backend.
"""

from __future__ import annotations

import builtins
import contextlib
import copy
import functools
import re
import sys
import threading
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NoReturn

from guardrails.expr import ast, macros
from guardrails.expr import stdlib as std
from guardrails.expr.checker import Checked, Local, logic_error, predicate_error, reads_variables
from guardrails.expr.closures import closure_program
from guardrails.expr.lib_common import constant_pattern, inline_form, library_error
from guardrails.expr.lib_provenance import Request
from guardrails.expr.limits import (
    IN_SCAN_COST,
    METER,
    SCAN_COST,
    Limits,
    Meter,
    cost_of,
    extra_cost,
    iteration_cost,
    match_units,
    pattern_arg,
    pattern_charge,
    too_deep,
    with_work,
)
from guardrails.expr.program import FusedRun, Program
from guardrails.expr.values import (
    INT64_MAX,
    INT64_MIN,
    CelError,
    CelType,
    CostLimitExceeded,
    MatchBoundExceeded,
    UInt,
    Variables,
    again,
    untraced,
)

Run = Callable[[Mapping[str, Any]], Any]


def _unset(bindings: Mapping[str, Any]) -> Any:
    raise CelError("program has no generated code")


def _no_closures(a: Any) -> Any:
    raise CelError("program has no closures")  # generated programs never run them


@dataclass(frozen=True, slots=True)
class GeneratedProgram(Program):
    """A program whose ``evaluate`` is the generated function itself (no wrapper call).

    The code is generated when the program is built, at load, so no decision pays for it
    (a lazy first use made the first decision after a load ~100x a steady one). The
    costly step is Python's ``compile()``: programs built since the last batch wait in
    ``_PENDING`` and ``generate_pending()`` compiles all their sources in one call (the
    engine calls it once at the end of a load); a program evaluated before that compiles
    the batch itself. Expressions that differ only in literals share a code object, and
    one that Python's compiler refuses (too deeply nested) runs the closures of its
    checked tree instead. The generated function converts non-CEL exceptions to
    ``CelError`` (fail closed) like ``Program.evaluate`` does. Installing the function
    mutates the slot once; the program behaves the same before and after, so it is still
    immutable in every observable way.
    """

    evaluate: Run = field(default=_unset, repr=False, compare=False)  # type: ignore[assignment]
    _pending: tuple[Checked | Callable[[], Checked], str, tuple[Any, ...]] | None = field(
        default=None, repr=False, compare=False
    )
    _python: str = field(default="", repr=False, compare=False)
    _consts: tuple[Any, ...] = field(default=(), repr=False, compare=False)
    """The constants the factory of ``_python`` was called with (``fused_rules`` reuses
    both)."""

    def python_source(self) -> str:
        """The generated source ("" when the expression fell back to closures)."""
        if self._pending is not None:
            generate_pending()
        return self._python

    def _install(self, factory: Callable[..., Run] | None) -> None:
        """Put the generated function in place (closures when ``factory`` is None)."""
        pending = self._pending
        if pending is None:
            return
        checked, source, consts = pending
        if factory is None:
            _fall_back(self, checked if isinstance(checked, Checked) else checked())
        else:
            object.__setattr__(self, "_python", source)
            object.__setattr__(self, "_consts", consts)
            object.__setattr__(self, "evaluate", factory(*consts))
        object.__setattr__(self, "_pending", None)


def _fall_back(program: GeneratedProgram, checked: Checked) -> None:
    closures = closure_program(checked)
    object.__setattr__(program, "_fn", closures._fn)
    object.__setattr__(program, "_slots", closures._slots)
    object.__setattr__(program, "_direct", closures._direct)
    object.__setattr__(program, "_python", "")
    object.__setattr__(program, "evaluate", functools.partial(Program.evaluate, program))


def _first_evaluate(program: GeneratedProgram, bindings: Mapping[str, Any]) -> Any:
    generate_pending()
    return program.evaluate(bindings)


# ---------------------------------------------------------------------------- runtime helpers


def _cost_exceeded() -> NoReturn:
    raise CostLimitExceeded("evaluation cost limit exceeded")


IN_FREE = 32
"""Lists of up to this many elements are searched for a string by ``in`` without a charge
(Python's own search, under a microsecond): the common ``"admin" in principal.roles`` then
needs no budget bookkeeping in its expression. Any other item is always charged (CEL
equality element by element costs up to a microsecond each)."""


def _charge_call(b: Mapping[str, Any], units: int, limit: int) -> None:
    """Charge the call's meter directly, for an expression that keeps no budget of its own
    (a long list searched by ``in``); without a meter, ``units`` must fit one budget."""
    meter = b.get(METER)
    if meter is None:
        if units > limit:
            _cost_exceeded()
        return
    meter.left -= units
    if meter.left < 0:
        _cost_exceeded()


def _unbound(name: str) -> NoReturn:
    raise CelError(f"no value bound for '{name}'")


def _overflow() -> NoReturn:
    raise CelError("integer overflow")


def _too_deep(meter: Meter | None) -> NoReturn:
    """The stack ran out (``RecursionError``): an error of the call, not of the rule, that
    ``meter`` keeps (``Meter.deep``), so ``Ignore`` cannot skip it (``too_deep``)."""
    raise too_deep(meter) from None


def _failed(e: Exception) -> NoReturn:
    raise CelError(f"evaluation failed: {type(e).__name__}: {e}") from e


Hits = list[tuple[int, Any, Exception | None]]
"""A fused function's result: ``(rule index, value, error)`` of each rule not false."""


def _rule_error(hits: Hits | None, i: int, error: Exception, meter: Meter) -> Hits:
    """Rule ``i`` of a fused function raised ``error``: kept as the error its own function
    raises (``_HANDLERS``: a ``CelError`` as it is, a ``RecursionError`` as too deep, any
    other as failed, or what reading that one's text raised), without its traceback
    (``values.untraced``: the fused frame holds ``hits``). Out of line, once for all rules:
    the fused function runs start to end on every call, and a handler in line per rule
    was a third of its bytecode, on the path of an error that is rare."""
    if not isinstance(error, CelError):
        if isinstance(error, RecursionError):
            error = too_deep(meter)
        else:
            try:
                error = CelError(f"evaluation failed: {type(error).__name__}: {error}")
            except Exception as exc:  # its text raised: that is the error, as _failed's
                error = exc
    if hits is None:
        hits = []
    hits.append((i, None, untraced(error)))
    return hits


def _rule_hit(hits: Hits | None, i: int, value: Any) -> Hits:
    """Rule ``i`` of a fused function gave ``value``, not false (out of line: rare)."""
    if hits is None:
        hits = []
    hits.append((i, value, None))
    return hits


def _compare_any(b: Mapping[str, Any], op: Callable[[Any, Any], Any], left: Any, right: Any,
                 limit: int) -> Any:
    """A comparison of two values the call brings, of other types than the one tested in
    line (``_Gen.compare``): numbers of two types free, anything else charged by what it
    reads (``stdlib.comparison_cost``). Out of line: the rare case's code is not in every
    rule's."""
    if not (type(left) in std.NUMBER_TYPES and type(right) in std.NUMBER_TYPES):
        _charge_call(b, std.comparison_cost(left, right), limit)
    return op(left, right)


def _member_any(b: Mapping[str, Any], item: Any, container: Any, limit: int) -> bool:
    """``item in container`` but for a text in a short list (``_Gen.membership`` tests that
    in line): a long list charged per element it scans, a list searched for another value
    or a map looked up by one charged by what the comparison reads. Out of line, as
    ``_compare_any``."""
    if type(container) is list and (len(container) > IN_FREE or type(item) is not str):
        _charge_call(b, IN_SCAN_COST * len(container) if type(item) is str
                     else std.membership_cost(item, container), limit)
    elif type(item) is not str:
        _charge_call(b, std.lookup_cost(container, item), limit)
    if type(item) is str and (type(container) is list or type(container) is dict):
        return item in container
    return std.in_(item, container)


def _select_any(value: Any, field: str) -> Any:
    """A field selected exactly as ``_Gen.select``'s generated line selects it, as one
    call. A fused function tests in line only the type its operand has on the engine's
    paths (``_fused_select``) and leaves every other case here: the same steps in the
    same order, so the same value or error, with the rare cases' code out of the fused
    function (a guarded call runs it once, between the framework's code: its size is
    what the call pays for, in cache misses)."""
    kind = type(value)
    if (kind is dict or kind is types.MappingProxyType) and field in value:
        return value[field]
    if kind is Variables and field in value._done:
        return value._done[field]
    if (kind is Variables or kind is Request) and field in value._defs:
        return value[field]
    return std.select(value, field)


def _library_error(name: str, exc: Exception, args: tuple[Any, ...]) -> NoReturn:
    """Raise what ``lib_common.guarded`` raises for ``exc`` out of library function
    ``name`` (generated code calls the function itself, not its wrapper)."""
    error = library_error(name, exc, args)
    if error is exc:
        raise exc
    raise error from None


_MISS: Final = object()
"""A fused function's field not read yet (``MEMO_ROOTS``)."""

_TYPE_NAMES: Final[Mapping[type, str]] = {int: "_int", float: "_float", str: "_str",
                                          bool: "_bool"}
_KINDS_OF: Final[Mapping[str, type]] = {name: t for t, name in _TYPE_NAMES.items()}
_SAME_KINDS: Final[Mapping[str, frozenset[Any]]] = {
    "_EQ_TYPES": std.FAST_EQ_TYPES, "_ORD_TYPES": std.ORDERED_TYPES,
    "_FLAT_EQ_TYPES": std.FLAT_EQ_TYPES, "_FLAT_ORD_TYPES": std.FLAT_ORDERED_TYPES}
"""The type sets of the generated code's globals, by name."""
_SEQ_KINDS: Final = frozenset({str, bytes, list, tuple})
"""Types ``len`` measures that a library call's charge counts (``_SEQS``)."""
_SIZED_KINDS: Final = frozenset({str, bytes, list, tuple, dict})
"""Types ``size`` is ``len`` of (``_SIZED``)."""

_GLOBALS: Final[Mapping[str, Any]] = {
    "__builtins__": builtins,
    "_CelError": CelError,
    "_MatchBound": MatchBoundExceeded,
    "_Cost": CostLimitExceeded,
    "_ErrorValue": std.ErrorValue,
    "_cost_exceeded": _cost_exceeded,
    "_charge_call": _charge_call,
    "_METER": METER,
    "_Meter": Meter,
    "_unbound": _unbound,
    "_overflow": _overflow,
    "_logic_error": logic_error,
    "_predicate_error": predicate_error,
    "_too_deep": _too_deep,
    "_failed": _failed,
    "_library_error": _library_error,
    "_again": again,
    "_untraced": untraced,
    "_rule_error": _rule_error,
    "_rule_hit": _rule_hit,
    "_no_overload": std.no_overload,
    "_select": std.select,
    "_select_any": _select_any,
    "_compare_any": _compare_any,
    "_member_any": _member_any,
    "_MISS": _MISS,
    "_has": std.has_field,
    "_eq": std.eq,
    "_ne": std.ne,
    "_lt": std.lt,
    "_le": std.le,
    "_gt": std.gt,
    "_ge": std.ge,
    "_in": std.in_,
    "_index": std.index,
    "_not": std.not_,
    "_neg": std.neg,
    "_add": std.add,
    "_concat": std.concat,
    "_sub": std.sub,
    "_mul": std.mul,
    "_div": std.div,
    "_mod": std.mod,
    "_size": std.size,
    "_contains": std.contains,
    "_starts_with": std.starts_with,
    "_ends_with": std.ends_with,
    "_matches": std.matches,
    "_pattern_charge": pattern_charge,
    "_match_units": match_units,
    "_pattern_tester": std.pattern_tester,
    "_make_map": std.make_map,
    "_iter_range": std.iter_range,
    "_iter_pairs": std.iter_pairs,
    "_deepcopy": copy.deepcopy,
    "_EQ_TYPES": std.FAST_EQ_TYPES,
    "_FLAT_EQ_TYPES": std.FLAT_EQ_TYPES,
    "_FLAT_ORD_TYPES": std.FLAT_ORDERED_TYPES,
    "_NUMS": std.NUMBER_TYPES,
    "_comparison_cost": std.comparison_cost,
    "_lookup_cost": std.lookup_cost,
    "_membership_cost": std.membership_cost,
    "_TYPE_OF": std.TYPE_OF,
    "_CelType": CelType,
    "_ORD_TYPES": std.ORDERED_TYPES,
    "_SIZED": _SIZED_KINDS,
    "_SEQS": _SEQ_KINDS,
    "_BUILT": frozenset({str, bytes, list}),
    "_int": int,
    "_float": float,
    "_str": str,
    "_list": list,
    "_dict": dict,
    "_proxy": types.MappingProxyType,
    "_LAZY": frozenset({Variables, Request}),
    "_vars": Variables,
    "_request": Request,
    "_bool": bool,
    "_MIN": INT64_MIN,
    "_MAX": INT64_MAX,
}

_COMPARE: Final[Mapping[str, tuple[str, str]]] = {
    "_==_": ("==", "_eq"),
    "_!=_": ("!=", "_ne"),
    "_<_": ("<", "_lt"),
    "_<=_": ("<=", "_le"),
    "_>_": (">", "_gt"),
    "_>=_": (">=", "_ge"),
}

_STD_CALLS: Final[Mapping[str, str]] = {
    "_/_": "_div",
    "_%_": "_mod",
    "-_": "_neg",
}
_MAX_DEPTH: Final = 40
_UNTRACED: Final = "_untraced(_x)"
"""A caught error kept as a value (``_ErrorValue``, the first error of ``&&``, ``||`` or a
comprehension): ``values.untraced``; a kept error is raised by ``values.again``."""
"""Indentation levels of generated code before falling back to closures (Python's
compiler refuses more than 20 nested blocks and 100 indentation levels)."""


_POOL: dict[tuple[type, str], Any] = {}
_POOL_MAX: Final = 100_000


def _shared(key: tuple[type, str], value: Any) -> Any:
    """One object for each scalar constant across all programs (strings interned).

    Each program's own copy of "args" or "amount" is one more cache line a decision
    touches, and a dict lookup with a key that is not the dict's own key object compares
    the text; with 10,000 rules that made each rule cost more as the set grew.
    """
    found = _POOL.get(key)
    if found is None:
        if len(_POOL) >= _POOL_MAX:
            _POOL.clear()
        found = sys.intern(value) if type(value) is str else value
        _POOL[key] = found
    return found


def shared(value: Any) -> Any:
    """A literal's value as the one pooled object for it (``_shared``)."""
    return _shared((type(value), repr(value)), value)


class _TooDeep(Exception):
    pass


_OPAQUE: Final = frozenset({int, float, str, bytes, UInt})
"""Literal types whose value code generation never reads, only passes on as a constant
(except a ``matches`` pattern: ``_shape``); ``true``, ``false`` and ``null`` are part of
the shape."""


class _Gen:
    def __init__(self, checked: Checked) -> None:
        self.folded = checked.constants
        self.max_cost = checked.limits.max_cost
        self.references = checked.references
        self.overloads = checked.overloads
        self.consts: list[Any] = []
        self.const_names: dict[Any, str] = {}
        self.lines: list[str] = []
        self.depth = 3
        self.blocks = 1
        self.n = 0
        self.scopes: list[tuple[str, str, bool]] = []  # (CEL name, Python local, accumulator)
        self.budget = False
        self.bud = "_m.left" if reads_variables(checked) else "_bud"
        """Where charges go: a local copy of the meter, or the meter itself in a tree that
        reads a policy's ``variables`` (see ``reads_variables``)."""
        self.literal_slots: list[tuple[int, ast.Literal]] = []
        """``(constant index, node)`` of every literal emitted as a constant of its own."""
        self.kinds: dict[str, type] = {}
        """The exact Python type of a constant or temporary whenever the code computing it
        can only produce that type (a constant's own, ``bool`` for a comparison, ``int``
        for ``size``...): the operations using it then skip the type tests whose answer
        is known. It depends only on the tree's shape (a literal's type is part of it)."""

    # ------------------------------------------------------------------ emitting

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    def indent(self, blocks: int = 0) -> _Indent:
        return _Indent(self, blocks)

    def tmp(self) -> str:
        self.n += 1
        return f"_t{self.n}"

    def const(self, value: Any) -> str:
        t = type(value)
        key: Any = (
            (t, repr(value)) if t in (int, float, str, bytes, bool, type(None)) else id(value)
        )
        found = self.const_names.get(key)
        if found is not None:
            return found
        name = f"_k{len(self.consts)}"
        if type(key) is tuple:
            value = _shared(key, value)
        self.consts.append(value)
        self.const_names[key] = name
        self.kinds[name] = t
        return name

    def literal(self, node: ast.Literal) -> str:
        """A literal's own constant, never shared with another: so the source does not
        depend on which literals happen to be equal, and expressions that differ only in
        literals get the same source (``_TEMPLATES`` fills in the values)."""
        value = node.value
        name = f"_k{len(self.consts)}"
        self.literal_slots.append((len(self.consts), node))
        self.consts.append(_shared((type(value), repr(value)), value))
        self.kinds[name] = type(value)
        return name

    def kind(self, name: str) -> type | None:
        """``name``'s exact Python type when the code computing it guarantees it."""
        return self.kinds.get(name)

    def typed(self, name: str, kind: type) -> str:
        """``name``, recorded as holding a value of exactly ``kind`` (every assignment to
        it in the code just emitted produces one, or raises)."""
        self.kinds[name] = kind
        return name

    def seq_len(self, name: str) -> str | None:
        """What ``(len(x) if type(x) in _SEQS else 0)`` is for ``name``, spelled with
        what its kind makes static: ``len(x)``, or None for 0."""
        kind = self.kind(name)
        if kind is None:
            return f"(len({name}) if type({name}) in _SEQS else 0)"
        return f"len({name})" if kind in _SEQ_KINDS else None

    def charge(self, units: str) -> None:
        self.budget = True
        self.emit(f"{self.bud} -= {units}")
        self.emit(f"if {self.bud} < 0: _cost_exceeded()")

    def call_charge(self, units: str) -> str:
        """A statement charging ``units`` to the call's meter directly (``_charge_call``),
        for a cost the expression's own budget does not keep."""
        return f"_charge_call(b, {units}, {self.const(self.max_cost)})"

    def try_catch_errors(self, body: Callable[[], None], handler: list[str]) -> None:
        """``try: body`` with ``CelError`` handled (never the cost limit)."""
        self.emit("try:")
        with self.indent(2):
            body()
        self.emit("except _Cost:")
        self.emit("    raise")
        self.emit("except _CelError as _x:")
        for line in handler:
            self.emit("    " + line)

    # ------------------------------------------------------------------ names

    def lookup(self, name: str) -> tuple[str, bool] | None:
        for n, local, accu in reversed(self.scopes):
            if n == name:
                return local, accu
        return None

    def variable(self, name: str) -> str:
        t = self.tmp()
        k = self.const(name)
        self.emit("try:")
        self.emit(f"    {t} = b[{k}]")
        self.emit("except KeyError:")
        self.emit(f"    _unbound({k})")
        return t

    # ------------------------------------------------------------------ nodes

    def expr(self, node: ast.Node) -> str:
        """Emit the statements computing ``node``; return the name holding its value."""
        key = id(node)
        if key in self.folded:
            if type(node) is ast.Literal and type(node.value) in _OPAQUE:
                return self.literal(node)
            return self.const(self.folded[key])
        ref = self.references.get(key)
        if isinstance(ref, Local):
            return self.local(ref)
        if ref is not None:
            return self.variable(ref.name)
        if isinstance(node, ast.Select):
            return self.select(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.ListLit):
            parts = [self.expr(e) for e in node.elements]
            t = self.tmp()
            self.emit(f"{t} = [{', '.join(parts)}]")
            return self.typed(t, list)
        if isinstance(node, ast.MapLit):
            pairs = [f"({self.expr(k)}, {self.expr(v)})" for k, v in node.entries]
            t = self.tmp()
            self.emit(f"{t} = _make_map([{', '.join(pairs)}])")
            return t
        if isinstance(node, ast.Comprehension):
            return self.comprehension(node)
        raise _TooDeep(
            f"unsupported node {type(node).__name__}"
        )  # the closure compiler rejected it

    def local(self, ref: Local) -> str:
        scoped = self.lookup(ref.name)
        if scoped is None:
            raise _TooDeep(f"unscoped local {ref.name}")  # unreachable: scoped by the checker
        local, accu = scoped
        if accu:
            self.emit(f"if type({local}) is _ErrorValue: raise _again({local}.error)")
        return local

    def select(self, node: ast.Select) -> str:
        v = self.expr(node.operand)
        k = self.const(node.field)
        t = self.tmp()
        if node.test_only:
            self.emit(f"{t} = {k} in {v} if type({v}) is _dict else _has({v}, {k})")
            return self.typed(t, bool)
        # dicts and the engine's read-only params (a mappingproxy): plain lookups; a
        # policy's variables (one already computed, then any) and ``request``: the
        # entry itself (what ``select`` would read, directly: ``_defs`` are the keys
        # they hold)
        self.emit(
            f"{t} = {v}[{k}] if (type({v}) is _dict or type({v}) is _proxy) and {k} in {v} "
            f"else {v}._done[{k}] if type({v}) is _vars and {k} in {v}._done "
            f"else {v}[{k}] if type({v}) in _LAZY and {k} in {v}._defs else _select({v}, {k})"
        )
        return t

    # ------------------------------------------------------------------ calls

    def call(self, node: ast.Call) -> str:
        overload = self.overloads[id(node)]
        if overload.kind == "operator":
            special = self.operator(node)
            if special is None:
                raise _TooDeep(f"operator {node.function}")  # unreachable: all are handled
            return special
        if overload.kind == "bind":
            return self.bind(node)
        assert overload.fn is not None
        if overload.method:
            assert node.target is not None
            if overload.name == "matches" and len(node.args) == 1:
                pattern = self.folded.get(id(node.args[0]), MISSING_PATTERN)
                if type(pattern) is str:
                    try:
                        compiled = std.regex(pattern)
                    except CelError:
                        pass  # an invalid pattern stays a run-time error
                    else:
                        return self.matches_const(self.expr(node.target), compiled)
            parts = [self.expr(node.target), *(self.expr(a) for a in node.args)]
        else:
            parts = [self.expr(a) for a in node.args]
        if overload.kind == "std":
            return self.std_call(overload.name, overload.fn, parts)
        operands = [node.target, *node.args] if overload.method else list(node.args)
        index = pattern_arg(overload.fn)
        charged = index is not None and index < len(operands) and not constant_pattern(
            overload.fn,
            self.folded.get(id(operands[index]), MISSING_PATTERN))
        return self.lib_call(overload.fn, parts, charge_pattern=charged)

    def matches_const(self, s: str, compiled: Any) -> str:
        t = self.tmp()
        rx = self.const(std.regex_tester(compiled))
        slow = self.const(std.compiled_matches(compiled))

        python = std.python_form(compiled)

        def body() -> None:
            self.charge(f"{self.const(SCAN_COST)} + len({s})")
            if python is None:
                self.emit(f"{t} = {rx}({s})")
                return
            # What the tester runs for short ASCII text, in line: Python's ``re`` search.
            search, limit = python
            self.emit(f"{t} = {self.const(search)}({s}) is not None if len({s}) <= "
                      f"{self.const(limit)} and {s}.isascii() else {rx}({s})")

        self.if_strings([s], body, f"{t} = {slow}(None, {s})")
        return self.typed(t, bool)

    def if_strings(self, parts: list[str], body: Callable[[], None], otherwise: str) -> None:
        """``body`` when all of ``parts`` are strings, else the statement ``otherwise``;
        the test is left out for parts known to be strings (and all of it for all)."""
        tests = " and ".join(f"type({p}) is _str" for p in parts if self.kind(p) is not str)
        if not tests:
            body()
            return
        self.emit(f"if {tests}:")
        with self.indent():
            body()
        self.emit("else:")
        self.emit(f"    {otherwise}")

    def std_call(self, name: str, fn: Callable[..., Any], parts: list[str]) -> str:
        """Standard functions; only ``contains``, ``matches`` and ``+`` charge cost (inlined)."""
        t = self.tmp()
        if name == "size" and len(parts) == 1:
            (x,) = parts
            if self.kind(x) in _SIZED_KINDS:
                self.emit(f"{t} = len({x})")
            else:
                self.emit(f"{t} = len({x}) if type({x}) in _SIZED else _size(None, {x})")
            return self.typed(t, int)
        if name in ("contains", "matches") and len(parts) == 2:
            s, arg = parts
            helper = "_contains" if name == "contains" else "_matches"

            def body() -> None:
                self.charge(f"{self.const(SCAN_COST)} + len({s})")
                if name == "contains":
                    self.emit(f"{t} = {arg} in {s}")
                else:
                    # A pattern known only now is charged the first time it is compiled.
                    self.charge(f"_pattern_charge(_m, {arg})")
                    self.emit(f"{t} = _pattern_tester({arg})({s})")

            self.if_strings(parts, body, f"{t} = {helper}(None, {s}, {arg})")
            return self.typed(t, bool)
        if name in ("startsWith", "endsWith") and len(parts) == 2:
            s, arg = parts
            method = "startswith" if name == "startsWith" else "endswith"
            helper = "_starts_with" if name == "startsWith" else "_ends_with"
            self.std_charge(fn, parts)
            tests = " and ".join(f"type({p}) is _str" for p in parts if self.kind(p) is not str)
            if tests:
                self.emit(f"{t} = {s}.{method}({arg}) if {tests} else {helper}(None, {s}, {arg})")
            else:
                self.emit(f"{t} = {s}.{method}({arg})")
            return self.typed(t, bool)
        f = self.const(fn)
        if fn is std.to_double and len(parts) == 1:  # what ``to_double`` does for numbers
            (x,) = parts
            if self.kind(x) is float:
                return x
            if self.kind(x) is int:
                self.emit(f"{t} = _float({x})")
                return self.typed(t, float)
            text = self.kind(x) is str
            if not text:
                self.emit(f"if type({x}) is _float: {t} = {x}")
                self.emit(f"elif type({x}) is _int: {t} = _float({x})")
            units = getattr(extra_cost(fn), "text_units", None)
            if units is not None:
                # Plain decimal text: what ``to_double`` reads without its pattern, in line,
                # charged what its declared cost charges a text.
                plain = std.PLAIN_DECIMAL.format(x)
                self.emit(f"{'el' if not text else ''}if "
                          f"{'' if text else f'type({x}) is _str and '}{plain}:")
                with self.indent():
                    base, per = units
                    self.charge(f"{self.const(base)} + {self.const(per)} * len({x})")
                    self.emit(f"{t} = _float({x})")
            self.emit("else:")
            with self.indent():
                self.std_charge(fn, parts)
                self.emit(f"{t} = {f}(None, {x})")
            return self.typed(t, float)
        if fn is std.type_of and len(parts) == 1:  # what ``type_of`` does for built-in types
            (x,) = parts
            self.emit(f"{t} = _TYPE_OF.get(type({x}))")
            self.emit(f"if {t} is None: {t} = {f}(None, {x})")
            return t
        self.std_charge(fn, parts)
        self.emit(f"{t} = {f}(None, {', '.join(parts)})")
        return t

    def std_charge(self, fn: Callable[..., Any], parts: list[str]) -> None:
        """Charge a standard function's declared cost (``stdlib._COSTS``) before it runs."""
        extra = extra_cost(fn)
        if extra is not None and extra is not std.no_cost:
            self.charge(f"{self.const(extra)}({', '.join(parts)})")

    def lib_call(self, fn: Callable[..., Any], parts: list[str], *,
                 charge_pattern: bool = True) -> str:
        """Library functions know nothing of cost: charge what they scan and what they build."""
        # What a part's kind makes static is spelled out: an int argument scans nothing.
        scanned = " + ".join(n for n in map(self.seq_len, parts) if n is not None)
        fixed, per = cost_of(fn)
        base = self.const(fixed)
        if scanned and per != 1:
            scanned = f"{self.const(per)} * ({scanned})"
        self.charge(f"{base} + {scanned}" if scanned else base)
        pattern = pattern_arg(fn)
        if charge_pattern and pattern is not None and pattern < len(parts):
            self.charge(f"_pattern_charge(_m, {parts[pattern]})")
        extra = extra_cost(fn)
        if extra is not None:
            self.charge(f"{self.const(extra)}({', '.join(parts)})")
        t = self.tmp()
        reports = with_work(fn)
        if reports is not None:
            work = self.tmp()
            self.emit("try:")
            self.emit(f"    {t}, {work} = {self.const(reports)}({', '.join(parts)})")
            self.emit("except _MatchBound:")
            with self.indent():
                # Over its bound of matches: the call is over its cost bound (an input
                # error of the whole call, whatever the policies' failurePolicy),
                # as if it had run out of the budget; the error keeps its own text.
                self.budget = True
                self.emit(f"{self.bud} = -1")
                self.emit("raise")
            self.charge(f"_match_units(b.get(_METER), {work})")
        else:
            guard = getattr(fn, "cel_guarded", None)
            if type(guard) is tuple and len(guard) == 3 and guard[2] is fn:
                # ``lib_common.guarded``'s handling in line: the function itself, and its
                # errors made what the wrapper makes them (one Python call less).
                name, inner, _ = guard
                form = inline_form(fn, len(parts))
                if form is not None:  # its common case without a call
                    tests = [f"type({p}) is {_TYPE_NAMES[k]}" for p, k in
                             zip(parts, form.types, strict=True) if self.kind(p) is not k]
                    self.emit(f"if {' and '.join([*tests, form.condition.format(*parts)])}:")
                    self.emit(f"    {t} = {form.expression.format(*parts)}")
                    self.emit("else:")
                with self.indent() if form is not None else contextlib.nullcontext():
                    self.emit("try:")
                    self.emit(f"    {t} = {self.const(inner)}({', '.join(parts)})")
                    self.emit("except Exception as _x:")
                    self.emit(f"    _library_error({self.const(name)}, _x, "
                              f"({''.join(p + ', ' for p in parts)}))")
            else:
                self.emit(f"{t} = {self.const(fn)}({', '.join(parts)})")
        self.emit(f"if type({t}) in _BUILT:")
        with self.indent():
            self.charge(f"len({t})")
        return t

    def bind(self, node: ast.Call) -> str:
        var, init_node, body_node = node.args
        assert isinstance(var, ast.Ident)
        u = self.tmp()
        self.store_or_error(u, init_node)
        self.scopes.append((var.name, u, True))
        try:
            return self.expr(body_node)
        finally:
            self.scopes.pop()

    def store_or_error(self, target: str, node: ast.Node) -> None:
        """``target = node``, or an ``ErrorValue`` holding its error (errors are values)."""

        def body() -> None:
            v = self.expr(node)
            self.emit(f"{target} = {v}")

        self.try_catch_errors(body, [f"{target} = _ErrorValue({_UNTRACED})"])

    # ------------------------------------------------------------------ operators

    def operator(self, node: ast.Call) -> str | None:
        name = node.function
        args = node.args
        if name in ("_&&_", "_||_") and len(args) == 2:
            return self.logical(node)
        if name == "_?_:_" and len(args) == 3:
            return self.conditional(args)
        if len(args) == 1:
            if name == "!_":
                x = self.expr(args[0])
                t = self.tmp()
                if self.kind(x) is bool:
                    self.emit(f"{t} = {x} is False")
                else:
                    self.emit(f"{t} = {x} is False if type({x}) is _bool else _not({x})")
                return self.typed(t, bool)
            if name == "@not_strictly_false":
                t = self.tmp()

                def body() -> None:
                    x = self.expr(args[0])
                    self.emit(f"{t} = {x} is not False")

                self.try_catch_errors(body, [f"{t} = True"])
                return self.typed(t, bool)
            helper = _STD_CALLS.get(name)
            if helper is not None:
                x = self.expr(args[0])
                t = self.tmp()
                self.emit(f"{t} = {helper}({x})")
                return t
            return None
        if len(args) != 2:
            return None
        if name in _COMPARE:
            return self.compare(name, args)
        if name == "@in":
            return self.membership(args)
        if name == "_+_":
            return self.add(args)
        if name in ("_-_", "_*_"):
            left, right = self.expr(args[0]), self.expr(args[1])
            t = self.tmp()
            op, helper = ("-", "_sub") if name == "_-_" else ("*", "_mul")
            self.emit(f"if type({left}) is type({right}) is _int:")
            self.emit(f"    {t} = {left} {op} {right}")
            self.emit(f"    if not _MIN <= {t} <= _MAX: _overflow()")
            self.emit(f"elif type({left}) is type({right}) is _float:")
            self.emit(f"    {t} = {left} {op} {right}")
            self.emit("else:")
            self.emit(f"    {t} = {helper}({left}, {right})")
            return t
        helper = _STD_CALLS.get(name)
        if helper is not None:
            left, right = self.expr(args[0]), self.expr(args[1])
            t = self.tmp()
            self.emit(f"{t} = {helper}({left}, {right})")
            return t
        if name == "_[_]":
            left, right = self.expr(args[0]), self.expr(args[1])
            t = self.tmp()
            self.emit(f"if type({left}) is _list and type({right}) is _int and "
                      f"0 <= {right} < len({left}):")
            self.emit(f"    {t} = {left}[{right}]")
            self.emit("else:")
            self.emit(f"    if type({right}) is not _str: "
                      f"{self.call_charge(f'_lookup_cost({left}, {right})')}")
            self.emit(f"    {t} = _index({left}, {right})")
            return t
        return None

    def compare(self, name: str, args: tuple[ast.Node, ...]) -> str:
        op, helper = _COMPARE[name]
        left, right = self.expr(args[0]), self.expr(args[1])
        t = self.tmp()
        self.typed(t, bool)  # Python's operators on these types, and the helpers, give bools
        same = "_EQ_TYPES" if op in ("==", "!=") else "_ORD_TYPES"
        kl, kr = self.kind(left), self.kind(right)
        # A constant side of a known type: only that exact type takes Python's operator.
        known = None
        for node in args:
            if id(node) in self.folded:
                value = self.folded[id(node)]
                other = right if node is args[0] else left
                if type(value) is CelType and op in ("==", "!="):
                    # ``type(x) == string``: the same value's identity, else the names
                    # (what ``CelType.__eq__`` compares), without a Python-level call.
                    k = left if other is right else right
                    if op == "==":
                        self.emit(f"{t} = {other} is {k} or ({other}.name == {k}.name if "
                                  f"type({other}) is _CelType else {helper}({left}, {right}))")
                    else:
                        self.emit(f"{t} = {other} is not {k} and ({other}.name != {k}.name "
                                  f"if type({other}) is _CelType else {helper}({left}, {right}))")
                    return t
                known = _TYPE_NAMES.get(type(value))
                if known is not None:
                    break
        if known is not None:
            if self.kind(other) is _KINDS_OF[known]:
                self.emit(f"{t} = {left} {op} {right}")
                return t
            test = f"type({other}) is {known}"
        elif any(id(node) in self.folded for node in args):
            # A constant side bounds the work (the policy's own text, list or map).
            if kl is not None and kl is kr and kl in _SAME_KINDS[same]:
                self.emit(f"{t} = {left} {op} {right}")
                return t
            test = f"type({left}) is type({right}) in {same}"
        else:
            # Two values the call brings: texts, lists and maps are charged by what the
            # comparison reads (``stdlib.comparison_cost``), short texts excepted.
            kinds = "_FLAT_EQ_TYPES" if op in ("==", "!=") else "_FLAT_ORD_TYPES"
            flat = _SAME_KINDS[kinds]
            if kl is not None and kl is kr and kl in flat:
                self.emit(f"{t} = {left} {op} {right}")
                return t
            # One side of a known constant-time type: the first test is of the other alone.
            one = next((f"type({o}) is {_TYPE_NAMES[k]}" for k, o in ((kr, left), (kl, right))
                        if k is not None and k in flat and k in _TYPE_NAMES), None)
            if one is not None:
                self.emit(f"if {one}:")
            else:
                self.emit(f"if type({left}) is type({right}) in {kinds} or type({left}) is "
                          f"type({right}) is _str and len({left}) < "
                          f"{self.const(std.COMPARE_CHARS)}:")
            self.emit(f"    {t} = {left} {op} {right}")
            # Numbers of two types (an int argument against a double param): nothing to
            # charge (``comparison_cost`` is 0), so no meter call, as on closures.
            self.emit("else:")
            self.emit(f"    {t} = _compare_any(b, {helper}, {left}, {right}, "
                      f"{self.const(self.max_cost)})")
            return t
        self.emit(f"{t} = {left} {op} {right} if {test} else {helper}({left}, {right})")
        return t

    def membership(self, args: tuple[ast.Node, ...]) -> str:
        item = self.expr(args[0])
        values = self.folded.get(id(args[1]))
        t = self.typed(self.tmp(), bool)
        is_str = self.kind(item) is str
        if type(values) is list and values and all(type(v) is str for v in values):
            # A constant list of texts as a set: only a text equals a text.
            strings = self.const(frozenset(values))
            if is_str:
                self.emit(f"{t} = {item} in {strings}")
            else:
                self.emit(f"{t} = {item} in {strings} if type({item}) is _str "
                          f"else _in({item}, {self.const(values)})")
            return t
        container = self.expr(args[1])
        # A text in a short list (the common ``"admin" in principal.roles``): Python's own
        # search, no charge; the tests below are what this one case passes.
        short = f"type({container}) is _list and len({container}) <= {self.const(IN_FREE)}"
        self.emit(f"if {short}:" if is_str else f"if type({item}) is _str and {short}:")
        self.emit(f"    {t} = {item} in {container}")
        # Any other case (a long list, another value, a map), charged to the call's meter
        # directly: short lists (the common case) add no budget bookkeeping to the
        # expression. An expression with a budget of its own sees the charge when it
        # returns, so it may run on past the bound by at most what it charges itself, once.
        self.emit(f"else: {t} = _member_any(b, {item}, {container}, "
                  f"{self.const(self.max_cost)})")
        return t

    def add(self, args: tuple[ast.Node, ...]) -> str:
        left, right = self.expr(args[0]), self.expr(args[1])
        t = self.tmp()
        self.emit(f"if type({left}) is type({right}) is _int:")
        self.emit(f"    {t} = {left} + {right}")
        self.emit(f"    if not _MIN <= {t} <= _MAX: _overflow()")
        self.emit(f"elif type({left}) is type({right}) is _float:")
        self.emit(f"    {t} = {left} + {right}")
        self.emit(f"elif type({left}) in _SEQS and type({right}) in _SEQS:")
        with self.indent():
            self.emit(f"{t} = _concat({left}, {right})")
            self.charge(f"len({left}) + len({right})")
        self.emit("else:")
        self.emit(f"    {t} = _add(None, {left}, {right})")
        return t

    def logical(self, node: ast.Call) -> str:
        """An ``&&`` or ``||`` chain, flattened: the first absorbing operand decides, else
        the first error (a non-bool operand is one), else the other bool."""
        name = node.function
        operands: list[ast.Node] = []
        stack: list[ast.Node] = [node]
        while stack:
            n = stack.pop()
            if (
                isinstance(n, ast.Call)
                and n.function == name
                and n.target is None
                and len(n.args) == 2
                and id(n) not in self.folded
            ):
                stack.extend(reversed(n.args))
            else:
                operands.append(n)
        stop = "True" if name == "_||_" else "False"
        other = "False" if name == "_||_" else "True"
        t, err, v = self.tmp(), self.tmp(), self.tmp()
        op = self.const(name)
        self.emit(f"{err} = None")
        self.emit("while True:")
        with self.indent(1):
            for operand in operands:

                boolean = False

                def body(operand: ast.Node = operand) -> None:
                    nonlocal boolean
                    x = self.expr(operand)
                    boolean = self.kind(x) is bool
                    self.emit(f"{v} = {x}")

                self.try_catch_errors(body, [f"if {err} is None: {err} = {_UNTRACED}"])
                self.emit("else:")
                self.emit(f"    if {v} is {stop}:")
                self.emit(f"        {t} = {stop}")
                self.emit("        break")
                if not boolean:  # a bool that is not ``stop`` is ``other``
                    self.emit(f"    if {v} is not {other} and {err} is None:")
                    self.emit(f"        {err} = _logic_error({op}, {v})")
            self.emit(f"if {err} is not None: raise _again({err})")
            self.emit(f"{t} = {other}")
            self.emit("break")
        return self.typed(t, bool)

    def conditional(self, args: tuple[ast.Node, ...]) -> str:
        cond_node, then_node, else_node = args
        folded = self.folded.get(id(cond_node), None)
        if id(cond_node) in self.folded and folded is True:
            return self.expr(then_node)
        if id(cond_node) in self.folded and folded is False:
            return self.expr(else_node)
        c = self.expr(cond_node)
        t = self.tmp()
        self.emit(f"if {c} is True:")
        with self.indent():
            self.emit(f"{t} = {self.expr(then_node)}")
        self.emit(f"elif {c} is False:")
        with self.indent():
            self.emit(f"{t} = {self.expr(else_node)}")
        self.emit("else:")
        self.emit(f"    _no_overload({self.const('_?_:_')}, {c})")
        return t

    # ------------------------------------------------------------------ comprehensions

    def loop_header(self, node: ast.Comprehension, it_local: str) -> None:
        r = self.expr(node.iter_range)
        items = self.tmp()
        macro = self.const(node.macro or "comprehension")
        self.emit(f"{items} = {r} if type({r}) is _list else _iter_range({r}, {macro})")
        self.emit(f"for {it_local} in {items}:")
        self.budget = True
        self.emit(f"    {self.bud} -= {self.const(iteration_cost(macros.body_size(node)))}")
        self.emit(f"    if {self.bud} < 0: _cost_exceeded()")

    def comprehension(self, node: ast.Comprehension) -> str:
        two = bool(node.iter_var2)
        special = None if two else self.special_macro(node)
        if special is not None:
            return special
        it_local, it2_local, accu = self.tmp(), self.tmp(), self.tmp()
        r = self.expr(node.iter_range)
        items = self.tmp()
        macro = self.const(node.macro or "comprehension")
        self.emit(f"{items} = {'_iter_pairs' if two else '_iter_range'}({r}, {macro})")
        self.store_or_error(accu, node.accu_init)
        self.scopes.append((node.accu_var, accu, True))
        iter_vars = [(node.iter_var, it_local, False)]
        if two:
            iter_vars.append((node.iter_var2, it2_local, False))
        self.scopes.extend(iter_vars)
        targets = f"{it_local}, {it2_local}" if two else it_local
        self.emit(f"for {targets} in {items}:")
        self.budget = True
        with self.indent(1):
            self.emit(f"{self.bud} -= {self.const(iteration_cost(macros.body_size(node)))}")
            self.emit(f"if {self.bud} < 0: _cost_exceeded()")

            def cond() -> None:
                c = self.expr(node.loop_condition)
                self.emit(f"if {c} is False: break")

            self.try_catch_errors(cond, ["pass"])
            self.store_or_error(accu, node.loop_step)
        del self.scopes[-len(iter_vars):]  # iteration variables are not visible in the result
        try:
            return self.expr(node.result)
        finally:
            self.scopes.pop()

    def special_macro(self, node: ast.Comprehension) -> str | None:
        """The standard macros as plain loops, when the node has cel-go's expansion shape
        (the same shapes the closure compiler specialises: ``macros.classify``)."""
        shape = macros.classify(node)
        if shape is None:
            return None
        if isinstance(shape, macros.MapFilter):
            return self.map_filter(node, shape.predicate, shape.transform)
        if shape.kind == "exists_one":
            return self.exists_one(node, shape.predicate)
        return self.quantifier(node, shape.predicate, stop=shape.kind == "exists")

    def quantifier(self, node: ast.Comprehension, pred: ast.Node, *, stop: bool) -> str:
        t, err, p, x = self.tmp(), self.tmp(), self.tmp(), self.tmp()
        macro = self.const(node.macro)
        decided, other = ("True", "False") if stop else ("False", "True")
        self.emit(f"{err} = None")
        self.emit(f"{t} = {other}")
        self.loop_header(node, x)
        self.scopes.append((node.iter_var, x, False))
        with self.indent(1):

            boolean = False

            def body() -> None:
                nonlocal boolean
                found = self.expr(pred)
                boolean = self.kind(found) is bool
                self.emit(f"{p} = {found}")

            self.try_catch_errors(body, [f"if {err} is None: {err} = {_UNTRACED}", "continue"])
            self.emit(f"if {p} is {decided}:")
            self.emit(f"    {t} = {decided}")
            self.emit("    break")
            if not boolean:  # a bool that is not ``decided`` is ``other``
                self.emit(f"if {p} is not {other} and {err} is None:")
                self.emit(f"    {err} = _predicate_error({macro}, {p})")
        self.scopes.pop()
        self.emit("else:")
        self.emit(f"    if {err} is not None: raise _again({err})")
        return self.typed(t, bool)

    def exists_one(self, node: ast.Comprehension, pred: ast.Node) -> str:
        t, count, x = self.tmp(), self.tmp(), self.tmp()
        macro = self.const("exists_one")
        self.emit(f"{count} = 0")
        self.loop_header(node, x)
        self.scopes.append((node.iter_var, x, False))
        with self.indent(1):
            p = self.expr(pred)
            self.emit(f"if {p} is True: {count} += 1")
            if self.kind(p) is not bool:
                self.emit(f"elif {p} is not False: _no_overload({macro}, {p})")
        self.scopes.pop()
        self.emit(f"{t} = {count} == 1")
        return self.typed(t, bool)

    def map_filter(
        self, node: ast.Comprehension, pred: ast.Node | None, value: ast.Node | None
    ) -> str:
        out, x = self.tmp(), self.tmp()
        macro = self.const(node.macro)
        self.emit(f"{out} = []")
        self.loop_header(node, x)
        self.scopes.append((node.iter_var, x, False))
        with self.indent(1):
            if pred is not None:
                p = self.expr(pred)
                self.emit(f"if {p} is False: continue")
                if self.kind(p) is not bool:
                    self.emit(f"if {p} is not True: _no_overload({macro}, {p})")
            v = x if value is None else self.expr(value)
            self.emit(f"{out}.append({v})")
        self.scopes.pop()
        return self.typed(out, list)


MISSING_PATTERN: Final = object()


class _Indent:
    def __init__(self, gen: _Gen, blocks: int) -> None:
        self.gen = gen
        self.blocks = blocks

    def __enter__(self) -> None:
        self.gen.depth += 1
        self.gen.blocks += self.blocks
        if self.gen.depth > _MAX_DEPTH or self.gen.blocks > 18:
            raise _TooDeep("nested too deeply for generated code")

    def __exit__(self, *exc: object) -> None:
        self.gen.depth -= 1
        self.gen.blocks -= self.blocks


# ---------------------------------------------------------------------------- assembly

_FACTORIES: dict[str, Callable[..., Run]] = {}
_FACTORIES_MAX: Final = 4096


def generate_source(checked: Checked) -> tuple[str, list[Any]]:
    """The factory source for a checked tree and the constants to call it with."""
    source, consts, _ = _generate(checked)
    return source, consts


def _generate(checked: Checked) -> tuple[str, list[Any], list[tuple[int, ast.Literal]]]:
    gen = _Gen(checked)
    result = gen.expr(checked.ast)
    if id(checked.ast) in gen.folded and isinstance(gen.folded[id(checked.ast)], list | dict):
        # Never hand out a folded constant itself: callers may mutate results.
        gen.emit(f"return _deepcopy({result})")
    else:
        gen.emit(f"return {result}")
    params = ", ".join(f"_k{i}" for i in range(len(gen.consts)))
    head = ["def _make(" + params + "):", "    def _f(b):"]
    tail: list[str] = []
    if gen.budget and gen.bud != "_bud":
        # Charged to the meter itself (``reads_variables``); without one, a meter of its own.
        head += [
            "        _m = b.get(_METER)",
            f"        if _m is None: _m = _Meter({gen.const(checked.limits.max_cost)})",
            "        if _m.left < 0: _cost_exceeded()",
        ]
    elif gen.budget:
        # The call's meter when the engine passes one (what is left of the call's budget;
        # spent units are charged back however the evaluation ends), else one budget.
        # Inline, not helper calls: this runs on every rule of every call.
        head += [
            "        _m = b.get(_METER)",
            f"        _bud = {gen.const(checked.limits.max_cost)} if _m is None else _m.left",
            "        if _bud < 0: _cost_exceeded()",
            "        _b0 = _bud",
        ]
        tail = ["        finally:",
                "            if _m is not None: _m.left -= _b0 - _bud"]
    else:
        # Charges nothing, yet refuses a call whose meter ran out, as closures do: after
        # the budget is spent no rule decides, however cheap (a cheap ``allow`` fired).
        head += ["        _m = b.get(_METER)",
                 "        if _m is not None and _m.left < 0: _cost_exceeded()"]
    params = ", ".join(f"_k{i}" for i in range(len(gen.consts)))  # the head's may add one
    head[0] = "def _make(" + params + "):"
    source = "\n".join(
        [
            *head,
            "        try:",
            *gen.lines,
            "        except _CelError:",
            "            raise",
            "        except RecursionError:",
            "            _too_deep(_m)",
            "        except Exception as _x:",
            "            _failed(_x)",
            *tail,
            "    return _f",
            "",
        ]
    )
    return source, gen.consts, gen.literal_slots


# ---------------------------------------------------------------------------- shapes


class _Unshaped(Exception):
    """A tree ``_shape`` does not describe (its source is generated each time)."""


def _value_key(value: Any, depth: int = 0) -> Any:
    """A key equal for two folded constants only when they are the same CEL value."""
    t = type(value)
    if t in _OPAQUE or t is bool or value is None:
        return (t, repr(value))
    if depth < 8 and t is list:
        return (list, tuple(_value_key(v, depth + 1) for v in value))
    if depth < 8 and t is dict:
        return (dict, tuple((_value_key(k, depth + 1), _value_key(v, depth + 1))
                            for k, v in value.items()))
    if t is CelType:
        return (CelType, value.name)
    raise _Unshaped


@dataclass(frozen=True, slots=True)
class Shape:
    """``_shape``'s result."""

    key: tuple[Any, ...]
    literals: list[ast.Literal]
    """Every literal with a constant of its own, in the order of ``key``."""
    inspected: frozenset[int]
    """Ids of those whose value code generation reads (in ``key`` by value)."""


def _shape(checked: Checked) -> Shape | None:
    """What generated code depends on, and the literals it only passes on as constants.

    Two checked trees with equal keys generate the same source; their constants differ
    only in those literals (each has a constant of its own, ``_Gen.literal``). So the key
    holds everything ``_Gen`` reads: node kinds, field and variable names, overloads, the
    limits, every folded constant that is not such a literal (by value), and the values
    it inspects: a ``matches`` pattern, ``true``/``false``/``null``, and the ``1`` of an
    ``exists_one`` step (``macros.classify``). None for a tree it does not describe.
    """
    folded, references, overloads = checked.constants, checked.references, checked.overloads
    out: list[Any] = [checked.limits]
    literals: list[ast.Literal] = []
    exact: set[int] = set()
    inspected: set[int] = set()

    def walk(node: ast.Node, read: bool) -> None:
        key = id(node)
        if key in folded:
            value = folded[key]
            if type(node) is ast.Literal and type(value) in _OPAQUE:
                literals.append(node)  # a constant of its own (``_Gen.literal``)
                if not read and key not in exact:
                    out.append(type(value))
                    return
                inspected.add(key)
            out.append(_value_key(value))
            return
        ref = references.get(key)
        if ref is not None:
            out.append(ref)
            return
        t = type(node)
        if t is ast.Ident:  # neither a variable nor a constant: cel.bind's `cel`
            assert isinstance(node, ast.Ident)
            out.append(("ident", node.name))
        elif t is ast.Select:
            assert isinstance(node, ast.Select)
            out.append(("select", node.field, node.test_only))
            walk(node.operand, False)
        elif t is ast.Call:
            assert isinstance(node, ast.Call)
            overload = overloads[key]
            out.append(("call", node.function, len(node.args), node.target is not None,
                        overload))
            if node.target is not None:
                walk(node.target, False)
            pattern = overload.method and overload.name == "matches" and len(node.args) == 1
            for a in node.args:
                walk(a, pattern)
        elif t is ast.ListLit:
            assert isinstance(node, ast.ListLit)
            out.append(("list", len(node.elements)))
            for e in node.elements:
                walk(e, False)
        elif t is ast.MapLit:
            assert isinstance(node, ast.MapLit)
            out.append(("map", len(node.entries)))
            for k, v in node.entries:
                walk(k, False)
                walk(v, False)
        elif t is ast.Comprehension:
            assert isinstance(node, ast.Comprehension)
            out.append(("comprehension", node.macro, node.iter_var, node.iter_var2,
                        node.accu_var))
            step = node.loop_step  # exists_one's `accu + 1` (read by macros.classify)
            if isinstance(step, ast.Call) and step.function == "_?_:_" and len(step.args) == 3:
                increment = step.args[1]
                if isinstance(increment, ast.Call):
                    exact.update(id(a) for a in increment.args)
            for child in (node.iter_range, node.accu_init, node.loop_condition, node.loop_step,
                          node.result):
                walk(child, False)
        else:
            raise _Unshaped

    try:
        walk(checked.ast, False)
    except (_Unshaped, RecursionError):
        return None
    shared_nodes = ast.shared_literals(literals)
    if shared_nodes:  # by value, at their positions
        out.extend(shared_nodes)
        inspected.update(id(literals[i]) for entry in shared_nodes for i in entry[1])
    return Shape(tuple(out), literals, frozenset(inspected))


@dataclass(frozen=True, slots=True)
class _Template:
    """The generated source of one shape, and where its literals go among the constants."""

    source: str
    consts: tuple[Any, ...]
    slots: tuple[tuple[int, int], ...]
    """``(constant index, index of the literal in the shape's literals)``."""

    def constants(self, literals: list[ast.Literal]) -> tuple[Any, ...]:
        consts = list(self.consts)
        for slot, i in self.slots:
            value = literals[i].value
            consts[slot] = _shared((type(value), repr(value)), value)
        return tuple(consts)


_TEMPLATES: dict[tuple[Any, ...], _Template] = {}
_TEMPLATES_MAX: Final = 20_000


Generated = tuple[str, tuple[Any, ...], list[tuple[int, ast.Literal]]]
"""A factory's source, its constants, and which of them are the tree's own literals."""


def _source(checked: Checked) -> tuple[Generated, Shape | None]:
    """The factory source and its constants; generated once per shape (``_shape``): a
    policy set's expressions mostly differ only in literals, and generating the text was
    the largest part of a load."""
    shaped = _shape(checked)
    if shaped is not None:
        template = _TEMPLATES.get(shaped.key)
        if template is not None:
            literals = shaped.literals
            return (template.source, template.constants(literals),
                    [(slot, literals[i]) for slot, i in template.slots]), shaped
    source, consts, literal_slots = _generate(checked)
    if shaped is not None:
        if len(_TEMPLATES) >= _TEMPLATES_MAX:
            _TEMPLATES.clear()
        _TEMPLATES[shaped.key] = make_template(source, consts, literal_slots, shaped.literals)
    return (source, tuple(consts), literal_slots), shaped


def make_template(source: str, consts: list[Any], literal_slots: list[tuple[int, ast.Literal]],
             literals: list[ast.Literal]) -> _Template:
    """The template of one generated source (``literals``: its tree's, from ``_shape``)."""
    index = {id(node): i for i, node in enumerate(literals)}
    return _Template(source, tuple(consts), tuple((slot, index[id(node)])
                                                  for slot, node in literal_slots))


_PENDING: list[GeneratedProgram | FusedRules] = []
_PENDING_MAX: Final = 50_000
_LOCK = threading.Lock()


def generated_program(checked: Checked) -> GeneratedProgram:
    """The generated-code program for a checked tree: its source is generated now and
    compiled with the next batch (``generate_pending``), unless the same code was compiled
    before."""
    return generated_with_source(checked)[0]


def generated_with_source(
    checked: Checked,
) -> tuple[GeneratedProgram, Generated | None, Shape | None]:
    """``generated_program``, what it was made from (None when it runs closures) and the
    tree's shape (``_shape``)."""
    program = GeneratedProgram(checked.source, checked.ast, _no_closures, 0, checked.limits)
    try:
        generated, shaped = _source(checked)
    except (_TooDeep, RecursionError):  # too deep for generated code: closures
        _fall_back(program, checked)
        return program, None, None
    _schedule(program, checked, generated[0], generated[1])
    return program, generated, shaped


def program_from_source(source: str, tree: ast.Node, limits: Limits, code: str,
                        consts: tuple[Any, ...],
                        checked: Callable[[], Checked]) -> GeneratedProgram:
    """The program of an expression whose factory source and constants are known already
    (the front end's cache, ``compiler``); ``checked`` checks the tree, needed only if
    Python's compiler refuses the source (the closures of the checked tree then run)."""
    program = GeneratedProgram(source, tree, _no_closures, 0, limits)
    _schedule(program, checked, code, consts)
    return program


# ---------------------------------------------------------------------------- fused rules

class FusedRules:
    """All the rule conditions of one policy as one generated function.

    The decision engine evaluates a policy's rules one after the other on the same
    bindings and the same meter; as one function each rule's own code runs inline (no call,
    no meter lookup, no loop step in the engine), the names every call binds (``args``,
    ``principal``, ...) are read once for all rules, and the common result, no rule fired,
    is ``None``. Each rule's code is its own generated code, unchanged: the same budget
    charges, the same errors (a rule's exception is its hit, never its neighbour's), in
    rule order. ``run(bindings, meter, start)`` evaluates the rules from ``start`` on and
    returns the hits in order, or stops after a rule that fired and has a
    ``messageExpression`` (``stops``): the engine evaluates that message, which draws on
    the meter, before the next rule runs, as it does rule by rule, then resumes.

    ``run`` is None until the load's batch is compiled (``generate_pending``), and stays
    None when Python's compiler refuses the fused source: the engine then runs the rules
    one by one, as for rules whose code is not generated.
    """

    __slots__ = ("_pending", "_python", "run")

    def __init__(self, source: str, consts: tuple[Any, ...]) -> None:
        self._pending: tuple[None, str, tuple[Any, ...]] | None = (None, source, consts)
        self._python = ""
        self.run: FusedRun | None = None

    def python_source(self) -> str:
        if self._pending is not None:
            generate_pending()
        return self._python

    def _install(self, factory: Callable[..., Any] | None) -> None:
        pending = self._pending
        if pending is None:
            return
        if factory is not None:
            self._python = pending[1]
            self.run = factory(*pending[2])
        self._pending = None


ALWAYS_BOUND: Final = ("args", "principal", "history", "request", "now", "tool", "params",
                       "variables")
"""Names the decision engine binds for every rule (``None`` when no rule reads them): a
fused function reads each once, for all its rules, instead of once per rule."""

_READ = re.compile(r"^( *)try:\n\1    (_t\d+) = b\[(_k\d+)\]\n\1except KeyError:\n"
                   r"\1    _unbound\(\3\)$", re.M)
"""A name read from the bindings (``_Gen.variable``), as generated."""
_SELECT = re.compile(
    r"^( *)(_t\d+) = (_t\d+)\[(_k\d+)\] if \(type\(\3\) is _dict or type\(\3\) is _proxy\) "
    r"and \4 in \3 else \3\._done\[\4\] if type\(\3\) is _vars and \4 in \3\._done "
    r"else \3\[\4\] if type\(\3\) in _LAZY and \4 in \3\._defs else _select\(\3, \4\)$", re.M)
"""A field selected from a value (``_Gen.select``), as generated."""
MEMO_ROOTS: Final = frozenset({"args", "principal", "params", "variables"})
"""Names whose fields a fused function reads once for all its rules: during a policy's
rules they are never written (the arguments are repaired before), so a field read again
is the same value (a variable is computed once and kept by ``Variables``), and a field
that fails fails again (it is read again then, never remembered)."""
_CONST = re.compile(r"\b_k(\d+)\b")
_TEMP = re.compile(r"\b_t(\d+)\b")

_LOCAL_HEAD: Final = ("        _m = b.get(_METER)", "        _bud = ",
                      "        if _bud < 0: _cost_exceeded()", "        _b0 = _bud")
_DIRECT_HEAD: Final = ("        _m = b.get(_METER)", "        if _m is None: _m = _Meter(",
                       "        if _m.left < 0: _cost_exceeded()")
_CHECK_HEAD: Final = ("        _m = b.get(_METER)",
                      "        if _m is not None and _m.left < 0: _cost_exceeded()")
_HANDLERS: Final = ["        except _CelError:", "            raise",
                    "        except RecursionError:", "            _too_deep(_m)",
                    "        except Exception as _x:", "            _failed(_x)"]
_LOCAL_TAIL: Final = ["        finally:", "            if _m is not None: _m.left -= _b0 - _bud"]


@dataclass(frozen=True, slots=True)
class _Parts:
    """One generated factory source (``_generate``'s layout), taken apart."""

    budget: str
    """"check" (charges nothing, but refuses a meter run out), "local" (a local copy of
    the meter) or "direct" (the meter)."""
    body: str
    """The body, indented from column 0, ending with ``_v = <result>``."""
    reads: tuple[tuple[str, int], ...]
    """``(temporary, constant index)`` of every name the body reads from the bindings."""
    selects: tuple[tuple[str, int], ...]
    """``(temporary read, field constant index)`` of every field selected from such a
    name (``args.x``, ``variables.y``): what a fused function reads once."""


_PARTS: dict[str, _Parts | None] = {}


def _parts(source: str) -> _Parts | None:
    """``source`` taken apart; None for any layout but ``_generate``'s (no fusion)."""
    if source in _PARTS:
        return _PARTS[source]
    found = _take_apart(source)
    if len(_PARTS) >= _FACTORIES_MAX:
        _PARTS.clear()
    _PARTS[source] = found
    return found


def _take_apart(source: str) -> _Parts | None:
    lines = source.split("\n")
    if len(lines) < 4 or not lines[0].startswith("def _make(") or lines[1] != "    def _f(b):":
        return None
    try:
        start = lines.index("        try:")
    except ValueError:
        return None
    head = lines[2:start]
    if tuple(head) == _CHECK_HEAD:
        budget, tail = "check", _HANDLERS
    elif len(head) == 4 and all(h.startswith(p) for h, p in zip(head, _LOCAL_HEAD, strict=True)):
        budget, tail = "local", _HANDLERS + _LOCAL_TAIL
    elif len(head) == 3 and all(h.startswith(p) for h, p in zip(head, _DIRECT_HEAD, strict=True)):
        budget, tail = "direct", _HANDLERS
    else:
        return None
    end = len(lines) - len(tail) - 2
    if lines[end:] != [*tail, "    return _f", ""] or end <= start + 1:
        return None
    body = lines[start + 1:end]
    last = body[-1]
    if not last.startswith("            return ") or not all(
            line.startswith("            ") for line in body):
        return None
    body[-1] = "            _v = " + last[len("            return "):]
    text = "\n".join(line[12:] for line in body)
    reads = tuple((m.group(2), int(m.group(3)[2:])) for m in _READ.finditer(text))
    read_temps = {temp for temp, _ in reads}
    selects = tuple((m.group(3), int(m.group(4)[2:])) for m in _SELECT.finditer(text)
                    if m.group(3) in read_temps)
    return _Parts(budget, text, reads, selects)


MAX_FUSED_RULES: Final = 64
"""Rules fused into one function at most: Python's compiler takes time and memory that
grow with a function's size, and a policy of thousands of rules must not make a load
slow (its rules then run one by one: the gain of fusing is per rule, not per policy)."""

_FUSED: dict[tuple[Any, ...], tuple[str, tuple[int, ...]]] = {}
"""Fused sources by their rules' sources, stops and hoisted names (a policy set repeats
policies of one shape: they share one source), with the hoisted names' positions in
``ALWAYS_BOUND``."""


def fused_rules(programs: Sequence[Program], stops: Sequence[bool]) -> FusedRules | None:
    """One function evaluating all of ``programs`` (a policy's rule conditions, in order;
    ``stops``: which of them has a ``messageExpression``), compiled with the next batch.

    None when one of them is not generated code (closures, the reference backend) or
    there are more than ``MAX_FUSED_RULES``: the engine runs such a policy's rules one by
    one."""
    if not programs or len(programs) > MAX_FUSED_RULES:
        return None
    sources: list[str] = []
    pieces: list[tuple[_Parts, tuple[Any, ...]]] = []
    for program in programs:
        if type(program) is not GeneratedProgram:
            return None
        pending = program._pending
        source, consts = (pending[1], pending[2]) if pending is not None else (
            program._python, program._consts)
        parts = _parts(source) if source else None
        if parts is None:
            return None
        sources.append(source)
        pieces.append((parts, consts))
    # Which reads are of a name every call binds: by the constant's value (the name).
    hoist = tuple(tuple(type(consts[k]) is str and consts[k] in ALWAYS_BOUND
                        for _, k in parts.reads) for parts, consts in pieces)
    key = (tuple(sources), tuple(stops), tuple(
        consts[k] if h else None for (parts, consts), hs in zip(pieces, hoist, strict=True)
        for (_, k), h in zip(parts.reads, hs, strict=True)), tuple(
        consts[k] for parts, consts in pieces for _, k in parts.selects))
    made = _FUSED.get(key)
    if made is None:
        made = _fused_source(pieces, stops, hoist)
        if len(_FUSED) >= _FACTORIES_MAX:
            _FUSED.clear()
        _FUSED[key] = made
    source, names = made
    consts = tuple(c for _, cs in pieces for c in cs) + tuple(ALWAYS_BOUND[j] for j in names)
    fused = FusedRules(source, consts)
    factory = _FACTORIES.get(source)
    if factory is not None:
        fused._install(factory)
    else:
        with _LOCK:
            _PENDING.append(fused)
    return fused


def _memo(found: re.Match[str], root: dict[str, str], consts: tuple[Any, ...],
          memos: dict[tuple[str, Any], str]) -> str:
    """A select line that reads a remembered field: read only the first time, and only
    remembered once read without an error."""
    ind, temp, operand, k = found.group(1, 2, 3, 4)
    name = root.get(operand)
    memo = None if name is None else memos.get((name, consts[int(k[2:])]))
    if memo is None:
        return found.group(0)
    line = found.group(0)[len(ind):]
    return "\n".join([f"{ind}if {memo} is _MISS:", f"{ind}    {line}",
                      f"{ind}    {memo} = {temp}", f"{ind}else:", f"{ind}    {temp} = {memo}"])


def _fused_select(found: re.Match[str], root: Mapping[str, str]) -> str:
    """A select line of a fused rule (``_SELECT``) with one type test in line: the type
    its operand has on the engine's paths (a policy's ``variables``, its read-only
    ``params``, the call's ``request`` record, a dict for anything else: the arguments,
    principal, tool, history entries);
    any other case goes to ``_select_any``, which takes the line's own steps."""
    ind, temp, operand, k = found.group(1, 2, 3, 4)
    name = root.get(operand)
    if name == "variables":
        fast = f"{operand}._done[{k}] if type({operand}) is _vars and {k} in {operand}._done"
    elif name == "params":
        fast = f"{operand}[{k}] if type({operand}) is _proxy and {k} in {operand}"
    elif name == "request":
        fast = f"{operand}[{k}] if type({operand}) is _request and {k} in {operand}._defs"
    else:
        fast = f"{operand}[{k}] if type({operand}) is _dict and {k} in {operand}"
    return f"{ind}{temp} = {fast} else _select_any({operand}, {k})"


def _fused_source(pieces: list[tuple[_Parts, tuple[Any, ...]]], stops: Sequence[bool],
                  hoist: tuple[tuple[bool, ...], ...]) -> tuple[str, tuple[int, ...]]:
    params = [f"_k{i}_{n}" for i, (_, consts) in enumerate(pieces) for n in range(len(consts))]
    names: dict[int, None] = {}
    for (parts, consts), hs in zip(pieces, hoist, strict=True):
        for (_, k), h in zip(parts.reads, hs, strict=True):
            if h:
                names[ALWAYS_BOUND.index(consts[k])] = None
    hoisted = sorted(names)
    # Fields of those names selected by more than one rule (or twice by one): read once.
    roots: list[dict[str, str]] = []
    seen: dict[tuple[str, Any], int] = {}
    for (parts, consts), hs in zip(pieces, hoist, strict=True):
        root = {temp: consts[k] for (temp, k), h in zip(parts.reads, hs, strict=True)
                if h and consts[k] in MEMO_ROOTS}
        roots.append(root)
        for temp, k in parts.selects:
            if temp in root:
                field_key = (root[temp], consts[k])
                seen[field_key] = seen.get(field_key, 0) + 1
    memos = {field_key: f"_c{n}" for n, field_key in enumerate(
        [fk for fk, count in seen.items() if count > 1])}
    # The constants are the function's defaults, not closure cells: every call copies
    # all its function's cells into its frame (``COPY_FREE_VARS``), and a cell is an object
    # of its own (some 140 of 48 bytes a 10-rule policy), so at 10,000 rules they outgrew
    # the core's cache (the per-rule cost rose with the number of policies) and after a
    # load all were cold; defaults are one tuple, copied by the call with no instruction.
    # The engine calls ``_p`` with its three arguments only.
    defaults = [*params, *(f"_n{j}" for j in hoisted)]
    lines = ["def _make(" + ", ".join(defaults) + "):",
             "    def _p(b, _m, _s, " + ", ".join(f"{d}={d}" for d in defaults) + "):",
             "        _hits = None"]
    lines += [f"        _r{j} = b[_n{j}]" for j in hoisted]
    if memos:
        lines.append("        " + " = ".join(memos.values()) + " = _MISS")
    # A function that may stop (a rule with a messageExpression, not the last) may be
    # resumed after any such rule: then every rule before the start is skipped.
    guarded = any(stops[:-1])
    for i, ((parts, consts), hs) in enumerate(zip(pieces, hoist, strict=True)):
        body = parts.body
        if memos:
            body = _SELECT.sub(functools.partial(_memo, root=roots[i], consts=consts,
                                                 memos=memos), body)
        for (temp, k), h in zip(parts.reads, hs, strict=True):
            if h:  # the name's read, by the value read once (the pattern is unique per temp)
                j = ALWAYS_BOUND.index(consts[k])
                body = re.sub(rf"^( *)try:\n\1    {temp} = b\[_k{k}\]\n\1except KeyError:\n"
                              rf"\1    _unbound\(_k{k}\)$", rf"\g<1>{temp} = _r{j}", body,
                              count=1, flags=re.M)
        named = {temp: consts[k] for (temp, k), h in zip(parts.reads, hs, strict=True) if h}
        body = _SELECT.sub(functools.partial(_fused_select, root=named), body)
        # Each rule's constants and temporaries get names of their own.
        body = _TEMP.sub(rf"_t{i}_\1", _CONST.sub(rf"_k{i}_\1", body))
        pad = "            " if guarded else "        "
        if guarded:
            lines.append(f"        if _s <= {i}:")
        # One handler level a rule: what the rule's own function's handlers (``_HANDLERS``)
        # make of an error is made out of line, by ``_rule_error``, with its recording.
        lines.append(pad + "try:")
        if parts.budget == "local":  # ``_b0`` first: the ``finally`` then subtracts 0
            lines += [pad + "    _b0 = _bud = _m.left", pad + "    if _bud < 0: _cost_exceeded()"]
        elif parts.budget in ("direct", "check"):
            lines.append(pad + "    if _m.left < 0: _cost_exceeded()")
        lines += [pad + "    " + line for line in body.split("\n")]
        lines += [pad + "except Exception as _e:",
                  pad + f"    _hits = _rule_error(_hits, {i}, _e, _m)",
                  pad + "else:",
                  pad + "    if _v is not False:",
                  pad + f"        _hits = _rule_hit(_hits, {i}, _v)"]
        if stops[i] and i + 1 < len(pieces):
            lines.append(pad + "        if _v is True: return _hits")
        if parts.budget == "local":
            lines += [pad + "finally:", pad + "    _m.left -= _b0 - _bud"]
    lines += ["        return _hits", "    return _p", ""]
    return "\n".join(lines), tuple(hoisted)


def _schedule(program: GeneratedProgram, checked: Checked | Callable[[], Checked], source: str,
              consts: tuple[Any, ...]) -> None:
    object.__setattr__(program, "_pending", (checked, source, consts))
    factory = _FACTORIES.get(source)
    if factory is not None:
        program._install(factory)
        return
    object.__setattr__(program, "evaluate", functools.partial(_first_evaluate, program))
    with _LOCK:
        _PENDING.append(program)
        full = len(_PENDING) >= _PENDING_MAX
    if full:  # programs built outside a load and never evaluated: compile them now
        generate_pending()


def generate_pending() -> None:
    """Compile the code of every program built since the last call, in one ``compile()``.

    Thread-safe; a program evaluated while its batch is being compiled waits for it.
    """
    with _LOCK:
        if not _PENDING:
            return
        batch = list(_PENDING)
        _PENDING.clear()
        sources: dict[str, None] = {}
        for program in batch:
            pending = program._pending
            if pending is not None and pending[1] not in _FACTORIES:
                sources[pending[1]] = None
        factories = _compile_batch(list(sources))
        for program in batch:
            pending = program._pending
            if pending is not None:
                found = factories.get(pending[1]) or _FACTORIES.get(pending[1])
                program._install(found)
        if len(_FACTORIES) + len(factories) > _FACTORIES_MAX:
            _FACTORIES.clear()
        _FACTORIES.update(factories)


def _compile_batch(sources: list[str]) -> dict[str, Callable[..., Run]]:
    """Factories for ``sources``, compiled as one module (one by one if that fails, so
    only a source Python's compiler refuses is left out: its program runs closures)."""
    if not sources:
        return {}
    text = "".join(
        source.replace("def _make(", f"def _make{i}(", 1) for i, source in enumerate(sources)
    )
    namespace = dict(_GLOBALS)
    try:
        exec(compile(text, "<cel>", "exec"), namespace)
    except (SyntaxError, RecursionError, MemoryError, ValueError):
        found: dict[str, Callable[..., Run]] = {}
        for source in sources:
            single = dict(_GLOBALS)
            try:
                exec(compile(source, "<cel>", "exec"), single)
            except (SyntaxError, RecursionError, MemoryError, ValueError):
                continue
            found[source] = single["_make"]
        return found
    return {source: namespace[f"_make{i}"] for i, source in enumerate(sources)}


__all__ = ["FusedRules", "Generated", "GeneratedProgram", "Shape",
           "fused_rules", "generate_pending", "generate_source", "generated_program", "generated_with_source", "program_from_source",
           "shared"]
