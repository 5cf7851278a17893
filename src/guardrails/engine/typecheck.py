"""Typed checking of a compiled policy: the names it binds, and what each place needs.

Builds the environment an expression is evaluated in (``tool``, ``args``, ``principal``,
``history``, ``request``, ``params``, ``variables``, ``now``) and runs the expression
type checker (``guardrails.expr.typechecker``) over every expression of a policy, in the order
the engine evaluates them, so that a variable's type is known where a rule reads it.

- At load time ``args`` is unknown (``ARGS_UNKNOWN``): only what literals, params and
  the engine's own names make certain is checked, and only errors stop the load.
- With tool schemas (``guardrails check --tools``, ``guard(strict=True)``), ``args`` is
  typed from the schemas of the tools the policy matches (``args_type``).

Where guards hold: a repair's ``set`` runs only when its ``when`` held, and a rule's
``messageExpression`` only when its ``when`` did; the checker is told so.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from guardrails.engine.policy import CompiledExpression, CompiledPolicy
from guardrails.expr import ast
from guardrails.expr.typechecker import (
    FAILS_CLOSED,
    NONE,
    Diagnostic,
    Facts,
    article,
    call_name,
    check,
    constant_text,
    facts_of,
    has_enums,
    may_be_absent,
    pattern_argument,
    regex_problem,
    shape,
    tool_args_key,
)
from guardrails.expr.types import (
    BOOL,
    DOUBLE,
    DYN,
    INT,
    STRING,
    TIMESTAMP,
    Field,
    Type,
    list_of,
    map_of,
    of_json_schema,
    of_value,
    record_union,
)
from guardrails.model.source import Position

__all__ = ["ARGS_UNKNOWN", "TypeFinding", "args_type", "principal_type", "typecheck"]

ARGS_UNKNOWN = map_of(STRING, DYN)

_TOOL = map_of(STRING, STRING, {"name": Field(STRING, True),
                                "description": Field(STRING, True)}, "error")
_REQUEST = map_of(STRING, DYN, {
    "text": Field(STRING, True),
    **{k: Field(list_of(STRING), True)
       for k in ("emails", "urls", "hosts", "ibans", "phones", "dates", "quoted")},
    "numbers": Field(list_of(DOUBLE), True),
}, "error")
"""The structured request (expr.lib_provenance.Request); ``request.mentions(v)`` too."""
_COUNTER = map_of(STRING, DYN, {"count": Field(INT, True), "limit": Field(INT, True),
                                "exceeded": Field(BOOL, True), "remaining": Field(INT, True)},
                  "error")
"""``counters.<name>``: what the engine binds for each of a policy's counters."""
_HISTORY = list_of(map_of(STRING, DYN, {"tool": Field(STRING, True),
                                        "args": Field(ARGS_UNKNOWN, True),
                                        "effect": Field(STRING, True),
                                        "result": Field(STRING, True),
                                        "trusted": Field(BOOL, True),
                                        "at": Field(TIMESTAMP, False)}, "warning"))
"""An entry as the guard records it; a host calling ``evaluate`` may add keys."""


@dataclass(frozen=True, slots=True)
class TypeFinding:
    severity: str
    element: str
    """``rules.<name>.when`` and the like."""
    position: Position
    message: str


def args_type(schemas: Sequence[Mapping[str, Any]]) -> Type:
    """The type of ``args`` for a policy matching tools with these parameter schemas.

    A parameter is required only if every tool declares and requires it; its type is the
    join of the tools' types (``dyn`` where they disagree). Any tool without
    ``properties`` makes ``args`` unknown.
    """
    return record_union([of_json_schema(s) for s in schemas])


def principal_type(data: Any) -> Type:
    """The type of ``principal`` from what a host says it sends: a JSON Schema (an object
    with ``properties``) or an example principal. Keys outside it are likely typos
    (``principal.role`` for ``roles``): a warning, or an error when the schema says
    ``additionalProperties: false``."""
    if isinstance(data, Mapping) and isinstance(data.get("properties"), Mapping):
        t = of_json_schema(data)
        strict = data.get("additionalProperties") is False
    else:
        t = of_value(data, example=True)
        strict = False
    if t.name != "map":
        raise ValueError("a principal is an object (an example, or a JSON Schema)")
    return dataclasses.replace(t, closed="error" if strict else "warning")


