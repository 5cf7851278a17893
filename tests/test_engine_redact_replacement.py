"""A redact replacement is a template: a bad one is a load error, never an evaluate error."""

from __future__ import annotations

from pathlib import Path

import pytest
import re2
from hypothesis import given, settings
from hypothesis import strategies as st

import guardrails
from tests.engine_support import policy

_SPEC = """
    rules:
      - {{name: r, when: 'true', action: deny, message: 'token tok123'}}
    redact:
      - name: tok
        regex: '{regex}'
        replacement: '{replacement}'
"""


@pytest.mark.parametrize("replacement", [r"[\2]", "x\\", r"\g<nope>"])
def test_bad_replacement_template_is_a_load_error(tmp_path: Path, replacement: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(policy(spec=_SPEC.format(regex=r"tok(\d+)", replacement=replacement)))
    with pytest.raises(guardrails.PolicyError) as info:
        guardrails.load(path)
    (problem,) = info.value.errors
    assert "replacement" in problem.message


@pytest.mark.parametrize(("replacement", "expected"), [
    ("[REDACTED:tok]", "token [REDACTED:tok]"),
    (r"tok-\1", "token tok-123"),
    (r"<\g<0>>", "token <tok123>"),
])
def test_good_replacement_still_applies(tmp_path: Path, replacement: str, expected: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(policy(spec=_SPEC.format(regex=r"tok(\d+)", replacement=replacement)))
    decision = guardrails.load(path).evaluate("t", {})
    assert decision.message == expected


# --- the joined pre-search (Redactor) decides exactly as the patterns one by one --------

_PATTERN_PARTS = ["abc", "(?i)abc", "^a", "c$", "(?m)^b", "[0-9]{3,}", "a+b", "x|y",
                  "\\bword\\b", "(?i)tok_[a-z]{4}", "(?s)a.b", "é+", "(a)(b)", "(?P<n>q)",
                  "REDACTED", "\\[", "z*"]


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.sampled_from(_PATTERN_PARTS), min_size=1, max_size=6),
       replacements=st.lists(st.sampled_from(["[REDACTED]", "abc", "", "b", "x\\1"]),
                             min_size=6, max_size=6),
       text=st.lists(st.sampled_from([*"abcxyzq0123é[]\n _", "word", "tok_abcd",
                                      "REDACTED"]), max_size=20).map("".join))
def test_joined_search_changes_nothing(parts: list[str], replacements: list[str],
                                       text: str) -> None:
    """A text none of the patterns matches is returned as is; any other goes through every
    pattern in order, so a replacement that makes a later pattern match is still applied."""
    from guardrails.engine.evaluate import Redactor
    from guardrails.engine.policy import RedactPattern
    from guardrails.engine.scrub import may_escape, redact_escaped
    from guardrails.expr.lib_common import RE2_OPTIONS

    patterns = []
    for i, p in enumerate(parts):
        try:
            compiled = re2.compile(p, RE2_OPTIONS)
            compiled.sub(replacements[i], "")
        except Exception:
            continue
        patterns.append(RedactPattern(f"p{i}", compiled, replacements[i]))
    if not patterns:
        return
    expected = text
    try:
        for r in patterns:
            expected = r.pattern.sub(r.replacement, expected)
    except Exception:
        return  # a replacement naming a group the pattern lacks
    if may_escape(expected):  # a line break is an escape too (red team 20): then its views
        expected = redact_escaped(expected, [r.pattern for r in patterns])
    assert Redactor(patterns)(text) == expected
