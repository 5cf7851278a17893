"""Instructions of one uncontended history section (``HistoryTurn.enter`` then ``done``).

    .venv/bin/python benchmarks/history_section.py [--calls 20000]

Each call takes and leaves the section of one session's state in a running event loop, as
a guarded call with a session does when no other thread holds it. The process runs under
``valgrind --tool=cachegrind`` twice, with ``--calls`` sections and with none; the difference
divided by ``--calls`` is one section's instructions, without start-up. To compare with
another tree, run it with that tree's ``src`` first on ``PYTHONPATH`` (``enter`` was a plain
function before race24, a coroutine since: both are handled).
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any


async def _sections(calls: int) -> None:
    from guardrails.agent_framework._history import HistoryTurn

    state: dict[str, Any] = {}
    enter: Any = HistoryTurn.enter
    if inspect.iscoroutinefunction(enter):
        for _ in range(calls):
            turn = HistoryTurn()
            await turn.enter(state)
            turn.done()
    else:
        for _ in range(calls):
            turn = HistoryTurn()
            enter(turn, state)
            turn.done()


def _instructions(calls: int, out: Path) -> int:
    cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={out}",
           sys.executable, __file__, "--inner", str(calls)]
    done = subprocess.run(cmd, env={**os.environ, "PYTHONHASHSEED": "0"},
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"valgrind failed\n{done.stderr[-2000:]}")
    for line in out.read_text().splitlines():
        if line.startswith("summary:"):
            return int(line.split()[1])
    raise SystemExit(f"no summary in {out}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--inner", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner is not None:
        asyncio.run(_sections(args.inner))
        return
    with tempfile.TemporaryDirectory() as tmp:
        none = _instructions(0, Path(tmp) / "none.out")
        some = _instructions(args.calls, Path(tmp) / "some.out")
    import guardrails

    print(f"{guardrails.__file__}: {(some - none) / args.calls:,.0f} instructions a section "
          f"({args.calls} sections)")


if __name__ == "__main__":
    main()
