"""CPU time of the table's ``load10k`` row, in fresh processes, alternated with other checkouts.

The row (``table.py --row load10k``) reads wall-clock seconds, which on the shared 2-core
machine measure the other processes as much as the code (2-2.5x the CPU time at load
average 3-4). This runs the row's own steps (``import guardrails``, ``guardrails.load`` of
``table.generated(10_000)``, the first decision) in a fresh process per run and reads
``time.process_time``, alternating the checkouts given, so a regression is told from the
machine::

    .venv/bin/python benchmarks/load_cpu.py . /tmp/base --repeat 3

Each checkout's ``src`` is put first on ``PYTHONPATH`` (the process prints which
``guardrails`` it imported). The figures: import, load, first decision, and their sum, the
minimum over the runs (the least disturbed), and each checkout's sum ÷ the first one's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

_CHILD = "--child"


def _child() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import table

    table.bytecode(table._package_dir())  # as installed (see table.bytecode)
    text = table.generated(10_000)
    c0 = time.process_time()
    import guardrails

    c1 = time.process_time()
    ps = table._load_text(text)
    c2 = time.process_time()
    ps.evaluate("tool_0", table._CALL, principal=table._PRINCIPAL)
    c3 = time.process_time()
    print(json.dumps({"import": c1 - c0, "load": c2 - c1, "first": c3 - c2,
                      "file": guardrails.__file__}))


def _run(checkout: Path) -> dict[str, float | str]:
    checkout = checkout.resolve()
    env = dict(os.environ)
    env["PYTHONPATH"] = str(checkout / "src") + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run([sys.executable, __file__, _CHILD], capture_output=True, text=True,
                          env=env, check=False, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"{checkout}: {done.stderr.strip()[-2000:]}")
    result: dict[str, float | str] = json.loads(done.stdout.strip().splitlines()[-1])
    if not str(result["file"]).startswith(str(checkout)):
        raise SystemExit(f"{checkout}: imported {result['file']}, not this checkout's")
    return result


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkouts", nargs="+", type=Path, help="worktrees, the first is 1x")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each (minimum kept)")
    options = parser.parse_args(argv)
    runs: dict[Path, list[dict[str, float | str]]] = {c: [] for c in options.checkouts}
    for _ in range(options.repeat):
        for checkout in options.checkouts:
            runs[checkout].append(_run(checkout))
    first_total = None
    print(f"{'checkout':40} {'import':>7} {'load':>7} {'first':>7} {'total':>7}  ratio"
          "   (CPU s, min of runs)")
    for checkout, results in runs.items():
        mins = {k: min(float(r[k]) for r in results) for k in ("import", "load", "first")}
        total = min(sum(float(r[k]) for k in ("import", "load", "first")) for r in results)
        first_total = first_total or total
        print(f"{checkout!s:40} {mins['import']:7.3f} {mins['load']:7.3f} "
              f"{mins['first']:7.3f} {total:7.3f}  {total / first_total:.2f}x")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == [_CHILD]:
        _child()
        sys.exit(0)
    sys.exit(main(sys.argv[1:]))
