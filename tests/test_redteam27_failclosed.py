"""Red team 27d: promises 3 (fail closed) and 1 (every call decided before it runs).

An error in the guard, or in anything the guard depends on (the host's principal callable,
secret provider, counter store, logging handlers, OpenTelemetry processors, the tool's own
attributes), must never let a call through, crash the run, or hang it. All in the
framework's real loop (``ScriptedChatClient`` + ``Agent`` + ``guard(policies)``).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from agent_framework import Content, tool
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel, field_validator

import guardrails
from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework.scripted import call, result_text, text
from guardrails.telemetry import GuardTelemetry
from tests.af_support import STREAMING, RecordingTelemetry, agent_with, guarded, load_text, run
from tests.test_af_halts import BROKEN_TELEMETRY

RAN: list[tuple[str, Any]] = []

POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: pay}
spec:
  match: {tools: ["pay", "pay_later"]}
  rules:
    - {name: cap, when: 'args.amount > 100', action: deny, message: Over the cap.}
"""

ROLE_POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: pay}
spec:
  match: {tools: ["pay"]}
  rules:
    - {name: admins-only, when: 'principal.role != "admin"', action: deny}
"""

BLOCKED = "Error: the guard could not evaluate the call to pay, so it was blocked."


@tool(name="pay")
def pay(amount: int) -> str:
    """Pays an amount."""
    RAN.append(("pay", amount))
    return f"paid {amount}"


@pytest.fixture(autouse=True)
def _clear() -> Iterator[None]:
    RAN.clear()
    yield
    RAN.clear()


def _policies(tmp_path: Path, text_: str = POLICY) -> guardrails.PolicySet:
    return load_text(tmp_path, text_)


# -- the host's principal callable --------------------------------------------------------


class _Unprintable(Exception):
    """An exception whose text cannot be made: telemetry and logs must not need it."""

    def __str__(self) -> str:
        raise RuntimeError("no text")

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


class _HostDown(BaseException):
    """A host's own BaseException subclass (not a cancellation, not an exit)."""


def _raising(exc: BaseException) -> Any:
    def principal(_context: Any) -> dict[str, Any]:
        raise exc
    return principal


@STREAMING
@pytest.mark.parametrize("exc", [RuntimeError("down"), _Unprintable(), RecursionError(),
                                 MemoryError(), StopIteration(), StopAsyncIteration()],
                         ids=["runtime", "unprintable", "recursion", "memory", "stopiteration",
                              "stopasynciteration"])
async def test_a_principal_that_raises_blocks_the_call_and_the_run_goes_on(
        tmp_path: Path, stream: bool, exc: BaseException) -> None:
    client = ScriptedChatClient([[call("pay", amount=5)], [text("done")]])
    agent = agent_with(client, [pay], guard(_policies(tmp_path), principal=_raising(exc)))
    response = await run(agent, "go", stream=stream)
    assert RAN == []
    assert [result_text(r) for r in client.tool_results()] == [BLOCKED]
    assert response.text == "done"


@pytest.mark.parametrize("exc", [_HostDown(), GeneratorExit(), asyncio.CancelledError()],
                         ids=["own-baseexception", "generatorexit", "cancelled"])
async def test_a_principal_that_raises_a_base_exception_never_runs_the_call(
        tmp_path: Path, exc: BaseException) -> None:
    client = ScriptedChatClient([[call("pay", amount=5), call("pay", "c2", amount=6)],
                                 [text("done")]])
    agent = agent_with(client, [pay], guard(_policies(tmp_path), principal=_raising(exc)))
    # (The run ends: asyncio's own exceptions are not the guard's to swallow. A
    # GeneratorExit raised in a coroutine becomes Python's RuntimeError.)
    with pytest.raises((type(exc), RuntimeError)):
        await agent.run("go")
    assert RAN == []


class _Liar(str):
    """Says it equals anything: the guard judges its data, never its equality."""

    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False

    def __hash__(self) -> int:
        return str.__hash__(self)


class _EvilKey(str):
    def __eq__(self, other: object) -> bool:
        raise RuntimeError("no equality")

    def __hash__(self) -> int:
        return str.__hash__(self)


def _self_referencing() -> dict[str, Any]:
    me: dict[str, Any] = {"role": "admin"}
    me["me"] = me
    return me


