"""Promise 8, swept: every function, operator and macro on the inputs that make it dearest
per unit of cost it is charged, within the input bounds and the budget.

    .venv/bin/python benchmarks/cost_sweep.py [--backend compiled|closures] [--only NAME]

For each case, one expression is evaluated on arguments built to maximise wall time per
unit charged (long strings, many short values, unicode, near-matches, nested loops that
repeat an uncharged operation as often as the budget allows). Two figures, one run:

- ``ns/unit``: CPU time of the expression divided by the units it charged to the call's
  meter (``limits.Meter``), evaluated until it finishes or runs out of the budget. The
  budget is 3,000,000 units for 50 ms, so about 17 ns a unit is the most any operation
  may cost for the bound to hold when the whole budget is spent on it.
- ``call``: one whole ``PolicySet.evaluate`` of a policy whose rule is the expression (input
  bounds, the budget, the decision record), as a ratio to the 50 ms bound.
- ``guard``: the same call in Agent Framework's real loop (``ScriptedChatClient``), CPU time
  inside the guard's function middleware minus ``call_next``, as a ratio to the bound, run
  plainly and streaming (the larger is shown; ``--no-guard`` skips it).

A row whose ``call`` or ``guard`` ratio is over 1 is a finding: a guarded call on that
input costs more than the promise allows. Ratios are of one run on a shared machine;
repeat for noise.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import gc
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE))

from agent_framework import (  # noqa: E402
    Agent,
    AgentSession,
    FunctionTool,
)
from worst_case import TimedGuard  # noqa: E402

import guardrails  # noqa: E402
from guardrails.agent_framework import GuardFunctionMiddleware, ScriptedChatClient, guard  # noqa: E402
from guardrails.agent_framework.scripted import call, text  # noqa: E402
from guardrails.expr import compile_expression, generate_pending  # noqa: E402
from guardrails.expr.limits import DEFAULT_LIMITS, METER, Meter  # noqa: E402
from guardrails.expr.values import CelError  # noqa: E402

BOUND_S = 0.050
BUDGET = DEFAULT_LIMITS.max_cost
UNIT_NS = BOUND_S * 1e9 / BUDGET
NOW = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)

S = 440_000
"""A long string: two of them fit the 1 MB input bound with a small list beside."""
LOOP = list(range(270))
"""Nested twice, 72,900 iterations: as many as the budget's iteration charges allow."""
WIDE = 8_000
"""Elements of a wide list or map within the input bound (100 bytes a value)."""

Case = tuple[str, Callable[[], dict[str, Any]]]


def _twice(body: str) -> str:
    """``body`` repeated as often as two nested loops over ``args.l`` allow."""
    return f"args.l.all(x, args.l.all(y, {body}))"


def _once(body: str) -> str:
    return f"args.l.all(x, {body})"


def _loop(n: int) -> list[int]:
    return list(range(n))


