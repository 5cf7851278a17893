"""The worst inputs we can construct, and what one guarded call costs on each (issue 10).

    .venv/bin/python benchmarks/worst_case.py [--quick]

Promise 8 of docs/security-model.md: any single guarded call costs at most 50 ms of CPU,
whatever the model sends. Each input below is a tool call's raw JSON-parsed arguments (or a
tool's result, or the session's history) built to make one of the guard's passes as slow as
possible: input normalisation, evaluation, history bookkeeping, scrubbing, telemetry and the
decision log. Policies: the whole library in ``policies/`` plus a regex-heavy policy (40
``matches`` rules over every string argument), all matching the called tool.

Two figures per input, CPU time (``time.thread_time``) of one call, the best of a few:

- ``guard``: in the framework's real agent loop (``ScriptedChatClient``, a session, the
  logging decision sink at INFO, spans through the OpenTelemetry SDK), from the guard's
  function middleware's entry to its return, minus the time inside ``call_next`` (the
  framework's own argument validation and the tool). The framework's JSON parsing of the
  model's arguments happens before the middleware and is not ours to bound.
- ``evaluate``: ``PolicySet.evaluate`` alone on the same arguments.

The worst input and its figure are printed last; the 50 ms goal is reported as a ratio.
"""

from __future__ import annotations

import argparse
import asyncio
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
from guardrails.agent_framework.scripted import call, text  # noqa: E402

GOAL_S = 0.050
KB = 1024

REGEX_POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: regex-heavy}
spec:
  match: {tools: ["*"]}
  rules:
""" + "".join(
    f"""    - name: r{i}
      when: >-
        args.exists(k, type(args[k]) == string && args[k].matches('(?i)a{i}[0-9a-f]{{8,}}z|b{i}.*c{i}')) ||
        args.exists(k, type(args[k]) == list && args[k].exists(v, type(v) == string &&
          v.matches('x{i}[^y]*y{i}')))
      action: deny
""" for i in range(40))


def _near_misses(size: int) -> str:
    """Text full of almost-credentials: every redact pattern and credentials.found starts
    matching and fails late."""
    parts = ["AKIA" + "A" * 15 + " ", "ghp_" + "a" * 35 + " ", "xoxb-" + "-" * 9 + " ",
             "sk_live_" + "a" * 15 + " ", "sk-" + "a" * 19 + " ", "eyJ" + "a" * 7 + ".eyJ ",
             "-----BEGIN RSA PRIVATE KEY---- ", "password=" + "a" * 7 + " ",
             "Bearer " + "a" * 19 + " ", "http://u:p@", "a0" * 8 + "z "]
    unit = "".join(parts)
    return (unit * (size // len(unit) + 1))[:size]


def inputs(quick: bool) -> dict[str, dict[str, Any]]:
    """Name -> the tool call's arguments."""
    scale = 10 if quick else 1

    def deep(levels: int, width: int) -> Any:
        node: Any = [""] * width
        for _ in range(levels):
            node = {f"k{i}": node if i == 0 else "" for i in range(width)}
        return node

    return {
        "150,000 empty strings in a list": {"payload": [""] * (150_000 // scale)},
        "300,000 empty strings in a list": {"payload": [""] * (300_000 // scale)},
        "95,000 three-character keys": {"payload": {f"{i:03x}"[-3:] + str(i): ""
                                                    for i in range(95_000 // scale)}},
        "50,000 top-level arguments": {f"a{i}": "" for i in range(50_000 // scale)},
        "30 levels of 60-wide maps": {"payload": deep(30, 60)},
        "one 900 KB string of near-matches": {"payload": _near_misses(900 * KB // scale)},
        "10,000 near-match strings of 60 characters": {
            "payload": [_near_misses(60) for _ in range(10_000 // scale)]},
        "list of 20,000 short lists": {"payload": [["a", "b"] for _ in range(20_000 // scale)]},
        "a typical call": {"payload": "hello", "note": "pay rent"},
    }


@tool
def submit(payload: Any = None, **extra: Any) -> str:
    """Submit a payload (accepts any JSON)."""
    return "ok " + _near_misses(200 * KB)  # a large result full of near-matches to scrub


class _Timed(FunctionMiddleware):
    """The guard's function middleware, timed from its entry, minus ``call_next``."""

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
                        session: AgentSession, repeat: int, provider: TracerProvider) -> float:
    run_mw, fn_mw = guard(policies, principal={"tenant": "acme", "roles": ["a"] * 1000},
                          tracer_provider=provider)
    assert isinstance(fn_mw, GuardFunctionMiddleware)
    timed = _Timed(fn_mw)
    for _ in range(repeat):
        client = ScriptedChatClient([[call("submit", **args)], [text("done")]])
        agent = Agent(client=client, tools=[submit], middleware=[run_mw, timed])
        try:
            await agent.run("please submit it", session=session)
        except guardrails.PolicyViolation:
            pass  # a halt is a decision like any other: its cost is what is measured
    return min(timed.samples)


def _evaluate(policies: guardrails.PolicySet, args: dict[str, Any], repeat: int) -> tuple[float, str]:
    best = float("inf")
    effect = ""
    for _ in range(repeat):
        t0 = time.thread_time()
        d = policies.evaluate("submit", args, principal={"tenant": "acme"}, request="submit")
        best = min(best, time.thread_time() - t0)
        effect = d.effect.value + (f" ({d.errors[-1].message})" if d.errors else "")
    return best, effect


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="inputs a tenth of the size")
    parser.add_argument("--repeat", type=int, default=3)
    opts = parser.parse_args()
    logging.getLogger("guardrails.decisions").setLevel(logging.INFO)
    logging.getLogger("guardrails.decisions").addHandler(logging.NullHandler())
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "regex.yaml").write_text(REGEX_POLICY)
        policies = guardrails.load([ROOT / "policies", Path(tmp) / "regex.yaml"])
    print(f"policies: {len(policies.policies)}, rules: "
          f"{sum(len(p.rules) for p in policies.policies)}; goal {GOAL_S * 1e3:.0f} ms per call")
    print(f"{'input':44} {'guard ms':>9} {'evaluate ms':>12}  decision")
    worst: tuple[float, str] = (0.0, "")
    for name, args in inputs(opts.quick).items():
        session = AgentSession()
        # history full of the same input first (the bookkeeping of 50 earlier calls)
        guard_s = asyncio.run(_guarded_call(policies, args, session, opts.repeat + 2,
                                            provider))
        eval_s, effect = _evaluate(policies, args, opts.repeat)
        print(f"{name:44} {guard_s * 1e3:9.1f} {eval_s * 1e3:12.1f}  {effect[:70]}")
        worst = max(worst, (guard_s, name), (eval_s, name + " (evaluate)"))
    print(f"worst: {worst[1]}: {worst[0] * 1e3:.1f} ms = {worst[0] / GOAL_S:.2f}x the "
          f"{GOAL_S * 1e3:.0f} ms goal")
    return 0


if __name__ == "__main__":
    sys.exit(main())
