"""Property: whatever the secret and whatever the tool or the model does with it, no form of
it (raw, JSON-escaped, repr) leaves a guarded run.

Random secrets (non-ASCII, multi-line, quotes, backslashes, 4-200 characters) are injected
into a tool through a secret provider; the tool returns them in any content field or
serialized form, or raises them in any exception form; or the model later uses the secret
as an argument name or a call id. Checked: what the model received, the response, the
session, logs at DEBUG, spans (attributes, events, status), metrics, the decision log and
every decision's ``to_dict()``. The model's own messages are not checked for what the
model itself wrote (its function calls, and the call id a function result pairs with).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agent_framework import AgentSession, FunctionTool, tool
from agent_framework.exceptions import UserInputRequiredException
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import guardrails
from guardrails.agent_framework import EnvironmentSecrets, ScriptedChatClient
from guardrails.agent_framework.scripted import call
from tests.af_support import agent_with, run
from tests.leak_support import Observer, leaks, response_places
from tests.test_af_secret_paths import CONTENTS, EXCEPTIONS, SERIALIZED, _approval_like

POLICIES = guardrails.load(Path(__file__).parent / "data" / "leaks")

# A marker first, so that no ordinary output (a JSON key, "[REDACTED]", a tool name)
# contains the secret by chance; the rest is anything.
_ANY_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), min_size=3, max_size=199)
_NASTY = st.text(st.sampled_from(list("\"'\\\n\r\t ñ€𝄞\u200bab{}[]:,%$")), min_size=3,
                 max_size=60)
SECRETS = st.one_of(_ANY_TEXT, _NASTY).map(lambda t: "‡" + t)


def _raising(make: Callable[[str], BaseException]) -> Callable[[str], Any]:
    def behaviour(s: str) -> Any:
        raise make(s)
    return behaviour


def _ask(s: str) -> Any:
    raise UserInputRequiredException([_approval_like(s)], message=f"input for {s}")


TOOL_BEHAVIOURS: dict[str, Callable[[str], Any]] = {
    **{f"content:{k}": v for k, v in CONTENTS.items()},
    **{f"serialized:{k}": v for k, v in SERIALIZED.items()},
    **{f"raise:{k}": _raising(v) for k, v in EXCEPTIONS.items()},
    "raise:user-input-required": _ask,
    "return:plain": lambda s: s,
}
MODEL_BEHAVIOURS = ("none", "argument-name", "argument-value", "call-id")

_CURRENT: dict[str, Callable[[str], Any]] = {}


@tool(name="vault_call")
def vault_call(mode: str, api_key: str) -> Any:
    """Calls a vault API with an injected key."""
    return _CURRENT["behaviour"](api_key)


async def _note(**arguments: Any) -> str:
    return "noted"


# Its schema accepts any argument name (as an MCP tool's may): names reach the guard.
note = FunctionTool(func=_note, name="note", description="Writes a note.",
                    input_model={"type": "object", "properties": {"text": {"type": "string"}},
                                 "additionalProperties": True})


async def _scenario(secret: str, behaviour: str, model: str, detailed: bool, stream: bool,
                    caplog: pytest.LogCaptureFixture) -> list[str]:
    _CURRENT["behaviour"] = TOOL_BEHAVIOURS[behaviour]
    turns: list[Any] = [[call("vault_call", mode="x")]]
    if model == "argument-name":
        turns.append([call("note", text="hi", **{secret: "v", "nested": {secret: [secret]}})])
    elif model == "argument-value":  # a rule message quotes it (policy "notes")
        turns.append([call("note", text="quote " + secret, other=[secret, {"k": secret}])])
    elif model == "call-id":
        turns.append([call("note", secret, text="hi")])
    obs = Observer()
    client = ScriptedChatClient(turns)
    middleware = obs.guard(POLICIES, secrets=EnvironmentSecrets({"GR_LEAK_KEY": secret}))
    agent = agent_with(client, [vault_call, note], middleware,
                       include_detailed_errors=detailed)
    session = AgentSession()
    response = await run(agent, "go", stream=stream, session=session)
    places: dict[str, Any] = obs.places(caplog)
    if model != "call-id":  # a function result pairs with the call id the model chose
        places.update(response_places(response, session))
        places["model"] = [m.to_dict() for batch in client.received for m in batch
                           if m.role != "assistant"]
    return leaks(secret, **places)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(secret=SECRETS, behaviour=st.sampled_from(sorted(TOOL_BEHAVIOURS)),
       model=st.sampled_from(MODEL_BEHAVIOURS), detailed=st.booleans(), stream=st.booleans())
def test_no_form_of_a_secret_leaves_a_guarded_run(
        secret: str, behaviour: str, model: str, detailed: bool, stream: bool,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.clear()
    caplog.set_level(logging.DEBUG)
    found = asyncio.run(_scenario(secret, behaviour, model, detailed, stream, caplog))
    assert found == [], (behaviour, model)
