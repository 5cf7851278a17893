"""SPEC section 1 semantics, through the public API on real policy files."""

from __future__ import annotations

from pathlib import Path

import pytest

import guardrails
from guardrails import Action, Effect
from tests.engine_support import load_text, policy


def test_numeric_cross_type_comparison(tmp_path: Path) -> None:
    ps = load_text(tmp_path, policy(spec="""
        rules:
          - name: big
            when: 'args.amount > 1000.0 && args.count == 1.0 && 2u > args.count'
            action: deny
    """))
    assert ps.evaluate("t", {"amount": 1500, "count": 1}).effect is Effect.DENY
    assert ps.evaluate("t", {"amount": 999, "count": 1}).effect is Effect.ALLOW
    assert ps.evaluate("t", {"amount": 1500.5, "count": 1.0}).effect is Effect.DENY


def test_non_bool_when_is_an_error_and_fail_fires(tmp_path: Path) -> None:
    ps = load_text(tmp_path, policy(spec="""
        rules:
          - name: not-bool
            when: 'args.amount'
            action: require_approval
            message: needs a look
    """))
    d = ps.evaluate("t", {"amount": 5})
    assert d.effect is Effect.REQUIRE_APPROVAL
    assert [e.element for e in d.errors] == ["rules.not-bool"]
    assert d.errors[0].handled_as == "fired"
    assert "not bool" in d.errors[0].message


def test_or_with_non_bool_operand_is_an_error_not_a_value(tmp_path: Path) -> None:
    ps = load_text(tmp_path, policy(spec="""
        rules:
          - name: r
            when: 'args.x || false'
            action: deny
    """))
    d = ps.evaluate("t", {"x": 42})
    assert d.effect is Effect.DENY
    assert d.errors and d.errors[0].element == "rules.r"


def test_failure_policy_ignore_skips_the_rule_and_records_the_error(tmp_path: Path) -> None:
    ps = load_text(tmp_path, policy(spec="""
        failurePolicy: Ignore
        rules:
          - name: r
            when: 'args.missing > 3'
            action: halt
    """))
    d = ps.evaluate("t", {})
    assert d.effect is Effect.ALLOW
    assert d.rules == ()
    assert [(e.element, e.handled_as) for e in d.errors] == [("rules.r", "skipped")]


def test_failure_policy_fail_fires_the_rule(tmp_path: Path) -> None:
    ps = load_text(tmp_path, policy(spec="""
        rules:
          - name: r
            when: 'args.missing > 3'
            action: halt
            message: stop
    """))
    d = ps.evaluate("t", {})
    assert d.effect is Effect.HALT
    assert [(r.rule, r.action) for r in d.rules] == [("r", Action.HALT)]


def test_an_errored_allow_rule_fails_closed(tmp_path: Path) -> None:
    ps = load_text(tmp_path, policy(spec="""
        defaultAction: deny
        rules:
          - name: known
            when: 'args.recipient in params.known'
            action: allow
        params:
          known: ["a"]
    """))
    assert ps.evaluate("t", {"recipient": "a"}).effect is Effect.ALLOW
    assert ps.evaluate("t", {"recipient": "b"}).effect is Effect.DENY
    d = ps.evaluate("t", {})  # no recipient: the allow rule errors
    assert d.effect is Effect.DENY
    assert d.errors[0].handled_as == "fired"
    assert [(r.rule, r.action) for r in d.rules] == [("known", Action.DENY)]
    assert d.message == "rule p/known could not be evaluated"


def test_audit_mode_changes_nothing_but_is_recorded(tmp_path: Path) -> None:
    ps = load_text(tmp_path, policy("shadow", spec="""
        mode: audit
        repairs:
          - name: fix
            set:
              amount: '0'
        rules:
          - name: r
            when: 'true'
            action: halt
            message: would halt
    """))
    d = ps.evaluate("t", {"amount": 7})
    assert d.effect is Effect.ALLOW
    assert d.arguments == {"amount": 7}
    assert [(r.rule, r.audit) for r in d.rules] == [("r", True)]
    assert [(r.repair, r.audit) for r in d.repairs] == [("fix", True)]
    assert d.message == ""


