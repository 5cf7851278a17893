"""First-call CPU of one evaluated call on inputs built against the provenance functions'
reading (red team 25), each in a fresh process (every cache cold), alternated against a
base tree in one run.

    .venv/bin/python benchmarks/provenance_first_call.py                    # this tree
    .venv/bin/python benchmarks/provenance_first_call.py --against ../main/src --repeat 3

Promise 8 (docs/security-model.md): one call at most 50 ms of CPU whatever the model or
the tools send. Per input: ``time.process_time`` of the first ``PolicySet.evaluate`` in a
process that evaluated one trivial call before (the policies' code is built), its effect,
and with ``--against`` the base tree's figure and this tree's as a ratio of it. Medians of
``--repeat`` processes. One run, one (shared, loaded) machine: compare ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
K = 65_536
POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: prov}
spec:
  match: {tools: [post]}
  rules:
    - name: p
      when: 'args.l.exists(v, untrusted(v))'
      action: deny
"""

CASES: dict[str, str] = {
    # name -> Python expression of (values, results, trusted), evaluated in the child
    "a value: one letter and 300,000 combining marks": '(["e" + "\\u0301" * 300_000], ["a note"], False)',
    "a value: 450,000 'a_'": '(["a_" * 450_000], ["a note"], False)',
    "100 trusted results naming it, one line of 'é.'": '(["evil.example"], [(f"evil.example {i} " + "é." * K)[:K] for i in range(100)], True)',
    "100 trusted results naming it, one line of 'a.'": '(["evil.example"], [(f"evil.example {i} " + "a." * K)[:K] for i in range(100)], True)',
    "100 trusted results naming it, Hindi prose": '(["evil.example"], [(f"evil.example {i} " + "नमस्ते दुनिया, यह एक परीक्षण है। " * 3000)[:K] for i in range(100)], True)',
    "100 fresh pages of '.Ab'": '(["evil.example"], [(f"{i} " + ".Ab" * K)[:K] for i in range(100)], False)',
    "100 fresh pages of 'a.'": '(["evil.example"], [(f"{i} " + "a." * K)[:K] for i in range(100)], False)',
    "100 fresh pages of 'a.b.Com '": '(["evil.example"], [(f"{i} " + "a.b.Com " * K)[:K] for i in range(100)], False)',
    "a typical call": '(["hello"], ["a short page about hello"], False)',
}

PRELUDE = r"""
import gc, json, sys, tempfile, time
from pathlib import Path
import guardrails
K = 65536
d = Path(tempfile.mkdtemp()); (d / "p.yaml").write_text(sys.argv[1])
policies = guardrails.load(d)
def history(results, trusted):
    return [{"tool": "fetch", "args": {"url": f"https://n.example/{i}"}, "effect": "allow",
             "trusted": trusted, "result": r} for i, r in enumerate(results)]
"""
"""A child process's start: the policy of ``argv[1]`` loaded, ``history()`` of fresh
results (shared with benchmarks/scan_sweep.py)."""

CHILD = PRELUDE + r"""
policies.evaluate("post", {"l": ["w"]}, history=history(["warm"], False), request="r")
values, results, trusted = eval(sys.argv[2])
h = history(results, trusted)
gc.collect()
start = time.process_time()
d = policies.evaluate("post", {"l": values}, history=h, request="please post it")
took = time.process_time() - start
print(json.dumps([took * 1000, d.effect.value]))
"""


def _run(src: str | None, case: str) -> tuple[float, str]:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = src
    out = subprocess.run([sys.executable, "-c", CHILD, POLICY, CASES[case]], env=env,
                         check=True, capture_output=True, text=True).stdout
    ms, effect = json.loads(out)
    return float(ms), str(effect)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", default=None, help="a base tree's src/ directory")
    parser.add_argument("--repeat", type=int, default=3)
    opts = parser.parse_args()
    here = str(ROOT / "src")
    print(f"{'input':52} {'this ms':>8} {'effect':>6}" + (
        f" {'base ms':>8} {'effect':>6} {'ratio':>6}" if opts.against else ""))
    for case in CASES:
        mine: list[float] = []
        base: list[float] = []
        effects = ["", ""]
        for _ in range(opts.repeat):
            ms, effects[0] = _run(here, case)
            mine.append(ms)
            if opts.against:
                ms, effects[1] = _run(opts.against, case)
                base.append(ms)
        line = f"{case:52} {statistics.median(mine):8.1f} {effects[0]:>6}"
        if opts.against:
            b = statistics.median(base)
            line += f" {b:8.1f} {effects[1]:>6} {statistics.median(mine) / b:6.2f}"
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
