"""The CEL abstract syntax tree shared by the parser, the compiler and the checks.

Every node records ``offset``, the index of its first character in the expression
source, so that a load-time problem can be reported at ``file:line:column`` once the
engine adds where the expression starts in its YAML file. Macros (``has``, ``all``,
``exists``, ``exists_one``, ``map``, ``filter``) are expanded by the parser into
``Select(test_only=True)`` and ``Comprehension`` nodes, as cel-go does, so the compiler
only has to know the core forms.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias


@dataclass(frozen=True, slots=True)
class Node:
    offset: int


@dataclass(frozen=True, slots=True)
class Literal(Node):
    """int, ``UInt``, float, str, bytes, bool or None."""

    value: Any


@dataclass(frozen=True, slots=True)
class Ident(Node):
    name: str


@dataclass(frozen=True, slots=True)
class Select(Node):
    operand: Node
    field: str
    test_only: bool = False
    """True for the ``has(x.f)`` macro."""


@dataclass(frozen=True, slots=True)
class Call(Node):
    """A function, method or operator call.

    Operators use cel-go's internal names: ``_+_``, ``_-_``, ``_*_``, ``_/_``, ``_%_``,
    ``_==_``, ``_!=_``, ``_<_``, ``_<=_``, ``_>_``, ``_>=_``, ``@in``, ``_&&_``, ``_||_``,
    ``_?_:_``, ``!_``, ``-_``, ``_[_]``. A method call ``t.f(a)`` has ``target=t``.
    A namespaced call such as ``sets.contains(a, b)`` arrives as a method call on
    ``Ident("sets")``; the compiler resolves it to the global function ``sets.contains``.
    """

    function: str
    args: tuple[Node, ...]
    target: Node | None = None


@dataclass(frozen=True, slots=True)
class ListLit(Node):
    elements: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class MapLit(Node):
    entries: tuple[tuple[Node, Node], ...]


@dataclass(frozen=True, slots=True)
class StructLit(Node):
    """``Msg{field: value}``: parsed so it can be rejected with a position."""

    type_name: str
    fields: tuple[tuple[str, Node], ...]


@dataclass(frozen=True, slots=True)
class Comprehension(Node):
    """cel-go's comprehension, produced by macro expansion.

    ``macro`` names the macro it came from (``all``, ``exists``, ``exists_one``, ``map``,
    ``filter``) so the compiler may specialise it and errors can name it.
    """

    macro: str
    iter_var: str
    iter_range: Node
    accu_var: str
    accu_init: Node
    loop_condition: Node
    loop_step: Node
    result: Node
    iter_var2: str = ""
    """The second iteration variable of cel-go's two-variable comprehensions (``all(k, v,
    p)``, ``transformList(i, v, e)``): the value, with ``iter_var`` the list index or map
    key; "" for the one-variable macros."""


def children(node: Node) -> list[Node]:
    """The nodes directly under ``node``, but a comprehension's (its parts are read in
    scopes of their own: a caller that needs them takes them by name)."""
    if isinstance(node, Select):
        return [node.operand]
    if isinstance(node, Call):
        return [*node.args, *([node.target] if node.target is not None else [])]
    if isinstance(node, ListLit):
        return list(node.elements)
    if isinstance(node, MapLit):
        return [x for kv in node.entries for x in kv]
    if isinstance(node, StructLit):
        return [v for _, v in node.fields]
    return []


def walk(node: Node) -> list[Node]:
    """All nodes of a tree, parents before children (for load-time checks)."""
    out: list[Node] = []
    stack: list[Node] = [node]
    while stack:
        n = stack.pop()
        out.append(n)
        if isinstance(n, Select):
            stack.append(n.operand)
        elif isinstance(n, Call):
            stack.extend(reversed(n.args))
            if n.target is not None:
                stack.append(n.target)
        elif isinstance(n, ListLit):
            stack.extend(reversed(n.elements))
        elif isinstance(n, MapLit):
            for k, v in reversed(n.entries):
                stack.extend((v, k))
        elif isinstance(n, StructLit):
            stack.extend(v for _, v in reversed(n.fields))
        elif isinstance(n, Comprehension):
            stack.extend((n.result, n.loop_step, n.loop_condition, n.accu_init, n.iter_range))
    return out


_OPAQUE = (int, float, str, bytes)
"""Literal types a tree's shape holds by type only (``uint`` is an int subclass; ``bool``
too, but not one of them)."""


TreeShape: TypeAlias = tuple[tuple[object, ...], list[Literal]]
"""``shape``'s result: the key, and the literals it holds by type only."""


def shape(node: Node) -> TreeShape | None:
    """The tree without its literals' values (``true``, ``false`` and ``null`` are kept),
    and those literals in a fixed order: two trees with equal shapes differ only there.

    The front end's cache (``compiler``) keys on it. None for a tree it does not describe
    (a message literal) or too deep to walk.
    """
    out: list[object] = []
    literals: list[Literal] = []

    def walk(n: Node) -> None:
        t = type(n)
        if t is Literal:
            assert isinstance(n, Literal)
            vt = type(n.value)
            if isinstance(n.value, _OPAQUE) and vt is not bool:
                out.append(vt)
                literals.append(n)
            else:
                out.append((vt, n.value))
        elif t is Ident:
            assert isinstance(n, Ident)
            out.append(("ident", n.name))
        elif t is Select:
            assert isinstance(n, Select)
            out.append(("select", n.field, n.test_only))
            walk(n.operand)
        elif t is Call:
            assert isinstance(n, Call)
            out.append(("call", n.function, len(n.args), n.target is not None))
            if n.target is not None:
                walk(n.target)
            for a in n.args:
                walk(a)
        elif t is ListLit:
            assert isinstance(n, ListLit)
            out.append(("list", len(n.elements)))
            for e in n.elements:
                walk(e)
        elif t is MapLit:
            assert isinstance(n, MapLit)
            out.append(("map", len(n.entries)))
            for k, v in n.entries:
                walk(k)
                walk(v)
        elif t is Comprehension:
            assert isinstance(n, Comprehension)
            out.append(("comprehension", n.macro, n.iter_var, n.iter_var2, n.accu_var))
            for child in (n.iter_range, n.accu_init, n.loop_condition, n.loop_step, n.result):
                walk(child)
        else:
            raise _Unshaped

    try:
        walk(node)
    except (_Unshaped, RecursionError):
        return None
    out.extend(shared_literals(literals))
    return tuple(out), literals


def shared_literals(literals: list[Literal]) -> list[tuple[str, tuple[int, ...], type, str]]:
    """For a shape: each literal node that occurs more than once (macro expansions share
    nodes), its positions and value, so that trees of equal shape share the same nodes
    and agree on their values."""
    if len({id(n) for n in literals}) == len(literals):
        return []
    positions: dict[int, list[int]] = {}
    for i, n in enumerate(literals):
        positions.setdefault(id(n), []).append(i)
    return [("shared", tuple(p), type(literals[p[0]].value), repr(literals[p[0]].value))
            for p in positions.values() if len(p) > 1]


class _Unshaped(Exception):
    pass
