"""Cost of scrubbing what leaves a guarded call, as ratios measured in one run (issue 10).

    .venv/bin/python benchmarks/scrub_bench.py

A guard scrubs every tool result with every value it ever injected (up to
``INJECTED_MEMORY``, each in its JSON- and repr-escaped spellings). This measures one tool
result (a dict of 200 short strings, as the framework serializes it, plus 200 strings
walked one by one as content fields) scrubbed by a guard remembering 1 value versus a full
memory of 1,024, and the same full memory with the old per-needle scan instead of one RE2
search; and a call's own secret values put on top of the full memory as a layer versus a
merged copy. One run, one machine: ratios, not absolute promises.
"""

from __future__ import annotations

import json
import random
import statistics
import string
import sys
import time
from collections.abc import Callable

from guardrails.engine import scrub as scrub_module
from guardrails.engine.scrub import Scrubber


def median_us(fn: Callable[[], object], *, rounds: int = 7, number: int = 20) -> float:
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - t0) / number * 1e6)
    return statistics.median(samples)


def main() -> int:
    rng = random.Random(7)
    alphabet = string.ascii_letters + string.digits + "\"'\\ñ-"
    injected = ["tok-" + "".join(rng.choices(alphabet, k=rng.randint(20, 60)))
                for _ in range(1024)]
    fields = ["".join(rng.choices(string.ascii_letters + " ", k=rng.randint(5, 40)))
              for _ in range(200)]
    result = json.dumps({f"k{i}": v for i, v in enumerate(fields)})

    def work(scrub: Scrubber) -> Callable[[], object]:
        def run() -> object:
            scrub(result)
            return [scrub(f) for f in fields]
        return run

    one = Scrubber(injected[:1])
    full = Scrubber(injected)
    one(""), full("")
    t_one = median_us(work(one))
    t_full = median_us(work(full))
    saved = scrub_module._SCAN_NEEDLES
    scrub_module._SCAN_NEEDLES = 10**9  # the old way: one ``in`` test per needle
    try:
        t_scan = median_us(work(Scrubber(injected)), rounds=3, number=3)
    finally:
        scrub_module._SCAN_NEEDLES = saved
    # Per call, the call's own secret values go on top of the memory: a layer (only their
    # spellings worked out) versus a merged copy (every spelling re-sorted, the search
    # compiled again), then one message scrubbed.
    message = "denied: " + fields[0]

    def layered() -> object:
        return full.with_values([f"call-secret-{rng.random()}"])(message)

    def merged() -> object:
        return full.merged([f"call-secret-{rng.random()}"])(message)

    t_layer = median_us(layered)
    t_merge = median_us(merged, rounds=3, number=3)
    print(f"scrub one tool result (1 + 200 texts), 1 value remembered:      {t_one:9.1f} µs")
    print(f"same, 1,024 values remembered ({len(full._needles):,} spellings, one RE2 search): "
          f"{t_full:9.1f} µs  ({t_full / t_one:.1f}x)")
    print(f"same, 1,024 values, a scan per spelling (the old way):            {t_scan:9.1f} µs  "
          f"({t_scan / t_full:.0f}x the RE2 search)")
    print(f"a call's own secret on top of a full memory, one message scrubbed: {t_layer:9.1f} µs"
          f"  (a merged copy instead: {t_merge:.0f} µs, {t_merge / t_layer:.0f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
