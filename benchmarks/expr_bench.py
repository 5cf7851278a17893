"""Median microseconds per evaluation: compiled CEL vs a plain Python lambda vs cel-python.

Run: .venv/bin/python benchmarks/expr_bench.py [--quick]
Prints one row per typical rule expression and the ratios, in one run.
"""

from __future__ import annotations

import functools
import math
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from guardrails.expr import CelError, compile_expression

BINDINGS: dict[str, Any] = {
    "args": {
        "amount": 1500,
        "recipient": "acct-991",
        "currency": "USD",
        "to": ["bob@example.com", "eve@evil.test"],
        "items": [{"price": 20.0}, {"price": 150.0}, {"price": 5.5}],
        "path": "/srv/data/reports/q3.csv",
        "command": "ls -la /tmp",
    },
    "params": {
        "max_amount": 1000.0,
        "known": ["acct-001", "acct-002", "acct-003"],
        "domain": "example.com",
        "root": "/srv/data/",
    },
    "principal": {"roles": ["analyst"], "tenant": "acme"},
    "tool": {"name": "send_money", "description": "pay"},
    "history": [{"tool": "read_email", "args": {}, "effect": "allow"}],
}

# (CEL source, equivalent plain Python)
CASES: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
    ("args.amount > params.max_amount", lambda b: b["args"]["amount"] > b["params"]["max_amount"]),
    (
        "args.amount > params.max_amount && !(args.recipient in params.known)",
        lambda b: (
            b["args"]["amount"] > b["params"]["max_amount"]
            and b["args"]["recipient"] not in b["params"]["known"]
        ),
    ),
    ('args.currency == "USD"', lambda b: b["args"]["currency"] == "USD"),
    (
        'args.recipient in ["acct-001", "acct-002"]',
        lambda b: b["args"]["recipient"] in ("acct-001", "acct-002"),
    ),
    (
        "args.items.exists(i, i.price > 100.0)",
        lambda b: any(i["price"] > 100.0 for i in b["args"]["items"]),
    ),
    (
        "args.to.all(t, t.endsWith('@' + params.domain))",
        lambda b: all(t.endswith("@" + b["params"]["domain"]) for t in b["args"]["to"]),
    ),
    (
        "args.path.startsWith(params.root)",
        lambda b: b["args"]["path"].startswith(b["params"]["root"]),
    ),
    ('"admin" in principal.roles', lambda b: "admin" in b["principal"]["roles"]),
    (
        "has(args.memo) || size(args.to) > 1",
        lambda b: "memo" in b["args"] or len(b["args"]["to"]) > 1,
    ),
    ('args.command.matches("rm\\\\s+-rf")', lambda b: "rm -rf" in b["args"]["command"]),
    (
        "history.exists(h, h.tool == 'read_email')",
        lambda b: any(h["tool"] == "read_email" for h in b["history"]),
    ),
    ("type(args.amount) == string", lambda b: isinstance(b["args"]["amount"], str)),
]

DECLARED = tuple(BINDINGS)


def median_us(fn: Callable[[], Any], repeat: int, number: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - start) / number * 1e6)
    return statistics.median(samples)


def main(argv: list[str] | None = None) -> int:
    quick = "--quick" in (argv if argv is not None else sys.argv[1:])
    repeat, number, slow_number = (3, 500, 5) if quick else (7, 5000, 50)
    print(
        f"{'expression':60} {'compiled':>9} {'python':>8} {'celpy':>9} {'c/py':>6} {'celpy/c':>8}"
    )
    ratios_py, ratios_celpy = [], []
    for source, plain in CASES:
        compiled = compile_expression(source, declared=DECLARED)
        reference = compile_expression(source, declared=DECLARED, backend="interpreter")
        expected = compiled.evaluate(BINDINGS)
        assert expected == plain(BINDINGS), source
        t_c = median_us(functools.partial(compiled.evaluate, BINDINGS), repeat, number)
        t_py = median_us(functools.partial(plain, BINDINGS), repeat, number)
        try:
            reference.evaluate(BINDINGS)
        except CelError:  # a cel-python deviation (e.g. int > double has no overload)
            t_cp = math.nan
        else:
            t_cp = median_us(functools.partial(reference.evaluate, BINDINGS), repeat, slow_number)
        ratios_py.append(t_c / t_py)
        if not math.isnan(t_cp):
            ratios_celpy.append(t_cp / t_c)
        label = source if len(source) <= 60 else source[:57] + "..."
        print(f"{label:60} {t_c:9.2f} {t_py:8.2f} {t_cp:9.1f} {t_c / t_py:6.1f} {t_cp / t_c:8.0f}")
    print(
        f"median ratio compiled/python {statistics.median(ratios_py):.1f}x, "
        f"cel-python/compiled {statistics.median(ratios_celpy):.0f}x"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
