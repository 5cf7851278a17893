"""The history entry's timestamp: the fast spelling equals datetime's for every instant."""

from __future__ import annotations

import datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from guardrails.agent_framework import _history
from guardrails.agent_framework._history import record, utc_text

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_MIN = datetime.datetime(1, 1, 1, tzinfo=datetime.UTC)
_MAX = datetime.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=datetime.UTC)


def _general(micros: int) -> str:
    return (_EPOCH + datetime.timedelta(microseconds=micros)).isoformat(timespec="microseconds")


def _micros(moment: datetime.datetime) -> int:
    return (moment - _EPOCH) // datetime.timedelta(microseconds=1)


@settings(max_examples=2000)
@given(st.integers(min_value=_micros(_MIN), max_value=_micros(_MAX)))
def test_equals_datetime_everywhere(micros: int) -> None:
    assert utc_text(micros) == _general(micros)


@settings(max_examples=500)
@given(st.integers(min_value=0, max_value=4_000_000_000), st.lists(
    st.integers(min_value=-2_000_000, max_value=2_000_000), min_size=1, max_size=8))
def test_cached_second_never_leaks_into_another(start_s: int, steps: list[int]) -> None:
    """Instants close together (same second, the next, back again): the cached text of one
    second is never reused for another."""
    micros = start_s * 1_000_000
    for step in steps:
        micros = max(0, micros + step)
        assert utc_text(micros) == _general(micros)


def test_edges() -> None:
    for micros in (0, 999_999, 1_000_000, -1, -1_000_000, _micros(_MAX), _micros(_MIN),
                   _history._YEAR_10000 * 1_000_000 - 1):
        assert utc_text(micros) == _general(micros)
    assert utc_text(0) == "1970-01-01T00:00:00.000000+00:00"
    assert _history._SECOND[0] == 0


def test_record_stamps_now_in_rfc3339() -> None:
    history: list[dict[str, object]] = []
    before = datetime.datetime.now(datetime.UTC)
    entry = record(history, "t", {}, "allow", 5)
    after = datetime.datetime.now(datetime.UTC)
    assert entry is not None and history == [entry]
    at = entry["at"]
    assert isinstance(at, str)
    stamped = datetime.datetime.fromisoformat(at)
    assert before - datetime.timedelta(milliseconds=1) <= stamped <= after
    assert at == stamped.isoformat(timespec="microseconds")
