"""The front end: resolve names and overloads, check arity, fold constants: a ``Checked`` tree.

As in cel-go, the parser's tree goes through one checking pass whose result is the
contract every backend compiles from (closures in ``closures``, generated code in
``codegen``, cel-python in ``interpreter``). Backends never resolve a name, look up a
function or fold a constant themselves: they read ``Checked.references``,
``Checked.overloads`` and ``Checked.constants``, so all of them accept and reject the same
expressions and agree on what every name means. This module imports no backend.

Names are resolved at load time (cel-spec name resolution): comprehension and
``cel.bind`` variables are ``Local``; declared variables, container first and the longest
declared prefix of a select chain winning, are ``Var``; type names are constants; anything
else is an ``ExpressionError``, as are unknown functions, wrong arities and struct literals.

Folding evaluates a call whose arguments are all constants with the same ``stdlib``
functions the backends call, once, at load; an error while folding leaves the call to run
(errors are values in CEL, and must surface when the expression is evaluated).

Type checking plugs in at ``TYPE_CHECKERS``: each pass gets the ``Checked`` tree (names
and overloads resolved, constants folded) and returns it, typically with ``types`` filled
in, or raises ``ExpressionError``. The list is empty until a typed checker registers.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from guardrails.expr import ast, library
from guardrails.expr import stdlib as std
from guardrails.expr.limits import DEFAULT_LIMITS, Limits
from guardrails.expr.spelling import closest
from guardrails.expr.stdlib import Activation
from guardrails.expr.values import CelError, CelType, type_names

LIB_FUNCTIONS: Final[Mapping[str, Callable[..., Any]]] = library.FUNCTIONS
LIB_METHODS: Final[Mapping[str, Callable[..., Any]]] = library.METHODS


class ExpressionError(Exception):
    """A load-time problem with an expression, at ``offset`` characters into its source."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset


@dataclass(frozen=True, slots=True)
class Var:
    """An ``Ident`` or select chain naming a declared variable (its full declared name)."""

    name: str


@dataclass(frozen=True, slots=True)
class Local:
    """An ``Ident`` naming a comprehension or ``cel.bind`` variable; ``accumulator`` when it
    may hold an error value (accumulators and bindings; the iteration variable never does)."""

    name: str
    accumulator: bool


Reference = Var | Local

OverloadKind = Literal["operator", "bind", "std", "lib"]


@dataclass(frozen=True, slots=True)
class Overload:
    """What a ``Call`` runs. ``operator``: a CEL operator by its function name; ``bind``:
    ``cel.bind``; ``std``: a ``stdlib`` function taking the activation first; ``lib``: a
    library function (no activation; the backend charges its cost). ``method`` when the
    call's target is the first argument; a namespaced global (``net.parseIP``) is not a
    method, and its target is not evaluated."""

    kind: OverloadKind
    name: str
    fn: Callable[..., Any] | None = None
    method: bool = False


@dataclass(frozen=True, slots=True)
class Checked:
    """A checked expression: the tree and, by ``id(node)``, what the checker found.

    The record holds ``ast``, so the node ids stay valid as long as the record lives.
    """

    source: str
    ast: ast.Node
    declared: frozenset[str]
    container: str
    limits: Limits
    constants: Mapping[int, Any] = field(repr=False)
    """Folded value of every constant node (literals, type names, folded calls)."""
    references: Mapping[int, Reference] = field(repr=False)
    """What each ``Ident`` and each select chain standing for a variable names."""
    overloads: Mapping[int, Overload] = field(repr=False)
    """What each ``Call`` runs."""
    types: Mapping[int, Any] = field(default_factory=dict, repr=False)
    """Type of each node, by a type-checking pass (empty when none ran)."""


