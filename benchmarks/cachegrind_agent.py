"""Instructions and simulated cache misses per agent run, by variant (cachegrind).

    .venv/bin/python benchmarks/cachegrind_agent.py [--variants unguarded anchor guard]
                                                    [--runs 200] [--warmup 30] [--keep DIR]

Wall-clock ratios on a shared 2-core machine move by tens of percent between runs; the
instructions one run executes move by well under 1%, and a simulated cache says how much
of a run's memory a cache of a given size keeps. So each variant of
``agent_bench.py`` runs in its own process under ``valgrind --tool=cachegrind
--cache-sim=yes --LL=524288,8,64`` (a last level the size of this machine's L2) twice: with
``--runs`` timed runs after ``--warmup`` and with none after the same warm-up; the
difference divided by ``--runs`` is what one run costs, without the start-up and the load.
The collector is off in both (``gc.freeze()`` after the warm-up, then ``gc.disable()``), so
a collection does not land in one of the two processes only, and each process ends with
``os._exit`` (no interpreter shutdown: its collection of what the runs left would land in the
process with runs only; the cyclic garbage a run leaves is ``agent_bench.py``'s to count).

``--keep DIR`` keeps the cachegrind files (``cg_diff`` of the two, then ``cg_annotate``,
gives the interpreter's C functions per run). ``--inner VARIANT N`` is what runs under
valgrind.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

VARIANTS = ("unguarded", "pass-through", "anchor", "floor", "guard", "guard-one-rule")
"""``floor``: the anchor behind a pass-through agent middleware (agent_bench.py's floor);
``guard-one-rule``: ``guard()`` on agent_bench.ONE_RULE (the repair and one rule)."""
EVENTS = ("Ir", "D1mr", "D1mw", "I1mr", "DLmr", "DLmw", "ILmr")


def _variant(name: str) -> Any:
    import agent_bench

    from guardrails.agent_framework import guard

    if name == "unguarded":
        return agent_bench._agent([])
    if name == "pass-through":
        return agent_bench._agent([agent_bench._PassAgent(), agent_bench._PassFunction()])
    if name == "anchor":
        return agent_bench._agent([agent_bench.PlainPythonGuard()])
    if name == "floor":
        return agent_bench._agent([agent_bench._PassAgent(), agent_bench.PlainPythonGuard()])
    with tempfile.TemporaryDirectory() as tmp:
        if name == "guard-one-rule":
            policies = agent_bench._load_one(Path(tmp))
        else:
            policies, _ = agent_bench._load(Path(tmp))
    return agent_bench._agent(guard(policies, principal=agent_bench.PRINCIPAL))


async def _inner(name: str, runs: int, warmup: int) -> None:
    import agent_bench

    agent, client = _variant(name)
    await agent_bench._check(name, agent, client)
    for _ in range(warmup):
        await agent.run(agent_bench.REQUEST)
        client.received.clear()
    gc.collect()
    gc.freeze()
    gc.disable()
    for _ in range(runs):
        await agent.run(agent_bench.REQUEST)
        client.received.clear()


def _totals(path: Path) -> dict[str, int]:
    events: list[str] = []
    summary: list[int] = []
    for line in path.read_text().splitlines():
        if line.startswith("events:"):
            events = line.split()[1:]
        elif line.startswith("summary:"):
            summary = [int(v) for v in line.split()[1:]]
    return dict(zip(events, summary, strict=True))


def _measure(name: str, runs: int, warmup: int, out: Path) -> dict[str, int]:
    cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=yes", "--LL=524288,8,64",
           f"--cachegrind-out-file={out}", sys.executable, __file__,
           "--inner", name, str(runs), "--warmup", str(warmup)]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{name}: valgrind failed\n{done.stderr[-2000:]}")
    return _totals(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", nargs="+", choices=VARIANTS,
                    default=["unguarded", "anchor", "guard"])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--keep", type=Path, help="directory for the cachegrind files")
    ap.add_argument("--inner", nargs=2, metavar=("VARIANT", "RUNS"), help=argparse.SUPPRESS)
    opts = ap.parse_args()
    sys.path[:0] = [str(HERE), str(HERE.parent)]
    if opts.inner:
        asyncio.run(_inner(opts.inner[0], int(opts.inner[1]), opts.warmup))
        sys.stdout.flush()
        os._exit(0)
    keep = opts.keep or Path(tempfile.mkdtemp(prefix="guardrails-cachegrind-"))
    keep.mkdir(parents=True, exist_ok=True)
    per_run: dict[str, dict[str, float]] = {}
    for name in opts.variants:
        full = _measure(name, opts.runs, opts.warmup, keep / f"{name}.{opts.runs}.out")
        empty = _measure(name, 0, opts.warmup, keep / f"{name}.0.out")
        per_run[name] = {e: (full[e] - empty[e]) / opts.runs for e in EVENTS}
        row = per_run[name]
        print(f"{name:13} Ir {row['Ir'] / 1e6:7.3f} M  D1 miss {(row['D1mr'] + row['D1mw']) / 1e3:6.1f} k"
              f"  I1 miss {row['I1mr'] / 1e3:6.1f} k  LL miss {(row['DLmr'] + row['DLmw'] + row['ILmr']) / 1e3:6.2f} k"
              f"  (LL data {(row['DLmr'] + row['DLmw']) / 1e3:.2f} k)", flush=True)
    print(f"per run, {opts.runs} runs after {opts.warmup} of warm-up; files in {keep}")
    names = list(per_run)
    for a in names:
        for b in names:
            if a == b or (a, b) not in {("guard", "unguarded"), ("guard", "anchor"),
                                         ("anchor", "unguarded"), ("guard", "pass-through"),
                                         ("floor", "unguarded"), ("guard", "floor"),
                                         ("guard-one-rule", "floor"),
                                         ("guard", "guard-one-rule")}:
                continue
            ra, rb = per_run[a], per_run[b]

            def ratio(*events: str, ra: dict[str, float] = ra, rb: dict[str, float] = rb) -> str:
                return f"{sum(ra[e] for e in events) / sum(rb[e] for e in events):.3f}"

            print(f"{a} ÷ {b}: Ir {ratio('Ir')}, D1 miss {ratio('D1mr', 'D1mw')}, "
                  f"I1 miss {ratio('I1mr')}, LL miss {ratio('DLmr', 'DLmw', 'ILmr')}")


if __name__ == "__main__":
    main()
