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


# --------------------------------------------------------------------------- the fast token

import datetime as _dt  # noqa: E402
import decimal as _decimal  # noqa: E402
import math as _math  # noqa: E402
import uuid as _uuid  # noqa: E402
from collections.abc import Iterator as _Iterator  # noqa: E402
from contextlib import contextmanager as _contextmanager  # noqa: E402
from typing import Any as _Any  # noqa: E402

from hypothesis import given as _given  # noqa: E402
from hypothesis import settings as _settings  # noqa: E402
from hypothesis import strategies as _st  # noqa: E402
from pydantic import BaseModel as _BaseModel  # noqa: E402


class _Str(str):
    pass


class _Dict(dict):  # type: ignore[type-arg]
    pass


class _Model(_BaseModel):
    a: int = 1
    b: str | None = None


_scalars = _st.one_of(
    _st.none(), _st.booleans(), _st.integers(), _st.text(max_size=5),
    _st.floats(allow_nan=True, allow_infinity=True), _st.just(-0.0), _st.just(_math.nan),
    _st.binary(max_size=3), _st.builds(_Str, _st.text(max_size=3)),
    _st.just(_dt.date(2026, 1, 2)), _st.just(_dt.datetime(2026, 1, 2, 3, 4, 5)),
    _st.just(_decimal.Decimal("1.50")), _st.just(_uuid.UUID(int=7)),
    _st.builds(_Model, a=_st.integers(-3, 3)),
)
_keys = _st.one_of(_st.text(max_size=4), _st.integers(-2, 2), _st.booleans(),
                   _st.just(_math.nan), _st.builds(_Str, _st.text(max_size=2)))
_values = _st.recursive(
    _scalars,
    lambda inner: _st.one_of(
        _st.lists(inner, max_size=4),
        _st.dictionaries(_st.text(max_size=4), inner, max_size=4),
        _st.dictionaries(_keys, inner, max_size=3),
        _st.dictionaries(_st.text(max_size=3), inner, max_size=3).map(_Dict),
        _st.lists(inner, max_size=3).map(tuple),
        _st.frozensets(_st.integers(0, 5), max_size=3),
        _st.sets(_st.text(max_size=2), max_size=3),
    ),
    max_leaves=20,
)


@_contextmanager
def _framework_tokens() -> _Iterator[None]:
    """The framework's own token functions in its module while inside (a guard installs
    the fast ones there, and the framework's functions recurse through the module): the
    reference the fast tokens are compared with is the framework's code alone."""
    from agent_framework import _tools

    installed = _tools._argument_comparison_token, _tools._argument_authority_token
    _tools._argument_comparison_token = _private.FRAMEWORK_COMPARISON_TOKEN
    _tools._argument_authority_token = _private.FRAMEWORK_AUTHORITY_TOKEN
    try:
        yield
    finally:
        _tools._argument_comparison_token, _tools._argument_authority_token = installed


def _framework_comparison(value: _Any) -> _Any:
    with _framework_tokens():
        return _private.FRAMEWORK_COMPARISON_TOKEN(value)


def _framework_authority(value: _Any) -> _Any:
    """The framework's authority token, or the type of what it raised."""
    with _framework_tokens():
        try:
            return _private.FRAMEWORK_AUTHORITY_TOKEN(value, boundary="security policy")
        except Exception as exc:
            return type(exc)


@_settings(max_examples=600, deadline=None)
@_given(_values)
def test_fast_token_equals_the_frameworks(value: _Any) -> None:
    assert _private.argument_token(value) == _framework_comparison(value)
    assert _private.argument_token({"v": value}) == _framework_comparison({"v": value})


@_settings(max_examples=300, deadline=None)
@_given(_st.dictionaries(_st.text(max_size=4), _values, max_size=4))
def test_fast_authority_token_equals_the_frameworks(value: dict[str, _Any]) -> None:
    assert _private.authority_token(value) == _framework_authority(value)


@_settings(max_examples=300, deadline=None)
@_given(_st.dictionaries(_st.text(max_size=3), _values, max_size=3),
        _st.dictionaries(_st.text(max_size=3), _values, max_size=3))
