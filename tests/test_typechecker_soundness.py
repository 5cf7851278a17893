"""The type checker never rejects what runs: every cel-spec case that evaluates to a value
and that cel-go's checker accepts (cel-spec marks the others ``disable_check``) type
checks without an error, with the bindings typed exactly as they are; and where the
checker names a type, the value has it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from guardrails.expr import ExpressionError, compile_expression
from guardrails.expr.typechecker import check
from guardrails.expr.types import NUMERIC, Type, of_value
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