CASES: dict[str, Case] = {
    # --- macros and the loop itself
    "all (empty body)": (_twice("true"), lambda: {"l": LOOP}),
    "all (1,000-op body)": (
        _twice("[" + ", ".join(f"y + {i}" for i in range(1, 1000)) + "].size() > 0"),
        lambda: {"l": LOOP}),
    "exists_one": ("args.l.all(x, args.l.exists_one(y, y == -1) == false)",
                   lambda: {"l": LOOP}),
    "filter/map": ("args.l.all(x, args.l.map(y, y + 1).filter(z, z < 0).size() == 0)",
                   lambda: {"l": LOOP}),
    "transformMapEntry": ("args.l.all(x, args.l.transformMapEntry(i, v, {v: i}).size() > 0)",
                          lambda: {"l": LOOP}),
    "has()": (_twice("has(args.m.k)"), lambda: {"l": LOOP, "m": {"k": 1}}),
    # --- operators
    "== strings": (_twice("args.a == args.b"), lambda: {"l": LOOP, "a": "a" * S, "b": "a" * S}),
    "<= strings (UCS-4)": (_twice("args.a <= args.b"),
                           lambda: {"l": LOOP, "a": "\U0001f600" * (S // 4),
                                    "b": "\U0001f600" * (S // 4)}),
    "== lists": (_once("args.m == args.n"),
                 lambda: {"l": _loop(2_000), "m": _loop(3_000), "n": _loop(3_000)}),
    "== maps": (_once("args.m == args.n"),
                lambda: {"l": _loop(1_000), "m": {f"k{i}": i for i in range(1_500)},
                         "n": {f"k{i}": i for i in range(1_500)}}),
    "in map (key 0)": (_twice("!(0 in args.m)"),
                       lambda: {"l": LOOP[:60], "m": {f"k{i}": 1 for i in range(4_000)}}),
    "m[true] lookup": (_twice("!(true in args.m)"),
                       lambda: {"l": LOOP[:60], "m": {f"k{i}": 1 for i in range(4_000)}}),
    "in list (strings)": (_once("!('zz' in args.m)"),
                          lambda: {"l": _loop(2_000), "m": [f"s{i}" for i in range(6_000)]}),
    "in list (of lists)": (_once("!(args.x in args.m)"),
                           lambda: {"l": _loop(2_000), "x": [*range(2_999), -1],
                                    "m": [list(range(3_000))]}),
    "+ strings": (_once("size(args.a + args.b) > 0"),
                  lambda: {"l": _loop(2_000), "a": "a" * (S // 2), "b": "b" * (S // 2)}),
    "+ lists": (_once("size(args.m + args.m) > 0"),
                lambda: {"l": _loop(2_000), "m": _loop(6_000)}),
    # --- standard functions
    "size": (_twice("size(args.a) > 0"), lambda: {"l": LOOP, "a": "a" * S}),
    "startsWith": (_twice("args.a.startsWith(args.b)"),
                   lambda: {"l": LOOP, "a": "a" * S, "b": "a" * S}),
    "endsWith": (_twice("args.a.endsWith(args.b)"),
                 lambda: {"l": LOOP, "a": "a" * S, "b": "a" * S}),
    "contains": (_once("!args.a.contains(args.b)"),
                 lambda: {"l": _loop(1_000), "a": "a" * S, "b": "a" * 200 + "b"}),
    "matches (constant)": (_once("!args.a.matches('(a|b)*c')"),
                           lambda: {"l": _loop(1_000), "a": "a" * S}),
    "string(bytes)": (_twice("size(string(bytes(args.a))) > 0"),
                      lambda: {"l": LOOP, "a": "é" * S}),
    "bytes(string)": (_twice("size(bytes(args.a)) > 0"), lambda: {"l": LOOP, "a": "é" * S}),
    "int(string)": (_twice("int(args.a) > 0"), lambda: {"l": LOOP, "a": "1" * 4_000}),
    "double(string)": (_twice("double(args.a) > 0.0"),
                       lambda: {"l": LOOP, "a": "1" * S}),
    "string(double)": (_twice("string(args.d) != ''"), lambda: {"l": LOOP, "d": 1e-300}),
    "timestamp(string)": (_twice("timestamp(args.a) > timestamp(0)"),
                          lambda: {"l": LOOP, "a": "2026-12-01T12:00:00.123456789+01:00"}),
    "duration(string)": ("duration(args.a) > duration('0s')",
                         lambda: {"a": "1h" * (S // 2)}),
    "duration(string) looped": (_once("duration(args.a) > duration('0s')"),
                                lambda: {"l": _loop(1_000), "a": "1h" * 20_000}),
    "getHours(zone)": ("args.m.exists(z, now.getHours(z) == 99)",
                       lambda: {"m": [f"Nope/Zone{i}" for i in range(WIDE)]}),
    "base64.encode": (_twice("size(base64.encode(bytes(args.a))) > 0"),
                      lambda: {"l": LOOP, "a": "a" * S}),
    "base64.decode": (_twice("size(base64.decode(args.a)) > 0"),
                      lambda: {"l": LOOP, "a": "QUFB" * (S // 4)}),
    "math.greatest(list)": (_once("math.greatest(args.m) > 0"),
                            lambda: {"l": _loop(2_000), "m": _loop(6_000)}),
    "math.bitShiftLeft": (_twice("math.bitShiftLeft(x, 63) != 1"), lambda: {"l": LOOP}),
    # --- strings extension
    "charAt/substring": (_twice("args.a.substring(1, 3) != args.a.charAt(5)"),
                         lambda: {"l": LOOP, "a": "é" * S}),
    "indexOf (near-miss)": (_once("args.a.indexOf(args.b) < 0"),
                            lambda: {"l": _loop(500), "a": "a" * S, "b": "a" * 5_000 + "b"}),
    "lastIndexOf (near-miss)": (_once("args.a.lastIndexOf(args.b) < 0"),
                                lambda: {"l": _loop(500), "a": "a" * S,
                                         "b": "b" + "a" * 5_000}),
    "lowerAscii (unicode)": (_once("size(args.a.lowerAscii()) > 0"),
                             lambda: {"l": _loop(500), "a": "É" * S}),
    "upperAscii (unicode)": (_once("size(args.a.upperAscii()) > 0"),
                             lambda: {"l": _loop(500), "a": "é" * S}),
    "replace (empty old)": (_once("size(args.a.replace('', 'x')) > 0"),
                            lambda: {"l": _loop(500), "a": "é" * S}),
    "split (empty sep)": (_once("args.a.split('').size() > 0"),
                          lambda: {"l": _loop(500), "a": "\U0001f600" * (S // 4)}),
    "split (commas)": (_once("args.a.split(',').size() > 0"),
                       lambda: {"l": _loop(500), "a": "," * S}),
    "trim": (_once("size(args.a.trim()) >= 0"), lambda: {"l": _loop(500), "a": "\u3000" * S}),
    "reverse": (_once("size(args.a.reverse()) > 0"),
                lambda: {"l": _loop(500), "a": "\U0001f600" * (S // 4)}),
    "join": (_once("size(args.m.join()) >= 0"),
             lambda: {"l": _loop(500), "m": [""] * WIDE}),
    "format %s of nested": (_once("'%s'.format([args.m]) != ''"),
                            lambda: {"l": _loop(500), "m": [[] for _ in range(WIDE)]}),
    "format many clauses": (_once("args.f.format(args.m) != 'x'"),
                            lambda: {"l": _loop(500), "f": "%s" * WIDE, "m": [""] * WIDE}),
    "format %%": (_once("args.f.format([]) != 'x'"), lambda: {"l": _loop(500), "f": "%%" * S}),
    "strings.quote (surrogates)": (_once("size(strings.quote(args.a)) > 0"),
                                   lambda: {"l": _loop(500), "a": "\ud800" * S}),
    # --- lists extension
    "flatten (wide, empty)": (_once("[args.m].flatten(2).size() == 0"),
                              lambda: {"l": _loop(500), "m": [[] for _ in range(WIDE)]}),
    "distinct (one big map)": (_once("[args.m].distinct().size() == 1"),
                               lambda: {"l": _loop(500),
                                        "m": {f"k{i}": 1 for i in range(4_000)}}),
    "distinct (many)": (_once("args.m.distinct().size() > 0"),
                        lambda: {"l": _loop(500), "m": [[i] for i in range(4_000)]}),
    "sum": (_once("args.m.sum() > 0"), lambda: {"l": _loop(500), "m": _loop(WIDE)}),
    "min": (_once("args.m.min() >= 0"), lambda: {"l": _loop(500), "m": _loop(WIDE)}),
    "max": (_once("args.m.max() >= 0"), lambda: {"l": _loop(500), "m": _loop(WIDE)}),
    "reverse (list)": (_once("args.m.reverse().size() > 0"),
                       lambda: {"l": _loop(500), "m": _loop(WIDE)}),
    # --- sets
    "sets.contains (hashable)": (_once("sets.contains(args.a, args.b)"),
                                 lambda: {"l": _loop(500), "a": _loop(4_000),
                                          "b": _loop(4_000)}),
    "sets.contains (one long list each)": (_once("!sets.contains(args.m, [args.x])"),
                                           lambda: {"l": _loop(2_000), "x": [*range(2_999), -1],
                                                    "m": [list(range(3_000))]}),
    "sets.equivalent (lists)": ("sets.equivalent(args.a, args.b)",
                                lambda: {"a": [[i] for i in range(60)],
                                         "b": [[i] for i in range(60)]}),
    # --- regex
    "findAll (empty matches)": (_once("args.a.findAll('').size() > 0"),
                                lambda: {"l": _loop(100), "a": "a" * S}),
    "regex.extractAll": (_once("regex.extractAll(args.a, 'a').size() > 0"),
                         lambda: {"l": _loop(100), "a": "a" * S}),
    "regex.replace (groups)": (_once("size(regex.replace(args.a, 'a', '\\\\0')) > 0"),
                               lambda: {"l": _loop(100), "a": "a" * S}),
    "find (run-time pattern)": (_once("args.a.find(args.p) == ''"),
                                lambda: {"l": _loop(100), "a": "a" * S, "p": "(a+)+b"}),
    "matches (distinct patterns)": ("args.m.exists(p, 'hello'.matches(p))",
                                    lambda: {"m": [f"n{i}[0-9a-f]{{8,}}z|q{i}.*w{i}"
                                                   for i in range(3_000)]}),
    # --- JSON, URL, IP, CIDR
    "parseJSON (small values)": (_once("size(parseJSON(args.a)) > 0"),
                                 lambda: {"l": _loop(100), "a": "[" + "0," * 200_000 + "0]"}),
    "parseJSON (objects)": (_once("size(parseJSON(args.a)) > 0"),
                            lambda: {"l": _loop(100), "a": "[" + "{}," * 150_000 + "{}]"}),
    "url": (_once("url(args.a).getHost() != ''"),
            lambda: {"l": _loop(500), "a": "https://e.com/" + "%41" * 100_000}),
    "url (distinct)": ("args.m.exists(u, url(u).getHost() == 'x')",
                       lambda: {"m": [f"https://h{i}.example.com/p?q={i}" for i in range(WIDE)]}),
    "ip": ("args.m.exists(a, ip(a).isLoopback())",
           lambda: {"m": [f"2001:db8::{i:x}" for i in range(WIDE)]}),
    "cidr": ("args.m.exists(a, cidr(a).containsIP('10.0.0.1'))",
             lambda: {"m": [f"2001:db8:{i:x}::/48" for i in range(WIDE)]}),
    # --- guardrails additions
    "paths.clean": (_once("paths.clean(args.a) != ''"),
                    lambda: {"l": _loop(500), "a": "/." * (S // 2)}),
    "paths.glob": (_once("paths.glob(args.a, '/**/x*y*z')"),
                   lambda: {"l": _loop(500), "a": "/a" * (S // 2)}),
    "emails.valid": ("args.m.exists(e, !emails.valid(e))",
                     lambda: {"m": ["a" * 64 + "@" + "b" * 63 + "." + "c" * 60] * 3_000}),
    "credentials.found (near misses)": (_once("!credentials.found(args.a)"),
                                        lambda: {"l": _loop(100),
                                                 "a": "password=aaaaaaaa " * (S // 18)}),
    "credentials.found (bearer)": (_once("!credentials.found(args.a)"),
                                   lambda: {"l": _loop(100),
                                            "a": ("bearer " + "a" * 20 + " ") * (S // 28)}),
    "iban.valid": ("args.m.exists(i, !iban.valid(i))",
                   lambda: {"m": ["GB82WEST12345698765432"] * WIDE}),
    "domains.distance": ("args.m.exists(d, domains.distance(d, args.b) < 2)",
                         lambda: {"m": [".".join(["a" * 62] * 4)] * 300,
                                  "b": ".".join(["b" * 62] * 4)}),
    "domains.lookalike (list)": ("domains.lookalike('example.com', args.m)",
                                 lambda: {"m": ["é" * 240 + ".com"] * 1_500}),
    "domains.lookalike (looped)": (_once("domains.lookalike(args.a, args.m)"),
                                   lambda: {"l": _loop(500), "a": "é" * 240 + ".com",
                                            "m": ["ê" * 240 + ".com"] * 100}),
    "urls (a run of www.)": (_once("args.a.urls().size() > 0"),
                             lambda: {"l": _loop(100), "a": "www." * (S // 4)}),
    "urls (many links)": (_once("args.a.urls().size() > 0"),
                          lambda: {"l": _loop(100), "a": "www.a.Bc " * 2_000}),
    "urls (links cut, read on)": (_once("args.a.urls().size() > 0"),
                                  lambda: {"l": _loop(100), "a": "www.a'@B " * 2_000}),
    "urls (links cut, @ far)": (_once("args.a.urls().size() > 0"),
                                lambda: {"l": _loop(100), "a": "www.a'b " * 2_000 + "@"}),
    "emails (near misses)": (_once("args.a.emails().size() >= 0"),
                             lambda: {"l": _loop(100), "a": "%a.b@" * (S // 5)}),
    "emails (many addresses)": (_once("args.a.emails().size() > 0"),
                                lambda: {"l": _loop(100), "a": "a@b.cc " * 2_000}),
    "provenance": ("args.m.exists(v, untrusted(v))",
                   lambda: {"m": [f"w{i}x{i * 7}" for i in range(6_000)]}),
    "optional chain": (_twice("args.?m.?k.orValue(1) == 1"), lambda: {"l": LOOP, "m": {}}),
}


def _expression_cost(source: str, args: dict[str, Any], backend: str) -> tuple[float, int, str]:
    """CPU seconds, units charged and outcome of one evaluation on a full budget."""
    program = compile_expression(source, declared={"args", "now", "history", "request"},
                                 backend=backend)  # type: ignore[arg-type]
    generate_pending()
    meter = Meter(BUDGET)
    bindings = {"args": args, "now": NOW, "history": [], "request": "", METER: meter}
    gc.collect()
    start = time.thread_time()
    try:
        program.evaluate(bindings)
        outcome = "ok"
    except CelError as e:
        outcome = "budget" if "cost limit" in str(e) else "error"
    seconds = time.thread_time() - start
    return seconds, min(BUDGET, BUDGET - meter.left), outcome


def _policies(source: str, backend: str) -> guardrails.PolicySet:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "sweep.yaml"
        path.write_text(
            "apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: sweep}\nspec:\n"
            "  match: {tools: [t]}\n  rules:\n    - name: r\n"
            f"      when: {json.dumps(source)}\n      action: deny\n", encoding="utf-8")
        return guardrails.load(path, backend=backend)  # type: ignore[arg-type]


def _call_cost(source: str, args: dict[str, Any], backend: str) -> tuple[float, str]:
    """CPU seconds of one ``PolicySet.evaluate`` with the expression as its rule."""
    policies = _policies(source, backend)
    gc.collect()
    start = time.thread_time()
    decision = policies.evaluate("t", args, now=NOW)
    seconds = time.thread_time() - start
    errors = " ".join(e.message for e in decision.errors)
    note = ("input bound" if "size bound" in errors else "budget" if "cost limit" in errors
            else "error" if errors else decision.effect.value)
    return seconds, note


async def _accept(**arguments: Any) -> str:
    return "ok"


# A schema that accepts any argument (as an MCP tool's may): the rules see every one.
_SWEEP_TOOL = FunctionTool(func=_accept, name="t", description="Accepts any JSON.",
                           input_model={"type": "object", "properties": {},
                                        "additionalProperties": True})


def _guard_cost(policies: guardrails.PolicySet, args: dict[str, Any]) -> float:
    """CPU seconds inside the guard for the call in the real loop, plain and streaming: the
    larger."""
    worst = 0.0
    for stream in (False, True):
        run_mw, fn_mw = guard(policies)
        assert isinstance(fn_mw, GuardFunctionMiddleware)
        timed = TimedGuard(fn_mw)
        client = ScriptedChatClient([[call("t", **args)], [text("done")]])
        agent = Agent(client=client, tools=[_SWEEP_TOOL], middleware=[run_mw, timed])

        async def go(agent: Agent = agent, stream: bool = stream) -> None:
            with contextlib.suppress(guardrails.PolicyViolation):
                if stream:
                    async for _ in agent.run("go", stream=True, session=AgentSession()):
                        pass
                else:
                    await agent.run("go", session=AgentSession())

        gc.collect()
        asyncio.run(go())
        worst = max(worst, sum(timed.samples))
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="compiled", choices=("compiled", "closures"))
    parser.add_argument("--only", default="", help="run the cases whose name contains this")
    parser.add_argument("--no-guard", action="store_true", help="skip the real-loop figure")
    options = parser.parse_args()
    print(f"backend {options.backend}; budget {BUDGET:,} units for {BOUND_S * 1000:.0f} ms: "
          f"{UNIT_NS:.1f} ns a unit at most")
    print(f"{'case':34} {'units':>10} {'ns/unit':>9} {'x bound':>8}   {'call':>9} "
          f"{'x 50 ms':>8} {'guard':>8}  outcome")
    worst: tuple[float, str] = (0.0, "")
    worst_rate: tuple[float, str] = (0.0, "")
    for name, (source, make) in CASES.items():
        if options.only not in name:
            continue
        args = make()
        seconds, units, outcome = _expression_cost(source, args, options.backend)
        rate = seconds * 1e9 / max(units, 1)
        call_s, note = _call_cost(source, args, options.backend)
        guard_s = 0.0 if options.no_guard else _guard_cost(_policies(source, options.backend),
                                                            args)
        worst = max(worst, (max(call_s, guard_s), name))
        worst_rate = max(worst_rate, (rate / UNIT_NS, name))
        flag = "  <-- over the bound" if max(call_s, guard_s) > BOUND_S else ""
        print(f"{name:34} {units:>10,} {rate:>9.1f} {rate / UNIT_NS:>8.2f}   "
              f"{call_s * 1000:>7.1f}ms {call_s / BOUND_S:>8.2f} {guard_s / BOUND_S:>8.2f}  "
              f"{outcome}/{note}{flag}", flush=True)
    print(f"worst ns/unit: {worst_rate[1]} at {worst_rate[0]:.2f}x the bound's rate; "
          f"worst call: {worst[1]} at {worst[0] / BOUND_S:.2f}x the 50 ms bound")


if __name__ == "__main__":
    main()
