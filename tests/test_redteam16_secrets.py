"""Red team, round 4: secrets quoted cut by pydantic on error paths (promise 5).

pydantic's validation errors quote a long input cut to its first 25 and last 24 bytes
(``input_value='sk-live-abcdefghijklmnop...'``). The scrubber removes whole values, so the
cut form went out untouched wherever the error's text went: with the framework's
``include_detailed_errors`` on, an injected key failing the tool's own constraint (a maximum
length, an integer type) reached the model as 47 of its characters; and a tool whose own
pydantic model refused the key (inside a larger input, cut mid-``repr``) sent a piece of it
too. Now every scrubber removes pydantic's cut form of each value it knows, and every
exception text the guard passes on renders pydantic's errors without their inputs.
"""

from __future__ import annotations

import logging
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
from agent_framework import AgentSession, tool
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, StringConstraints, TypeAdapter, ValidationError, model_validator

from guardrails.agent_framework import ScriptedChatClient
from guardrails.agent_framework.scripted import call, result_text, text
from guardrails.engine.scrub import Scrubber
from tests.af_support import STREAMING, agent_with, load_text, run
from tests.leak_support import Observer, response_places, strings_in

KEY = "sk-live-" + "7fQ2xLp9" * 8 + "-tail"
POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: vault}
spec:
  match: {tools: ["short_key", "int_key", "model_key", "pin_login"]}
  secrets:
    arguments: [pin]
    inject:
      api_key: {env: GR_RT16_KEY}
