"""A decision rebuilt by ``dataclasses.replace`` (or copied, or pickled) still scrubs
what the original scrubbed: a secret argument's value that a repair copied into another
argument never leaves through the copy's ``to_dict`` or ``repr``."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import guardrails
from guardrails.engine import Decision, Effect

SECRET = "tok-REPLACE-4417-secret"

POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: copy}
spec:
  match: {tools: ["post"]}
  secrets:
    arguments: [token]
  repairs:
    - name: echo
      when: 'true'
      set:
        note: '"sent with " + args.token'
  rules:
    - {name: never, when: 'false', action: deny}
"""


def _decision(tmp_path: Path) -> Decision:
    path = tmp_path / "p.yaml"
    path.write_text(POLICY, encoding="utf-8")
    decision = guardrails.load(path).evaluate("post", {"token": SECRET, "note": "hi"})
    assert decision.arguments["note"] == f"sent with {SECRET}"  # the repair copied it
    return decision


CLONES: list[Callable[[Decision], Decision]] = [
    lambda d: dataclasses.replace(d),
    lambda d: dataclasses.replace(d, effect=Effect.DENY),
    copy.copy,
    copy.deepcopy,
    lambda d: pickle.loads(pickle.dumps(d)),
]


@pytest.mark.parametrize("clone", CLONES, ids=["replace", "replace-effect", "copy",
                                                "deepcopy", "pickle"])
def test_a_rebuilt_decision_still_scrubs(tmp_path: Path, clone: Any) -> None:
    original = _decision(tmp_path)
    assert SECRET not in str(original.to_dict())
    rebuilt = clone(original)
    assert SECRET not in str(rebuilt.to_dict())
    assert SECRET not in repr(rebuilt)
    assert rebuilt.scrub(f"x {SECRET} y") == original.scrub(f"x {SECRET} y")