@pytest.mark.parametrize("value", [
    ["role", "admin"],
    "admin",
    _self_referencing(),
    {_EvilKey("role"): "admin"},
    {"role": _EvilKey("user")},
    {"role": _Liar("user")},
    {"role": "admin", "blob": "x" * 3_000_000},
    {"role": "admin", **{f"k{i}": i for i in range(200_000)}},
    {"role": "admin", "groups": {"a", "b"}},
    {"role": "admin", 7: "not a str key"},
], ids=["list", "str", "self-reference", "evil-key", "evil-value", "liar-value", "huge-text",
        "huge-dict", "set", "int-key"])
async def test_a_principal_that_cannot_be_read_blocks_the_call(tmp_path: Path,
                                                               value: Any) -> None:
    client = ScriptedChatClient([[call("pay", amount=5)], [text("done")]])
    agent = agent_with(client, [pay], guard(_policies(tmp_path, ROLE_POLICY),
                                            principal=lambda _c: value))
    response = await agent.run("go")
    assert RAN == []
    assert response.text == "done"


async def test_the_admin_principal_runs_the_call(tmp_path: Path) -> None:
    """The oracle of the test above: a readable admin principal does run the call."""
    client = ScriptedChatClient([[call("pay", amount=5)], [text("done")]])
    agent = agent_with(client, [pay], guard(_policies(tmp_path, ROLE_POLICY),
                                            principal=lambda _c: {"role": "admin"}))
    await agent.run("go")
    assert RAN == [("pay", 5)]


# -- logging handlers that raise -----------------------------------------------------------


class _RaisingHandler(logging.Handler):
    """A host's handler that raises from ``emit`` (``Handler.handle`` does not catch it)."""

    def __init__(self, error: type[BaseException] = RuntimeError) -> None:
        super().__init__()
        self.error = error

    def emit(self, record: logging.LogRecord) -> None:
        raise self.error("handler down")


@contextmanager
def _raising_handler(name: str = "guardrails",
                     error: type[BaseException] = RuntimeError) -> Iterator[None]:
    handler = _RaisingHandler(error)
    logger = logging.getLogger(name)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


HALTING = POLICY.replace("rules:\n", "rules:\n    - {name: stop, when: 'args.amount > 1000',"
                         " action: halt, message: Absurd.}\n")


@STREAMING
async def test_a_halt_survives_a_logging_handler_that_raises(tmp_path: Path,
                                                             stream: bool) -> None:
    client = ScriptedChatClient([[call("pay", amount=5000), call("pay", "c2", amount=5)],
                                 [call("pay", amount=6)], [text("went on")]])
    agent = agent_with(client, [pay], guard(_policies(tmp_path, HALTING)))
    with _raising_handler(), pytest.raises(guardrails.PolicyViolation):
        await run(agent, "go", stream=stream)
    assert ("pay", 5000) not in RAN and ("pay", 6) not in RAN
    assert len(client.received) == 1  # the model was never asked again


@STREAMING
async def test_a_guard_error_is_blocked_under_a_logging_handler_that_raises(
        tmp_path: Path, stream: bool) -> None:
    client = ScriptedChatClient([[call("pay", amount=5)], [text("done")]])
    agent = agent_with(client, [pay], guard(_policies(tmp_path),
                                            principal=_raising(RuntimeError("down"))))
    with _raising_handler():
        response = await run(agent, "go", stream=stream)
    assert RAN == []
    assert [result_text(r) for r in client.tool_results()] == [BLOCKED]
    assert response.text == "done"


# -- the engine at a host's low recursion limit ---------------------------------------------

IGNORE_DEEP = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: deep}
spec:
  match: {tools: ["put"]}
  failurePolicy: Ignore
  rules:
    - {name: same, when: 'args.a == args.b', action: deny, message: The two must differ.}
