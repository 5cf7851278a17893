"""Schema-aware checks: policies read against the parameter schemas of the real tools.

A misspelled argument name in a rule (``args.amout``) is not a load-time error: CEL
cannot know which arguments a tool takes, and the rule then fails on every call or,
worse inside ``has()``, silently never fires. Given each tool's JSON Schema these
mistakes become visible before deployment. Used by ``guardrails check --tools`` and by
the integration's ``guard(..., strict=True)``.

Severity policy (as Cedar's strict validation and Kubernetes' CEL checks draw it):

- ``error``: an expression reads or tests an argument that no tool matched by the
  policy declares (a typo: the rule can never see a value there), unless it is tested
  with ``has()`` and close to no declared name; a type error against the schemas
  (``guardrails.engine.typecheck``): no operator or function for the argument types, a
  condition that is not a bool.
- ``warning``: an optional argument (not ``required`` by every matched tool) read where
  no guard (``has()``, ``&&``, ``||``, a ternary, a repair's own ``when``) makes sure it
  is there; a value outside a schema ``enum``; a repair, secret or injection naming an
  argument no matched tool declares; a policy whose ``match.tools`` matches none of the
  known tools. ``guardrails check --strict`` counts warnings as errors.
- ``info``: a known tool that no policy matches (it runs unguarded); an argument no
  matched tool declares that is only read under ``has()`` (a check meant for other
  tools, such as payments' ``currency``).

A tool whose schema has no ``properties`` is treated as accepting anything and is not
checked. Only the first level of ``args`` is checked (nested objects are free-form).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from guardrails.engine.policy import CompiledPolicy
from guardrails.engine.typecheck import args_type, typecheck
from guardrails.expr import ast
from guardrails.model.source import Expression, Position

Severity = Literal["error", "warning", "info"]

__all__ = ["Finding", "Severity", "lint", "parse_tools", "tool_parameters"]


@dataclass(frozen=True, slots=True)
class Finding:
    """One schema-aware finding; ``line``/``column`` are 1-based, 0 when not about a file."""

    severity: Severity
    file: str
    line: int
    column: int
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}: " if self.file else ""
        return f"{where}{self.severity}: {self.message}"

    def to_dict(self) -> dict[str, object]:
        return {"severity": self.severity, "file": self.file, "line": self.line,
                "column": self.column, "message": self.message}


class _HasPolicies(Protocol):
    @property
    def policies(self) -> Sequence[CompiledPolicy]: ...


def lint(policies: _HasPolicies | Iterable[CompiledPolicy],
         tools: Mapping[str, Mapping[str, Any]]) -> list[Finding]:
    """Check compiled policies against ``tools`` (tool name -> parameters JSON Schema)."""
    compiled: Sequence[CompiledPolicy] = (
        tuple(policies.policies) if hasattr(policies, "policies") else tuple(policies)
    )
    params = {name: tool_parameters(schema) for name, schema in tools.items()}
    findings: list[Finding] = []
    for policy in compiled:
        findings.extend(_lint_policy(policy, params, tools))
    for tool in sorted(tools):
        if not any(p.matches_tool(tool) for p in compiled):
            findings.append(Finding("info", "", 0, 0,
                                    f"tool {tool!r} is not matched by any policy"))
    order = {"error": 0, "warning": 1, "info": 2}
    findings.sort(key=lambda f: (f.file == "", f.file, f.line, f.column, order[f.severity]))
    return findings


def tool_parameters(schema: Mapping[str, Any]) -> frozenset[str] | None:
    """Parameter names a tool declares, or None when its schema does not say."""
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(props, Mapping):
        return None
    return frozenset(str(k) for k in props)


def parse_tools(data: Any) -> dict[str, Mapping[str, Any]]:
    """Tool schemas from the shapes people already have on disk.

    Accepts a mapping ``name -> parameters schema``, or a list of function definitions
    ``{name, parameters}`` (OpenAI functions) or ``{type: function, function: {...}}``
    (OpenAI tools). Raises ``ValueError`` with a one-line reason otherwise.
    """
    if isinstance(data, Mapping):
        out: dict[str, Mapping[str, Any]] = {}
        for name, schema in data.items():
            if not isinstance(schema, Mapping):
                raise ValueError(f"tool {name!r}: expected a JSON Schema object")
            out[str(name)] = schema
        return out
    if isinstance(data, list):
        out = {}
        for i, item in enumerate(data):
            fn = item.get("function") if isinstance(item, Mapping) else None
            entry = fn if isinstance(fn, Mapping) else item
            if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
                raise ValueError(f"item {i}: expected a function definition with a 'name'")
            schema = entry.get("parameters", {})
            if not isinstance(schema, Mapping):
                raise ValueError(f"tool {entry['name']!r}: 'parameters' must be an object")
            out[entry["name"]] = schema
        return out
    raise ValueError("expected a mapping of tool name to parameters schema, "
                     "or a list of function definitions")


@dataclass(frozen=True, slots=True)
class _Access:
    name: str
    offset: int
    presence: bool
    """True for ``has(args.x)`` and ``"x" in args``: a test, not a read."""
    select: bool
    """``args.x`` (the node offset may sit before the name) rather than a string literal."""


def _lint_policy(policy: CompiledPolicy, params: Mapping[str, frozenset[str] | None],
                 params_schemas: Mapping[str, Mapping[str, Any]]) -> list[Finding]:
    matched = [t for t in params if policy.matches_tool(t)]
    findings: list[Finding] = []
    if policy.tools is not None and params and not matched:
        globs = ", ".join(policy.tools)
        findings.append(_at(policy.position, "warning",
                            f"policy {policy.name}: match.tools [{globs}] matches none "
                            f"of the known tools"))
    declared: dict[str, frozenset[str]] = {}
    for t in matched:
        ps = params[t]
        if ps is not None:
            declared[t] = ps
    if not declared:
        return findings
    union: frozenset[str] = frozenset().union(*declared.values())

    for element, expression, program in policy.expressions():
        accesses = _arg_accesses(program.ast)
        tested = {a.name for a in accesses if a.presence}
        noted: set[str] = set()
        for acc in accesses:
            missing = sorted(t for t, ps in declared.items() if acc.name not in ps)
            if len(missing) != len(declared):
                continue
            hint = _hint(acc.name, union)
            # Tested with has() and not close to a declared name: a deliberate check for
            # an argument some other tool may send (payments' currency), not a typo.
            if (acc.presence or acc.name in tested) and not hint:
                if acc.name not in noted:
                    noted.add(acc.name)
                    findings.append(_at(_position(expression, acc), "info",
                                        f"policy {policy.name}: {element}: "
                                        f"{_no_param(missing, acc.name)}; it is tested with "
                                        f"has(), so this only acts on calls that send it"))
                continue
            findings.append(_at(_position(expression, acc), "error",
                                f"policy {policy.name}: {element}: "
                                f"{_no_param(missing, acc.name)}{hint}"))
    # Types, and optional arguments read without has(): an argument only some matched
    # tools declare is optional too. Guards are understood (has(), &&, ||, ternaries, a
    # repair's own when), which a per-expression name test cannot do.
    typed = args_type([params_schemas[t] for t in declared])
    for f in typecheck(policy, typed):
        findings.append(_at(f.position, "error" if f.severity == "error" else "warning",
                            f"policy {policy.name}: {f.element}: {f.message}"))

    def undeclared(names: Iterable[str], what: str, at: Position) -> None:
        for name in names:
            if name not in union:
                findings.append(_at(at, "warning",
                                    f"policy {policy.name}: {what} {name!r}, which no matched "
                                    f"tool declares{_hint(name, union)}"))

    for repair in policy.repairs:
        for arg, compiled in repair.set:
            undeclared([arg], f"repairs.{repair.name} sets argument",
                       compiled.expression.position)
        at = repair.when.expression.position if repair.when is not None else policy.position
        undeclared(repair.unset, f"repairs.{repair.name} unsets argument", at)
    undeclared(sorted(policy.secret_arguments), "secrets.arguments names argument",
               policy.position)
    undeclared(sorted(policy.inject), "secrets.inject sets argument", policy.position)
    return findings


def _no_param(missing: Sequence[str], name: str) -> str:
    if len(missing) == 1:
        return f"tool {missing[0]!r} has no parameter {name!r}"
    return f"tools {', '.join(repr(t) for t in missing)} have no parameter {name!r}"


def _hint(name: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, sorted(known), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _at(pos: Position, severity: Severity, message: str) -> Finding:
    return Finding(severity, pos.file, pos.line, pos.column, message)


def _position(expression: Expression, acc: _Access) -> Position:
    """Point at the argument name itself rather than wherever the parser put the node."""
    offset = acc.offset
    if acc.select and not expression.source.startswith(acc.name, offset):
        m = re.compile(r"\.\s*(" + re.escape(acc.name) + r")\b").search(
            expression.source, offset)
        if m is not None:
            offset = m.start(1)
    elif expression.source[offset:offset + 1] in ("'", '"'):
        offset += 1
    return expression.position_of(offset)


def _arg_accesses(node: ast.Node, shadowed: bool = False) -> list[_Access]:
    """Every first-level access to ``args``, skipping comprehensions that rebind it."""
    out: list[_Access] = []
    stack: list[tuple[ast.Node, bool]] = [(node, shadowed)]
    while stack:
        n, hidden = stack.pop()
        if isinstance(n, ast.Comprehension):
            inner = hidden or "args" in (n.iter_var, n.accu_var)
            stack.extend([(n.iter_range, hidden), (n.accu_init, hidden),
                          (n.loop_condition, inner), (n.loop_step, inner), (n.result, inner)])
            continue
        if not hidden:
            acc = _access(n)
            if acc is not None:
                out.append(acc)
        stack.extend((child, hidden) for child in _children(n))
    out.sort(key=lambda a: a.offset)
    return out


def _access(n: ast.Node) -> _Access | None:
    if isinstance(n, ast.Select) and _is_args(n.operand):
        # has(args.x) sits at "has": start looking for the name from "args".
        offset = n.operand.offset if n.test_only else n.offset
        return _Access(n.field, offset, n.test_only, True)
    if isinstance(n, ast.Call) and n.target is None and len(n.args) == 2:
        a, b = n.args
        if n.function == "_[_]" and _is_args(a) and _is_str(b):
            assert isinstance(b, ast.Literal)
            return _Access(b.value, b.offset, False, False)
        if n.function == "@in" and _is_args(b) and _is_str(a):
            assert isinstance(a, ast.Literal)
            return _Access(a.value, a.offset, True, False)
    return None


def _is_args(n: ast.Node) -> bool:
    return isinstance(n, ast.Ident) and n.name == "args"


def _is_str(n: ast.Node) -> bool:
    return isinstance(n, ast.Literal) and isinstance(n.value, str)


def _children(n: ast.Node) -> list[ast.Node]:
    if isinstance(n, ast.Select):
        return [n.operand]
    if isinstance(n, ast.Call):
        return [*n.args, *([n.target] if n.target is not None else [])]
    if isinstance(n, ast.ListLit):
        return list(n.elements)
    if isinstance(n, ast.MapLit):
        return [x for kv in n.entries for x in kv]
    if isinstance(n, ast.StructLit):
        return [v for _, v in n.fields]
    return []
