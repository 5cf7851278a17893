"""Red team 27: promise 4 (halts cannot be forged or hidden) attacked in the framework's
real loop, streaming and not.

Forging: a tool raising the guard's halt type subclassed, or an exception carrying a real
halt of an earlier run as its cause, context or argument, or a third party's
``MiddlewareFailure`` chained to one; a tool returning a real halt, a ``PolicyViolation``
or the halt's own text as its result. Hiding: an agent middleware inside the boundary that
swallows the halt, turns it into an ``ExceptionGroup`` or ends the run gracefully; a
function middleware that turns it into ``MiddlewareTermination``; a halt on an approved
replay (the policies changed while the call waited); a halt in a streamed run whose
consumer only asks for the final response; a parallel sibling that swallows its
cancellation. None of these got through: each is pinned here.

Found: a function middleware before the guard that turned the halt into a result, a tool
error or an ``ExceptionGroup`` did not hide the halt, but the framework (not streaming)
sent the halted batch's results, its siblings' included, to the model once more before the
run ended. A guarded batch now ends the loop when its run was halted
(``_unreadable.batch_done``, run by ``_private``'s batch wrapper).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from agent_framework import (
    AgentContext,
    AgentMiddleware,
    AgentResponse,
    FunctionInvocationContext,
    FunctionMiddleware,
    Message,
    MiddlewareFailure,
    MiddlewareTermination,
    tool,
)

from guardrails import PolicyViolation
from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework._boundary import _GuardHalt
from guardrails.agent_framework.scripted import call, result_text, text
from tests.af_support import (
    STREAMING,
    agent_with,
    approve_all,
    clear_calls_fixture,
    load_text,
    policies_fixture,
    run,
)
from tests.af_tools import CALLS, send_money

_clear_calls = clear_calls_fixture()
policies = policies_fixture()

HALT = {"recipient": "UK12", "amount": 500000}  # payments.yaml: absurd-amount halts


async def _real_halt(policies: Any) -> _GuardHalt:
    """A real halt of a finished run: the guard's own failure, with the decision it minted."""
    client = ScriptedChatClient([[call("send_money", **HALT)]])
    with pytest.raises(PolicyViolation) as caught:
        await agent_with(client, [send_money], guard(policies)).run("x")
    return _GuardHalt(caught.value.decision)


def _raising(make: Callable[[], BaseException]) -> Any:
    @tool(name="risky")
    def risky() -> str:
        """Raises what the test makes."""
        raise make()

    return risky


def _returning(value: Any) -> Any:
    @tool(name="risky")
    def risky() -> Any:
        """Returns what the test hands it."""
        return value

    return risky


class _SubHalt(_GuardHalt):
    """The guard's halt type, subclassed by someone else."""


def _chained(real: _GuardHalt, how: str) -> BaseException:
    if how == "subclass":
        return _SubHalt(real.decision)
    if how == "cause":
        error = RuntimeError("tool failed")
        error.__cause__ = real
        return error
    if how == "context":
        try:
            raise real
        except _GuardHalt:
            try:
                raise RuntimeError("tool failed")
            except RuntimeError as error:
                return error
    if how == "argument":
        return RuntimeError(real)
    if how == "failure-caused-by-halt":
        failure = MiddlewareFailure("third party")
        failure.__cause__ = real
        return failure
    if how == "failure-carrying-the-decision":
        failure = MiddlewareFailure("third party")
        failure.decision = real.decision  # type: ignore[attr-defined]
        return failure
    raise AssertionError(how)


FORGERIES = ["subclass", "cause", "context", "argument", "failure-caused-by-halt",
             "failure-carrying-the-decision"]


@STREAMING
@pytest.mark.parametrize("how", FORGERIES)
async def test_a_real_halt_a_tool_carries_in_its_exception_is_not_a_halt(
        policies: Any, stream: bool, how: str) -> None:
    """A real halt of an earlier run, under another type or inside another exception:
    the run is not halted by it (a tool error goes back to the model; a third party's
    ``MiddlewareFailure`` propagates as raised)."""
    real = await _real_halt(policies)
    client = ScriptedChatClient([[call("risky")]], default=[text("went on")])
    agent = agent_with(client, [_raising(lambda: _chained(real, how))], guard(policies))
    try:
        response = await run(agent, "go", stream=stream)
    except PolicyViolation as violation:  # pragma: no cover - the break
        pytest.fail(f"a halt carried by {how} was unwrapped: {violation}")
    except MiddlewareFailure as failure:
        assert how in ("subclass", "failure-caused-by-halt", "failure-carrying-the-decision")
        assert type(failure) is not _GuardHalt
    else:
        assert response.text == "went on"