"""
"""A rule whose evaluation recurses as deep as the arguments (list equality, in C, counts
against ``sys.getrecursionlimit()``), under ``Ignore``."""


@tool(name="put")
def put(a: Any, b: Any = None) -> str:
    """Stores two documents."""
    RAN.append(("put", a))
    return "stored"


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


def _stack_depth() -> int:
    frame, depth = sys._getframe(), 0
    while frame is not None:
        frame, depth = frame.f_back, depth + 1  # type: ignore[assignment]
    return depth


DEEP_DOC = _nested(25)  # within the 32 levels of the input bound


def _denied_at_every_low_limit(ps: guardrails.PolicySet) -> None:
    """Evaluates the deep call at recursion limits just above this stack: wherever the
    evaluation runs out of stack, the call is denied (and at some limit it does run out:
    the attack is real on this stack)."""
    seen_too_deep = False
    old = sys.getrecursionlimit()
    for headroom in range(20, 120, 2):
        sys.setrecursionlimit(_stack_depth() + headroom)
        try:
            decision = ps.evaluate("put", {"a": DEEP_DOC, "b": DEEP_DOC})
        except RecursionError:  # (ours, outside the engine: too low to call it at all)
            continue
        finally:
            sys.setrecursionlimit(old)
        seen_too_deep |= any("too deep" in e.message for e in decision.errors)
        assert decision.effect == guardrails.Effect.DENY, (headroom, decision.errors)
    assert seen_too_deep


def test_a_rule_that_runs_out_of_stack_is_no_skipped_rule(tmp_path: Path) -> None:
    """The engine alone: at a limit where the arguments are read (within the bounds) but
    the rule's evaluation runs out of stack, ``Ignore`` skipped the policy and the call was
    allowed. Now the call is over a bound, like one over the cost budget."""
    ps = _policies(tmp_path, IGNORE_DEEP)
    assert ps.evaluate("put", {"a": DEEP_DOC, "b": DEEP_DOC}).effect == guardrails.Effect.DENY
    _denied_at_every_low_limit(ps)


async def test_in_the_real_loop_a_low_recursion_limit_runs_no_deep_call(tmp_path: Path) -> None:
    """The same in the framework's loop, at every limit from where nothing can be read to
    where everything is (measured: 100-125 on a script's stack ran the call)."""
    ps = _policies(tmp_path, IGNORE_DEEP)
    results: list[str] = []
    old = sys.getrecursionlimit()
    base = _stack_depth()
    for headroom in range(40, 160, 4):
        client = ScriptedChatClient([[call("put", a=_nested(25), b=_nested(25))], [text("done")]])
        agent = agent_with(client, [put], guard(ps))
        sys.setrecursionlimit(base + headroom)
        try:
            await agent.run("go")
        except RecursionError:  # the framework's own, too low to run at all
            continue
        finally:
            sys.setrecursionlimit(old)
        results += [result_text(r) for r in client.tool_results()]
    assert RAN == []
    assert any("rules.same failed" in r for r in results)  # the rule did run out of stack


COSTLY_MATCH = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: costly}
spec:
  match: {tools: ["put"], when: 'args.a.exists(x, args.a.exists(y, x == y + 100000))'}
  failurePolicy: Ignore
  rules:
    - {name: always, when: 'true', action: deny}
"""
"""A policy whose ``match.when`` costs the square of the list's length, under ``Ignore``."""

DEEP_MATCH = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: deep}
spec:
  match: {tools: ["put"], when: 'args.a == args.b'}
  failurePolicy: Ignore
  rules:
    - {name: always, when: 'true', action: deny}
"""


def test_a_match_condition_run_over_the_cost_budget_selects_its_policy(tmp_path: Path) -> None:
    """Under ``Ignore`` the erring ``match.when`` left the policy unmatched, and the end of
    the call, which denies every matched policy of a call over a bound, had none: 3,000
    numbers (within the size bound) ran the call past its only policy."""
    ps = _policies(tmp_path, COSTLY_MATCH)
    assert ps.evaluate("put", {"a": list(range(10))}).effect == guardrails.Effect.ALLOW
    decision = ps.evaluate("put", {"a": list(range(3000))})
    assert decision.effect == guardrails.Effect.DENY, decision.errors
    assert any(e.element == "input" for e in decision.errors)


def test_a_match_condition_that_runs_out_of_stack_selects_its_policy(tmp_path: Path) -> None:
    ps = _policies(tmp_path, DEEP_MATCH)
    _denied_at_every_low_limit(ps)


@STREAMING
async def test_in_the_real_loop_a_costly_match_condition_runs_no_call(tmp_path: Path,
                                                                      stream: bool) -> None:
    client = ScriptedChatClient([[call("put", a=list(range(3000)))],
                                 [call("put", a=list(range(10)))], [text("done")]])
    agent = agent_with(client, [put], guard(_policies(tmp_path, COSTLY_MATCH)))
    await run(agent, "go", stream=stream)
    assert [("put", list(range(10)))] == RAN


PARSED = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: parsed}
spec:
  match: {tools: ["put"]}
  failurePolicy: Ignore
  rules:
    - {name: any-document, when: 'size(parseJSON(args.a)) > 0', action: deny}
"""


