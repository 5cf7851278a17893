"""guardrails.testing: the PolicyTest runner as a library (cases run by the real engine)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from guardrails import PolicyError
from guardrails.testing import (
    Runner,
    TestInputError,
    TestReport,
    render_json,
    render_text,
    run_tests,
    same_value,
)

DATA = Path(__file__).parent / "data" / "cli"

HEADER = "apiVersion: guardrails/v1\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_good_suites_pass_with_coverage() -> None:
    report = run_tests(DATA / "good")
    assert report.passed
    assert [(r.suite, r.case) for r in report.results] == [
        ("shell-tests", "rm -rf is denied"),
        ("shell-tests", "ls is allowed"),
        ("payments-tests", "small known payment is allowed"),
        ("payments-tests", "repaired amount needs approval"),
        ("payments-tests", "unknown payee is denied"),
    ]
    cov = {c.policy: c for c in report.coverage}
    assert cov["payments"].unfired_rules == ("over-cap",)
    assert cov["payments"].unapplied_repairs == ()
    assert cov["shell"].complete
    assert [c.policy for c in report.uncovered] == ["payments"]


def test_failures_are_itemised() -> None:
    report = run_tests(DATA / "failing")
    assert not report.passed
    [failed] = report.failures
    assert (failed.line, failed.column) == (11, 7)
    got = {m.field: (m.expected, m.actual) for m in failed.mismatches}
    assert got == {
        "effect": ("allow", "deny"),
        "arguments.amount": (20, 20.5),
        "rules": (["payments/large-amount"], ["payments/unknown-recipient"]),
        "message": ("no such text", "Recipient is not a known payee."),
    }


def test_cases_see_principal_history_request_and_errors(tmp_path: Path) -> None:
    write(tmp_path / "p.yaml", HEADER + """kind: ToolPolicy
metadata: {name: ctx}
spec:
  failurePolicy: Fail
  rules:
    - name: not-admin
      when: 'principal.role != "admin"'
      action: deny
      message: admins only
    - name: after-read
      when: 'size(history) > 0'
      action: require_approval
      message: follows another call
    - name: not-requested
      when: '!request.text.contains(args.to)'
      action: warn
      message: target not in the request
---
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: ctx-broken}
spec:
  failurePolicy: Ignore
  rules:
    - name: broken
      when: 'args.nothing_here > 1'
      action: deny
      message: never
""")
    write(tmp_path / "t.yaml", HEADER + """kind: PolicyTest
metadata: {name: ctx-tests}
spec:
  policies: [p.yaml]
  cases:
    - name: admin after a read, target from the request
      call:
        tool: mail
        args: {to: bob}
        principal: {role: admin}
        history: [{tool: read_inbox, args: {}, effect: allow}]
        request: mail bob
      expect:
        effect: require_approval
        rules: [ctx/after-read]
        errors: 1
    - name: stranger, target injected
      call: {tool: mail, args: {to: eve}, principal: {role: user}, request: mail bob}
      expect:
        effect: deny
        rules: [ctx/not-admin, ctx/not-requested]
        message: admins only
        errors: 1
""")
    report = run_tests(tmp_path / "t.yaml")
    assert report.passed, render_text(report)


def test_default_policies_same_file_then_directory(tmp_path: Path) -> None:
    # A deny-all policy elsewhere in the directory must not leak into the same-file suite.
    write(tmp_path / "deny_all.yaml", HEADER + """kind: ToolPolicy
metadata: {name: deny-all}
spec: {defaultAction: deny}
""")
    write(tmp_path / "inline.yaml", (DATA / "good" / "inline.yaml").read_text("utf-8"))
    # A tests-only file without spec.policies runs against everything it was loaded with.
    write(tmp_path / "loose.tests.yaml", HEADER + """kind: PolicyTest
metadata: {name: loose}
spec:
  cases:
    - name: the directory's policies apply
      call: {tool: run_shell, args: {command: ls}}
      expect: {effect: deny, rules: []}
""")
    report = run_tests(tmp_path)
    assert report.passed, render_text(report)
    assert {c.policy for c in report.coverage} == {"deny-all", "shell"}


def test_secret_values_never_appear_in_results(tmp_path: Path) -> None:
    write(tmp_path / "t.yaml", HEADER + f"""kind: PolicyTest
metadata: {{name: secrets}}
spec:
  policies: [{DATA / "good" / "payments.yaml"}]
  cases:
    - name: wrong key expectation
      call: {{tool: send_money, args: {{recipient: UK12, amount: 1, api_key: sk-live-SECRET}}}}
      expect: {{effect: allow, arguments: {{api_key: other}}}}
""")
    report = run_tests(tmp_path / "t.yaml")
    [failed] = report.failures
    assert failed.mismatches[0].actual == "[REDACTED]"
    assert "sk-live-SECRET" not in render_text(report)
    assert "sk-live-SECRET" not in render_json(report)


def test_missing_argument_is_reported(tmp_path: Path) -> None:
    write(tmp_path / "t.yaml", HEADER + f"""kind: PolicyTest
metadata: {{name: missing}}
spec:
  policies: [{DATA / "good" / "payments.yaml"}]
  cases:
    - name: expects an argument the call does not have
      call: {{tool: send_money, args: {{recipient: UK12, amount: 1}}}}
      expect: {{effect: allow, arguments: {{memo: hi}}}}
