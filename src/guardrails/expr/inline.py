"""User-defined functions (``kind: Library``), inlined into the expressions that call them.

A call ``text.namedByUser(args.to)`` of a library function is replaced, before the tree is
checked and compiled, by the function's body with each parameter bound once to its
argument: ``cel.bind(@p, cel.@arg(args.to, "string", ...), body)``. So:

- every backend runs library functions with no support of its own, at the speed of
  hand-written CEL;
- an argument is evaluated once however often the body uses it (no blow-up when a body
  repeats a parameter, or functions call functions);
- a parameter's declared type is checked when the call runs (``cel.@arg``), and at load
  when the argument is a literal; a wrong number of arguments is a load error at the call;
- recursion is impossible: a function that calls itself, directly or through others, is a
  load error, and the expanded tree is bounded (``MAX_EXPANDED_NODES``).

Parameters are renamed to names no user can write (``@text.namedByUser.value``), so a
body's parameter never captures a name of the call site, and the call site's arguments
are evaluated outside the body's scope. Errors inside an inlined body are reported at
the call (the body itself is checked at its own position when the library loads).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from guardrails.expr import ast
from guardrails.expr.checker import ExpressionError
from guardrails.expr.stdlib import PARAM_TYPES, type_word
from guardrails.expr.values import CelError, cel_type

__all__ = ["MAX_EXPANDED_NODES", "PARAM_TYPES", "Function", "inline", "uses_functions"]

MAX_EXPANDED_NODES: Final = 20_000
"""Nodes an expression may have once every library call in it is inlined."""

@dataclass(frozen=True, slots=True)
class Function:
    """A library function ready to inline: ``body`` is parsed once."""

    qualified: str
    """``library.function``, as called."""
    params: tuple[tuple[str, str], ...]
    """``(name, declared type)`` in call order."""
    body: ast.Node


def uses_functions(node: ast.Node, functions: Mapping[str, Function]) -> bool:
    return any(_called(n, functions) is not None for n in ast.walk(node))


def _called(node: ast.Node, functions: Mapping[str, Function]) -> Function | None:
    if (isinstance(node, ast.Call) and isinstance(node.target, ast.Ident)
            and not node.target.name.startswith("@")):
        return functions.get(f"{node.target.name}.{node.function}")
    return None


def inline(node: ast.Node, functions: Mapping[str, Function], *, root: str = "") -> ast.Node:
    """``node`` with every library call replaced by its body; ``ExpressionError`` at the
    call for a wrong number of arguments, a literal of the wrong type, recursion, or an
    expansion past ``MAX_EXPANDED_NODES``. ``root``: the function whose body ``node`` is
    (a call of it inside is recursion)."""
    if not functions:
        return node
    out = _Inliner(functions).expand(node, (root,) if root else ())
    if len(ast.walk(out)) > MAX_EXPANDED_NODES:
        raise ExpressionError(f"expression too large once library functions are inlined "
                              f"(more than {MAX_EXPANDED_NODES} nodes)", node.offset)
    return out


class _Inliner:
    def __init__(self, functions: Mapping[str, Function]) -> None:
        self.functions = functions
        self.size = 0

    def expand(self, node: ast.Node, stack: tuple[str, ...]) -> ast.Node:
        self.size += 1
        if self.size > MAX_EXPANDED_NODES:
            raise ExpressionError(f"expression too large once library functions are "
                                  f"inlined (more than {MAX_EXPANDED_NODES} nodes)",
                                  node.offset)
        fn = _called(node, self.functions)
        if fn is not None:
            assert isinstance(node, ast.Call)
            return self.call(node, fn, stack)
        return _map_children(node, lambda child: self.expand(child, stack))

    def call(self, node: ast.Call, fn: Function, stack: tuple[str, ...]) -> ast.Node:
        at = node.offset
        if fn.qualified in stack:
            chain = " -> ".join((*stack[stack.index(fn.qualified):], fn.qualified))
            raise ExpressionError(f"recursive call of library function '{fn.qualified}' "
                                  f"({chain}): library functions cannot recurse", at)
        if len(node.args) != len(fn.params):
            raise ExpressionError(
                f"{fn.qualified}() takes {len(fn.params)} argument"
                f"{'s' if len(fn.params) != 1 else ''} ({', '.join(p for p, _ in fn.params)}),"
                f" got {len(node.args)}", at)
        args = [self.expand(a, stack) for a in node.args]
        renamed = {p: f"@{fn.qualified}.{p}" for p, _ in fn.params}
        body = _rename(_at(fn.body, at), renamed)
        body = self.expand(body, (*stack, fn.qualified))
        for (param, kind), arg in reversed(list(zip(fn.params, args, strict=True))):
            _check_literal(fn, param, kind, arg)
            init = arg
            if kind != "any":
                init = ast.Call(at, "@arg", (arg, ast.Literal(at, PARAM_TYPES[kind]),
                                             ast.Literal(at, fn.qualified),
                                             ast.Literal(at, param)), ast.Ident(at, "cel"))
            body = ast.Call(at, "bind", (ast.Ident(at, renamed[param]), init, body),
                            ast.Ident(at, "cel"))
        return body


def _check_literal(fn: Function, param: str, kind: str, arg: ast.Node) -> None:
    if kind == "any" or not isinstance(arg, ast.Literal | ast.ListLit | ast.MapLit):
        return
    if isinstance(arg, ast.ListLit):
        actual = "list"
    elif isinstance(arg, ast.MapLit):
        actual = "map"
    else:
        try:
            actual = cel_type(arg.value).name
        except CelError:
            return
    if actual != PARAM_TYPES[kind]:
        raise ExpressionError(f"{fn.qualified}: argument '{param}' must be {kind}, got "
                              f"{type_word(actual)}", arg.offset)


def _map_children(node: ast.Node, fn: Any) -> ast.Node:
    """``node`` with ``fn`` applied to each direct child node (a new node if any changed)."""
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        new = _map_value(value, fn)
        if new is not value:
            changes[f.name] = new
    return dataclasses.replace(node, **changes) if changes else node


def _map_value(value: Any, fn: Any) -> Any:
    if isinstance(value, ast.Node):
        return fn(value)
    if isinstance(value, tuple) and value:
        items = tuple(_map_value(v, fn) for v in value)
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value


def _at(node: ast.Node, offset: int) -> ast.Node:
    """A copy of the tree with every offset set to ``offset`` (errors point at the call)."""
    copy = _map_children(node, lambda child: _at(child, offset))
    return copy if copy.offset == offset else dataclasses.replace(copy, offset=offset)


def _rename(node: ast.Node, names: Mapping[str, str]) -> ast.Node:
    """Parameters renamed, except where a comprehension or ``cel.bind`` in the body binds
    the same name again (there the name is that inner variable)."""
    if not names:
        return node
    if isinstance(node, ast.Ident):
        new = names.get(node.name)
        return node if new is None else dataclasses.replace(node, name=new)
    if isinstance(node, ast.Comprehension):
        inner = {k: v for k, v in names.items() if k not in (node.iter_var, node.accu_var)}
        return dataclasses.replace(
            node, iter_range=_rename(node.iter_range, names),
            accu_init=_rename(node.accu_init, names),
            loop_condition=_rename(node.loop_condition, inner),
            loop_step=_rename(node.loop_step, inner), result=_rename(node.result, inner))
    if (isinstance(node, ast.Call) and node.function == "bind" and len(node.args) == 3
            and isinstance(node.target, ast.Ident) and node.target.name == "cel"
            and isinstance(node.args[0], ast.Ident)):
        var, init, body = node.args
        bound = var.name if isinstance(var, ast.Ident) else ""
        inner = {k: v for k, v in names.items() if k != bound}
        return dataclasses.replace(node, args=(var, _rename(init, names), _rename(body, inner)))
    return _map_children(node, lambda child: _rename(child, names))