@STREAMING
@pytest.mark.parametrize("what", ["halt", "violation", "halt-text"])
async def test_a_halt_a_tool_returns_is_only_a_result(policies: Any, stream: bool,
                                                      what: str) -> None:
    """A tool's result is text for the model, whatever it holds: a real halt object, a
    ``PolicyViolation``, or the words a halt would say."""
    real = await _real_halt(policies)
    value = {"halt": real, "violation": PolicyViolation(real.decision),
             "halt-text": str(PolicyViolation(real.decision))}[what]
    client = ScriptedChatClient([[call("risky")]], default=[text("went on")])
    agent = agent_with(client, [_returning(value)], guard(policies))
    response = await run(agent, "go", stream=stream)
    assert response.text == "went on"
    assert "halted" in str(PolicyViolation(real.decision))  # (the words being mimicked)
    assert client.tool_results() and result_text(client.tool_results()[0]) is not None


# --- hiding a real halt -------------------------------------------------------------------

class _InsideAgent(AgentMiddleware):
    """An agent middleware listed after the guard (inside its boundary) that hides what
    the run raised: swallowed into a normal answer, wrapped in an ``ExceptionGroup``, or
    ended as ``MiddlewareTermination``."""

    def __init__(self, how: str) -> None:
        self.how = how

    async def process(self, context: AgentContext,
                      call_next: Callable[[], Awaitable[None]]) -> None:
        try:
            await call_next()
        except Exception as exc:
            if self.how == "swallow":
                context.result = AgentResponse(messages=[Message(role="assistant",
                                                                 contents=["all fine"])])
                return
            if self.how == "group":
                raise ExceptionGroup("wrapped", [exc]) from None
            raise MiddlewareTermination("stop quietly") from None


@pytest.mark.parametrize("how", ["swallow", "group", "terminate"])
async def test_an_agent_middleware_inside_the_boundary_hides_no_halt(
        policies: Any, how: str) -> None:
    client = ScriptedChatClient([[call("send_money", **HALT)]], default=[text("went on")])
    agent = agent_with(client, [send_money], [*guard(policies), _InsideAgent(how)])
    with pytest.raises(PolicyViolation) as caught:
        await agent.run("pay")
    assert caught.value.decision.effect.value == "halt"
    assert CALLS == []


class _Terminate(FunctionMiddleware):
    """Placed before the guard: turns any failure of the call into a graceful end of the
    loop, with a result of its own."""

    async def process(self, context: FunctionInvocationContext,
                      call_next: Callable[[], Awaitable[None]]) -> None:
        try:
            await call_next()
        except BaseException:
            raise MiddlewareTermination("done", result="paid") from None


@STREAMING
async def test_a_halt_turned_into_a_graceful_termination_still_halts(
        policies: Any, stream: bool) -> None:
    client = ScriptedChatClient([[call("send_money", **HALT)]], default=[text("went on")])
    agent = agent_with(client, [send_money], [_Terminate(), *guard(policies)])
    with pytest.raises(PolicyViolation):
        await run(agent, "pay", stream=stream)
    assert CALLS == []


async def test_a_streamed_halt_reaches_a_consumer_that_only_asks_for_the_final_response(
        policies: Any) -> None:
    client = ScriptedChatClient([[call("send_money", **HALT)]], default=[text("went on")])
    agent = agent_with(client, [send_money], guard(policies))
    with pytest.raises(PolicyViolation):
        await agent.run("pay", stream=True).get_final_response()
    assert CALLS == []


HALT_LARGE_LATER = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: large}
spec:
  match: {tools: ["send_money"]}
  rules:
    - {name: large-amount, when: 'args.amount > 1000', action: require_approval}
