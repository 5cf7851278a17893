"""Provenance cost, as ratios measured in one run.

    .venv/bin/python benchmarks/provenance_bench.py

The library's payments policy (provenance of the payee: untrusted(), request.mentions(),
provenance()) decides one call with histories of 0, 10 and 100 untrusted results of
64 KiB each (100 x 64 KiB is the engine's default bound: the worst case), for payees of
every matching kind, none of which is in the results (so every text is searched). Ratios
are to the same call with an empty history. Also the first call over fresh results (no
lower-cased copies cached yet) and the guard's case (the same result objects every call).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import guardrails

ROOT = Path(__file__).resolve().parent.parent
FILLER = ("Invoice 2291 from Acme: 1,500.00 EUR due, account GB82 WEST, call +44 20 ... "
          * 1000)[:65_536]
PAYEES = {"identifier (IBAN)": "FR7630006000011234567890189", "email": "eve@evil.example",
          "text": "Eve Mallory", "number": "987654", "phone": "+1 (555) 123-4567"}


def median_ms(fn: Callable[[], Any], *, rounds: int = 5, number: int = 5) -> float:
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - t0) / number * 1e3)
    return statistics.median(samples)


def history(n: int, tag: str = "") -> list[dict[str, Any]]:
    return [{"tool": "read_inbox", "args": {}, "effect": "allow", "trusted": False,
             "result": (tag + str(i) + " " + FILLER)[:65_536]} for i in range(n)]


def main() -> None:
    policies = guardrails.load(ROOT / "policies" / "payments.yaml")
    request = "Please pay the invoice in my inbox."
    print("payments policy, payee in no result (every text searched); ms per evaluate()")
    for kind, payee in PAYEES.items():
        args = {"recipient": payee, "amount": 120}

        def run(h: list[dict[str, Any]], a: dict[str, Any] = args) -> Any:
            return policies.evaluate("send_money", a, history=h, request=request)

        base = median_ms(lambda: run([]))
        h10, h100 = history(10), history(100)
        t10 = median_ms(lambda h=h10: run(h))
        t100 = median_ms(lambda h=h100: run(h))
        fresh = []
        for r in range(5):
            h = history(100, tag=f"{kind}{r}")
            t0 = time.perf_counter()
            run(h)
            fresh.append((time.perf_counter() - t0) * 1e3)
        print(f"  {kind:18} empty {base:6.3f}  10 x 64 KiB {t10:6.2f} ({t10 / base:5.0f}x)"
              f"  100 x 64 KiB {t100:6.2f} ({t100 / base:5.0f}x)"
              f"  first call on fresh results {statistics.median(fresh):6.2f}")


if __name__ == "__main__":
    main()
