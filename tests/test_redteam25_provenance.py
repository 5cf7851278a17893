"""Red team 25: work of the provenance functions still uncharged (promise 8: one call at
most 50 ms of CPU, decided alike cold or warm).

Budget 24 charged reading non-ASCII texts (``READ_COST``), glued sentences, fields and
values. Two readings were still charged far below their cost, both ``_WORDLESS.sub``
(a letter and digit form, one regex substitution a character that is not one):

- a value's letters and digits (``Matcher.words``): a value of one letter and 300,000
  combining marks cost its first call 87-117 ms (``untrusted(args.to)``, allowed),
  charged ``READ_COST`` a character; an ASCII value of 450,000 ``a_`` 92 ms, charged a
  value's fixed ``VALUE_COST``;
- each field of a result that names the value (``Origins.whole``): 100 trusted results,
  each the value and one line of 32,000 ``é.`` (or ``a.``, or Hindi prose), cost a call
  0.44-0.72 s, charged an eighth of a unit a character.

Now an ASCII text's letters and digits are taken at C speed (``bytes.translate``) and any
other text's are charged ``LETTERS_COST`` a character before they are read, cold or warm.
Figures: benchmarks/provenance_first_call.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from guardrails import Effect
from guardrails.engine.evaluate import SCAN_ERROR
from guardrails.expr import lib_provenance as lp
from tests.af_support import load_text

POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: recipients}
spec:
  match: {tools: [send]}
  rules:
    - name: injected
      when: 'untrusted(args.to)'
      action: deny
"""

K = 65_536
MARKS = "e" + "\u0301" * 300_000


def _history(pages: list[str], trusted: bool) -> list[dict[str, Any]]:
    return [{"tool": "crm", "args": {"q": str(i)}, "effect": "allow", "trusted": trusted,
             "result": page} for i, page in enumerate(pages)]


def _scan_of(value: Any) -> int:
    scan = lp._Scan(lp.SCAN_BUDGET)
    lp.matcher(value, scan)
    return lp.SCAN_BUDGET - scan.left


@pytest.mark.parametrize("value", [MARKS[:20_000], "é." * 10_000, "नमस्ते दुनिया " * 1_000])
def test_a_non_ascii_values_letters_are_charged_cold_and_warm(value: str) -> None:
    lp._matcher_of.cache_clear()
    cold = _scan_of(value)
    warm = _scan_of(value)
    assert cold == warm
    assert cold >= (lp.READ_COST + lp.LETTERS_COST) * len(value)


def test_an_ascii_values_letters_cost_a_fixed_charge() -> None:
    """At C speed: no ``LETTERS_COST`` a character (``a_`` is not a letter: both go), only
    its reading's passes (``_reading_units``, calib26: the spelling gate and lower-casing
    were read uncharged) and its classification's words and first characters
    (``_value_units``, margin27)."""
    assert lp.matcher("a_" * 1_000, lp._Scan(lp.SCAN_BUDGET)) is not None
    long = "a_" * 100_000
    assert _scan_of(long) - _scan_of("a_b") == (
        lp._reading_units(long, 0, len(long)) - lp._reading_units("a_b", 0, 3)
        + lp._value_units(long) - lp._value_units("a_b"))
    assert _scan_of(long) - _scan_of("a_b") < lp.LETTERS_COST * len(long) // 16
    assert lp._matcher_of("a_" * 1_000, "str").words == "a" * 1_000  # type: ignore[union-attr]


def test_a_value_of_marks_is_over_the_scan_budget(tmp_path: Path) -> None:
    policies = load_text(tmp_path, POLICY)
    history = _history(["a note"], False)
    fine = policies.evaluate("send", {"to": MARKS[:10_000]}, history=history)
    assert (fine.effect, fine.errors) == (Effect.ALLOW, ())
    for _ in ("cold", "warm"):
        over = policies.evaluate("send", {"to": MARKS}, history=history)
        assert over.effect is Effect.DENY
        assert [e.message for e in over.errors if e.element == "input"] == [SCAN_ERROR]


LINES = {
    "é.": ("é." * K)[:K - 16],
    "hindi": ("नमस्ते दुनिया, यह एक परीक्षण है। " * 3_000)[:K - 16],
}