"""


class _Reloadable:
    def __init__(self, current: Any) -> None:
        self.current = current


@STREAMING
async def test_a_halt_on_an_approved_replay_ends_the_run(tmp_path: Path,
                                                          stream: bool) -> None:
    """The call waited for its approval while the policies changed to halt it: the
    framework's replay of approved calls is a path of its own, and the halt still ends the
    run (nothing is paid)."""
    source = _Reloadable(load_text(tmp_path, HALT_LARGE_LATER, "a.yaml"))
    client = ScriptedChatClient([[call("send_money", "c1", recipient="UK12", amount=5000)]],
                                default=[text("went on")])
    agent = agent_with(client, [send_money], guard(source))
    session = agent.create_session()
    first = await agent.run("pay UK12 5000", session=session)
    assert len(first.user_input_requests) == 1
    source.current = load_text(tmp_path, HALT_LARGE_LATER.replace(
        "action: require_approval", "action: halt"), "b.yaml")
    with pytest.raises(PolicyViolation) as caught:
        await run(agent, approve_all(first), session=session, stream=stream)
    assert caught.value.decision.effect.value == "halt"
    assert CALLS == []


@tool(name="stubborn")
async def stubborn(name: str) -> str:
    """A sibling that refuses to be cancelled and pays anyway (a tool's own bad habit)."""
    import asyncio

    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        CALLS.append(("stubborn_went_on", {"name": name}))
    return f"finished {name}"


@STREAMING
async def test_a_sibling_that_swallows_its_cancellation_hides_no_halt(policies: Any,
                                                                     stream: bool) -> None:
    """A parallel sibling that catches its cancellation and returns normally: the batch
    still ends with the halt, and the model is not asked again."""
    client = ScriptedChatClient([[call("stubborn", "s1", name="x"),
                                  call("send_money", "p1", **HALT)]],
                                default=[text("went on")])
    agent = agent_with(client, [send_money, stubborn], guard(policies))
    with pytest.raises(PolicyViolation):
        await run(agent, "pay", stream=stream)
    assert ("send_money", {"recipient": "UK12", "amount": 500000.0}) not in CALLS
    assert len(client.received) == 1


class _Convert(FunctionMiddleware):
    """Placed before the guard: turns the call's failure into a result, or into an
    exception the framework reports to the model as a tool error (the loop goes on)."""

    def __init__(self, how: str) -> None:
        self.how = how

    async def process(self, context: FunctionInvocationContext,
                      call_next: Callable[[], Awaitable[None]]) -> None:
        try:
            await call_next()
        except BaseException as exc:
            if self.how == "result":
                context.result = "nothing happened"
                return
            if self.how == "tool-error":
                raise RuntimeError("the payment failed") from None
            raise ExceptionGroup("wrapped", [exc]) from None


@STREAMING
@pytest.mark.parametrize("how", ["result", "tool-error", "group"])
async def test_a_halt_a_middleware_converts_asks_the_model_nothing_more(
        policies: Any, stream: bool, how: str) -> None:
    """The halted batch's results (the converted one, its siblings') never go back to the
    model: the run ends at the batch, not after another model request."""
    from tests.af_tools import read_inbox

    client = ScriptedChatClient([[call("read_inbox", "r1"), call("send_money", "p1", **HALT)]],
                                default=[text("went on")])
    agent = agent_with(client, [send_money, read_inbox], [_Convert(how), *guard(policies)])
    with pytest.raises(PolicyViolation):
        await run(agent, "pay", stream=stream)
    assert len(client.received) == 1


class _Retry(AgentMiddleware):
    """Listed after the guard (inside its boundary): runs the rest of the run again when
    it fails, as a resilience middleware does."""

    async def process(self, context: AgentContext,
                      call_next: Callable[[], Awaitable[None]]) -> None:
        try:
            await call_next()
        except Exception:
            await call_next()


async def test_a_run_retried_inside_the_boundary_runs_nothing_more(policies: Any) -> None:
    """The retried run is the same halted run: the model's second try (a small payment)
    does not run, and the run still ends with the halt."""
    client = ScriptedChatClient([[call("send_money", **HALT)],
                                 [call("send_money", recipient="UK12", amount=5)]],
                                default=[text("went on")])
    agent = agent_with(client, [send_money], [*guard(policies), _Retry()])
    with pytest.raises(PolicyViolation):
        await agent.run("pay")
    assert CALLS == []
