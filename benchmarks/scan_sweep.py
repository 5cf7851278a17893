"""Promise 8, swept for the provenance functions' scan budget: every scanning path on the
inputs that make it dearest per scan unit charged, cold and warm.

    .venv/bin/python benchmarks/scan_sweep.py [--only NAME] [--capacity]

For each case (``CASES``: the path it drives, and the call's value, request and history),
one fresh process (every cache cold) runs:

- ``cold`` / ``warm``: the provenance function on the inputs through ``Origins`` (as the
  engine sets it), twice: CPU time (``time.process_time``) and the scan units the call
  charged (``SCAN_BUDGET`` minus what is left); ``ns/unit`` is the larger of the two rates.
  ``SCAN_BUDGET`` x the worst ns/unit is what a call may cost when the whole budget goes
  to that path: ``x unit`` is the rate as a ratio to ``lib_provenance.UNIT_NS`` (the
  figure the costs are derived from), so ``SCAN_BUDGET`` x ``UNIT_NS`` x ``x unit`` over
  the 50 ms goal is a finding. Cold and warm units must be equal (a cache never decides
  a call): a difference is a finding.
- ``call``: a second fresh process, one whole ``PolicySet.evaluate`` of a policy calling
  the function, first call (its code built by one trivial call before), as a ratio to the
  50 ms goal. A ratio over 1 is a finding.

``--capacity``: how many 64 KiB pages of ordinary content (English, Japanese, link-dense)
one call reads before the budget runs out, the value named in each page or in none.
One run on a shared machine: compare ratios, repeat for noise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from provenance_first_call import PRELUDE  # (run as a script: benchmarks/ is on the path)

ROOT = Path(__file__).resolve().parent.parent
GOAL_MS = 50.0

K = 65_536
# name -> (function, Python expression of (value, request, results, trusted)), built in the child
CASES: dict[str, tuple[str, str]] = {
    "reading: 100 trusted 'a.' naming it": (
        "provenance", '("evil.example", "r", [(f"evil.example {i} " + "a." * K)[:K] '
        'for i in range(100)], True)'),
    "reading: 100 fresh 'a.' pages": (
        "untrusted", '("evil.example", "r", [(f"{i} " + "a." * K)[:K] for i in range(100)], False)'),
    "glue: 100 fresh '.Ab' pages": (
        "untrusted", '("evil.example", "r", [(f"{i} " + ".Ab" * K)[:K] for i in range(100)], False)'),
    "glue: 100 fresh 'a.b.Com ' pages": (
        "untrusted", '("evil.example", "r", [(f"{i} " + "a.b.Com " * K)[:K] for i in range(100)], False)'),
    "glue: 100 pages 'a.b.Com ' naming it": (
        "untrusted", '("a.b", "r", [(f"{i} " + "a.b.Com " * K)[:K] for i in range(100)], False)'),
    "value search: 100 pages of the literal": (
        "untrusted", '("evil.example", "r", [(f"{i} " + "evil.examplex " * K)[:K] '
        'for i in range(100)], False)'),
    "value search: 100 pages of its literal's letters": (
        "untrusted", '("evil.examplex", "r", [(f"{i} " + "e.xl" * K)[:K] for i in range(100)], False)'),
    "value search: an IBAN in 100 pages of separators": (
        "untrusted", '("GB82WEST12345698765432", "r", [(f"{i} " + "1 -2.(3)" * K)[:K] '
        'for i in range(100)], False)'),
    "fields: 100 pages of short lines naming it": (
        "provenance", '("evil.example", "r", [(f"{i} " + "evil.example\\n" * K)[:K] '
        'for i in range(100)], True)'),
    "fields: 100 pages of quoted strings": (
        "provenance", '("evil.example", "r", [(f"{i} evil.example " + "\'a\'," * K)[:K] '
        'for i in range(100)], True)'),
    "fields: 100 one-line 'a.' naming it, untrusted": (
        "provenance", '("evil.example", "r", [(f"evil.example {i} " + "a." * K)[:K] '
        'for i in range(100)], False)'),
    "request search: 64 K request of 'a.'": (
        "provenance", '("evil.example", ("evil.example " + "a." * K)[:K], ["evil.example"], True)'),
    "request search: requested args": (
        "provenance", '("evil.example", ("evil.example " + "a." * K)[:K], '
        '["evil.example"] * 100, True)'),
    "history search: given args, trusted": (
        "provenance", '("evil.example", "r", ["evil.example " + "a." * 30_000] * 100, True)'),
    "URL spellings: 50 link pages, rare every 32 lines": (
        "untrusted", '("evil.example", "r", ['
        '"".join((f"see https://site{i}.example/p/{j}?q=1 and www.n{j}.example/x\\n" if j % 32 '
        'else f"https://%65x{j}.example/ xn--bcher-kva.example http://0x7f.{j}/ u@10.0.0.{j % 250}\\n")'
        ' for j in range(1200))[:K] for i in range(50)], False)'),
    "URL spellings: escapes": (
        "untrusted", '("evil.example", "r", [(f"{i} https://x.example/" + "%41" * K)[:K] '
        'for i in range(100)], False)'),
    "URL spellings: one escape a token": (
        "untrusted", '("evil.example", "r", [(f"{i} " + "www.%41 " * K)[:K] '
        'for i in range(100)], False)'),
    "URL spellings: xn-- labels": (
        "untrusted", '("evil.example", "r", [(f"{i} " + "xn--bcher-kva." * K)[:K] '
        'for i in range(100)], False)'),
    "URL spellings: n-- probes": (
        "untrusted", '("evil.example", "r", [(f"{i} " + "n--" * K)[:K] for i in range(100)], False)'),
    "URL spellings: numeric hosts": (
        "untrusted", '("evil.example", "r", [(f"{i} " + "://0x7f.1 @1 " * K)[:K] '
        'for i in range(100)], False)'),
    "URL spellings: gate only": (
        "untrusted", '("evil.example", "r", [(f"{i} " + "@[" * K)[:K] for i in range(100)], False)'),
    "reading: 100 fresh prose pages": (
        "untrusted", '("evil.example", "r", [(f"{i} " + "The quick brown fox jumps over the '
        'lazy dog, said the report of 2024. " * K)[:K] for i in range(100)], False)'),
    "reading: 100 fresh link pages": (
        "untrusted", '("evil.example", "r", [(f"{i} " + "see https://docs.example.com/guide/'
        'page?id=42 and www.example.org/a/b\\n" * K)[:K] for i in range(100)], False)'),
    "reading: 100 fresh Japanese pages": (
        "untrusted", '("evil.example", "r", [(f"{i} " + "\\u3042\\uff21\\u200b" * K)[:K] '
        'for i in range(100)], False)'),
    "reading: 100 trusted 'é.' naming it": (
        "provenance", '("evil.example", "r", [(f"evil.example {i} " + "\\u00e9." * K)[:K] '
        'for i in range(100)], True)'),
    "letters: long value, 100 pages": (
        "untrusted", '(("w " * 600) + "end", "r", [(f"{i} " + "w " * K)[:K] for i in range(100)], False)'),
    "compile: 16-word value in 100 pages": (
        "provenance", '(" ".join(f"w{j}" for j in range(16)), "r", '
        '[f"{i} " + " ".join(f"w{j}" for j in range(16)) for i in range(100)], True)'),
    "mentions: list of texts": (
        "mentions", '("evil.example", "r", [(f"{i} " + "a." * 4096)[:8192] for i in range(64)], False)'),
    "a typical call": (
        "untrusted", '("hello", "say hello", ["a short page about hello"], False)'),
}

CHILD = r"""
import gc, json, sys, time
from guardrails.expr import lib_provenance as lp
from guardrails.expr.values import CelError
K = 65536
fn, source = sys.argv[1], sys.argv[2]
value, request, results, trusted = eval(source)
history = [{"tool": "fetch", "args": {"url": f"https://n.example/{i}"}, "effect": "allow",
            "trusted": trusted, "result": r} for i, r in enumerate(results)]