def test_with_mode_audit_turns_every_policy_into_a_shadow(tmp_path: Path) -> None:
    ps = load_text(tmp_path, policy(spec="""
        rules:
          - {name: r, when: 'true', action: deny}
    """))
    assert ps.evaluate("t", {}).effect is Effect.DENY
    shadow = ps.with_mode("audit")
    d = shadow.evaluate("t", {})
    assert d.effect is Effect.ALLOW and d.rules[0].audit


@pytest.mark.parametrize(
    ("actions", "expected"),
    [
        (["allow", "deny"], Effect.DENY),
        (["require_approval", "deny"], Effect.DENY),
        (["deny", "halt"], Effect.HALT),
        (["require_approval", "allow"], Effect.REQUIRE_APPROVAL),
        (["warn"], Effect.ALLOW),
        (["warn", "require_approval"], Effect.REQUIRE_APPROVAL),
    ],
)
def test_severity_order_within_a_policy(
    tmp_path: Path, actions: list[str], expected: Effect
) -> None:
    rules = "\n".join(
        f"  - {{name: r{i}, when: 'true', action: {a}}}" for i, a in enumerate(actions)
    )
    ps = load_text(tmp_path, policy(spec="rules:\n" + rules))
    d = ps.evaluate("t", {})
    assert d.effect is expected
    assert len(d.rules) == len(actions)  # every fired rule is reported, not only the first


def test_severity_across_policies(tmp_path: Path) -> None:
    ps = load_text(
        tmp_path,
        policy("a", spec="rules:\n  - {name: r, when: 'true', action: require_approval}"),
        policy("b", spec="rules:\n  - {name: r, when: 'true', action: halt}"),
        policy("c", spec="rules:\n  - {name: r, when: 'true', action: deny}"),
    )
    d = ps.evaluate("t", {})
    assert d.effect is Effect.HALT
    assert [r.policy for r in d.rules] == ["a", "b", "c"]


def test_default_deny_satisfied_by_allow_rule(tmp_path: Path) -> None:
    ps = load_text(tmp_path, policy(spec="""
        defaultAction: deny
        rules:
          - {name: small, when: 'args.amount < 10', action: allow}
          - {name: note, when: 'true', action: warn, message: noted}
    """))
    assert ps.evaluate("t", {"amount": 5}).effect is Effect.ALLOW
    d = ps.evaluate("t", {"amount": 50})
    assert d.effect is Effect.DENY
    assert [w.rule for w in d.warnings] == ["note"]


def test_warn_is_recorded_and_changes_nothing(tmp_path: Path) -> None:
    ps = load_text(tmp_path, policy(spec="""
        rules:
          - {name: w, when: 'true', action: warn, message: careful}
    """))
    d = ps.evaluate("t", {})
    assert d.effect is Effect.ALLOW
    assert [(w.rule, w.message) for w in d.warnings] == [("w", "careful")]


def test_repairs_apply_in_order_on_raw_arguments(tmp_path: Path) -> None:
    ps = load_text(tmp_path, policy(spec="""
        repairs:
          - name: strip-commas
            when: 'type(args.amount) == string'
            set:
              amount: 'args.amount.replace(",", "")'
          - name: to-double
            when: 'type(args.amount) == string'
            set:
              amount: 'double(args.amount)'
          - name: drop-debug
            unset: [debug]
        rules:
          - {name: big, when: 'args.amount > 1000.0', action: require_approval}
    """))
    d = ps.evaluate("send", {"amount": "1,500.00", "debug": True})
    assert d.arguments == {"amount": 1500.0}
    assert [r.repair for r in d.repairs] == ["strip-commas", "to-double", "drop-debug"]
    assert d.repairs[2].unset == ("debug",)
    assert d.effect is Effect.REQUIRE_APPROVAL


