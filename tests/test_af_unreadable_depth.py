"""The chat middleware's cheap depth check is the stack walk it replaces.

``GuardChatMiddleware`` asks, for every function call's argument text, whether its brackets
could nest deeper than the framework's parser can take on the current stack
(``parse_depth()``, a walk of every frame). ``_beyond_parse_depth`` answers the same
question with one ``sys._getframe`` lookup. Hypothesis compares them at generated stack
depths, recursion limits (a host may lower it) and bracket counts, the bounds included.
"""

from __future__ import annotations

import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from guardrails.agent_framework import _unreadable


def _frames() -> int:
    frame = sys._getframe()
    count = 0
    while frame is not None:
        count += 1
        frame = frame.f_back  # type: ignore[assignment]
    return count


def _both(extra: int, brackets: int) -> tuple[bool, bool]:
    if extra > 0:
        return _both(extra - 1, brackets)
    return _unreadable._beyond_parse_depth(brackets), brackets > _unreadable.parse_depth()


@settings(max_examples=400, deadline=None)
@given(extra=st.integers(0, 120), headroom=st.integers(0, 400),
       brackets=st.one_of(st.integers(-1, 260), st.sampled_from([0, 1, 199, 200, 201])))
def test_the_cheap_check_is_the_walk(extra: int, headroom: int, brackets: int) -> None:
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(_frames() + extra + 20 + headroom)
    try:
        cheap, walked = _both(extra, brackets)
    finally:
        sys.setrecursionlimit(old)
    assert cheap == walked, (extra, headroom, brackets)


def test_deep_text_is_still_found_on_a_deep_stack() -> None:
    text = "[" * 150 + "]" * 150
    old = sys.getrecursionlimit()
    try:
        sys.setrecursionlimit(_frames() + 120)  # a host's low limit: fewer levels fit
        assert _unreadable.unreadable(text) == "depth"
    finally:
        sys.setrecursionlimit(old)
    assert _unreadable.unreadable(text) is None  # the default limit reads it
