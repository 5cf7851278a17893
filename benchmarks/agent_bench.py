"""Cost of the guard on a whole agent run, as a ratio to the unguarded run (issue 7).

    .venv/bin/python benchmarks/agent_bench.py [--runs 300] [--warmup 30] [--profile]
                                               [--clock wall|cpu]

One run of ``await agent.run(...)`` on the offline scripted chat client of the tests
(guardrails.agent_framework.ScriptedChatClient): the "model" calls ``send_money`` once, then answers. Variants:

- unguarded: the same agent without middleware;
- guarded: ``guard()`` with benchmarks/engine_policies.yaml (20 rules matching
  ``send_money``) plus 200 generated policies for other tools, default telemetry (the
  global OpenTelemetry providers: no SDK here, so no-op; the logging decision sink, INFO off);
- guarded, telemetry off: the same guard with a telemetry object that does nothing, so the
  difference is what telemetry costs;
- guarded, 20 rules only: without the 200 other policies, so the difference is what the
  unrelated policies cost (they should be skipped by the engine's tool index);
- guarded with a chat middleware, as before: ``guard()`` plus a chat middleware doing what
  ``GuardChatMiddleware`` did until session 6 (the check for arguments the framework cannot
  parse, on every model response), so the difference is what the guard saves by checking
  each batch of calls where the framework executes it instead;
- pass-through middleware: an agent and a function middleware (the two kinds ``guard()``
  returns) that only call ``call_next``: what the framework's middleware dispatch costs
  before a guard does anything; and each kind alone, a chat middleware's too (run once per
  model request, twice a run here; ``guard()`` no longer adds one), so the dispatch cost is
  known per kind;
- the anchor (issue 14's): ``PlainPythonGuard``, one function middleware doing the same 20
  checks in plain Python; and the floor: the anchor behind a pass-through agent middleware,
  the dispatch any guard with a run boundary pays (``guard()`` needs one: the request, the
  run's state, a halt turned into ``PolicyViolation``) before it does any work;
- guarded, one rule and the repair (``ONE_RULE``): every step of the integration with a
  twentieth of the rules, so the difference from the 20-rule guard is the rules' cost in
  the loop.

Then the garbage a run leaves to the cyclic collector (objects freed by refcounting cost
nothing there; objects in reference cycles wait for a collection, and every 700 of them
left over trigger one): per variant, the cyclic objects one run leaves, and runs with the
collector on against the same runs with it off (alternated run by run, in one process: the
collector's time lands in whichever run allocates when it fires, which medians hide, so
these are means), with the collections' own time from ``gc.callbacks``.

Then a breakdown of the guarded run's extra time, every part measured in the same
interleaved runs (means, so the parts add up: see ``_breakdown``): the framework's dispatch,
the guard's bodies, and within them the engine (``evaluate``, ``redact``) and the
argument-snapshot token; outside them the framework's checks and collections; the batch check (``_unreadable.check_batch``, which runs where the framework
executes a batch, outside the middleware) timed on its own.

The call sends benchmarks/run.py's arguments, principal and request, except the amount:
"1,000.00" instead of "1,500.00". It still needs the repair (the guard sees the raw string),
but the decision is ``allow``, so the tool runs in every variant (at 1,500 the decision is
require_approval, which without a session is a denial: the guarded run would do less work).
The check before timing asserts the effect, the repair and the tool's result in every variant.

Iterations interleave the variants (in a shuffled order, seeded: a rotating order made the
variant in one position some 50 µs slower, whatever it was, which inflated the guarded run
and the telemetry figure) so drift hits them alike; the
figures are medians of single runs. One machine, one run: a ratio, not an absolute promise. ``--block 50`` runs each variant 50
times in a row when its turn comes instead (the first untimed): the same work hot, each run
after its own, so its difference from the default is what the caches cost.
``--profile`` adds a cProfile of the guarded variant: the functions whose own time is largest.
``--steps`` (``--cold``: with an unguarded and an anchor run before each guarded one, as
the interleaved runs have) instead times every step of the guard's own code inside real guarded runs
(default telemetry): each function's own time (what it calls that is timed too, and what the
middleware call next, left out; the timer's own cost taken off), median per run, with calls
per run: the list of what the guard runs per call and per run, and what each costs.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import functools
import gc
import importlib.util
import inspect
import io
import pstats
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import agent_framework._tools as af_tools  # noqa: E402
from agent_framework import (  # noqa: E402
    Agent,
    AgentContext,
    AgentMiddleware,
    ChatContext,
    ChatMiddleware,
    ChatResponse,
    Content,
    FunctionInvocationContext,
    FunctionMiddleware,
    Message,
    tool,
)
from agent_framework._tools import _argument_authority_token  # noqa: E402
from tests.af_support import RecordingTelemetry, guarded  # noqa: E402

import guardrails  # noqa: E402
from guardrails.agent_framework import (  # noqa: E402
    GuardFunctionMiddleware,
    GuardRunMiddleware,
    ScriptedChatClient,
    _unreadable,
    guard,
)
from guardrails.agent_framework import _private as guard_private  # noqa: E402
from guardrails.agent_framework._secrets import install_log_filter  # noqa: E402
from guardrails.agent_framework._state import RUN  # noqa: E402
from guardrails.agent_framework.scripted import call, text  # noqa: E402
from guardrails.engine.decision import Decision  # noqa: E402
from guardrails.telemetry import CallSpan, GuardTelemetry  # noqa: E402

CLOCK: list[Callable[[], int]] = [time.perf_counter_ns]
"""What a run is timed with: wall-clock time (the default), or with ``--clock cpu`` the
process's CPU time (``time.process_time_ns``: every thread, the tool's worker thread
included), which a machine busy with other work inflates far less."""


def _engine_bench() -> Any:
    """benchmarks/run.py, for the arguments the 20 rules expect and the generated policies."""
    spec = importlib.util.spec_from_file_location("guardrails_engine_bench", HERE / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ENGINE = _engine_bench()
ARGS: dict[str, Any] = {**ENGINE.ARGS, "amount": "1,000.00"}
PRINCIPAL: dict[str, Any] = ENGINE.PRINCIPAL
REQUEST: str = ENGINE.REQUEST
EXPECTED_RESULT = "sent 1000.00 EUR to GB12ABCD"


@tool
def send_money(recipient: str, amount: float | str, currency: str, memo: str,
               reference: str) -> str:
    """Send money to a payee."""
    # Unguarded, the tool must cope with the model's "1,000.00" itself; guarded, the
    # policy's repair hands it a float.
    value = float(amount.replace(",", "")) if isinstance(amount, str) else amount
    return f"sent {value:.2f} {currency} to {recipient}"


def _turn(messages: Sequence[Message]) -> list[Content]:
    """The scripted model: one call to send_money, then an answer once it has the result."""
    if any(c.type == "function_result" for m in messages for c in m.contents):
        return [text("paid")]
    return [call("send_money", **ARGS)]


class _PassAgent(AgentMiddleware):
    async def process(self, context: AgentContext, call_next: Callable[[], Awaitable[None]]) -> None:
        await call_next()


class _PassFunction(FunctionMiddleware):
    async def process(self, context: FunctionInvocationContext,
                      call_next: Callable[[], Awaitable[None]]) -> None:
        await call_next()


class _PassChat(ChatMiddleware):
    async def process(self, context: ChatContext, call_next: Callable[[], Awaitable[None]]) -> None:
        await call_next()


class PlainPythonGuard(FunctionMiddleware):
    """The issue's anchor: one function middleware doing the same 20 checks in plain Python
    (benchmarks/run.py's ``plain_python``), repairing the amount as the policy does and
    refusing a call whose answer is not ``allow``. It is handed the principal and the user's
    words as constants (a real one would have to find them: it is the cheaper side)."""

    async def process(self, context: FunctionInvocationContext,
                      call_next: Callable[[], Awaitable[None]]) -> None:
        args = dict(context.arguments)
        if ENGINE.plain_python(args, PRINCIPAL, [], REQUEST) != "allow":
            context.result = "refused by policy"
            return
        amount = args.get("amount")
        if isinstance(amount, str):
            args["amount"] = float(amount.replace(",", ""))
            context.arguments = args
        await call_next()


class _ChatCheckAsBefore(ChatMiddleware):
    """What ``GuardChatMiddleware`` did until session 6: the same check of every model
    response's calls (``_unreadable.repair``), as a chat middleware. Non-streaming only (the
    benchmark does not stream)."""

    async def process(self, context: ChatContext, call_next: Callable[[], Awaitable[None]]) -> None:
        await call_next()
        run = RUN.get()
        if run is not None and isinstance(context.result, ChatResponse):
            _unreadable.repair([c for m in context.result.messages for c in m.contents], run)


class _NullSpan(CallSpan):
    def __init__(self) -> None:
        pass

    def record(self, decision: Decision, duration_s: float, *, approved: bool = False) -> None:
        pass

    def fail(self, error: BaseException) -> None:
        pass


class NullTelemetry(GuardTelemetry):
    """Telemetry off: no span, no metric, no decision record."""

    @contextmanager
    def call_span(self, *, tool: str, call_id: str | None) -> Iterator[CallSpan]:
        yield _NullSpan()

    def record_halt(self, decision: Decision) -> None:
        pass


def _agent(middleware: Sequence[Any]) -> tuple[Agent, ScriptedChatClient]:
    client = ScriptedChatClient(default=_turn)
    return Agent(client=client, tools=[send_money], middleware=list(middleware)), client


def _guard_without_telemetry(policies: guardrails.PolicySet) -> list[Any]:
    install_log_filter()
    telemetry = NullTelemetry()
    return [GuardRunMiddleware(policies, telemetry=telemetry),
            GuardFunctionMiddleware(policies, principal=PRINCIPAL, telemetry=telemetry)]


ONE_RULE = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: one-rule}
spec:
  match: {tools: [send_money]}
  repairs:
    - name: amount-as-string
      when: 'type(args.amount) == string'
      set:
        amount: 'double(args.amount.replace(",", ""))'
  rules:
    - {name: over-cap, when: 'args.amount > 10000.0', action: deny}
"""
"""The 20-rule policy's repair and one of its rules, alone: a guard deciding this call
does every step of the integration (the same repair, validation, snapshot, history,
scrubbing) with about a twentieth of the rules' work, so the difference between the two
guards is what the rules cost inside the loop."""


