"""Optional reads in real policies: an argument the call leaves out is read safely, on the
generated-code and closure backends, through the production engine."""

from __future__ import annotations

from pathlib import Path

import pytest

import guardrails

POLICY = """\
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: sql}
spec:
  match: {tools: [run_sql]}
  params: {max_timeout: 300}
  rules:
    - name: long-timeout
      when: 'args.?timeout_s.orValue(0) > params.max_timeout'
      action: deny
      message: timeout too long
    - name: unsafe-mode
      when: 'args.?options.?mode.orValue("safe") != "safe"'
      action: warn
    - name: first-table-is-secret
      when: 'args.?tables[?0].orValue("") == "secrets"'
      action: deny
    - name: optional-literals
      when: 'size([?args.?a, ?args.?b]) == 2 && {?"x": args.?a}.x == "both"'
      action: require_approval
"""


@pytest.fixture(params=["compiled", "closures"])
def policies(request: pytest.FixtureRequest, tmp_path: Path) -> guardrails.PolicySet:
    f = tmp_path / "sql.yaml"
    f.write_text(POLICY, encoding="utf-8")
    return guardrails.load(f, backend=request.param)


def fired(decision: guardrails.Decision) -> list[str]:
    return sorted(r.rule for r in decision.rules)


def test_a_left_out_argument_is_read_without_an_error(policies: guardrails.PolicySet) -> None:
    d = policies.evaluate("run_sql", {"query": "select 1"})
    assert d.effect.value == "allow" and d.errors == () and fired(d) == []


@pytest.mark.parametrize(("args", "rules", "effect"), [
    ({"timeout_s": 301}, ["long-timeout"], "deny"),
    ({"timeout_s": 300}, [], "allow"),
    ({"options": {"mode": "fast"}}, ["unsafe-mode"], "allow"),
    ({"options": {}}, [], "allow"),
    ({"tables": ["secrets", "x"]}, ["first-table-is-secret"], "deny"),
    ({"tables": []}, [], "allow"),
    ({"a": "both", "b": 1}, ["optional-literals"], "require_approval"),
    ({"a": "both"}, [], "allow"),
])
def test_present_arguments_are_checked(policies: guardrails.PolicySet, args: dict[str, object],
                                       rules: list[str], effect: str) -> None:
    d = policies.evaluate("run_sql", args)
    assert fired(d) == rules and d.effect.value == effect and d.errors == ()


@pytest.mark.parametrize("args", [
    {"timeout_s": "301"},           # a string compared with an int
    {"options": "fast"},             # .?mode on a string
    {"tables": {"0": "secrets"}},    # [?0] on a map without the int key 0 is none, fine
])
def test_wrong_types_still_fail_closed(policies: guardrails.PolicySet,
                                       args: dict[str, object]) -> None:
    d = policies.evaluate("run_sql", args)
    if args.get("tables") is not None:
        assert d.effect.value == "allow" and d.errors == ()
    else:
        assert d.effect.value == "deny" and len(d.errors) == 1


def test_an_optional_is_not_a_bool_condition(tmp_path: Path) -> None:
    f = tmp_path / "p.yaml"
    f.write_text(POLICY.replace("'args.?timeout_s.orValue(0) > params.max_timeout'",
                                "'args.?timeout_s'"), encoding="utf-8")
    d = guardrails.load(f).evaluate("run_sql", {"timeout_s": 1})
    assert d.effect.value == "deny" and "long-timeout" in d.errors[0].element
