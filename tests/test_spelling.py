"""The one near-miss lookup behind every "did you mean": its rule, that nothing else in the
package computes a near miss, and the slips every hint now catches alike."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import guardrails
from guardrails.cli.main import main as cli_main
from guardrails.expr.spelling import closest

SRC = Path(__file__).resolve().parents[1] / "src" / "guardrails"


def test_a_known_name_is_itself() -> None:
    assert closest("amount", ["Amount", "amount"]) == "amount"


@pytest.mark.parametrize(("name", "known", "expected"), [
    ("Amount", ["amount", "recipient"], "amount"),
    ("SEND_MONEY", ["send_money"], "send_money"),  # no similarity ratio finds this one
    ("sendMoney", ["send_money", "send_email"], "send_money"),
    ("send-money", ["send_money"], "send_money"),
    ("ID", ["id", "ids"], "id"),
])
def test_case_and_separators_are_slips_found_before_any_spelling(
        name: str, known: list[str], expected: str) -> None:
    assert closest(name, known) == expected


def test_a_close_spelling_is_found_at_the_cutoff_and_not_below() -> None:
    assert closest("send_mony", ["send_money", "delete_file"]) == "send_money"
    assert closest("recipent", ["recipient", "amount"]) == "recipient"
    assert closest("xyz", ["amount", "recipient"]) is None
    assert closest("send_mail", ["send_email"], cutoff=0.8) == "send_email"
    assert closest("send", ["send_email"]) is None
    assert closest("send", ["send_email"], cutoff=0.5) == "send_email"


def test_nothing_known_finds_nothing() -> None:
    assert closest("amount", []) is None
    assert closest("amount", iter(())) is None


def test_the_known_names_may_be_any_iterable() -> None:
    assert closest("amout", (k for k in ["amount", "recipient"])) == "amount"
    assert closest("amout", {"amount": 1, "recipient": 2}) == "amount"


def test_no_module_but_spelling_computes_a_near_miss() -> None:
    """One source of truth: a second copy of the rule would drift (it had, five times,
    with three cutoffs and two orders of the case and spelling steps)."""
    offenders = [str(p.relative_to(SRC)) for p in SRC.rglob("*.py")
                 if p.name != "spelling.py"
                 and re.search(r"get_close_matches|SequenceMatcher|\.lower\(\): ",
                               p.read_text(encoding="utf-8"))]
    assert offenders == []


# --- the slips each hint now catches (before, some hints did and some did not) -----------


def _policy(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(body, encoding="utf-8")
    return path


PAYMENTS = """\
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: payments}
spec:
  match: {tools: [send_money]}
  rules:
    - name: big
      when: args.amount > 100
      action: deny
"""


def test_eval_hints_a_tool_written_in_capitals(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = _policy(tmp_path, PAYMENTS)
    assert cli_main(["eval", str(path), "--tool", "SEND_MONEY"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("hint: no policy names tool 'SEND_MONEY'"), err
    assert "did you mean 'send_money'?" in err


def test_eval_does_not_hint_a_tool_far_from_every_name(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _policy(tmp_path, PAYMENTS)
    assert cli_main(["eval", str(path), "--tool", "read_calendar"]) == 0
    err = capsys.readouterr().err
    assert "did you mean" not in err
    assert "(policies match: send_money)" in err


def test_a_field_written_with_another_separator_is_suggested(tmp_path: Path) -> None:
    path = _policy(tmp_path, PAYMENTS.replace("action: deny", "action: deny\n      "
                                                               "message-expression: x"))
    with pytest.raises(guardrails.PolicyError) as e:
        guardrails.load(path)
    assert "did you mean 'messageExpression'?" in str(e.value)


def test_an_expression_function_written_in_snake_case_is_suggested(tmp_path: Path) -> None:
    path = _policy(tmp_path, PAYMENTS.replace("args.amount > 100",
                                              "args.recipient.starts_with('X')"))
    with pytest.raises(guardrails.PolicyError) as e:
        guardrails.load(path)
    assert "did you mean 'startsWith'?" in str(e.value)


def test_an_expected_rule_in_capitals_is_suggested(tmp_path: Path) -> None:
    from guardrails.testing import Runner

    _policy(tmp_path, PAYMENTS)
    (tmp_path / "p.tests.yaml").write_text("""\
apiVersion: guardrails/v1
kind: PolicyTest
metadata: {name: payments-tests}
spec:
  cases:
    - name: big
      call: {tool: send_money, args: {amount: 500}}
      expect: {effect: deny, rules: [PAYMENTS/BIG]}
""", encoding="utf-8")
    report = Runner().run([str(tmp_path)])
    assert not report.passed
    notes = [m.note for r in report.results for m in r.mismatches]
    assert any("did you mean payments/big?" in n for n in notes), notes
