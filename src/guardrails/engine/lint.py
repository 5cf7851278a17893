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
  known tools, with a glob close to one of them (``send_mony``). ``guardrails check
  --strict`` counts warnings as errors.
- ``info``: a policy whose ``match.tools`` matches none of the known tools and is close
  to none (another agent's tools, in a set several agents share); a known tool that no
  policy matches (it runs unguarded); an argument no
  matched tool declares that is only read under ``has()`` (a check meant for other
  tools, such as payments' ``currency``).

A tool whose schema has no ``properties`` is treated as accepting anything and is not
checked. Only the first level of ``args`` is checked (nested objects are free-form).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, Final, Literal, Protocol

from guardrails.engine.decision import Action, Effect
from guardrails.engine.policy import CompiledPolicy, CompiledRule
from guardrails.engine.typecheck import TypeFinding, args_type, typecheck
from guardrails.expr import ast
from guardrails.expr.checker import qualified_name
from guardrails.expr.spelling import closest
from guardrails.expr.typechecker import (
    NONE,
    Facts,
    call_name,
    facts_of,
    pattern_argument,
    suggest,
)
from guardrails.expr.types import Type
from guardrails.model.documents import Documents
from guardrails.model.source import Expression, Position

Severity = Literal["error", "warning", "info"]

__all__ = ["Finding", "Severity", "lint", "lint_agents", "lint_policies", "parse_tools",
           "tool_parameters"]


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


def _policies(policies: _HasPolicies | Iterable[CompiledPolicy]) -> tuple[CompiledPolicy, ...]:
    """A loaded policy set (``.policies``) or compiled policies themselves."""
    return tuple(policies.policies) if hasattr(policies, "policies") else tuple(policies)


def lint(policies: _HasPolicies | Iterable[CompiledPolicy],
         tools: Mapping[str, Mapping[str, Any]], *,
         unguarded_typo: Severity = "warning", principal: Type | None = None
         ) -> list[Finding]:
    """Check compiled policies against ``tools`` (tool name -> parameters JSON Schema).

    ``unguarded_typo``: the severity of a glob that matches no tool but is close to one
    no policy matches (``send_emial``). ``guard(strict=True)``, which checks against one
    agent's own tools, makes it an error: that tool would run unguarded.
    """
    compiled = _policies(policies)
    params = {name: tool_parameters(schema) for name, schema in tools.items()}
    findings: list[Finding] = []
    unguarded = [t for t in sorted(tools) if not any(p.matches_tool(t) for p in compiled)]
    seen: set[tuple[str, int]] = set()  # a policy bound several times is checked once
    for policy in compiled:
        findings.extend(_lint_policy(policy, params, tools, unguarded, unguarded_typo,
                                     principal))
        if (policy.position.file, policy.position.line) not in seen:
            seen.add((policy.position.file, policy.position.line))
            findings.extend(_record_tools(policy, compiled, sorted(tools)))
    for tool in unguarded:
        findings.append(Finding("info", "", 0, 0, f"tool {tool!r} is not matched by any policy"))
    order = {"error": 0, "warning": 1, "info": 2}
    findings.sort(key=lambda f: (f.file == "", f.file, f.line, f.column, order[f.severity]))
    return findings


def _field_string_literals(nodes: Iterable[ast.Node]
                           ) -> Iterator[tuple[str, str, ast.Literal]]:
    """Each ``x.f == "s"`` / ``"s" != x.f`` / ``x.f in ["s", ...]`` among ``nodes`` (``x``
    a name, ``f`` a field read, not a ``has()``): the name, the field and each string
    literal the field is compared with. The lint checks of tool names written in expressions read these."""
    for n in nodes:
        if not (isinstance(n, ast.Call) and n.target is None and len(n.args) == 2
                and n.function in ("_==_", "_!=_", "@in")):
            continue
        side, other = n.args if n.function == "@in" else (
            n.args if isinstance(n.args[0], ast.Select) else n.args[::-1])
        if not (isinstance(side, ast.Select) and isinstance(side.operand, ast.Ident)
                and not side.test_only):
            continue
        name = side.operand.name
        literals = (other.elements if n.function == "@in" and isinstance(
            other, ast.ListLit) else () if n.function == "@in" else (other,))
        for lit in literals:
            if isinstance(lit, ast.Literal) and isinstance(lit.value, str):
                yield name, side.field, lit


def _record_tools(policy: CompiledPolicy, every: Sequence[CompiledPolicy],
                  tools: Sequence[str]) -> list[Finding]:
    """``h.tool == "fetch_url"`` (a history entry's or a provenance place's tool, ``h``
    iterating ``history`` or ``provenance(v)``) naming
    none of the tools and matched by no policy: the guard records only calls of the
    deployment's tools, so the test is never true (with ``!=``: always). Close to one of
    the tools, a warning (a typo: ``web_fetch`` for ``fetch_web``); else info, since a
    set shared by several agents may be checked with one agent's tools."""
    out: list[Finding] = []
    named = sorted({g for p in every for g in p.tools or ()
                    if not any(c in g for c in "*?[")})
    for element, expression, program in policy.expressions():
        nodes = ast.walk(program.ast)
        records = {c.iter_var for c in nodes if isinstance(c, ast.Comprehension)
                   and any((isinstance(r, ast.Ident) and r.name == "history")
                           or (isinstance(r, ast.Call) and r.function == "provenance")
                           for r in ast.walk(c.iter_range))}
        for name, field, lit in _field_string_literals(nodes):
            if field == "tool" and name in records:
                text = lit.value
                if text in tools or any(p.matches_tool(text) for p in every
                                        if p.tools is not None):
                    continue
                if closest(text, named, cutoff=0.8) is not None:
                    continue  # a typo of a policy's tool: lint_policies says so
                close = closest(text, tools, cutoff=0.7)
                severity: Severity = "warning" if close else "info"
                hint = f"; did you mean '{close}'?" if close else (
                    " (a tool of another agent? then check with its tools too)")
                out.append(_at(expression.position_of(lit.offset), severity,
                               f"policy {policy.name}: {element}: {name}.tool "
                               f"is never '{text}': it is none of the tools and no policy "
                               f"matches it, so no history entry or result of it is ever "
                               f"recorded{hint}"))
    return out


def tool_parameters(schema: Mapping[str, Any]) -> frozenset[str] | None:
    """Parameter names a tool declares, or None when its schema does not say."""
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(props, Mapping):
        return None
    return frozenset(str(k) for k in props)


_SCHEMA_KEYS = ("parameters", "inputSchema", "input_schema")
"""Where a tool definition keeps its parameters' JSON Schema: OpenAI's functions and
tools, MCP's ``tools/list``, Anthropic's tools."""


def parse_tools(data: Any) -> dict[str, Mapping[str, Any]]:
    """Tool schemas from the shapes people already have on disk.

    Accepts a mapping ``name -> parameters schema``, or a list of tool definitions
    ``{name, parameters}`` (OpenAI functions), ``{type: function, function: {...}}``
    (OpenAI tools), ``{name, inputSchema}`` (MCP) or ``{name, input_schema}`` (Anthropic);
    the list may be wrapped as an MCP ``tools/list`` result (``{"tools": [...]}``, also
    inside a JSON-RPC ``{"result": ...}``). Raises ``ValueError`` with a one-line reason
    otherwise: a definition read as having no parameters would check nothing, silently.
    """
    if isinstance(data, Mapping) and isinstance(data.get("result"), Mapping) \
            and "jsonrpc" in data:
        data = data["result"]
    if isinstance(data, Mapping) and isinstance(data.get("tools"), list):
        data = data["tools"]
    if isinstance(data, Mapping):
        out: dict[str, Mapping[str, Any]] = {}
        for name, schema in data.items():
            if not isinstance(schema, Mapping):
                raise ValueError(f"tool {name!r}: expected a JSON Schema object")
            _bare_properties(str(name), schema)
            out[str(name)] = schema
        return out
    if isinstance(data, list):
        out = {}
        for i, item in enumerate(data):
            fn = item.get("function") if isinstance(item, Mapping) else None
            entry = fn if isinstance(fn, Mapping) else item
            if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
                raise ValueError(f"item {i}: expected a tool definition with a 'name'")
            keys = [k for k in _SCHEMA_KEYS if k in entry]
            schema = entry[keys[0]] if keys else {}
            if not isinstance(schema, Mapping):
                raise ValueError(f"tool {entry['name']!r}: '{keys[0]}' must be an object")
            unknown = sorted(k for k in entry if isinstance(k, str) and k.lower().replace(
                "_", "") in ("inputschema", "parameters", "params", "schema", "arguments",
                             "args") and k not in _SCHEMA_KEYS)
            if not keys and "properties" in entry:
                unknown = ["properties"]
            if unknown:
                raise ValueError(f"tool {entry['name']!r}: '{unknown[0]}' is not where a "
                                 f"tool definition keeps its schema: write parameters "
                                 f"(OpenAI), inputSchema (MCP) or input_schema (Anthropic)")
            out[entry["name"]] = schema
        return out
    raise ValueError("expected a mapping of tool name to parameters schema, "
                     "or a list of tool definitions")


def _bare_properties(name: str, schema: Mapping[str, Any]) -> None:
    """``send_email: {to: {type: string}}``: the parameters written without the object
    schema around them. Read as a schema without ``properties`` it would accept anything
    and check nothing."""
    wrapped = [k for k in _SCHEMA_KEYS if isinstance(schema.get(k), Mapping)]
    if wrapped and "properties" not in schema:
        raise ValueError(f"tool {name!r}: a tool definition ({wrapped[0]}: ...) where its "
                         f"parameters schema belongs: map the name to the schema, or give "
                         f"a list of definitions")
    if schema and "properties" not in schema and "type" not in schema and all(
            isinstance(v, Mapping) and "type" in v for v in schema.values()):
        raise ValueError(f"tool {name!r}: {', '.join(map(str, schema))} look like its "
                         f"parameters: write the JSON Schema of its arguments, "
                         f"{{type: object, properties: {{...}}, required: [...]}}")


@dataclass(frozen=True, slots=True)
class _Access:
    name: str
    offset: int
    presence: bool
    """True for ``has(args.x)`` and ``"x" in args``: a test, not a read."""
    select: bool
    """``args.x`` (the node offset may sit before the name) rather than a string literal."""
    facts: Facts = NONE
    """What holds where it is read: ``tool.name == "x" && args.y`` reads x's ``y``."""


def _unmatched_globs(policy: CompiledPolicy, tools: Iterable[str],
                     unguarded: Sequence[str], severity: Severity) -> list[Finding]:
    """A glob that matches no known tool. Globs written for other agents' tools are
    normal (the library's email policy names five); one close to a tool that no policy
    matches (``send_emial`` for ``send_email``) is a typo that leaves that tool unguarded.
    """
    names = sorted(tools)
    globs = policy.tools or ()
    out: list[Finding] = []
    matched_any = False
    for i, glob in enumerate(globs):
        if any(fnmatch.fnmatchcase(t, glob) for t in names):
            matched_any = True
            continue
        close = closest(glob, unguarded, cutoff=0.8)
        if close:
            at = policy.tool_positions[i] if i < len(policy.tool_positions) else policy.position
            out.append(_at(at, severity,
                           f"policy {policy.name}: match.tools [{', '.join(globs)}] "
                           f"matches none of the known tools: {glob!r} matches no tool; "
                           f"did you mean {close!r}? (no policy matches {close!r}, so it "
                           f"runs unguarded; globs are case-sensitive)"))
    if matched_any:
        return [replace(f, message=f.message.replace(
            f"[{', '.join(globs)}] matches none of the known tools: ", "")) for f in out]
    if not out:
        # A policy set shared by several agents is checked against one agent's tools at
        # a time: a policy for another agent's tools matching none of them is normal. A
        # glob close to a known tool is the likely typo (send_mony): a warning.
        near = [(i, c) for i, g in enumerate(globs) if (c := closest(g, names, cutoff=0.8))]
        i = near[0][0] if near else 0
        at = policy.tool_positions[i] if i < len(policy.tool_positions) else policy.position
        if near:
            out.append(_at(at, "warning",
                           f"policy {policy.name}: match.tools [{', '.join(globs)}] matches "
                           f"none of the known tools; did you mean {near[0][1]!r} for "
                           f"{globs[i]!r}? (globs are case-sensitive)"))
        else:
            out.append(_at(at, "info",
                           f"policy {policy.name}: match.tools [{', '.join(globs)}] matches "
                           f"none of the known tools (another agent's tools? none is close "
                           f"to a known one)"))
    return out[:1]


def _lint_policy(policy: CompiledPolicy, params: Mapping[str, frozenset[str] | None],
                 params_schemas: Mapping[str, Mapping[str, Any]],
                 unguarded: Sequence[str] = (),
                 unguarded_typo: Severity = "warning",
                 principal: Type | None = None) -> list[Finding]:
    matched = [t for t in params if policy.matches_tool(t)]
    findings: list[Finding] = []
    if policy.tools is not None and params:
        findings.extend(_unmatched_globs(policy, params, unguarded, unguarded_typo))
    findings.extend(_never_permitted(policy, matched))
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
            # Read only where the tool is one this check has no schema of (another
            # agent's tool, in guard(strict=True) of one agent): nothing to say.
            callers = _callers(declared, acc.facts)
            if not callers:
                continue
            missing = sorted(t for t, ps in callers.items() if acc.name not in ps)
            if len(missing) != len(callers):
                continue
            hint = _hint(acc.name, frozenset().union(*callers.values()))
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
    # Under `tool.name == "x"` args are x's own: a parameter only x declares is read
    # safely there (one x lacks is the name check's error above).
    by_tool = {t: args_type([params_schemas[t]]) for t in declared}
    for f in typecheck(policy, typed, closed_params=True, principal=principal,
                       args_by_tool=by_tool):
        findings.append(_type_finding(policy, f))

    for element, expression, program in policy.expressions():
        findings.extend(_null_defaults(policy, element, expression, program.ast,
                                       {t: params_schemas[t] for t in declared}))

    def undeclared(names: Iterable[str], what: str, at: Position,
                   known: frozenset[str] = union) -> None:
        for name in names:
            if name not in known:
                findings.append(_at(at, "warning",
                                    f"policy {policy.name}: {what} {name!r}, which no matched "
                                    f"tool declares{_hint(name, known)}"))

    for repair in policy.repairs:
        # A repair for one tool (when: 'tool.name == "x" && ...') sets x's arguments; one
        # only for tools without a known schema (another agent's) is not checked.
        callers = _callers(declared, facts_of(repair.when.program.ast)) \
            if repair.when is not None else declared
        if not callers:
            continue
        known: frozenset[str] = frozenset().union(*callers.values())
        for arg, compiled in repair.set:
            undeclared([arg], f"repairs.{repair.name} sets argument",
                       compiled.expression.position, known)
        at = repair.when.expression.position if repair.when is not None else policy.position
        undeclared(repair.unset, f"repairs.{repair.name} unsets argument", at, known)
    undeclared(sorted(policy.secret_arguments), "secrets.arguments names argument",
               policy.position)
    undeclared(sorted(policy.inject), "secrets.inject sets argument", policy.position)
    return findings


def _never_permitted(policy: CompiledPolicy, tools: Sequence[str]) -> list[Finding]:
    """Known tools an allowlist (``defaultAction: deny``) matches that none of its allow or
    require_approval rules can fire for, each testing ``tool.name`` for other tools (``tool.name
    in params.tools`` without the tool): every call of them is denied. The usual slip is a
    tool missing from a catch-all allowlist's list."""
    permits = [r for r in policy.rules if r.action in (Action.ALLOW, Action.REQUIRE_APPROVAL)]
    if policy.default_action.value != "deny" or not permits:
        return []
    applies = facts_of(policy.when.program.ast) if policy.when is not None else NONE
    denied = [t for t in tools if _may_be(applies, t) and not any(
        _may_fire_for(policy, r.when.program.ast, t) for r in permits)]
    if not denied:
        return []
    names = ", ".join(repr(t) for t in denied[:5]) + (" ..." if len(denied) > 5 else "")
    return [_at(policy.position, "warning",
                f"policy {policy.name}: every call of {names} is denied: defaultAction is "
                f"deny and no allow or require_approval rule can fire for "
                f"{'it' if len(denied) == 1 else 'them'} (each tests tool.name for other "
                f"tools); add {'it' if len(denied) == 1 else 'them'} to the rule's tools, "
                f"or leave {'it' if len(denied) == 1 else 'them'} out of match.tools")]


def _may_be(facts: Facts, tool: str) -> bool:
    return (facts.tools is None or tool in facts.tools) and tool not in facts.excluded


def _may_fire_for(policy: CompiledPolicy, node: ast.Node, tool: str) -> bool:
    """False when ``node`` holds only for other tools: ``tool.name == "x"``, ``tool.name in
    [...]`` or ``tool.name in params.list`` as a conjunct, without ``tool``."""
    if not _may_be(facts_of(node), tool):
        return False
    for c in _conjuncts(node):
        if (isinstance(c, ast.Call) and c.target is None and c.function == "@in"
                and len(c.args) == 2 and qualified_name(c.args[0], ()) == "tool.name"):
            found = _param_value(policy, c.args[1])
            if found is not None and isinstance(found[1], list) \
                    and all(isinstance(v, str) for v in found[1]) and tool not in found[1]:
                return False
    return True


def _null_defaults(policy: CompiledPolicy, element: str, expression: Expression,
                   node: ast.Node, schemas: Mapping[str, Mapping[str, Any]]) -> list[Finding]:
    """``args.?x.orValue(d)`` with a ``d`` other than null, where a matched tool's schema
    lets ``x`` be null (``anyOf: [{type: array}, {type: null}]``, Python's ``list[str] |
    None = None``). ``args.?x`` is ``none`` only when the key is missing: a model that sends
    ``"x": null``, or a tool whose validation fills in its default ``None``, makes the
    expression null, not ``d`` (``null.all(...)`` is an error: the rule fails closed, on
    every call where the tool fills the default)."""
    out: list[Finding] = []
    for n in ast.walk(node):
        if not (isinstance(n, ast.Call) and n.function == "orValue" and len(n.args) == 1
                and n.target is not None and _access(n.target) is not None):
            continue
        default = n.args[0]
        if isinstance(default, ast.Literal) and default.value is None:
            continue
        acc = _access(n.target)
        assert acc is not None
        nullable = sorted(t for t, schema in schemas.items()
                          if _nullable(_property(schema, acc.name)))
        if not nullable:
            continue
        out.append(_at(_position(expression, acc), "warning",
                       f"policy {policy.name}: {element}: 'args.?{acc.name}.orValue(...)' is "
                       f"null, not the default, when a call sends {acc.name}: null (the "
                       f"schema of {nullable[0]!r} allows null; a Python tool's validation "
                       f"fills in its default None): write (args.?{acc.name}.orValue(null) "
                       f"!= null ? args.{acc.name} : <default>)"))
    return out


def _property(schema: Mapping[str, Any], name: str) -> Any:
    props = schema.get("properties")
    return props.get(name) if isinstance(props, Mapping) else None


def _nullable(schema: Any) -> bool:
    """Whether a property's JSON Schema accepts null (``type: null``, ``type: [x, "null"]``,
    an ``anyOf``/``oneOf`` option that does)."""
    if not isinstance(schema, Mapping):
        return False
    typ = schema.get("type")
    if typ == "null" or (isinstance(typ, list) and "null" in typ):
        return True
    for combinator in ("anyOf", "oneOf"):
        options = schema.get(combinator)
        if isinstance(options, list) and any(
                isinstance(o, Mapping) and (o.get("type") == "null" or (
                    isinstance(o.get("type"), list) and "null" in o["type"]))
                for o in options):
            return True
    return False


def _type_finding(policy: CompiledPolicy, f: TypeFinding) -> Finding:
    message = f.message
    found = re.match(r"'(params(?:\.\w+)+)' does not exist", message)
    if found:
        sources = {element: e.source for element, e, _ in policy.expressions()}
        if found[1] not in sources.get(f.element, found[1]):
            message += ("; it is read inside a library function this expression calls: a "
                        "Library's params reach the policies that name it in spec.uses (or "
                        "share its file)")
    return _at(f.position, "error" if f.severity == "error" else "warning",
               f"policy {policy.name}: {f.element}: {message}")


def _no_param(missing: Sequence[str], name: str) -> str:
    if len(missing) == 1:
        return f"tool {missing[0]!r} has no parameter {name!r}"
    return f"tools {', '.join(repr(t) for t in missing)} have no parameter {name!r}"


def _hint(name: str, known: Iterable[str]) -> str:
    return suggest(name, sorted(known))


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
    """Every first-level access to ``args``, skipping comprehensions that rebind it, with
    what holds there about the tool's name (the right of ``&&`` and ``||``, the branches
    of ``? :``)."""
    out: list[_Access] = []
    stack: list[tuple[ast.Node, bool, Facts]] = [(node, shadowed, NONE)]
    while stack:
        n, hidden, facts = stack.pop()
        if isinstance(n, ast.Comprehension):
            inner = hidden or "args" in (n.iter_var, n.accu_var)
            stack.extend([(n.iter_range, hidden, facts), (n.accu_init, hidden, facts),
                          (n.loop_condition, inner, facts), (n.loop_step, inner, facts),
                          (n.result, inner, facts)])
            continue
        if not hidden:
            acc = _access(n)
            if acc is not None:
                out.append(replace(acc, facts=facts))
        if isinstance(n, ast.Call) and n.target is None and (
                (n.function in ("_&&_", "_||_") and len(n.args) == 2)
                or (n.function == "_?_:_" and len(n.args) == 3)):
            first, *rest = n.args
            held = [facts_of(first, n.function != "_||_")] if len(rest) == 1 else \
                [facts_of(first), facts_of(first, False)]
            stack.append((first, hidden, facts))
            stack.extend((child, hidden, _tool_facts(facts, h)) for child, h in zip(
                rest, held, strict=True))
            continue
        stack.extend((child, hidden, facts) for child in ast.children(n))
    out.sort(key=lambda a: a.offset)
    return out


def _tool_facts(facts: Facts, more: Facts) -> Facts:
    """Only what is known of the tool's name."""
    both = facts | more
    return Facts(tools=both.tools, excluded=both.excluded)


def _callers(declared: Mapping[str, frozenset[str]], facts: Facts
             ) -> dict[str, frozenset[str]]:
    """The matched tools that can be the one called where ``facts`` hold."""
    return {t: ps for t, ps in declared.items()
            if (facts.tools is None or t in facts.tools) and t not in facts.excluded}


def _access(n: ast.Node) -> _Access | None:
    if isinstance(n, ast.Select) and _is_args(n.operand):
        # has(args.x) sits at "has": start looking for the name from "args".
        offset = n.operand.offset if n.test_only else n.offset
        return _Access(n.field, offset, n.test_only, True)
    if (isinstance(n, ast.Call) and n.function == "@select" and len(n.args) == 2
            and isinstance(n.target, ast.Ident) and n.target.name == "optional"
            and _is_args(n.args[0]) and _is_str(n.args[1])):
        # args.?x tolerates a missing x as has(args.x) does: a test, not a read.
        field = n.args[1]
        assert isinstance(field, ast.Literal)
        return _Access(field.value, field.offset, True, False)
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


# -- checks that need no tool schemas ---------------------------------------------------


def lint_policies(policies: _HasPolicies | Iterable[CompiledPolicy], *,
                  principal: Type | None = None) -> list[Finding]:
    """Likely mistakes in a loaded policy set that no schema is needed to see.

    - ``error``: a ``params`` key that the policy does not have (``params.maxx``): params
      are static, so every evaluation fails (checked on the loaded instances, bindings
      and libraries merged in; at load a binding may still add keys).
    - ``warning``: a rule that can never fire (``when: 'false'``, ``a == 1 && a == 2``) or
      fires whatever the call (``x || true``; a literal ``true`` is taken as meant); a
      ``match.when`` that is constant false; an ``allow`` rule in a policy whose
      ``defaultAction`` is allow (it changes nothing: the most severe fired rule wins);
      ``defaultAction: deny`` with no ``allow`` or ``require_approval`` rule (every
      matched call is denied);
      two rules with the same condition; a history entry field the guard never records
      (``h.tol``); a regex literal whose ``.`` between words is not escaped
      (``"@example.com$"`` also matches ``@exampleXcom``), or that is anchored at the
      start only and ends in a domain or file extension (``^.*\\.pdf`` matches
      ``x.pdf.exe``); a counter no expression reads, or whose ``key`` is quoted text
      naming a value (``'"principal.user"'``: one count for every call); an expression
      reading an argument ``secrets.inject`` sets (injected after the rules pass).

    ``principal``: its type (``typecheck.principal_type``), when the host said what it
    sends (``guardrails check --principal``): a key outside it is reported.
    """
    compiled = _policies(policies)
    findings: list[Finding] = []
    seen: set[tuple[str, int]] = set()  # a policy bound several times is checked once
    named = sorted({g for p in compiled for g in p.tools or () if not any(c in g for c in "*?[")})
    for policy in compiled:
        for f in typecheck(policy, closed_params=True, principal=principal):
            findings.append(_type_finding(policy, f))
        key = (policy.position.file, policy.position.line)
        if key in seen:
            continue
        seen.add(key)
        findings.extend(_lint_logic(policy))
        findings.extend(_injected_reads(policy, compiled))
        findings.extend(_tool_name_literals(policy, compiled, named))
        findings.extend(_empty_searches(policy))
        findings.extend(_unanchored_permits(policy))
        for element, expression, program in policy.expressions():
            findings.extend(_lint_regexes(policy, element, expression, program.ast))
    unique = {(f.file, f.line, f.column, f.message): f for f in findings}
    return sorted(unique.values(), key=lambda f: (f.file, f.line, f.column))


def lint_agents(documents: Documents, agents: Sequence[str]) -> list[Finding]:
    """Agent selectors (``match.agents`` of policies and bindings) naming none of the
    deployment's ``agents`` (``guardrails check --agents``): the policy never applies to
    that name's calls, so a misspelt one (``billing-agnet``) leaves the agent unguarded by
    it, silently. A warning: a selector may name an agent by its id."""
    known = sorted(set(agents))
    out: list[Finding] = []
    selectors = [(f"policy {p.name}: match.agents", p.match.agents or (),
                  p.match.agent_positions) for p in documents.policies]
    selectors += [(f"binding {b.metadata.name}: match.agents", b.agents or (),
                   b.agent_positions) for b in documents.bindings]
    for what, names, positions in selectors:
        for name, at in zip(names, positions, strict=False):
            if name in known:
                continue
            close = closest(name, known)
            hint = f"; did you mean '{close}'?" if close else ""
            out.append(_at(at, "warning",
                           f"{what} '{name}' is none of the deployment's agents "
                           f"({', '.join(known)}){hint} (names are exact: the policy "
                           f"applies only to the calls of the agents it names)"))
    return out


def _lint_logic(policy: CompiledPolicy) -> list[Finding]:
    out: list[Finding] = []
    name = policy.name
    # `when: 'false'` (or `false && ...`) switches a policy off on purpose, as for rules.
    if policy.when is not None and _constant(policy.when.program.ast) is False \
            and not _literal_decides(policy.when.program.ast):
        out.append(_at(policy.when.expression.position, "warning",
                       f"policy {name}: match.when is always false: the policy never "
                       f"applies"))
    # A fired require_approval rule overrides defaultAction: deny too (the most severe
    # fired action is the result, and a denial needs no rule): "denied unless a
    # treasurer asks, then approved by a human" is a deliberate policy.
    if policy.default_action.value == "deny" and policy.rules and not any(
            r.action.value in ("allow", "require_approval") for r in policy.rules):
        out.append(_at(policy.position, "warning",
                       f"policy {name}: defaultAction is deny and no rule allows: every "
                       f"call it matches is denied (defaultAction is the result when no rule "
                       f"fires; add allow rules for an allowlist, or leave it allow)"))
    out.extend(_unbounded_approvals(policy))
    for element, expression, program in policy.expressions():
        out.extend(_numeric_text_params(policy, element, expression, program.ast))
        out.extend(_value_in_map(policy, element, expression, program.ast))
        out.extend(_unguarded_map_index(policy, element, expression, program.ast))
    for c in policy.counters:
        quoted = _quoted_path(c.key.program.ast)
        if quoted is not None and isinstance(c.key.program.ast, ast.Literal):
            out.append(_at(c.key.expression.position, "warning",
                           f"policy {name}: counters.{c.name}.key is the text {quoted!r}, "
                           f"the same for every call: all calls share one count (write it "
                           f"without the inner quotes, key: '{quoted}', to count each "
                           f"value apart)"))
        if any(isinstance(n, ast.Ident) and n.name == "now"
               for n in ast.walk(c.key.program.ast)):
            out.append(_at(c.key.expression.position, "warning",
                           f"policy {name}: counters.{c.name}.key reads now: calls made at "
                           f"different times get different keys, so each count stays near "
                           f"1 and the limit never stops anything (the window already "
                           f"groups calls by time: key by who or what is counted, such as "
                           f"principal.user)"))
    for glob, at in zip(policy.tools or (), policy.tool_positions, strict=False):
        problem = _mcp_glob_problem(glob) or _regex_glob_problem(glob)
        if problem:
            out.append(_at(at, "warning", f"policy {name}: match.tools '{glob}' {problem}"))
    read = _counters_read(policy)
    for c in policy.counters:
        if read is not None and c.name not in read:
            out.append(_at(c.key.expression.position, "warning",
                           f"policy {name}: counters.{c.name} is never read: no rule or "
                           f"variable uses it, so its limit stops nothing (a counter only "
                           f"counts; a rule acts, e.g. when: 'counters.{c.name}.exceeded', "
                           f"action: deny)"))
    first: dict[str, str] = {}
    for rule in policy.rules:
        node = rule.when.program.ast
        where = rule.when.expression.position
        value = _constant(node)
        # `when: 'false'`, `false && ...`: a rule switched off (or on) on purpose.
        meant = value is not None and _literal_decides(node)
        if value is not None and not meant:
            quoted = _quoted_path(node)
            hint = (f" ({quoted!r} is a string literal, not the value it names: write "
                    f"it without quotes)" if quoted else
                    " (it compares constants: nothing in it depends on the call)")
            out.append(_at(where, "warning",
                           f"policy {name}: rules.{rule.name}.when is always "
                           f"{'true' if value else 'false'}: the rule "
                           f"{'fires on every call' if value else 'never fires'}{hint}"))
        elif value is None:
            clash = _contradiction(node)
            if clash:
                out.append(_at(where, "warning",
                               f"policy {name}: rules.{rule.name}.when can never be true: "
                               f"{clash}; did you mean || ?"))
        if rule.action.value == "allow" and policy.default_action.value == "allow":
            out.append(_at(rule.position, "warning",
                           f"policy {name}: rules.{rule.name}: an allow rule does nothing "
                           f"in a policy whose defaultAction is allow (the most severe "
                           f"fired rule wins: it never overrides a deny); for an allowlist "
                           f"set defaultAction: deny, for an exception narrow the deny "
                           f"rule's when"))
        shadow = _shadowed(rule, policy.rules)
        if shadow is not None and value is None:
            out.append(_at(where, "warning",
                           f"policy {name}: rules.{rule.name} ({rule.action.value}) never "
                           f"changes the result: whenever it fires, rules.{shadow.name} "
                           f"({shadow.action.value}) fires too and is more severe (every "
                           f"rule is evaluated and the most severe wins; there is no first "
                           f"match); narrow rules.{shadow.name}.when"))
        text = " ".join(rule.when.expression.source.split())
        if text in first and value is None:
            out.append(_at(where, "warning",
                           f"policy {name}: rules.{rule.name}.when is the same condition "
                           f"as rules.{first[text]}: merge them or change one"))
        first.setdefault(text, rule.name)
    return out


def _injected_reads(policy: CompiledPolicy, every: Sequence[CompiledPolicy]
                    ) -> list[Finding]:
    """An expression reading an argument that ``secrets.inject`` sets.

    The guard injects secrets after the rules pass, so no expression ever sees the secret:
    what ``args.api_key`` reads is what the model sent, and a call without it (the model
    never sees the secret, so nearly every call) makes the expression an evaluation error,
    which fails closed. Testing it (``has(args.api_key)``, to catch a model that sends
    one) is fine."""
    injected = {name for q in every for name in q.inject
                if q is policy or q.tools is None or policy.tools is None
                or any(policy.matches_tool(t) for t in q.tools)}
    if not injected:
        return []
    out: list[Finding] = []
    for element, expression, program in policy.expressions():
        accesses = _arg_accesses(program.ast)
        tested = {a.name for a in accesses if a.presence}
        for acc in accesses:
            if acc.presence or acc.name not in injected or acc.name in tested:
                continue
            out.append(_at(_position(expression, acc), "warning",
                           f"policy {policy.name}: {element}: args.{acc.name} is set by "
                           f"secrets.inject only after the rules pass, so no expression sees "
                           f"the secret: this reads what the model sent, and a call without "
                           f"it (nearly every call) makes it an evaluation error (the rule "
                           f"fails closed); to catch a model that sends one, test "
                           f"has(args.{acc.name})"))
    return out


def _tool_name_literals(policy: CompiledPolicy, every: Sequence[CompiledPolicy],
                        named: Sequence[str]) -> list[Finding]:
    """A tool name in an expression that cannot be the one meant.

    - ``tool.name == "x"`` where the policy's ``match.tools`` does not match ``x``: the
      policy never sees that tool, so the comparison is always false (``!=``: always
      true); ``tool.name`` is the local name, never the ``mcp:`` alias.
    - ``h.tool == "x"`` (a history entry, a provenance place) where no policy matches
      ``x`` but one names a tool close to it (``read_inbx``): a typo that never matches.
    """
    out: list[Finding] = []
    for element, expression, program in policy.expressions():
        for name, field, lit in _field_string_literals(ast.walk(program.ast)):
            text = lit.value
            at = expression.position_of(lit.offset)
            if name == "tool" and field == "name":
                if policy.tools is None or policy.matches_tool(text) or any(
                        g.startswith("mcp:") for g in policy.tools):
                    continue  # an MCP alias matches tools of any local name
                close = closest(text, [g for g in policy.tools
                                       if not any(c in g for c in "*?[")], cutoff=0.8)
                hint = f"; did you mean '{close}'?" if close else ""
                out.append(_at(at, "warning",
                               f"policy {policy.name}: {element}: tool.name is never "
                               f"'{text}' here: match.tools "
                               f"[{', '.join(policy.tools)}] does not match it, so the "
                               f"policy never sees that tool{hint}"))
            elif field == "tool" and name not in ("tool", "args", "params"):
                if any(p.matches_tool(text) for p in every if p.tools is not None):
                    continue
                close = closest(text, named, cutoff=0.8)
                if close is None or close == text:
                    continue
                out.append(_at(at, "warning",
                               f"policy {policy.name}: {element}: no policy matches a "
                               f"tool named '{text}'; did you mean '{close}'? (tool "
                               f"names are exact)"))
    return out


def _mcp_glob_problem(glob: str) -> str | None:
    """Why a glob written as an MCP tool's name (``mcp:<server>/<tool>``) matches none:
    tool names have no ':' or '/' but that alias (``agent_framework._mcp``)."""
    form = "an MCP tool answers to mcp:<server>/<tool> (mcp:bank/send_money, mcp:bank/*)"
    if glob.startswith("mcp:"):
        rest = glob[4:]
        if rest.startswith("//"):
            return f"matches no tool: {form}, with no '//': mcp:{rest[2:]}"
        if "/" not in rest and "*" not in rest:
            return (f"matches no tool: {form}; the server and the tool are separated by "
                    f"'/'")
        return None
    if glob[:4].lower() in ("mcp:", "mcp/", "mcp.") or glob[:5].lower() == "mcp::":
        return f"matches no tool: {form}, in lower case with a ':'"
    if "/" in glob and ":" not in glob and "*" not in glob.split("/", 1)[0]:
        return f"matches no tool (tool names have no '/'): {form}: mcp:{glob}?"
    return None


_REGEX_IN_GLOB: Final = re.compile(r"\.[*+]|^\^|\$$|\||\\[.dwsb]|\(|\)|\+")


def _regex_glob_problem(glob: str) -> str | None:
    """Why a glob written as a regular expression (``send_.*``, ``^send_email$``,
    ``send_email|send_money``) matches no tool meant: ``match.tools`` are shell globs, so
    ``.``, ``^``, ``$``, ``|``, ``+`` and parentheses are the characters themselves, which
    no tool name has. Needs no tool schemas: it is the glob's syntax."""
    if not _REGEX_IN_GLOB.search(glob):
        return None
    if "|" in glob:
        parts = [p.strip("^$()") for p in glob.split("|")]
        fix = "list each tool: [" + ", ".join(parts) + "]"
    else:
        fix = "write '" + re.sub(r"\.[*+]", "*", glob.strip("^$")).replace("\\", "") + "'"
    return (f"is a regular expression, but match.tools are shell-style globs (*, ?, "
            f"[abc]): it matches only a tool named with those very characters; {fix}")


def _unanchored_permits(policy: CompiledPolicy) -> list[Finding]:
    """A ``matches()`` with an unanchored literal pattern where a match lets the call
    through: in an ``allow`` rule's condition, or negated in a ``deny``, ``halt`` or
    ``require_approval`` rule's (``!args.to.matches("@example\\.com")``). ``matches()``
    searches, as RE2 does, so text around the pattern matches too
    (``ceo@example.com.evil.io``): the permit is wider than the pattern reads. A search
    in the restricting direction (a deny on ``matches("drop")``) errs the safe way and is
    not reported; neither is a pattern anchored at either end or starting or ending with
    ``.*`` (the search written out), nor one of words (``\\b``) or spaces, nor a search in
    anything but one argument (free text such as ``request.text`` is searched on
    purpose)."""
    variables = {v.name: (v.value.program.ast, v.value.expression) for v in policy.variables}
    out: list[Finding] = []
    for rule in policy.rules:
        action = rule.action.value
        if action == "warn":
            continue
        found: list[tuple[ast.Literal, Expression]] = []
        _permitting_searches(rule.when.program.ast, rule.when.expression, action == "allow",
                             variables, found, set())
        for pattern, expression in found[:1]:
            text = str(pattern.value)
            how = ("this allow rule also fires for" if action == "allow" else
                   f"this {action} rule (negated) lets through")
            out.append(_at(expression.position_of(pattern.offset), "warning",
                           f"policy {policy.name}: rules.{rule.name}.when: matches() finds "
                           f"'{text}' anywhere in the text, so {how} any value that "
                           f"contains it (text before or after it); for the whole value "
                           f"write '^{text}$' (or ==), for a prefix '^{text}', for a suffix "
                           f"'{text}$'"))
    return out


def _unanchored(pattern: str) -> bool:
    body = re.sub(r"^\(\?[a-zA-Z]+\)", "", pattern)
    return not (body.startswith(("^", "\\A", ".*")) or body.endswith(("$", "\\z", ".*"))
                or body == "" or "\\b" in body or " " in body or "\\s" in body)


def _permitting_searches(node: ast.Node, expression: Expression, positive: bool,
                         variables: Mapping[str, tuple[ast.Node, Expression]],
                         found: list[tuple[ast.Literal, Expression]], walked: set[str],
                         elements: Mapping[str, bool] | None = None) -> None:
    """The unanchored ``matches()`` patterns of ``node`` that hold where the rule fires
    with ``positive`` polarity (through ``!``, ``&&``, ``||``, a ternary's branches,
    ``exists``/``all`` and ``variables.x``); ``elements``: the macro variables in scope,
    true for one that iterates an argument's elements (``args.cc.exists(c, ...)``)."""
    elements = elements or {}
    if isinstance(node, ast.Select) and isinstance(node.operand, ast.Ident) \
            and node.operand.name == "variables" and node.field in variables \
            and node.field not in walked:
        walked.add(node.field)
        ast_, expr = variables[node.field]
        _permitting_searches(ast_, expr, positive, variables, found, walked)
        return
    if isinstance(node, ast.Comprehension):
        if node.macro in ("exists", "all", "exists_one"):
            inner = {**elements, node.iter_var: _an_argument(node.iter_range, elements)}
            _permitting_searches(node.loop_step, expression, positive, variables, found,
                                 walked, inner)
        return
    if not isinstance(node, ast.Call):
        return
    if node.function == "!_" and node.args:
        _permitting_searches(node.args[0], expression, not positive, variables, found, walked,
                             elements)
    elif node.function in ("_&&_", "_||_"):
        for a in node.args:
            _permitting_searches(a, expression, positive, variables, found, walked, elements)
    elif node.function == "_?_:_" and len(node.args) == 3:
        for a in node.args[1:]:
            _permitting_searches(a, expression, positive, variables, found, walked, elements)
    elif positive and node.function == "matches":
        pattern = pattern_argument("matches", node)
        searched = node.target if node.target is not None else (node.args or (None,))[0]
        if isinstance(pattern, ast.Literal) and isinstance(pattern.value, str) \
                and _unanchored(pattern.value) and _an_argument(searched, elements):
            found.append((pattern, expression))


def _an_argument(node: ast.Node | None, elements: Mapping[str, bool]) -> bool:
    """``args.to``, ``args["to"]``, ``args.?to.orValue("")``: one argument's whole value,
    such as an address, a URL or a name (a search in free text, the user's request or a
    body, is what ``matches()`` is for); ``elements``: macro variables, true for one
    iterating an argument's elements."""
    if isinstance(node, ast.Ident):
        return elements.get(node.name, False)
    for _ in range(16):
        if isinstance(node, ast.Select):
            if isinstance(node.operand, ast.Ident):
                return node.operand.name == "args"
            node = node.operand
        elif isinstance(node, ast.Call) and node.function in ("orValue", "lowerAscii",
                                                              "trim", "upperAscii") \
                and node.target is not None:
            node = node.target
        elif isinstance(node, ast.Call) and node.function in ("_[_]", "@select") and node.args:
            first = node.args[0]
            if isinstance(first, ast.Ident):
                return first.name == "args"
            node = first
        else:
            return False
    return False


def _counters_read(policy: CompiledPolicy) -> set[str] | None:
    """The counters the policy's expressions read (``counters.x``); None when one reads
    ``counters`` otherwise (``counters[name]``), which could be any of them."""
    read: set[str] = set()
    for _, _, program in policy.expressions():
        whole = 0
        for n in ast.walk(program.ast):
            if isinstance(n, ast.Select) and isinstance(n.operand, ast.Ident) \
                    and n.operand.name == "counters":
                read.add(n.field)
                whole -= 1
            elif isinstance(n, ast.Ident) and n.name == "counters":
                whole += 1
        if whole > 0:
            return None
    return read


def _unbounded_approvals(policy: CompiledPolicy) -> list[Finding]:
    """In an allowlist (``defaultAction: deny`` with allow rules), a ``require_approval``
    rule whose condition names no allow rule's condition, as such or negated.

    A fired rule, not the default, is the policy's result: such a rule sends a human the
    calls no allow rule lets through, which were meant to be denied (a "large amounts need
    approval" restriction written into the allowlist). ``allowed && large`` (a restriction
    of what is allowed) and ``!allowed && from_a_document`` (a permit with approval) say
    which they mean and are not reported."""
    allows = [r for r in policy.rules if r.action is Action.ALLOW]
    if policy.default_action.value != "deny" or not allows:
        return []
    # What the allow rules test: each condition and each of its conjuncts, but not which
    # tool it is (`tool.name == "x" && amount > 10` restricts no allow rule of x's).
    permits = {_shape(c) for r in allows
               for c in (r.when.program.ast, *_conjuncts(r.when.program.ast))
               if not _about_tool(c)}
    out: list[Finding] = []
    for rule in policy.rules:
        if rule.action is not Action.REQUIRE_APPROVAL:
            continue
        parts = _conjuncts(rule.when.program.ast)
        named = {_shape(c) for c in parts} | {
            _shape(c.args[0]) for c in parts if isinstance(c, ast.Call)
            and c.target is None and c.function == "!_" and len(c.args) == 1}
        if named & permits:
            continue
        out.append(_at(rule.when.expression.position, "warning",
                       f"policy {policy.name}: rules.{rule.name} (require_approval) also "
                       f"fires for calls no allow rule lets through, and a fired rule, not "
                       f"defaultAction: deny, is then the result: those calls go to a human "
                       f"instead of being denied. For a restriction on what the allow rules "
                       f"let through, put the rule in a policy of its own (defaultAction "
                       f"allow; policies combine, the most severe wins) or add an allow "
                       f"rule's condition to it (`<allowed> && ...`); for a permit with "
                       f"approval, say what it permits besides them (`!<allowed> && ...`)"))
    return out


def _about_tool(node: ast.Node) -> bool:
    """``tool.name == "x"``, ``tool.name in [...]``, ``tool.name != "x"``."""
    return (isinstance(node, ast.Call) and node.target is None and len(node.args) == 2
            and node.function in ("_==_", "_!=_", "@in")
            and "tool.name" in (qualified_name(node.args[0], ()),
                                qualified_name(node.args[1], ())))


def _shape(node: ast.Node) -> Any:
    """A node's structure without offsets: equal for the same expression written twice."""
    out: list[Any] = [type(node).__name__]
    for f in fields(node):
        if f.name == "offset":
            continue
        value = getattr(node, f.name)
        out.append(_shape_of(value))
    return tuple(out)


def _shape_of(value: Any) -> Any:
    if isinstance(value, ast.Node):
        return _shape(value)
    if isinstance(value, tuple | list):
        return tuple(_shape_of(v) for v in value)
    return (type(value).__name__, value if isinstance(value, Hashable) else repr(value))


def _shadowed(rule: CompiledRule, rules: Sequence[CompiledRule]) -> CompiledRule | None:
    """A more severe rule that fires whenever ``rule`` does (both one comparison of the
    same path with a number: ``amount > 10000`` under ``amount > 1000``), or None. A
    ``warn`` rule is recorded whatever else fires, so it is never shadowed."""
    mine = _bound(rule.when.program.ast)
    if mine is None or rule.action is Action.WARN:
        return None
    severity = Effect(rule.action).severity
    for other in rules:
        if other is rule or other.action is Action.WARN \
                or Effect(other.action).severity <= severity:
            continue
        theirs = _bound(other.when.program.ast)
        if theirs is not None and _implies(mine, theirs):
            return other
    return None


def _bound(node: ast.Node) -> tuple[str, str, float] | None:
    """``("args.amount", ">", 1000.0)`` for a condition that is one such comparison."""
    if not (isinstance(node, ast.Call) and node.target is None and len(node.args) == 2
            and node.function in ("_<_", "_<=_", "_>_", "_>=_")):
        return None
    a, b = node.args
    op = node.function
    if isinstance(a, ast.Literal):
        a, b, op = b, a, _FLIP[op]
    path = qualified_name(a, ())
    if path is None or not isinstance(b, ast.Literal) or isinstance(b.value, bool) \
            or not isinstance(b.value, int | float):
        return None
    return path, _SYMBOL[op], float(b.value)


def _implies(x: tuple[str, str, float], y: tuple[str, str, float]) -> bool:
    """Whether ``x`` holding makes ``y`` hold (one path, bounds in one direction)."""
    (px, ox, vx), (py, oy, vy) = x, y
    if px != py or ox[0] != oy[0]:
        return False
    if ox[0] == ">":
        return vx > vy or (vx == vy and (oy == ">=" or ox == ">"))
    return vx < vy or (vx == vy and (oy == "<=" or ox == "<"))


_NUMERIC_TEXT = re.compile(r"[-+]?(\d{1,3}(,\d{3})+|\d+)(\.\d+)?")
_THOUSANDS = re.compile(r"[-+]?\d{1,3}(,\d{3})+(\.\d+)?")
_ORDER_OPS = frozenset({"_<_", "_<=_", "_>_", "_>=_", "_+_", "_-_", "_*_", "_/_"})


def _param_value(policy: CompiledPolicy, node: ast.Node) -> tuple[str, Any] | None:
    """``("params.a.b", value)`` for a read of a params path, else None."""
    path = qualified_name(node, ())
    if path is None or not path.startswith("params."):
        return None
    value: Any = policy.params
    for part in path.split(".")[1:]:
        value = value.get(part) if isinstance(value, Mapping) else None
    return path, value


def _numeric_text_params(policy: CompiledPolicy, element: str, expression: Expression,
                         node: ast.Node) -> list[Finding]:
    """A param YAML read as text that looks like a number (``limit: 1,000`` or
    ``limit: "5"``) used in a comparison or arithmetic: against a number it is an
    evaluation error on every call (the checker only sees it when the other side's type
    is known, as with tool schemas).

    Text is often meant as text, so a digit string is not reported where it is used as
    text: beside a text (``"+" + params.country_code``, ``params.zip_from <=
    params.zip_to``), in a ``+`` (concatenation) unless it has a thousands separator,
    or with a leading zero (``"02134"``: a code, not a quantity)."""
    out: list[Finding] = []
    for n in ast.walk(node):
        if not (isinstance(n, ast.Call) and n.target is None and n.function in _ORDER_OPS
                and len(n.args) == 2):
            continue
        for operand, other in (n.args, n.args[::-1]):
            found = _param_value(policy, operand)
            if found is None:
                continue
            path, value = found
            if not (isinstance(value, str) and _NUMERIC_TEXT.fullmatch(value.strip())):
                continue
            text = value.strip()
            theirs = _param_value(policy, other)
            if (isinstance(other, ast.Literal) and isinstance(other.value, str)) or (
                    theirs is not None and isinstance(theirs[1], str)):
                continue
            if not _THOUSANDS.fullmatch(text) and (
                    n.function == "_+_" or re.match(r"[-+]?0\d", text)):
                continue
            number = text.replace(",", "")
            out.append(_at(expression.position_of(operand.offset), "warning",
                           f"policy {policy.name}: {element}: {path} is the text "
                           f"{value!r}, not a number: compared with a number it is an "
                           f"evaluation error on every call; write {number} in params "
                           f"(no quotes, no thousands separator)"))
    return out


def _constant(node: ast.Node) -> bool | None:
    """The value of a condition that does not depend on the call (``"a" == "b"``,
    ``x || true``), else None. CEL's ``&&``/``||`` absorb errors, so one constant
    operand can decide."""
    if isinstance(node, ast.Literal):
        return node.value if type(node.value) is bool else None
    if not (isinstance(node, ast.Call) and node.target is None):
        return None
    f, args = node.function, node.args
    if f == "!_" and len(args) == 1:
        v = _constant(args[0])
        return None if v is None else not v
    if f in ("_&&_", "_||_") and len(args) == 2:
        a, b = _constant(args[0]), _constant(args[1])
        decides = f == "_||_"
        if decides in (a, b):
            return decides
        if a is not None and b is not None:
            return a and b if f == "_&&_" else a or b
        return None
    if len(args) == 2 and all(isinstance(a, ast.Literal) for a in args):
        x, y = (a.value for a in args if isinstance(a, ast.Literal))
        if f in ("_==_", "_!=_") and type(x) is not bytes and type(y) is not bytes:
            return _same(x, y) == (f == "_==_")
    if f == "@in" and len(args) == 2 and isinstance(args[0], ast.Literal) \
            and isinstance(args[1], ast.ListLit) \
            and all(isinstance(e, ast.Literal) for e in args[1].elements):
        item = args[0].value
        return any(_same(item, e.value) for e in args[1].elements
                   if isinstance(e, ast.Literal))
    return None


def _literal_decides(node: ast.Node) -> bool:
    """Whether a bool literal among the operands of the top-level ``&&``/``||``/``!``
    makes the condition constant: written so on purpose (``false && ...``)."""
    if isinstance(node, ast.Literal):
        return type(node.value) is bool
    if isinstance(node, ast.Call) and node.target is None and node.function in (
            "_&&_", "_||_", "!_"):
        return any(_literal_decides(a) for a in node.args)
    return False


def _quoted_path(node: ast.Node) -> str | None:
    """A string literal that reads like a path (``"args.to" == "x"``)."""
    for n in ast.walk(node):
        if (isinstance(n, ast.Literal) and isinstance(n.value, str) and re.fullmatch(
                r"(args|principal|params|tool|request|variables|history)(\.\w+)+", n.value)):
            return n.value
    return None


def _conjuncts(node: ast.Node) -> list[ast.Node]:
    if isinstance(node, ast.Call) and node.target is None and node.function == "_&&_":
        return [*_conjuncts(node.args[0]), *_conjuncts(node.args[1])]
    return [node]


def _contradiction(node: ast.Node) -> str | None:
    """``x == "a" && x == "b"``, ``x == 1 && x != 1``, ``x > 5 && x < 3``: the same path
    held to two things it cannot be at once (literals only, compared as CEL does)."""
    equal: dict[str, tuple[Any, str]] = {}
    lower: dict[str, float] = {}
    upper: dict[str, float] = {}
    tests: list[tuple[str, str, Any, str]] = []
    for c in _conjuncts(node):
        if not (isinstance(c, ast.Call) and c.target is None and len(c.args) == 2
                and c.function in _FLIP):
            continue
        a, b = c.args
        op = c.function
        if isinstance(a, ast.Literal) and not isinstance(b, ast.Literal):
            a, b, op = b, a, _FLIP[op]
        path = qualified_name(a, ())
        if path is None or not isinstance(b, ast.Literal) or isinstance(b.value, bytes):
            continue
        tests.append((path, op, b.value, f"{path} {_SYMBOL[op]} {b.value!r}"))
    for path, op, value, text in tests:
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if op == "_==_":
            prior = equal.get(path)
            if prior is not None and not _same(prior[0], value):
                return f"{prior[1]} and {text}"
            equal.setdefault(path, (value, text))
        elif number and op in ("_>_", "_>=_"):
            lower[path] = max(lower.get(path, float("-inf")), float(value))
        elif number and op in ("_<_", "_<=_"):
            upper[path] = min(upper.get(path, float("inf")), float(value))
    for path, op, value, text in tests:
        if op == "_!=_" and path in equal and _same(equal[path][0], value):
            return f"{equal[path][1]} and {text}"
    for path, lo in lower.items():
        hi = upper.get(path)
        if hi is not None and lo > hi:
            return f"{path} is above {_num(lo)} and below {_num(hi)}"
        if path in equal and isinstance(equal[path][0], int | float) \
                and not isinstance(equal[path][0], bool) and float(equal[path][0]) < lo:
            return f"{equal[path][1]} and {path} above {_num(lo)}"
    return None


_FLIP = {"_==_": "_==_", "_!=_": "_!=_", "_<_": "_>_", "_>_": "_<_", "_<=_": "_>=_",
         "_>=_": "_<=_"}
_SYMBOL = {"_==_": "==", "_!=_": "!=", "_<_": "<", "_>_": ">", "_<=_": "<=", "_>=_": ">="}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and bool(a == b)


def _num(x: float) -> str:
    return str(int(x)) if x == int(x) else str(x)




_SEARCHES: Final = frozenset({"provenance", "untrusted", "mentions"})
"""The provenance functions: a value with no letters or digits is found nowhere."""


def _empty_searches(policy: CompiledPolicy) -> list[Finding]:
    """A rule that looks up where a value came from while the value may be ``""``: an
    optional argument read as ``args.?to.orValue("")`` or through the docs' null idiom
    ``(args.?to.orValue(null) != null ? args.to : "")``, directly, through a variable or
    a library function's parameter. ``""`` is found nowhere, so ``!request.mentions(v)``
    or ``!provenance(v).exists(...)`` fires on every call that leaves the argument out:
    the call is denied (or held) for a value it never sent. Not reported when the rule
    (or a variable it reads) tests the value some other way (``v != "" && ...``,
    ``isURL(v)``), which is taken as the guard. One finding per rule."""
    variables = {v.name: v.value.program.ast for v in policy.variables}
    out: list[Finding] = []
    for rule in policy.rules:
        searched: list[tuple[ast.Call, list[ast.Node]]] = []
        used: set[Any] = set()
        _walk_searches(rule.when.program.ast, {}, variables, searched, used, set())
        for call, chain in searched:
            if any(_shape(n) in used for n in chain if _named_value(n)) or not _may_be_empty(
                    chain[-1], variables, 0):
                continue
            on_request = (call.target is not None
                          and qualified_name(call.target, ()) == "request")
            name = ("request." if on_request else "") + call.function
            out.append(_at(rule.when.expression.position_of(call.offset), "warning",
                           f"policy {policy.name}: rules.{rule.name}.when: {name}() of a "
                           f"value that is \"\" when the argument is left out or null: \"\" "
                           f"is found nowhere (provenance() is empty, mentions() and "
                           f"untrusted() false), so the rule decides every such call alike "
                           f"(a negated test denies or holds it for a value it never sent); "
                           f"test the value first: 'v != \"\" && ...'"))
            break
    return out


_NOT_A_TEST: Final = _SEARCHES | {"bind", "@arg", "_&&_", "_||_", "!_"}


def _walk_searches(node: ast.Node, env: Mapping[str, ast.Node],
                   variables: Mapping[str, ast.Node],
                   searched: list[tuple[ast.Call, list[ast.Node]]], used: set[Any],
                   walked: set[str]) -> None:
    """Collect the provenance calls of ``node`` with their argument resolved through
    ``cel.bind`` (a library parameter) and ``variables.x`` (``chain``: each step), and
    the shapes of every value some other call tests (``used``), in the variables the
    expression reads too."""
    if isinstance(node, ast.Select) and isinstance(node.operand, ast.Ident) \
            and node.operand.name == "variables" and node.field in variables \
            and node.field not in walked:
        walked.add(node.field)
        _walk_searches(variables[node.field], {}, variables, searched, used, walked)
    if isinstance(node, ast.Call):
        if node.function == "bind" and len(node.args) == 3 and isinstance(
                node.args[0], ast.Ident):
            init = node.args[1]
            if isinstance(init, ast.Call) and init.function == "@arg" and init.args:
                init = init.args[0]
            _walk_searches(init, env, variables, searched, used, walked)
            _walk_searches(node.args[2], {**env, node.args[0].name: init}, variables,
                           searched, used, walked)
            return
        if node.function in _SEARCHES and node.args:
            searched.append((node, _resolve(node.args[-1], env, variables)))
        elif node.function not in _NOT_A_TEST:
            for operand in (*node.args, *((node.target,) if node.target else ())):
                used.update(_shape(n) for n in _resolve(operand, env, variables)
                            if _named_value(n))
    for child in _children(node):
        _walk_searches(child, env, variables, searched, used, walked)


def _named_value(node: ast.Node) -> bool:
    """A name, a field path or an optional read: what a guard tests (its shape is small,
    so comparing shapes stays linear in the expression)."""
    for _ in range(64):
        if isinstance(node, ast.Select):
            node = node.operand
        elif isinstance(node, ast.Call) and node.function == "orValue" and node.target:
            node = node.target
        elif isinstance(node, ast.Call) and node.function == "@select" and node.args:
            node = node.args[0]
        else:
            break
    return isinstance(node, ast.Ident)


def _children(node: ast.Node) -> list[ast.Node]:
    out: list[ast.Node] = []
    for f in fields(node):
        value = getattr(node, f.name)
        items = value if isinstance(value, tuple) else (value,)
        for item in items:
            if isinstance(item, ast.Node):
                out.append(item)
            elif isinstance(item, tuple):
                out.extend(x for x in item if isinstance(x, ast.Node))
    return out


def _resolve(node: ast.Node, env: Mapping[str, ast.Node],
             variables: Mapping[str, ast.Node]) -> list[ast.Node]:
    """``node``, then what it names, step by step (a bound parameter, a variable)."""
    chain = [node]
    for _ in range(8):
        if isinstance(node, ast.Ident) and node.name in env:
            node = env[node.name]
        elif (isinstance(node, ast.Select) and isinstance(node.operand, ast.Ident)
              and node.operand.name == "variables" and node.field in variables):
            node = variables[node.field]
        else:
            break
        chain.append(node)
    return chain


def _may_be_empty(node: ast.Node, variables: Mapping[str, ast.Node], depth: int) -> bool:
    """``""`` itself, ``x.orValue("")``, or a ternary with such a branch."""
    if depth > 8:
        return False
    node = _resolve(node, {}, variables)[-1]
    if isinstance(node, ast.Literal):
        return node.value == "" and isinstance(node.value, str)
    if isinstance(node, ast.Call):
        if node.function == "orValue" and len(node.args) == 1:
            return _may_be_empty(node.args[0], variables, depth + 1)
        if node.function == "_?_:_" and len(node.args) == 3:
            return any(_may_be_empty(a, variables, depth + 1) for a in node.args[1:])
    return False


def _value_in_map(policy: CompiledPolicy, element: str, expression: Expression,
                  node: ast.Node) -> list[Finding]:
    """``"admin" in params.roles`` where ``admin`` is one of the map's values and not a
    key: ``in`` on a CEL map tests its keys (Rego's ``in`` on an object tests values), so
    the test is false on every call."""
    out: list[Finding] = []
    for n in ast.walk(node):
        if not (isinstance(n, ast.Call) and n.target is None and n.function == "@in"
                and len(n.args) == 2 and isinstance(n.args[0], ast.Literal)
                and isinstance(n.args[0].value, str)):
            continue
        found = _param_value(policy, n.args[1])
        if found is None or not isinstance(found[1], Mapping):
            continue
        path, value = found
        literal = n.args[0].value
        values = {v for item in value.values()
                  for v in (item if isinstance(item, list) else [item])
                  if isinstance(v, str)}
        if literal in value or literal not in values:
            continue
        out.append(_at(expression.position_of(n.args[0].offset), "warning",
                       f"policy {policy.name}: {element}: '{literal}' is a value of {path}, "
                       f"not a key: 'in' on a map tests its keys (unlike Rego's 'in' on an "
                       f"object), so this is false on every call; for its values write "
                       f"{path}.exists(k, {path}[k] == '{literal}')"))
    return out


def _unguarded_map_index(policy: CompiledPolicy, element: str, expression: Expression,
                         node: ast.Node) -> list[Finding]:
    """``params.blocked[args.program]``: a params map indexed with a value of the call
    and no ``in`` test of that map in the expression. Rego's habit (a partial set or an
    object looked up with ``blocked[input.program]`` is undefined, so false, for another
    key); in CEL a key the map does not have is an evaluation error, so under
    ``failurePolicy: Fail`` the rule fires for every other value (a deny rule denies
    every call but the listed ones) and under ``Ignore`` it is skipped. A key of a
    comprehension over the map itself (``params.m.exists(k, params.m[k] ...)``) and a
    literal key (the checker checks those) are not reported."""
    out: list[Finding] = []
    nodes = ast.walk(node)
    bound = {v for n in nodes if isinstance(n, ast.Comprehension)
             for v in (n.iter_var, n.iter_var2) if v}
    tested = {qualified_name(n.args[1], ()) for n in nodes
              if isinstance(n, ast.Call) and n.target is None and n.function == "@in"
              and len(n.args) == 2}
    for n in nodes:
        if not (isinstance(n, ast.Call) and n.target is None and n.function == "_[_]"
                and len(n.args) == 2):
            continue
        container, key = n.args
        if isinstance(key, ast.Literal) or (isinstance(key, ast.Ident) and key.name in bound):
            continue
        found = _param_value(policy, container)
        if found is None or not isinstance(found[1], Mapping) or found[0] in tested:
            continue
        path, value = found
        text = qualified_name(key, ()) or "k"
        if all(v is True for v in value.values()):
            fix = (f"for a set written as a map write {text} in {path}, or "
                   f"{path}[?{text}].orValue(false)")
        else:
            fix = (f"test the key first, {text} in {path} && {path}[{text}] ..., or give "
                   f"a default: {path}[?{text}].orValue(...)")
        out.append(_at(expression.position_of(n.offset), "warning",
                       f"policy {policy.name}: {element}: {path}[{text}] is an evaluation "
                       f"error for a key {path} does not have (unlike Rego, where such a "
                       f"lookup is undefined), so the rule fails closed for every other "
                       f"value (under failurePolicy Ignore it is skipped); {fix}"))
    return out


def _lint_regexes(policy: CompiledPolicy, element: str, expression: Expression,
                  node: ast.Node) -> list[Finding]:
    out: list[Finding] = []
    for n in ast.walk(node):
        if not isinstance(n, ast.Call):
            continue
        pattern = pattern_argument(call_name(n), n)
        if not (isinstance(pattern, ast.Literal) and isinstance(pattern.value, str)):
            continue
        problem = regex_pitfall(pattern.value)
        if problem:
            out.append(_at(expression.position_of(pattern.offset), "warning",
                           f"policy {policy.name}: {element}: regex '{pattern.value}': "
                           f"{problem}"))
    return out


def _pipe_meant(pattern: str) -> tuple[str, str] | None:
    """``curl.*|.*sh``: a top-level ``|`` with ``.*`` (or ``.+``) on both sides, where a
    literal pipe between two commands was meant; the two alternatives, or None."""
    depth, in_class, i = 0, False, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif (c == "|" and depth == 0 and pattern[max(i - 2, 0):i] in (".*", ".+")
              and (i < 3 or pattern[i - 3] != "\\") and pattern[i + 1:i + 3] in (".*", ".+")):
            return pattern[:i], pattern[i + 1:]
        i += 1
    return None


_SUFFIX = re.compile(r"[A-Za-z]+(?![A-Za-z0-9*+?{])")
_SUFFIXES = frozenset({
    "com", "org", "net", "io", "co", "uk", "de", "fr", "eu", "gov", "edu", "mil", "int",
    "info", "biz", "dev", "app", "ai", "cloud", "example", "test", "local", "internal",
    "corp", "lan", "exe", "dll", "pdf", "txt", "csv", "json", "yaml", "yml", "xml", "html",
    "htm", "js", "py", "sh", "bat", "ps1", "zip", "tar", "gz", "doc", "docx", "xls", "xlsx",
    "pem", "env", "conf", "cfg", "ini", "log", "sql", "db",
})
"""Top-level domains and file extensions: after an unescaped dot they show that a dot
was meant (``example.com``, ``report.pdf``), where ``pass.word`` may mean any separator."""


def regex_pitfall(pattern: str) -> str | None:
    """What a valid regex likely does that its author did not mean, or None.

    - a ``.`` between a word and a top-level domain or file extension, unescaped
      (``example.com``, ``report.pdf``): it matches any character, so ``exampleXcom``
      passes an allowlist written with it;
    - anchored at the start but not the end, ending in a domain or extension
      (``^[a-z]+@example\\.com``, ``^.*\\.pdf``): ``matches()`` is a search, so
      ``a@example.com.evil.io`` and ``x.pdf.exe`` match too.
    """
    i, in_class, n = 0, False, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            if pattern.startswith("\\Q", i):  # \Q...\E: every character is literal
                end = pattern.find("\\E", i + 2)
                i = n if end < 0 else end + 2
                continue
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            if pattern[i + 1:i + 2] == "]":
                i += 1
        elif (c == "." and i > 0 and pattern[i - 1].isalnum()
              and (i < 2 or pattern[i - 2] != "\\")):
            word = _SUFFIX.match(pattern, i + 1)
            if word is None or word[0].lower() not in _SUFFIXES:
                i += 1
                continue
            start = i
            while start > 0 and pattern[start - 1].isalnum() and not (
                    start > 1 and pattern[start - 2] == "\\"):  # not \b's b
                start -= 1
            found = pattern[start:word.end()]
            escaped = found.replace(".", "\\.", 1)
            return (f"the unescaped '.' in '{found}' matches any character, not just a "
                    f"dot ('{found.replace('.', 'X', 1)}' matches too); escape it: "
                    f"'{escaped}' (in a CEL string \"{escaped.replace(chr(92), chr(92) * 2)}\", "
                    f"or a raw string r\"{escaped}\")")
        i += 1
    # `/*$` and `/*)` are a regex's optional trailing slashes (`^/api/users/*$`); a glob
    # has no `$`.
    if re.search(r"/\*(?![$)])", pattern.replace("\\/", "")):
        return ("'/*' repeats the '/' (a regex, not a glob): for anything under a folder "
                "write '^/etc/' (matches() searches, so no '.*' is needed at the end)")
    pipe = _pipe_meant(pattern)
    if pipe is not None:
        left, right = pipe
        return (f"'|' outside a group separates alternatives: any text matching '{left}' "
                f"or '{right}' matches, not '{left}' then a '|' then '{right}'; for a pipe "
                f"character (a shell's 'curl ... | sh') escape it: '\\|' (in a CEL "
                f"string \"\\\\|\")")
    if (pattern.startswith("^") and not pattern.endswith("$") and not pattern.endswith("\\b")
            and re.search(r"\\\.[A-Za-z]{2,}\)?$", pattern)):
        return ("anchored at the start only: matches() finds the pattern anywhere, so "
                "text that goes on after it matches too (a@example.com.evil.io, x.pdf.exe); "
                "end it with $")
    return None