def typecheck(policy: CompiledPolicy, args: Type = ARGS_UNKNOWN, *,
              closed_params: bool = False, principal: Type | None = None,
              args_by_tool: Mapping[str, Type] | None = None) -> list[TypeFinding]:
    """Every type problem in ``policy``'s expressions, in evaluation order.

    ``args_by_tool``: each matched tool's own ``args`` type. Where ``tool.name == "x"``
    (or ``tool.name in [...]``) holds, ``args`` is that tool's (``tool.name ==
    "reserve_hotel" && args.hotel ...`` reads a parameter reserve_hotel requires, though
    another matched tool lacks it).

    ``closed_params``: ``policy.params`` are all it will ever have (an instance of the
    loaded set: bindings and libraries merged in), so reading another key is an error.
    At load, before bindings are applied, a binding may still add keys.
    """
    env: dict[str, Type] = {
        "tool": _TOOL, "args": args, "principal": principal or map_of(STRING, DYN),
        "history": _HISTORY,
        "request": _REQUEST, "params": of_value(policy.params, closed=closed_params),
        "now": TIMESTAMP,
    }
    for tool_name, tool_args in (args_by_tool or {}).items():
        env[tool_args_key(tool_name)] = tool_args
    out: list[TypeFinding] = []
    ignore = policy.failure_policy == "Ignore"
    # Guards matter where a field may be absent, or where the model may send another type
    # than the schema says (typed args: `type(args.x) == string && ...` narrows). Without
    # either (at load time) they change nothing, and working them out is skipped.
    token = _env_token(env)
    guards = args.fields is not None or _may_be_absent(env, token)

    env_token: list[int | None] = [token]  # of the current env; reset when env changes

    def run(element: str, compiled: CompiledExpression, expect: Type | None = None,
            facts: Facts = NONE) -> Type:
        node = compiled.program.ast
        if not env_token:
            env_token.append(_env_token(env))
        key = None
        if env_token[0] is not None:
            found = shape(node, compiled.program.shape)
            if found is not None:
                key = (found, env_token[0], expect, facts, guards)
        t = _RESULTS.get(key) if key is not None else None
        if t is None:
            t, diagnostics = check(node, env, expect=expect, facts=facts, guards=guards)
            out.extend(_finding(element, compiled, d, ignore) for d in diagnostics)
            if key is not None and not diagnostics:
                if len(_RESULTS) >= _RESULTS_MAX:
                    _RESULTS.clear()
                _RESULTS[key] = t
        if any(n == "params" or n.startswith("@") for n in compiled.names):
            # params, or a library function's parameters (inlined as @lib.fn.param)
            out.extend(_param_regexes(element, compiled, policy.params))
        return t

    if policy.selector is not None:
        run("binding.match.when", policy.selector, BOOL)
    if policy.when is not None:
        run("match.when", policy.when, BOOL)
    for repair in policy.repairs:
        facts = NONE
        if repair.when is not None:
            run(f"repairs.{repair.name}.when", repair.when, BOOL)
            facts = facts_of(repair.when.program.ast)
        for arg, compiled in repair.set:
            t = run(f"repairs.{repair.name}.set.{arg}", compiled, facts=facts)
            wanted = args.field(arg)
            if wanted is not None and not _fits(wanted.type, t):
                out.append(TypeFinding(
                    "warning", f"repairs.{repair.name}.set.{arg}",
                    compiled.expression.position,
                    f"gives {article(t)}, but the tool's '{arg}' is {article(wanted.type)}: "
                    f"the repaired value may fail the tool's validation, or reach the tool "
                    f"as the wrong type; convert it "
                    f"({_CONVERT.get(wanted.type.name, 'to that type')})"))
        for arg in repair.unset:
            wanted = args.field(arg)
            if wanted is not None and wanted.required:
                at = repair.when.expression.position if repair.when is not None else \
                    policy.position
                out.append(TypeFinding(
                    "warning", f"repairs.{repair.name}.unset", at,
                    f"removes '{arg}', which the tool requires: the repaired call fails the "
                    f"tool's validation"))
    for c in policy.counters:  # on the repaired arguments, before variables and rules
        key_t = run(f"counters.{c.name}.key", c.key)
        if key_t.name not in _COUNTER_KEYS:
            out.append(TypeFinding(
                "error", f"counters.{c.name}.key", c.key.expression.position,
                f"gives {article(key_t)}, but a counter's key is a string or an int (what "
                f"is counted apart, e.g. principal.user or args.to): every call it counts "
                f"would fail closed"))
        if c.when is not None:
            run(f"counters.{c.name}.when", c.when, BOOL)
        if c.cost is not None:
            run(f"counters.{c.name}.cost", c.cost, INT)
            cost = c.cost.program.ast
            if isinstance(cost, ast.Literal) and type(cost.value) is int and cost.value < 0:
                out.append(TypeFinding(
                    "error", f"counters.{c.name}.cost", c.cost.expression.position,
                    f"is {cost.value}, but a counter's cost is an int >= 0 (what one call "
                    f"adds; 0 counts nothing): every call it counts would fail closed"))
    if policy.counters:
        env["counters"] = map_of(STRING, _COUNTER, {c.name: Field(_COUNTER, True)
                                                     for c in policy.counters}, "error")
        env_token.clear()
    variables: dict[str, Field] = {}
    for v in policy.variables:
        env["variables"] = map_of(STRING, DYN, variables)
        env_token.clear()
        variables[v.name] = Field(run(f"variables.{v.name}", v.value), True)
    env["variables"] = map_of(STRING, DYN, variables)
    env_token.clear()
    for rule in policy.rules:
        run(f"rules.{rule.name}.when", rule.when, BOOL)
        if rule.message_expression is not None:
            run(f"rules.{rule.name}.messageExpression", rule.message_expression, STRING,
                facts_of(rule.when.program.ast))
    return out


