"""Cost of searching values by their encoded cores (red team 27: ``scrub._encoded``), as
ratios with and without them, alternated in one run.

    .venv/bin/python benchmarks/encoded_bench.py                      # with/without, one tree
    .venv/bin/python benchmarks/encoded_bench.py --against <base>/src    # this tree vs a base

"Without" builds the same scrubbers as before red team 27: ``_encoded`` giving nothing
(the needles the scrubber had before) and RE2 chunks of 32 KiB (``_CHUNK_CHARS``). Measured: ``scrub_bench.py``'s tool result (a dict of 200 short
strings as the framework serializes it, plus the 200 strings one by one) with a guard's
full memory (1,024 values, worst case: quotes, a backslash and a non-ASCII letter each; and
1,024 plain API-key-like values); a call's few secret values as a layer on a memory of one
value (one, three and five ASCII keys) on the same result, on 64 kB of prose, on a Japanese page
and on a base64 image in a data: URI; and spelling a call's layer (three keys, and one value
of ``MAX_LAYER_CHARS``), paid per call. CPU time, medians of 5 alternated rounds; one run,
one machine: ratios, not promises. ``--against`` runs the same cases (with the cores where
the tree has them) in this tree and in a base tree's ``src``, three processes each,
alternated, and prints the medians: what the change costs against the code before it,
whose few-needle scan was slower too.
"""

from __future__ import annotations

import base64
import itertools
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

from guardrails.engine import scrub as scrub_module
from guardrails.engine.scrub import MAX_LAYER_CHARS, Scrubber

_REAL = getattr(scrub_module, "_encoded", None)  # None in a tree before red team 27
_CHUNK = scrub_module._CHUNK_CHARS
MEASURE = "--measure" in sys.argv
"""Only the cases as this tree runs them (for ``--against``)."""
BEFORE_CHUNK_CHARS = 1 << 15
"""``_CHUNK_CHARS`` before red team 27."""


def _none(text: str) -> set[str]:
    return set()


def built(make: Callable[[], Scrubber], *, encoded: bool) -> Scrubber:
    """``make()`` spelled and compiled as now (``encoded``) or as before red team 27 (no
    encoded cores, RE2 chunks of ``BEFORE_CHUNK_CHARS``)."""
    if _REAL is None or encoded:
        s = make()
        s("")  # spelled and compiled
        return s
    scrub_module._encoded = _none  # type: ignore[assignment]
    scrub_module._CHUNK_CHARS = BEFORE_CHUNK_CHARS
    try:
        s = make()
        s("")
        return s
    finally:
        scrub_module._encoded, scrub_module._CHUNK_CHARS = _REAL, _CHUNK


def sample_us(fn: Callable[[], object], number: int) -> float:
    """CPU time of this process (not wall time: the machine is shared, and another
    process's turn on the core is not ours)."""
    t0 = time.process_time()
    for _ in range(number):
        fn()
    return (time.process_time() - t0) / number * 1e6


def compare(work: Callable[[bool], Callable[[], object]], *, number: int,
            rounds: int = 5) -> tuple[float, float]:
    """Medians of ``rounds`` samples, with and without the cores alternated."""
    if MEASURE:
        with_ = work(True)
        a = statistics.median(sample_us(with_, number) for _ in range(rounds))
        return a, a
    with_, without = work(True), work(False)
    a, b = [], []
    for _ in range(rounds):
        b.append(sample_us(without, number))
        a.append(sample_us(with_, number))
    return statistics.median(a), statistics.median(b)