def test_fast_tokens_of_different_values_differ_like_the_frameworks(
    a: dict[str, _Any], b: dict[str, _Any],
) -> None:
    framework_equal = _framework_comparison(a) == _framework_comparison(b)
    assert (_private.argument_token(a) == _private.argument_token(b)) is framework_equal


class _Opaque:
    pass


_with_opaque = _st.recursive(
    _st.one_of(_scalars, _st.builds(_Opaque)),
    lambda inner: _st.one_of(_st.lists(inner, max_size=3),
                             _st.dictionaries(_keys, inner, max_size=3),
                             _st.lists(inner, max_size=2).map(tuple)),
    max_leaves=12,
)


@_settings(max_examples=300, deadline=None)
@_given(_st.dictionaries(_st.text(max_size=4), _with_opaque, max_size=4))
def test_installed_tokens_are_the_frameworks_for_every_input(value: dict[str, _Any]) -> None:
    """What the framework's own checks compute once a guard installed the fast tokens:
    the token its own code computes, or the same refusal of opaque values."""
    from agent_framework import _tools

    assert _private.install_fast_tokens()
    assert _tools._argument_comparison_token(value) == _framework_comparison(value)
    try:
        installed: _Any = _tools._argument_authority_token(value, boundary="security policy")
    except Exception as exc:
        installed = type(exc)
    assert installed == _framework_authority(value)


def test_fast_tokens_are_installed_only_over_the_frameworks_own() -> None:
    from agent_framework import _tools

    from guardrails.agent_framework import guard

    guard(guardrails_policies())  # building a guard installs them
    assert _tools._argument_comparison_token is _private.argument_token
    assert _private.install_fast_tokens()  # again: nothing changes
    assert _tools._argument_comparison_token is _private.argument_token

    def someone_elses(value: _Any) -> _Any:
        return _private.FRAMEWORK_COMPARISON_TOKEN(value)

    installed = _tools._argument_comparison_token, _tools._argument_authority_token
    try:
        _tools._argument_comparison_token = someone_elses
        _tools._argument_authority_token = _private.FRAMEWORK_AUTHORITY_TOKEN
        assert not _private.install_fast_tokens()  # replaced by someone else: left alone
        assert _tools._argument_comparison_token is someone_elses
        assert _tools._argument_authority_token is _private.FRAMEWORK_AUTHORITY_TOKEN
    finally:
        _tools._argument_comparison_token, _tools._argument_authority_token = installed


def guardrails_policies() -> _Any:
    from pathlib import Path

    import guardrails

    return guardrails.load(Path(__file__).resolve().parent.parent / "policies" / "payments.yaml")


def test_fast_token_keeps_what_json_equality_would_merge() -> None:
    """The distinctions that matter to fail-closed: types, signed zero, NaN bits, order."""
    t = _private.argument_token
    assert t({"a": 1}) != t({"a": True}) != t({"a": 1.0})
    assert t({"a": 0.0}) != t({"a": -0.0})
    assert t({"a": [1, 2]}) != t({"a": [2, 1]})
    assert t({"a": [1]}) != t({"a": (1,)})
    assert t({"a": "x"}) != t({"a": _Str("x")})
    assert t({"a": {"b": 1}}) == t({"a": {"b": 1}})


def test_fast_authority_token_refuses_opaque_values_like_the_framework() -> None:
    class Opaque:
        pass

    for value in ({"a": Opaque()}, {"a": [1, {"b": Opaque()}]}, {"a": (Opaque(),)}):
        with pytest.raises(MiddlewareFailure, match="opaque mutable"):
            _private.authority_token(value)


async def test_bound_running_arguments_fail_closed_on_a_later_change() -> None:
    """One token for the snapshot and the prepared arguments; a change after the guard
    still makes the framework refuse the call."""
    CALLS.clear()
    running = {"recipient": "UK12", "amount": 5.0}
    context = FunctionInvocationContext(function=send_money, arguments=dict(running))
    _private.record_argument_snapshot(context, running, prepared=True)
    assert _private.prepared_arguments(context, running) == running
    context.arguments = {"recipient": "UK12", "amount": 5.000001}
    with pytest.raises(MiddlewareFailure, match="changed after security middleware"):
        await send_money.invoke(context=context)
    context.arguments = {"recipient": "UK12", "amount": 5}  # int, not float: a change too
    with pytest.raises(MiddlewareFailure, match="changed after security middleware"):
        await send_money.invoke(context=context)
    assert CALLS == []
    context.arguments = dict(running)
    await send_money.invoke(context=context)
    assert [("send_money", running)] == CALLS
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


