"""The type checker's result cache never hides a finding: rules of one shape that differ
in a literal the checker reads (a tool name that narrows ``args``, a field path, a regex)
are checked apart, so a policy reports what each rule reports on its own."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from guardrails.engine import typecheck
from guardrails.engine.compile import load_with_warnings
from guardrails.engine.lint import lint
from guardrails.expr import typechecker

TOOLS = {
    "send_email": {"type": "object", "required": ["to", "n"],
                   "properties": {"to": {"type": "string"}, "n": {"type": "string"}}},
    "send_money": {"type": "object", "required": ["to", "n"],
                   "properties": {"to": {"type": "string"}, "n": {"type": "number"},
                                  "tags": {"type": "array", "items": {"type": "string"}}}},
    "read_file": {"type": "object", "required": ["path"],
                  "properties": {"path": {"type": "string"}, "n": {"type": "integer"}}},
}

_TOOL = st.sampled_from(sorted(TOOLS))
_GUARD = st.one_of(
    _TOOL.map(lambda t: f'tool.name == "{t}"'),
    _TOOL.map(lambda t: f'"{t}" == tool.name'),
    st.lists(_TOOL, min_size=1, max_size=2, unique=True).map(
        lambda ts: "tool.name in [" + ", ".join(f'"{t}"' for t in ts) + "]"),
    _TOOL.map(lambda t: f'!(tool.name != "{t}")'),
)
_TEST = st.sampled_from([
    "args.n > 5", "args.n == 'x'", "args.to.startsWith('a')", "args.n.size() > 1",
    "args.tags.exists(t, t == 'a')", "'n' in args && args.n > 1", "args.path.matches('^/x')",
])


def _findings(policy_text: str) -> set[str]:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "p.yaml"
        path.write_text(policy_text, encoding="utf-8")
        policies, _ = load_with_warnings([str(path)])
        return {f"{f.severity}: {f.message}" for f in lint(policies, TOOLS)}


def _policy(whens: list[str]) -> str:
    rules = "".join(f"    - name: r{i}\n      when: {json.dumps(w)}\n      action: deny\n"
                    for i, w in enumerate(whens))
    return ("apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\nspec:\n"
            f"  match: {{tools: {json.dumps(sorted(TOOLS))}}}\n  rules:\n{rules}")


def _fresh() -> None:
    typecheck._RESULTS.clear()
    typecheck._ENVS.clear()
    typechecker._READ_POSITIONS.clear()


def test_a_tool_name_that_narrows_args_is_part_of_the_key() -> None:
    """Same shape, other tool: the first rule is clean and cached; the second compares
    send_email's string ``n`` with a number, and must say so."""
    _fresh()
    found = _findings(_policy(['tool.name == "send_money" && args.n > 5',
                               'tool.name == "send_email" && args.n > 5']))
    assert any("rules.r1.when: cannot compare string > int" in f for f in found), found
    assert not any("rules.r0.when" in f for f in found), found


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_GUARD, _TEST), min_size=2, max_size=5))
def test_a_policy_reports_what_each_rule_reports_alone(rules: list[tuple[str, str]]) -> None:
    whens = [f"{guard} && {test}" for guard, test in rules]
    _fresh()
    together = _findings(_policy(whens))
    alone: set[str] = set()
    for i, when in enumerate(whens):
        _fresh()
        # each rule on its own, under its own name (a finding names its rule)
        alone |= {f.replace("rules.r0.", f"rules.r{i}.")
                  for f in _findings(_policy([when]))}
    assert together == alone


def test_guards_follow_each_environment_across_policies_checked_in_turn() -> None:
    """Whether a field may be absent (so guards matter) is kept by environment: a
    principal whose ``x`` is required and one where it may be absent, checked in turn,
    each give what they give on fresh caches (``has()`` guards the read only where ``x``
    may be absent, and only there is the unguarded read a warning)."""
    text = ("apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\nspec:\n"
            "  match: {tools: [t]}\n  rules:\n"
            "    - {name: a, when: 'has(principal.x) && principal.x > 1', action: deny}\n"
            "    - {name: b, when: 'principal.x > 1', action: deny}\n")
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "p.yaml"
        path.write_text(text, encoding="utf-8")
        policies, _ = load_with_warnings([str(path)])
    policy = next(iter(policies.policies))
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}}
    optional = typecheck.principal_type(schema)
    required = typecheck.principal_type({**schema, "required": ["x"]})

    def found(principal: typecheck.Type) -> list[tuple[str, str]]:
        return [(f.element, f.message) for f in typecheck.typecheck(policy, principal=principal)]

    fresh = {}
    for name, t in (("optional", optional), ("required", required)):
        _fresh()
        typecheck._ABSENT.clear()
        fresh[name] = found(t)
    assert fresh["required"] == []
    assert [e for e, _ in fresh["optional"]] == ["rules.b.when"]
    for name, t in (("required", required), ("optional", optional)) * 2:
        assert found(t) == fresh[name], name
