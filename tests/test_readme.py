"""The README's example stays true: its policy loads and decides as the README says."""

from __future__ import annotations

import re
from pathlib import Path

import guardrails

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_policy_and_evaluate_example(tmp_path: Path) -> None:
    text = README.read_text()
    policy = re.search(r"```yaml\n# policies/payments.yaml\n(.*?)```", text, re.S)
    assert policy is not None
    (tmp_path / "payments.yaml").write_text(policy.group(1))
    policies = guardrails.load(tmp_path)
    decision = policies.evaluate(tool="send_money",
                                 args={"recipient": "GB12ABCD", "amount": "1,500.00"})
    assert decision.effect == "require_approval"
    assert decision.arguments["amount"] == 1500.0
    assert policies.evaluate(tool="send_money",
                             args={"recipient": "XX99", "amount": 5}).effect == "deny"
    assert "make demo" in text and "make test" in text