def test_approval_observer_is_the_protocol_the_guard_implements() -> None:
    """The framework tells function middleware implementing this runtime-checkable protocol
    about approval responses it will not run: history's "rejected" entries depend on it
    (exercised in the real loop by tests/test_af_provenance.py)."""
    from pathlib import Path

    import guardrails
    from guardrails.agent_framework import GuardFunctionMiddleware

    policies = guardrails.load(Path(__file__).resolve().parent.parent / "policies")
    middleware = GuardFunctionMiddleware(policies)
    assert isinstance(middleware, _private.ApprovalObserver)
    assert callable(getattr(middleware, _private.APPROVAL_OBSERVER))


def test_the_batch_check_wraps_the_frameworks_batch_execution_exactly() -> None:
    """The framework calls ``_try_execute_function_call_groups`` by its module name with
    these parameters (by keyword), holding the run's function middleware in the pipeline's
    ``_middleware``: the wrapper takes exactly the framework's parameters, and the
    pipeline lists the middleware instances the guard looks for."""
    import inspect

    from agent_framework import _tools
    from agent_framework._middleware import FunctionMiddlewarePipeline

    from guardrails.agent_framework import GuardFunctionMiddleware, guard

    framework = inspect.signature(_private.FRAMEWORK_BATCH).parameters
    ours = inspect.signature(_private._checked_batch).parameters
    assert [(p.name, p.kind, p.default) for p in framework.values()] == [
        (p.name, p.kind, p.default) for p in ours.values()]
    assert inspect.iscoroutinefunction(_private.FRAMEWORK_BATCH)
    _run, function = guard(guardrails_policies())
    assert _tools._try_execute_function_call_groups is _private._checked_batch
    pipeline = FunctionMiddlewarePipeline(function)
    assert pipeline._middleware == [function]
    assert isinstance(pipeline._middleware[0], GuardFunctionMiddleware)
    source = inspect.getsource(_tools._execute_function_calls)
    assert "await _try_execute_function_call_groups(" in source


def test_the_batch_check_is_installed_only_over_the_frameworks_own() -> None:
    from agent_framework import _tools

    from guardrails.agent_framework import guard

    guard(guardrails_policies())  # building a guard installs it
    installed = _tools._try_execute_function_call_groups
    assert installed is _private._checked_batch

    async def someone_elses(**kwargs: _Any) -> _Any:
        return await _private.FRAMEWORK_BATCH(**kwargs)

    try:
        _tools._try_execute_function_call_groups = someone_elses
        assert not _private.install_batch_check(lambda calls, middleware: None)
        assert _tools._try_execute_function_call_groups is someone_elses
    finally:
        _tools._try_execute_function_call_groups = installed


def test_a_guard_built_where_the_batch_check_cannot_be_installed_says_so(
        caplog: pytest.LogCaptureFixture) -> None:
    """Another library's wrapper over the framework's batch execution leaves the guard
    without its unreadable-arguments check: building a guard then warns the host."""
    from agent_framework import _tools

    from guardrails.agent_framework import guard

    guard(guardrails_policies())
    installed = _tools._try_execute_function_call_groups

    async def someone_elses(**kwargs: _Any) -> _Any:
        return await _private.FRAMEWORK_BATCH(**kwargs)

    try:
        _tools._try_execute_function_call_groups = someone_elses
        with caplog.at_level("WARNING", logger="guardrails.agent_framework"):
            guard(guardrails_policies())
        assert any("batch execution was replaced" in r.getMessage() for r in caplog.records)
        caplog.clear()
        _tools._try_execute_function_call_groups = installed
        with caplog.at_level("WARNING", logger="guardrails.agent_framework"):
            guard(guardrails_policies())
        assert not any("batch execution" in r.getMessage() for r in caplog.records)
    finally:
        _tools._try_execute_function_call_groups = installed