def test_a_library_function_that_runs_out_of_stack_is_no_skipped_rule(tmp_path: Path) -> None:
    """``parseJSON`` of a text within its depth bound (32) on a low limit: its own
    ``RecursionError`` (and any library function's, mapped to a ``CelError``) was an
    error of the rule, which ``Ignore`` skipped."""
    ps = _policies(tmp_path, PARSED)
    document = "[" * 30 + "1" + "]" * 30
    assert ps.evaluate("put", {"a": document}).effect == guardrails.Effect.DENY
    seen_too_deep = False
    old = sys.getrecursionlimit()
    for headroom in range(10, 120, 2):
        sys.setrecursionlimit(_stack_depth() + headroom)
        try:
            decision = ps.evaluate("put", {"a": document})
        except RecursionError:
            continue
        finally:
            sys.setrecursionlimit(old)
        seen_too_deep |= any("too deep" in e.message for e in decision.errors)
        assert decision.effect == guardrails.Effect.DENY, (headroom, decision.errors)
    assert seen_too_deep


# -- the host's secret provider and counter store -----------------------------------------

SECRET_POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: api}
spec:
  match: {tools: ["call_api"]}
  secrets:
    arguments: [api_key]
    inject:
      api_key: {env: RT27D_KEY}
  rules:
    - {name: internal, when: '!args.endpoint.startsWith("https://api.internal/")', action: deny}
"""


@tool(name="call_api")
def call_api(endpoint: str, api_key: str) -> str:
    """Calls an API with an injected key."""
    RAN.append(("call_api", endpoint))
    return "ok"


class _Vault:
    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def get(self, ref: str) -> Any:
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


class _Shouting(str):
    def __str__(self) -> str:
        raise RuntimeError("no text")


@STREAMING
@pytest.mark.parametrize("answer", [RuntimeError("vault down"), _Unprintable(), KeyError("x"),
                                    None, 12345, b"bytes-key", ["k"]],
                         ids=["runtime", "unprintable", "keyerror", "none", "int", "bytes",
                              "list"])
async def test_a_secret_provider_that_fails_blocks_the_call(tmp_path: Path, stream: bool,
                                                            answer: Any) -> None:
    client = ScriptedChatClient([[call("call_api", endpoint="https://api.internal/x",
                                       api_key="model-chosen")], [text("done")]])
    agent = agent_with(client, [call_api], guard(_policies(tmp_path, SECRET_POLICY),
                                                 secrets=_Vault(answer)))
    response = await run(agent, "go", stream=stream)
    assert RAN == []
    assert "could not evaluate the call to call_api" in result_text(client.tool_results()[0])
    assert response.text == "done"


async def test_a_secret_that_is_a_str_subclass_runs_as_its_data(tmp_path: Path) -> None:
    """The oracle of the test above: a provider that answers (a str subclass whose
    ``__str__`` raises) runs the call, with the data injected."""
    got: list[str] = []

    @tool(name="call_api")
    def checking(endpoint: str, api_key: str) -> str:
        """Calls an API with an injected key."""
        got.append(api_key)
        return "ok"

    client = ScriptedChatClient([[call("call_api", endpoint="https://api.internal/x",
                                       api_key="model-chosen")], [text("done")]])
    agent = agent_with(client, [checking], guard(_policies(tmp_path, SECRET_POLICY),
                                                 secrets=_Vault(_Shouting("s3cr3t-value"))))
    await agent.run("go")
    assert got == ["s3cr3t-value"] and type(got[0]) is str


COUNTED = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: daily}
spec:
  match: {tools: ["pay"]}
  counters:
    - {name: spent, key: '"all"', window: 1d, limit: 100, cost: 'args.amount',
       failurePolicy: Fail}
  rules:
    - {name: over, when: 'counters.spent.exceeded', action: deny}
"""


class _OddStore:
    """A counter store answering with what a store never should."""

    def __init__(self, answer: Any, blocking: bool) -> None:
        self.answer, self.blocking = answer, blocking

    def reserve(self, requests: Any) -> Any:
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer(requests) if callable(self.answer) else self.answer

    def release(self, reservations: Any) -> None:
        raise RuntimeError("release down")


def _granted_bool(requests: Any) -> Any:
    from guardrails.engine.counters import CounterResult
    return [CounterResult(True, True, None) for _ in requests]  # type: ignore[arg-type]


