"""Leak tests: a secret placed in each path never reaches the model, a log record or a decision."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from agent_framework import tool

from guardrails.agent_framework import EnvironmentSecrets, ScriptedChatClient
from guardrails.agent_framework.scripted import call, result_text
from tests.af_support import (
    STREAMING,
    RecordingTelemetry,
    agent_with,
    guarded,
    policies_fixture,
    run,
)
from tests.af_tools import CALLS, call_api, login

policies = policies_fixture()

INJECTED = "sk-live-INJECTED-7f3a9c"
PIN = "PIN-DECLARED-551177"
CARD = "4111 1111 1111 1111"

SEEN_KEYS: list[str] = []


@tool(name="call_api")
def call_api_checking(endpoint: str, api_key: str) -> str:
    """Like call_api, recording whether the injected key arrived."""
    SEEN_KEYS.append(api_key)
    assert call_api.func is not None
    return str(call_api.func(endpoint=endpoint, api_key=api_key))


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    monkeypatch.setenv("GR_AF_TEST_API_KEY", INJECTED)
    caplog.set_level(logging.DEBUG)
    CALLS.clear()
    SEEN_KEYS.clear()
    yield
    CALLS.clear()


def _assert_clean(secret: str, client: ScriptedChatClient, caplog: pytest.LogCaptureFixture,
                  telemetry: RecordingTelemetry) -> None:
    assert secret not in client.model_saw()
    assert secret not in caplog.text
    assert all(secret not in r.getMessage() for r in caplog.records)
    assert telemetry.decisions
    for decision in telemetry.decisions:
        assert secret not in json.dumps(decision.to_dict())


PATHS = pytest.mark.parametrize("detailed", [False, True], ids=["brief", "detailed-errors"])


@STREAMING
async def test_injected_secret_reaches_the_tool_but_not_its_echoed_result(
        policies: Any, caplog: pytest.LogCaptureFixture, stream: bool) -> None:
    telemetry = RecordingTelemetry()
    client = ScriptedChatClient([[call("call_api", endpoint="https://api.internal/echo")]])
    agent = agent_with(client, [call_api_checking], guarded(policies, telemetry))
    await run(agent, "call the api", stream=stream)
    assert SEEN_KEYS == [INJECTED]
    seen = result_text(client.tool_results()[0])
    assert "[REDACTED]" in seen and "[REDACTED:card]" in seen
    assert CARD not in client.model_saw()
    _assert_clean(INJECTED, client, caplog, telemetry)


@PATHS
async def test_tool_exception_text_is_scrubbed(policies: Any, caplog: pytest.LogCaptureFixture,
                                               detailed: bool) -> None:
    telemetry = RecordingTelemetry()
    client = ScriptedChatClient([[call("call_api", endpoint="https://api.internal/boom")]])
    agent = agent_with(client, [call_api_checking], guarded(policies, telemetry),
                       include_detailed_errors=detailed)
    await agent.run("call the api")
    assert SEEN_KEYS == [INJECTED]
    [result] = client.tool_results()
    assert result.exception is not None and INJECTED not in result.exception
    if detailed:
        assert "upstream rejected key [REDACTED]" in result_text(result)
    _assert_clean(INJECTED, client, caplog, telemetry)


@PATHS
async def test_validation_error_of_a_declared_secret_is_scrubbed(
        policies: Any, caplog: pytest.LogCaptureFixture, detailed: bool) -> None:
    telemetry = RecordingTelemetry()
    client = ScriptedChatClient([[call("login", user="carol", pin=PIN)]])  # pin must be an int
    agent = agent_with(client, [login], guarded(policies, telemetry),
                       include_detailed_errors=detailed)
    await agent.run("log carol in")
    assert CALLS == []
    [result] = client.tool_results()
    assert "Argument parsing failed" in result_text(result)
    assert PIN not in (result.exception or "")
    _assert_clean(PIN, client, caplog, telemetry)


async def test_message_expression_concatenating_a_secret_is_scrubbed(
        policies: Any, caplog: pytest.LogCaptureFixture) -> None:
    telemetry = RecordingTelemetry()
    client = ScriptedChatClient([[call("login", user="admin", pin=PIN)]])
    agent = agent_with(client, [login], guarded(policies, telemetry))
    await agent.run("log admin in")
    assert CALLS == []
    assert "admin login refused for pin [REDACTED]" in result_text(client.tool_results()[0])
    _assert_clean(PIN, client, caplog, telemetry)


async def test_secret_provider_failure_blocks_the_call(policies: Any,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    telemetry = RecordingTelemetry()
    client = ScriptedChatClient([[call("call_api", endpoint="https://api.internal/x")]])
    agent = agent_with(client, [call_api_checking],
                       guarded(policies, telemetry, secrets=EnvironmentSecrets({})))
    response = await agent.run("call")
    assert SEEN_KEYS == []
    assert "could not evaluate" in result_text(client.tool_results()[0])
    assert response.text == "done"


async def test_a_vault_provider_supplies_the_value(policies: Any) -> None:
    class Vault:
        def __init__(self) -> None:
            self.asked: list[str] = []

        def get(self, ref: str) -> str:
            self.asked.append(ref)
            return "vault-value-123456"

    vault = Vault()
    client = ScriptedChatClient([[call("call_api", endpoint="https://api.internal/echo")]])
    agent = agent_with(client, [call_api_checking], guarded(policies, secrets=vault))
    await agent.run("call")
    assert vault.asked == ["GR_AF_TEST_API_KEY"]
    assert SEEN_KEYS == ["vault-value-123456"]
    assert "vault-value-123456" not in client.model_saw()


async def test_history_records_no_secret_values(policies: Any) -> None:
    client = ScriptedChatClient([[call("login", user="admin", pin=PIN)],
                                 [call("call_api", endpoint="https://api.internal/x")]])
    agent = agent_with(client, [login, call_api_checking], guarded(policies))
    session = agent.create_session()
    await agent.run("go", session=session)
    dumped = json.dumps(session.state["guardrails"])  # the transcript holds the model's own call
    assert PIN not in dumped and INJECTED not in dumped
    assert [h["effect"] for h in session.state["guardrails"]["history"]] == ["deny", "allow"]


def test_log_filter_scrubs_tracebacks_of_records(caplog: pytest.LogCaptureFixture) -> None:
    """A framework record logged with exc_info while a guarded call runs: its traceback text
    is scrubbed and the exception object (whose text and frames hold the secret) dropped."""
    from guardrails.agent_framework._secrets import (
        CURRENT_SCRUBBER,
        Scrubber,
        install_log_filter,
    )

    install_log_filter()
    logger = logging.getLogger("agent_framework._tools")
    token = CURRENT_SCRUBBER.set(Scrubber([INJECTED]))
    try:
        try:
            raise ValueError(f"upstream rejected key {INJECTED}")
        except ValueError:
            logger.exception("tool failed with %s", INJECTED)
        logger.error("stack", stack_info=True)
    finally:
        CURRENT_SCRUBBER.reset(token)
    [failed, stack] = [r for r in caplog.records if r.name == "agent_framework._tools"]
    assert failed.exc_info is None
    assert failed.exc_text is not None
    assert "ValueError: upstream rejected key [REDACTED]" in failed.exc_text
    assert "Traceback" in failed.exc_text
    assert failed.getMessage() == "tool failed with [REDACTED]"
    assert INJECTED not in caplog.text
    assert "ValueError: upstream rejected key [REDACTED]" in caplog.text
    assert stack.stack_info is not None


def test_log_filter_leaves_records_outside_guarded_calls_alone(
        caplog: pytest.LogCaptureFixture) -> None:
    from guardrails.agent_framework._secrets import install_log_filter

    install_log_filter()
    try:
        raise ValueError("plain")
    except ValueError:
        logging.getLogger("agent_framework._tools").exception("outside")
    [rec] = [r for r in caplog.records if r.name == "agent_framework._tools"]
    assert rec.exc_info is not None and "ValueError: plain" in caplog.text