def once(value=value, request=request, history=history):
    origins = lp.Origins(request, history)
    token = lp.ORIGINS.set(origins)
    gc.collect()
    outcome = "ok"
    start = time.process_time()
    try:
        if fn == "mentions":
            lp.mentions(results, value)
        else:
            getattr(lp, fn)(value)
    except CelError as exc:
        outcome = "budget" if "budget" in str(exc) else "error"
    took = time.process_time() - start
    lp.ORIGINS.reset(token)
    return took * 1e9, lp.SCAN_BUDGET - origins.scan.left, outcome

once("w", "r", [{"tool": "fetch", "args": {}, "effect": "allow", "trusted": True,
                 "result": "warm w"}])  # (the module's own first use: as the engine's warm-up)
print(json.dumps([once(), once()]))
"""

POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: scan}
spec:
  match: {tools: [post]}
  rules:
    - name: p
      when: 'WHEN'
      action: deny
"""

CALL = PRELUDE + r"""
policies.evaluate("post", {"v": "w", "l": ["w"]}, history=history(["warm"], False), request="r")
value, request, results, trusted = eval(sys.argv[2])
h = history(results, trusted)
gc.collect()
start = time.process_time()
args = {"v": value, "l": results} if "args.l" in sys.argv[1] else {"v": value}
d = policies.evaluate("post", args, history=h, request=request)
took = time.process_time() - start
print(json.dumps([took * 1000, d.effect.value, [e.message for e in d.errors]]))
"""

