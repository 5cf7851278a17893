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


# --------------------------------------------------------------------------- Python's re for safe patterns

import time  # noqa: E402

from guardrails.expr import safe_re  # noqa: E402

# Pieces of RE2 syntax, valid and not, in and out of the safe subset.
_PIECES = ["a", "b", "ab", ".", "x", "-", " ", "\\.", "\\d", "\\D", "\\w", "\\W", "\\s", "\\S",
           "\\b", "\\B", "\\A", "\\z", "\\n", "\\t", "^", "$", "|", "(", ")", "(?:", "[", "]",
           "[a-c]", "[^ab]", "[\\d.]", "[\\w-]", "[a\\-z]", "[.-9]", "*", "+", "?", "*?", "+?",
           "{2}", "{1,3}", "{2,}", "{,2}", "{", "}", "(?i)", "(?s)", "(?m)", "\\pL", "[[:alpha:]]",
           "\\x41", "\\Z", "é", "\\v", "[&&]", "[--]", "#", "\\$", "\\^"]  # fmt: skip
_patterns = st.lists(st.sampled_from(_PIECES), max_size=8).map("".join)
_texts = st.text(alphabet="abx-. \n\t019é_\v\r", max_size=30)


def _re2_or_none(pattern: str) -> re2._Regexp | None:  # type: ignore[name-defined]
    try:
        return re2.compile(pattern)
    except Exception:
        return None


@settings(max_examples=3000, deadline=None)
@given(pattern=_patterns, texts=st.lists(_texts, min_size=1, max_size=8))
def test_python_translation_agrees_with_re2(pattern: str, texts: list[str]) -> None:
    compiled = _re2_or_none(pattern)
    translation = safe_re.translate(pattern)
    if compiled is None or translation is None:
        return
    for text in texts:
        want = compiled.search(text) is not None
        assert regex_tester(compiled)(text) == want, (pattern, text, translation.python)
        if text.isascii() and len(text) <= translation.max_input:
            assert (translation.search(text) is not None) == want, (pattern, text)


def test_the_subset_covers_typical_policy_patterns() -> None:
    for pattern in ["^[A-Z]{2}[0-9]{2}[A-Z0-9]{4,30}$", "\\bcurl\\b", "^[a-z0-9_.-]+$",
                    "^(?:[0-9]+|[0-9]{1,3}(?:,[0-9]{3})+)(?:\\.[0-9]{1,2})?$", "password"]:
        translation = safe_re.translate(pattern)
        assert translation is not None and translation.max_input >= 30, pattern


def test_what_stays_on_re2() -> None:
    for pattern in ["(?i)secret", "\\pL+", "[[:alpha:]]", "é", "\\x41", "a{,2}", "(?P<n>a)"]:
        assert safe_re.translate(pattern) is None, pattern


def test_semantic_traps_are_translated_exactly() -> None:
    """Where Python's re and RE2 differ on the same text, the translation follows RE2."""
    cases = [("a$", "a\n", False),  # Python's $ matches before a final newline
             ("^\\s$", "\v", False),  # Python's \s includes \v
             ("\\d", "\u0661", False),  # Arabic-Indic digit: RE2's \d is ASCII (RE2 path)
             ("\\w+\\z", "ab", True)]
    for pattern, text, want in cases:
        compiled = re2.compile(pattern)
        assert (compiled.search(text) is not None) is want
        assert regex_tester(compiled)(text) is want, pattern


def test_backtracking_patterns_are_bounded() -> None:
    """Exponential patterns get a tiny input limit: beyond it RE2 runs, so no input is slow."""
    for pattern, evil in [("(a+)+$", "a" * 5000 + "!"), ("(a|aa)*b", "a" * 5000),
                          ("(a*)*c", "a" * 5000), ("a*a*a*a*a*b", "a" * 5000),
                          ("(.*,){5}x", "a," * 2500)]:
        translation = safe_re.translate(pattern)
        assert translation is None or translation.max_input < 50, pattern
        test = regex_tester(re2.compile(pattern))
        for n in (1, 10, 30, 100, 5000):
            start = time.perf_counter()
            assert test(evil[:n]) is (re2.search(pattern, evil[:n]) is not None)
            assert time.perf_counter() - start < 0.5, (pattern, n)


def test_work_bound_holds_at_the_limit() -> None:
    """At the largest input Python's re is given, the worst inputs still finish fast."""
    for pattern in ["(a|b|ab)*c", "(x+x+)+y", "[a-z]*[a-z]*[a-z]*1", "(a?){8}a{8}"]:
        translation = safe_re.translate(pattern)
        if translation is None:
            continue
        n = translation.max_input
        for evil in ("a" * n, "ab" * (n // 2), "x" * n, "z" * n):
            start = time.perf_counter()
            translation.search(evil[:n])
            assert time.perf_counter() - start < 0.2, (pattern, n)
