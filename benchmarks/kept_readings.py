"""A result's reading kept in its history entry (record26): what recording it costs, and
how many 64 KiB pages of a script a provenance call can search with and without it.

    .venv/bin/python benchmarks/kept_readings.py [--repeat 5]

- ``record ms``: ``kept_reading`` of one fresh 64 KiB page (the guard's after-call work:
  normalising, respelling, lower-casing and hashing it), CPU time, the best of ``--repeat``.
- ``pages before / after``: the most fresh pages of the history (``PolicySet.evaluate``,
  an untrusted tool's results, the engine's bound of 100 entries) after which a call
  naming the payee of the request (``untrusted`` and ``request.mentions`` of it) is still
  decided by its rules, not over the scan budget: entries as old sessions hold them (no
  reading), then as the guard records them (with one).
- ``call ms``: CPU of that call after 50 fresh pages (the guard's bound), without / with
  readings, in one run, in a cold replica (the call checks every reading's sum).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import guardrails
from guardrails.expr.lib_provenance import _CHECKED, kept_reading

POLICY = """
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: payee-origin}
spec:
  match: {tools: [send_money]}
  rules:
    - name: payee-from-untrusted-content
      when: untrusted(args.recipient)
      action: deny
    - name: payee-not-named
      when: '!request.mentions(args.recipient)'
      action: deny
"""
IBAN = "GB82WEST12345698765432"
SCRIPTS = {
    "Japanese": "日本語のテキストです。東京都港区株式会社様お問い合わせ請求書送金口座",
    "Russian": "Съешь же ещё этих мягких французских булок, да выпей чаю. ",
    "accented": "Où est la fenêtre? Ça coûte très cher, naïve façade déjà vu. ",
    "dense (あ, Ａ, zero-width space)": "\u3042\uff21\u200b",
    "past the BMP (𝐀, 😀)": "\U0001d400\U0001f600\U0001d401",
}
_FRESH = iter(range(10**9))


def page(alphabet: str) -> str:
    """A fresh 64 KiB page: the script's words in a random order (its characters, for a
    script written without spaces)."""
    rng = random.Random(next(_FRESH))
    if " " not in alphabet:
        return "".join(rng.choice(alphabet) for _ in range(65_536))
    words = alphabet.split()
    return " ".join(rng.choice(words) for _ in range(65_536 // 4))[:65_536]


def history(alphabet: str, n: int, *, kept: bool) -> list[dict[str, Any]]:
    out = []
    for _ in range(n):
        result = page(alphabet)
        entry = {"tool": "fetch", "args": {"url": "https://x.example/"}, "effect": "allow",
                 "trusted": False, "result": result}
        if kept:
            reading = kept_reading(result)
            assert reading is not None
            entry["reading"] = reading
        out.append(entry)
    _CHECKED.clear()  # (a cold replica: its readings checked by the call itself)
    return out


def decided(policies: guardrails.PolicySet, entries: list[dict[str, Any]]) -> tuple[bool, float]:
    t0 = time.thread_time()
    d = policies.evaluate("send_money", {"recipient": IBAN, "amount": 1.0},
                          request=f"pay {IBAN}", history=entries)
    return not d.errors, time.thread_time() - t0


def most_pages(policies: guardrails.PolicySet, alphabet: str, kept: bool) -> int:
    low, high = 0, 100
    while low < high:  # the most pages still decided by the rules (decided is monotone)
        mid = (low + high + 1) // 2
        if decided(policies, history(alphabet, mid, kept=kept))[0]:
            low = mid
        else:
            high = mid - 1
    return low


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", default="", help="the pages whose name contains this")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "p.yaml").write_text(POLICY)
        policies = guardrails.load(Path(tmp) / "p.yaml")
    print(f"{'page':34} {'record ms':>9} {'pages before':>12} {'pages after':>11} "
          f"{'call ms, 50 pages: before / after':>34}")
    for name, alphabet in SCRIPTS.items():
        if opts.only not in name:
            continue
        record = float("inf")
        for _ in range(opts.repeat):
            text = page(alphabet)
            t0 = time.thread_time()
            kept_reading(text)
            record = min(record, time.thread_time() - t0)
        before, after = most_pages(policies, alphabet, False), most_pages(policies, alphabet, True)
        times: dict[bool, float] = {False: float("inf"), True: float("inf")}
        effects: dict[bool, bool] = {}
        for _ in range(opts.repeat):
            for kept in (False, True):  # alternated
                ok, spent = decided(policies, history(alphabet, 50, kept=kept))
                times[kept] = min(times[kept], spent)
                effects[kept] = ok
        print(f"{name:34} {record * 1e3:9.2f} {before:12d} {after:11d} "
              f"{times[False] * 1e3:10.1f}{'' if effects[False] else ' (over)':7} / "
              f"{times[True] * 1e3:.1f}{'' if effects[True] else ' (over)'} "
              f"= {times[True] / times[False]:.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
