"""A guarded call leaves nothing of ours to the cyclic collector.

Objects in a reference cycle are not freed when the call ends: they wait for a collection
(one per 700 left over), with everything they hold (the call's inputs, its bindings). The
guard's own cycles were a policy's ``Variables`` and the bindings holding each other, a
failed variable remembered as its exception (whose traceback holds the map), and caught
errors kept in a local, a list or a slot of the frame their traceback holds (a fused rule
function's failures, the first error of ``&&``, ``||`` and macros, both backends). Each test runs with the collector
off and counts what one collection finds afterwards: zero for ``evaluate`` (both paths,
both backends), and, in the real agent loop, exactly what the same agent with pass-through
middleware of the two kinds ``guard()`` returns leaves (the framework's own dispatch
closures, which are not ours).
"""

from __future__ import annotations

import gc
import types
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_framework import (
    AgentContext,
    AgentMiddleware,
    FunctionInvocationContext,
    FunctionMiddleware,
)

import guardrails
from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework.scripted import call, text
from tests.af_support import STREAMING, agent_with, run
from tests.af_tools import send_money

POLICY = """\
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: pay}
spec:
  match: {tools: ["send_money"]}
  params: {limit: 100, known: ["GB1", "GB2"]}
  variables:
    - {name: big, expression: 'args.amount > params.limit'}
    - {name: ratio, expression: 'args.amount / args.divisor'}
    - {name: label, expression: 'string(args.amount) + " EUR"'}
  repairs:
    - name: amount-text
      when: 'type(args.amount) == string'
      set: {amount: 'double(args.amount.replace(",", ""))'}
  rules:
    - name: too-big
      when: 'variables.big'
      action: deny
      messageExpression: '"too big: " + variables.label'
    - name: ratio
      when: 'has(args.divisor) && variables.ratio > 1000.0'
      action: deny
      message: ratio
    - name: either
      when: 'args.missing > 1 || args.recipient == "GB9"'
      action: deny
      message: either
    - name: unknown
      when: '!(args.recipient in params.known)'
      action: require_approval
"""

CALLS = [
    {"recipient": "GB1", "amount": "5.00"},  # repaired, allowed
    {"recipient": "GB1", "amount": 500.0},  # a rule with a message expression fires
    {"recipient": "GB1", "amount": 5.0, "divisor": "x"},  # a variable fails
    {"recipient": "GB9", "amount": 5.0},  # an error absorbed by ||, then a rule fires
    {"recipient": "XX", "amount": 5.0},  # require_approval
    {"recipient": "GB1", "amount": [1, 2]},  # a type error in a variable and a rule
]


@pytest.fixture(scope="module", params=["compiled", "closures"])
def policies(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
             ) -> guardrails.PolicySet:
    folder: Path = tmp_path_factory.mktemp(f"garbage-{request.param}")
    (folder / "pay.yaml").write_text(POLICY)
    return guardrails.load(folder, backend=request.param)


@pytest.fixture
def collector_off() -> Iterator[None]:
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _left_over(action: Callable[[], Any]) -> int:
    """What a collection right after ``action`` finds unreachable (the collector off)."""
    gc.collect()
    action()
    return gc.collect()


@pytest.mark.usefixtures("collector_off")
@pytest.mark.parametrize("args", CALLS, ids=[str(i) for i in range(len(CALLS))])
def test_evaluate_leaves_no_cycle(policies: guardrails.PolicySet, args: dict[str, Any]) -> None:
    decision = policies.evaluate("send_money", args)  # warm: plans and caches are built
    assert _left_over(lambda: policies.evaluate("send_money", args)) == 0, decision


@pytest.mark.usefixtures("collector_off")
@pytest.mark.parametrize("args", CALLS, ids=[str(i) for i in range(len(CALLS))])
def test_general_path_leaves_no_cycle(policies: guardrails.PolicySet,
                                      args: dict[str, Any]) -> None:
    def general() -> None:
        policies._decide("send_money", args, None, None, None, "", None, None)

    general()
    assert _left_over(general) == 0


def test_the_failures_are_still_reported(policies: guardrails.PolicySet) -> None:
    """The cycles broke without changing what a failure reports (a failed variable is
    raised again on every read with the same message, on both paths)."""
    for args in CALLS:
        short = policies.evaluate("send_money", args)
        general = policies._decide("send_money", args, None, None, None, "", None, None)
        assert (short.effect, short.errors, short.rules) == (
            general.effect, general.errors, general.rules), args
    failed = policies.evaluate("send_money", CALLS[2])
    assert [(e.element, e.message) for e in failed.errors] == [
        ("rules.ratio", "variable ratio: no matching overload for '_/_' applied to "
                        "(double, string)"),
        ("rules.either", "no such key: missing")], failed.errors
    assert failed.effect is guardrails.Effect.DENY


class _PassAgent(AgentMiddleware):
    async def process(self, context: AgentContext, call_next: Callable[[], Awaitable[None]]) -> None:
        await call_next()


class _PassFunction(FunctionMiddleware):
    async def process(self, context: FunctionInvocationContext,
                      call_next: Callable[[], Awaitable[None]]) -> None:
        await call_next()


def _turn(arguments: dict[str, Any]) -> Callable[[Any], list[Any]]:
    def turn(messages: Any) -> list[Any]:
        if any(c.type == "function_result" for m in messages for c in m.contents):
            return [text("done")]
        return [call("send_money", **{k: v for k, v in arguments.items()
                                      if k in ("recipient", "amount")})]
    return turn


def _ours(garbage: list[Any]) -> list[str]:
    """What in a collection's garbage is the guard's own: an object of a class of this
    package, a frame of its code (or of generated ``<cel>`` code), an exception."""
    found = []
    for item in garbage:
        kind = type(item)
        if kind.__module__.startswith("guardrails"):
            found.append(kind.__qualname__)
        elif isinstance(item, BaseException):
            found.append(repr(item))
        elif isinstance(item, types.FrameType):
            name = item.f_code.co_filename
            if name == "<cel>" or "/guardrails/" in name:
                found.append(f"frame {item.f_code.co_name} ({name})")
    return found


@STREAMING
@pytest.mark.usefixtures("collector_off")
@pytest.mark.parametrize("args", [CALLS[0], CALLS[1], CALLS[3], CALLS[4]],
                         ids=["allow", "deny", "absorbed-error", "approval"])
async def test_a_guarded_run_leaves_only_the_frameworks_cycles(
        policies: guardrails.PolicySet, args: dict[str, Any], stream: bool) -> None:
    """Garbage a guarded run leaves holds objects of the guard only where the framework's
    own cycles (its dispatch closures and contexts) hold them (the argument snapshot's
    tuples in the call's metadata): nothing of the guard's own, run after run."""
    client = ScriptedChatClient(default=_turn(args))
    agent = agent_with(client, [send_money], guard(policies))
    plain = agent_with(ScriptedChatClient(default=_turn(args)), [send_money],
                       [_PassAgent(), _PassFunction()])
    counts = []
    for _ in range(3):  # the first run builds caches; then every run is the same
        gc.collect()
        await run(plain, "pay GB1", stream=stream)
        framework = gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            await run(agent, "pay GB1", stream=stream)
            gc.collect()
            assert _ours(gc.garbage) == []
            counts.append((len(gc.garbage), framework))
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
    assert counts[-1] == counts[-2], counts
    assert counts[-1][0] <= counts[-1][1] + 16, counts  # the snapshot's tuples, a few more
