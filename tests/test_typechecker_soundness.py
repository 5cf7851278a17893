"""The type checker never rejects what runs: every cel-spec case that evaluates to a value
and that cel-go's checker accepts (cel-spec marks the others ``disable_check``) type
checks without an error, with the bindings typed exactly as they are; and where the
checker names a type, the value has it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from guardrails.engine.typecheck import _HISTORY, _REQUEST, _TOOL
from guardrails.expr import ExpressionError, compile_expression
from guardrails.expr.typechecker import check
from guardrails.expr.types import (
    BOOL,
    DYN,
    NUMERIC,
    STRING,
    TIMESTAMP,
    Type,
    map_of,
    of_json_schema,
    of_value,
)
from guardrails.expr.values import CelError
from tests.test_conformance import CASES, DATA, Case, decode

UNCHECKED = {(t["file"], t["index"]) for path in DATA.glob("*.json")
             for t in json.loads(path.read_text(encoding="utf-8"))["tests"]
             if t.get("disable_check")}
RUNNABLE = [c for c in CASES if c.skip is None and "value" in c.expected
            and (c.file, c.index) not in UNCHECKED and not c.container]


def _agrees(t: Type, value: Any) -> bool:
    if t.name in ("dyn", "type") or value is None:
        return True
    actual = of_value(value)
    if t.name in NUMERIC and actual.name in NUMERIC:
        return t.name == "num" or t.name == actual.name
    if actual.name == "dyn":  # timestamps, durations, bytes and library values
        return True
    return t.name == actual.name


@pytest.mark.parametrize("case", RUNNABLE, ids=[c.id for c in RUNNABLE])
def test_what_evaluates_type_checks(case: Case) -> None:
    try:
        program = compile_expression(case.expr, declared=case.declared,
                                     container=case.container)
        result = program.evaluate(case.bindings)
    except (ExpressionError, CelError):
        pytest.skip("does not evaluate here")
    env = {name: of_value(case.bindings[name]) if name in case.bindings else Type("dyn")
           for name in case.declared}
    t, diagnostics = check(program.ast, env)
    assert [d for d in diagnostics if d.severity == "error"] == [], case.expr
    assert _agrees(t, result), (case.expr, str(t), result)


def test_enough_cases_run() -> None:
    assert len(RUNNABLE) > 1000
    _ = decode


def test_the_checker_never_raises_on_any_expression_that_compiles() -> None:
    """A checker bug must not turn a loadable policy into a crash: every conformance
    expression (errors, unchecked and skipped cases included) is checked without raising."""
    checked = 0
    for case in CASES:
        try:
            program = compile_expression(case.expr, declared=case.declared,
                                         container=case.container)
        except ExpressionError:
            continue
        env = {name: Type("dyn") for name in case.declared}
        check(program.ast, env)
        check(program.ast, {name: of_value(case.bindings.get(name)) for name in case.declared})
        checked += 1
    assert checked > 1500


# -- idioms that must stay clean with typed arguments ------------------------------------------

_STR, _INT = {"type": "string"}, {"type": "integer"}
SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["tags", "to", "url", "ip", "path", "n", "m", "items", "obj", "q", "amount"],
    "properties": {
        "tags": {"type": "array", "items": _STR}, "to": _STR, "url": _STR, "ip": _STR,
        "path": _STR, "n": _INT, "m": {"type": "object", "additionalProperties": _INT},
        "items": {"type": "array", "items": {"type": "object", "required": ["price"],
                                             "properties": {"price": {"type": "number"}}}},
        "obj": {"type": "object", "properties": {"k": _STR}}, "q": _STR,
        "amount": {"type": "number"},
    },
}
ENV = {"args": of_json_schema(SCHEMA), "tool": _TOOL, "request": _REQUEST,
       "history": _HISTORY, "principal": map_of(STRING, DYN), "now": TIMESTAMP,
       "params": of_value({"blocked": ["a"], "hosts": ["x.com"], "root": "/srv", "max": 3,
                           "ratio": 0.5})}
IDIOMS = [
    'args.tags.exists(t, t in params.blocked)',
    'args.to.split(",").all(a, emails.valid(a.trim()))',
    'url(args.url).getHostname() in params.hosts', 'ip(args.ip).isPrivate()',
    'paths.within(args.path, params.root)', 'int(args.n) > 3',
    'args.m.all(k, k.startsWith("x"))', 'args.m.exists(k, args.m[k] > 3)',
    'history.exists(h, h.tool == "x" && h.args.amount > 5)',
    'history.exists(h, now - timestamp(h.at) < duration("1h"))',
    'args.n % 2 == 0', 'args.amount / 2.0 > 1.0', '-args.amount < 0',
    'args.q.lowerAscii().contains("x")', 'string(args.n) + "x" == "3x"',
    'args.items.map(i, i.price).exists(p, p > 10)', 'size(args.items) > params.max',
    'args.q == null', 'args.tags[0] == "a"', 'has(args.obj.k) && args.obj["k"] == "v"',
    '"k" in args.obj', 'args.amount > params.max', 'args.amount * params.ratio > 1.0',
    'args.amount > double(params.max) * (1.0 - params.ratio)',
    'principal.roles.exists(r, r == "admin")', 'request.text.contains(args.q)',
    'tool.name.startsWith("send_")', 'args.items.all(i, i.price >= 0)',
    'args.items.filter(i, i.price > 5).size() == 0', 'args.q.matches("^[a-z]+$")',
    '[args.q, args.to].all(s, s != "")', '{"a": 1}["a"] == 1', 'args.n in [1, 2, 3]',
    'args.amount in [1.0, 2]', 'type(args.amount) == int || type(args.amount) == double',
    'args.q.format([args.n]) != ""', 'args.tags.join(",") != ""', 'args.q.charAt(0) == "a"',
    'args.q.indexOf("a") >= 0', 'now.getDayOfWeek() in [0, 6]',
    'now.getHours("Europe/Paris") > 18', 'duration("1h") > duration("30m")',
    'args.n + 1 > 2', 'math.greatest(args.n, 3) > 2', 'sets.contains(params.blocked, args.tags)',
    'parseJSON(args.q).x == 1', 'credentials.found(args.q)',
    'args.url.startsWith("https://") && url(args.url).getScheme() == "https"',
]


@pytest.mark.parametrize("source", IDIOMS)
def test_common_idioms_with_typed_arguments_are_clean(source: str) -> None:
    program = compile_expression(source, declared=frozenset(ENV))
    _, diagnostics = check(program.ast, ENV, expect=BOOL)
    assert diagnostics == []


def test_every_library_function_declares_its_signature_next_to_it() -> None:
    """One source of truth for function types: each table has its SIGNATURES, no entry
    names a function that does not exist, and only the variadic math helpers are dyn."""
    from guardrails.expr import library, stdlib
    from guardrails.expr.types import parse_signature

    for names, signatures in ((set(stdlib.GLOBALS) | set(stdlib.METHODS), stdlib.SIGNATURES),
                              (set(library.FUNCTIONS) | set(library.METHODS),
                               library.SIGNATURES)):
        assert set(signatures) <= names, set(signatures) - names
        untyped = names - set(signatures)
        assert all(n.startswith("math.") for n in untyped), untyped
        for name, texts in signatures.items():
            assert texts and all(parse_signature(t)[1] == name for t in texts), name
