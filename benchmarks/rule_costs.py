"""What each rule of benchmarks/engine_policies.yaml costs inside a fused function.

    .venv/bin/python benchmarks/rule_costs.py            # this checkout
    PYTHONPATH=/other/checkout/src .venv/bin/python benchmarks/rule_costs.py

Each rule's own fused function (``codegen.fused_rules`` of that rule alone) runs on the
benchmark's call (arguments as repaired, the variable fresh each time), minus the fused
function of the constant rule ``weekend`` (the call, the names read, the meter); and all
20 in one function. CPU time of this thread (``time.thread_time``: the wall clock of a
shared 2-core machine is noise), the fastest of 30 rounds of 300 calls, ns. Run it for
two checkouts alternately and compare (docs/performance.md, "The 20-rule decision: the
operations rules use").
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import run  # noqa: E402

import guardrails  # noqa: E402
from guardrails.expr import codegen  # noqa: E402
from guardrails.expr.lib_provenance import Request  # noqa: E402
from guardrails.expr.limits import METER, Meter  # noqa: E402
from guardrails.expr.values import Variables  # noqa: E402


def main() -> None:
    policy = guardrails.load(HERE / "engine_policies.yaml").policies[0]
    args = dict(run.ARGS)
    args["amount"] = 1500.0  # as the repair leaves it

    def bindings() -> tuple[dict[str, Any], Meter]:
        meter = Meter(3_000_000)
        b: dict[str, Any] = {
            "tool": None, "args": args, "principal": run.PRINCIPAL, "history": run.HISTORY,
            "request": Request(run.REQUEST), "now": None, METER: meter,
            "params": policy.params}
        variables = Variables(policy.variable_programs)
        variables.bindings = b
        b["variables"] = variables
        return b, meter

    programs = [r.when.program for r in policy.rules]
    alone = [codegen.fused_rules([p], [False]) for p in programs]
    together = codegen.fused_rules(programs, [False] * len(programs))
    codegen.generate_pending()

    def cost(fused: codegen.FusedRules | None) -> float:
        assert fused is not None and fused.run is not None
        fn: Callable[..., Any] = fused.run
        best = []
        for _ in range(30):
            t0 = time.thread_time()
            for _ in range(300):
                b, meter = bindings()
                fn(b, meter, 0)
            best.append((time.thread_time() - t0) / 300 * 1e9)
        return min(best)

    base = cost(alone[[r.name for r in policy.rules].index("weekend")])
    print(f"{'all 20 in one function':24s} {cost(together) - base:7.0f} ns")
    for rule, fused in zip(policy.rules, alone, strict=True):
        print(f"{rule.name:24s} {cost(fused) - base:7.0f} ns")


if __name__ == "__main__":
    main()