""")
    [failed] = run_tests(tmp_path / "t.yaml").failures
    assert failed.mismatches[0].field == "arguments.memo"
    assert failed.mismatches[0].note == "argument absent"


def test_policy_sets_are_loaded_once_per_distinct_paths() -> None:
    runner = Runner()
    runner.run([DATA / "good", DATA / "failing"])
    # good/payments.yaml is named by two suites through different relative paths;
    # the inline suite uses its own file: 3 distinct keys at most.
    assert len(runner._sets) <= 3


def test_bad_input_raises(tmp_path: Path) -> None:
    with pytest.raises(PolicyError):
        run_tests(DATA / "bad" / "broken.yaml")
    with pytest.raises(TestInputError, match="no PolicyTest"):
        run_tests(DATA / "good" / "payments.yaml")
    # A suite with nothing to test would pass vacuously ("allow"): refuse it.
    write(tmp_path / "t.yaml", HEADER + """kind: PolicyTest
metadata: {name: lonely}
spec:
  cases:
    - name: c
      call: {tool: x, args: {}}
      expect: {effect: allow}
""")
    with pytest.raises(TestInputError, match="suite lonely has no policies"):
        run_tests(tmp_path / "t.yaml")


def test_json_report_round_trips() -> None:
    report = run_tests(DATA / "failing")
    out = json.loads(render_json(report))
    assert out["passed"] == 1 and out["failed"] == 1
    assert isinstance(report, TestReport)


@pytest.mark.parametrize("want, have, equal", [
    (1500, 1500.0, True),
    (1, True, False),
    (True, 1, False),
    (True, True, True),
    ("1", 1, False),
    ({"a": [1, 2.0]}, {"a": [1.0, 2]}, True),
    ({"a": 1}, {"a": 1, "b": 2}, False),
    ([1], [1, 2], False),
    (None, None, True),
    (None, 0, False),
])
def test_same_value(want: object, have: object, equal: bool) -> None:
    assert same_value(want, have) is equal


# -- tests that cannot lie -------------------------------------------------------------------

ERRORING = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: sql}
spec:
  match: {tools: [run_sql]}
  rules:
    - name: long-timeout
      when: 'args.timeout_s > 300'
      action: warn
    - name: drop
      when: 'args.query.contains("drop")'
      action: deny
---
apiVersion: guardrails/v1
kind: PolicyTest
metadata: {name: sql-tests}
spec:
  cases:
    - name: no timeout given
      call: {tool: run_sql, args: {query: select 1}}
      expect: {effect: deny}
"""


def test_a_rule_that_fired_only_because_it_errored_is_not_covered(tmp_path: Path) -> None:
    """The issue's eighth mistake: 100% coverage while the rule denies every call."""
    path = write(tmp_path / "sql.yaml", ERRORING.replace(
        "expect: {effect: deny}", "expect: {effect: deny, errors: 1}"))
    report = run_tests(path)
    assert report.passed  # the case says it expects the error: it passes...
    [cov] = report.coverage
    assert set(cov.unfired_rules) == {"long-timeout", "drop"}  # ...but covers nothing
    text = render_text(report, coverage=True)
    assert "rule long-timeout" in text and "rule drop" in text


def test_an_unexpected_evaluation_error_fails_the_case_and_is_shown(tmp_path: Path) -> None:
    report = run_tests(write(tmp_path / "sql.yaml", ERRORING))
    [failed] = report.failures
    [m] = failed.mismatches
    assert (m.field, m.expected, m.actual) == ("errors", 0, 1)
    assert "sql/rules.long-timeout: no such key: timeout_s" in m.note, m.note
    text = render_text(report)
    assert "unexpected evaluation error: sql/rules.long-timeout" in text
    assert json.loads(render_json(report))["results"][0]["mismatches"][0]["note"] == m.note


def test_expect_rules_naming_no_rule_fails_with_a_suggestion(tmp_path: Path) -> None:
    text = ERRORING.replace("args.timeout_s > 300", "has(args.timeout_s) && args.timeout_s > 300")
    text = text.replace("args: {query: select 1}}", "args: {query: drop t}}").replace(
        "expect: {effect: deny}", "expect: {effect: deny, rules: [sql/drop, sql/dorp]}")
    report = run_tests(write(tmp_path / "sql.yaml", text))
    [failed] = report.failures
    notes = [m.note for m in failed.mismatches if m.note]
    assert "no such rule in the policies under test; did you mean sql/drop?" in notes


def test_cases_accept_now(tmp_path: Path) -> None:
    text = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: hours}
spec:
  rules:
    - name: night
      when: 'now.getHours() < 6'
      action: deny
---
apiVersion: guardrails/v1
kind: PolicyTest
metadata: {name: hours-tests}
spec:
  cases:
    - name: at night
      call: {tool: t, now: 2026-01-31T03:00:00Z}
      expect: {effect: deny, rules: [hours/night]}
    - name: by day
      call: {tool: t, now: "2026-01-31T10:00:00+00:00"}
      expect: {effect: allow, rules: []}
"""
    report = run_tests(write(tmp_path / "h.yaml", text))
    assert report.passed, render_text(report)
    bad = text.replace("now: 2026-01-31T03:00:00Z", "now: 2026-01-31")
    with pytest.raises(PolicyError) as info:
        run_tests(write(tmp_path / "bad.yaml", bad))
    [p] = info.value.errors
    assert p.message == ("spec.cases[0].call.now: '2026-01-31' is not an RFC 3339 timestamp "
                         "with a time zone (2026-01-31T09:00:00Z)")
