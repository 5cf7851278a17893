"""History redaction: the one-walk form equals the engine's JSON-safe form, scrubbed."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from guardrails.agent_framework._history import redacted
from guardrails.agent_framework._secrets import Scrubber, scrub_json
from guardrails.engine.decision import redact_arguments

SECRET = "sk-live-XYZ"
values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True)
    | st.text(max_size=12) | st.just(SECRET) | st.binary(max_size=6),
    lambda c: st.lists(c, max_size=3) | st.tuples(c, c)
    | st.dictionaries(st.text(max_size=5), c, max_size=3),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(args=st.dictionaries(st.sampled_from(["api_key", "to", "body", "n"]), values,
                            max_size=4))
def test_redacted_equals_two_step_form(args: dict[str, Any]) -> None:
    scrub = Scrubber([SECRET], lambda text: text.replace("4111", "[card]"))
    names = frozenset({"api_key"})
    expected = scrub_json(redact_arguments(args, names), scrub)
    # Within the entry bound the one walk equals the two-step form; the bound itself is
    # pinned in tests/test_bounds_af.py, so here it is set wide enough for any example.
    got, truncated = redacted(args, names, scrub, limit=1 << 20)
    assert not truncated
    assert repr(got) == repr(expected)  # repr: NaN-safe structural equality
    assert SECRET not in repr(got)
