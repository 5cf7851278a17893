"""Median microseconds per evaluation: generated code vs closures vs plain Python vs cel-python.

Run: .venv/bin/python benchmarks/expr_bench.py [--quick]
Prints, in one run: one row per typical rule expression, one row per rule of
benchmarks/engine_policies.yaml (the 20-rule set of benchmarks/run.py), the ratios, and
the load-time cost per expression split into parse, closure compile (checks and constant
folding), code generation and Python's compile().
"""

from __future__ import annotations

import datetime
import functools
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from guardrails.expr import CelError, codegen, compile_expression
from guardrails.expr.checker import check
from guardrails.expr.closures import closure_program
from guardrails.expr.limits import DEFAULT_LIMITS
from guardrails.expr.parser import parse

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


ENGINE_BINDINGS: dict[str, Any] = {
    "tool": {"name": "send_money", "description": "pay"},
    "args": {"recipient": "GB12ABCD", "amount": "1,500.00", "currency": "EUR",
             "memo": "rent for November", "reference": "INV-2026-11"},
    "principal": {"tenant": "acme", "roles": ["payments"]},
    "history": [{"tool": "read_inbox", "args": {}, "effect": "allow"}],
    "request": {"text": "please pay GB12ABCD my rent"},
    "now": datetime.datetime(2026, 1, 7, 12, 0, tzinfo=datetime.UTC),
    "variables": {"amount": 1500.0},
}  # fmt: skip


def engine_cases() -> list[tuple[str, Callable[[dict[str, Any]], Any]]]:
    """The rules of engine_policies.yaml, each with the same check in plain Python."""
    import re

    doc = yaml.safe_load((Path(__file__).parent / "engine_policies.yaml").read_text())
    ENGINE_BINDINGS["params"] = doc["spec"]["params"]
    rx = re.compile("^[A-Z]{2}[0-9]{2}[A-Z0-9]{4,30}$")
    plain: list[Callable[[dict[str, Any]], Any]] = [
        lambda b: b["variables"]["amount"] > float(b["params"]["max_amount"]),
        lambda b: b["variables"]["amount"] > float(b["params"]["approval_amount"]),
        lambda b: b["variables"]["amount"] <= 0.0,
        lambda b: b["args"]["recipient"] not in b["params"]["known_ibans"],
        lambda b: b["args"]["recipient"][0:2] in b["params"]["blocked_countries"],
        lambda b: b["args"]["currency"] not in b["params"]["currencies"],
        lambda b: len(b["args"]["memo"]) > 140,
        lambda b: "http://" in b["args"]["memo"] or "https://" in b["args"]["memo"],
        lambda b: (b["args"]["recipient"] not in b["request"]["text"]
                   and b["variables"]["amount"] > 100.0),
        lambda b: "payments" not in b["principal"]["roles"],
        lambda b: b["principal"]["tenant"] != "acme",
        lambda b: len([h for h in b["history"] if h["tool"] == "send_money"]) > 3,
        lambda b: b["variables"]["amount"] == 9999.0,
        lambda b: rx.match(b["args"]["recipient"]) is None,
        lambda b: False,
        lambda b: "reference" not in b["args"],
        lambda b: "reference" in b["args"] and len(b["args"]["reference"]) > 35,
        lambda b: any(h["tool"] == "send_money" and h["args"]["recipient"] == b["args"]["recipient"]
                      for h in b["history"]),
        lambda b: type(b["args"]["amount"]) is int and b["args"]["amount"] > 5000,
        lambda b: "urgent" in b["args"]["memo"].lower(),
    ]  # fmt: skip
    rules = [r["when"] for r in doc["spec"]["rules"]]
    assert len(rules) == len(plain)
    return list(zip(rules, plain, strict=True))


def median_us(fn: Callable[[], Any], repeat: int, number: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - start) / number * 1e6)
    return statistics.median(samples)


