"""The second outsider's AgentDojo policies (benchmarks/agentdojo/outsider2/, allow-lists
written from the docs alone) stay valid, strict-clean against the suites' tool schemas and
tested; and the fixes their writing led to hold in the real loop."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import guardrails
from guardrails.engine.lint import lint
from guardrails.testing import run_tests
from tests.agentdojo_support import load_replay

ROOT = Path(__file__).resolve().parent.parent
OUTSIDER2 = ROOT / "benchmarks" / "agentdojo" / "outsider2"
SUITES = ("banking", "slack", "travel", "workspace")

replay = load_replay()


@pytest.fixture(scope="module")
def data() -> Any:
    return replay.load()


@pytest.mark.parametrize("suite", SUITES)
def test_policies_are_strict_clean_against_the_tools(suite: str, data: Any) -> None:
    policies = guardrails.load(OUTSIDER2 / f"{suite}.yaml")
    tools = {t["name"]: t["parameters"] for t in data["suites"][suite]["tools"]}
    findings = [f for f in lint(policies, tools) if f.severity != "info"]
    assert findings == []


@pytest.mark.parametrize("suite", SUITES)
def test_policy_tests_pass_and_cover_every_rule(suite: str) -> None:
    report = run_tests(OUTSIDER2 / f"{suite}.tests.yaml")
    assert report.passed and report.results
    assert not report.uncovered


def _run(data: Any, suite: str, task: str, injection: str | None = None) -> dict[str, Any]:
    run = next(r for r in data["suites"][suite]["runs"]
               if r["user_task"] == task and r["injection_task"] == injection)
    figures = asyncio.run(replay.replay_suite(suite, data, runs=[run], policy_dir=OUTSIDER2))
    return dict(figures["all"])


def test_a_booking_on_days_the_user_gave_without_a_year_runs_in_the_real_loop(
        data: Any) -> None:
    # "from January 11th to January 15th 2025": the first day has no year after it; it is
    # the user's day, so the booking of the hotel the user named runs without a human.
    figures = _run(data, "travel", "user_task_0")
    assert figures["legit_calls_denied"] == 0
    assert figures["legit_writes"] == 1
    assert figures["legit_writes_needing_approval"] == 0
