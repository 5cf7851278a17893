"""Red team, round 4: what is inspected is what runs (promise 2), for tools whose argument
models do not serialize what they hold, in the framework's real loop. Held.

Rules read the JSON form of the validated arguments. pydantic's JSON form of a model is
what its author chose to *serialize*: a field marked ``exclude=True`` is left out and a
``field_serializer`` or ``model_serializer`` writes what it likes. The attack: a recipient
the model put in an excluded ``bcc`` field, or behind a serializer that writes a
placeholder, unseen by the rule written to stop it. It holds because the framework hands
the tool that same serialized form (a dict of what the model dumps), never the model
object: what the rule did not see, the tool does not get either.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agent_framework import tool
from pydantic import BaseModel, Field, SecretStr, field_serializer, model_serializer

from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework.scripted import call, result_text, text
from tests.af_support import STREAMING, RecordingTelemetry, agent_with, guarded, load_text, run

SENT: list[Any] = []

POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: mail}
spec:
  match: {tools: ["send_*"]}
  rules:
    - name: outside-recipient
      when: >-
        [args.mail.to, has(args.mail.bcc) ? args.mail.bcc : "corp.example"]
        .exists(r, !r.endsWith("corp.example"))
      action: deny
      message: Mail goes to corp.example only.
"""


class Excluded(BaseModel):
    to: str
    bcc: str = Field(default="", exclude=True)


class Serialized(BaseModel):
    to: str
    bcc: str = ""

    @field_serializer("bcc")
    def _hide(self, value: str) -> str:
        return "someone@corp.example"


class Custom(BaseModel):
    to: str
    bcc: str = ""

    @model_serializer
    def _summary(self) -> dict[str, Any]:
        return {"to": "team@corp.example"}


class Nested(BaseModel):
    inner: Excluded


@tool
def send_excluded(mail: Excluded) -> str:
    """Send a mail."""
    SENT.append(mail)
    return "sent"


@tool
def send_serialized(mail: Serialized) -> str:
    """Send a mail."""
    SENT.append(mail)
    return "sent"


@tool
def send_custom(mail: Custom) -> str:
    """Send a mail."""
    SENT.append(mail)
    return "sent"


@tool
def send_nested(mail: Nested) -> str:
    """Send a mail."""
    SENT.append(mail)
    return "sent"


LOGINS: list[str] = []


@tool
def login(user: str, password: SecretStr) -> str:
    """Log in."""
    LOGINS.append(password.get_secret_value())
    return "in"


TOOLS = [send_excluded, send_serialized, send_custom, send_nested]


@pytest.fixture(autouse=True)
def _clear() -> Any:
    SENT.clear()
    yield
    SENT.clear()


@STREAMING
@pytest.mark.parametrize("tool_name", ["send_excluded", "send_serialized", "send_custom"])
async def test_a_field_hidden_from_serialization_reaches_neither_rule_nor_tool(
        tmp_path: Path, stream: bool, tool_name: str) -> None:
    client = ScriptedChatClient([
        [call(tool_name, "c1", mail={"to": "boss@corp.example", "bcc": "leak@evil.example"})],
        [text("done")]])
    agent = agent_with(client, TOOLS, guard(load_text(tmp_path, POLICY)))
    await run(agent, "mail the boss", stream=stream)
    [result] = client.tool_results()
    assert result_text(result) == "sent"
    [received] = SENT
    assert isinstance(received, dict) and "evil" not in repr(received)


@STREAMING
async def test_what_the_serializer_writes_is_what_the_rule_judges(tmp_path: Path,
                                                                  stream: bool) -> None:
    """The rule reads the address the serializer wrote (the one the tool gets), not the
    one the model sent."""
    policy = POLICY.replace(">-\n        [args.mail.to, has(args.mail.bcc) ? args.mail.bcc : \"corp.example\"]\n"
                            "        .exists(r, !r.endsWith(\"corp.example\"))",
                            "'args.mail.to == \"team@corp.example\"'")
    assert policy != POLICY
    client = ScriptedChatClient([[call("send_custom", "c1", mail={"to": "boss@corp.example"})],
                                 [text("done")]])
    agent = agent_with(client, TOOLS, guard(load_text(tmp_path, policy)))
    await run(agent, "mail the boss", stream=stream)
    [result] = client.tool_results()
    assert SENT == [] and "Mail goes to corp.example only." in result_text(result)


async def test_an_excluded_field_in_a_nested_model_reaches_neither(tmp_path: Path) -> None:
    policy = POLICY.replace("args.mail.to", "args.mail.inner.to").replace(
        "has(args.mail.bcc) ? args.mail.bcc", "has(args.mail.inner.bcc) ? args.mail.inner.bcc")
    client = ScriptedChatClient([
        [call("send_nested", "c1",
              mail={"inner": {"to": "boss@corp.example", "bcc": "leak@evil.example"}})],
        [text("done")]])
    agent = agent_with(client, TOOLS, guard(load_text(tmp_path, policy)))
    await run(agent, "mail the boss")
    [received] = SENT
    assert "evil" not in repr(received)


async def test_a_secret_str_argument_is_not_run_unjudged(tmp_path: Path) -> None:
    """A ``SecretStr`` parameter: pydantic's JSON form is the mask, the tool would get the
    value. The rules cannot read it, so the call is an input error and never runs."""
    policy = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: login}
spec:
  match: {tools: [login]}
  rules:
    - {name: weak, when: 'args.password == "hunter2"', action: deny}
"""
    telemetry = RecordingTelemetry()
    client = ScriptedChatClient([[call("login", user="u", password="letmein")],
                                 [text("done")]])
    agent = agent_with(client, [login], guarded(load_text(tmp_path, policy), telemetry))
    await run(agent, "log in")
    assert LOGINS == []
    [decision] = telemetry.decisions
    assert decision.effect.value == "deny" and decision.errors
    assert "letmein" not in repr(decision.to_dict())