@pytest.mark.parametrize("line", sorted(LINES))
def test_long_non_ascii_fields_are_charged(tmp_path: Path, line: str) -> None:
    """Each result names the value: its fields are read (``whole``), charged before."""
    policies = load_text(tmp_path, POLICY)
    pages = [f"evil.example {LINES[line]}" for _ in range(100)]
    for trusted in (True, False):
        for _ in ("cold", "warm"):
            d = policies.evaluate("send", {"to": "evil.example"},
                                  history=_history(pages, trusted))
            assert d.effect is Effect.DENY
            assert [e.message for e in d.errors if e.element == "input"] == [SCAN_ERROR]
    # A few such pages are read whole: a trusted one vouches
    few = policies.evaluate("send", {"to": "evil.example"}, history=_history(pages[:2], True))
    assert (few.effect, few.errors) == (Effect.ALLOW, ())


def test_long_ascii_fields_are_read_whole(tmp_path: Path) -> None:
    """A few trusted pages of one long line vouch; 100 of ``a.`` cost a first call
    57-119 ms and were allowed, each read four times by RE2 (the spelling gate, the
    glued-sentence gate, the value's search, quoted strings) and twice at C speed, two
    of them charged (calib26): every pass is charged now, and the call fails closed."""
    policies = load_text(tmp_path, POLICY)
    pages = [f"evil.example {('a.' * K)[:K - 16]}" for _ in range(100)]
    few = policies.evaluate("send", {"to": "evil.example"}, history=_history(pages[:16], True))
    assert (few.effect, few.errors) == (Effect.ALLOW, ())
    for trusted in (True, False):
        for _ in ("cold", "warm"):
            d = policies.evaluate("send", {"to": "evil.example"},
                                  history=_history(pages, trusted))
            assert d.effect is Effect.DENY
            assert [e.message for e in d.errors if e.element == "input"] == [SCAN_ERROR]


def test_a_field_is_whole_as_before() -> None:
    """The letters-and-digits form is the regex's: a field that is the value and nothing
    more, in either alphabet."""
    for field, value in (("'Bob_Smith'", "bob smith"), ("- name: Ünal Öz", "ünal öz"),
                         ("x: bob@acme.com", "bob@acme.com")):
        o = lp.Origins("", _history([f"{field}\nother: text"], True))
        (place,) = o.places(value)
        assert place.whole, (field, value)


# ------------------------------------------------------------------ glued sentences, cold


def test_the_glued_prefilter_misses_no_white_space() -> None:
    """``_glue_seen`` finds what ``_GLUED`` finds, after any white space Python's ``\\s``
    reads (the prefilter is RE2's, with white space of its own)."""
    import sys

    spaces = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]
    for space in spaces:
        for text in (f"see www.x.com.They{space}said", f"a.b.Com{space}", "a.b.Com",
                     f"www.x.com.They{space}x{space}y.z.Ab{space}"):
            assert lp._glue_seen(text) and lp._GLUED.findall(text), (text, hex(ord(space)))
    for text in (".Ab" * 100 + ".", "a." * 100, "www.x.com.they said", "x.Com_", "x.COM "):
        assert not lp._glue_seen(text) and not lp._GLUED.findall(text), text


def test_a_cold_history_of_dotted_pages_decides_alike(tmp_path: Path) -> None:
    """Fresh ASCII pages of ``.Ab`` (no glued sentence, a dot to try every third
    character): read at RE2 speed, and decided alike cold or warm. Each dot is charged
    (``GLUE_SEEN``; calib26: 100 fresh pages of ``a.`` cost a first call 82 ms, charged
    a search each): 16 such pages are read, 100 of ``a.`` run the budget out."""
    policies = load_text(tmp_path, POLICY)
    for page in (".Ab", "a.", "a.Ab."):
        pages = [(f"{n} {page}" + page * K)[:K] for n in range(100)]
        for count in (16, 100):
            history = _history(pages[:count], False)
            decided = [policies.evaluate("send", {"to": "evil.example"}, history=history)
                       for _ in ("cold", "warm")]
            seen = [(d.effect, [e.message for e in d.errors if e.element == "input"])
                    for d in decided]
            assert seen[0] == seen[1], (page, count)
            if count == 16:
                assert seen[0] == (Effect.ALLOW, []), page
            elif page == "a.":
                assert seen[0] == (Effect.DENY, [SCAN_ERROR])