def main() -> int:
    rng = random.Random(7)
    alphabet = string.ascii_letters + string.digits
    worst = ["tok-\"q'\\ñ-" + "".join(rng.choices(alphabet, k=rng.randint(20, 60)))
             for _ in range(1024)]
    plain = ["tok-" + "".join(rng.choices(alphabet, k=40)) for _ in range(1024)]
    # keys of many formats (RE2 finds no common prefix to skip to, unlike "tok-")
    mixed = [rng.choice(("sk-live-", "ghp_", "AKIA", "xoxb-", "")) + "".join(
        rng.choices(alphabet, k=rng.randint(16, 48))) for _ in range(1024)]
    keys = ["sk-live-" + "".join(rng.choices(alphabet, k=32)) for _ in range(5)]
    fields = ["".join(rng.choices(string.ascii_letters + " ", k=rng.randint(5, 40)))
              for _ in range(200)]
    result = json.dumps({f"k{i}": v for i, v in enumerate(fields)})
    prose = ("The quick brown fox jumps over the lazy dog, and the report says 42. " * 1000
             )[:65536]
    japanese = ("日本語のテキストです。東京都の天気は晴れ、気温は二十度。" * 800)[:16384]
    image = "data:image/png;base64," + base64.b64encode(rng.randbytes(48_000)).decode()

    def on_result(scrub: Scrubber) -> Callable[[], object]:
        def run() -> object:
            scrub(result)
            return [scrub(f) for f in fields]
        return run

    rows: list[tuple[str, float, float]] = []

    def row(name: str, make: Callable[[], Scrubber], text_of: Callable[[Scrubber],
            Callable[[], object]], number: int) -> None:
        a, b = compare(lambda enc: text_of(built(make, encoded=enc)), number=number)
        rows.append((name, a, b))

    row("full memory, 1,024 worst-case values: tool result",
        lambda: memory_of(worst), on_result, 10)
    row("full memory, 1,024 plain keys: tool result", lambda: memory_of(plain), on_result, 10)
    row("full memory, 1,024 plain keys: 64 kB prose",
        lambda: memory_of(plain), lambda s: lambda: s(prose), 10)
    row("full memory, 1,024 plain keys: 64 kB base64 image",
        lambda: memory_of(plain), lambda s: lambda: s(image), 10)
    row("full memory, 1,024 keys of many formats: tool result",
        lambda: memory_of(mixed), on_result, 10)
    row("full memory, 1,024 keys of many formats: 64 kB prose",
        lambda: memory_of(mixed), lambda s: lambda: s(prose), 10)
    row("full memory, 1,024 keys of many formats: 64 kB base64 image",
        lambda: memory_of(mixed), lambda s: lambda: s(image), 10)

    counter = itertools.count()

    def new_value(enc: bool) -> Callable[[], object]:
        full = built(lambda: memory_of(worst), encoded=enc)

        def run() -> object:  # merged into the top layer, its search compiled
            return built(lambda: full.merged([f"tok-new-{next(counter)}-\"q'\\ñ"]),
                         encoded=enc)(result)
        return run

    a, b = compare(new_value, number=3)
    rows.append(("a value the full worst-case memory has not seen (recompile)", a, b))
    one = built(lambda: memory_of(plain[:1]), encoded=False)
    for n in (1, 3, 5):
        row(f"a call's {n} key(s) on a memory of 1: tool result",
            lambda n=n: one.with_values(keys[:n]), on_result, 20)
        row(f"a call's {n} key(s) on a memory of 1: 64 kB prose",
            lambda n=n: one.with_values(keys[:n]), lambda s: lambda: s(prose), 20)
        row(f"a call's {n} key(s) on a memory of 1: 16 kB Japanese",
            lambda n=n: one.with_values(keys[:n]), lambda s: lambda: s(japanese), 20)
        row(f"a call's {n} key(s) on a memory of 1: 64 kB base64 image",
            lambda n=n: one.with_values(keys[:n]), lambda s: lambda: s(image), 20)

    def spelled(values: list[str]) -> Callable[[bool], Callable[[], object]]:
        def work(enc: bool) -> Callable[[], object]:
            def run() -> object:
                return built(lambda: one.with_values(values), encoded=enc)("x")
            return run
        return work

    for name, values, number in (
            ("spelling and first search of a call's 3 keys", keys[:3], 200),
            ("spelling and first search of one MAX_LAYER_CHARS value",
             ["".join(rng.choices(alphabet, k=MAX_LAYER_CHARS))], 10)):
        a, b = compare(spelled(values), number=number)
        rows.append((name, a, b))

    if MEASURE:
        print(json.dumps({name: a for name, a, _ in rows}))
        return 0
    width = max(len(r[0]) for r in rows)
    print(f"{'':{width}}  {'with':>10}  {'without':>10}  ratio")
    for name, a, b in rows:
        print(f"{name:{width}}  {a:8.1f}µs  {b:8.1f}µs  {a / b:5.2f}x")
    return 0



if __name__ == "__main__":
    if "--against" in sys.argv:
        sys.exit(against(__file__, sys.argv[sys.argv.index("--against") + 1]))
    sys.exit(main())