_COUNTER_KEYS = frozenset({"dyn", "string", "int", "uint", "num"})
"""What a counter's ``key`` may give (the engine refuses anything else at run time;
``num`` is JSON's number, an int for some calls)."""


def _fits(want: Type, got: Type) -> bool:
    """Whether a value of ``got`` can pass a parameter of ``want`` (``dyn``: unknown)."""
    if DYN in (want, got) or want.name == "dyn" or got.name == "dyn":
        return True
    numeric = {"int", "uint", "double", "num"}
    if want.name == "num" or got.name == "num":
        return want.name in numeric and got.name in numeric
    if want.name == "double" and got.name == "int":
        return True  # JSON: 5 is a valid number for a float parameter
    return want.name == got.name


_CONVERT = {"num": "double(...)", "double": "double(...)", "int": "int(...)",
            "string": "string(...)", "bool": "== \"true\""}


_RESULTS: dict[tuple[Any, ...], Type] = {}
"""The type of each expression checked without a diagnostic, by its shape
(``typechecker.shape``), the environment's token, and what the place expects: a policy
set repeats expressions that differ only in literals, and checking each was a fifth of
loading 10,000 rules."""
_RESULTS_MAX = 20_000
_ENVS: dict[tuple[tuple[str, Type], ...], int] = {}
_TOKENS = itertools.count()


def _env_token(env: Mapping[str, Type]) -> int | None:
    """One number for each distinct environment (compared by value once, not on every
    lookup); None when results in it cannot be shared (a type lists allowed values)."""
    items = tuple(env.items())
    try:
        found = _ENVS.get(items)
    except TypeError:  # an unhashable enum value
        return None
    if found is None:
        if any(has_enums(t) for _, t in items):
            return None
        if len(_ENVS) >= _RESULTS_MAX:
            _ENVS.clear()
        found = _ENVS[items] = next(_TOKENS)
    return found


_ABSENT: dict[int, bool] = {}
"""``may_be_absent`` of each environment by its token: every policy of a set starts from
the same one, and walking its types was a fortieth of a 10,000-rule load."""


def _may_be_absent(env: Mapping[str, Type], token: int | None) -> bool:
    if token is None:
        return may_be_absent(env)
    found = _ABSENT.get(token)
    if found is None:
        if len(_ABSENT) >= _RESULTS_MAX:
            _ABSENT.clear()
        found = _ABSENT[token] = may_be_absent(env)
    return found


