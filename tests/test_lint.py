"""Schema-aware checks (guardrails.engine.lint) on policies compiled by the real loader."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import guardrails
from guardrails.engine.lint import Finding, lint, parse_tools, tool_parameters

PAY: dict[str, Any] = {"type": "object", "properties": {"recipient": {"type": "string"},
                                        "amount": {"type": "number"}},
                       "required": ["recipient", "amount"]}
REFUND: dict[str, Any] = {"type": "object", "properties": {"order": {"type": "string"},
                                           "amount": {"type": "number"}},
                          "required": ["order", "amount"]}


def policy(tmp_path: Path, body: str, name: str = "p.yaml") -> Path:
    path = tmp_path / name
    path.write_text("apiVersion: guardrails/v1\nkind: ToolPolicy\n" + body, encoding="utf-8")
    return path


def findings(tmp_path: Path, body: str, tools: Mapping[str, Mapping[str, Any]]
             ) -> list[Finding]:
    return lint(guardrails.load(policy(tmp_path, body)), tools)


def rule(when: str, tools: str = '["send_money"]') -> str:
    return f"""metadata: {{name: pay}}
spec:
  match: {{tools: {tools}}}
  rules:
    - name: r
      when: '{when}'
      action: deny
"""


def test_misspelled_argument_is_an_error_at_its_position(tmp_path: Path) -> None:
    [f] = findings(tmp_path, rule("args.amout > 100"), {"send_money": PAY})
    assert f.severity == "error"
    # line 8 is `      when: 'args.amout > 100'`: the quote is column 13, "amout" column 19
    assert (f.file, f.line, f.column) == (str(tmp_path / "p.yaml"), 8, 19)
    assert "'send_money' has no parameter 'amout'" in f.message
    assert "did you mean 'amount'?" in f.message
    assert "rules.r" in f.message
    assert str(f).startswith(f"{tmp_path / 'p.yaml'}:8:19: error: ")


@pytest.mark.parametrize("when, column", [
    ("has(args.amout)", 23),
    ('args["amout"] > 1', 20),
    ('"amout" in args', 15),
    ("args.recipient == \"x\" && args.amout > 1", 44),
    ("[1, 2].exists(x, args.amout > x)", 36),
    ("args.recipient.startsWith(\"a\") || args . amout > 1", 55),
])
def test_every_way_of_reading_an_argument_is_checked(tmp_path: Path, when: str,
                                                     column: int) -> None:
    body = rule(when.replace("'", "''"))
    [f] = findings(tmp_path, body, {"send_money": PAY})
    assert f.severity == "error" and "'amout'" in f.message
    assert (f.line, f.column) == (8, column)


def test_correct_names_and_shadowing_comprehensions_are_clean(tmp_path: Path) -> None:
    when = 'has(args.amount) && args.amount > 1 && [1, 2].all(args, args > 0)'
    assert findings(tmp_path, rule(when), {"send_money": PAY}) == []


def test_variables_repairs_and_match_when_are_checked(tmp_path: Path) -> None:
    body = """metadata: {name: pay}
spec:
  match:
    tools: ["send_money"]
    when: 'args.recipent != ""'
  variables:
    - name: v
      expression: 'args.ammount'
  repairs:
    - name: fix
      when: 'has(args.amount)'
      set:
        amonut: 'args.amount'
      unset: [memo]
  rules:
    - name: r
      when: 'variables.v > 1'
      action: deny
"""
    got = findings(tmp_path, body, {"send_money": PAY})
    errors = [(f.line, f.message) for f in got if f.severity == "error"]
    assert [line for line, _ in errors] == [7, 10]
    assert "match.when" in errors[0][1] and "'recipent'" in errors[0][1]
    assert "variables.v" in errors[1][1] and "did you mean 'amount'" in errors[1][1]
    warnings = [f.message for f in got if f.severity == "warning"]
    assert any("sets argument 'amonut'" in m for m in warnings), warnings
    assert any("unsets argument 'memo'" in m for m in warnings), warnings


def test_argument_only_some_tools_have(tmp_path: Path) -> None:
    tools = {"send_money": PAY, "refund": REFUND}
    both = '["send_money", "refund"]'
    [f] = findings(tmp_path, rule("args.order == \"x\"", both), tools)
    assert f.severity == "warning" and "'args.order' may be absent" in f.message
    assert "test has(args.order) first" in f.message
    # Guarded by has() in the same expression: the author handled it.
    assert findings(tmp_path, rule('has(args.order) && args.order == "x"', both), tools) == []
    # Present in none of them: still an error.
    [f] = findings(tmp_path, rule("args.ordr == \"x\"", both), tools)
    assert f.severity == "error" and "tools 'refund', 'send_money' have no parameter" in f.message


def test_policy_matching_no_tool_and_tool_matched_by_no_policy(tmp_path: Path) -> None:
    got = findings(tmp_path, rule("true", '["send_mony"]'), {"send_money": PAY})
    assert [f.severity for f in got] == ["warning", "info"]
    assert got[0].file == str(tmp_path / "p.yaml") and got[0].line >= 1
    assert "matches none of the known tools" in got[0].message
    assert got[1].message == "tool 'send_money' is not matched by any policy"
    assert got[1].file == "" and str(got[1]).startswith("info: ")


def test_unknown_schemas_and_secrets(tmp_path: Path) -> None:
    body = """metadata: {name: pay}
spec:
  secrets: {arguments: [api_kye]}
  rules:
    - name: r
      when: 'args.anything > 1'
      action: deny
"""
    # No "properties": the tool's parameters are unknown, so nothing is checked.
    assert findings(tmp_path, body, {"free": {"type": "object"}}) == []
    got = findings(tmp_path, body, {"send_money": PAY})
    assert {f.severity for f in got} == {"error", "warning"}
    assert any("secrets.arguments names argument 'api_kye'" in f.message for f in got)


def test_no_tools_no_findings(tmp_path: Path) -> None:
    assert findings(tmp_path, rule("args.x > 1"), {}) == []


def test_parse_tools_accepts_mapping_and_openai_shapes() -> None:
    assert parse_tools({"a": PAY}) == {"a": PAY}
    assert parse_tools([{"name": "a", "parameters": PAY}]) == {"a": PAY}
    assert parse_tools([{"type": "function", "function": {"name": "a", "parameters": PAY}}]) \
        == {"a": PAY}
    assert parse_tools([{"name": "b"}]) == {"b": {}}
    for bad in ([{"parameters": PAY}], {"a": [1]}, "x", [{"name": "a", "parameters": 3}]):
        with pytest.raises(ValueError):
            parse_tools(bad)


def test_tool_parameters() -> None:
    assert tool_parameters(PAY) == frozenset({"recipient", "amount"})
    assert tool_parameters({"type": "object", "properties": {}}) == frozenset()
    assert tool_parameters({}) is None