def _too_few(requests: Any) -> Any:
    return []


def _not_results(requests: Any) -> Any:
    return [{"count": 0, "granted": True} for _ in requests]


def _generator(requests: Any) -> Any:
    raise StopIteration  # a generator's end, raised from a plain function


@STREAMING
@pytest.mark.parametrize("blocking", [False, True], ids=["in-loop", "in-thread"])
@pytest.mark.parametrize("answer", [RuntimeError("down"), _Unprintable(), _granted_bool,
                                    _too_few, _not_results, None, 7, _generator],
                         ids=["runtime", "unprintable", "bool-count", "too-few", "dicts",
                              "none", "int", "stopiteration"])
async def test_a_counter_store_that_answers_oddly_denies_under_fail(
        tmp_path: Path, stream: bool, blocking: bool, answer: Any) -> None:
    client = ScriptedChatClient([[call("pay", amount=5)], [text("done")]])
    agent = agent_with(client, [pay], guard(_policies(tmp_path, COUNTED),
                                            counters=_OddStore(answer, blocking)))
    response = await run(agent, "go", stream=stream)
    assert RAN == []
    assert response.text == "done"


# -- the tool's own attributes ------------------------------------------------------------


async def test_a_tool_whose_description_raises_is_blocked(tmp_path: Path) -> None:
    from agent_framework import FunctionTool

    class Raising(FunctionTool):
        @property  # type: ignore[override]
        def description(self) -> str:
            raise RuntimeError("no description")

        @description.setter
        def description(self, value: str) -> None:
            pass

    def pay_fn(amount: int) -> str:
        RAN.append(("pay", amount))
        return "paid"

    raising = Raising(name="pay", description="x", func=pay_fn)
    client = ScriptedChatClient([[call("pay", amount=500)], [call("pay", amount=5)],
                                 [text("done")]])
    agent = agent_with(client, [raising], guard(_policies(tmp_path)))
    response = await agent.run("go")
    assert ("pay", 500) not in RAN
    assert response.text == "done"


# -- what the framework hands over --------------------------------------------------------


@tool(name="pay_later")
def pay_later(amount: int = 500) -> str:
    """Pays an amount, 500 unless told."""
    RAN.append(("pay_later", amount))
    return f"paid {amount}"


@STREAMING
@pytest.mark.parametrize("arguments", ["null", "true", "1.5", '"amount"', "[]", "[500]",
                                       '{"amount": 500, "amount": 5}'])
async def test_arguments_that_are_json_but_no_object_never_run_unjudged(
        tmp_path: Path, stream: bool, arguments: str) -> None:
    """A tool whose every parameter has a default: what runs is what was judged (its
    default of 500 is over the cap), or nothing runs."""
    raw = Content.from_function_call(call_id="c1", name="pay_later", arguments=arguments)
    client = ScriptedChatClient([[raw], [text("done")]])
    agent = agent_with(client, [pay_later], guard(_policies(tmp_path)))
    response = await run(agent, "go", stream=stream)
    assert [r for r in RAN if r[1] > 100] == []
    assert response.text == "done"


@STREAMING
async def test_duplicate_call_ids_in_one_batch_are_each_judged(tmp_path: Path,
                                                               stream: bool) -> None:
    client = ScriptedChatClient([[call("pay", "same", amount=5),
                                  call("pay", "same", amount=5000),
                                  call("pay", "same", amount=6)], [text("done")]])
    agent = agent_with(client, [pay], guard(_policies(tmp_path)))
    await run(agent, "go", stream=stream)
    assert sorted(RAN) == [("pay", 5), ("pay", 6)]
    assert sum("Over the cap" in result_text(r) for r in client.tool_results()) == 1


@STREAMING
async def test_tools_given_at_run_time_are_guarded(tmp_path: Path, stream: bool) -> None:
    client = ScriptedChatClient([[call("pay", amount=5000)], [call("pay", amount=5)],
                                 [text("done")]])
    agent = agent_with(client, [], guard(_policies(tmp_path)))
    await run(agent, "go", stream=stream, tools=[pay])
    assert RAN == [("pay", 5)]


