"""Provenance of a URL whose host a long history names but never the URL (red team 24):
the URL's literal prefilter is its host, so each such text is searched by the pattern.

    PYTHONPATH=. .venv/bin/python benchmarks/provenance_url_bench.py   # alternate with a base
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from tests.af_support import UNTRUSTED_UPLOAD, load_text


def main() -> int:
    policies = load_text(Path(tempfile.mkdtemp()), UNTRUSTED_UPLOAD)
    page = ("News of the day, see evil.com for more. " * 1700)[:65536]
    history = [{"tool": "fetch", "args": {"url": f"https://n.example/{i}"}, "trusted": False,
                "effect": "allow", "result": page + str(i)} for i in range(50)]

    def once() -> object:
        return policies.evaluate(tool="upload", args={"url": "https://evil.com/drop"},
                                 history=history, request="Summarise")

    once()  # the lower-cased copies cached: the guard's steady case
    samples = []
    for _ in range(7):
        start = time.perf_counter()
        once()
        samples.append(time.perf_counter() - start)
    print(f"untrusted(url), 50 x 64 KiB naming its host: {statistics.median(samples) * 1e3:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
