"""Side by side with peers, each in its own process, as ratios to plain Python measured in
that same process (absolute times move with the machine's load; ratios much less).

    .venv/bin/python benchmarks/peers.py        # every peer that is installed
    make bench                                  # installs the ``bench`` extra first

Rows:

- "20 checks": the 20 rules of benchmarks/engine_policies.yaml (the same checks that
  benchmarks/run.py writes in plain Python). cel-guardrails makes a whole decision
  (inputs bounded, repair, variables, decision record); the CEL peers compile the 20
  expressions once and evaluate them, converting the inputs as each requires (an
  expression a peer cannot compile, such as an extension function it lacks, is left out
  of both its time and its plain-Python reference); the Agent Governance Toolkit's
  ``PolicyEvaluator`` gets 20 field conditions of its own schema, none matching.
- "1 check": one rule, ``args.amount > 5000.0``, against the plain check.
- "agent run": a guarded agent run ÷ the unguarded run (benchmarks/agent_bench.py's agent:
  offline scripted model, one allowed ``send_money`` call), for cel-guardrails and for
  agent-framework-acgs with its default constitution.

A peer that is not installed is reported as skipped, never guessed.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for p in (str(HERE), str(ROOT)):
    if p not in sys.path:
        sys.path.insert(0, p)

PEERS = ["cel-guardrails", "cel-expr-python", "common-expression-language", "cel-python",
         "agt-policy-evaluator", "agent-framework-acgs"]  # fmt: skip


def median_us(fn: Callable[[], Any], *, rounds: int = 7, number: int = 300) -> float:
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - t0) / number * 1e6)
    return statistics.median(samples)


def ratio(fast: Callable[[], Any], slow: Callable[[], Any], number: int = 300) -> float:
    """``slow`` ÷ ``fast``, medians of interleaved rounds."""
    a: list[float] = []
    b: list[float] = []
    for _ in range(7):
        a.append(median_us(fast, rounds=1, number=number))
        b.append(median_us(slow, rounds=1, number=number))
    return statistics.median(b) / statistics.median(a)


def _cel_cases() -> tuple[list[tuple[str, Callable[[dict[str, Any]], Any]]], dict[str, Any]]:
    import expr_bench

    cases = expr_bench.engine_cases()
    return cases, dict(expr_bench.ENGINE_BINDINGS)


def _cel_peer(compile_one: Callable[[str], Callable[[dict[str, Any]], Any]]) -> dict[str, Any]:
    cases, bindings = _cel_cases()
    compiled: list[Callable[[dict[str, Any]], Any]] = []
    plain: list[Callable[[dict[str, Any]], Any]] = []
    for source, check in cases:
        try:
            run = compile_one(source)
            if bool(run(bindings)) != bool(check(bindings)):
                continue  # a different answer is not the same work
        except Exception:
            continue
        compiled.append(run)
        plain.append(check)

    def peer() -> None:
        for run in compiled:
            run(bindings)

    def reference() -> None:
        for check in plain:
            check(bindings)

    one = compile_one("args.amount_n > 5000.0")
    one_bindings = {"args": {"amount_n": 1500.0}}
    return {
        "20 checks": ratio(reference, peer),
        "checks compiled": f"{len(compiled)}/{len(cases)}",
        "1 check": ratio(lambda: one_bindings["args"]["amount_n"] > 5000.0,
                         lambda: one(one_bindings), number=3000),
    }


def peer_cel_expr_python() -> dict[str, Any]:
    from cel_expr_python import cel

    names = ["tool", "args", "principal", "history", "request", "now", "variables", "params"]
    env = cel.NewEnv(variables=dict.fromkeys(names, cel.Type.DYN))

    def compile_one(source: str) -> Callable[[dict[str, Any]], Any]:
        expression = env.compile(source)
        return lambda b: expression.eval(data=b).plain_value()

    return _cel_peer(compile_one)


def peer_common_expression_language() -> dict[str, Any]:
    import cel

    def compile_one(source: str) -> Callable[[dict[str, Any]], Any]:
        program = cel.compile(source)
        return lambda b: program.execute(b)

    return _cel_peer(compile_one)


def peer_cel_python() -> dict[str, Any]:
    import celpy

    env = celpy.Environment()

    def compile_one(source: str) -> Callable[[dict[str, Any]], Any]:
        program = env.program(env.compile(source))
        return lambda b: program.evaluate(celpy.json_to_cel(b))

    return _cel_peer(compile_one)


def peer_cel_guardrails() -> dict[str, Any]:
    import tempfile

    import run

    import guardrails

    ps = guardrails.load(HERE / "engine_policies.yaml")

    def decide() -> None:
        ps.evaluate("send_money", run.ARGS, principal=run.PRINCIPAL, history=run.HISTORY,
                    request=run.REQUEST)

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "one.yaml"
        path.write_text("apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: one}\n"
                        "spec:\n  match: {tools: [pay]}\n  rules:\n"
                        "    - {name: big, when: 'args.amount > 5000.0', action: deny}\n")
        one = guardrails.load(path)
    one_args = {"amount": 1500.0}
    out = {
        "20 checks": ratio(lambda: run.plain_python(run.ARGS, run.PRINCIPAL, run.HISTORY,
                                                    run.REQUEST), decide),
        "checks compiled": "20/20",
        "1 check": ratio(lambda: "deny" if one_args["amount"] > 5000.0 else "allow",
                         lambda: one.evaluate("pay", one_args), number=3000),
    }
    out["agent run"] = _agent_ratio("guardrails")
    return out


def peer_agt_policy_evaluator() -> dict[str, Any]:
    from agent_os.policies import (
        PolicyAction,
        PolicyCondition,
        PolicyDocument,
        PolicyEvaluator,
        PolicyOperator,
        PolicyRule,
    )

    context = {"tool_name": "send_money", "amount": 1500.0, "currency": "EUR",
               "recipient": "GB12ABCD", "memo": "rent for November", "tenant": "acme"}
    conditions = [
        ("amount", PolicyOperator.GT, 10000.0), ("amount", PolicyOperator.LT, 0.0),
        ("amount", PolicyOperator.EQ, 9999.0), ("currency", PolicyOperator.NOT_IN,
                                                ["EUR", "GBP", "USD"]),
        ("recipient", PolicyOperator.IN, ["KP01", "IR02", "SY03"]),
        ("recipient", PolicyOperator.MATCHES, "^XX"), ("memo", PolicyOperator.CONTAINS, "http://"),
        ("memo", PolicyOperator.CONTAINS, "https://"), ("memo", PolicyOperator.CONTAINS, "urgent"),
        ("tenant", PolicyOperator.NE, "acme"), ("tool_name", PolicyOperator.EQ, "delete_all"),
        ("amount", PolicyOperator.GTE, 20000.0), ("amount", PolicyOperator.LTE, -1.0),
        ("currency", PolicyOperator.EQ, "XXX"), ("recipient", PolicyOperator.EQ, "DE89EFGH"),
        ("memo", PolicyOperator.MATCHES, "^BTC"), ("tenant", PolicyOperator.IN, ["evil"]),
        ("tool_name", PolicyOperator.IN, ["rm", "format"]), ("amount", PolicyOperator.EQ, 1.0),
        ("currency", PolicyOperator.IN, ["BTC", "ETH"]),
    ]  # fmt: skip
    rules = [PolicyRule(name=f"r{i}", condition=PolicyCondition(field=f, operator=o, value=v),
                        action=PolicyAction.DENY) for i, (f, o, v) in enumerate(conditions)]
    evaluator = PolicyEvaluator([PolicyDocument(name="bench", rules=rules)])
    assert evaluator.evaluate(context).allowed
    import re

    start = re.compile("^XX")
    btc = re.compile("^BTC")

    def plain() -> bool:
        c = context
        return not (c["amount"] > 10000.0 or c["amount"] < 0.0 or c["amount"] == 9999.0
                    or c["currency"] not in ("EUR", "GBP", "USD")
                    or c["recipient"] in ("KP01", "IR02", "SY03") or start.search(c["recipient"])
                    or "http://" in c["memo"] or "https://" in c["memo"] or "urgent" in c["memo"]
                    or c["tenant"] != "acme" or c["tool_name"] == "delete_all"
                    or c["amount"] >= 20000.0 or c["amount"] <= -1.0 or c["currency"] == "XXX"
                    or c["recipient"] == "DE89EFGH" or btc.search(c["memo"])
                    or c["tenant"] in ("evil",) or c["tool_name"] in ("rm", "format")
                    or c["amount"] == 1.0 or c["currency"] in ("BTC", "ETH"))

    one = PolicyEvaluator([PolicyDocument(name="one", rules=rules[:1])])
    return {
        "20 checks": ratio(plain, lambda: evaluator.evaluate(context)),
        "checks compiled": "20/20 (its own schema)",
        "1 check": ratio(lambda: context["amount"] > 10000.0, lambda: one.evaluate(context),
                         number=3000),
    }


def peer_agent_framework_acgs() -> dict[str, Any]:
    return {"agent run": _agent_ratio("acgs")}


def _agent_ratio(kind: str) -> float:
    """Median guarded run ÷ median unguarded run, interleaved (benchmarks/agent_bench.py)."""
    import tempfile

    import agent_bench

    async def go() -> float:
        plain_agent = agent_bench._agent([])
        if kind == "acgs":
            from agent_framework_acgs import ACGSGuard

            guard = ACGSGuard()
            guarded = agent_bench._agent(list(guard.middleware))
        else:
            with tempfile.TemporaryDirectory() as tmp:
                policies, _ = agent_bench._load(Path(tmp))
            from guardrails.agent_framework import guard as make_guard

            guarded = agent_bench._agent(
                list(make_guard(policies, principal=agent_bench.PRINCIPAL)))
        variants = {"unguarded": plain_agent, "guarded": guarded}
        samples = await agent_bench._bench(variants, 150, 20)
        return statistics.median(samples["guarded"]) / statistics.median(samples["unguarded"])

    return asyncio.run(go())


def run_peer(name: str) -> dict[str, Any]:
    fn = globals()["peer_" + name.replace("-", "_")]
    try:
        return {"peer": name, **fn()}
    except ImportError as e:
        return {"peer": name, "skipped": f"not installed ({e.name or e})"}


def main(argv: list[str]) -> int:
    if argv[:1] == ["--peer"]:
        print(json.dumps(run_peer(argv[1])))
        return 0
    rows = []
    for name in PEERS:
        done = subprocess.run([sys.executable, __file__, "--peer", name], capture_output=True,
                              text=True, timeout=900, check=False)
        try:
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        except (IndexError, json.JSONDecodeError):
            rows.append({"peer": name, "skipped": "failed: " + done.stderr.strip()[-200:]})
    print("\nPeers, each in its own process; ratios to plain Python doing the same checks")
    print(f"{'peer':28} {'20 checks':>10} {'compiled':>24} {'1 check':>9} {'agent run':>10}")

    def cell(row: dict[str, Any], key: str) -> str:
        v = row.get(key)
        return "—" if v is None else (f"{v:.2f}x" if isinstance(v, float) else str(v))

    for row in rows:
        if "skipped" in row:
            print(f"{row['peer']:28} skipped: {row['skipped']}")
            continue
        print(f"{row['peer']:28} {cell(row, '20 checks'):>10} {cell(row, 'checks compiled'):>24} "
              f"{cell(row, '1 check'):>9} {cell(row, 'agent run'):>10}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
