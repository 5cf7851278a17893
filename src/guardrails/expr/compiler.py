"""Compile a CEL AST once into a tree of Python closures.

Interpreting a parse tree costs hundreds of microseconds per expression; a closure per
node costs about a microsecond for a typical rule. Each closure takes the per-evaluation
``Activation`` (bindings, comprehension slots, cost budget) and returns a CEL value or
raises ``CelError``. Errors are raised rather than returned so the error-free path has no
checks; ``&&``, ``||``, ``?:`` and the ``all``/``exists`` macros catch them where cel-spec
says an error is absorbed. The cost-limit error is never absorbed.

Names are resolved at compile time: comprehension variables get a slot index, declared
variables are looked up in the bindings, type names are constants, anything else is an
``ExpressionError`` at load time, as are unknown functions and struct literals.
"""

from __future__ import annotations

import copy
import functools
import inspect
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from guardrails.expr import ast, library, macros
from guardrails.expr import stdlib as std
from guardrails.expr.limits import DEFAULT_LIMITS, ITERATION_COST, METER, Limits, cost_of
from guardrails.expr.stdlib import Activation, ErrorValue, charge, no_overload
from guardrails.expr.values import CelError, CelType, CostLimitExceeded, UInt, type_names

Fn = Callable[[Activation], Any]

LIB_FUNCTIONS: Final[Mapping[str, Callable[..., Any]]] = library.FUNCTIONS
LIB_METHODS: Final[Mapping[str, Callable[..., Any]]] = library.METHODS