TypeChecker = Callable[[Checked], Checked]
TYPE_CHECKERS: Final[list[TypeChecker]] = []
"""Passes run on every checked tree, in order (the typed checker registers here)."""


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
"""Binary operators that are plain functions of their two values."""
_ARITY: Final[Mapping[str, int]] = {
    **dict.fromkeys(_BINARY, 2),
    "_&&_": 2,
    "_||_": 2,
    "_+_": 2,
    "_?_:_": 3,
    "!_": 1,
    "-_": 1,
    "@not_strictly_false": 1,
}
"""Every operator and its arity."""
BINARY: Final = _BINARY


@functools.lru_cache(maxsize=4096)
def arity_ok(fn: Callable[..., Any], n: int) -> bool:
    """Whether ``fn`` accepts ``n`` positional arguments (cached: signatures are slow to read)."""
    try:
        inspect.signature(fn).bind(*range(n))
    except TypeError:
        return False
    except ValueError:  # builtins without a signature: trust them
        return True
    return True


def type_constant(name: str) -> CelType | None:
    """Type names: the standard ones, and those of library extension types (``net.IP``)."""
    found = std.TYPE_CONSTANTS.get(name)
    if found is None and "." in name:
        found = CelType.registry.get(name)
    return found


def qualified_name(node: ast.Node, scopes: Sequence[str]) -> str | None:
    """``a.b.c`` for a chain of plain selects on an identifier that is not in ``scopes``."""
    parts: list[str] = []
    while isinstance(node, ast.Select) and not node.test_only:
        parts.append(node.field)
        node = node.operand
    if not isinstance(node, ast.Ident) or node.name in scopes:
        return None
    parts.append(node.name)
    return ".".join(reversed(parts))


def logic_error(op: str, value: Any) -> CelError:
    """``&&`` / ``||`` given a non-bool operand."""
    return CelError(f"no matching overload for '{op}' applied to ({type_names((value,))}, ...)")


def predicate_error(macro: str, value: Any) -> CelError:
    """A macro predicate that is not a bool."""
    return CelError(f"no matching overload for '{macro}' predicate of type {type_names((value,))}")


_MISSING: Final = object()

_FOREIGN_NAMES: Final[Mapping[str, str]] = {
    "input": "Rego's input: the tool's arguments are args (input.args.x is args.x), its "
             "name tool.name, the caller principal",
    "object": "Kubernetes' object: the tool's arguments are args (object.spec.x is args.x)",
    "oldObject": "Kubernetes' oldObject: there is no previous version; earlier calls are "
                 "in history",
    "self": "CEL's self in Kubernetes validation rules: the tool's arguments are args",
    "data": "Rego's data: static data is params",
    "action": "Cedar's action: the tool called is tool.name; a policy's tools are "
              "match: {tools: [...]}",
    "resource": "Cedar's resource: what the call acts on is in its arguments, args "
                "(args.path, args.to)",
    "context": "Cedar's context: the tool's arguments are args; the call's names are args, "
               "tool, principal, history, request, params, now",
    "None": "Python's None is null here; an argument left out is tested with !has(args.x)",
    "nil": "null",
    "NULL": "SQL's NULL is null here; an argument left out is tested with !has(args.x)",
    "undefined": "JavaScript's undefined: an argument left out is tested with "
                 "!has(args.x); null is null",
    "True": "true, in lower case", "False": "false, in lower case",
    "TRUE": "true, in lower case", "FALSE": "false, in lower case",
    "_": "Rego's _ (some element): write list.exists(x, condition)",
    "arguments": "the tool's arguments are args",
    "arg": "the tool's arguments are args",
    "param": "static data is params",
    "parameters": "static data is params",
    "vars": "a variable is read as variables.<name>",
    "var": "a variable is read as variables.<name>",
}
"""Names people bring from other policy languages, and what they are here."""

