"""Red team of this session's fast paths (round 16b): the validation shortcut
(``_private.validated_as_they_are``), the candidates prepared at load
(``policyset._prepared``), fused rules with their constants as defaults and library
calls in line (``codegen``), and params patterns compiled at load.

Found: the shortcut judged an input model "plain" from its core schema alone, but the
framework validates with the model's own ``model_validate`` and ``model_dump`` methods;
a model that overrides one of them (to normalize a value) was skipped, so the tool got
values its own validation would have changed. The shortcut now also requires both to
be pydantic's own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agent_framework import FunctionInvocationContext, FunctionTool
from pydantic import BaseModel

from guardrails.agent_framework import ScriptedChatClient, _private, guard
from guardrails.agent_framework.scripted import call, text
from tests.af_support import agent_with, load_text


class _Lowered(BaseModel):
    """Validation of its own: every text lowered (``model_validate`` overridden)."""

    to: str
    note: str = ""

    @classmethod
    def model_validate(cls, obj: Any, **kwargs: Any) -> _Lowered:
        if isinstance(obj, dict):
            obj = {k: v.lower() if isinstance(v, str) else v for k, v in obj.items()}
        return super().model_validate(obj, **kwargs)


class _Stripped(BaseModel):
    """Dump of its own: texts stripped (``model_dump`` overridden)."""

    to: str
    note: str = ""

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        dumped = super().model_dump(**kwargs)
        return {k: v.strip() if isinstance(v, str) else v for k, v in dumped.items()}


class _SubLowered(_Lowered):
    pass


@pytest.mark.parametrize("model", [_Lowered, _Stripped, _SubLowered])
@pytest.mark.parametrize("arguments", [{"to": " ADMIN "}, {"to": " ADMIN ", "note": " X "}])
def test_a_model_with_its_own_validate_or_dump_is_never_shortcut(
        model: type[BaseModel], arguments: dict[str, Any]) -> None:
    tool = FunctionTool(name="send", description="d", func=lambda **kw: "", input_model=model)
    assert _private.validated_as_they_are(tool, tool._prepare_arguments, arguments) is None
    context = FunctionInvocationContext(function=tool, arguments=dict(arguments))
    got = _private.prepare_arguments(context, arguments)
    assert got is not None
    assert got == {"note": "", **tool._prepare_arguments(dict(arguments))}


_POLICY = """\
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: send}
spec:
  match: {tools: [send]}
  repairs:
    - name: shout
      set: {to: '"ADMIN"'}
  rules:
    - name: no-lowercase-admin
      when: 'args.to == "admin"'
      action: deny
      message: not to admin
"""


async def test_the_tool_gets_what_the_rules_judged_after_a_repair(tmp_path: Path) -> None:
    """A repair sets ``to`` to "ADMIN"; the tool's own validation lowers it to "admin",
    which a rule denies. Skipping that validation judged "ADMIN" (allowed) and the tool
    received "ADMIN", a value its own validation never returns."""
    received: list[dict[str, Any]] = []

    def send(**kwargs: Any) -> str:
        received.append(kwargs)
        return "sent"

    tool = FunctionTool(name="send", description="Sends.", func=send, input_model=_Lowered)
    policies = load_text(tmp_path, _POLICY)
    client = ScriptedChatClient([[call("send", to="bob")], [text("done")]])
    await agent_with(client, [tool], guard(policies)).run("go")
    # Validated, "ADMIN" is "admin": denied. The tool never gets a value its validation
    # would have changed ("ADMIN" went through unvalidated before).
    assert received == []