def test_repair_whose_expression_errors_is_not_applied(tmp_path: Path) -> None:
    ps = load_text(tmp_path, policy(spec="""
        repairs:
          - name: bad
            set:
              amount: 'double(args.amount)'
              note: '"fixed"'
    """))
    d = ps.evaluate("t", {"amount": "lots"})
    assert d.arguments == {"amount": "lots"}  # neither field of the failing repair
    assert d.repairs == ()
    assert [(e.element, e.handled_as) for e in d.errors] == [("repairs.bad", "not-applied")]


def test_variables_are_lazy_and_memoized(tmp_path: Path) -> None:
    # `calls` is a list whose size we can observe through a side-channel-free trick:
    # a variable that errors is evaluated once; a variable never used is never evaluated.
    ps = load_text(tmp_path, policy(spec="""
        variables:
          - name: boom
            expression: 'args.x / 0'
          - name: amount
            expression: 'double(args.amount)'
          - name: unused
            expression: 'args.nope.deeper'
        rules:
          - {name: a, when: 'variables.amount > 10.0', action: deny}
          - {name: b, when: 'variables.amount > 100.0', action: halt}
    """))
    ex = ps.explain("t", {"amount": 500, "x": 1})
    var_steps = [s.element for t in ex.policies for s in t.steps
                 if s.element.startswith("variables.")]
    assert var_steps == ["variables.amount"]  # once, though two rules read it; others never
    assert ex.decision.effect is Effect.HALT


def test_match_tools_globs_and_when(tmp_path: Path) -> None:
    ps = load_text(tmp_path, policy(spec="""
        match:
          tools: ["send_money", "update_*"]
          when: 'principal.tenant == "acme"'
        rules:
          - {name: r, when: 'true', action: deny}
    """))
    acme = {"tenant": "acme"}
    assert ps.evaluate("send_money", {}, principal=acme).effect is Effect.DENY
    assert ps.evaluate("update_user", {}, principal=acme).effect is Effect.DENY
    assert ps.evaluate("read_user", {}, principal=acme).effect is Effect.ALLOW
    assert ps.evaluate("send_money", {}, principal={"tenant": "x"}).effect is Effect.ALLOW
    assert ps.evaluate("send_money", {}, principal={"tenant": "x"}).policies == ()


def test_activation_names(tmp_path: Path) -> None:
    ps = load_text(tmp_path, policy(spec="""
        params:
          limit: 3
        rules:
          - name: r
            when: >-
              tool.name == "send" && tool.description == "sends" &&
              principal.roles.exists(r, r == "admin") && size(history) == 1 &&
              history[0].tool == "read" && request.text.contains("UK12") &&
              params.limit == 3 && now > timestamp("2020-01-01T00:00:00Z")
            action: deny
    """))
    d = ps.evaluate(
        "send", {}, principal={"roles": ["admin"]},
        history=[{"tool": "read", "args": {}, "effect": "allow"}],
        request="pay UK12", description="sends",
    )
    assert d.effect is Effect.DENY, d.errors


def test_message_expression_and_fallback(tmp_path: Path) -> None:
    ps = load_text(tmp_path, policy(spec="""
        rules:
          - name: r
            when: 'true'
            action: deny
            message: static
            messageExpression: '"unknown payee " + args.recipient'
    """))
    assert ps.evaluate("t", {"recipient": "UK12"}).message == "unknown payee UK12"
    d = ps.evaluate("t", {})
    assert d.message == "static"
    assert d.errors[0].handled_as == "fallback"


def test_secret_arguments_never_appear_in_messages_or_records(tmp_path: Path) -> None:
    ps = load_text(tmp_path, policy(spec="""
        secrets:
          arguments: [api_key]
        redact:
          - name: card
            regex: '\\b(?:\\d[ -]?){13,16}\\b'
            replacement: '[REDACTED:card]'
        rules:
          - name: r
            when: 'true'
            action: deny
            messageExpression: '"key " + args.api_key + " card " + args.card'
    """))
    d = ps.evaluate("t", {"api_key": "sk-SECRET-123", "card": "4111 1111 1111 1111"})
    assert "sk-SECRET-123" not in d.message
    assert "4111" not in d.message
    assert "[REDACTED:card]" in d.message
    record = repr(d.to_dict())
    assert "sk-SECRET-123" not in record
    assert d.to_dict()["arguments"]["api_key"] == "[REDACTED]"