_FOREIGN_FUNCTIONS: Final[Mapping[str, str]] = {
    "count": "size(x) or x.size()", "len": "size(x) or x.size()", "length": "x.size()",
    "lower": "x.lowerAscii()", "upper": "x.upperAscii()", "toLower": "x.lowerAscii()",
    "toUpper": "x.upperAscii()", "startswith": "x.startsWith(prefix)",
    "endswith": "x.endsWith(suffix)", "any": "list.exists(x, condition)",
    "every": "list.all(x, condition)", "regex.match": "x.matches(pattern)",
    "re_match": "x.matches(pattern)", "match": "x.matches(pattern)",
    "sprintf": "string concatenation: \"a \" + string(x)", "concat": "a + b",
    "to_number": "int(x) or double(x)", "is_null": "x == null",
    "in": "x in list", "includes": "x in list, or s.contains(t) for text",
    "contains": "a method, text first: s.contains(t); for a list, x in list",
    "strip": "x.trim()", "replace_all": "x.replace(a, b)",
    "quantity": "no Kubernetes quantities; compare plain numbers: args.size > 1073741824 "
                "for 1Gi",
    "isQuantity": "type(x) == int || type(x) == double",
}
"""Functions from Rego, Python or JavaScript, and the CEL way to write them."""


def _head(node: ast.Node) -> ast.Ident:
    """The identifier a select chain starts from (``qualified_name`` found one)."""
    while isinstance(node, ast.Select):
        node = node.operand
    assert isinstance(node, ast.Ident)
    return node


def name_hint(name: str, declared: Collection[str], *, foreign: bool = True) -> str:
    """`` (did you mean 'args'?)`` for an undeclared name, or what a name brought from
    Rego or Kubernetes is called here."""
    close = closest(name, sorted(d for d in declared if "." not in d))
    if close:
        return f" (did you mean '{close}'?)"
    found = _FOREIGN_NAMES.get(name) if foreign else None
    return f" ({found})" if found else ""


def function_hint(name: str, *, method: bool = False) -> str:
    """`` (did you mean 'startsWith'?)`` for an unknown function, or its CEL spelling."""
    foreign = _FOREIGN_FUNCTIONS.get(name)
    if foreign:
        return f" (in CEL: {foreign})"
    known = sorted({*std.METHODS, *LIB_METHODS} if method else
                   {*std.GLOBALS, *LIB_FUNCTIONS, *std.METHODS, *LIB_METHODS})
    close = closest(name, known, cutoff=0.8)
    if close:
        return f" (did you mean '{close}'?)"
    namespace = name.rpartition(".")[0]
    members = sorted(k.rpartition(".")[2] for k in known if k.startswith(namespace + "."))
    return f" ({namespace} has: {', '.join(members)})" if namespace and members else ""