WHEN = {"provenance": "provenance(args.v).size() > 0", "untrusted": "untrusted(args.v)",
        "mentions": "args.l.mentions(args.v)"}


def _child(script: str, *argv: str) -> object:
    out = subprocess.run([sys.executable, "-c", script, *argv], check=True,
                         capture_output=True, text=True, cwd=ROOT).stdout
    return json.loads(out)


def sweep(only: str) -> None:
    sys.path.insert(0, str(ROOT / "src"))
    from guardrails.expr import lib_provenance as lp

    unit_ns = float(getattr(lp, "UNIT_NS", 2.5))
    budget = lp.SCAN_BUDGET
    print(f"SCAN_BUDGET {budget:,} units, UNIT_NS {unit_ns} ns: "
          f"{budget * unit_ns / 1e6:.1f} ms when the whole budget is spent at that rate; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (a loaded "
          "machine reads every row slower alike)")
    print(f"{'case':48} {'units cold':>11} {'units warm':>11} {'ns/unit':>8} {'x unit':>7} "
          f"{'call ms':>8} {'x 50 ms':>8}  outcome")
    worst_rate, worst_call = (0.0, ""), (0.0, "")
    for name, (fn, source) in CASES.items():
        if only not in name:
            continue
        (cold_ns, cold_units, cold_out), (warm_ns, warm_units, warm_out) = _child(
            CHILD, fn, source)  # type: ignore[misc]
        rate = max(cold_ns / max(cold_units, 1), warm_ns / max(warm_units, 1))
        ms, effect, errors = _child(CALL, POLICY.replace("WHEN", WHEN[fn]), source)  # type: ignore[misc]
        note = ("budget" if any("budget" in e for e in errors)
                else f"{effect} ({errors[0][:40]})" if errors else effect)
        flags = []
        if ms > GOAL_MS:
            flags.append("over 50 ms")
        if cold_units != warm_units or cold_out != warm_out:
            flags.append("cold != warm")
        if budget * rate / 1e6 > GOAL_MS and cold_units >= budget // 16:
            flags.append("budget x rate over 50 ms")
        if cold_units >= budget // 16:  # (a small call's rate is its fixed costs)
            worst_rate = max(worst_rate, (rate / unit_ns, name))
        worst_call = max(worst_call, (ms / GOAL_MS, name))
        print(f"{name:48} {cold_units:>11,} {warm_units:>11,} {rate:>8.2f} "
              f"{rate / unit_ns:>7.2f} {ms:>8.1f} {ms / GOAL_MS:>8.2f}  "
              f"{cold_out}/{warm_out}/{note}" + ("  <-- " + ", ".join(flags) if flags else ""),
              flush=True)
    print(f"worst rate: {worst_rate[1]} at {worst_rate[0]:.2f}x UNIT_NS "
          f"({budget * worst_rate[0] * unit_ns / 1e6:.1f} ms for the whole budget); "
          f"worst call: {worst_call[1]} at {worst_call[0]:.2f}x 50 ms")


PAGES = {
    "English": ("The quick brown fox jumps over the lazy dog, said the report of 2024. "
                "Payments were sent to the usual accounts.\n"),
    "Japanese": "今日は良い天気です。東京の会議は午後三時に始まります。\n",
    "link-dense": "see https://docs.example.com/guide/page?id=42 and www.example.org/a/b\n",
}

CAPACITY = r"""
import json, sys
from guardrails.expr import lib_provenance as lp
from guardrails.expr.values import CelError
K = 65536
unit, named = sys.argv[1], sys.argv[2] == "1"
pages = [((("evil.example\n" if named else "") + f"{i} " + unit * K)[:K]) for i in range(400)]
history = [{"tool": "fetch", "args": {"url": f"https://n.example/{i}"}, "effect": "allow",
            "trusted": True, "result": r} for i, r in enumerate(pages)]
lo, hi = 0, len(pages)
while lo < hi:  # the most pages one call reads within the budget
    mid = (lo + hi + 1) // 2
    origins = lp.Origins("r", history[:mid])
    token = lp.ORIGINS.set(origins)
    try:
        lp.provenance("evil.example")
        lo = mid
    except CelError:
        hi = mid - 1
    lp.ORIGINS.reset(token)
print(lo)
"""


def capacity() -> None:
    print(f"{'64 KiB pages one call reads':28} {'not named':>10} {'named':>10}")
    for name, unit in PAGES.items():
        counts = [_child(CAPACITY, unit, named) for named in ("0", "1")]
        print(f"{name:28} {counts[0]:>10} {counts[1]:>10}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="run the cases whose name contains this")
    parser.add_argument("--capacity", action="store_true",
                        help="pages of ordinary content a call reads instead")
    options = parser.parse_args()
    if options.capacity:
        capacity()
    else:
        sweep(options.only)


if __name__ == "__main__":
    main()
