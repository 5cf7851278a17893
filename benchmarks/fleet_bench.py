"""What fleet operations cost per call, as ratios measured in one run (issue 15).

    .venv/bin/python benchmarks/fleet_bench.py [--runs 300] [--calls 2000]

1. Hot reload: a whole guarded agent run with ``guard(PolicySet)`` against
   ``guard(PolicySource)`` (``guardrails.watch`` on the same directory, its thread polling
   every 50 ms meanwhile). The claim: without a change a source costs nothing per call, so
   the ratio is 1.0 within noise.
2. Counters: ``PolicySet.evaluate`` of a call whose policy has one counter, against the same
   policy without the counter: in memory, in an SQLite file, and in a real redis-server on
   127.0.0.1 when one is installed (started here on an ephemeral port, stopped after).

Iterations interleave the variants so drift hits them alike; figures are medians. One
machine, one run: a ratio, not an absolute promise.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from agent_framework import Agent, tool  # noqa: E402

import guardrails  # noqa: E402
from guardrails.agent_framework import ScriptedChatClient, guard  # noqa: E402
from guardrails.agent_framework.scripted import call  # noqa: E402
from guardrails.engine.counters import MemoryStore  # noqa: E402
from guardrails.fleet.stores import RedisStore, SQLiteStore  # noqa: E402

POLICY = """
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: pay}
spec:
  match: {tools: [pay]}
  params: {cap: 1000}
  COUNTERS
  rules:
    - {name: cap, when: 'args.amount > params.cap', action: deny}
    - {name: tiny, when: 'args.amount < 1', action: deny}
    COUNTER_RULE
"""
COUNTERS = """counters:
    - {name: calls, key: 'principal.tenant', window: 1h, limit: 1000000000}"""
COUNTER_RULE = "- {name: over, when: 'counters.calls.exceeded', action: deny}"


def _policy(directory: Path, counters: bool) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    text = POLICY.replace("COUNTERS", COUNTERS if counters else "").replace(
        "COUNTER_RULE", COUNTER_RULE if counters else "")
    (directory / "pay.yaml").write_text(text)
    return directory


@tool
def pay(amount: float) -> str:
    """Pay an amount."""
    return "paid"


async def _agent_runs(runs: int, work: Path) -> dict[str, float]:
    plain = guardrails.load(_policy(work / "plain", False))
    source = guardrails.watch(work / "plain", interval=0.05)
    variants = {"PolicySet": guard(plain), "PolicySource": guard(source)}
    times: dict[str, list[float]] = {k: [] for k in variants}
    try:
        for i in range(runs + 20):
            for name in (list(variants) if i % 2 else list(reversed(variants))):
                client = ScriptedChatClient([[call("pay", amount=5)]])
                agent = Agent(client=client, tools=[pay], middleware=variants[name])
                started = time.perf_counter()
                await agent.run("pay")
                if i >= 20:
                    times[name].append(time.perf_counter() - started)
    finally:
        source.close()
    return {k: statistics.median(v) for k, v in times.items()}


def _evaluations(calls: int, work: Path, redis_url: str | None) -> dict[str, float]:
    plain = guardrails.load(_policy(work / "plain", False))
    counted = guardrails.load(_policy(work / "counted", True))
    sqlite = SQLiteStore(work / "state.db")
    variants: dict[str, Callable[[int], Any]] = {
        "no counter": lambda i: plain.evaluate("pay", {"amount": 5}, principal={"tenant": "t"}),
        "counter, no store": lambda i: counted.evaluate("pay", {"amount": 5},
                                                        principal={"tenant": "t"}),
    }
    memory = MemoryStore()
    variants["counter, MemoryStore"] = lambda i: counted.evaluate(
        "pay", {"amount": 5}, principal={"tenant": "t"}, counters=memory)
    variants["counter, SQLiteStore"] = lambda i: counted.evaluate(
        "pay", {"amount": 5}, principal={"tenant": "t"}, counters=sqlite)
    if redis_url is not None:
        redis = RedisStore(redis_url)
        variants["counter, RedisStore"] = lambda i: counted.evaluate(
            "pay", {"amount": 5}, principal={"tenant": "t"}, counters=redis)
    times: dict[str, list[float]] = {k: [] for k in variants}
    for i in range(calls + 100):
        for name, run in variants.items():
            started = time.perf_counter()
            decision = run(i)
            elapsed = time.perf_counter() - started
            assert decision.effect == "allow", (name, decision.to_dict())
            if i >= 100:
                times[name].append(elapsed)
    return {k: statistics.median(v) for k, v in times.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        runs = asyncio.run(_agent_runs(args.runs, work / "runs"))
        print(f"agent run, median of {args.runs}:")
        base = runs["PolicySet"]
        for name, t in runs.items():
            print(f"  guard({name}): {t * 1e6:8.1f} us  ratio {t / base:.3f}")
        server = None
        try:
            try:
                sys.path.insert(0, str(ROOT / "tests"))
                from tests.fleet_support import start_redis

                server = start_redis()
            except BaseException:  # no redis-server here: measure the others
                server = None
            evals = _evaluations(args.calls, work / "evals",
                                 server.url if server is not None else None)
        finally:
            if server is not None:
                server.stop()
        print(f"PolicySet.evaluate, median of {args.calls}:")
        base = evals["no counter"]
        for name, t in evals.items():
            print(f"  {name:22s} {t * 1e6:8.1f} us  ratio {t / base:.2f}")


if __name__ == "__main__":
    main()
