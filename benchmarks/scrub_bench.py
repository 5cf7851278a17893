"""Cost of scrubbing what leaves a guarded call, as ratios measured in one run (issue 10).

    .venv/bin/python benchmarks/scrub_bench.py

A guard scrubs every tool result with every value it ever injected (up to
``INJECTED_MEMORY``, each in every spelling our serializers give it), kept in layers of
``_MEMORY_LAYER`` values. Worst case on purpose: every value holds quotes, a backslash and
a non-ASCII letter, so each has its full set of spellings. Measured: one tool result (a
dict of 200 short strings as the framework serializes it, plus the 200 strings walked one
by one as content fields) scrubbed with 1 value remembered versus a full memory (layered as
the guard builds it, and in one layer), the full memory with a scan per spelling instead of
RE2; what a call pays that injects a value the memory has not seen; and a call's own secret
values put on top of the full memory as a layer versus a merged copy. One run, one machine:
ratios, not absolute promises.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import statistics
import string
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from guardrails.agent_framework._function import _MEMORY_LAYER
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


def memory_of(values: list[str]) -> Scrubber:
    """Built as a guard builds its memory: merged into layers of _MEMORY_LAYER values."""
    memory = Scrubber()
    for v in values:
        memory = (memory.with_values([v]) if memory.top_layer_size >= _MEMORY_LAYER
                  else memory.merged([v]))
    return memory



def against(script: str, base: str, *, runs: int = 3) -> int:
    """Runs ``script --measure`` (which prints one JSON map of µs) with this tree's ``src``
    and with ``base`` on ``PYTHONPATH``, alternated ``runs`` times in fresh processes, and
    prints the medians side by side: on a shared machine the only honest "before"."""
    here = str(Path(__file__).resolve().parent.parent / "src")
    found: dict[str, list[dict[str, float]]] = {here: [], base: []}
    for _ in range(runs):
        for tree in (here, base):
            env = dict(os.environ, PYTHONPATH=tree)
            done = subprocess.run([sys.executable, script, "--measure"], env=env,
                                  capture_output=True, text=True, check=True)
            found[tree].append(json.loads(done.stdout.strip().splitlines()[-1]))
    names = list(found[here][0])
    width = max(map(len, names))
    print(f"{'':{width}}  {'this tree':>10}  {'base':>10}  ratio")
    for name in names:
        a = statistics.median(r[name] for r in found[here])
        b = statistics.median(r[name] for r in found[base])
        print(f"{name:{width}}  {a:8.1f}µs  {b:8.1f}µs  {a / b:5.2f}x")
    print("load average:", " ".join(f"{x:.1f}" for x in os.getloadavg()))
    return 0


def main() -> int:
    rng = random.Random(7)
    alphabet = string.ascii_letters + string.digits
    injected = ["tok-\"q'\\ñ-" + "".join(rng.choices(alphabet, k=rng.randint(20, 60)))
                for _ in range(1024)]
    fields = ["".join(rng.choices(string.ascii_letters + " ", k=rng.randint(5, 40)))
              for _ in range(200)]
    result = json.dumps({f"k{i}": v for i, v in enumerate(fields)})

    def work(scrub: Scrubber) -> Callable[[], object]:
        def run() -> object:
            scrub(result)
            return [scrub(f) for f in fields]
        return run

    one, full, flat = memory_of(injected[:1]), memory_of(injected), Scrubber(injected)
    for s in (one, full, flat):
        s("")
    t_one = median_us(work(one))
    t_full = median_us(work(full))
    t_flat = median_us(work(flat))
    saved = scrub_module._SCAN_NEEDLES
    scrub_module._SCAN_NEEDLES = 10**9  # the old way: one ``in`` test per spelling
    try:
        t_scan = median_us(work(Scrubber(injected)), rounds=3, number=3)
    finally:
        scrub_module._SCAN_NEEDLES = saved

    counter = itertools.count()

    def new_value() -> object:  # merge into the top layer, compile its search on first use
        return full.merged([f"tok-new-{next(counter)}-\"q'\\ñ"])(result)

    t_new = median_us(new_value, rounds=3, number=5)

    message = "denied: " + fields[0]

    def layered() -> object:
        return full.with_values([f"call-secret-{next(counter)}"])(message)

    def merged_copy() -> object:
        return flat.merged([f"call-secret-{next(counter)}"])(message)

    plain = memory_of(["tok-" + "".join(rng.choices(alphabet, k=40)) for _ in range(1024)])
    plain("")
    t_plain = median_us(work(plain))
    t_layer = median_us(layered)
    t_merge = median_us(merged_copy, rounds=3, number=3)

    n_forms = len(flat._needles)
    print(f"scrub one tool result (1 + 200 texts), 1 value remembered:       {t_one:10.1f} µs")
    print(f"same, 1,024 values ({n_forms:,} spellings), layers of {_MEMORY_LAYER}:         "
          f"{t_full:10.1f} µs  ({t_full / t_one:.1f}x)")
    print(f"same, 1,024 values in one layer (one RE2 search):                {t_flat:10.1f} µs")
    print(f"same, 1,024 values, a scan per spelling (the old way):           {t_scan:10.1f} µs"
          f"  ({t_scan / t_full:.0f}x the layered memory)")
    print(f"same, 1,024 plain API-key-like values (one spelling each):        {t_plain:10.1f} µs")
    print(f"a call injecting a value the full memory has not seen:           {t_new:10.1f} µs")
    print(f"a call's own secret on top of the full memory, one message:      {t_layer:10.1f} µs"
          f"  (a merged copy of a one-layer memory instead: {t_merge:.0f} µs, "
          f"{t_merge / t_layer:.0f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
