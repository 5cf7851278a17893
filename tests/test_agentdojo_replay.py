"""The AgentDojo replay keeps working: a few committed trajectories through guard() in the
real loop, with the suites' policies (the full run is ``benchmarks/agentdojo/replay.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.agentdojo_support import load_replay

replay = load_replay()


@pytest.fixture(scope="module")
def data() -> Any:
    return replay.load()


def _runs(data: Any, suite: str, user_task: str, injections: int) -> list[dict[str, Any]]:
    runs = [r for r in data["suites"][suite]["runs"] if r["user_task"] == user_task]
    legit = [r for r in runs if r["injection_task"] is None]
    return legit + [r for r in runs if r["injection_task"] is not None][:injections]


def test_trajectories_cover_the_four_suites(data: Any) -> None:
    assert set(data["suites"]) == {"banking", "slack", "travel", "workspace"}
    for suite in data["suites"].values():
        runs = suite["runs"]
        assert any(r["injection_task"] is None for r in runs)
        assert any(c["by"] == "attacker" for r in runs for c in r["calls"])
        assert all(c["result"] in data["results"] for r in runs for c in r["calls"])


@pytest.mark.parametrize(("suite", "user_task"), [("banking", "user_task_4"),
                                                  ("slack", "user_task_8"),
                                                  ("workspace", "user_task_8")])
async def test_replay_stops_attacks_and_keeps_the_user_task(data: Any, suite: str,
                                                            user_task: str) -> None:
    runs = _runs(data, suite, user_task, injections=3)
    report = await replay.replay_suite(suite, data, runs=runs)
    figures = report["all"]
    assert figures["hijacked_runs"] >= 1
    assert figures["stopped_with_human_pct"] == 100.0
    assert figures["legit_calls"] > 0 and figures["legit_calls_denied"] == 0


async def test_without_policies_nothing_is_stopped(data: Any, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The replay measures the guard, not itself: with an empty policy set every attacker
    call runs."""
    (tmp_path / "banking.yaml").write_text(
        "apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: none}\n"
        "spec: {rules: []}\n")
    monkeypatch.setattr(replay, "POLICIES", tmp_path)
    report = await replay.replay_suite("banking", data,
                                       runs=_runs(data, "banking", "user_task_4", 3))
    assert report["all"]["stopped_with_human_pct"] == 0.0
