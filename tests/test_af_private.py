"""Pins for the private Agent Framework names in guardrails.agent_framework._private.

If one of these fails after a framework upgrade, the guard's fail-closed snapshot or its
validation-error scrubbing no longer works: fix _private.py before widening the pin.
"""

from __future__ import annotations

import pytest
from agent_framework import FunctionInvocationContext, MiddlewareFailure

from guardrails.agent_framework import _private
from tests.af_tools import CALLS, send_money


def test_snapshot_key_is_the_one_the_framework_reads() -> None:
    from agent_framework import _tools

    assert _private.SNAPSHOT_KEY == "_security_function_arguments"
    assert _private.SNAPSHOT_KEY == _tools._SECURITY_ARGUMENTS_SNAPSHOT_CONTEXT_KEY


async def test_snapshot_makes_invoke_fail_closed_on_changed_arguments() -> None:
    CALLS.clear()
    context = FunctionInvocationContext(function=send_money,
                                        arguments={"recipient": "UK12", "amount": 5.0})
    _private.record_argument_snapshot(context, {"recipient": "UK12", "amount": 5.0})
    assert _private.has_argument_snapshot(context)
    context.arguments = {"recipient": "XX00", "amount": 5.0}
    with pytest.raises(MiddlewareFailure, match="changed after security middleware"):
        await send_money.invoke(context=context)
    assert CALLS == []
    context.arguments = {"recipient": "UK12", "amount": 5.0}
    await send_money.invoke(context=context)
    assert CALLS == [("send_money", {"recipient": "UK12", "amount": 5.0})]
    CALLS.clear()


async def test_validation_error_type_and_redaction_under_snapshot() -> None:
    context = FunctionInvocationContext(function=send_money,
                                        arguments={"recipient": "UK12", "amount": "SECRET-x"})
    _private.record_argument_snapshot(context, context.arguments)  # type: ignore[arg-type]
    with pytest.raises(Exception) as caught:
        await send_money.invoke(context=context)
    assert _private.is_argument_validation_error(caught.value)
    assert "SECRET-x" in str(caught.value)  # the framework's detail holds the value...
    scrubbed = _private.scrubbed_validation_error(caught.value, lambda s: s.replace("SECRET-x", "*"))
    assert _private.is_argument_validation_error(scrubbed)
    assert "SECRET-x" not in str(scrubbed)  # ...which the guard scrubs
    assert "SECRET-x" not in getattr(scrubbed, "redacted_message", "")


def test_opaque_arguments_cannot_be_bound() -> None:
    context = FunctionInvocationContext(function=send_money, arguments={})
    with pytest.raises(MiddlewareFailure):
        _private.record_argument_snapshot(context, {"obj": object()})


async def test_prepare_arguments_is_the_tools_own_validation() -> None:
    context = FunctionInvocationContext(function=send_money, arguments={})
    prepared = _private.prepare_arguments(context, {"recipient": "UK12", "amount": "5"})
    assert prepared == {"recipient": "UK12", "amount": 5.0}
    assert type(prepared["amount"]) is float  # the framework's pydantic coercion
    with pytest.raises(Exception) as caught:
        _private.prepare_arguments(context, {"recipient": "UK12", "amount": "five"})
    assert _private.is_argument_validation_error(caught.value)
    assert _private.prepare_arguments(
        FunctionInvocationContext(function=object(), arguments={}),  # type: ignore[arg-type]
        {"a": 1}) is None


async def test_prepared_arguments_run_exactly_without_a_second_validation() -> None:
    # The tool receives the prepared values as they are: a value the framework would have
    # coerced again (an int for a float) proves invoke skipped its own validation.
    CALLS.clear()
    arguments = {"recipient": "UK12", "amount": 7}
    context = FunctionInvocationContext(function=send_money, arguments=dict(arguments))
    _private.record_argument_snapshot(context, arguments, prepared=True)
    await send_money.invoke(context=context)
    assert CALLS == [("send_money", {"recipient": "UK12", "amount": 7})]
    assert type(CALLS[0][1]["amount"]) is int
    CALLS.clear()
    unbound = FunctionInvocationContext(function=send_money, arguments=dict(arguments))
    _private.record_argument_snapshot(unbound, arguments)  # not prepared: validated again
    await send_money.invoke(context=unbound)
    assert type(CALLS[0][1]["amount"]) is float
    CALLS.clear()


def test_the_snapshot_token_is_the_prepared_comparison_token() -> None:
    # One token serves both: the framework compares the prepared record with
    # _argument_comparison_token and the snapshot with _argument_authority_token.
    from agent_framework import _tools

    arguments = {"recipient": "UK12", "amount": 7, "tags": ["a", {"b": 1.5}]}
    assert (_tools._argument_authority_token(arguments, boundary="security policy")
            == _tools._argument_comparison_token(arguments))


async def test_the_framework_prepares_valid_arguments_before_the_middleware() -> None:
    """The loop validates the model's arguments before the middleware when it can, and
    records them under PREPARED_KEY; prepared_arguments finds exactly those (None for
    arguments that failed, which the middleware gets raw)."""
    from typing import Any

    from agent_framework import FunctionMiddleware

    from guardrails.agent_framework import ScriptedChatClient
    from guardrails.agent_framework.scripted import call, text
    from tests.af_support import agent_with

    seen: list[Any] = []

    class Probe(FunctionMiddleware):
        async def process(self, context: FunctionInvocationContext, call_next: Any) -> None:
            seen.append((dict(context.arguments),
                         _private.prepared_arguments(context, context.arguments)))  # type: ignore[arg-type]
            context.result = "probed"

    client = ScriptedChatClient([[call("send_money", recipient="UK12", amount="5"),
                                  call("send_money", recipient="UK12", amount="1,5")],
                                 [text("done")]])
    await agent_with(client, [send_money], [Probe()]).run("x")
    valid, raw = sorted(seen, key=lambda s: s[1] is None)
    assert valid[0] == {"recipient": "UK12", "amount": 5.0}  # validated before the middleware
    assert valid[1] == {"recipient": "UK12", "amount": 5.0}
    assert raw == ({"recipient": "UK12", "amount": "1,5"}, None)


def test_invalid_fields_names_the_arguments_a_validation_error_is_about() -> None:
    context = FunctionInvocationContext(function=send_money, arguments={})
    with pytest.raises(Exception) as caught:
        _private.prepare_arguments(context, {"recipient": "UK12", "amount": "five"})
    assert _private.invalid_fields(caught.value) == frozenset({"amount"})
    with pytest.raises(Exception) as missing:
        _private.prepare_arguments(context, {"amount": 5})
    assert _private.invalid_fields(missing.value) == frozenset({"recipient"})
    assert _private.invalid_fields(ValueError("no cause")) is None
