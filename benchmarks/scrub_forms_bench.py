"""Cost of reading texts composed (NFC) and of the wider fillers (red team 24), as ratios
against a base worktree, alternated in one run.

    .venv/bin/python benchmarks/scrub_forms_bench.py                 # this tree, µs a text
    .venv/bin/python benchmarks/scrub_forms_bench.py --against ../main/src  # ratios

The scrubber reads a text that holds a combining mark (or a character composing changes
alone) in one more view, composed: prose in decomposed form, Hindi or Vietnamese with
marks, a JSON result of such prose. A text without one (ASCII, composed Latin, CJK) pays
only the search for one. One run, one machine: ratios, not absolute promises.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
import unicodedata
from collections.abc import Callable

VIET = "Tiếng Việt là ngôn ngữ của người Việt, được sử dụng chính thức tại Việt Nam. "
HINDI = "हिन्दी विश्व की एक प्रमुख भाषा है और भारत की राजभाषा है। क़िला और ज़मीन। "
CASES: dict[str, str] = {
    "ascii prose 2 kB": ("The quick brown fox jumps over the lazy dog. " * 46)[:2048],
    "composed Vietnamese 2 kB": (VIET * 30)[:2048],
    "decomposed Vietnamese 2 kB": unicodedata.normalize("NFD", (VIET * 30)[:2048]),
    "Hindi 2 kB": (HINDI * 30)[:2048],
    "CJK 2 kB": ("日本語のテキストです。" * 200)[:2048],
    "JSON of decomposed Vietnamese 64 kB": json.dumps(
        {f"k{i}": unicodedata.normalize("NFD", VIET) for i in range(800)})[:65536],
    # red team 25: runs no process has seen (each measure starts with none remembered),
    # and the secret after them between zero-width spaces (every view is read)
    "distinct runs: 32 K CJK letters and a mark": "".join(
        chr(0x4E00 + i) + "\u0301" for i in range(32_768)) + " " + "\u200b".join(
        "Ngệ-Café-Zq9vTx3mW2pL"),
    "distinct runs: 21 K astral letters and a mark": "".join(
        chr(0x20000 + i) + "\u0301" for i in range(21_845)) + " " + "\u200b".join(
        "Ngệ-Café-Zq9vTx3mW2pL"),
}


def _median_us(fn: Callable[[], object], rounds: int = 7, number: int = 20) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - start) / number * 1e6)
    return statistics.median(samples)


def measure() -> dict[str, float]:
    from guardrails.engine import scrub
    from guardrails.engine.scrub import Scrubber

    scrubber = Scrubber(["tok-\"q'\\ñ-Zq9vTx3mW2pLr8", "Ngệ-Café-Zq9vTx3mW2pL"])
    out = {}
    for name, text in CASES.items():
        def once(text: str = text, name: str = name) -> None:
            for cache in (scrub._RECENT_VIEWS, scrub._RECENT_ROUGH, scrub._RECENT_JSON):
                cache._items.clear()  # a text seen the first time
            if name.startswith("distinct runs"):
                scrub._composed_run.cache_clear()
            scrubber(text)
        out[name] = _median_us(once)
    return out


def main() -> int:
    if "--measure" in sys.argv or "--against" not in sys.argv:
        print(json.dumps(measure()))
        return 0
    base = sys.argv[sys.argv.index("--against") + 1]
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    runs: dict[str, list[dict[str, float]]] = {"new": [], "base": []}
    for _ in range(3):
        for label, path in (("new", here), ("base", base)):
            env = dict(os.environ, PYTHONPATH=path)
            done = subprocess.run([sys.executable, __file__, "--measure"], env=env,
                                  capture_output=True, text=True, check=True)
            runs[label].append(json.loads(done.stdout))
    for name in CASES:
        new = statistics.median(r[name] for r in runs["new"])
        old = statistics.median(r[name] for r in runs["base"])
        print(f"{name:40} new {new:9.1f} µs  base {old:9.1f} µs  new/base {new / old:5.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
