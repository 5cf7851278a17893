"""The fast RE2 boolean test agrees with google-re2's own search."""

from __future__ import annotations

import re2
from hypothesis import given, settings
from hypothesis import strategies as st

from guardrails.expr import compile_expression
from guardrails.expr.stdlib import regex_tester

PATTERNS = ["^[A-Z]{2}[0-9]{2}[A-Z0-9]{4,30}$", "a+b", "é.", "(?i)secret", "^$", "x*",
            r"\bword\b", "[\u4e00-\u9fff]+"]


@settings(max_examples=300, deadline=None)
@given(pattern=st.sampled_from(PATTERNS), text=st.text(max_size=40))
def test_tester_agrees_with_search(pattern: str, text: str) -> None:
    compiled = re2.compile(pattern)
    assert regex_tester(compiled)(text) == (compiled.search(text) is not None)


def test_tester_uses_re2_internals_it_expects() -> None:
    """If google-re2 changes the internals the fast path reads, this fails loudly
    (the code would silently fall back to the slower ``search``)."""
    compiled = re2.compile("a")
    assert callable(compiled._regexp.Match)
    assert compiled._regexp.Match(re2._Anchor.UNANCHORED, b"xa", 0, 2)[0] == (1, 2)


def test_matches_in_expressions_including_lone_surrogates() -> None:
    program = compile_expression('s.matches("^a.c$")', declared=["s"])
    assert program.evaluate({"s": "abc"}) is True
    assert program.evaluate({"s": "aéc"}) is True
    assert program.evaluate({"s": "abcd"}) is False
    dynamic = compile_expression("s.matches(p)", declared=["s", "p"])
    assert dynamic.evaluate({"s": "GB12", "p": "^[A-Z]{2}"}) is True
    try:
        result = program.evaluate({"s": "a\ud800c"})
    except Exception as e:  # an error value is fine; it must be a CEL error
        assert type(e).__name__ == "CelError"
    else:
        assert result in (True, False)
