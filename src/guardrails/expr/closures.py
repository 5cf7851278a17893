"""The closures backend: a checked CEL tree as a tree of Python closures.

Interpreting a parse tree costs hundreds of microseconds per expression; a closure per
node costs about a microsecond for a typical rule. Each closure takes the per-evaluation
``Activation`` (bindings, comprehension slots, cost budget) and returns a CEL value or
raises ``CelError``. Errors are raised rather than returned so the error-free path has no
checks; ``&&``, ``||``, ``?:`` and the ``all``/``exists`` macros catch them where cel-spec
says an error is absorbed. The cost-limit error is never absorbed.

Everything about names, overloads and constants comes from the front end (``checker``):
this module only turns the ``Checked`` tree into closures; comprehension and bind locals
get a slot index in the activation.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, Final

from guardrails.expr import ast, macros
from guardrails.expr import stdlib as std
from guardrails.expr.checker import (
    BINARY,
    Checked,
    Local,
    logic_error,
    predicate_error,
    reads_variables,
)
from guardrails.expr.lib_common import constant_pattern
from guardrails.expr.limits import (
    METER,
    cost_of,
    extra_cost,
    iteration_cost,
    match_units,
    pattern_arg,
    pattern_charge,
    with_work,
)
from guardrails.expr.program import Fn, Program
from guardrails.expr.stdlib import Activation, ErrorValue, charge, no_overload
from guardrails.expr.values import (
    CelError,
    CostLimitExceeded,
    MatchBoundExceeded,
    again,
    untraced,
)


class _Closures:
    def __init__(self, checked: Checked) -> None:
        self.checked = checked
        self.constants = checked.constants
        self.references = checked.references
        self.overloads = checked.overloads
        self.scopes: list[tuple[str, int]] = []  # (name, slot)
        self.slots = 0

    # -------------------------------------------------------------------- nodes

    def compile(self, node: ast.Node) -> Fn:
        key = id(node)
        if key in self.constants:
            return _const(self.constants[key])
        ref = self.references.get(key)
        if isinstance(ref, Local):
            return self.local(ref)
        if ref is not None:
            return _variable(ref.name)
        if isinstance(node, ast.Select):
            return self.select(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.ListLit):
            return self.list_lit(node)
        if isinstance(node, ast.MapLit):
            return self.map_lit(node)
        if isinstance(node, ast.Comprehension):
            return self.comprehension(node)
        raise AssertionError(f"unchecked node {type(node).__name__}")  # the checker rejects it

    def slot_of(self, name: str) -> int:
        for n, slot in reversed(self.scopes):
            if n == name:
                return slot
        raise AssertionError(f"unscoped local {name}")

    def local(self, ref: Local) -> Fn:
        slot = self.slot_of(ref.name)
        if ref.accumulator:

            def accumulator(a: Activation) -> Any:
                v = a.slots[slot]
                if type(v) is ErrorValue:
                    raise again(v.error)
                return v

            return accumulator

        def local(a: Activation) -> Any:
            return a.slots[slot]

        return local

    def select(self, node: ast.Select) -> Fn:
        operand = self.compile(node.operand)
        name = node.field
        if node.test_only:

            def has(a: Activation) -> bool:
                return std.has_field(operand(a), name)

            return has

        def sel(a: Activation) -> Any:
            v = operand(a)
            if type(v) is dict:
                try:
                    return v[name]
                except KeyError:
                    raise CelError(f"no such key: {name}") from None
            return std.select(v, name)

        return sel

    def list_lit(self, node: ast.ListLit) -> Fn:
        parts = [self.compile(e) for e in node.elements]

        def make_list(a: Activation) -> list[Any]:
            return [p(a) for p in parts]

        return make_list

    def map_lit(self, node: ast.MapLit) -> Fn:
        parts = [(self.compile(k), self.compile(v)) for k, v in node.entries]

        def make_map(a: Activation) -> dict[Any, Any]:
            return std.make_map([(k(a), v(a)) for k, v in parts])

        return make_map

    # -------------------------------------------------------------------- calls

    def call(self, node: ast.Call) -> Fn:
        overload = self.overloads[id(node)]
        if overload.kind == "operator":
            return self.operator(node)
        if overload.kind == "bind":
            return self.bind(node)
        operands = (node.target, *node.args) if overload.method else node.args
        if overload.name == "matches" and overload.method and len(node.args) == 1:
            pattern = self.constants.get(id(node.args[0]))
            if type(pattern) is str:
                try:
                    compiled = std.regex(pattern)
                except CelError:
                    pass  # an invalid pattern stays a run-time error, as cel-spec says
                else:
                    assert node.target is not None
                    target = self.compile(node.target)
                    return std_call(std.compiled_matches(compiled), [target])
        parts = [self.compile(n) for n in operands if n is not None]
        assert overload.fn is not None
        if overload.kind == "std":
            return std_call(overload.fn, parts)
        index = pattern_arg(overload.fn)
        charged = index is not None and index < len(operands) and not constant_pattern(
            overload.fn,
            self.constants.get(id(operands[index])))
        return lib_call(overload.fn, parts, charge_pattern=charged)

    def bind(self, node: ast.Call) -> Fn:
        """``cel.bind(name, init, body)`` (cel-go bindings extension): a local variable."""
        var, init_node, body_node = node.args
        assert isinstance(var, ast.Ident)
        init = self.compile(init_node)
        slot = self.slots
        self.slots += 1
        self.scopes.append((var.name, slot))
        try:
            body = self.compile(body_node)
        finally:
            self.scopes.pop()

        def bind(a: Activation) -> Any:
            try:
                a.slots[slot] = init(a)
            except CostLimitExceeded:
                raise
            except CelError as e:
                a.slots[slot] = ErrorValue(untraced(e))
            return body(a)

        return bind

    # -------------------------------------------------------------------- operators

    def operator(self, node: ast.Call) -> Fn:
        name = node.function
        args = node.args
        if name == "_&&_":
            return self.logical(args, absorbing=False)
        if name == "_||_":
            return self.logical(args, absorbing=True)
        if name == "_?_:_":
            return self.conditional(args)
        if name == "!_":
            p = self.compile(args[0])

            def not_(a: Activation) -> bool:
                return std.not_(p(a))

            return not_
        if name == "-_":
            p = self.compile(args[0])

            def neg(a: Activation) -> Any:
                return std.neg(p(a))

            return neg
        if name == "@not_strictly_false":
            p = self.compile(args[0])

            def not_strictly_false(a: Activation) -> bool:
                try:
                    return p(a) is not False
                except CostLimitExceeded:
                    raise
                except CelError:
                    return True

            return not_strictly_false
        if name == "_+_":
            left, right = self.compile(args[0]), self.compile(args[1])

            def add(a: Activation) -> Any:
                return std.add(a, left(a), right(a))

            return add
        if name == "@in":
            return self.membership(args)
        return self.binary(BINARY[name], args)

    def binary(self, fn: Callable[[Any, Any], Any], args: tuple[ast.Node, ...]) -> Fn:
        left = self.compile(args[0])
        if fn is std.index:
            right = self.compile(args[1])

            def index(a: Activation) -> Any:
                c, k = left(a), right(a)
                if type(k) is not str:
                    charge(a, std.lookup_cost(c, k))
                return std.index(c, k)

            return index
        if fn in _COMPARISONS and not any(id(n) in self.constants for n in args):
            # Two values the call brings: charged by what the comparison reads.
            right = self.compile(args[1])

            def compare(a: Activation) -> Any:
                return std.charged_compare(a, fn, left(a), right(a))

            return compare
        if id(args[1]) in self.constants:
            k = self.constants[id(args[1])]

            def op_const(a: Activation) -> Any:
                return fn(left(a), k)

            return op_const
        right = self.compile(args[1])

        def op(a: Activation) -> Any:
            return fn(left(a), right(a))

        return op

    def membership(self, args: tuple[ast.Node, ...]) -> Fn:
        values = self.constants.get(id(args[1]))
        if type(values) is list and values and all(type(v) is str for v in values):
            # `x in ["a", "b"]`: only a string can equal a string.
            item = self.compile(args[0])
            strings = frozenset(values)

            def in_strings(a: Activation) -> bool:
                v = item(a)
                if type(v) is str:
                    return v in strings
                return std.in_(v, values)

            return in_strings
        item, container = self.compile(args[0]), self.compile(args[1])

        def in_list(a: Activation) -> bool:
            v, c = item(a), container(a)
            if type(c) is list:  # read element by element: charged (limits.IN_SCAN_COST)
                charge(a, std.membership_cost(v, c))
            elif type(v) is not str:
                charge(a, std.lookup_cost(c, v))
            return std.in_(v, c)

        return in_list

    def logical(self, args: tuple[ast.Node, ...], *, absorbing: bool) -> Fn:
        """``&&`` (absorbing False) and ``||`` (absorbing True), commutative over errors."""
        left, right = self.compile(args[0]), self.compile(args[1])
        stop = absorbing  # the value that decides the result on its own
        op = "_||_" if absorbing else "_&&_"

        def logical(a: Activation) -> bool:
            try:
                lv = left(a)
            except CostLimitExceeded:
                raise
            except CelError as e:
                err = untraced(e)
            else:
                if lv is stop:
                    return absorbing
                if lv is (not stop):
                    rv = right(a)
                    if rv is True:
                        return True
                    if rv is False:
                        return False
                    no_overload(op, lv, rv)
                err = logic_error(op, lv)
            try:
                rv = right(a)
            except CostLimitExceeded:
                raise
            except CelError:
                raise again(err) from None
            if rv is stop:
                return absorbing
            raise again(err)

        return logical

    def conditional(self, args: tuple[ast.Node, ...]) -> Fn:
        cond_node, then_node, other_node = args
        folded = self.constants.get(id(cond_node))
        if id(cond_node) in self.constants and (folded is True or folded is False):
            return self.compile(then_node if folded is True else other_node)
        cond, then, other = (self.compile(n) for n in args)

        def conditional(a: Activation) -> Any:
            c = cond(a)
            if c is True:
                return then(a)
            if c is False:
                return other(a)
            no_overload("_?_:_", c)

        return conditional

    # -------------------------------------------------------------------- comprehensions

    def comprehension(self, node: ast.Comprehension) -> Fn:
        iter_range = self.compile(node.iter_range)
        accu_init = self.compile(node.accu_init)
        it_slot = self.slots
        accu_slot = self.slots + 1
        it2_slot = self.slots + 2
        self.slots += 3
        two = bool(node.iter_var2)
        iter_vars = [(node.iter_var, it_slot)] + ([(node.iter_var2, it2_slot)] if two else [])
        self.scopes.append((node.accu_var, accu_slot))
        self.scopes.extend(iter_vars)
        try:
            special = None if two else self.special_macro(node, iter_range, it_slot)
            if special is not None:
                return special
            cond = self.compile(node.loop_condition)
            step = self.compile(node.loop_step)
            del self.scopes[-len(iter_vars):]  # iteration variables are not visible in
            result = self.compile(node.result)  # the result
            self.scopes.extend(iter_vars)
        finally:
            del self.scopes[-len(iter_vars) - 1:]
        macro = node.macro or "comprehension"
        cost = iteration_cost(macros.body_size(node))

        def comprehension(a: Activation) -> Any:
            items: Any
            if two:
                items = std.iter_pairs(iter_range(a), macro)
            else:
                items = std.iter_range(iter_range(a), macro)
            slots = a.slots
            try:
                slots[accu_slot] = accu_init(a)
            except CostLimitExceeded:
                raise
            except CelError as e:
                slots[accu_slot] = ErrorValue(untraced(e))
            for x in items:
                a.budget -= cost
                if a.budget < 0:
                    charge(a, 0)
                if two:
                    slots[it_slot], slots[it2_slot] = x
                else:
                    slots[it_slot] = x
                try:
                    if cond(a) is False:
                        break
                except CostLimitExceeded:
                    raise
                except CelError:
                    pass
                try:
                    slots[accu_slot] = step(a)
                except CostLimitExceeded:
                    raise
                except CelError as e:
                    slots[accu_slot] = ErrorValue(untraced(e))
            return result(a)

        return comprehension

    def special_macro(self, node: ast.Comprehension, iter_range: Fn, slot: int) -> Fn | None:
        """The standard macros as plain loops, when the node has cel-go's expansion shape
        (``macros.classify``)."""
        shape = macros.classify(node)
        if shape is None:
            return None
        cost = iteration_cost(macros.body_size(node))
        if isinstance(shape, macros.MapFilter):
            pred = None if shape.predicate is None else self.compile(shape.predicate)
            value = None if shape.transform is None else self.compile(shape.transform)
            return _map_filter(iter_range, pred, value, slot, shape.kind, cost)
        pred = self.compile(shape.predicate)
        if shape.kind == "exists_one":
            return _exists_one(iter_range, pred, slot, cost)
        return _quantifier(iter_range, pred, slot, cost, stop=shape.kind == "exists")


def _const(value: Any) -> Fn:
    def constant(a: Activation) -> Any:
        return value

    return constant


def _variable(name: str) -> Fn:
    def var(a: Activation) -> Any:
        try:
            return a.vars[name]
        except KeyError:
            raise CelError(f"no value bound for '{name}'") from None

    return var


def std_call(fn: Callable[..., Any], parts: list[Fn]) -> Fn:
    extra = extra_cost(fn)
    if extra is not None and extra is not std.no_cost:
        # Its declared cost (``stdlib._COSTS``), charged before it runs.
        def charged(a: Activation) -> Any:
            values = [p(a) for p in parts]
            charge(a, extra(*values))
            return fn(a, *values)

        return charged
    if len(parts) == 1:
        (p0,) = parts

        def call1(a: Activation) -> Any:
            return fn(a, p0(a))

        return call1
    if len(parts) == 2:
        p0, p1 = parts

        def call2(a: Activation) -> Any:
            return fn(a, p0(a), p1(a))

        return call2

    def calln(a: Activation) -> Any:
        return fn(a, *[p(a) for p in parts])

    return calln


_COMPARISONS: Final = frozenset({std.eq, std.ne, std.lt, std.le, std.gt, std.ge})


def lib_call(fn: Callable[..., Any], parts: list[Fn], *, charge_pattern: bool = True) -> Fn:
    """Library functions know nothing of cost: charge what they scan and what they build."""

    base, per = cost_of(fn)
    pattern = pattern_arg(fn) if charge_pattern else None
    extra = extra_cost(fn)
    reports = with_work(fn)

    def call(a: Activation) -> Any:
        values = [p(a) for p in parts]
        units = base
        for v in values:
            t = type(v)
            if t is str or t is bytes or t is list or t is tuple:
                units += per * len(v)
        if pattern is not None and pattern < len(values):
            units += pattern_charge(a.vars.get(METER), values[pattern])
        if extra is not None:
            units += extra(*values)
        charge(a, units)
        if reports is not None:
            try:
                r, work = reports(*values)
            except MatchBoundExceeded:
                # Over its bound of matches: the call is over its cost bound (an input
                # error of the whole call, whatever the policies' failurePolicy), as if
                # it had run out of the budget; the error keeps its own text.
                a.budget = -1
                raise
            charge(a, match_units(a.vars.get(METER), work))
        else:
            r = fn(*values)
        t = type(r)
        if t is str or t is bytes or t is list:
            charge(a, len(r))
        return r

    return call


def _quantifier(iter_range: Fn, pred: Fn, slot: int, cost: int, *, stop: bool) -> Fn:
    """``all`` (stop on False) and ``exists`` (stop on True); errors absorbed like && / ||."""
    macro = "exists" if stop else "all"
    decided: bool = stop

    def quantifier(a: Activation) -> bool:
        items = std.iter_range(iter_range(a), macro)
        slots = a.slots
        err: CelError | None = None
        for x in items:
            a.budget -= cost
            if a.budget < 0:
                charge(a, 0)
            slots[slot] = x
            try:
                v = pred(a)
            except CostLimitExceeded:
                raise
            except CelError as e:
                if err is None:
                    err = untraced(e)
                continue
            if v is stop:
                return decided
            if v is not (not stop) and err is None:
                err = predicate_error(macro, v)
        if err is not None:
            raise again(err)
        return not stop

    return quantifier


def _exists_one(iter_range: Fn, pred: Fn, slot: int, cost: int) -> Fn:
    def exists_one(a: Activation) -> bool:
        items = std.iter_range(iter_range(a), "exists_one")
        slots = a.slots
        count = 0
        for x in items:
            a.budget -= cost
            if a.budget < 0:
                charge(a, 0)
            slots[slot] = x
            v = pred(a)
            if v is True:
                count += 1
            elif v is not False:
                no_overload("exists_one", v)
        return count == 1

    return exists_one


def _map_filter(iter_range: Fn, pred: Fn | None, value: Fn | None, slot: int, macro: str,
                cost: int) -> Fn:
    def map_filter(a: Activation) -> list[Any]:
        items = std.iter_range(iter_range(a), macro)
        slots = a.slots
        out: list[Any] = []
        for x in items:
            a.budget -= cost
            if a.budget < 0:
                charge(a, 0)
            slots[slot] = x
            if pred is not None:
                keep = pred(a)
                if keep is False:
                    continue
                if keep is not True:
                    no_overload(macro, keep)
            out.append(x if value is None else value(a))
        return out

    return map_filter


def closure_program(checked: Checked) -> Program:
    """The closure program for a checked tree."""
    builder = _Closures(checked)
    node = checked.ast
    fn = builder.compile(node)
    if id(node) in checked.constants:
        value = checked.constants[id(node)]
        if isinstance(value, list | dict):
            # Never hand out the folded constant itself: callers may mutate results.
            def fresh(a: Activation) -> Any:
                return copy.deepcopy(value)

            fn = fresh
    return Program(checked.source, node, fn, builder.slots, checked.limits,
                   reads_variables(checked))


__all__ = ["closure_program", "lib_call", "std_call"]
