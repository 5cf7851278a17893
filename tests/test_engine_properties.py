"""Property tests: evaluate() never raises and never allows when a Fail rule errored."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import guardrails
from guardrails import Effect

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
arguments = st.dictionaries(
    st.sampled_from(["amount", "recipient", "memo", "items", "url", "path", "x"])
    | st.text(max_size=8),
    json_values, max_size=6,
)

POLICIES = """
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: strict}
spec:
  params: {known: ["GB12"], cap: 1000}
  variables:
    - {name: amount, expression: 'double(args.amount)'}
  repairs:
    - name: amount-text
      when: 'type(args.amount) == string'
      set: {amount: 'double(args.amount.replace(",", ""))'}
    - name: items-json
      when: 'type(args.items) == string'
      set: {items: 'parseJSON(args.items)'}
  rules:
    - {name: cap, when: 'variables.amount > double(params.cap)', action: deny}
    - {name: payee, when: '!(args.recipient in params.known)', action: require_approval}
    - {name: memo, when: 'args.memo.lowerAscii().contains("urgent")', action: warn}
    - {name: items, when: 'args.items.exists(i, i.price > 100)', action: halt}
    - {name: url, when: 'url(args.url).getHostname() == "evil.test"', action: halt}
    - {name: path, when: '!paths.within(args.path, "/srv")', action: deny}
---
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: lenient}
spec:
  failurePolicy: Ignore
  defaultAction: allow
  rules:
    - {name: x, when: 'args.x.size() > 3', action: deny}
"""


@pytest.fixture(scope="module")
def policies(tmp_path_factory: pytest.TempPathFactory) -> guardrails.PolicySet:
    path = tmp_path_factory.mktemp("props") / "p.yaml"
    path.write_text(POLICIES)
    return guardrails.load(path)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(args=arguments, principal=st.dictionaries(st.text(max_size=5), json_values, max_size=3),
       request=st.text(max_size=30))
def test_evaluate_never_raises_and_fails_closed(
    policies: guardrails.PolicySet, args: dict[str, Any], principal: dict[str, Any],
    request: str,
) -> None:
    decision = policies.evaluate("any_tool", args, principal=principal, request=request)
    assert isinstance(decision.effect, Effect)
    fail_errors = [e for e in decision.errors
                   if e.policy == "strict" and e.handled_as == "fired"]
    if fail_errors:
        assert decision.effect is not Effect.ALLOW
    # a Fail policy's error always shows up as a fired rule
    for e in fail_errors:
        if e.element.startswith("rules."):
            assert any(f"rules.{r.rule}" == e.element for r in decision.rules)
    decision.to_dict()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=json_values)
def test_non_mapping_or_odd_arguments_never_raise(
    policies: guardrails.PolicySet, value: Any
) -> None:
    decision = policies.evaluate("t", value if isinstance(value, dict) else {"x": value})
    assert isinstance(decision.effect, Effect)
    bad = policies.evaluate("t", value)  # type: ignore[arg-type]
    assert isinstance(bad.effect, Effect)
    if value is not None and not isinstance(value, dict):
        assert bad.effect is Effect.DENY  # not a JSON object: fail closed
        assert bad.errors[0].element == "input"


def test_non_json_python_values_fail_closed(policies: guardrails.PolicySet) -> None:
    d = policies.evaluate("t", {"amount": object()})
    assert d.effect is Effect.DENY
    assert d.errors[0].element == "input"
    d = policies.evaluate("t", {1: "non-string key"})  # type: ignore[dict-item]
    assert d.effect is Effect.DENY