def _load_one(tmp: Path) -> guardrails.PolicySet:
    (tmp / "one.yaml").write_text(ONE_RULE)
    return guardrails.load(tmp / "one.yaml")


def _load(tmp: Path) -> tuple[guardrails.PolicySet, guardrails.PolicySet]:
    (tmp / "payments.yaml").write_text((HERE / "engine_policies.yaml").read_text())
    (tmp / "others.yaml").write_text(ENGINE.generated_policies(200))
    full = guardrails.load(tmp)
    only = guardrails.load(tmp / "payments.yaml")
    names = {p.name for p in full.policies}
    assert len(names) == 201 and "payments" in names, len(names)
    return full, only


async def _check(name: str, agent: Agent, client: ScriptedChatClient) -> None:
    response = await agent.run(REQUEST)
    results = [c for m in client.received[-1] for c in m.contents if c.type == "function_result"]
    assert len(client.received) == 2 and len(results) == 1, (name, client.received)
    assert str(results[0].result).startswith(EXPECTED_RESULT), (name, results[0].result)
    assert response.text == "paid", (name, response.text)
    client.received.clear()


async def _bench(variants: dict[str, tuple[Agent, ScriptedChatClient]], runs: int,
                 warmup: int, block: int = 1) -> dict[str, list[float]]:
    """``runs`` timed runs of each variant after ``warmup``, the variants interleaved in a
    shuffled order. ``block``: consecutive runs of one variant each time its turn comes
    (1, the default: every run follows other variants' runs, with the caches they leave;
    50: nearly every run follows its own, hot), the first of a block untimed when
    ``block`` > 1."""
    for name, (agent, client) in variants.items():
        await _check(name, agent, client)
    names = list(variants)
    samples: dict[str, list[float]] = {name: [] for name in names}
    shuffle = random.Random(14).shuffle
    gc.collect()
    gc.freeze()  # the long-lived policies and framework objects: out of every collection
    rounds = warmup + runs if block == 1 else (warmup + runs + block - 2) // (block - 1)
    for i in range(rounds):
        order = names[:]
        shuffle(order)
        for name in order:
            agent, client = variants[name]
            for j in range(block):
                start = CLOCK[0]()
                await agent.run(REQUEST)
                elapsed = CLOCK[0]() - start
                client.received.clear()
                timed = i >= warmup if block == 1 else j > 0 and i * (block - 1) >= warmup
                if timed:
                    samples[name].append(elapsed / 1000)
    return samples


