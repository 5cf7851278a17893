"""The agent's names as the engine reads them: the tuple shortcut is the general reading.

``PolicySet.evaluate(agent=...)`` reads the caller's agent names on every call. The guard
passes a tuple of plain non-empty strings (the agent's name and id), which is returned as
it is; anything else is read by the general code (bounded, plain strings of their data,
empty names dropped, none at all: unidentified). Hypothesis compares the two on generated
values, hostile ones included (``str`` subclasses with their own equality, empty names,
too many names, lists, iterators, non-strings).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from guardrails.engine.policyset import _MAX_AGENT_NAMES, _agent_names, _agent_names_read


class _Shouting(str):
    def __eq__(self, other: object) -> bool:
        return True

    def __hash__(self) -> int:
        return 0


_names = st.one_of(st.text(max_size=6), st.just(""),
                   st.builds(_Shouting, st.text(max_size=4)), st.integers(), st.none())
_agents = st.one_of(
    st.none(), st.text(max_size=6),
    st.lists(_names, max_size=4).map(tuple),
    st.lists(st.text(min_size=1, max_size=3), min_size=1, max_size=3).map(tuple),
    st.lists(_names, max_size=4),
    st.integers(_MAX_AGENT_NAMES - 1, _MAX_AGENT_NAMES + 2).map(lambda n: ("a",) * n),
    st.lists(st.text(max_size=3), max_size=3).map(iter),
)


def _same(left: Any, right: Any) -> bool:
    if left is None or right is None:
        return left is right
    return (type(left) is tuple and type(right) is tuple and len(left) == len(right)
            and all(type(a) is str and type(b) is str and str.__eq__(a, b)
                    for a, b in zip(left, right, strict=True)))


@settings(max_examples=500, deadline=None)
@given(agent=_agents)
def test_the_shortcut_reads_names_as_the_general_code(agent: Any) -> None:
    if hasattr(agent, "__next__"):  # an iterator is read once: read each from its own copy
        items = list(agent)
        fast, general = _agent_names(iter(items)), _agent_names_read(iter(items))
    else:
        fast, general = _agent_names(agent), _agent_names_read(agent)
    assert _same(fast, general), (agent, fast, general)


def test_the_guards_tuple_is_taken_as_it_is() -> None:
    names = ("payments-agent", "3f2a")
    assert _agent_names(names) is names
    assert _agent_names(("",)) is None and _agent_names(()) is None
    assert _agent_names(("a",) * (_MAX_AGENT_NAMES + 1)) is None