@STREAMING
async def test_a_function_middleware_given_at_run_time_does_not_unguard(
        tmp_path: Path, stream: bool) -> None:
    """A host's own function middleware passed per run (outside or inside the guard's)
    changes nothing of what the guard decides."""
    from agent_framework import FunctionInvocationContext, FunctionMiddleware

    class Passing(FunctionMiddleware):
        async def process(self, context: FunctionInvocationContext, call_next: Any) -> None:
            await call_next()

    client = ScriptedChatClient([[call("pay", amount=5000)], [call("pay", amount=5)],
                                 [text("done")]])
    agent = agent_with(client, [pay], guard(_policies(tmp_path)))
    await run(agent, "go", stream=stream, middleware=[Passing()])
    assert RAN == [("pay", 5)]


# -- parallel calls where one evaluation raises --------------------------------------------


@STREAMING
async def test_one_failing_evaluation_in_a_parallel_batch_blocks_only_its_call(
        tmp_path: Path, stream: bool) -> None:
    async def principal(context: Any) -> dict[str, Any]:
        await asyncio.sleep(0)  # the siblings decide meanwhile
        if context.metadata.get("call_id") == "c2":
            raise RuntimeError("directory down for this one")
        return {}

    client = ScriptedChatClient([[call("pay", "c1", amount=5),
                                  call("pay", "c2", amount=6),
                                  call("pay", "c3", amount=5000)], [text("done")]])
    agent = agent_with(client, [pay], guard(_policies(tmp_path), principal=principal))
    response = await run(agent, "go", stream=stream)
    assert RAN == [("pay", 5)]
    results = [result_text(r) for r in client.tool_results()]
    assert results[0] == "paid 5"
    assert results[1] == BLOCKED
    assert "Over the cap" in results[2]
    assert response.text == "done"


async def test_a_base_exception_in_one_parallel_evaluation_runs_no_sibling_after_it(
        tmp_path: Path) -> None:
    """The framework cancels the batch on a loud escape: a sibling still deciding never
    runs; one that was decided before may have run (it was allowed)."""
    async def principal(context: Any) -> dict[str, Any]:
        if context.metadata.get("call_id") == "c1":
            raise _HostDown()
        await asyncio.sleep(0.05)
        return {}

    client = ScriptedChatClient([[call("pay", "c1", amount=5),
                                  call("pay", "c2", amount=6)], [text("done")]])
    agent = agent_with(client, [pay], guard(_policies(tmp_path), principal=principal))
    with pytest.raises(_HostDown):
        await agent.run("go")
    assert RAN == []


# -- the tool's own validation raising something else than a ValidationError ---------------


class Payment(BaseModel):
    amount: int

    @field_validator("amount")
    @classmethod
    def _odd(cls, value: int) -> int:
        if value > 100:
            raise LookupError("a validator's own bug")  # not a ValueError
        return value


async def test_a_validator_that_raises_another_error_runs_nothing(tmp_path: Path) -> None:
    """Pinned as a limit: the framework validates the arguments before any function
    middleware and lets anything but a ``ValidationError`` (pydantic wraps ``ValueError``
    and ``AssertionError`` only) end the run, guarded or not. Nothing runs."""
    @tool(name="pay")
    def pay_model(payment: Payment) -> str:
        """Pays."""
        RAN.append(("pay", payment.amount))
        return "paid"

    policy = POLICY.replace("args.amount > 100", "args.payment.amount > 1000")
    client = ScriptedChatClient([[call("pay", payment={"amount": 500})],
                                 [call("pay", payment={"amount": 5})], [text("done")]])
    agent = agent_with(client, [pay_model], guard(_policies(tmp_path, policy)))
    with pytest.raises(LookupError):
        await agent.run("go")
    assert RAN == []
    assert len(client.received) == 1  # the model was never asked again


# -- what never answers ---------------------------------------------------------------------


@STREAMING
async def test_a_principal_that_never_answers_blocks_the_call_in_time(tmp_path: Path,
                                                                     stream: bool) -> None:
    """Bounded like a store's round trip (``store_timeout``); it held the run forever."""
    async def principal(_context: Any) -> dict[str, Any]:
        await asyncio.Event().wait()  # a directory that never answers
        return {}

    telemetry = RecordingTelemetry()
    client = ScriptedChatClient([[call("pay", amount=5)], [text("done")]])
    agent = agent_with(client, [pay], guarded(_policies(tmp_path), telemetry,
                                              principal=principal, store_timeout=0.2))
    response = await asyncio.wait_for(run(agent, "go", stream=stream), 10)
    assert RAN == []
    assert [type(f) for f in telemetry.failures] == [TimeoutError]
    assert [result_text(r) for r in client.tool_results()] == [BLOCKED]
    assert response.text == "done"