"""
SEEN: list[str] = []


@tool
def short_key(endpoint: str, api_key: Annotated[str, StringConstraints(max_length=50)]) -> str:
    """A tool whose key field is shorter than the key: validation fails with the key."""
    SEEN.append(api_key)
    return "ok"


@tool
def int_key(endpoint: str, api_key: int) -> str:
    """A tool that wants the key as a number."""
    return "ok"


class Client(BaseModel):
    endpoint: str
    api_key: str

    @model_validator(mode="before")
    @classmethod
    def _refuse(cls, data: Any) -> Any:
        raise ValueError("no such tenant")


@tool
def model_key(endpoint: str, api_key: str) -> str:
    """Builds its own client model with the key, which refuses it (pydantic quotes the
    whole input, cut in the middle of the key)."""
    SEEN.append(api_key)
    Client.model_validate({"endpoint": endpoint, "region": "eu-west-1", "api_key": api_key})
    return "ok"


@tool
def pin_login(user: str, pin: Annotated[str, StringConstraints(max_length=8)]) -> str:
    """A declared secret argument the model sends, longer than the tool allows."""
    return "in"


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    monkeypatch.setenv("GR_RT16_KEY", KEY)
    caplog.set_level(logging.DEBUG)
    SEEN.clear()
    yield


def _pieces(secret: str) -> list[str]:
    """Pieces of the secret that hurt: 16 characters from its start, middle and end."""
    return [secret[:16], secret[len(secret) // 2 - 8:len(secret) // 2 + 8], secret[-16:]]


def _found(secret: str, places: dict[str, Any]) -> list[str]:
    pieces = _pieces(secret)
    return [f"{p}: {s[:300]!r}" for p, v in places.items() for s in strings_in(v)
            if any(piece in s for piece in pieces)]


async def _places(tmp_path: Path, caplog: pytest.LogCaptureFixture, turn: Any, *,
                  stream: bool, detailed: bool) -> tuple[dict[str, Any], ScriptedChatClient]:
    obs = Observer()
    client = ScriptedChatClient([[turn], [text("done")]])
    agent = agent_with(client, [short_key, int_key, model_key, pin_login],
                       obs.guard(load_text(tmp_path, POLICY)),
                       include_detailed_errors=detailed)
    session = AgentSession()
    response = await run(agent, "use the vault", stream=stream, session=session)
    places = {"model": [m.to_dict() for batch in client.received for m in batch
                        if m.role != "assistant"],
              **response_places(response, session), **obs.places(caplog)}
    return places, client


@STREAMING
@pytest.mark.parametrize("detailed", [True, False], ids=["detailed", "plain"])
@pytest.mark.parametrize("tool_name", ["short_key", "int_key"])
async def test_an_injected_key_failing_the_tools_validation_is_not_quoted_cut(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, stream: bool, detailed: bool,
        tool_name: str) -> None:
    places, client = await _places(tmp_path, caplog,
                                   call(tool_name, endpoint="https://api.internal/x"),
                                   stream=stream, detailed=detailed)
    [result] = client.tool_results()
    assert result_text(result).startswith("Error: Argument parsing failed.")
    if detailed:  # the detail is still there, only the key is not
        assert "validation error" in result_text(result)
    assert SEEN == []
    assert _found(KEY, places) == []


@STREAMING
@pytest.mark.parametrize("detailed", [True, False], ids=["detailed", "plain"])
async def test_a_tools_own_validation_error_quoting_the_key_is_scrubbed(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, stream: bool,
        detailed: bool) -> None:
    places, client = await _places(tmp_path, caplog,
                                   call("model_key", endpoint="https://api.internal/x"),
                                   stream=stream, detailed=detailed)
    assert SEEN == [KEY]
    [result] = client.tool_results()
    if detailed:
        assert "no such tenant" in result_text(result)
    assert _found(KEY, places) == []


@STREAMING
async def test_a_long_secret_argument_from_the_model_is_not_quoted_cut_in_detailed_errors(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, stream: bool) -> None:
    pin = "pin-" + "Zx81" * 20
    places, _ = await _places(tmp_path, caplog, call("pin_login", user="bob", pin=pin),
                              stream=stream, detailed=True)
    assert _found(pin, places) == []


_TEXTS = st.text(alphabet=st.sampled_from(string.ascii_letters + "'\"\\\n\t é€𝄞\x00"),
                 min_size=4, max_size=90)


@settings(max_examples=300, deadline=None)
@given(secret=_TEXTS)
def test_the_scrubber_knows_pydantics_cut_form_of_every_value(secret: str) -> None:
    """The cut form is worked out independently of pydantic: check it against pydantic."""
    try:
        TypeAdapter(int).validate_python(secret)
    except ValidationError as exc:
        message = str(exc)
    else:  # pragma: no cover - no text of these characters is an integer
        return
    quoted = Scrubber([secret])(message).split("input_value=", 1)[1].split(", input_type")[0]
    # Quoted whole (short) it is removed inside its quotes; cut (long), with them.
    assert quoted in {"[REDACTED]", "'[REDACTED]'", '"[REDACTED]"'}


@STREAMING
async def test_with_instrumentation_off_the_frameworks_argument_log_is_scrubbed(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch,
        stream: bool) -> None:
    """Held: with its OpenTelemetry instrumentation off, the framework logs every tool's
    arguments at DEBUG ("Function arguments: {...}"), the injected key among them."""
    from agent_framework.observability import OBSERVABILITY_SETTINGS

    monkeypatch.setattr(OBSERVABILITY_SETTINGS, "enable_instrumentation", False)
    assert not OBSERVABILITY_SETTINGS.ENABLED
    policy = POLICY.replace('"pin_login"]', '"pin_login", "plain_key"]')

    @tool(name="plain_key")
    def plain_key(endpoint: str, api_key: str) -> str:
        """Uses the key."""
        SEEN.append(api_key)
        return "ok"

    obs = Observer()
    client = ScriptedChatClient([[call("plain_key", endpoint="https://api.internal/x")],
                                 [text("done")]])
    agent = agent_with(client, [plain_key], obs.guard(load_text(tmp_path, policy)))
    await run(agent, "use the vault", stream=stream)
    assert SEEN == [KEY]
    assert any("Function arguments" in r.getMessage() for r in caplog.records)
    assert _found(KEY, obs.places(caplog)) == []
