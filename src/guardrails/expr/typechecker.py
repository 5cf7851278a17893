"""Static type checking of a parsed CEL expression: a separate pass over the AST.

Modelled on Kubernetes' CEL type checking and Cedar's strict validation: every name has a
type (``dyn`` when unknown), operators and functions are resolved against their
overloads, and what can only fail is reported before the policy runs.

Severities, as those tools draw the line:

- ``error``: the expression is wrong for every value the declared types allow: no
  overload of an operator or function for the operand types (``args.timeout_s > "300"``
  on an integer, ``"timeout " + args.timeout_s``), a condition that is not a bool, an
  invalid constant (a regex RE2 rejects, a malformed duration, timestamp, URL, IP or
  CIDR literal).
- ``warning``: it can fail for some calls: reading an optional argument (a JSON Schema
  property that is not ``required``) without ``has()`` first; comparing to a value the
  schema's ``enum`` does not allow.

What is ``dyn`` is never reported: without tool schemas, only literals, params and the
engine's own names are known. Guards are understood: ``has(x.f)``, ``"f" in x`` and
``type(x) == T`` hold on the right of ``&&``, in the ``then`` branch of a ternary, after
``!guard ||``, and (``guards=``) wherever the caller says (a repair's own ``when``).
Function types come from ``SIGNATURES`` next to the functions (``stdlib``, ``library``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from guardrails.expr import ast, library, stdlib
from guardrails.expr.spelling import closest
from guardrails.expr.types import (
    BOOL,
    DOUBLE,
    DURATION,
    DYN,
    INT,
    NUM,
    NUMERIC,
    STRING,
    TIMESTAMP,
    TYPE,
    TYPE_NAMES,
    Field,
    Type,
    join,
    list_of,
    map_of,
    of_value,
    parse_signature,
    record_union,
)

Severity = Literal["error", "warning"]
Path = tuple[str, ...]

__all__ = ["FAILS_CLOSED", "REGEX_FUNCTIONS", "Diagnostic", "Facts", "article", "call_name",
           "check", "constant_text", "facts_of", "has_enums", "may_be_absent",
           "pattern_argument", "regex_problem", "shape", "suggest", "tool_args_key",
           "tool_names"]


@dataclass(frozen=True, slots=True)
class Diagnostic:
    severity: Severity
    offset: int
    """Into the expression source."""
    message: str


@dataclass(frozen=True, slots=True)
class Facts:
    """What is known to hold where an expression is evaluated."""

    present: frozenset[Path] = frozenset()
    """Paths known to exist (``has(args.x)``)."""
    types: tuple[tuple[Path, Type], ...] = ()
    """Paths narrowed by ``type(p) == T``."""
    tools: frozenset[str] | None = None
    """The called tool is one of these (``tool.name == "x"``); None: any."""
    excluded: frozenset[str] = frozenset()
    """The called tool is none of these (``tool.name != "x"``)."""

    def __or__(self, other: Facts) -> Facts:
        """Both hold."""
        if other is NONE:
            return self
        if self is NONE:
            return other
        tools = self.tools if other.tools is None else (
            other.tools if self.tools is None else self.tools & other.tools)
        return Facts(self.present | other.present, self.types + other.types, tools,
                     self.excluded | other.excluded)

    def __and__(self, other: Facts) -> Facts:
        """One of them holds."""
        tools = None if self.tools is None or other.tools is None else \
            self.tools | other.tools
        return Facts(self.present & other.present,
                     tuple(t for t in self.types if t in other.types), tools,
                     self.excluded & other.excluded)

    def type_of(self, path: Path) -> Type | None:
        for p, t in reversed(self.types):
            if p == path:
                return t
        return None

    def has(self, path: Path) -> bool:
        return any(p[:len(path)] == path for p in self.present)


NONE = Facts()

FAILS_CLOSED = "(the rule then fails closed)"
"""What an evaluation error does to a rule under ``failurePolicy: Fail``."""


@dataclass(frozen=True, slots=True)
class _Overload:
    receiver: Type | None
    params: tuple[Type, ...]
    result: Type
    text: str


def _table() -> dict[tuple[str, bool], list[_Overload]]:
    out: dict[tuple[str, bool], list[_Overload]] = {}
    for sigs in (stdlib.SIGNATURES, library.SIGNATURES):
        for name, texts in sigs.items():
            for text in texts:
                receiver, _, params, result = parse_signature(text)
                rt = TYPE_NAMES.get(receiver) if receiver else None
                if receiver == "timestamp":
                    rt = TIMESTAMP
                elif receiver == "duration":
                    rt = DURATION
                out.setdefault((name, rt is not None), []).append(
                    _Overload(rt, params, result, text))
    return out


_OVERLOADS = _table()

PROVENANCE_SOURCES = ("request", "params", "result")
_SOURCE = Type("string", values=PROVENANCE_SOURCES)
PLACE = map_of(STRING, DYN, {"source": Field(_SOURCE, True), "tool": Field(STRING, True),
                             "index": Field(INT, True), "trusted": Field(BOOL, True),
                             "requested": Field(BOOL, True), "whole": Field(BOOL, True)},
               "error")
"""One element of ``provenance(v)`` (``lib_provenance.Place.as_map``): exactly these keys,
and ``source`` is one of three words, so ``p.trust`` or ``p.source == "results"`` (never
true) is a load error rather than a rule that silently never fires."""


def check(node: ast.Node, env: Mapping[str, Type], *, expect: Type | None = None,
          facts: Facts = NONE, guards: bool | None = None) -> tuple[Type, list[Diagnostic]]:
    """The type of ``node`` and what is wrong with it.

    ``env`` types the free names (anything missing is ``dyn``); ``expect`` is what the
    place needs (``BOOL`` for a condition, ``STRING`` for a message); ``facts`` hold
    where the expression runs (a repair's ``when``). ``guards`` says whether any field
    in ``env`` may be absent (``may_be_absent(env)``; pass it when checking many
    expressions against one environment).
    """
    c = _Checker(env)
    c.guards = may_be_absent(env) if guards is None else guards
    t = c.infer(node, facts)
    if expect is not None and not _accepts(expect, t):
        c.error(0, f"must be {article(expect)}, but this expression gives "
                      f"{article(t)}" + _condition_hint(node, t, expect))
    c.diagnostics.sort(key=lambda d: d.offset)
    return t, c.diagnostics


_PARSED_LITERALS = frozenset({"url", "ip", "cidr", "timestamp", "duration"})


def shape(node: ast.Node, tree: ast.TreeShape | None = None) -> tuple[object, ...] | None:
    """What ``check`` reads of a tree: equal for two trees that differ only in literals it
    never looks at, so they have the same type and, when one has no diagnostic, neither
    has the other (the engine caches results by it; ``guardrails check`` on many
    policies of one shape runs the checker once).

    Literal values are part of it where the checker reads them: a regex pattern and the
    text of ``url``/``ip``/``cidr``/``timestamp``/``duration`` (``_check_constant``), a
    string index (a field path), the string on the left of ``in`` and the tool names of
    ``tool.name == "x"`` or ``tool.name in [...]`` (facts); ``true``,
    ``false`` and ``null`` always. Reading them elsewhere (the hint of a comparison's
    error, an enum of a tool schema) needs a diagnostic or an ``env`` with enums, which
    callers do not cache. None for a tree it does not describe.

    The key is the tree's ``ast.shape`` (``tree``, when the caller has it) and the values
    of the literals read; where those are is worked out once per tree shape.
    """
    if tree is None:
        tree = ast.shape(node)
        if tree is None:
            return None
    key, literals = tree
    positions = _READ_POSITIONS.get(key)
    if positions is None:
        index = {id(n): i for i, n in enumerate(literals)}
        # a literal read that the tree's shape holds by value (true, null) is in `key`
        positions = tuple(sorted({index[id(n)] for n in _read_literals(node)
                                  if id(n) in index}))
        if len(_READ_POSITIONS) >= 20_000:
            _READ_POSITIONS.clear()
        _READ_POSITIONS[key] = positions
    return ("tree", key, tuple((type(literals[i].value), repr(literals[i].value))
                               for i in positions))


_READ_POSITIONS: dict[tuple[object, ...], tuple[int, ...]] = {}
"""For each tree shape, which of its literals ``check`` reads (by index)."""


def _read_literals(node: ast.Node) -> list[ast.Literal]:
    """The literals of ``node`` whose values ``check`` reads (``shape`` lists them)."""
    out: list[ast.Literal] = []
    for n in ast.walk(node):
        if not isinstance(n, ast.Call):
            continue
        f, args = n.function, n.args
        if tool_names(n) is not None:  # a fact: args becomes that tool's
            out.extend(e for a in args
                       for e in (a.elements if isinstance(a, ast.ListLit) else (a,))
                       if isinstance(e, ast.Literal))
        reads: ast.Node | None = None
        if n.target is None and f == "_[_]" and len(args) == 2:
            reads = args[1]
        elif n.target is None and f == "@in" and len(args) == 2:
            reads = args[0]
        elif f == "@select" and len(args) == 2:
            reads = args[1]  # args.?x: a field path, and a fact under hasValue()
        elif n.target is None and f in ("_==_", "_!=_") and len(args) == 2 and any(
                isinstance(a, ast.Select) and a.field == "source" for a in args):
            # p.source == "result": checked against PROVENANCE_SOURCES
            reads = args[1] if isinstance(args[1], ast.Literal) else args[0]
        elif n.target is None and f in _OPERATORS and len(args) == 2 and any(
                isinstance(a, ast.Call) and a.function in TIME_RANGES for a in args):
            # now.getHours() > 17: checked against TIME_RANGES
            reads = args[1] if isinstance(args[1], ast.Literal) else args[0]
        elif not (n.target is None and f in _OPERATORS):
            name = call_name(n)
            if name in _REGEX_ARG:
                reads = pattern_argument(name, n)
            elif name in _PARSED_LITERALS and n.target is None and args:
                reads = args[0]
        # a pattern made of literals joined with + (constant_text) is read whole
        stack = [reads] if reads is not None else []
        while stack:
            r = stack.pop()
            if isinstance(r, ast.Literal):
                out.append(r)
            elif isinstance(r, ast.Call) and r.function == "_+_" and r.target is None:
                stack.extend(r.args)
    return out


def has_enums(t: Type, depth: int = 0) -> bool:
    """Whether ``t`` or a type inside it lists allowed values (a tool schema's ``enum``)."""
    if t.values is not None or depth > 32:
        return True
    return (any(has_enums(f.type, depth + 1) for _, f in t.fields or ())
            or any(has_enums(p, depth + 1) for p in t.params))


def facts_of(node: ast.Node, positive: bool = True) -> Facts:
    """What holds when ``node`` is true (or false, ``positive=False``) without an error.

    Besides guards, a value is known to exist once an expression that read it gave a
    result: after ``args.x > 3 && ...`` holds, ``args.x`` was there.
    """
    if isinstance(node, ast.Select) and node.test_only:
        read = Facts(_reads(node))
        p = _path(node.operand)
        return read | Facts(frozenset({(*p, node.field)})) if p and positive else read
    present = _optional_presence(node, positive)
    if present is not None:
        return Facts(_reads(node) | {present})
    if isinstance(node, ast.Call) and node.target is None:
        f, a = node.function, node.args
        if f == "!_" and len(a) == 1:
            return facts_of(a[0], not positive)
        if f == "_&&_" and len(a) == 2:
            return (facts_of(a[0]) | facts_of(a[1])) if positive else \
                (facts_of(a[0], False) & facts_of(a[1], False))
        if f == "_||_" and len(a) == 2:
            return (facts_of(a[0]) & facts_of(a[1])) if positive else \
                (facts_of(a[0], False) | facts_of(a[1], False))
        names = tool_names(node)
        if names is not None:
            held = (f != "_!=_") == positive  # `tool.name != "x"` false: it is x
            return Facts(_reads(node), tools=names) if held else Facts(excluded=names)
        if f == "@in" and len(a) == 2 and positive and _is_str(a[0]):
            p = _path(a[1])
            assert isinstance(a[0], ast.Literal)
            return Facts(frozenset({(*p, a[0].value)})) if p else NONE
        if f == "_==_" and len(a) == 2 and positive:
            for x, y in (a, a[::-1]):
                if (isinstance(x, ast.Call) and x.function == "type" and x.target is None
                        and len(x.args) == 1 and isinstance(y, ast.Ident)
                        and y.name in TYPE_NAMES):
                    p = _path(x.args[0])
                    if p:
                        return Facts(frozenset({p}), ((p, TYPE_NAMES[y.name]),))
    reads = _reads(node)
    return Facts(reads) if reads else NONE


def _optional_presence(node: ast.Node, positive: bool) -> Path | None:
    """The path that ``args.?x.hasValue()`` or ``args.?x.orValue(null) != null`` (when
    true; ``... == null`` when false) shows is there: the optional spellings of
    ``has(args.x)``."""
    if (positive and isinstance(node, ast.Call) and node.function == "hasValue"
            and not node.args and node.target is not None):
        return _optional_path(node.target)
    if not (isinstance(node, ast.Call) and node.target is None and len(node.args) == 2
            and node.function == ("_!=_" if positive else "_==_")):
        return None
    for x, y in (node.args, node.args[::-1]):
        if (isinstance(y, ast.Literal) and y.value is None and isinstance(x, ast.Call)
                and x.function == "orValue" and len(x.args) == 1
                and isinstance(x.args[0], ast.Literal) and x.args[0].value is None
                and x.target is not None):
            return _optional_path(x.target)
    return None


def _optional_path(node: ast.Node) -> Path | None:
    """``("args", "x")`` for ``args.?x`` (also ``args.a.?x``), else None."""
    if (isinstance(node, ast.Call) and node.function == "@select" and len(node.args) == 2
            and isinstance(node.target, ast.Ident) and node.target.name == "optional"
            and _is_str(node.args[1])):
        p = _path(node.args[0])
        field = node.args[1]
        assert isinstance(field, ast.Literal)
        return (*p, field.value) if p else None
    return None


def tool_args_key(tool: str) -> str:
    """The ``env`` key of one tool's own ``args`` type (not a name CEL can spell), which
    ``args`` takes where ``tool.name == tool`` holds."""
    return f"args@{tool}"


def tool_names(node: ast.Node) -> frozenset[str] | None:
    """The names in ``tool.name == "x"``, ``"x" == tool.name``, ``tool.name != "x"`` and
    ``tool.name in ["x", "y"]``, or None for anything else."""
    if not (isinstance(node, ast.Call) and node.target is None and len(node.args) == 2):
        return None
    a, b = node.args
    if node.function in ("_==_", "_!=_"):
        if _is_tool_name(b):
            a, b = b, a
        if _is_tool_name(a) and _is_str(b):
            assert isinstance(b, ast.Literal)
            return frozenset({b.value})
        return None
    if node.function == "@in" and _is_tool_name(a) and isinstance(b, ast.ListLit) \
            and b.elements and all(_is_str(e) for e in b.elements):
        return frozenset(e.value for e in b.elements if isinstance(e, ast.Literal))
    return None


def _is_tool_name(node: ast.Node) -> bool:
    return (isinstance(node, ast.Select) and not node.test_only and node.field == "name"
            and isinstance(node.operand, ast.Ident) and node.operand.name == "tool")


def _reads(node: ast.Node) -> frozenset[Path]:
    """Paths every error-free evaluation of ``node`` has read (so they exist)."""
    if isinstance(node, ast.Select):
        inner = _reads(node.operand)
        p = _path(node) if not node.test_only else None
        return inner | {p} if p and len(p) > 1 else inner
    if isinstance(node, ast.Call):
        f = node.function
        if node.target is None and f in ("_&&_", "_||_", "!_", "_?_:_"):
            return _reads(node.args[0]) if f == "_?_:_" else frozenset()
        out: frozenset[Path] = frozenset()
        if f == "_[_]" and node.target is None:
            p = _path(node)
            if p and len(p) > 1:
                out = out | {p}
        for a in (*node.args, *([node.target] if node.target is not None else [])):
            out = out | _reads(a)
        return out
    if isinstance(node, ast.Comprehension):
        return _reads(node.iter_range)
    if isinstance(node, ast.ListLit):
        return frozenset().union(*(_reads(e) for e in node.elements))
    return frozenset()


def _path(node: ast.Node) -> Path | None:
    """``("args", "a", "b")`` for ``args.a.b`` or ``args["a"]["b"]``."""
    parts: list[str] = []
    while True:
        if isinstance(node, ast.Ident):
            return (node.name, *reversed(parts))
        if isinstance(node, ast.Select) and not node.test_only:
            parts.append(node.field)
            node = node.operand
        elif (isinstance(node, ast.Call) and node.function == "_[_]" and node.target is None
              and len(node.args) == 2 and _is_str(node.args[1])):
            lit = node.args[1]
            assert isinstance(lit, ast.Literal)
            parts.append(lit.value)
            node = node.args[0]
        else:
            return None


def suggest(name: str, known: Sequence[str]) -> str:
    """``; did you mean 'x'?`` for the known name closest to ``name`` (``args.Amount``
    for ``amount``), or ``""``."""
    close = closest(name, known)
    return f"; did you mean '{close}'?" if close else ""


def _is_str(n: ast.Node) -> bool:
    return isinstance(n, ast.Literal) and isinstance(n.value, str)


def article(t: Type) -> str:
    """``a string``, ``an int``: a type in a message."""
    s = str(t)
    return ("an " if s[0] in "aeiou" else "a ") + s


def _condition_hint(node: ast.Node, t: Type, expect: Type) -> str:
    if expect == BOOL and t.name == "string":
        return " (a string is not a condition: compare it, e.g. args.x == \"value\", " \
               "or test that it is there with has(args.x))"
    if expect == STRING and t.name != "string":
        return " (convert it with string(...))"
    if expect == BOOL and t == list_of(PLACE):
        return (" (provenance(v) lists where v appears: test its places, e.g. "
                "provenance(v).exists(p, p.source == \"result\" && !p.trusted), or use "
                "untrusted(v))")
    return ""


def _accepts(param: Type, arg: Type) -> bool:
    """Can a value of type ``arg`` be passed where ``param`` is expected?"""
    if param.name == "dyn" or arg.name == "dyn":
        return True
    if param.name == "num" or arg.name == "num":
        return param.name in NUMERIC and arg.name in NUMERIC
    if param.name != arg.name:
        return False
    if param.name == "list":
        return _accepts(param.elem, arg.elem)
    if param.name == "map":
        return _accepts(param.key, arg.key) and _accepts(param.value, arg.value)
    return True


def _comparable(a: Type, b: Type) -> bool:
    """Whether ``==`` between the two can ever be true (CEL has no implicit conversion;
    numbers compare across int, uint and double)."""
    if "dyn" in (a.name, b.name) or "null" in (a.name, b.name):
        return True
    if a.name in NUMERIC and b.name in NUMERIC:
        return True
    if a.name != b.name:
        return False
    if a.name == "list":
        return _comparable(a.elem, b.elem)
    if a.name == "map":
        return _comparable(a.key, b.key) and _comparable(a.value, b.value)
    return True


_ORDERED = frozenset({"string", "bytes", "bool", "timestamp", "duration"})


def _record_hint(node: ast.Node, t: Type) -> str:
    """For a record compared whole (``tool == "x"``, ``counters.sent > 3``): its fields."""
    path = _path(node)
    if t.name != "map" or not t.fields or path is None:
        return ""
    dotted = ".".join(path)
    names = [k for k, _ in t.fields]
    return (f"; {dotted} is a map with fields {', '.join(names)}: compare one of them, "
            f"e.g. {dotted}.{names[0]}")


def _params_hint(x: ast.Node, y: ast.Node, a: Type, b: Type) -> str:
    """A number written in quotes in params (``max: "5"``) compared with a number."""
    for node, t, other in ((x, a, b), (y, b, a)):
        path = _path(node)
        if path and path[0] == "params" and len(path) > 1 and t.name == "string" \
                and other.name in NUMERIC:
            return (f"; {'.'.join(path)} is a string in params: write a number there "
                    f"({path[-1]}: 1000, not \"1000\" or 1,000)")
    return ""


_YAML11_BOOLS: Final = frozenset({"yes", "no", "on", "off", "y", "n"})
"""What YAML 1.1 reads as a bool when unquoted: a param written so is a bool, not text."""


def _literal_hint(other: ast.Node, want: Type) -> str:
    if isinstance(other, ast.Literal) and isinstance(other.value, str):
        text = other.value.strip()
        if want.name in NUMERIC and re.fullmatch(r"[-+]?\d+(\.\d+)?", text):
            return f"; write the number without quotes: {text}"
        if want.name == "bool" and text.lower() in ("true", "false"):
            return f"; write the bool without quotes: {text.lower()}"
        if want.name == "bool" and text.lower() in _YAML11_BOOLS:
            return (f"; YAML reads a plain {text} as a bool (YAML 1.1): quote it in the "
                    f"YAML (\"{text}\") if it is text, or compare with "
                    f"{'true' if text.lower() in ('yes', 'y', 'on') else 'false'}")

    if want.name == "string":
        return "; convert it with string(...)"
    return ""


def may_be_absent(env: Mapping[str, Type]) -> bool:
    """Whether some field reachable from ``env`` is optional (so guards matter)."""
    return any(_has_optional(t) for t in env.values())


def _has_optional(t: Type, depth: int = 0) -> bool:
    """Whether guards can matter: some field of ``t`` may be absent."""
    if depth > 16:
        return False
    if any(not f.required or _has_optional(f.type, depth + 1) for _, f in t.fields or ()):
        return True
    return any(_has_optional(p, depth + 1) for p in t.params)


class _Checker:
    def __init__(self, env: Mapping[str, Type]) -> None:
        self.env = env
        self.diagnostics: list[Diagnostic] = []
        self.guessed: dict[Path, tuple[str, ...]] = {}
        """Paths read from an open map that lacks them (``params.spec`` where params has
        only ``maxAmount``), with the map's keys: their type is the other keys' guess."""
        self._locals: list[dict[str, Type]] = []
        self.guards = True
        """False when no field can be absent: then guards change nothing (at load time,
        without tool schemas) and working them out is skipped."""

    def facts(self, node: ast.Node, positive: bool = True) -> Facts:
        return facts_of(node, positive) if self.guards else NONE

    def tool_args(self, facts: Facts) -> Type | None:
        """``args`` of the tools ``facts`` leave (``tool_args_key`` entries of ``env``:
        the tools a policy matches, when their schemas are known), or None."""
        prefix = tool_args_key("")
        known = {k[len(prefix):]: t for k, t in self.env.items() if k.startswith(prefix)}
        if not known:
            return None
        if facts.tools is not None and not facts.tools & known.keys():
            return map_of(STRING, DYN)  # only tools whose schemas are not known
        if facts.tools is not None and not facts.tools <= known.keys():
            return None
        names = sorted((facts.tools if facts.tools is not None else known.keys())
                       - facts.excluded)
        if not names:
            return None
        own = [known[n] for n in names]
        return own[0] if len(own) == 1 else record_union(own)

    def error(self, node: ast.Node | int, message: str) -> None:
        offset = node if isinstance(node, int) else node.offset
        self.diagnostics.append(Diagnostic("error", offset, message))

    def warning(self, node: ast.Node | int, message: str) -> None:
        offset = node if isinstance(node, int) else node.offset
        self.diagnostics.append(Diagnostic("warning", offset, message))

    # -- names and fields ----------------------------------------------------------------

    def lookup(self, name: str) -> Type:
        for scope in reversed(self._locals):
            if name in scope:
                return scope[name]
        if name in self.env:
            return self.env[name]
        return TYPE if name in TYPE_NAMES else DYN

    def is_local(self, name: str) -> bool:
        return any(name in scope for scope in self._locals)

    def field(self, operand: Type, name: str, node: ast.Node, path: Path | None,
              facts: Facts, *, test_only: bool) -> Type:
        if path is not None:
            narrowed = facts.type_of((*path, name))
            if narrowed is not None:
                return narrowed
        if operand.name == "dyn":
            return DYN
        if operand.name != "map":
            where = f"; '{'.'.join(path)}' is {article(operand)}" if path else ""
            keys = self.guessed.get(path) if path else None
            if path and keys is not None:
                parent = ".".join(path[:-1])
                where = (f"; '{'.'.join(path)}' is not a key of {parent} ({parent} has "
                         f"{', '.join(keys)}{suggest(path[-1], keys) or ''}), so it was "
                         f"typed as its other values")
            if operand.name == "list" and operand.elem.name in ("map", "dyn"):
                # provenance(v).source: the places are a list, each with the field
                where += (f"; test its elements, e.g. .exists(e, e.{name} == ...) or "
                          f".all(e, ...)")
            if name in ("length", "len", "count", "size") and operand.name in (
                    "list", "string", "bytes"):
                where += f"; its size is size(x) or x.size(), not x.{name}"
            self.error(node, f"{article(operand)} has no fields (reading '.{name}'){where}")
            return DYN
        f = operand.field(name)
        if f is None:
            if operand.closed and not test_only and not (
                    path is not None and facts.has((*path, name))):
                self.unknown_field(operand, name, node, path)
            # A closed map never holds it: read under has(), it is never read; its
            # value type is what the other keys hold, not what this one would.
            if not operand.closed and path is not None and operand.fields:
                self.guessed[(*path, name)] = tuple(k for k, _ in operand.fields)
            return DYN if operand.closed else operand.value
        if (not f.required and not test_only and path is not None
                and not facts.has((*path, name)) and not self.is_local(path[0])):
            dotted = ".".join((*path, name))
            self.warning(node, f"'{dotted}' may be absent (it is not a required parameter): "
                               f"reading it when a call leaves it out is an evaluation error "
                               f"{FAILS_CLOSED}; test has({dotted}) first")
        return f.type

    def unknown_field(self, operand: Type, name: str, node: ast.Node,
                      path: Path | None) -> None:
        """A key a closed map (``tool``, ``request``, a counter, params) never holds."""
        keys = [k for k, _ in operand.fields or ()]
        where = ".".join(path) if path else "this map"
        dotted = f"{where}.{name}" if path else f"'{name}'"
        has = f"{where} has {', '.join(keys)}" if keys else f"{where} is empty"
        report = self.error if operand.closed == "error" else self.warning
        hint = suggest(name, keys)
        if path == ("request",) and not hint:
            hint = ("; the caller is principal (Kubernetes' request.userInfo)"
                    if name in ("userInfo", "user", "username") else
                    "; request is the user's request, the tool's arguments are args")
        report(node, f"'{dotted}' does not exist ({has}){hint}")

    # -- inference -----------------------------------------------------------------------

    def infer(self, node: ast.Node, facts: Facts) -> Type:
        kind = type(node)
        if kind is ast.Call:
            assert isinstance(node, ast.Call)
            return self.call(node, facts)
        if kind is ast.Literal:
            assert isinstance(node, ast.Literal)
            return of_value(node.value)  # a literal is a scalar
        if kind is ast.Ident:
            assert isinstance(node, ast.Ident)
            if node.name == "args" and (facts.tools or facts.excluded) \
                    and not self.is_local("args"):
                narrowed = self.tool_args(facts)
                if narrowed is not None:
                    return narrowed
            return self.lookup(node.name)
        if isinstance(node, ast.Select):
            operand = self.infer(node.operand, facts)
            if operand.name == "dyn" and not facts.types:
                return BOOL if node.test_only else DYN
            path = _path(node.operand)
            t = self.field(operand, node.field, node, path, facts, test_only=node.test_only)
            return BOOL if node.test_only else t
        if isinstance(node, ast.ListLit):
            et: Type | None = None
            for e in node.elements:
                t = self.infer(e, facts)
                et = t if et is None else join(et, t)
            return list_of(et or DYN)
        if isinstance(node, ast.MapLit):
            kt: Type | None = None
            vt: Type | None = None
            for k, v in node.entries:
                tk, tv = self.infer(k, facts), self.infer(v, facts)
                kt = tk if kt is None else join(kt, tk)
                vt = tv if vt is None else join(vt, tv)
            return map_of(kt or DYN, vt or DYN)
        if isinstance(node, ast.Comprehension):
            return self.comprehension(node, facts)
        if isinstance(node, ast.Call):
            return self.call(node, facts)
        return DYN

    def comprehension(self, node: ast.Comprehension, facts: Facts) -> Type:
        rng = self.infer(node.iter_range, facts)
        second: Type = DYN  # the value of a two-variable comprehension
        if rng.name == "list":
            elem = rng.elem
            if node.iter_var2:
                elem, second = INT, rng.elem
        elif rng.name == "map":
            elem = rng.key
            if node.iter_var2:
                second = rng.value
        elif rng.name == "dyn":
            elem = DYN
        else:
            self.error(node.iter_range, f"{node.macro}() needs a list or a map, not "
                                        f"{article(rng)}")
            elem = DYN
        accu = self.infer(node.accu_init, facts)
        scope = {node.iter_var: elem, node.accu_var: accu}
        if node.iter_var2:
            scope[node.iter_var2] = second
        self._locals.append(scope)
        try:
            self.infer(node.loop_condition, facts)
            step = self.infer(node.loop_step, facts)
            self._locals[-1][node.accu_var] = join(accu, step)
            return self.infer(node.result, facts)
        finally:
            self._locals.pop()

    def call(self, node: ast.Call, facts: Facts) -> Type:
        f, args = node.function, node.args
        if node.target is None:
            if f == "_&&_" or f == "_||_":
                left = self.infer(args[0], facts)
                right_facts = facts | (self.facts(args[0]) if f == "_&&_"
                                       else self.facts(args[0], False))
                right = self.infer(args[1], right_facts)
                op = "&&" if f == "_&&_" else "||"
                for operand, t in ((args[0], left), (args[1], right)):
                    if not _accepts(BOOL, t):
                        self.error(operand, f"the operands of {op} must be bools, not "
                                            f"{article(t)}")
                return BOOL
            if f == "!_":
                t = self.infer(args[0], facts)
                if not _accepts(BOOL, t):
                    self.error(args[0], f"! needs a bool, not {article(t)}")
                return BOOL
            if f == "_?_:_":
                cond = self.infer(args[0], facts)
                if not _accepts(BOOL, cond):
                    self.error(args[0], f"the condition of ? : must be a bool, not "
                                        f"{article(cond)}")
                a = self.infer(args[1], facts | self.facts(args[0]))
                b = self.infer(args[2], facts | self.facts(args[0], False))
                return join(a, b)
            if f in _OPERATORS:
                types = [self.infer(a, facts) for a in args]
                return _OPERATORS[f](self, node, types)
            if f == "_[_]":
                return self.index(node, facts)
            if f == "@in":
                return self.in_(node, facts)
        return self.function(node, facts)

    def index(self, node: ast.Call, facts: Facts) -> Type:
        container, key = node.args
        ct = self.infer(container, facts)
        kt = self.infer(key, facts)
        if ct.name == "list":
            if not _accepts(INT, kt) and kt.name != "uint":
                self.error(key, f"a list index must be an int, not {article(kt)}")
            return ct.elem
        if ct.name == "map":
            if (isinstance(key, ast.Literal) and isinstance(key.value, str)
                    and (ct.fields or (ct.closed and ct.fields is not None))):
                return self.field(ct, key.value, key, _path(container), facts,
                                  test_only=False)
            if not _comparable(ct.key, kt):
                self.error(key, f"the keys of {ct} are {ct.key}s, not {kt}s")
            return ct.value
        if ct.name in ("dyn",):
            return DYN
        self.error(node, f"{article(ct)} cannot be indexed with [...]")
        return DYN

    def in_(self, node: ast.Call, facts: Facts) -> Type:
        item, container = node.args
        it = self.infer(item, facts)
        ct = self.infer(container, facts)
        if ct.name == "list":
            if not _comparable(it, ct.elem):
                negated = isinstance(item, ast.Call) and item.function == "!_" \
                    and item.target is None
                self.error(item, f"{article(it)} is never in {ct}" + (
                    " (!x in list reads as (!x) in list: write !(x in list))"
                    if negated else ""))
        elif ct.name == "map":
            if not _comparable(it, ct.key):
                self.error(item, f"{article(it)} is never a key of {ct}")
        elif ct.name == "string":
            self.error(node, "'in' needs a list or a map; for a substring test write "
                             "s.contains(x)")
        elif ct.name != "dyn":
            self.error(container, f"'in' needs a list or a map, not {article(ct)}")
        return BOOL

    def function(self, node: ast.Call, facts: Facts) -> Type:
        name = call_name(node)  # a namespaced global: sets.contains(a, b)
        receiver_t: Type | None = None
        if node.target is not None and name == node.function:
            receiver_t = self.infer(node.target, facts)
        types = [self.infer(a, facts) for a in node.args]
        _check_constant(self, name, node)
        overloads = _OVERLOADS.get((name, receiver_t is not None), [])
        if not overloads:
            return DYN
        fits = [o for o in overloads if len(o.params) == len(types)
                and (o.receiver is None or _accepts(o.receiver, receiver_t or DYN))
                and all(_accepts(p, t) for p, t in zip(o.params, types, strict=True))]
        if fits:
            if name == "provenance" and node.target is None:
                return list_of(PLACE)
            results = {str(o.result): o.result for o in fits}
            return next(iter(results.values())) if len(results) == 1 else DYN
        if any(len(o.params) == len(types) for o in overloads):
            got = ", ".join(str(t) for t in types)
            where = f"{receiver_t}." if receiver_t is not None else ""
            wanted = "; ".join(o.text for o in overloads)
            hint = ""
            if name == "contains" and receiver_t is not None and receiver_t.name in (
                    "list", "map"):
                hint = " (for a list or a map write x in list)"
            elif name in ("startsWith", "endsWith", "contains", "matches") and types \
                    and types[0].name == "list" and receiver_t is not None \
                    and receiver_t.name in ("string", "dyn"):
                hint = (f" (to test each element of a list: list.exists(p, "
                        f"x.{name}(p)))")
            self.error(node, f"no overload of {where}{name}({got}); it takes: {wanted}{hint}")
        return DYN


def _qualified(node: ast.Call) -> str | None:
    target = node.target
    parts = [node.function]
    while isinstance(target, ast.Select) and not target.test_only:
        parts.append(target.field)
        target = target.operand
    if isinstance(target, ast.Ident):
        parts.append(target.name)
        return ".".join(reversed(parts))
    return None



# -- operators -------------------------------------------------------------------------


def _arith(symbol: str) -> Callable[[_Checker, ast.Call, list[Type]], Type]:
    def rule(c: _Checker, node: ast.Call, types: list[Type]) -> Type:
        if len(types) == 1:  # -x
            (t,) = types
            if t.name in NUMERIC or t.name in ("dyn", "duration"):
                return t
            c.error(node, f"cannot negate {article(t)}")
            return DYN
        a, b = types
        if "dyn" in (a.name, b.name):
            known = b if a.name == "dyn" else a
            if symbol == "+" and known.name in ("string", "bytes", "list"):
                return known
            return known if known.name in NUMERIC and symbol != "+" else DYN
        result = _arith_result(symbol, a, b)
        if result is not None:
            return result
        hint = ""
        if symbol == "+" and "string" in (a.name, b.name):
            hint = "; convert the other operand with string(...)"
        elif a.name in NUMERIC and b.name in NUMERIC:
            hint = "; CEL does not mix int, uint and double in arithmetic: convert one " \
                   "side with double(...) or int(...), or write 2.0 rather than 2"
        c.error(node, f"no operator {symbol} for {a} and {b}{hint}")
        return DYN
    return rule


def _arith_result(symbol: str, a: Type, b: Type) -> Type | None:
    if a.name in NUMERIC and b.name in NUMERIC:
        if a.name == "num" or b.name == "num":
            return NUM if "double" not in (a.name, b.name) else DOUBLE
        if a.name == b.name and not (symbol == "%" and a.name == "double"):
            return Type(a.name)
        return None
    if symbol == "+":
        if a.name == b.name and a.name in ("string", "bytes"):
            return Type(a.name)
        if a.name == b.name == "list":
            return join(a, b)
        if {a.name, b.name} == {"timestamp", "duration"}:
            return TIMESTAMP
        if a.name == b.name == "duration":
            return DURATION
    if symbol == "-":
        if a.name == b.name == "timestamp":
            return DURATION
        if a.name == "timestamp" and b.name == "duration":
            return TIMESTAMP
        if a.name == b.name == "duration":
            return DURATION
    return None


def _compare(symbol: str) -> Callable[[_Checker, ast.Call, list[Type]], Type]:
    def rule(c: _Checker, node: ast.Call, types: list[Type]) -> Type:
        a, b = types
        x, y = node.args
        if symbol in ("==", "!="):
            if not _comparable(a, b):
                bad = y if isinstance(y, ast.Literal) else x
                want = a if bad is y else b
                c.error(bad, f"{a} {symbol} {b} is {'never true' if symbol == '==' else 'always true'}"
                             f": CEL does not convert between types{_literal_hint(bad, want)}"
                             f"{_record_hint(x if bad is y else y, want)}")
            else:
                _enum_check(c, a, y)
                _enum_check(c, b, x)
                _time_range_check(c, symbol, x, y)
            return BOOL
        ok = ("dyn" in (a.name, b.name)
              or (a.name in NUMERIC and b.name in NUMERIC)
              or (a.name == b.name and a.name in _ORDERED))
        if not ok:
            bad = y if isinstance(y, ast.Literal) else x
            want = a if bad is y else b
            c.error(bad, f"cannot compare {a} {symbol} {b}: CEL does not convert between "
                         f"types{_params_hint(x, y, a, b) or _literal_hint(bad, want)}"
                         f"{_record_hint(x if bad is y else y, want)}")
        else:
            _time_range_check(c, symbol, x, y)
            _quoted_number_order(c, symbol, x, y, a, b)
        return BOOL
    return rule


def _quoted_number_order(c: _Checker, symbol: str, x: ast.Node, y: ast.Node, a: Type,
                         b: Type) -> None:
    """``args.timeout_s > "300"`` where the type of ``args`` is unknown: against a number
    it is an evaluation error on every call, and as text it orders by characters ("99" >
    "300"); either way not what was meant. (With the tool's schema, an int there makes it
    an error of its own.)"""
    for lit, other, t in ((y, x, a), (x, y, b)):
        if (t.name == "dyn" and isinstance(lit, ast.Literal) and isinstance(lit.value, str)
                and re.fullmatch(r"[-+]?\d+(\.\d+)?", lit.value.strip())
                and not isinstance(other, ast.Literal)):
            text = lit.value.strip()
            c.warning(lit, f"ordering with the text '{text}' ({symbol}): compared with a "
                           f"number it is an evaluation error on every call (CEL does not "
                           f"convert between types), and text orders by characters ('99' > "
                           f"'300'); write the number without quotes: {text}")
            return


TIME_RANGES: Mapping[str, tuple[int, int, str]] = {
    "getMonth": (0, 11, "0 (January) to 11 (December)"),
    "getDate": (1, 31, "1 to 31 (getDayOfMonth() counts from 0)"),
    "getDayOfMonth": (0, 30, "0 to 30 (getDate() counts from 1)"),
    "getDayOfWeek": (0, 6, "0 (Sunday) to 6 (Saturday)"),
    "getDayOfYear": (0, 365, "0 to 365"),
    "getHours": (0, 23, "0 to 23"),
    "getMinutes": (0, 59, "0 to 59"),
    "getSeconds": (0, 59, "0 to 59"),
    "getMilliseconds": (0, 999, "0 to 999"),
}
"""What each timestamp accessor gives (on a duration they are totals, unbounded)."""

_COMPARE: Mapping[str, Callable[[float, float], bool]] = {
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
}
_FLIPPED = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def _time_range_check(c: _Checker, symbol: str, x: ast.Node, y: ast.Node) -> None:
    """``now.getDayOfWeek() == 7``, ``now.getMonth() == 12``, ``getHours() > 23``: a
    comparison that no value the accessor gives can change (a rule that never fires, or
    always does), usually from counting as another language does (months from 1)."""
    for call, lit, op in ((x, y, symbol), (y, x, _FLIPPED[symbol])):
        if not (isinstance(call, ast.Call) and call.target is not None
                and call.function in TIME_RANGES and isinstance(lit, ast.Literal)
                and isinstance(lit.value, int | float) and not isinstance(lit.value, bool)):
            continue
        scratch = _Checker(c.env)
        scratch._locals = c._locals
        if scratch.infer(call.target, NONE).name != "timestamp":
            return  # a duration's getHours() is its whole length in hours
        lo, hi, says = TIME_RANGES[call.function]
        outcomes = {_COMPARE[op](v, lit.value) for v in range(lo, hi + 1)}
        if len(outcomes) == 1:
            always = outcomes.pop()
            c.warning(lit, f"{call.function}() {op} {lit.value} is "
                           f"{'always' if always else 'never'} true: {call.function}() "
                           f"gives {says}")
        return


def _enum_check(c: _Checker, t: Type, other: ast.Node) -> None:
    if t.values is not None and isinstance(other, ast.Literal) \
            and other.value not in t.values and type(other.value) is not bool:
        allowed = ", ".join(repr(v) for v in t.values)
        close = suggest(str(other.value), [str(v) for v in t.values])
        if t is _SOURCE:  # the engine's own word: certain, not a schema's promise
            hint = close or "; the tool a result came from is p.tool"
            c.error(other, f"{other.value!r} is never the source of a provenance place: "
                           f"source is one of {allowed}{hint}")
            return
        c.warning(other, f"{other.value!r} is not one of the values the tool schema "
                         f"allows ({allowed}){close}")


_OPERATORS: Mapping[str, Callable[[_Checker, ast.Call, list[Type]], Type]] = {
    "_+_": _arith("+"), "_-_": _arith("-"), "_*_": _arith("*"), "_/_": _arith("/"),
    "_%_": _arith("%"), "-_": _arith("-"),
    "_==_": _compare("=="), "_!=_": _compare("!="), "_<_": _compare("<"),
    "_<=_": _compare("<="), "_>_": _compare(">"), "_>=_": _compare(">="),
}


# -- constants -------------------------------------------------------------------------

REGEX_FUNCTIONS = frozenset({"matches", "find", "findAll", "regex.extract",
                             "regex.extractAll", "regex.replace"})
"""Functions (by qualified name) with an RE2 pattern argument (``pattern_argument``)."""
_REGEX_ARG = REGEX_FUNCTIONS


def call_name(node: ast.Call) -> str:
    """The function ``node`` calls: qualified for a namespaced global
    (``regex.extract(s, re)``), else the bare name (``s.matches(re)``)."""
    if node.target is not None:
        qualified = _qualified(node)
        if qualified is not None and ((qualified, False) in _OVERLOADS
                                      or qualified in stdlib.GLOBALS
                                      or qualified in library.FUNCTIONS):
            return qualified
    return node.function


def pattern_argument(name: str, node: ast.Call) -> ast.Node | None:
    """The argument of regex function ``name`` that is its pattern, if present:
    the receiver's first argument (``s.matches(re)``), the second of a global
    (``matches(s, re)``, ``regex.extract(s, re)``)."""
    if name not in REGEX_FUNCTIONS:
        return None
    second = name.startswith("regex.") or (node.target is None and name == "matches")
    args = node.args[1:] if second else node.args
    return args[0] if args else None


def _check_constant(c: _Checker, name: str, node: ast.Call) -> None:
    """A literal argument that can never be valid is a load error, not a run-time one."""
    args = node.args
    if name in _REGEX_ARG:
        pattern = pattern_argument(name, node)
        args = (pattern,) if pattern is not None else ()
    literal: ast.Literal | None = None
    text = ""
    if args:
        folded = constant_text(args[0])
        if folded is not None:
            text, literal = folded
    if literal is None:
        return
    problem: str | None = None
    if name in _REGEX_ARG:
        problem = regex_problem(text)
    elif name in ("url", "ip", "cidr", "timestamp", "duration") and node.target is None:
        problem = _parse_problem(name, text)
    if problem:
        c.error(literal, problem)


def constant_text(node: ast.Node, depth: int = 0) -> tuple[str, ast.Literal] | None:
    """The text of a string literal, or of ``+`` of them (``"(?i)" + "..."``, as a
    library function's body builds a pattern from its argument, params included), with
    the first literal to report at; None for anything else."""
    if isinstance(node, ast.Literal):
        return (node.value, node) if isinstance(node.value, str) else None
    if (depth < 16 and isinstance(node, ast.Call) and node.function == "_+_"
            and node.target is None and len(node.args) == 2):
        left = constant_text(node.args[0], depth + 1)
        right = constant_text(node.args[1], depth + 1) if left is not None else None
        if left is not None and right is not None and len(left[0]) + len(right[0]) <= 100_000:
            return left[0] + right[0], left[1]
    return None


def regex_problem(pattern: str) -> str | None:
    """Why RE2 rejects ``pattern`` (with a hint for the usual PCRE habits), or None."""
    import re2

    from guardrails.expr.lib_common import RE2_OPTIONS, re2_message

    try:
        re2.compile(pattern, RE2_OPTIONS)
    except Exception as e:
        detail = re2_message(e)
        hint = ""
        if any(x in pattern for x in ("(?=", "(?!", "(?<=", "(?<!")):
            hint = " (RE2 has no lookahead or lookbehind: match the parts separately " \
                   "and combine them with && and !)"
        elif "\\1" in pattern or "\\2" in pattern:
            hint = " (RE2 has no backreferences)"
        elif pattern[:1] in ("*", "?", "+") or "(*" in pattern or "|*" in pattern:
            hint = " (a regular expression, not a glob: '.*' is any text, and " \
                   "matches() searches, so a pattern needs no '*' at its ends)"
        return f"invalid regular expression '{pattern}': {detail}{hint}"
    return None


def _parse_problem(name: str, text: str) -> str | None:
    from guardrails.expr import lib_net

    parse: Callable[[str], object] = {
        "url": lib_net.url, "ip": lib_net.ip, "cidr": lib_net.cidr,
        "timestamp": stdlib.parse_timestamp, "duration": stdlib.parse_duration,
    }[name]
    try:
        parse(text)
    except Exception as e:
        return f"invalid {name} literal '{text}': {e}{_LITERAL_FORMS.get(name, '')}"
    return None


_LITERAL_FORMS: Mapping[str, str] = {
    "duration": " (write a number and a unit, without spaces: 90s, 30m, 24h, 1h30m; units "
                "are h, m, s, ms, us, ns: a day is 24h, a week 168h)",
    "timestamp": " (write RFC 3339, with a time and a zone: 2026-01-31T09:00:00Z or "
                 "2026-01-31T10:00:00+01:00)",
}
"""The form a literal takes, for the message when it has another."""