_GC_VARIANTS = ("unguarded", "pass-through middleware", "guarded (default telemetry)")
_GC_BLOCK = 50
"""Runs of one variant in one mode between two full collections: long enough for the
collector's rhythm (a young collection per 700 objects left, an older one per ten)."""


class _GcClock:
    """``gc.callbacks`` entry: the time spent in collections, and how many there were."""

    def __init__(self) -> None:
        self.ns = 0
        self.collections = 0
        self._start = 0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = CLOCK[0]()
        else:
            self.ns += CLOCK[0]() - self._start
            self.collections += 1


async def _cyclic_left(agent: Agent, client: ScriptedChatClient) -> int:
    """The objects one run leaves in reference cycles: what a collection right after it
    finds unreachable, the collector off during the run."""
    gc.collect()
    gc.disable()
    try:
        await agent.run(REQUEST)
        client.received.clear()
        return gc.collect()
    finally:
        gc.enable()


async def _garbage(variants: dict[str, tuple[Agent, ScriptedChatClient]], runs: int) -> None:
    """What the cyclic collector costs a run, per variant: blocks of runs of one variant
    with the collector on, and the same with it off, alternated (in a shuffled order), a
    full collection (untimed) before each block; means per run."""
    names = [name for name in _GC_VARIANTS if name in variants]
    left = {name: await _cyclic_left(*variants[name]) for name in names}
    clock = _GcClock()
    totals = {(name, on): [0, 0, 0, 0] for name in names for on in (True, False)}
    shuffle = random.Random(7).shuffle
    gc.collect()
    gc.freeze()
    gc.callbacks.append(clock)
    try:
        for _ in range(max(1, runs // _GC_BLOCK)):
            blocks = [(name, on) for name in names for on in (True, False)]
            shuffle(blocks)
            for name, on in blocks:
                agent, client = variants[name]
                gc.collect()
                clock.ns = clock.collections = 0
                if not on:
                    gc.disable()
                try:
                    start = CLOCK[0]()
                    for _ in range(_GC_BLOCK):
                        await agent.run(REQUEST)
                        client.received.clear()
                    elapsed = CLOCK[0]() - start
                finally:
                    gc.enable()
                total = totals[name, on]
                total[0] += elapsed
                total[1] += clock.ns
                total[2] += clock.collections
                total[3] += _GC_BLOCK
    finally:
        gc.callbacks.remove(clock)
    print(f"garbage left to the cyclic collector (blocks of {_GC_BLOCK} runs, collector on "
          "and off alternated; means per run):")
    print(f"  {'variant':30} {'cyclic objects':>14} {'collections':>11} {'in gc µs':>8} "
          f"{'on µs':>7} {'off µs':>7} {'on-off µs':>9}")
    for name in names:
        t_on, gc_ns, count, n = totals[name, True]
        t_off, _, _, n_off = totals[name, False]
        on, off = t_on / n / 1000, t_off / n_off / 1000
        print(f"  {name:30} {left[name]:14d} {count / n:11.3f} {gc_ns / n / 1000:8.1f} "
              f"{on:7.1f} {off:7.1f} {on - off:9.1f}")


async def _profile(agent: Agent, client: ScriptedChatClient, runs: int, top: int) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(runs):
        await agent.run(REQUEST)
        client.received.clear()
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    return out.getvalue()


class _Timed:
    """Accumulates the time spent in one function while it is wrapped."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.ns = 0
        self.calls = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        clock = CLOCK[0]
        start = clock()
        try:
            return self.fn(*args, **kwargs)
        finally:
            self.ns += clock() - start
            self.calls += 1


class _Stopwatch:
    """Time spent in middleware bodies, minus the time spent in what they call next (by the
    run's clock: ``CLOCK``)."""

    def __init__(self) -> None:
        self.ns = 0

    async def around(self, process: Callable[[Callable[[], Awaitable[None]]], Awaitable[None]],
                     call_next: Callable[[], Awaitable[None]]) -> None:
        clock = CLOCK[0]
        inner = 0

        async def timed_next() -> None:
            nonlocal inner
            start = clock()
            try:
                await call_next()
            finally:
                inner += clock() - start

        start = clock()
        try:
            await process(timed_next)
        finally:
            self.ns += clock() - start - inner


def _watched(middleware: Any, watch: _Stopwatch) -> Any:
    """``middleware`` with its body timed by ``watch`` (an instance attribute over the
    class's ``process``, set before the agent is built)."""
    process = middleware.process

    async def timed(context: Any, call_next: Callable[[], Awaitable[None]]) -> None:
        await watch.around(lambda nxt: process(context, nxt), call_next)

    middleware.process = timed
    return middleware


EVALUATE = "PolicySet.evaluate() (engine)"
REDACT = "PolicySet.redact() (engine)"
SNAPSHOT = "snapshot token, the guard's (framework code)"
CHECK = "snapshot token, framework's check before the tool"
COMPARE = "framework's comparison tokens"
BATCH = "the batch check (unreadable arguments)"
_INSTALLED: list[Any] = []


@contextmanager
def _instrumented(policies: guardrails.PolicySet) -> Iterator[dict[str, _Timed]]:
    """Time, inside real guarded runs, the parts of a guarded call that are not the guard's
    own code. Instance attributes shadow the PolicySet methods; the framework's private token
    function is swapped in the two modules that call it."""
    # The framework's check runs whatever its module holds: the guard's fast tokens once a
    # guard installed them (guard_private.install_fast_tokens), else its own.
    installed = af_tools._argument_authority_token, af_tools._argument_comparison_token
    _INSTALLED[:] = [installed[1]]
    batch_check = guard_private._BATCH_CHECK[0]
    timers = {EVALUATE: _Timed(policies.evaluate), REDACT: _Timed(policies.redact),
              SNAPSHOT: _Timed(_argument_authority_token),
              CHECK: _Timed(installed[0]), COMPARE: _Timed(installed[1]),
              BATCH: _Timed(batch_check)}
    policies.evaluate = timers[EVALUATE]  # type: ignore[method-assign]
    policies.redact = timers[REDACT]  # type: ignore[method-assign]
    guard_private._argument_authority_token = timers[SNAPSHOT]  # type: ignore[attr-defined]
    af_tools._argument_authority_token = timers[CHECK]
    af_tools._argument_comparison_token = timers[COMPARE]
    guard_private._BATCH_CHECK[0] = timers[BATCH]
    try:
        yield timers
    finally:
        guard_private._BATCH_CHECK[0] = batch_check
        del policies.evaluate, policies.redact
        guard_private._argument_authority_token = _argument_authority_token  # type: ignore[attr-defined]
        af_tools._argument_authority_token, af_tools._argument_comparison_token = installed


async def _breakdown(policies: guardrails.PolicySet, runs: int) -> None:
    """Where a guarded run's extra time goes, per run, every part measured in the same runs:
    the unguarded agent, the pass-through two, the guard with default telemetry and the
    guard with telemetry off, interleaved (shuffled); the middleware bodies of each timed
    (minus what they call next), inside the guard the engine and the snapshot token, outside
    the bodies the framework's checks before the tool, and the collections (``gc.callbacks``).

    Means, not medians: the parts of a mean add up to it, so nothing is left unaccounted by
    construction. What a guarded run adds is the framework's dispatch (pass-through minus
    unguarded), the guard's bodies (minus the pass-through's), and what the framework's own
    code costs more outside the bodies in a guarded run than in a pass-through one: work the
    guard makes it do (the checks of the snapshot and of the prepared arguments), the
    collections of its garbage, and the same code run colder (caches and branch predictors
    after the guard's code: ``--profile`` and a line count show the framework running no
    more code in a guarded run than in a pass-through one).
    """
    install_log_filter()
    watches = {name: _Stopwatch() for name in ("pass", "guard", "off")}
    per_run: dict[str, dict[str, list[float]]] = {}
    shuffle = random.Random(21).shuffle
    collector = _GcClock()
    with _instrumented(policies) as timers:
        # Built inside: a guard may keep bound methods of the policies (``redact``).
        telemetry: dict[str, GuardTelemetry] = {"guard": GuardTelemetry(),
                                                 "off": NullTelemetry()}
        variants: dict[str, tuple[Agent, ScriptedChatClient]] = {
            "unguarded": _agent([]),
            "pass": _agent([_watched(m, watches["pass"])
                            for m in (_PassAgent(), _PassFunction())]),
        }
        for name, t in telemetry.items():
            variants[name] = _agent([_watched(m, watches[name]) for m in (
                GuardRunMiddleware(policies, telemetry=t),
                GuardFunctionMiddleware(policies, principal=PRINCIPAL, telemetry=t))])
        for name, (agent, client) in variants.items():
            await _check(name, agent, client)
        names = list(variants)
        clock = CLOCK[0]
        gc.collect()
        gc.freeze()
        gc.callbacks.append(collector)
        try:
            for i in range(runs + runs // 10):
                shuffle(names)
                for name in names:
                    agent, client = variants[name]
                    watch = watches.get(name)
                    inside = watch.ns if watch is not None else 0
                    before = {part: (t.ns, t.calls) for part, t in timers.items()}
                    in_gc = collector.ns
                    start = clock()
                    await agent.run(REQUEST)
                    total = clock() - start
                    client.received.clear()
                    if i < runs // 10:  # warm-up
                        continue
                    row = per_run.setdefault(name, {})
                    row.setdefault("total", []).append(total / 1000)
                    row.setdefault("inside", []).append(
                        (watch.ns - inside) / 1000 if watch is not None else 0.0)
                    row.setdefault("gc", []).append((collector.ns - in_gc) / 1000)
                    for part, t in timers.items():
                        row.setdefault(part, []).append((t.ns - before[part][0]) / 1000)
                        row.setdefault(f"{part} calls", []).append(t.calls - before[part][1])
        finally:
            gc.callbacks.remove(collector)
    mean = {name: {part: statistics.fmean(v) for part, v in row.items()}
            for name, row in per_run.items()}
    guard, off, passing, base = mean["guard"], mean["off"], mean["pass"], mean["unguarded"]
    extra = guard["total"] - base["total"]
    bodies = guard["inside"] - passing["inside"]
    own = guard["inside"] - guard[EVALUATE] - guard[REDACT] - guard[SNAPSHOT]
    framework = (guard["total"] - guard["inside"]) - (passing["total"] - passing["inside"])
    compare = guard[COMPARE] - passing[COMPARE]
    n_guard = len(per_run["guard"]["total"])

    def calls(part: str) -> str:
        return f"x{statistics.median(per_run['guard'][part + ' calls']):g}"

    rows = [
        ("framework middleware dispatch (pass-through two minus unguarded)",
         passing["total"] - base["total"]),
        ("the guard's two bodies minus the pass-through's, of which:", bodies),
        (f"  {EVALUATE} {calls(EVALUATE)}", guard[EVALUATE]),
        (f"  {REDACT} {calls(REDACT)}", guard[REDACT]),
        (f"  {SNAPSHOT} {calls(SNAPSHOT)}", guard[SNAPSHOT]),
        ("  telemetry (default minus off, in the bodies)", guard["inside"] - off["inside"]),
        ("  the guard's own code, telemetry included", own - passing["inside"]),
        ("the framework outside the bodies, guarded minus pass-through, of which:", framework),
        (f"  {CHECK} {calls(CHECK)}", guard[CHECK]),
        (f"  {COMPARE} {calls(COMPARE)}, minus the pass-through's", compare),
        (f"  {BATCH} {calls(BATCH)}", guard[BATCH]),
        ("  garbage collections, guarded minus pass-through", guard["gc"] - passing["gc"]),
        ("  the rest (the same code run colder, noise)",
         framework - guard[CHECK] - compare - guard[BATCH] - (guard["gc"] - passing["gc"])),
    ]
    medians = {name: statistics.median(row["total"]) for name, row in per_run.items()}
    print(f"where the {extra:.0f} µs a guarded run adds go (default telemetry; means per run of "
          f"{n_guard} instrumented runs of each variant, interleaved; the medians' difference: "
          f"{medians['guard'] - medians['unguarded']:.0f} µs; fast tokens installed in the "
          f"framework: {_INSTALLED[0] is guard_private.argument_token}):")
    for name, value in rows:
        print(f"  {name:72} {value:8.1f} µs")


class _Steps:
    """Each timed step's own time in one run: inclusive time minus the timed steps inside it
    (and the middleware's ``call_next``) minus the timer's own cost for each of those (a
    timed coroutine costs its caller more than a timed function: each is calibrated)."""

    def __init__(self) -> None:
        self.own: dict[str, list[int]] = {}  # name -> [ns this run, calls this run]
        # Per open step: [inner ns, timed functions inside, timed coroutines inside].
        self._children: list[list[int]] = []
        self.overhead = 0
        self.overhead_async = 0

    def _close(self, name: str, elapsed: int, counted: bool, kind: int) -> None:
        inner, functions, coroutines = self._children.pop()
        if counted:
            entry = self.own.setdefault(name, [0, 0])
            entry[0] += (elapsed - inner - functions * self.overhead
                         - coroutines * self.overhead_async)
            entry[1] += 1
        if self._children:
            self._children[-1][0] += elapsed
            self._children[-1][kind] += 1

    def wrap(self, name: str, fn: Callable[..., Any], *, counted: bool = True) -> Any:
        clock = time.perf_counter_ns
        if inspect.iscoroutinefunction(fn):
            async def timed_async(*args: Any, **kwargs: Any) -> Any:
                self._children.append([0, 0, 0])
                start = clock()
                try:
                    return await fn(*args, **kwargs)
                finally:
                    self._close(name, clock() - start, counted, 2)
            return functools.wraps(fn)(timed_async)

        def timed(*args: Any, **kwargs: Any) -> Any:
            self._children.append([0, 0, 0])
            start = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                self._close(name, clock() - start, counted, 1)
        return functools.wraps(fn)(timed)

    async def calibrate(self) -> None:
        """The time one timed call (function, coroutine) adds to its caller beyond the call."""
        def bare() -> None:
            pass

        async def bare_async() -> None:
            pass

        timed, timed_async = self.wrap("calibration", bare), self.wrap("calibration", bare_async)
        rounds: list[float] = []
        rounds_async: list[float] = []
        for _ in range(15):
            self._children.append([0, 0, 0])
            with_timer, with_timer_async = await _loop(timed), await _loop(timed_async)
            self._children.pop()
            plain, plain_async = await _loop(bare), await _loop(bare_async)
            rounds.append((with_timer - plain) / 2000)
            rounds_async.append((with_timer_async - plain_async) / 2000)
        self.overhead = int(statistics.median(rounds))
        self.overhead_async = int(statistics.median(rounds_async))
        self.own.clear()


async def _loop(fn: Callable[[], Any]) -> int:
    """ns for 2,000 calls of ``fn``, each awaited when it returns an awaitable."""
    start = time.perf_counter_ns()
    for _ in range(2000):
        result = fn()
        if result is not None:
            await result
    return time.perf_counter_ns() - start


_STEP_MODULES = {
    # module (as the guard's code looks the name up) -> functions timed there
    "guardrails.agent_framework._function": (
        "as_mapping", "json_view", "same_json", "apply_repairs", "history_of", "plain_entry",
        "record", "record_unbuilt", "redacted", "set_result", "tool_aliases", "plain_result",
        "scrub_result", "scrub_host_payload", "unreadable_message", "session_state",
        "stored_request", "approval_id_for", "is_approved_response"),
    "guardrails.agent_framework._private": (
        "prepared_arguments", "prepare_arguments", "record_argument_snapshot",
        "validated_as_they_are", "_with_defaults"),
    "guardrails.agent_framework._boundary": (
        "run_request", "agent_names", "run_mcp_tools", "_set_mcp_tools"),
    "guardrails.agent_framework._unreadable": ("repair",),
}
_STEP_METHODS = {
    "guardrails.agent_framework._function:GuardFunctionMiddleware": (
        "process", "_plan", "_settle", "_validate", "_act", "_run_tool", "_call_tool",
        "_running", "_injections", "_scrubber", "_record", "trusted", "_memory_for",
        "_injects_of", "_facts_of"),
    "guardrails.agent_framework._boundary:GuardRunMiddleware": ("process",),
    "guardrails.telemetry:GuardTelemetry": (
        "call_span", "run_span", "attach_run_span", "detach_run_span", "end_run_span", "_log_enabled", "_silent",
        "_can_record"),
    "guardrails.telemetry:CallSpan": ("record", "_record_metrics", "call_id",
                                      "mark_call_id_clean"),
    "guardrails.telemetry:_QuietCall": ("__enter__", "__exit__"),
    "guardrails.telemetry:_SilentSpan": ("record", "mark_call_id_clean"),
    "guardrails.engine.policyset:PolicySet": ("evaluate", "input_error", "counts"),
}
_NEXT_OF = ("guardrails.agent_framework._function:GuardFunctionMiddleware",
            "guardrails.agent_framework._boundary:GuardRunMiddleware")


@contextmanager
def _stepped(steps: _Steps) -> Iterator[None]:
    """Every step in ``_STEP_MODULES`` and ``_STEP_METHODS`` timed while inside; each
    middleware's ``call_next`` timed as a step of its own that is not listed."""
    undo: list[tuple[Any, str, Any]] = []

    def swap(owner: Any, name: str, value: Any) -> None:
        undo.append((owner, name, owner.__dict__[name] if isinstance(owner, type)
                     else getattr(owner, name)))
        setattr(owner, name, value)

    for module_name, names in _STEP_MODULES.items():
        module = sys.modules[module_name]
        for name in names:
            swap(module, name, steps.wrap(f"{module_name.rsplit('.', 1)[1]}.{name}",
                                          getattr(module, name)))
    for where, names in _STEP_METHODS.items():
        module_name, class_name = where.split(":")
        cls = getattr(sys.modules[module_name], class_name)
        for name in names:
            raw = cls.__dict__[name]
            label = f"{class_name}.{name}"
            if isinstance(raw, staticmethod):
                swap(cls, name, staticmethod(steps.wrap(label, raw.__func__)))
            elif name == "process" and where in _NEXT_OF:
                swap(cls, name, steps.wrap(label, _with_timed_next(steps, raw)))
            else:
                swap(cls, name, steps.wrap(label, raw))
    # The batch check runs where the framework executes a batch, from the list it was
    # installed in (``_private.install_batch_check``).
    batch_check = guard_private._BATCH_CHECK[0]
    guard_private._BATCH_CHECK[0] = steps.wrap("_unreadable.check_batch", batch_check)
    try:
        yield
    finally:
        guard_private._BATCH_CHECK[0] = batch_check
        for owner, name, value in reversed(undo):
            setattr(owner, name, value)


def _with_timed_next(steps: _Steps, process: Any) -> Any:
    async def timed_process(self: Any, context: Any, call_next: Any) -> None:
        await process(self, context, steps.wrap("call_next", call_next, counted=False))
    return timed_process


async def _step_costs(policies: guardrails.PolicySet, runs: int, warmup: int,
                      cold: bool = False) -> None:
    """The guard's own steps, each timed inside real guarded runs (default telemetry).
    ``cold``: an unguarded run and the anchor's (untimed) before each guarded one, as in
    the interleaved runs whose medians the row compares, so each step is timed with the
    caches the framework's own work leaves it."""
    steps = _Steps()
    await steps.calibrate()
    others = [_agent([]), _agent([PlainPythonGuard()])] if cold else []
    with _stepped(steps):
        agent, client = _agent(guard(policies, principal=PRINCIPAL))
        await _check("stepped guard", agent, client)
        per_run: dict[str, list[tuple[float, int]]] = {}
        gc.collect()
        for i in range(warmup + runs):
            for other, other_client in others:
                await other.run(REQUEST)
                other_client.received.clear()
            steps.own.clear()
            await agent.run(REQUEST)
            client.received.clear()
            if i >= warmup:
                for name, (ns, calls) in steps.own.items():
                    per_run.setdefault(name, []).append((ns / 1000, calls))
    rows = sorted(((statistics.median(t for t, _ in values), name,
                    statistics.median(c for _, c in values))
                   for name, values in per_run.items()), reverse=True)
    engine = {"PolicySet.evaluate"}
    own = sum(t for t, name, _ in rows if name not in engine)
    print(f"the guard's steps, {'cold (an unguarded and an anchor run before each), ' if cold else ''}"
          f"own time (median per run of {runs}; the timer's {steps.overhead} ns "
          f"a timed function, {steps.overhead_async} ns a timed coroutine, taken off its caller):")
    for t, name, calls in rows:
        print(f"  {name:46} {t:7.2f} µs  x{calls:g}")
    print(f"  {'sum, the engine (PolicySet.evaluate) left out':46} {own:7.2f} µs")


async def main_async(opts: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="guardrails-agent-bench-") as tmp:
        full, only = _load(Path(tmp))
        one = _load_one(Path(tmp))
    recording = RecordingTelemetry()
    agent, client = _agent(guarded(full, recording, principal=PRINCIPAL))
    await _check("recording guard", agent, client)
    [decision] = recording.decisions  # the decision the guard made inside a real run
    assert decision.effect is guardrails.Effect.ALLOW and not decision.errors, decision
    assert [r.repair for r in decision.repairs] == ["amount-as-string"], decision.repairs
    print(f"decision: {decision.effect.value}, {len(decision.rules)} rules fired, "
          f"{len(decision.repairs)} repair(s), {len(full.policies)} policies loaded")

    variants = {
        "unguarded": _agent([]),
        "pass-through middleware": _agent([_PassAgent(), _PassFunction()]),
        "pass-through agent only": _agent([_PassAgent()]),
        "pass-through function only": _agent([_PassFunction()]),
        "pass-through chat only": _agent([_PassChat()]),
        "plain-Python middleware (anchor)": _agent([PlainPythonGuard()]),
        "anchor + pass-through agent (floor)": _agent([_PassAgent(), PlainPythonGuard()]),
        "guarded (default telemetry)": _agent(guard(full, principal=PRINCIPAL)),
        "guarded + chat check, as before": _agent([*guard(full, principal=PRINCIPAL),
                                                   _ChatCheckAsBefore()]),
        "guarded (telemetry off)": _agent(_guard_without_telemetry(full)),
        "guarded, 20-rule policy only": _agent(guard(only, principal=PRINCIPAL)),
        "guarded, one rule and the repair": _agent(guard(one, principal=PRINCIPAL)),
    }
    if opts.steps:
        await _step_costs(full, opts.runs, opts.warmup, opts.cold)
        return
    samples = await _bench(variants, opts.runs, opts.warmup, opts.block)
    base = statistics.median(samples["unguarded"])
    blocks = "" if opts.block == 1 else f" in blocks of {opts.block} consecutive runs (the first untimed)"
    print(f"{len(samples['unguarded'])} runs per variant after {opts.warmup} warm-up, "
          f"interleaved{blocks} ({opts.clock} clock)")
    print(f"{'variant':36} {'median µs':>10} {'extra µs':>9} {'ratio':>6}")
    for name, values in samples.items():
        med = statistics.median(values)
        print(f"{name:36} {med:10.1f} {med - base:9.1f} {med / base:6.3f}")
    with_guard = statistics.median(samples["guarded (default telemetry)"])
    off = statistics.median(samples["guarded (telemetry off)"])
    before = statistics.median(samples["guarded + chat check, as before"])
    anchor = statistics.median(samples["plain-Python middleware (anchor)"])
    floor = statistics.median(samples["anchor + pass-through agent (floor)"])
    one_rule = statistics.median(samples["guarded, one rule and the repair"])
    print(f"anchor (plain-Python middleware, 20 checks) / unguarded: {anchor / base:.3f}; "
          f"guarded / anchor: {with_guard / anchor:.3f}")
    print(f"floor (the anchor behind a pass-through agent middleware, as guard() needs a run "
          f"boundary) / unguarded: {floor / base:.3f}; guarded / floor: {with_guard / floor:.3f}; "
          f"one rule and the repair / floor: {one_rule / floor:.3f} (the 19 other rules in "
          f"the loop: {with_guard - one_rule:.1f} µs)")
    print(f"ratio guarded/unguarded: {with_guard / base:.3f} (target <= 1.10); "
          f"telemetry off: {off / base:.3f}; with the chat check as before: "
          f"{before / base:.3f} (guarded now / as before: {with_guard / before:.3f})")
    dispatch = {kind: statistics.median(samples[f"pass-through {kind} only"]) - base
                for kind in ("agent", "function", "chat")}
    print("framework dispatch per kind (pass-through alone minus unguarded): "
          + ", ".join(f"{kind} {value:.1f} µs" for kind, value in dispatch.items()))
    await _garbage(variants, opts.runs)
    await _breakdown(full, opts.runs)
    if opts.profile:
        agent, client = variants["guarded (default telemetry)"]
        print(await _profile(agent, client, opts.runs, opts.top))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--profile", action="store_true", help="cProfile the guarded variant")
    ap.add_argument("--top", type=int, default=40, help="functions shown by --profile")
    ap.add_argument("--steps", action="store_true",
                    help="time each step of the guard's own code instead (see the docstring)")
    ap.add_argument("--block", type=int, default=1,
                    help="consecutive runs of one variant per turn (50: hot runs; see _bench)")
    ap.add_argument("--cold", action="store_true",
                    help="with --steps: an unguarded and an anchor run before each guarded one")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="time runs by wall clock or by the process's CPU time")
    opts = ap.parse_args()
    if opts.clock == "cpu":
        CLOCK[0] = time.process_time_ns
    asyncio.run(main_async(opts))


if __name__ == "__main__":
    main()
