"""The worst inputs we can construct, and what one guarded call costs on each (issue 10).

    .venv/bin/python benchmarks/worst_case.py [--quick]

Promise 8 of docs/security-model.md: any single guarded call costs at most 50 ms of CPU,
whatever the model sends. Each input below is a tool call's raw JSON-parsed arguments (or a
tool's result, or the session's history) built to make one of the guard's passes as slow as
possible: input normalisation, evaluation, history bookkeeping, scrubbing, telemetry and the
decision log. Policies: the whole library in ``policies/`` plus a regex-heavy policy (40
``matches`` rules over every string argument, ``untrusted()`` of a URL payload), all matching
the called tool.

Two figures per input, CPU time (``time.thread_time``) of one call, the best of a few:

- ``guard``: in the framework's real agent loop (``ScriptedChatClient``, a session, the
  logging decision sink at INFO, spans through the OpenTelemetry SDK), from the guard's
  function middleware's entry to its return, minus the time inside ``call_next`` (the
  framework's own argument validation and the tool). The framework's JSON parsing of the
  model's arguments happens before the middleware and is not ours to bound.
- ``evaluate``: ``PolicySet.evaluate`` alone on the same arguments.

The worst input and its figure are printed last; the 50 ms goal is reported as a ratio.

A cold history (``COLD``): the call's arguments are ordinary, but the session's history is
restored in a replica that has never read it (or a process whose text cache moved on),
its results as many and as long as the bounds keep (the guard's 50 of 64 KiB; 100 for
``evaluate``, the engine's bound), dense non-ASCII text that the provenance functions
read through their normalisation. Every repeat gets fresh texts: each call is a first one.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import itertools
import logging
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

from agent_framework import (  # noqa: E402
    Agent,
    AgentSession,
    FunctionInvocationContext,
    FunctionMiddleware,
    tool,
)
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

import guardrails  # noqa: E402
from guardrails.agent_framework import (  # noqa: E402
    GuardFunctionMiddleware,
    ScriptedChatClient,
    guard,
)
from guardrails.agent_framework._history import HISTORY_LIMIT, RESULT_LIMIT, redacted  # noqa: E402
from guardrails.agent_framework.scripted import call, text  # noqa: E402
from guardrails.engine.evaluate import Budget, InputError, normalize  # noqa: E402
from guardrails.engine.scrub import MAX_LAYER_CHARS, Scrubber  # noqa: E402
from guardrails.expr.lib_provenance import _CHECKED, kept_reading  # noqa: E402
from guardrails.expr.limits import DEFAULT_LIMITS  # noqa: E402

GOAL_S = 0.050
PRINCIPAL = {"tenant": "acme", "roles": [f"role-{i}" for i in range(200)],
             **{f"attr{i}": "x" for i in range(100)}}
"""A wide principal that a rule walks (the host's, so kept to a realistic size)."""
KB = 1024

REGEX_POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: regex-heavy}
spec:
  match: {tools: ["*"]}
  secrets:
    arguments: [payload]  # the call's secret values are spelled and searched per call
  rules:
""" + "".join(
    f"""    - name: r{i}
      when: >-
        args.exists(k, type(args[k]) == string && args[k].matches('(?i)a{i}[0-9a-f]{{8,}}z|b{i}.*c{i}')) ||
        args.exists(k, type(args[k]) == list && args[k].exists(v, type(v) == string &&
          v.matches('x{i}[^y]*y{i}')))
      action: deny
""" for i in range(40)) + """    - name: history-scan
      when: >-
        history.exists(h, h.args.exists(k, type(h.args[k]) == string &&
          h.args[k].matches('(?i)acme_[a-z0-9]{20,}')))
      action: deny
    - name: provenance-scan  # reads every result of the history (``COLD``)
      when: 'type(args.payload) == string && args.payload.startsWith("https://") && untrusted(args.payload)'
      action: deny
    - name: principal-scan
      when: >-
        principal.exists(k, k.startsWith('deny_')) ||
        principal.roles.exists(r, r.matches('^admin-[0-9]+$'))
      action: deny
"""


CHEAP_POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: cheap}
spec:
  match: {tools: [submit]}
  rules:
    - {name: no-admin, when: 'has(args.user) && args.user == "admin"', action: deny}
"""