class _Checker:
    def __init__(self, declared: frozenset[str], limits: Limits, container: str) -> None:
        self.declared = declared
        self.limits = limits
        self.container = container
        self.scopes: list[tuple[str, bool]] = []  # (name, is accumulator)
        self.constants: dict[int, Any] = {}
        self.references: dict[int, Reference] = {}
        self.overloads: dict[int, Overload] = {}
        self.fold_act = Activation({}, 0, limits.max_cost)

    # -------------------------------------------------------------------- names

    def lookup_scope(self, name: str) -> Local | None:
        for n, accu in reversed(self.scopes):
            if n == name:
                return Local(n, accu)
        return None

    def scope_names(self) -> list[str]:
        return [n for n, _ in self.scopes]

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

    def resolve_qualified(self, qualified: str) -> str | CelType | None:
        """What a whole select chain ``a.b.c`` names: a declared variable (its name) or a
        type; None to select field by field. The longest declared prefix wins (cel-spec
        qualified name resolution)."""
        root = qualified.split(".", 1)[0]
        if self.resolve_declared(root) is None or self.resolve_declared(qualified):
            var = self.resolve_declared(qualified)
            if var is not None:
                return var
            return type_constant(qualified)
        return None

    # -------------------------------------------------------------------- folding

    def value(self, node: ast.Node) -> Any:
        """The folded value of an already checked node, or ``_MISSING``."""
        return self.constants.get(id(node), _MISSING)

    def fold(self, node: ast.Node, compute: Callable[[], Any]) -> None:
        """Record ``compute()`` as the node's value; an error leaves the node to run."""
        self.fold_act.budget = self.limits.max_cost
        try:
            self.constants[id(node)] = compute()
        except CelError:
            return

    def values(self, nodes: Sequence[ast.Node]) -> list[Any] | None:
        found = [self.value(n) for n in nodes]
        return None if any(v is _MISSING for v in found) else found

    # -------------------------------------------------------------------- nodes

    def check(self, node: ast.Node) -> None:
        if isinstance(node, ast.Literal):
            self.constants[id(node)] = node.value
        elif isinstance(node, ast.Ident):
            self.ident(node)
        elif isinstance(node, ast.Select):
            self.select(node)
        elif isinstance(node, ast.Call):
            self.call(node)
        elif isinstance(node, ast.ListLit):
            for e in node.elements:
                self.check(e)
            items = self.values(node.elements)
            if items is not None:
                self.fold(node, lambda: list(items))
        elif isinstance(node, ast.MapLit):
            for k, v in node.entries:
                self.check(k)
                self.check(v)
            keys = self.values([k for k, _ in node.entries])
            vals = self.values([v for _, v in node.entries])
            if keys is not None and vals is not None:
                self.fold(node, lambda: std.make_map(list(zip(keys, vals, strict=True))))
        elif isinstance(node, ast.Comprehension):
            self.comprehension(node)
        elif isinstance(node, ast.StructLit):
            raise ExpressionError(
                f"message construction '{node.type_name}{{...}}' is not supported", node.offset
            )
        else:
            raise ExpressionError(f"unsupported expression node {type(node).__name__}", node.offset)

    def ident(self, node: ast.Ident) -> None:
        local = self.lookup_scope(node.name)
        if local is not None:
            self.references[id(node)] = local
            return
        var = self.resolve_declared(node.name)
        if var is not None:
            self.references[id(node)] = Var(var)
            return
        found = type_constant(node.name)
        if found is None:
            raise ExpressionError(f"undeclared reference to '{node.name}'"
                                  f"{name_hint(node.name, self.declared)}", node.offset)
        self.constants[id(node)] = found

    def select(self, node: ast.Select) -> None:
        if not node.test_only:
            qualified = qualified_name(node, self.scope_names())
            found = None if qualified is None else self.resolve_qualified(qualified)
            if isinstance(found, str):
                self.references[id(node)] = Var(found)
                return
            if found is not None:
                self.constants[id(node)] = found
                return
        self.check(node.operand)
        if node.test_only:
            return  # has() is never folded: it is cheap and its operand rarely constant
        operand = self.value(node.operand)
        if operand is not _MISSING:
            self.fold(node, lambda: std.select(operand, node.field))

    def comprehension(self, node: ast.Comprehension) -> None:
        self.check(node.iter_range)
        self.check(node.accu_init)
        iter_vars = [(v, False) for v in (node.iter_var, node.iter_var2) if v]
        self.scopes.append((node.accu_var, True))
        self.scopes.extend(iter_vars)
        try:
            self.check(node.loop_condition)
            self.check(node.loop_step)
            del self.scopes[-len(iter_vars):]  # iteration variables are not visible in
            self.check(node.result)  # the result
            self.scopes.extend(iter_vars)
        finally:
            del self.scopes[-len(iter_vars) - 1:]

    # -------------------------------------------------------------------- calls

    def call(self, node: ast.Call) -> None:
        name = node.function
        if node.target is None and name in _ARITY:
            if len(node.args) != _ARITY[name]:
                raise ExpressionError(f"wrong use of operator '{name}'", node.offset)
            self.overloads[id(node)] = Overload("operator", name)
            for a in node.args:
                self.check(a)
            self.fold_operator(node)
            return
        if node.target is not None:
            if name == "bind" and self.is_cel_namespace(node.target) and len(node.args) == 3:
                self.bind(node)
                return
            namespace = qualified_name(node.target, self.scope_names())
            if namespace is not None and self.resolve_declared(namespace.split(".")[0]) is None:
                qualified = f"{namespace}.{name}"
                if qualified in std.GLOBALS or qualified in LIB_FUNCTIONS:
                    self.global_call(node, qualified)
                    return
                head = _head(node.target)
                if "." in namespace:
                    # A library function is `<library>.<function>`: `arg.to.endsWith()`
                    # reads a field of a name that is not declared.
                    raise ExpressionError(f"undeclared reference to '{head.name}'"
                                          f"{name_hint(head.name, self.declared)}",
                                          head.offset)
                raise ExpressionError(f"unknown function '{qualified}'"
                                      f"{function_hint(qualified)}"
                                      f"{name_hint(head.name, self.declared, foreign=False)}",
                                      node.offset)
            self.method_call(node)
            return
        self.global_call(node, name)

    def is_cel_namespace(self, target: ast.Node) -> bool:
        return (
            isinstance(target, ast.Ident)
            and target.name == "cel"
            and self.lookup_scope("cel") is None
            and self.resolve_declared("cel") is None
        )

    def bind(self, node: ast.Call) -> None:
        """``cel.bind(name, init, body)`` (cel-go bindings extension): a local variable."""
        var, init, body = node.args
        if not isinstance(var, ast.Ident):
            raise ExpressionError("cel.bind() variable must be a simple identifier", var.offset)
        self.overloads[id(node)] = Overload("bind", "cel.bind")
        self.check(init)
        self.scopes.append((var.name, True))
        try:
            self.check(body)
        finally:
            self.scopes.pop()

    def global_call(self, node: ast.Call, name: str) -> None:
        for a in node.args:
            self.check(a)
        n = len(node.args)
        std_fn = std.GLOBALS.get(name)
        if std_fn is not None:
            if not arity_ok(std_fn, n + 1):
                raise ExpressionError(f"wrong number of arguments to '{name}': {n}", node.offset)
            self.overloads[id(node)] = Overload("std", name, std_fn)
            self.fold_std(node, std_fn, node.args)
            return
        lib_fn = LIB_FUNCTIONS.get(name)
        if lib_fn is not None:
            if not arity_ok(lib_fn, n):
                raise ExpressionError(f"wrong number of arguments to '{name}': {n}", node.offset)
            self.overloads[id(node)] = Overload("lib", name, lib_fn)
            return
        raise ExpressionError(f"unknown function '{name}'{function_hint(name)}", node.offset)

    def method_call(self, node: ast.Call) -> None:
        assert node.target is not None
        name = node.function
        operands = (node.target, *node.args)
        for a in operands:
            self.check(a)
        n = len(operands)
        std_fn = std.METHODS.get(name)
        lib_fn = LIB_METHODS.get(name)
        if std_fn is not None and arity_ok(std_fn, n + 1):
            self.overloads[id(node)] = Overload("std", name, std_fn, method=True)
            self.fold_std(node, std_fn, operands)
            return
        if lib_fn is not None:
            if not arity_ok(lib_fn, n):
                raise ExpressionError(
                    f"wrong number of arguments to method '{name}': {n - 1}", node.offset
                )
            self.overloads[id(node)] = Overload("lib", name, lib_fn, method=True)
            return
        if std_fn is not None:
            raise ExpressionError(
                f"wrong number of arguments to method '{name}': {n - 1}", node.offset
            )
        raise ExpressionError(f"unknown method '{name}'{function_hint(name, method=True)}",
                              node.offset)

    def fold_std(
        self, node: ast.Call, fn: Callable[..., Any], operands: Sequence[ast.Node]
    ) -> None:
        if node.function not in std.FOLDABLE:
            return
        found = self.values(operands)
        if found is not None:
            self.fold(node, lambda: fn(self.fold_act, *found))

    def fold_operator(self, node: ast.Call) -> None:
        name = node.function
        args = node.args
        if name == "_?_:_":
            cond = self.value(args[0])
            if cond is True or cond is False:
                chosen = self.value(args[1] if cond is True else args[2])
                if chosen is not _MISSING:
                    self.constants[id(node)] = chosen
            return
        if name == "@not_strictly_false":
            return  # a run-time guard on errors; never folded
        found = self.values(args)
        if found is None:
            return
        if name in ("_&&_", "_||_"):
            self.fold(node, lambda: _logical(name, found[0], found[1]))
        elif name == "!_":
            self.fold(node, lambda: std.not_(found[0]))
        elif name == "-_":
            self.fold(node, lambda: std.neg(found[0]))
        elif name == "_+_":
            self.fold(node, lambda: std.add(self.fold_act, found[0], found[1]))
        else:
            fn = _BINARY[name]
            self.fold(node, lambda: fn(found[0], found[1]))


