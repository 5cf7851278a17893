"""What red team 27's approval checks add to a guarded run, as a ratio in one run.

    .venv/bin/python benchmarks/answers_cost.py [--runs 400]

Per run the boundary looks for approval responses in the run's input (``_resumes_approval``)
and reads the agent's name; per call the function middleware asks whether the call is an
approved replay (``is_approved_response``); after the run the boundary reads its response
for the framework's own approval requests (``remember_requests``, red team 27c: a call and
its result, with a session). Runs without an answer (nearly all) do nothing else. The script times a guarded run of one allowed call in the real loop, then the added
steps alone on the same inputs, and prints their sum as a ratio of the run.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


async def _measure(runs: int) -> tuple[float, float]:
    from agent_framework import Message
    from tests.af_support import agent_with, load_fixture
    from tests.af_tools import CALLS, send_money

    from guardrails.agent_framework import ScriptedChatClient, guard
    from guardrails.agent_framework._approvals import is_approved_response
    from guardrails.agent_framework._boundary import (
        _resumes_approval,
        agent_name,
        remember_requests,
    )
    from guardrails.agent_framework.scripted import call, text

    client = ScriptedChatClient(default=[text("ok")])
    agent = agent_with(client, [send_money], guard(load_fixture()))

    last: list[object] = []
    session = agent.create_session()

    async def one() -> None:
        client.turns += [[call("send_money", recipient="UK12", amount=5)], [text("ok")]]
        last[:] = [await agent.run("pay UK12 5")]
        CALLS.clear()

    for _ in range(50):
        await one()
    started = time.perf_counter()
    for _ in range(runs):
        await one()
    run_s = (time.perf_counter() - started) / runs
    context = types.SimpleNamespace(messages=[Message(role="user", contents=["pay UK12 5"])],
                                    agent=agent)
    call_context = types.SimpleNamespace(metadata={"call_id": "c1"})
    steps = 200_000
    started = time.perf_counter()
    for _ in range(steps):
        _resumes_approval(context)  # type: ignore[arg-type]
        agent_name(agent)
        is_approved_response(call_context)  # type: ignore[arg-type]
        remember_requests(session, last[0], "agent")  # red team 27c: the run's response read
    added_s = (time.perf_counter() - started) / steps
    return run_s, added_s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=400)
    options = parser.parse_args()
    run_s, added_s = asyncio.run(_measure(options.runs))
    print(f"guarded run of one call: {run_s * 1e6:.1f} us; added steps: {added_s * 1e6:.3f} us; "
          f"run with them / without: {1 + added_s / run_s:.4f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
