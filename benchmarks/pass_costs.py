"""What each pass of the provenance functions over a text costs on the pages a call meets:
fresh ones, each read once (the ``_Pass`` figures of ``lib_provenance``).

    .venv/bin/python benchmarks/pass_costs.py [--pages 100]

For each kind of 64 KiB page (prose, links, dot-dense, Japanese, Cyrillic, accented, past
the BMP) ``--pages`` distinct pages are built, then each pass is run once over every page
in turn (none is in the cache when it is read, as a call reads a history): the mean ns a
character, and the same over what the pass is charged per character (``_Pass.units``
over the page, times ``UNIT_NS``): ``x`` over 1.0 is a pass charged below its cost.
The best of repeated runs over one hot text (how the figures were first taken) reads
0.6-0.9x of this. One run on a shared machine: compare ratios.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from guardrails.expr import lib_provenance as lp  # noqa: E402
from guardrails.expr.lib_common import compile_re2  # noqa: E402

K = 65_536
UNITS = {
    "prose": "The quick brown fox jumps over the lazy dog, said the report of 2024. ",
    "links": "see https://docs.example.com/guide/page?id=42 and www.example.org/a/b\n",
    "a.": "a.",
    ".Ab": ".Ab",
    "e.": "e.",
    "Japanese": "日本語のテキストです。東京都港区株式会社様お問い合わせ請求書送金口座",
    "Cyrillic": "Съешь же ещё этих мягких французских булок, да выпей чаю. ",
    "accented": "Où est la fenêtre? Ça coûte très cher, naïve façade déjà vu. ",
    "astral": "\U0001d400\U0001f600 ab ",
}
VALUE = lp.matcher("evil.example", lp._Scan(lp.SCAN_BUDGET))
assert VALUE is not None
PATTERN = compile_re2(VALUE.pattern)
# pass -> (what it runs, the _Pass it is charged as)
PASSES = {
    "RE2: spelling gate": (lambda t: lp._ANY_SPELLING.search(t.encode("utf-8", "surrogatepass")),
                           lp.GATE),
    "RE2: value search": (lambda t: PATTERN.search(t), lp.RE2_SEARCH),
    "RE2: quoted strings": (lambda t: sum(1 for _ in lp._QUOTED_RE.finditer(t)), lp.RE2_SEARCH),
    "RE2: glue gate": (lambda t: lp._GLUED_SEEN_RE.search(t), lp.GLUE_SEEN),
    "find: literal": (lambda t: "evil.examplex." in t, lp.FIND),
    "find: count dots": (lambda t: t.count("."), lp.FIND),
    "find: lower": (lambda t: t.lower(), lp.REWRITE),
    "dense: identifier prefilter": (lp._dense_ascii, lp.DENSE),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=100)
    parser.add_argument("--only", default="", help="the pages whose name contains this")
    options = parser.parse_args()
    names = [n for n in UNITS if options.only in n]
    print(f"ns a character, mean over {options.pages} fresh pages (x: over what it is charged)")
    print(f"{'pass':22}" + "".join(f"{n:>14}" for n in names))
    worst = (0.0, "")
    for pass_name, (run, kind) in PASSES.items():
        row = []
        for name in names:
            unit = UNITS[name]
            pages = [(f"{i} " + unit * K)[:K] for i in range(options.pages)]
            charged = sum(kind.units(p) for p in pages) * lp.UNIT_NS
            gc.collect()
            start = time.perf_counter_ns()
            for page in pages:
                run(page)
            took = time.perf_counter_ns() - start
            row.append(f"{took / len(pages) / K:6.2f} {took / charged:5.2f}x ")
            worst = max(worst, (took / charged, f"{pass_name} over {name}"))
            del pages
        print(f"{pass_name:22}" + "".join(f"{r:>14}" for r in row), flush=True)
    print(f"worst: {worst[1]} at {worst[0]:.2f}x its charge")


if __name__ == "__main__":
    main()