def _logical(op: str, left: Any, right: Any) -> bool:
    """``&&`` / ``||`` on two constant operands (non-bool operands are errors)."""
    stop = op == "_||_"
    if left is stop or right is stop:
        return op == "_||_"
    for v in (left, right):
        if v is not (not stop):
            raise logic_error(op, v)
    return not stop


def reads_variables(checked: Checked) -> bool:
    """Whether the tree reads the engine's ``variables`` (a policy's lazy variables).

    Reading one evaluates its expression then and there, inside this evaluation, on the
    call's one meter. So this evaluation must charge the meter itself rather than a local
    copy charged back when it returns: the nested one would start from a meter that does
    not show what this one spent so far, and a chain of variables each reading the next
    could spend one whole budget per link before the call is stopped."""
    return any(type(r) is Var and r.name == "variables" for r in checked.references.values())


def fold_inputs(checked: Checked) -> set[int]:
    """Ids of the literals whose values folding read: the operands of a call, select, list
    or map whose operands were all constant, and every operand of a conditional with a
    constant condition. Every other literal's value is only its own constant, so a tree
    that differs from this one only in those others is checked the same way (the front
    end's cache, ``compiler``, relies on this)."""
    constants = checked.constants
    out: set[int] = set()
    for node in ast.walk(checked.ast):
        operands: tuple[ast.Node, ...]
        if isinstance(node, ast.Call):
            operands = node.args if node.target is None else (node.target, *node.args)
            if node.function == "_?_:_" and node.target is None and len(node.args) == 3:
                attempted = id(node.args[0]) in constants
            else:
                attempted = all(id(a) in constants for a in operands)
        elif isinstance(node, ast.Select):
            operands = (node.operand,)
            attempted = not node.test_only and id(node.operand) in constants
        elif isinstance(node, ast.ListLit):
            operands = node.elements
            attempted = all(id(a) in constants for a in operands)
        elif isinstance(node, ast.MapLit):
            operands = tuple(x for pair in node.entries for x in pair)
            attempted = all(id(a) in constants for a in operands)
        else:
            continue
        if attempted:
            out.update(id(a) for a in operands if isinstance(a, ast.Literal))
    return out


def check(
    node: ast.Node,
    *,
    source: str = "",
    declared: Collection[str],
    limits: Limits = DEFAULT_LIMITS,
    container: str = "",
) -> Checked:
    """Check a parsed tree: the contract every backend compiles from."""
    names = frozenset(declared)
    checker = _Checker(names, limits, container)
    try:
        checker.check(node)
    except RecursionError:
        raise ExpressionError("expression is nested too deeply", node.offset) from None
    checked = Checked(
        source,
        node,
        names,
        container,
        limits,
        checker.constants,
        checker.references,
        checker.overloads,
    )
    for type_checker in TYPE_CHECKERS:
        checked = type_checker(checked)
    return checked


__all__ = [
    "LIB_FUNCTIONS",
    "LIB_METHODS",
    "TYPE_CHECKERS",
    "Checked",
    "ExpressionError",
    "Local",
    "Overload",
    "Reference",
    "Var",
    "arity_ok",
    "check",
    "fold_inputs",
    "logic_error",
    "predicate_error",
    "qualified_name",
    "reads_variables",
    "type_constant",
]