def test_decision_is_immutable_and_json_safe(tmp_path: Path) -> None:
    import json

    ps = load_text(tmp_path, policy(spec="rules:\n  - {name: r, when: 'true', action: deny}"))
    d = ps.evaluate("t", {"x": [1, 2.5, None, {"y": "z"}]})
    json.dumps(d.to_dict())
    with pytest.raises(TypeError):
        d.arguments["x"] = 1  # type: ignore[index]
    with pytest.raises(AttributeError):
        d.effect = Effect.ALLOW  # type: ignore[misc]


def test_evaluate_does_not_mutate_the_callers_arguments(tmp_path: Path) -> None:
    ps = load_text(tmp_path, policy(spec="""
        repairs:
          - {name: r, set: {a: '1'}, unset: [b]}
    """))
    args = {"a": 0, "b": 2}
    assert ps.evaluate("t", args).arguments == {"a": 1}
    assert args == {"a": 0, "b": 2}


def test_input_bounds_fail_closed(tmp_path: Path) -> None:
    ps = guardrails.load(
        tmp_path / "p.yaml" if False else _write(tmp_path),
        limits=guardrails.Limits(max_input_bytes=1000),
    )
    d = ps.evaluate("t", {"blob": "x" * 5000})
    assert d.effect is Effect.DENY
    assert d.errors[0].element == "input"
    nested: dict[str, object] = {}
    cur = nested
    for _ in range(100):
        cur["a"] = {}
        cur = cur["a"]  # type: ignore[assignment]
    assert ps.evaluate("t", nested).effect is Effect.DENY


def _write(tmp_path: Path) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(policy(spec="rules:\n  - {name: r, when: 'false', action: deny}"))
    return path


def test_revision_is_a_content_hash(tmp_path: Path) -> None:
    a = tmp_path / "a"
    a.mkdir()
    (a / "p.yaml").write_text(policy(spec="rules:\n  - {name: r, when: 'false', action: deny}"))
    r1 = guardrails.load(a).revision
    assert r1 == guardrails.load(a).revision
    (a / "p.yaml").write_text(policy(spec="rules:\n  - {name: r, when: 'true', action: deny}"))
    assert guardrails.load(a).revision != r1


def test_policies_that_cannot_match_a_tool_are_not_candidates(tmp_path: Path) -> None:
    ps = load_text(
        tmp_path,
        policy("a", spec="match: {tools: [send_*]}\nrules:\n  - {name: r, when: 'true', action: deny}"),
        policy("b", spec="match: {tools: [read]}\nrules:\n  - {name: r, when: 'true', action: deny}"),
    )
    assert [p.name for p in ps.for_tool("send_x")] == ["a"]
    assert [p.name for p in ps.for_tool("other")] == []


def test_match_when_error_fail_applies_the_policy_ignore_skips_it(tmp_path: Path) -> None:
    spec = """
        failurePolicy: {fp}
        match:
          when: 'principal.tenant == "acme"'
        rules:
          - {{name: r, when: 'true', action: deny}}
    """
    strict = load_text(tmp_path, policy("strict", spec=spec.format(fp="Fail")))
    d = strict.evaluate("t", {}, principal={})  # no tenant: match.when errors
    assert d.effect is Effect.DENY
    assert [(e.element, e.handled_as) for e in d.errors] == [("match.when", "fired")]
    lenient = load_text(tmp_path, policy("lenient", spec=spec.format(fp="Ignore")))
    d = lenient.evaluate("t", {}, principal={})
    assert d.effect is Effect.ALLOW and d.policies == ()
    assert [(e.element, e.handled_as) for e in d.errors] == [("match.when", "skipped")]