def _near_misses(size: int) -> str:
    """Text full of almost-credentials: every redact pattern and credentials.found starts
    matching and fails late."""
    parts = ["AKIA" + "A" * 15 + " ", "ghp_" + "a" * 35 + " ", "xoxb-" + "-" * 9 + " ",
             "sk_live_" + "a" * 15 + " ", "sk-" + "a" * 19 + " ", "eyJ" + "a" * 7 + ".eyJ ",
             "-----BEGIN RSA PRIVATE KEY---- ", "password=" + "a" * 7 + " ",
             "Bearer " + "a" * 19 + " ", "http://u:p@", "a0" * 8 + "z "]
    unit = "".join(parts)
    return (unit * (size // len(unit) + 1))[:size]


def _fit(make: Callable[[int], Any], bound: int) -> Any:
    """``make(n)`` for the largest ``n`` whose arguments the engine still accepts (within
    the size bound): the worst case is just under a bound, not far over it."""
    lo, hi = 1, 1
    while _fits(make(hi * 2), bound):
        hi *= 2
    lo, hi = hi, hi * 2
    while hi - lo > max(1, lo // 100):
        mid = (lo + hi) // 2
        if _fits(make(mid), bound):
            lo = mid
        else:
            hi = mid
    return make(lo)


def _fits(args: Any, bound: int) -> bool:
    budget = Budget(bound)
    try:
        normalize(args, DEFAULT_LIMITS, budget)
    except InputError:
        return False
    return True


_DENSE = "\u3042\uff21\u200b"
"""Hiragana, a fullwidth letter, a zero-width space: two characters in three are rewritten
by the normalisation (``textforms.normal``), the costliest page to read."""
_PAGES = itertools.count()


def cold_history(entries: int, kept: bool = False) -> list[dict[str, Any]]:
    """``entries`` results of an untrusted tool, each ``RESULT_LIMIT`` characters of dense
    non-ASCII text never seen by this process (numbered: no cache holds them); with
    ``kept``, each with the reading the guard keeps when it records a result
    (``kept_reading``, made before the call: what a replica restores)."""
    out = []
    for _ in range(entries):
        n = next(_PAGES)
        page = (f"page {n} " + _DENSE * (RESULT_LIMIT // len(_DENSE) + 1))[:RESULT_LIMIT]
        entry = {"tool": "fetch", "args": {"url": f"https://news.example/{n}"},
                 "effect": "allow", "trusted": False, "result": page}
        if kept:
            entry["reading"] = kept_reading(page)
        out.append(entry)
    if kept:
        _CHECKED.clear()  # (cold: this process never checked them)
    return out


COLD = "a URL, after a cold history of dense non-ASCII pages"
COLD_KEPT = "a URL, after a cold history of dense pages, read kept"
"""``COLD`` with each result's reading kept (as the guard records them since record26)."""
"""The input whose history is ``cold_history``: its payload is a URL, which the regex-heavy
policy asks ``untrusted()`` of (every result of the history is read)."""


def inputs(quick: bool) -> dict[str, Callable[[], dict[str, Any]]]:
    """Name -> a factory of the tool call's arguments (each as large as the bounds allow)."""
    # room for the principal and a full history (50 entries of at most 4 KB each)
    bound = int(DEFAULT_LIMITS.max_input_bytes * 0.7)
    if quick:
        bound //= 10

    def deep(levels: int, width: int) -> Any:
        node: Any = [""] * width
        for _ in range(levels):
            node = {f"k{i}": node if i == 0 else "" for i in range(width)}
        return node

    # Factories, not values: one input is alive at a time (millions of live objects would
    # make every garbage collection during a call cost what walking them all costs).
    return {
        "150,000 empty strings (over the bound)": lambda: {"payload": [""] * 150_000},
        "300,000 empty strings (over the bound)": lambda: {"payload": [""] * 300_000},
        "95,000 three-character keys (over)": lambda: {"payload": {f"{i:x}"[-3:] + str(i): ""
                                                                   for i in range(95_000)}},
        "empty strings, as many as fit": lambda: _fit(lambda n: {"payload": [""] * n}, bound),
        "short keys, as many as fit": lambda: _fit(
            lambda n: {"payload": {f"k{i}": "" for i in range(n)}}, bound),
        "top-level arguments, as many as fit": lambda: _fit(
            lambda n: {f"a{i}": "" for i in range(n)}, bound),
        "31 levels deep, wide at every level": lambda: _fit(
            lambda n: {"payload": deep(30, n)}, bound),
        "one string of near-matches, as long as fits": lambda: _fit(
            lambda n: {"payload": _near_misses(n)}, bound),
        "60-character near-match strings, as many as fit": lambda: _fit(
            lambda n: {"payload": [_near_misses(60)] * n}, bound),
        "short lists in a list, as many as fit": lambda: _fit(
            lambda n: {"payload": [["a", "b"]] * n}, bound),
        "a non-ASCII secret argument, as long as a layer spells": lambda: {
            "payload": "é\u2028'" * (MAX_LAYER_CHARS // 3)},
        "a non-ASCII secret argument, over what a layer spells (blocked)": lambda: {
            "payload": "é\u2028'" * (MAX_LAYER_CHARS // 3 + 1)},
        "a non-ASCII secret argument of a million characters (over)": lambda: {
            "payload": "é" * 10**6},
        COLD: lambda: {"payload": "https://acme.com/report", "note": "the summary"},
        COLD_KEPT: lambda: {"payload": "https://acme.com/report", "note": "the summary"},
        "a typical call": lambda: {"payload": "hello", "note": "pay rent"},
    }


@tool
def submit(payload: Any = None, **extra: Any) -> str:
    """Submit a payload (accepts any JSON)."""
    return "ok " + _near_misses(200 * KB)  # a large result full of near-matches to scrub


class TimedGuard(FunctionMiddleware):
    """The guard's function middleware, timed from its entry, minus ``call_next`` (CPU of
    this thread). ``benchmarks/cost_sweep.py`` times its cases with it too."""

    def __init__(self, inner: GuardFunctionMiddleware) -> None:
        self.inner = inner
        self.samples: list[float] = []

    async def process(self, context: FunctionInvocationContext,
                      call_next: Callable[[], Awaitable[None]]) -> None:
        inside = 0.0

        async def timed_next() -> None:
            nonlocal inside
            t0 = time.thread_time()
            try:
                await call_next()
            finally:
                inside += time.thread_time() - t0

        t0 = time.thread_time()
        try:
            await self.inner.process(context, timed_next)
        finally:
            self.samples.append(time.thread_time() - t0 - inside)


async def _guarded_call(policies: guardrails.PolicySet, args: dict[str, Any],
                        session: AgentSession, repeat: int, provider: TracerProvider, *,
                        history: int, cold: bool = False, kept: bool = False) -> float:
    """The best of ``repeat`` calls, the session's history holding ``history`` earlier
    calls with the same arguments (the guard keeps 50), or with ``cold`` that many fresh
    results (``cold_history``) before each call."""
    run_mw, fn_mw = guard(policies, principal=PRINCIPAL, tracer_provider=provider)
    assert isinstance(fn_mw, GuardFunctionMiddleware)
    timed = TimedGuard(fn_mw)
    # The session's history as full as the guard keeps it: ``history`` entries, each what
    # the guard records of a call with these arguments (bounded, scrubbed).
    kept, truncated = redacted(args, frozenset(), Scrubber((), policies.redact))
    entry: dict[str, Any] = {"tool": "submit", "args": kept, "effect": "allow"}
    if truncated:
        entry["truncated"] = True
    session.state["guardrails"] = {"history": [dict(entry) for _ in range(history)]}
    for _ in range(repeat):
        if cold:
            session.state["guardrails"] = {"history": cold_history(history, kept)}
            gc.collect()
        client = ScriptedChatClient([[call("submit", **args)], [text("done")]])
        agent = Agent(client=client, tools=[submit], middleware=[run_mw, timed])
        # a halt is a decision like any other: its cost is what is measured
        with contextlib.suppress(guardrails.PolicyViolation):
            await agent.run("please submit it", session=session)
    return min(timed.samples[-repeat:])


def _evaluate(policies: guardrails.PolicySet, args: dict[str, Any], repeat: int,
              cold: int = 0, kept: bool = False) -> tuple[float, str]:
    """The best of ``repeat`` evaluations (with ``cold``, each after that many fresh
    results: ``cold_history``)."""
    best = float("inf")
    effect = ""
    for _ in range(repeat):
        history = cold_history(cold, kept) if cold else None
        gc.collect()
        t0 = time.thread_time()
        d = policies.evaluate("submit", args, principal=PRINCIPAL, request="submit",
                              history=history)
        best = min(best, time.thread_time() - t0)
        effect = d.effect.value + (f" ({d.errors[-1].message})" if d.errors else "")
    return best, effect


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="inputs a tenth of the size")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", default="", help="only the inputs whose name holds this")
    opts = parser.parse_args()
    logging.getLogger("guardrails.decisions").setLevel(logging.INFO)
    logging.getLogger("guardrails.decisions").addHandler(logging.NullHandler())
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "regex.yaml").write_text(REGEX_POLICY)
        (Path(tmp) / "cheap.yaml").write_text(CHEAP_POLICY)
        sets = {
            "the library and a regex-heavy policy (the call is denied or halted)":
                guardrails.load([ROOT / "policies", Path(tmp) / "regex.yaml"]),
            "one cheap rule (the call is allowed: the tool runs)":
                guardrails.load(Path(tmp) / "cheap.yaml"),
        }
    worst: tuple[float, str] = (0.0, "")
    for title, policies in sets.items():
        print(f"\n{title}: {len(policies.policies)} policies, "
              f"{sum(len(p.rules) for p in policies.policies)} rules")
        print(f"{'input':48} {'guard ms':>9} {'evaluate ms':>12}  decision")
        for name, make in inputs(opts.quick).items():
            if opts.only not in name:
                continue
            args = make()
            gc.collect()
            session = AgentSession()
            cold = name in (COLD, COLD_KEPT)
            read_kept = name == COLD_KEPT
            kept = (5 if opts.quick else HISTORY_LIMIT)
            guard_s = asyncio.run(_guarded_call(policies, args, session, opts.repeat,
                                                provider, history=kept, cold=cold,
                                                kept=read_kept))
            eval_s, effect = _evaluate(policies, args, opts.repeat,
                                       (10 if opts.quick else 100) if cold else 0, read_kept)
            print(f"{name:48} {guard_s * 1e3:9.1f} {eval_s * 1e3:12.1f}  {effect[:60]}",
                  flush=True)
            worst = max(worst, (guard_s, f"{name}, {title}"),
                        (eval_s, f"{name} (evaluate), {title}"))
    print(f"\nworst: {worst[1]}: {worst[0] * 1e3:.1f} ms = {worst[0] / GOAL_S:.2f}x the "
          f"{GOAL_S * 1e3:.0f} ms goal")
    return 0


if __name__ == "__main__":
    sys.exit(main())
