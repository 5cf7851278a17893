"""The steady per-decision path leaves nothing for the cyclic collector.

A policy's ``Variables`` hold the bindings they are evaluated against, and the bindings
hold them: a cycle per policy with variables per call, which only the cyclic collector
could free (with the arguments, principal and history it kept alive until then). The
bindings drop them when the policy's rules are done, on the short path and the general
path (traced too) alike, so a decision's garbage goes by reference counting (a failed expression's
exception, even one a ``||`` absorbed, still holds its frame until collected). Also pinned: the
positional call of ``PolicySet.evaluate`` decides as the keyword one.
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest

import guardrails
from guardrails.engine.decision import Decision

POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: p}
spec:
  match: {tools: [t]}
  params: {limit: 10}
  variables:
    - {name: amount, expression: 'double(args.amount)'}
    - {name: twice, expression: 'variables.amount * 2.0'}
  repairs:
    - {name: text, when: 'type(args.amount) == string', set: {amount: 'double(args.amount)'}}
  rules:
    - {name: big, when: 'variables.twice > double(params.limit)', action: deny,
       messageExpression: '"twice " + string(variables.twice)'}
    - {name: who, when: 'history.size() > 0 && principal.role == "x"', action: warn}
"""

BACKENDS = ("compiled", "closures")


def _load(tmp_path: Path, backend: str, text: str = POLICY) -> guardrails.PolicySet:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return guardrails.load(path, backend=backend)  # type: ignore[arg-type]


def _garbage_of(decide: Any) -> int:
    """Objects the cyclic collector finds unreachable after ``decide`` runs 20 times."""
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        for _ in range(20):
            decide()
        return gc.collect()
    finally:
        if was:
            gc.enable()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_decision_with_variables_leaves_no_cycle(tmp_path: Path, backend: str) -> None:
    ps = _load(tmp_path, backend)
    calls = [({"amount": "7"}, {}), ({"amount": 10.0}, {"principal": {"role": "x"},
                                                      "history": [{"tool": "t"}]})]
    for args, kw in calls:
        assert ps._candidates("t").plan is not None
        d = ps.evaluate("t", args, **kw)
        assert d.effect == "deny" and d.rules[0].message in ("twice 14", "twice 20")
        assert not d.errors
        assert _garbage_of(lambda args=args, kw=kw: ps.evaluate("t", args, **kw)) == 0
        # The general path (explain, input errors) unbinds them too.
        assert _garbage_of(lambda args=args, kw=kw: ps.explain("t", args, **kw)) == 0


def test_the_collector_would_have_found_the_cycle(tmp_path: Path) -> None:
    """The measure above can fail: a Variables bound to bindings that hold it is garbage
    the collector finds."""
    from guardrails.expr.values import Variables

    ps = _load(tmp_path, "compiled")

    def cycle() -> None:
        variables = Variables(ps.policies[0].variable_programs)
        variables.bindings = {"variables": variables, "args": {"amount": 1.0}}

    assert _garbage_of(cycle) > 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_positional_arguments_decide_as_keywords(tmp_path: Path, backend: str) -> None:
    ps = _load(tmp_path, backend)
    principal, history = {"role": "x"}, [{"tool": "t", "result": "r"}]
    by_keyword = ps.evaluate("t", {"amount": 30.0}, principal=principal, history=history,
                             request="pay", description="d")
    by_position = ps.evaluate("t", {"amount": 30.0}, principal, history, "pay", "d")
    assert isinstance(by_position, Decision)
    assert by_position.to_dict() | {"id": ""} == by_keyword.to_dict() | {"id": ""}
    assert [r.rule for r in by_position.rules] == ["big", "who"]
