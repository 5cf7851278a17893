"""Cost of red team 27c's case folding (``scrub._folded`` mapping ``_ODD_FOLDS`` after
``str.lower``, a non-ASCII value's case forms as needles: ``scrub._case_forms``), this tree against
a base tree's ``src``, three processes each, alternated; CPU time, medians.

    .venv/bin/python benchmarks/fold_bench.py --against <base>/src

Cases: a call's keys (three ASCII, or two ASCII and a German one with ``ß`` or a Greek one
with a final sigma: its layer asks about ``_ODD_FOLDS``) on 64 kB of
English, German (``ß`` in every line: the fold's split path), Russian and Greek prose and
a tool result; spelling that call's layer (paid per call); a guard's full memory of 1,024
values with ``ß`` (twice the needles now) on a tool result. One run, one machine: ratios,
not promises.
"""

from __future__ import annotations

import json
import random
import statistics
import string
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scrub_bench import against, memory_of


def cpu_us(fn: Callable[[], object], number: int) -> float:
    """Median over 5 rounds of the CPU time of one call, in µs."""
    times = []
    for _ in range(5):
        start = time.process_time()
        for _ in range(number):
            fn()
        times.append((time.process_time() - start) / number * 1e6)
    return statistics.median(times)


def measure() -> dict[str, float]:
    rng = random.Random(27)
    alphabet = string.ascii_letters + string.digits
    keys = ["".join(rng.choices(alphabet, k=24)) for _ in range(3)]
    german_keys = [*keys[:2], "Grüße-Schlüssel-8812-straße"]
    greek_keys = [*keys[:2], "κλειδί-ΛΟΓΑΡΙΑΣΜΟΣ-4417"]
    pages = {
        "English": "The quick brown fox jumps over the lazy dog near the river bank. " * 1000,
        "German": "Größe und Straße: die Grüße aus München schließen die Tür. " * 1100,
        "Russian": "Съешь же ещё этих мягких французских булок, да выпей чаю. " * 1100,
        "Greek": "Ο ΛΟΓΟΣ της ημέρας: ΓΡΑΜΜΑΤΑ ΚΑΙ ΣΥΜΒΟΛΑ ΤΗΣ ΓΛΩΣΣΑΣ μας. " * 1000,
    }
    fields = ["".join(rng.choices(string.ascii_letters + " ", k=rng.randint(5, 40)))
              for _ in range(200)]
    result = json.dumps({f"k{i}": v for i, v in enumerate(fields)})
    one = memory_of(["tok-" + "".join(rng.choices(alphabet, k=30))])
    out: dict[str, float] = {}
    for label, ks in (("3 ASCII keys", keys), ("2 ASCII + 1 German key", german_keys),
                      ("2 ASCII + 1 Greek key", greek_keys)):
        layer = one.with_values(ks)
        layer("x")
        for page, text in pages.items():
            out[f"{label}: 64 kB {page}"] = cpu_us(
                lambda t=text, s=layer: s(t), 20)  # type: ignore[misc]
        out[f"{label}: tool result"] = cpu_us(
            lambda s=layer: s(result), 50)  # type: ignore[misc]
        out[f"{label}: spelling the layer"] = cpu_us(
            lambda ks=ks: one.with_values(ks)("x"), 200)  # type: ignore[misc]
    memory = memory_of([f"Straße-{i:04d}-" + "".join(rng.choices(alphabet, k=20))
                        for i in range(1024)])
    memory("x")
    out["full memory of 1,024 values with ß: tool result"] = cpu_us(lambda: memory(result), 10)
    out["full memory of 1,024 values with ß: 64 kB German"] = cpu_us(
        lambda: memory(pages["German"]), 10)
    return out



if __name__ == "__main__":
    if "--measure" in sys.argv:
        print(json.dumps(measure()))
        sys.exit(0)
    if "--against" in sys.argv:
        sys.exit(against(__file__, sys.argv[sys.argv.index("--against") + 1]))
    print(__doc__)
    sys.exit(2)
