"""One calibrated scan unit for the provenance functions (calib26; docs/performance.md,
"One scan unit"; promise 8): every pass over a text is charged for what it reads before it
reads, from one measured figure (``lib_provenance.UNIT_NS``), alike cold or warm.

Measured before (``benchmarks/scan_sweep.py``): 100 trusted results of one line of ``a.``
naming the value cost a first call 119 ms, 6.5 ns a unit charged (each read four times by
RE2, two of them charged); 100 fresh pages of ``a.`` 82 ms on 0.9 M units (an ASCII text's
reading was free); a regular expression compiled in a call and never charged cost 14 ms.
"""

from __future__ import annotations

from typing import Any

import pytest

from guardrails.expr import lib_common as lc
from guardrails.expr import lib_provenance as lp

K = 65_536


def _history(pages: list[str], trusted: bool) -> list[dict[str, Any]]:
    return [{"tool": "crm", "args": {"q": str(i)}, "effect": "allow", "trusted": trusted,
             "result": page} for i, page in enumerate(pages)]


def _charged(text: str) -> int:
    scan = lp._Scan(lp.SCAN_BUDGET)
    lp._lower(text, scan)
    return lp.SCAN_BUDGET - scan.left


def test_an_ascii_texts_reading_is_charged_by_its_passes() -> None:
    """Its spelling gate, glued-sentence gate and lower-casing read it: charged by its
    length (it cost nothing), and a dotted text by its dots besides (RE2 tries each)."""
    prose = ("The quick brown fox jumps over the lazy dog " * 2000)[:K]
    dotted = ("a." * K)[:K]
    assert _charged(prose) >= K * (lp.RE2_SEARCH.byte_ns + lp.FIND.byte_ns) / lp.UNIT_NS
    assert _charged(dotted) - _charged(prose) >= (K // 2) * lp.GLUE_SEEN.dot_ns / lp.UNIT_NS
    assert _charged(dotted) == _charged(dotted)  # (warm: cached, charged alike)


def test_glued_sentences_are_charged_their_python_pass() -> None:
    """Python's regex reads the text once the RE2 gate saw a glued sentence (``.Ab``
    ending the text: every dot starts a match that fails, 11 ns a character)."""
    text = "x " + ".Ab" * 21_000 + " "
    plain = "x " + ".Ab" * 20_999 + ".AB "
    assert lp._glue_seen(text) and not lp._glue_seen(plain)
    extra = _charged(text) - _charged(plain)
    assert extra >= lp.GLUE_FIND.units(text) - lp.GLUE_FIND.units(plain, 0, 1)


def test_every_pattern_compiled_in_a_call_is_charged(monkeypatch: pytest.MonkeyPatch) -> None:
    """RE2's compile cache is bounded and cleared whole when full (a policy's patterns
    known only at run time fill it): the provenance functions' own patterns were compiled
    again on a later call, uncharged (quoted strings: 14 ms). Every compile a call makes
    is one it is charged for (``COMPILE_SCAN_COST``); their own at import."""
    compiled: list[str] = []
    real = lc.re2.compile

    def counted(pattern: Any, *args: Any, **kwargs: Any) -> Any:
        compiled.append(pattern)
        return real(pattern, *args, **kwargs)

    monkeypatch.setattr(lc.re2, "compile", counted)
    lc._RE2_CACHE.clear()
    lp._LOWER.clear()
    origins = lp.Origins("r", _history(["evil.example\n'evil.example', x.Ab "], True))
    token = lp.ORIGINS.set(origins)
    try:
        assert lp.provenance("evil.example")[0]["whole"]
    finally:
        lp.ORIGINS.reset(token)
    assert sorted(compiled) == sorted(origins.scan.used)


def test_a_value_of_many_words_is_classified_by_its_first_ones(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A value of 500 one-letter words (``a.a.a...``, under ``VALUE_CHARS``) had all of
    them found to learn it has more than ``VALUE_WORDS``: pyre2 maps each match's offsets
    on a ``str`` from its start, 3.5 ms a value charged ``VALUE_COST`` (41 µs). At most
    ``VALUE_WORDS + 1`` words are read to tell."""
    seen: list[int] = []
    real = lp._WORD

    class Counted:
        def finditer(self, text: str) -> Any:
            for m in real.finditer(text):
                seen.append(1)
                yield m

        def findall(self, text: str) -> Any:
            found = real.findall(text)
            seen.extend([1] * len(found))
            return found

    monkeypatch.setattr(lp, "_WORD", Counted())
    value = ".".join(["a"] * 500) + ".7"
    m = lp._matcher_of(value, "str")
    assert m is not None and m.kind == "text" and m.partial
    assert len(seen) <= 3 * (lp.VALUE_WORDS + 1)
