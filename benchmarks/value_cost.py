"""Promise 8: what a fresh value's classification costs (``lib_provenance.matcher``: its
kind read, its search built) against the scan units its first use in a call is charged.

    .venv/bin/python benchmarks/value_cost.py [--count 400]

For each kind of value (``VALUES``: the dearest of each family we could build), one fresh
process classifies ``--count`` distinct values never seen before (every cache cold), each
charged to its own ``_Scan`` as a call's first use of it: CPU time a value
(``time.process_time``), the units charged (``VALUE_COST`` and what the value's own
reading and letters add), and ``x unit``: ns a unit charged over ``UNIT_NS``. A row over
1.0 is a value charged below its cost. One run on a shared machine: compare ratios.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# name -> Python expression of the i-th value (built in the child)
VALUES: dict[str, str] = {
    "host": 'f"n{i}.example.com"',
    "URL": 'f"https://n{i}.example.com/a/b/c?q={i}"',
    "URL, long path": 'f"https://n{i}.example.com/" + "/".join(f"p{j}" for j in range(60))',
    "e-mail": 'f"user{i}@n{i}.example.com"',
    "IBAN": 'f"GB{i % 90 + 10}WEST{i:014d}"',
    "phone": 'f"+44 20 {i:04d} {i:04d}"',
    "date": 'f"2026-{i % 12 + 1:02d}-{i % 28 + 1:02d}"',
    "amount": 'f"{i},{i % 1000:03d}.50"',
    "number (int)": 'i * 7919 + 1',
    "text: 2 words": 'f"hello w{i}"',
    "text: 16 words": '" ".join(f"w{i}x{j}" for j in range(16))',
    "text: 16 long words": '" ".join(f"word{i}x{j}" * 8 for j in range(16))',
    "text: 17 words (partial)": '" ".join(f"w{i}x{j}" for j in range(17))',
    "text: 500 short words": '" ".join(f"a{i}" for _ in range(500))',
    "text: 1,000 chars of a.": 'f"{i}" + "a." * 500',
    "text: 4,000 chars of a.b": 'f"{i}" + "a.b " * 1000',
    "text: accented 16 words": '" ".join(f"w\\u00e9{i}x{j}" for j in range(16))',
    "text: 16 words with marks": '" ".join(f"we\\u0301{i}x{j}" for j in range(16))',
    "text: Japanese": 'f"{i}" + "\\u6771\\u4eac\\u90fd\\u6e2f\\u533a" * 20',
    "URL: escapes": 'f"https://n{i}.example.com/" + "%41" * 300',
    "host: xn-- labels": '".".join(f"xn--bcher-kva{i}" for _ in range(20)) + ".com"',
}

CHILD = r"""
import json, sys, time
from guardrails.expr import lib_provenance as lp
source, count = sys.argv[1], int(sys.argv[2])
values = [eval(source, {"i": i}) for i in range(count)]
lp.matcher("warm", lp._Scan(lp.SCAN_BUDGET))  # (the module's own first use)
units = 0
start = time.process_time()
for v in values:
    scan = lp._Scan(lp.SCAN_BUDGET)
    lp.matcher(v, scan)
    units += lp.SCAN_BUDGET - scan.left
took = time.process_time() - start
print(json.dumps([took * 1e9 / count, units / count, len(str(values[0]))]))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=400)
    parser.add_argument("--only", default="", help="run the values whose name contains this")
    options = parser.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    from guardrails.expr import lib_provenance as lp

    print(f"VALUE_COST {lp.VALUE_COST:,} units ({lp.VALUE_COST * lp.UNIT_NS / 1000:.1f} µs), "
          f"UNIT_NS {lp.UNIT_NS} ns")
    print(f"{'value':28} {'chars':>6} {'µs a value':>11} {'units':>9} {'charged µs':>11} "
          f"{'x unit':>7}")
    worst = (0.0, "")
    for name, source in VALUES.items():
        if options.only not in name:
            continue
        out = subprocess.run([sys.executable, "-c", CHILD, source, str(options.count)],
                             check=True, capture_output=True, text=True, cwd=ROOT).stdout
        ns, units, chars = json.loads(out)
        rate = ns / units / lp.UNIT_NS
        worst = max(worst, (rate, name))
        print(f"{name:28} {chars:>6} {ns / 1000:>11.1f} {units:>9,.0f} "
              f"{units * lp.UNIT_NS / 1000:>11.1f} {rate:>7.2f}"
              + ("  <-- charged below its cost" if rate > 1.0 else ""), flush=True)
    print(f"worst: {worst[1]} at {worst[0]:.2f}x UNIT_NS")


if __name__ == "__main__":
    main()