def run_set(
    title: str,
    cases: list[tuple[str, Callable[[dict[str, Any]], Any]]],
    bindings: dict[str, Any],
    repeat: int,
    number: int,
    slow_number: int,
) -> None:
    declared = tuple(bindings)
    print(f"\n{title}")
    print(
        f"{'expression':52} {'codegen':>8} {'closure':>8} {'python':>7} {'celpy':>8} "
        f"{'cg/py':>6} {'cl/py':>6}"
    )
    totals = [0.0, 0.0, 0.0]
    for source, plain in cases:
        generated = compile_expression(source, declared=declared)
        assert isinstance(generated, codegen.GeneratedProgram), source
        closures = compile_expression(source, declared=declared, backend="closures")
        reference = compile_expression(source, declared=declared, backend="interpreter")
        expected = generated.evaluate(bindings)
        assert expected == plain(bindings) == closures.evaluate(bindings), source
        t_g = median_us(functools.partial(generated.evaluate, bindings), repeat, number)
        t_c = median_us(functools.partial(closures.evaluate, bindings), repeat, number)
        t_py = median_us(functools.partial(plain, bindings), repeat, number)
        try:
            reference.evaluate(bindings)
        except CelError:  # a cel-python deviation (e.g. int > double has no overload)
            t_cp = math.nan
        else:
            t_cp = median_us(functools.partial(reference.evaluate, bindings), repeat, slow_number)
        for i, t in enumerate((t_g, t_c, t_py)):
            totals[i] += t
        label = source if len(source) <= 52 else source[:49] + "..."
        print(
            f"{label:52} {t_g:8.2f} {t_c:8.2f} {t_py:7.2f} {t_cp:8.1f} "
            f"{t_g / t_py:6.1f} {t_c / t_py:6.1f}"
        )
    n = len(cases)
    g, c, py = (t / n for t in totals)
    print(
        f"{'mean per expression':52} {g:8.2f} {c:8.2f} {py:7.2f} {'':8} {g / py:6.1f} {c / py:6.1f}"
    )


def load_costs(sources: list[str], declared: tuple[str, ...], number: int) -> None:
    """Microseconds per expression for each load step (the factory cache is bypassed)."""
    limits = DEFAULT_LIMITS

    def timed(step: Callable[[str], Any]) -> float:
        start = time.perf_counter()
        for _ in range(number):
            for s in sources:
                step(s)
        return (time.perf_counter() - start) / number / len(sources) * 1e6

    trees = {s: parse(s, limits) for s in sources}
    checked = {s: check(trees[s], source=s, declared=declared, limits=limits) for s in sources}
    generated = {s: codegen.generate_source(checked[s])[0] for s in sources}
    t_parse = timed(lambda s: parse(s, limits))
    t_check = timed(lambda s: check(trees[s], source=s, declared=declared, limits=limits))
    t_closure = timed(lambda s: closure_program(checked[s]))
    t_gen = timed(lambda s: codegen.generate_source(checked[s]))
    t_compile = timed(lambda s: compile(generated[s], "<cel>", "exec"))
    size = statistics.mean(len(generated[s]) for s in sources)
    print(
        f"load, µs per expression: parse {t_parse:.1f}, check {t_check:.1f}, "
        f"closures {t_closure:.1f}, "
        f"codegen {t_gen:.1f}, Python compile() {t_compile:.1f} (uncached; generated source "
        f"{size:.0f} chars on average; compile() is cached by generated text, which holds "
        "no literals)"
    )


def main(argv: list[str] | None = None) -> int:
    quick = "--quick" in (argv if argv is not None else sys.argv[1:])
    repeat, number, slow_number = (3, 500, 5) if quick else (7, 5000, 50)
    run_set("typical rule expressions", CASES, BINDINGS, repeat, number, slow_number)
    engine = engine_cases()
    run_set(
        "benchmarks/engine_policies.yaml rules",
        engine,
        ENGINE_BINDINGS,
        repeat,
        number,
        slow_number,
    )
    print()
    load_costs(
        [s for s, _ in CASES + engine],
        tuple(sorted(set(BINDINGS) | set(ENGINE_BINDINGS))),
        3 if quick else 20,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
