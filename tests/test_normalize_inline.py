"""``normalize``'s inlined common cases (ints, nested dicts, lists of plain leaves inside a
dict) against its general walk: the same value, the same charge, the same error.

The general walk is reached by handing the same data as a ``Mapping`` that is not a
``dict`` and ``tuple`` instead of ``list``: those take ``_normalize``'s general branches,
which charge exactly what the ``dict``/``list`` branches charge."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from guardrails.engine.evaluate import Budget, InputError, normalize
from guardrails.expr.limits import Limits


class _Map(Mapping[Any, Any]):
    def __init__(self, data: dict[Any, Any]) -> None:
        self._data = data

    def __getitem__(self, key: Any) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def _general(value: Any) -> Any:
    if type(value) is dict:
        return _Map({k: _general(v) for k, v in value.items()})
    if type(value) is list:
        return tuple(_general(v) for v in value)
    return value


_leaves = (st.none() | st.booleans() | st.text(max_size=12)
           | st.floats(allow_nan=False, allow_infinity=False)
           | st.integers(min_value=-(2**70), max_value=2**70)
           | st.sampled_from([2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 10**400]))
_keys = st.text(max_size=6) | st.integers(0, 3)
_values = st.recursive(
    _leaves,
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(_keys, inner, max_size=5),
    max_leaves=30)


def _outcome(value: Any, limits: Limits) -> tuple[str, Any, int]:
    budget = Budget(limits.max_input_bytes)
    try:
        return "ok", normalize(value, limits, budget), budget.left
    except InputError as e:
        return "error", str(e), 0


@settings(max_examples=600, deadline=None)
@given(value=st.dictionaries(_keys, _values, max_size=6),
       size=st.sampled_from([300, 900, 2_000, 5_000, 1_000_000]),
       depth=st.integers(1, 4))
def test_inline_branches_equal_the_general_walk(value: dict[Any, Any], size: int,
                                                depth: int) -> None:
    limits = Limits(max_input_bytes=size, max_input_depth=depth)
    fast = _outcome(value, limits)
    general = _outcome(_general(value), limits)
    assert fast == general


def test_a_long_list_is_refused_by_its_size_before_its_elements_are_read() -> None:
    class Boom:
        def __eq__(self, other: object) -> bool:
            raise AssertionError("read")

    limits = Limits(max_input_bytes=10_000)
    value = {"xs": ["a"] * 200 + [Boom()]}
    budget = Budget(limits.max_input_bytes)
    try:
        normalize(value, limits, budget)
    except InputError as e:
        assert str(e) == "inputs exceed the size bound"
    else:
        raise AssertionError("not refused")


def test_a_list_with_a_non_leaf_is_walked_whole() -> None:
    limits = Limits()
    value = {"xs": ["a", 1, 2**64, {"b": (1, 2)}]}
    out = normalize(value, limits)
    assert out == {"xs": ["a", 1, float(2**64), {"b": [1, 2]}]}
    assert type(out["xs"][2]) is float
    assert value["xs"][2] == 2**64  # the caller's data is not changed
