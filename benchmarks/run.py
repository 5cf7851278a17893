"""Engine benchmarks, reported as medians and ratios measured in one run.

    .venv/bin/python benchmarks/run.py

- evaluate(): a realistic 20-rule policy set (engine_policies.yaml), median µs per call
  and per rule, and the ratio to the same logic written as plain Python;
- the same with the cel-python interpreter backend (the reference);
- load + compile of 1,000 generated policies (10 rules each: 10,000 rules).
"""

from __future__ import annotations

import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import guardrails

HERE = Path(__file__).parent
ARGS = {"recipient": "GB12ABCD", "amount": "1,500.00", "currency": "EUR",
        "memo": "rent for November", "reference": "INV-2026-11"}
PRINCIPAL = {"tenant": "acme", "roles": ["payments"]}
HISTORY = [{"tool": "read_inbox", "args": {}, "effect": "allow"}]
REQUEST = "please pay GB12ABCD my rent"


def median_us(fn: Callable[[], Any], *, rounds: int = 7, number: int = 200) -> float:
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - t0) / number * 1e6)
    return statistics.median(samples)


_RECIPIENT = re.compile("^[A-Z]{2}[0-9]{2}[A-Z0-9]{4,30}$")


def plain_python(args: dict[str, Any], principal: dict[str, Any],
                 history: list[dict[str, Any]], request: str) -> str:
    """The 20 rules of engine_policies.yaml written by hand (same work, no engine)."""
    p = {"max_amount": 10000, "approval_amount": 1000,
         "known_ibans": ["GB12ABCD", "DE89EFGH", "FR76IJKL"],
         "blocked_countries": ["KP", "IR", "SY"], "currencies": ["EUR", "GBP", "USD"]}
    args = dict(args)
    if isinstance(args["amount"], str):
        args["amount"] = float(args["amount"].replace(",", ""))
    amount = float(args["amount"])
    fired = []
    r = args["recipient"]
    memo = args["memo"]
    checks = [
        ("over-cap", amount > p["max_amount"], "deny"),
        ("large", amount > p["approval_amount"], "require_approval"),
        ("non-positive", amount <= 0, "deny"),
        ("unknown-payee", r not in p["known_ibans"], "require_approval"),
        ("blocked-country", r[:2] in p["blocked_countries"], "halt"),
        ("currency", args["currency"] not in p["currencies"], "deny"),
        ("memo-too-long", len(memo) > 140, "deny"),
        ("memo-url", "http://" in memo or "https://" in memo, "warn"),
        ("not-from-user", r not in request and amount > 100, "require_approval"),
        ("role", "payments" not in principal["roles"], "deny"),
        ("tenant", principal["tenant"] != "acme", "deny"),
        ("repeated", len([h for h in history if h["tool"] == "send_money"]) > 3,
         "require_approval"),
        ("round-amount", amount == 9999.0, "warn"),
        ("recipient-format", not _RECIPIENT.match(r), "deny"),
        ("weekend", False, "warn"),
        ("has-reference", "reference" not in args, "warn"),
        ("reference-size", "reference" in args and len(args["reference"]) > 35, "deny"),
        ("split-payments", any(h["tool"] == "send_money" and h["args"].get("recipient") == r
                               for h in history), "warn"),
        ("amount-int", isinstance(args["amount"], int) and args["amount"] > 5000, "warn"),
        ("memo-lower", "urgent" in memo.lower(), "warn"),
    ]
    for name, hit, action in checks:
        if hit:
            fired.append((name, action))
    order = {"allow": 0, "warn": 0, "require_approval": 1, "deny": 2, "halt": 3}
    worst = max((order[a] for _, a in fired), default=0)
    return ["allow", "require_approval", "deny", "halt"][worst]


def generated_policies(n: int, rules_per_policy: int = 10) -> str:
    docs = []
    for i in range(n):
        rules = "\n".join(
            f"    - {{name: r{j}, when: 'args.amount > {j * 100 + i}.0 && "
            f"args.recipient.startsWith(\"X{j}\") || \"p{i}\" in principal.roles', "
            f"action: deny}}" for j in range(rules_per_policy))
        docs.append(
            "apiVersion: guardrails/v1\nkind: ToolPolicy\n"
            f"metadata: {{name: gen-{i}}}\nspec:\n  match: {{tools: [tool_{i % 50}]}}\n"
            f"  rules:\n{rules}\n")
    return "---\n".join(docs)


def main() -> int:
    compiled = guardrails.load(HERE / "engine_policies.yaml")
    interp = guardrails.load(HERE / "engine_policies.yaml", backend="interpreter")
    n_rules = 20

    def run(ps: guardrails.PolicySet) -> guardrails.Decision:
        return ps.evaluate("send_money", ARGS, principal=PRINCIPAL, history=HISTORY,
                           request=REQUEST)

    d = run(compiled)
    assert plain_python(ARGS, PRINCIPAL, HISTORY, REQUEST) == d.effect.value, (d, d.errors)
    assert not d.errors, d.errors
    engine = median_us(lambda: run(compiled))
    plain = median_us(lambda: plain_python(ARGS, PRINCIPAL, HISTORY, REQUEST))
    reference = median_us(lambda: run(interp), rounds=3, number=5)
    print(f"evaluate(), 20-rule policy set (compiled backend): {engine:8.1f} µs/call "
          f"{engine / n_rules:6.2f} µs/rule")
    print(f"same logic as plain Python:                        {plain:8.1f} µs/call "
          f"{plain / n_rules:6.2f} µs/rule")
    print(f"ratio engine / plain Python:                       {engine / plain:8.1f}x")
    print(f"cel-python interpreter backend:                    {reference:8.1f} µs/call "
          f"({reference / engine:.0f}x the compiled backend)")

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "gen.yaml"
        path.write_text(generated_policies(1000))
        t0 = time.perf_counter()
        ps = guardrails.load(path)
        elapsed = time.perf_counter() - t0
    n = sum(len(p.rules) for p in ps.policies)
    print(f"load + compile 1,000 policies ({n:,} rules):          {elapsed:8.2f} s")
    t0 = time.perf_counter()
    ps.evaluate("tool_7", {"amount": 5, "recipient": "Y"}, principal={"roles": []})
    print(f"first evaluate after loading them (200 non-matching skipped by index): "
          f"{(time.perf_counter() - t0) * 1e6:.0f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
