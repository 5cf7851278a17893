"""The load pauses the cyclic collector and files what it built as long-lived: the
application's own collector settings and frozen objects must come out as they went in."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import guardrails

_POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: one}
spec:
  match: {tools: [pay]}
  rules:
    - {name: big, when: 'args.amount > 5000.0', action: deny}
"""


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def _load(tmp_path: Path) -> guardrails.PolicySet:
    path = tmp_path / "p.yaml"
    path.write_text(_POLICY)
    return guardrails.load(path)


def test_load_leaves_the_collector_enabled_and_nothing_frozen(tmp_path: Path) -> None:
    assert gc.isenabled()
    before = gc.get_freeze_count()
    ps = _load(tmp_path)
    assert gc.isenabled()
    assert gc.get_freeze_count() == before
    assert ps.evaluate("pay", {"amount": 6000.0}).effect.value == "deny"


def test_cycles_made_before_a_load_are_still_collected(tmp_path: Path) -> None:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    del a, b
    _load(tmp_path)  # promotes the young cycle to the oldest generation
    gc.collect()
    assert gone() is None


def test_objects_the_application_froze_stay_frozen(tmp_path: Path) -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        _load(tmp_path)
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()


def test_a_disabled_collector_stays_disabled(tmp_path: Path) -> None:
    gc.disable()
    try:
        _load(tmp_path)
        assert not gc.isenabled()
    finally:
        gc.enable()