# -- telemetry that raises while the guard blocks a call ----------------------------------


@pytest.mark.parametrize("broken", BROKEN_TELEMETRY)
@pytest.mark.parametrize("exc", [RuntimeError("down"), _Unprintable()], ids=["runtime",
                                                                             "unprintable"])
async def test_a_guard_error_is_blocked_whatever_telemetry_raises(
        tmp_path: Path, broken: Any, exc: BaseException) -> None:
    telemetry = GuardTelemetry(**broken())
    client = ScriptedChatClient([[call("pay", amount=5)], [text("done")]])
    agent = agent_with(client, [pay], guarded(_policies(tmp_path), telemetry,
                                              principal=_raising(exc)))
    response = await agent.run("go")
    assert RAN == []
    assert [result_text(r) for r in client.tool_results()] == [BLOCKED]
    assert response.text == "done"


async def test_a_guard_error_with_an_unprintable_text_reaches_a_real_exporter(
        tmp_path: Path) -> None:
    """The real SDK, recording: the guard span ends with an error status naming the type
    only (the text of ``_Unprintable`` cannot be made)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry = GuardTelemetry(tracer_provider=provider)
    client = ScriptedChatClient([[call("pay", amount=5)], [text("done")]])
    agent = agent_with(client, [pay], guarded(_policies(tmp_path), telemetry,
                                              principal=_raising(_Unprintable())))
    await agent.run("go")
    assert RAN == []
    [span] = [s for s in exporter.get_finished_spans() if s.name.startswith("guardrails.guard")]
    assert span.status.status_code.name == "ERROR"


# -- a session whose guard state is garbage (restored from a store the host does not own) ---


class _Raising(dict):  # type: ignore[type-arg]
    def __getitem__(self, key: Any) -> Any:
        raise RuntimeError("unreadable")

    def get(self, key: Any, default: Any = None) -> Any:
        raise RuntimeError("unreadable")

    def __iter__(self) -> Any:
        raise RuntimeError("unreadable")


GARBAGE = [None, "text", 7, [1, 2], {"x": 1}, [None, "x", 3, {"tool": 5}], _Raising(),
           [{"tool": "pay", "args": "not a map", "effect": 9}]]


@pytest.mark.parametrize("key", ["history", "approvals", "request", "answered"])
@pytest.mark.parametrize("value", GARBAGE, ids=lambda v: type(v).__name__)
async def test_garbage_guard_state_never_runs_a_denied_call_nor_crashes_the_run(
        tmp_path: Path, key: str, value: Any) -> None:
    from agent_framework import AgentSession

    session = AgentSession()
    session.state["guardrails"] = {key: value}
    client = ScriptedChatClient([[call("pay", amount=5000)], [call("pay", amount=5)],
                                 [text("done")]])
    agent = agent_with(client, [pay], guard(_policies(tmp_path)))
    response = await agent.run("go", session=session)
    assert ("pay", 5000) not in RAN
    assert response.text == "done"


@pytest.mark.parametrize("value", GARBAGE, ids=lambda v: type(v).__name__)
async def test_a_garbage_guard_state_itself_never_crashes_the_run(tmp_path: Path,
                                                                  value: Any) -> None:
    from agent_framework import AgentSession

    session = AgentSession()
    session.state["guardrails"] = value
    client = ScriptedChatClient([[call("pay", amount=5000)], [call("pay", amount=5)],
                                 [text("done")]])
    agent = agent_with(client, [pay], guard(_policies(tmp_path)))
    response = await agent.run("go", session=session)
    assert ("pay", 5000) not in RAN
    assert response.text == "done"


VARIABLE_DEEP = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: deep}
spec:
  match: {tools: ["put"]}
  failurePolicy: Ignore
  variables:
    - {name: same, expression: 'args.a == args.b'}
  rules:
    - {name: same, when: 'variables.same || size(args.a) > 5', action: deny}
"""


def test_a_variable_that_runs_out_of_stack_is_no_skipped_rule(tmp_path: Path) -> None:
    """Through a variable (evaluated on the call's meter) and under ``||``: wherever the
    stack runs out, the call is over its bound."""
    ps = _policies(tmp_path, VARIABLE_DEEP)
    assert ps.evaluate("put", {"a": _nested(25), "b": _nested(25)}).effect == \
        guardrails.Effect.DENY
    _denied_at_every_low_limit(ps)
