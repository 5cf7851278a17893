"""The speed table of issue 14, every row measured now, in one run, next to its goal.

    .venv/bin/python benchmarks/table.py [--base CHECKOUT] [--row KEY]... [--repeat N]

``--base`` also runs every row against another checkout's ``src`` (for example
``git worktree add /tmp/base <commit>``), right before the row's run on this one: on a
shared machine that is the only honest "before". ``--row`` (repeatable) runs only those
rows (``--row KEY`` alone prints that row's result as JSON); ``--repeat N`` runs each row
(and its base) N times, alternated, and shows the medians.

Each row runs in its own fresh process (first-call and load figures need one; the others
are kept apart so one row's caches and garbage do not bias the next). Figures are ratios
measured within one process, except the load time, which the issue states in seconds.
The machine is shared and small (2 cores): absolute times move with its load, ratios far
less; run it twice before believing a change of a few percent.

Rows (what each compares):

- agent: a guarded agent run (20 matching rules, 200 other policies, allowed call,
  principal given, default telemetry) ÷ the unguarded run (benchmarks/agent_bench.py's
  agent, offline scripted model); the anchor, in the same interleaved runs: a plain-Python
  function middleware doing the same 20 checks (``agent_bench.PlainPythonGuard``);
- 20 rules: ``PolicySet.evaluate`` on benchmarks/engine_policies.yaml ÷ the same 20 checks
  in plain Python (benchmarks/run.py);
- 1 rule: a one-rule decision ÷ the plain check (the fixed cost per decision);
- first call: the first decision after loading 200 rules for one tool ÷ a steady one;
- 10,000 rules: load plus the first decision, all 10,000 rules matching the tool;
- per rule: steady per-rule cost with 10,000 matching rules ÷ with 1,000;
- threads: ``evaluate`` throughput on regex policies, 2 threads ÷ 1 thread (plain Python
  doing the same regex checks with ``re`` is the anchor);
- worst case: the slowest of several hostile calls (inputs at the size and depth bounds,
  backtracking bait for every regex rule) ÷ a typical call of the same policy library.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for _p in (str(HERE), str(ROOT)):
    if _p not in sys.path:
        sys.path.insert(0, _p)


def median_us(fn: Callable[[], Any], *, rounds: int = 7, number: int = 200) -> float:
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - t0) / number * 1e6)
    return statistics.median(samples)


def generated(n_rules: int, tools: int = 1) -> str:
    """``n_rules`` rules in policies of 10, for ``tools`` tools (benchmarks/run.py's shape)."""
    docs = []
    for i in range(n_rules // 10):
        rules = "\n".join(
            f"    - {{name: r{j}, when: 'args.amount > {j * 100 + i}.0 && "
            f"args.recipient.startsWith(\"X{j}\") || \"p{i}\" in principal.roles', "
            f"action: deny}}" for j in range(10))
        docs.append("apiVersion: guardrails/v1\nkind: ToolPolicy\n"
                    f"metadata: {{name: gen-{i}}}\nspec:\n  match: {{tools: [tool_{i % tools}]}}\n"
                    f"  rules:\n{rules}\n")
    return "---\n".join(docs)


def _load_text(text: str) -> Any:
    import guardrails

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "p.yaml"
        path.write_text(text)
        return guardrails.load(path)


_CALL = {"amount": 5, "recipient": "Y"}
_PRINCIPAL: dict[str, Any] = {"roles": []}


# ---------------------------------------------------------------------------- rows


def row_agent() -> dict[str, Any]:
    """The guarded run and the issue's anchor (a plain-Python function middleware doing the
    same 20 checks), each ÷ the unguarded run, interleaved in one process."""
    import asyncio

    import agent_bench

    from guardrails.agent_framework import guard

    async def go() -> dict[str, float]:
        with tempfile.TemporaryDirectory() as tmp:
            policies, _ = agent_bench._load(Path(tmp))
        variants = {
            "unguarded": agent_bench._agent([]),
            "guarded": agent_bench._agent(guard(policies, principal=agent_bench.PRINCIPAL)),
            "anchor": agent_bench._agent([agent_bench.PlainPythonGuard()]),
        }
        samples = await agent_bench._bench(variants, 150, 20)
        return {name: statistics.median(values) for name, values in samples.items()}

    medians = asyncio.run(go())
    base = medians["unguarded"]
    return {"value": medians["guarded"] / base, "anchor": medians["anchor"] / base,
            "anchor_label": "plain-Python middleware, 20 checks"}


def row_rules20() -> dict[str, Any]:
    import peers
    import run

    import guardrails

    ps = guardrails.load(HERE / "engine_policies.yaml")
    return {"value": peers.ratio(
        lambda: run.plain_python(run.ARGS, run.PRINCIPAL, run.HISTORY, run.REQUEST),
        lambda: ps.evaluate("send_money", run.ARGS, principal=run.PRINCIPAL,
                            history=run.HISTORY, request=run.REQUEST))}


def row_rule1() -> dict[str, Any]:
    import peers

    ps = _load_text("apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: one}\n"
                    "spec:\n  match: {tools: [pay]}\n  rules:\n"
                    "    - {name: big, when: 'args.amount > 5000.0', action: deny}\n")
    args = {"amount": 1500.0}
    return {"value": peers.ratio(lambda: "deny" if args["amount"] > 5000.0 else "allow",
                                 lambda: ps.evaluate("pay", args), number=3000)}


def _first_and_steady(n_rules: int) -> tuple[float, float, float]:
    """Seconds to load, seconds for the first decision, µs for a steady decision."""
    return _first_and_steady_cpu(n_rules)[:3]


def _first_and_steady_cpu(n_rules: int) -> tuple[float, float, float, float]:
    """``_first_and_steady``, and the CPU seconds of the load and first decision: on the
    shared machine the wall clock measures the other processes too (2-2.5x the CPU time at
    load average 3-4; ``benchmarks/load_cpu.py`` compares checkouts by CPU time)."""
    text = generated(n_rules)
    c0 = time.process_time()
    t0 = time.perf_counter()
    ps = _load_text(text)
    t1 = time.perf_counter()
    ps.evaluate("tool_0", _CALL, principal=_PRINCIPAL)
    t2 = time.perf_counter()
    c2 = time.process_time()
    steady = median_us(lambda: ps.evaluate("tool_0", _CALL, principal=_PRINCIPAL),
                       number=max(3, 20_000 // n_rules))
    return t1 - t0, t2 - t1, steady, c2 - c0


def row_first_call() -> dict[str, Any]:
    _, first, steady = _first_and_steady(200)
    return {"value": first * 1e6 / steady, "detail": f"{first * 1e3:.2f} ms vs {steady:.0f} µs"}


def row_load10k() -> dict[str, Any]:
    load, first, steady, cpu = _first_and_steady_cpu(10_000)
    return {"value": load + first,
            "detail": f"load {load:.2f} s, first {first * 1e3:.0f} ms, steady "
                      f"{steady / 1e3:.0f} ms; CPU {cpu:.2f} s (import included)"}


def row_per_rule() -> dict[str, Any]:
    small, large = _load_text(generated(1000)), _load_text(generated(10_000))
    per: dict[int, list[float]] = {1000: [], 10_000: []}
    for _ in range(9):
        for n, ps in ((1000, small), (10_000, large)):
            per[n].append(median_us(lambda ps=ps: ps.evaluate("tool_0", _CALL,
                                                              principal=_PRINCIPAL),
                                    rounds=1, number=max(2, 10_000 // n)) / n)
    a, b = statistics.median(per[1000]), statistics.median(per[10_000])
    return {"value": b / a, "detail": f"{a * 1e3:.0f} ns vs {b * 1e3:.0f} ns per rule"}


_REGEX_POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: rx}
spec:
  match: {tools: [send]}
  rules:
    - {name: iban, when: '!args.recipient.matches("^[A-Z]{2}[0-9]{2}[A-Z0-9]{4,30}$")', action: deny}
    - {name: url, when: 'args.memo.matches("https?://[a-z0-9.-]+")', action: warn}
    - {name: cmd, when: 'args.memo.matches("\\\\b(rm|curl|wget)\\\\b")', action: deny}
    - {name: card, when: 'args.memo.matches("[0-9]{4}[ -]?[0-9]{4}[ -]?[0-9]{4}[ -]?[0-9]{4}")', action: deny}
    - {name: ref, when: 'args.reference.matches("^INV-[0-9]{4}-[0-9]{2}$")', action: allow}
"""


def _throughput(work: Callable[[int], None], n: int) -> float:
    """2 threads ÷ 1 thread throughput (each thread does half the work)."""
    ratios = []
    for _ in range(5):
        t = time.perf_counter()
        work(n)
        one = time.perf_counter() - t
        threads = [threading.Thread(target=work, args=(n // 2,)) for _ in range(2)]
        t = time.perf_counter()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        ratios.append(one / (time.perf_counter() - t))
    return statistics.median(ratios)


def row_threads() -> dict[str, Any]:
    import re

    ps = _load_text(_REGEX_POLICY)
    args = {"recipient": "GB82WEST12345698765432", "memo": "rent for November, see invoice",
            "reference": "INV-2026-11"}
    assert ps.evaluate("send", args).effect.value == "allow"
    patterns = [re.compile(p) for p in ("^[A-Z]{2}[0-9]{2}[A-Z0-9]{4,30}$",
                                        "https?://[a-z0-9.-]+", "\\b(rm|curl|wget)\\b",
                                        "[0-9]{4}[ -]?[0-9]{4}[ -]?[0-9]{4}[ -]?[0-9]{4}",
                                        "^INV-[0-9]{4}-[0-9]{2}$")]

    def engine(n: int) -> None:
        for _ in range(n):
            ps.evaluate("send", args)

    def plain(n: int) -> None:
        for _ in range(n * 20):  # about as long as the engine's share
            for p, k in zip(patterns, ("recipient", "memo", "memo", "memo", "reference"),
                            strict=True):
                p.search(args[k])

    return {"value": _throughput(engine, 4000), "anchor": _throughput(plain, 4000)}


def row_worst_case() -> dict[str, Any]:
    import guardrails

    ps = guardrails.load(ROOT / "policies")
    typical = ("send_email", {"to": ["alice@example.com"], "subject": "Hi",
                              "body": "See you at 10."})

    def deep(n: int) -> Any:
        v: Any = "x"
        for _ in range(n):
            v = {"k": [v]}
        return v

    long_text = ("a" * 30 + "@" + "b" * 30 + ". ") * 4000  # ~250 KB, matches nothing useful
    hostile = [
        ("send_email", {"to": ["a@" + "b" * 200_000 + ".com"], "subject": "s", "body": "x"}),
        ("send_email", {"to": ["alice@example.com"], "subject": "s", "body": long_text}),
        ("run_command", {"command": "a" * 300_000 + "!"}),
        ("fetch_url", {"url": "http://" + "a." * 100_000 + "com/"}),
        ("write_file", {"path": "/tmp/" + "a/" * 100_000, "content": deep(15)}),
        ("send_money", {"recipient": "GB" + "1" * 300_000, "amount": "1" * 200_000}),
        ("get_weather", {f"k{i}": deep(14) for i in range(200)}),
    ]
    base = median_us(lambda: ps.evaluate(*typical), number=100)
    worst = 0.0
    which = ""
    for tool, args in hostile:
        t = median_us(lambda tool=tool, args=args: ps.evaluate(tool, args), rounds=3, number=3)
        if t > worst:
            worst, which = t, tool
    return {"value": worst / base, "detail": f"slowest {which}: {worst / 1e3:.1f} ms vs "
                                             f"{base:.0f} µs typical"}


ROWS: list[tuple[str, str, str, str, str]] = [
    # (key, measure, before this work (issue 14), goal, how the goal reads)
    ("agent", "guarded agent run ÷ unguarded", "1.30–1.35×", "≤ 1.10×", "le:1.10"),
    ("rules20", "20-rule decision ÷ the same logic in plain Python", "11–14×", "≤ 5×", "le:5"),
    ("rule1", "one-rule decision ÷ the plain check", "181–189×", "≤ 50×", "le:50"),
    ("first_call", "first decision after load ÷ a steady decision (200 rules)", "89–107×",
     "≤ 5×", "le:5"),
    ("load10k", "10,000 rules: load plus first decision (s)", "2.0–2.6 s", "≤ 1.5 s",
     "le:1.5"),
    ("per_rule", "per-rule cost, 10,000 ÷ 1,000 matching rules", "2.2×", "flat (≈ 1×)",
     "le:1.2"),
    ("threads", "evaluate() throughput, 2 threads ÷ 1 thread, regex policies", "0.75×",
     "≥ 1.0×", "ge:1.0"),
    ("worst_case", "worst-case input decision ÷ typical decision (policy library)", "—",
     "bounded", "none"),
]


def bytecode(source: str | Path) -> None:
    """Compile a checkout's package to bytecode (``__pycache__``, which git ignores) before
    a row runs, as an installed package is. With ``PYTHONDONTWRITEBYTECODE=1`` (set on the
    benchmark machine) an editable checkout is compiled from source on every import, which
    every ``load10k`` run paid: 2.65G -> 1.50G instructions for ``import guardrails``
    (cachegrind, 2026-12-03), about a tenth of the row. Imports check each file's bytecode
    against its source, so an edit made since is compiled again, never stale."""
    import compileall

    compileall.compile_dir(str(source), quiet=1)


def _package_dir() -> str:
    """The directory of the ``guardrails`` this process would import (not imported yet)."""
    import importlib.util

    spec = importlib.util.find_spec("guardrails")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("guardrails is not importable")
    return next(iter(spec.submodule_search_locations))


def _run_row(key: str, source: str | None) -> dict[str, Any] | str:
    """One row in a fresh process; ``source``: another checkout's ``src`` to import
    guardrails from (the same benchmark code measures both)."""
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = source + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run([sys.executable, __file__, "--row", key], capture_output=True,
                          text=True, timeout=900, check=False, env=env)
    try:
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return "failed: " + " ".join(done.stderr.strip().splitlines()[-1:])[-120:]
    return result


def _show(key: str, value: float) -> str:
    return f"{value:.2f} s" if key == "load10k" else f"{value:.2f}×"


def _median_run(runs: list[dict[str, Any] | str]) -> dict[str, Any] | str:
    """The run of median value among ``runs`` (a failure if any failed)."""
    failed = [r for r in runs if isinstance(r, str)]
    if failed:
        return failed[0]
    ok = sorted((r for r in runs if not isinstance(r, str)), key=lambda r: r["value"])
    return ok[len(ok) // 2]


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", help="another checkout: each row run on it too, first")
    parser.add_argument("--row", action="append", choices=[r[0] for r in ROWS],
                        help="only this row (repeatable)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each row (medians)")
    options = parser.parse_args(argv)
    if options.row is not None and len(options.row) == 1 and options.base is None and (
            options.repeat == 1):
        bytecode(_package_dir())
        print(json.dumps(globals()["row_" + options.row[0]]()))
        return 0
    base = None if options.base is None else str(Path(options.base).resolve() / "src")
    print("Issue 14 speed table: each row in its own process, measured now (guardrails "
          "compiled to bytecode first, as installed)")
    if base is not None:
        print(f"'then' is the same row run now on {base} (same machine, same minute)")
    if options.repeat > 1:
        print(f"each figure: the median of {options.repeat} runs, alternated")
    print(f"{'measure':64} {'issue':>11} {'then' if base else '':>9} {'now':>9} {'goal':>12}")
    for key, measure, before, goal, reads in ROWS:
        if options.row is not None and key not in options.row:
            continue
        earlier_runs: list[dict[str, Any] | str] = []
        runs: list[dict[str, Any] | str] = []
        for _ in range(options.repeat):
            if base is not None:
                earlier_runs.append(_run_row(key, base))
            runs.append(_run_row(key, None))
        then = ""
        if base is not None:
            earlier = _median_run(earlier_runs)
            then = earlier if isinstance(earlier, str) else _show(key, earlier["value"])
        result = _median_run(runs)
        if isinstance(result, str):
            print(f"{measure:64} {before:>11} {then:>9} {result}")
            continue
        value = result["value"]
        now = _show(key, value)
        kind, _, bound = reads.partition(":")
        met = "" if kind == "none" else (
            "met" if (value <= float(bound) if kind == "le" else value >= float(bound))
            else "not met")
        detail = result.get("detail", "")
        if "anchor" in result:
            label = result.get("anchor_label", "plain Python with re")
            detail = f"{label}: {result['anchor']:.2f}×"
        print(f"{measure:64} {before:>11} {then:>9} {now:>9} {goal:>12}  {met:8} {detail}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