def _param_regexes(element: str, compiled: CompiledExpression,
                   params: Mapping[str, Any]) -> list[TypeFinding]:
    """A pattern taken from params (``args.q.matches(params.re)``) is a constant too, and
    so is one a library function builds from its argument (``"(?i)" + pattern`` called
    with a literal or a param): an invalid one would fail every evaluation, so it is a
    load error at the reference (patterns of literals alone are the checker's)."""
    out: list[TypeFinding] = []
    stack: list[tuple[ast.Node, Mapping[str, str]]] = [(compiled.program.ast, {})]
    while stack:
        node, bound = stack.pop()
        if (isinstance(node, ast.Call) and node.function == "bind" and len(node.args) == 3
                and isinstance(node.target, ast.Ident) and node.target.name == "cel"
                and isinstance(node.args[0], ast.Ident)):
            # cel.bind(@f.p, value, body): the library parameter's constant, in the body
            name, value, body = node.args[0].name, node.args[1], node.args[2]
            text = _constant_pattern(value, bound, params)
            inner = {k: v for k, v in bound.items() if k != name}
            stack.extend([(value, bound), (body, {**inner, name: text} if text else inner)])
            continue
        ref = pattern_argument(call_name(node), node) if isinstance(node, ast.Call) else None
        if ref is not None and constant_text(ref) is None:
            text = _constant_pattern(ref, bound, params)
            problem = regex_problem(text) if text is not None else None
            if problem:
                at = ref.operand.offset if isinstance(ref, ast.Select) else ref.offset
                out.append(TypeFinding(
                    "error", element, compiled.expression.position_of(at),
                    f"params.{ref.field}: {problem}" if isinstance(ref, ast.Select)
                    else problem))
        stack.extend((child, bound) for child in _children(node))
    return out


def _constant_pattern(node: ast.Node, bound: Mapping[str, str],
                      params: Mapping[str, Any], depth: int = 0) -> str | None:
    """The text ``node`` always has: a string literal, ``params.x`` holding a string, a
    library parameter bound to one, or ``+`` of them; None for anything else."""
    if isinstance(node, ast.Literal):
        return node.value if isinstance(node.value, str) else None
    if (isinstance(node, ast.Select) and not node.test_only
            and isinstance(node.operand, ast.Ident) and node.operand.name == "params"):
        value = params.get(node.field)
        return value if isinstance(value, str) else None
    if isinstance(node, ast.Ident):
        return bound.get(node.name)
    if isinstance(node, ast.Call) and node.function == "@arg" and node.args:
        return _constant_pattern(node.args[0], bound, params, depth + 1)
    if (depth < 16 and isinstance(node, ast.Call) and node.function == "_+_"
            and node.target is None and len(node.args) == 2):
        left = _constant_pattern(node.args[0], bound, params, depth + 1)
        right = _constant_pattern(node.args[1], bound, params, depth + 1)
        if left is not None and right is not None and len(left) + len(right) <= 100_000:
            return left + right
    return None


def _children(node: ast.Node) -> list[ast.Node]:
    if isinstance(node, ast.Select):
        return [node.operand]
    if isinstance(node, ast.Call):
        return [*node.args, *([node.target] if node.target is not None else [])]
    if isinstance(node, ast.ListLit):
        return list(node.elements)
    if isinstance(node, ast.MapLit):
        return [x for kv in node.entries for x in kv]
    if isinstance(node, ast.Comprehension):
        return [node.iter_range, node.accu_init, node.loop_condition, node.loop_step,
                node.result]
    return []


def _finding(element: str, compiled: CompiledExpression, d: Diagnostic,
             ignore: bool = False) -> TypeFinding:
    message = d.message
    if ignore:  # under Ignore an erroring rule is skipped: the call goes through
        message = message.replace(FAILS_CLOSED, "(under failurePolicy: Ignore the rule is "
                                                "then skipped, and the call goes through)")
    return TypeFinding(d.severity, element, compiled.expression.position_of(d.offset),
                       message)

