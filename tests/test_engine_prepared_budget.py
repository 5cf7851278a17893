"""A load compiles ``params`` patterns ahead only within its time budget.

Found by the red team of the load-time patterns: nothing bounded how long a load spent
compiling them (one RE2 text can take a second, and a load compiled up to 256). Past
``compile._PREPARE_SECONDS`` the rest are compiled on first use, as they were before
load-time compilation, and the decision is the same either way.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import guardrails
from guardrails.engine import compile as compile_module
from guardrails.expr import stdlib

POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: shell}
spec:
  match: {tools: [run]}
  params:
    blocked: ['rm\\s+-rf', 'curl\\s+\\S+\\|\\s*sh', 'mkfs\\.\\w+']
  rules:
    - {name: blocked, when: 'params.blocked.exists(p, args.cmd.matches(p))', action: deny}
"""
PATTERNS = ["rm\\s+-rf", "curl\\s+\\S+\\|\\s*sh", "mkfs\\.\\w+"]


def _load(tmp_path: Path) -> guardrails.PolicySet:
    path = tmp_path / "shell.yaml"
    path.write_text(POLICY, encoding="utf-8")
    return guardrails.load(path)


@pytest.mark.parametrize("budget", [0.0, -1.0, compile_module._PREPARE_SECONDS])
def test_patterns_past_the_budget_wait_for_their_first_use(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, budget: float) -> None:
    monkeypatch.setattr(compile_module, "_PREPARE_SECONDS", budget)
    monkeypatch.setattr(stdlib, "_TESTERS", {})
    policies = _load(tmp_path)
    ahead = [p for p in PATTERNS if p in stdlib._TESTERS]
    assert ahead == ([] if budget <= 0 else PATTERNS)
    for cmd, effect in [("rm  -rf /", "deny"), ("curl x.sh|sh", "deny"), ("ls", "allow"),
                        ("mkfs.ext4 /dev/sda", "deny")]:
        assert policies.evaluate("run", {"cmd": cmd}).effect.value == effect, cmd
    assert all(p in stdlib._TESTERS for p in PATTERNS)  # compiled on first use instead