class ExpressionError(Exception):
    """A load-time problem with an expression, at ``offset`` characters into its source."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset


@dataclass(frozen=True, slots=True)
class Program:
    """A compiled expression: evaluate it as often as needed; it holds no mutable state."""

    source: str
    ast: ast.Node
    _fn: Fn = field(repr=False, compare=False)
    _slots: int = field(default=0, repr=False, compare=False)
    _limits: Limits = field(default=DEFAULT_LIMITS, repr=False, compare=False)

    def evaluate(self, bindings: Mapping[str, Any]) -> Any:
        # The call's meter when the engine passes one (see ``limits.Meter``).
        meter = bindings.get(METER)
        start = self._limits.max_cost if meter is None else meter.left
        if start < 0:
            raise CostLimitExceeded("evaluation cost limit exceeded")
        act = Activation(bindings, self._slots, start)
        try:
            return self._fn(act)
        except CelError:
            raise
        except RecursionError:
            raise CelError("expression evaluation too deep") from None
        except Exception as e:  # fail closed: a non-CEL exception is an evaluation error
            raise CelError(f"evaluation failed: {type(e).__name__}: {e}") from e
        finally:
            if meter is not None:
                meter.left -= start - act.budget


_BINARY: Final[Mapping[str, Callable[[Any, Any], Any]]] = {
    "_==_": std.eq,
    "_!=_": std.ne,
    "_<_": std.lt,
    "_<=_": std.le,
    "_>_": std.gt,
    "_>=_": std.ge,
    "_-_": std.sub,
    "_*_": std.mul,
    "_/_": std.div,
    "_%_": std.mod,
    "@in": std.in_,
    "_[_]": std.index,
}
_OPERATORS: Final = frozenset({"_&&_", "_||_", "_?_:_", "!_", "-_", "_+_", "@not_strictly_false"})


@functools.lru_cache(maxsize=4096)
def _arity_ok(fn: Callable[..., Any], n: int) -> bool:
    """Whether ``fn`` accepts ``n`` positional arguments (cached: signatures are slow to read)."""
    try:
        inspect.signature(fn).bind(*range(n))
    except TypeError:
        return False
    except ValueError:  # builtins without a signature: trust them
        return True
    return True


class _Compiler:
    def __init__(self, declared: Collection[str], limits: Limits, container: str) -> None:
        self.declared = frozenset(declared)
        self.limits = limits
        self.container = container
        self.scopes: list[tuple[str, int, bool]] = []  # (name, slot, is accumulator)
        self.slots = 0
        self.consts: dict[Fn, Any] = {}
        self.folded: dict[int, Any] = {}
        """Constant value of each folded node, by ``id(node)`` (read by the code generator)."""
        self.fold_act = Activation({}, 0, limits.max_cost)

    # -------------------------------------------------------------------- helpers

    def const(self, value: Any) -> Fn:
        def constant(a: Activation) -> Any:
            return value

        self.consts[constant] = value
        return constant

    def fold(self, fn: Fn, parts: list[Fn]) -> Fn:
        """Evaluate a call on constants now; an error stays a run-time error (errors are values)."""
        if not all(p in self.consts for p in parts):
            return fn
        self.fold_act.budget = self.limits.max_cost
        try:
            return self.const(fn(self.fold_act))
        except CelError:
            return fn

    def lookup_scope(self, name: str) -> tuple[int, bool] | None:
        for n, slot, accu in reversed(self.scopes):
            if n == name:
                return slot, accu
        return None

    def resolve_declared(self, name: str) -> str | None:
        """The declared variable a (possibly qualified) name means, container first."""
        if self.container:
            parts = self.container.split(".")
            for i in range(len(parts), 0, -1):
                candidate = ".".join(parts[:i]) + "." + name
                if candidate in self.declared:
                    return candidate
        if name in self.declared:
            return name
        return None

    # -------------------------------------------------------------------- nodes

    def compile(self, node: ast.Node) -> Fn:
        fn = self.compile_node(node)
        if fn in self.consts:
            self.folded[id(node)] = self.consts[fn]
        return fn

    def compile_node(self, node: ast.Node) -> Fn:
        if isinstance(node, ast.Literal):
            return self.const(node.value)
        if isinstance(node, ast.Ident):
            return self.ident(node)
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
        if isinstance(node, ast.StructLit):
            raise ExpressionError(
                f"message construction '{node.type_name}{{...}}' is not supported", node.offset
            )
        raise ExpressionError(f"unsupported expression node {type(node).__name__}", node.offset)

    def ident(self, node: ast.Ident) -> Fn:
        name = node.name
        scoped = self.lookup_scope(name)
        if scoped is not None:
            return self.slot_ref(*scoped)
        var = self.resolve_declared(name)
        if var is not None:
            return self.variable(var)
        found = _type_constant(name)
        if found is not None:
            return self.const(found)
        raise ExpressionError(f"undeclared reference to '{name}'", node.offset)

    def slot_ref(self, slot: int, accu: bool) -> Fn:
        if accu:

            def accumulator(a: Activation) -> Any:
                v = a.slots[slot]
                if type(v) is ErrorValue:
                    raise v.error
                return v

            return accumulator

        def local(a: Activation) -> Any:
            return a.slots[slot]

        return local

    def variable(self, name: str) -> Fn:
        def var(a: Activation) -> Any:
            try:
                return a.vars[name]
            except KeyError:
                raise CelError(f"no value bound for '{name}'") from None

        return var

    def resolve_qualified(self, qualified: str) -> str | CelType | None:
        """What a whole select chain ``a.b.c`` names: a declared variable (its name) or a
        type; None to select field by field. The longest declared prefix wins (cel-spec
        qualified name resolution)."""
        root = qualified.split(".", 1)[0]
        if self.resolve_declared(root) is None or self.resolve_declared(qualified):
            var = self.resolve_declared(qualified)
            if var is not None:
                return var
            return _type_constant(qualified)
        return None

    def select(self, node: ast.Select) -> Fn:
        if not node.test_only:
            qualified = qualified_name(node, self.scopes)
            found = None if qualified is None else self.resolve_qualified(qualified)
            if isinstance(found, str):
                return self.variable(found)
            if found is not None:
                return self.const(found)
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

        return self.fold(sel, [operand])

    def list_lit(self, node: ast.ListLit) -> Fn:
        parts = [self.compile(e) for e in node.elements]

        def make_list(a: Activation) -> list[Any]:
            return [p(a) for p in parts]

        return self.fold(make_list, parts)

    def map_lit(self, node: ast.MapLit) -> Fn:
        parts = [(self.compile(k), self.compile(v)) for k, v in node.entries]

        def make_map(a: Activation) -> dict[Any, Any]:
            return std.make_map([(k(a), v(a)) for k, v in parts])

        return self.fold(make_map, [f for kv in parts for f in kv])

    # -------------------------------------------------------------------- calls

    def call(self, node: ast.Call) -> Fn:
        name = node.function
        if node.target is None:
            special = self.operator(node)
            if special is not None:
                return special
        if node.target is not None:
            if name == "bind" and self.is_cel_namespace(node.target) and len(node.args) == 3:
                return self.bind(node)
            namespace = qualified_name(node.target, self.scopes)
            if namespace is not None and self.resolve_declared(namespace.split(".")[0]) is None:
                qualified = f"{namespace}.{name}"
                if qualified in std.GLOBALS or qualified in LIB_FUNCTIONS:
                    return self.global_call(qualified, node.args, node.offset)
                raise ExpressionError(f"unknown function '{qualified}'", node.offset)
            return self.method_call(node)
        return self.global_call(name, node.args, node.offset)

    def is_cel_namespace(self, target: ast.Node) -> bool:
        return (
            isinstance(target, ast.Ident)
            and target.name == "cel"
            and self.lookup_scope("cel") is None
            and self.resolve_declared("cel") is None
        )

    def bind(self, node: ast.Call) -> Fn:
        """``cel.bind(name, init, body)`` (cel-go bindings extension): a local variable."""
        var, init_node, body_node = node.args
        if not isinstance(var, ast.Ident):
            raise ExpressionError("cel.bind() variable must be a simple identifier", var.offset)
        init = self.compile(init_node)
        slot = self.slots
        self.slots += 1
        self.scopes.append((var.name, slot, True))
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
                a.slots[slot] = ErrorValue(e)
            return body(a)

        return bind

    def args(self, nodes: tuple[ast.Node, ...]) -> list[Fn]:
        return [self.compile(n) for n in nodes]

    def global_call(self, name: str, arg_nodes: tuple[ast.Node, ...], offset: int) -> Fn:
        parts = self.args(arg_nodes)
        std_fn = std.GLOBALS.get(name)
        if std_fn is not None:
            if not _arity_ok(std_fn, len(parts) + 1):
                raise ExpressionError(
                    f"wrong number of arguments to '{name}': {len(parts)}", offset
                )
            fn = self.std_call(std_fn, parts)
            if name in std.FOLDABLE:
                return self.fold(fn, parts)
            return fn
        lib_fn = LIB_FUNCTIONS.get(name)
        if lib_fn is not None:
            if not _arity_ok(lib_fn, len(parts)):
                raise ExpressionError(
                    f"wrong number of arguments to '{name}': {len(parts)}", offset
                )
            return self.lib_call(lib_fn, parts)
        raise ExpressionError(f"unknown function '{name}'", offset)

    def method_call(self, node: ast.Call) -> Fn:
        assert node.target is not None
        name = node.function
        parts = [self.compile(node.target), *self.args(node.args)]
        std_fn = std.METHODS.get(name)
        lib_fn = LIB_METHODS.get(name)
        if name == "matches" and len(parts) == 2 and type(self.consts.get(parts[1])) is str:
            try:
                compiled = std.regex(self.consts[parts[1]])
            except CelError:
                pass  # an invalid pattern stays a run-time error, as cel-spec says
            else:
                return self.fold(
                    self.std_call(std.compiled_matches(compiled), parts[:1]), parts[:1]
                )
        if std_fn is not None and _arity_ok(std_fn, len(parts) + 1):
            fn = self.std_call(std_fn, parts)
            if name in std.FOLDABLE:
                return self.fold(fn, parts)
            return fn
        if lib_fn is not None:
            if not _arity_ok(lib_fn, len(parts)):
                raise ExpressionError(
                    f"wrong number of arguments to method '{name}': {len(parts) - 1}",
                    node.offset,
                )
            return self.lib_call(lib_fn, parts)
        if std_fn is not None:
            raise ExpressionError(
                f"wrong number of arguments to method '{name}': {len(parts) - 1}", node.offset
            )
        raise ExpressionError(f"unknown method '{name}'", node.offset)

    @staticmethod
    def std_call(fn: Callable[..., Any], parts: list[Fn]) -> Fn:
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

    @staticmethod
    def lib_call(fn: Callable[..., Any], parts: list[Fn]) -> Fn:
        """Library functions know nothing of cost: charge what they scan and what they build."""

        base, per = cost_of(fn)

        def call(a: Activation) -> Any:
            values = [p(a) for p in parts]
            units = base
            for v in values:
                t = type(v)
                if t is str or t is bytes or t is list or t is tuple:
                    units += per * len(v)
            charge(a, units)
            r = fn(*values)
            t = type(r)
            if t is str or t is bytes or t is list:
                charge(a, len(r))
            return r

        return call

    # -------------------------------------------------------------------- operators

    def operator(self, node: ast.Call) -> Fn | None:
        name = node.function
        args = node.args
        if name == "_&&_" and len(args) == 2:
            return self.logical(args, absorbing=False)
        if name == "_||_" and len(args) == 2:
            return self.logical(args, absorbing=True)
        if name == "_?_:_" and len(args) == 3:
            return self.conditional(args)
        if name == "!_" and len(args) == 1:
            (p,) = self.args(args)

            def not_(a: Activation) -> bool:
                return std.not_(p(a))

            return self.fold(not_, [p])
        if name == "-_" and len(args) == 1:
            (p,) = self.args(args)

            def neg(a: Activation) -> Any:
                return std.neg(p(a))

            return self.fold(neg, [p])
        if name == "@not_strictly_false" and len(args) == 1:
            (p,) = self.args(args)

            def not_strictly_false(a: Activation) -> bool:
                try:
                    return p(a) is not False
                except CostLimitExceeded:
                    raise
                except CelError:
                    return True

            return not_strictly_false
        if name == "_+_" and len(args) == 2:
            left, right = self.args(args)

            def add(a: Activation) -> Any:
                return std.add(a, left(a), right(a))

            return self.fold(add, [left, right])
        if name == "@in" and len(args) == 2:
            return self.membership(args)
        fn2 = _BINARY.get(name)
        if fn2 is not None and len(args) == 2:
            return self.binary(fn2, *self.args(args))
        if name in _BINARY or name in _OPERATORS:
            raise ExpressionError(f"wrong use of operator '{name}'", node.offset)
        return None

    def binary(self, fn: Callable[[Any, Any], Any], left: Fn, right: Fn) -> Fn:
        if right in self.consts:
            k = self.consts[right]

            def op_const(a: Activation) -> Any:
                return fn(left(a), k)

            return self.fold(op_const, [left])

        def op(a: Activation) -> Any:
            return fn(left(a), right(a))

        return self.fold(op, [left, right])

    def membership(self, args: tuple[ast.Node, ...]) -> Fn:
        item, container = self.args(args)
        values = self.consts.get(container)
        if type(values) is list and values and all(type(v) is str for v in values):
            # `x in ["a", "b"]`: only a string can equal a string.
            strings = frozenset(values)

            def in_strings(a: Activation) -> bool:
                v = item(a)
                if type(v) is str:
                    return v in strings
                return std.in_(v, values)

            return self.fold(in_strings, [item])
        return self.binary(std.in_, item, container)

    def logical(self, args: tuple[ast.Node, ...], *, absorbing: bool) -> Fn:
        """``&&`` (absorbing False) and ``||`` (absorbing True), commutative over errors."""
        left, right = self.args(args)
        stop = absorbing  # the value that decides the result on its own
        op = "_||_" if absorbing else "_&&_"

        def logical(a: Activation) -> bool:
            try:
                lv = left(a)
            except CostLimitExceeded:
                raise
            except CelError as e:
                err = e
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
                err = _logic_error(op, lv)
            try:
                rv = right(a)
            except CostLimitExceeded:
                raise
            except CelError:
                raise err from None
            if rv is stop:
                return absorbing
            raise err

        return self.fold(logical, [left, right])

    def conditional(self, args: tuple[ast.Node, ...]) -> Fn:
        cond, then, other = self.args(args)
        if cond in self.consts and self.consts[cond] is True:
            return then
        if cond in self.consts and self.consts[cond] is False:
            return other

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
        self.slots += 2
        self.scopes.append((node.accu_var, accu_slot, True))
        self.scopes.append((node.iter_var, it_slot, False))
        try:
            special = self.special_macro(node, iter_range, it_slot)
            if special is not None:
                return special
            cond = self.compile(node.loop_condition)
            step = self.compile(node.loop_step)
            self.scopes.pop()  # the iteration variable is not visible in the result
            result = self.compile(node.result)
            self.scopes.append((node.iter_var, it_slot, False))
        finally:
            self.scopes.pop()
            self.scopes.pop()
        macro = node.macro or "comprehension"

        def comprehension(a: Activation) -> Any:
            items = std.iter_range(iter_range(a), macro)
            slots = a.slots
            try:
                slots[accu_slot] = accu_init(a)
            except CostLimitExceeded:
                raise
            except CelError as e:
                slots[accu_slot] = ErrorValue(e)
            for x in items:
                a.budget -= ITERATION_COST
                if a.budget < 0:
                    charge(a, 0)
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
                    slots[accu_slot] = ErrorValue(e)
            return result(a)

        return comprehension

    def special_macro(self, node: ast.Comprehension, iter_range: Fn, slot: int) -> Fn | None:
        """The standard macros as plain loops, when the node has cel-go's expansion shape
        (``macros.classify``)."""
        shape = macros.classify(node)
        if shape is None:
            return None
        if isinstance(shape, macros.MapFilter):
            pred = None if shape.predicate is None else self.compile(shape.predicate)
            value = None if shape.transform is None else self.compile(shape.transform)
            return _map_filter(iter_range, pred, value, slot, shape.kind)
        pred = self.compile(shape.predicate)
        if shape.kind == "exists_one":
            return _exists_one(iter_range, pred, slot)
        return _quantifier(iter_range, pred, slot, stop=shape.kind == "exists")


def qualified_name(node: ast.Node, scopes: Sequence[tuple[str, object, bool]]) -> str | None:
    """``a.b.c`` for a chain of plain selects on an identifier that is not in ``scopes``
    (the comprehension and bind locals of either backend)."""
    parts: list[str] = []
    while isinstance(node, ast.Select) and not node.test_only:
        parts.append(node.field)
        node = node.operand
    if not isinstance(node, ast.Ident) or any(name == node.name for name, _, _ in scopes):
        return None
    parts.append(node.name)
    return ".".join(reversed(parts))


def _type_constant(name: str) -> CelType | None:
    """Type names: the standard ones, and those of library extension types (``net.IP``)."""
    found = std.TYPE_CONSTANTS.get(name)
    if found is None and "." in name:
        found = CelType.registry.get(name)
    return found


def _logic_error(op: str, value: Any) -> CelError:
    """``&&`` / ``||`` given a non-bool operand (also raised by generated code)."""
    return CelError(f"no matching overload for '{op}' applied to ({type_names((value,))}, ...)")


def _predicate_error(macro: str, value: Any) -> CelError:
    """A macro predicate that is not a bool (also raised by generated code)."""
    return CelError(f"no matching overload for '{macro}' predicate of type {type_names((value,))}")


def _quantifier(iter_range: Fn, pred: Fn, slot: int, *, stop: bool) -> Fn:
    """``all`` (stop on False) and ``exists`` (stop on True); errors absorbed like && / ||."""
    macro = "exists" if stop else "all"
    decided: bool = stop

    def quantifier(a: Activation) -> bool:
        items = std.iter_range(iter_range(a), macro)
        slots = a.slots
        err: CelError | None = None
        for x in items:
            a.budget -= ITERATION_COST
            if a.budget < 0:
                charge(a, 0)
            slots[slot] = x
            try:
                v = pred(a)
            except CostLimitExceeded:
                raise
            except CelError as e:
                if err is None:
                    err = e
                continue
            if v is stop:
                return decided
            if v is not (not stop) and err is None:
                err = _predicate_error(macro, v)
        if err is not None:
            raise err
        return not stop

    return quantifier


def _exists_one(iter_range: Fn, pred: Fn, slot: int) -> Fn:
    def exists_one(a: Activation) -> bool:
        items = std.iter_range(iter_range(a), "exists_one")
        slots = a.slots
        count = 0
        for x in items:
            a.budget -= ITERATION_COST
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


def _map_filter(iter_range: Fn, pred: Fn | None, value: Fn | None, slot: int, macro: str) -> Fn:
    def map_filter(a: Activation) -> list[Any]:
        items = std.iter_range(iter_range(a), macro)
        slots = a.slots
        out: list[Any] = []
        for x in items:
            a.budget -= ITERATION_COST
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


Backend = Literal["compiled", "closures", "interpreter"]


def closure_compile(
    node: ast.Node, *, source: str, declared: Collection[str], limits: Limits, container: str
) -> tuple[Program, _Compiler]:
    """The closure program and the compiler that built it (its folded constants)."""
    compiler = _Compiler(declared, limits, container)
    try:
        fn = compiler.compile(node)
    except RecursionError:
        raise ExpressionError("expression is nested too deeply", node.offset) from None
    if fn in compiler.consts:
        value = compiler.consts[fn]
        if isinstance(value, list | dict):
            # Never hand out the folded constant itself: callers may mutate results.
            def fresh(a: Activation) -> Any:
                return copy.deepcopy(value)

            fn = fresh
    return Program(source, node, fn, compiler.slots, limits), compiler


def compile_ast(
    node: ast.Node,
    *,
    source: str = "",
    declared: Collection[str],
    limits: Limits = DEFAULT_LIMITS,
    container: str = "",
    backend: Literal["compiled", "closures"] = "closures",
) -> Program:
    """Compile an already-parsed tree (the parser's output, or one built by hand in tests)."""
    program, compiler = closure_compile(
        node, source=source, declared=declared, limits=limits, container=container
    )
    if backend == "closures":
        return program
    from guardrails.expr.codegen import generate_program

    return generate_program(program, compiler)


_PROGRAMS: dict[tuple[str, frozenset[str], Limits, str, str], Program] = {}
_PROGRAMS_MAX: Final = 20_000


def compile_expression(
    source: str,
    *,
    declared: Collection[str],
    limits: Limits = DEFAULT_LIMITS,
    backend: Backend = "compiled",
    container: str = "",
) -> Program:
    """Parse, check and compile ``source`` once; raise ``ExpressionError`` for load-time errors.

    Programs are immutable, so identical expressions (same text, names, limits) share one:
    policy sets repeat conditions, and loading 10,000 rules must stay fast.
    """
    key = (source, frozenset(declared), limits, container, backend)
    found = _PROGRAMS.get(key)
    if found is not None:
        return found
    program = _compile_expression(source, key[1], limits, backend, container)
    if len(_PROGRAMS) >= _PROGRAMS_MAX:
        _PROGRAMS.clear()
    _PROGRAMS[key] = program
    return program


def _compile_expression(
    source: str, declared: frozenset[str], limits: Limits, backend: Backend, container: str
) -> Program:
    from guardrails.expr.parser import CelSyntaxError, parse

    if backend not in ("compiled", "closures", "interpreter"):
        raise ValueError(f"unknown backend {backend!r}")
    try:
        node = parse(source, limits)
    except CelSyntaxError as e:
        raise ExpressionError(e.message, e.offset) from None
    program, compiler = closure_compile(
        node, source=source, declared=declared, limits=limits, container=container
    )
    if backend == "compiled":
        from guardrails.expr.codegen import generate_program

        return generate_program(program, compiler)
    if backend == "closures":
        return program
    from guardrails.expr.interpreter import interpreted_program

    return interpreted_program(program, declared=declared, container=container)


__all__ = [
    "Backend",
    "ExpressionError",
    "Program",
    "UInt",
    "compile_ast",
    "compile_expression",
]
