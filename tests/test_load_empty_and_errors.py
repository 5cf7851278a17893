"""``load(allow_empty=True)``, and the public names of the errors users see."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import guardrails

ROOT = Path(__file__).resolve().parent.parent


def test_an_empty_load_is_an_error_unless_allowed(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(guardrails.PolicyError, match=r"no \*\.yaml or \*\.yml files"):
        guardrails.load(tmp_path / "empty")
    with pytest.raises(guardrails.PolicyError, match="no policy paths given"):
        guardrails.load([])
    for paths in ([], tmp_path / "empty", [tmp_path / "empty"]):
        empty = guardrails.load(paths, allow_empty=True)
        assert empty.policies == ()
        assert empty.evaluate("send_money", {"amount": 1}).effect.value == "allow"


def test_a_file_of_tests_only_is_not_a_policy_set(tmp_path: Path) -> None:
    f = tmp_path / "only.tests.yaml"
    f.write_text("apiVersion: guardrails/v1\nkind: PolicyTest\nmetadata: {name: t}\n"
                 "spec:\n  cases:\n    - {name: c, call: {tool: x}, expect: {effect: allow}}\n",
                 encoding="utf-8")
    with pytest.raises(guardrails.PolicyError, match="allow_empty=True"):
        guardrails.load(f)
    assert guardrails.load(f, allow_empty=True).policies == ()


def test_allow_empty_still_reports_missing_paths_and_broken_files(tmp_path: Path) -> None:
    with pytest.raises(guardrails.PolicyError, match="no such file"):
        guardrails.load(tmp_path / "nope", allow_empty=True)
    broken = tmp_path / "b.yaml"
    broken.write_text("apiVersion: guardrails/v1\nkind: ToolPolicy\nspec: [\n", encoding="utf-8")
    with pytest.raises(guardrails.PolicyError):
        guardrails.load([tmp_path], allow_empty=True)


def test_errors_carry_their_public_module() -> None:
    assert guardrails.PolicyViolation.__module__ == "guardrails"
    assert guardrails.PolicyError.__module__ == "guardrails"


HALT = r"""
import asyncio, sys
from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework.scripted import call
from tests.af_support import agent_with, load_fixture, run
from tests.af_tools import send_money

async def main() -> None:
    client = ScriptedChatClient([[call("send_money", recipient="UK12", amount=10**9)]])
    await run(agent_with(client, [send_money], guard(load_fixture())), "pay",
              stream=sys.argv[1] == "stream")

asyncio.run(main())
"""


@pytest.mark.parametrize("mode", ["run", "stream"])
def test_an_uncaught_halt_shows_the_public_exception_type(mode: str) -> None:
    proc = subprocess.run([sys.executable, "-c", HALT, mode], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("guardrails.PolicyViolation: run halted by payments/absurd-amount")
    assert "_GuardHalt" not in proc.stderr
