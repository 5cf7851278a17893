"""The provenance scan budget charges each pass by what it meets, and a fresh value's
classification by its words (margin27; docs/performance.md, "One scan unit"; promise 8).

Measured before (``benchmarks/scan_sweep.py``, ``value_cost.py``, ``kept_readings.py``):
100 fresh pages of prose cost a call 0.98x a unit (the reading's first pass meets pages
no cache holds: 2.8-3.4 ns a byte, charged 1.8); a value of 16 words cost 103 µs to
classify, charged 41 (2.3x); 50 fresh kept pages past the BMP cost a call 46 ms, charged
as 23; and a Python ``str`` search of a page that is not ASCII was charged four bytes a
character, where it reads code points at 0.2-0.4 ns (a kept page of Japanese charged 8
times its search: 47 of the guard's 50 such pages fit a call). Unit counts, never times.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import guardrails
from guardrails.expr import lib_provenance as lp
from tests.af_support import load_text

K = 65_536
POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: origin}
spec:
  match: {tools: [post]}
  rules:
    - name: from-content
      when: 'provenance(args.v).size() > 0 && untrusted(args.v)'
      action: deny
      message: from content
"""


def _history(pages: list[str], trusted: bool = False,
             args: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return [{"tool": "fetch", "args": args or {"url": f"https://n.example/{i}"},
             "effect": "allow", "trusted": trusted, "result": page}
            for i, page in enumerate(pages)]


@pytest.fixture(name="policies")
def _policies(tmp_path: Path) -> guardrails.PolicySet:
    return load_text(tmp_path, POLICY)


def _over_budget(decision: guardrails.Decision) -> bool:
    return any("budget" in e.message for e in decision.errors)


def _value_charge(value: str) -> int:
    lp._matcher_of.cache_clear()
    scan = lp._Scan(lp.SCAN_BUDGET)
    lp.matcher(value, scan)
    return lp.SCAN_BUDGET - scan.left


def test_a_python_search_is_charged_by_code_points_and_re2_by_bytes() -> None:
    """``in`` and ``count`` read a Japanese page as fast as an ASCII one (code points);
    RE2 reads its UTF-8, up to four bytes a character."""
    ascii_page = ("a" * K)[:K]
    japanese = ("\u65e5\u672c\u8a9e" * K)[:K]
    assert lp.FIND.units(japanese) == lp.FIND.units(ascii_page)
    assert lp.RE2_SEARCH.units(japanese) - lp._units(lp.RE2_SEARCH.call_ns) >= 4 * (
        lp.RE2_SEARCH.units(ascii_page) - lp._units(lp.RE2_SEARCH.call_ns)) - 1
    assert lp.DENSE.units(japanese) >= 2 * lp.DENSE.units(ascii_page) - 1
    # ``in`` is charged as it meets a text of the literal's own characters
    assert lp.LITERAL.units(japanese) == lp.LITERAL.units(ascii_page) > lp.FIND.units(ascii_page)


def test_a_reading_is_charged_its_first_pass_over_a_fresh_page() -> None:
    """The spelling gate meets every page first: charged ``GATE`` (3.6 ns a byte), and a
    page of dots its dots besides."""
    prose = ("The quick brown fox jumps over the lazy dog " * 2000)[:K]
    dotted = ("a." * K)[:K]
    gate = lp.GATE.byte_ns * K / lp.UNIT_NS
    assert lp._reading_units(prose, 0, K) >= gate + lp.FIND.units(prose)
    assert lp._reading_units(dotted, 0, K) - lp._reading_units(prose, 0, K) >= (
        (K // 2) * lp.GLUE_SEEN.dot_ns / lp.UNIT_NS - 1_000)


def test_an_identifier_is_not_charged_a_literal_search_it_does_not_make() -> None:
    """An IBAN's prefilter is the text without separators (``DENSE``): its literal is
    empty, and ``"" in text`` reads nothing."""
    m = lp.matcher("GB82WEST12345698765432", lp._Scan(lp.SCAN_BUDGET))
    assert m is not None and m.literal == "" and m.dense
    page = ("\u65e5\u672c\u8a9e " * K)[:K]
    scan = lp._Scan(lp.SCAN_BUDGET)
    assert not m.found(page, scan)
    assert lp.SCAN_BUDGET - scan.left == lp.SEARCH_COST + lp.DENSE.units(page)


def test_a_values_classification_is_charged_by_its_words() -> None:
    """Each word its classification reads, at most ``VALUE_WORDS`` + 1, and each of its
    first ``VALUE_CHARS`` characters; cold and warm alike."""
    one = "w0"
    sixteen = " ".join(f"w{j}" for j in range(16))
    many = " ".join(f"w{j}" for j in range(1_000))
    extra = _value_charge(sixteen) - _value_charge(one)
    assert extra >= 15 * lp.WORD_COST + (len(sixteen) - len(one)) * lp.VALUE_CHAR_COST
    assert lp._value_units(many) == ((lp.VALUE_WORDS + 1) * lp.WORD_COST
                                     + lp.VALUE_CHARS * lp.VALUE_CHAR_COST)
    # words of any script: one a character, as far as they are read (and four times the
    # characters' charge)
    assert lp._value_units("\u6771\u4eac " * 10) == ((lp.VALUE_WORDS + 1) * lp.WORD_COST
                                                   + 4 * 30 * lp.VALUE_CHAR_COST)
    cold = _value_charge(sixteen)
    warm = lp._Scan(lp.SCAN_BUDGET)
    lp.matcher(sixteen, warm)  # (``_matcher_of`` cached now)
    assert cold == lp.SCAN_BUDGET - warm.left
    assert _value_charge("12345") == lp.VALUE_COST + lp._reading_units("12345", 0, 5) + (
        lp.WORD_COST + 5 * lp.VALUE_CHAR_COST)


def test_a_kept_reading_past_the_bmp_is_charged_its_surrogates_cold_and_warm() -> None:
    """Its check encodes four bytes a character: charged ``KEPT_ASTRAL_COST`` each, learned
    from that encoding, and alike where this process made or checked it before."""
    page = ("\U0001d400\U0001f600 ab " * K)[:K - 2] + " 1"
    reading = lp.kept_reading(page)
    assert reading is not None
    warm = lp._Scan(lp.SCAN_BUDGET)
    assert lp._checked_reading(reading, page, warm) == reading["low"]
    lp._CHECKED.clear()
    cold = lp._Scan(lp.SCAN_BUDGET)
    assert lp._checked_reading(reading, page, cold) == reading["low"]
    assert warm.left == cold.left
    past = sum(ord(c) > 0xFFFF for c in page) + sum(ord(c) > 0xFFFF for c in reading["low"])
    assert past > 0
    assert lp.SCAN_BUDGET - cold.left == lp.KEPT_COST * (len(page) + len(reading["low"])) + (
        lp.KEPT_ASTRAL_COST * past)


def test_dense_dots_and_escapes_run_the_budget_out_and_prose_is_read(
        policies: guardrails.PolicySet) -> None:
    """100 fresh pages each: of ``a.`` or of escapes, over the call's bounds (denied); 50
    of prose (the guard's ``HISTORY_LIMIT``), read whole and decided by the rules (the
    value is in none)."""
    for unit, prefix in (("a.", ""), ("%41", "https://x.example/")):
        pages = [(f"{i} {prefix}" + unit * K)[:K] for i in range(100)]
        decision = policies.evaluate("post", {"v": "evil.example"}, request="r",
                                     history=_history(pages))
        assert decision.effect.value == "deny" and _over_budget(decision), unit
    prose = [(f"{i} " + "The report of 2024 said payments were sent. " * K)[:K]
             for i in range(50)]
    decision = policies.evaluate("post", {"v": "evil.example"}, request="r",
                                 history=_history(prose))
    assert not decision.errors and decision.effect.value == "allow"


def test_many_values_of_many_words_run_the_budget_out(policies: guardrails.PolicySet) -> None:
    """Each result naming the value has its call's argument values classified and looked
    up in the request (``Origins.requested``): 40 entries of 16 fresh values of 16 words,
    about 67 ms to classify (``benchmarks/value_cost.py``: 103-110 µs each), were charged
    26 ms as ``VALUE_COST`` alone and decided by the rule before margin27; charged their
    words, the call is over its bounds (denied)."""
    lp._matcher_of.cache_clear()
    history = [{"tool": "fetch", "effect": "allow", "trusted": False,
                "args": {f"a{j}": " ".join(f"w{i}x{j}y{k}" for k in range(16))
                         for j in range(16)},
                "result": f"see evil.example {i}"} for i in range(40)]
    decision = policies.evaluate("post", {"v": "evil.example"}, request="a request",
                                 history=history)
    assert decision.effect.value == "deny" and _over_budget(decision)
    few = policies.evaluate("post", {"v": "evil.example"}, request="a request",
                            history=history[:4])
    assert not few.errors and few.effect.value == "deny"  # (decided by the rule)
