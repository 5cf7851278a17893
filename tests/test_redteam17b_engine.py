"""Red team 17b: the session's fast paths in the engine, attacked with hostile inputs.

``PolicySet.evaluate``'s short path (``evaluate.short_path``, one generated function per
plan shape) and ``decide`` reading the inputs itself, against the general path
(``PolicySet._decide``: ``read_call`` then ``evaluate_call``); and the generated code's
specialised single operations (``lib_common.inline`` forms, known kinds, ``type(x) == T``,
a text in a short list, constant regexes, ``double()`` of text) against the closure
backend, at budgets that run out inside them. Every field of the decisions must be equal.
All held: these pin it.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest

import guardrails
from guardrails.engine.evaluate import SHORT_MAX_POLICIES
from guardrails.engine.scrub import Scrubber
from guardrails.expr.limits import Limits

# every shape gets its short path, whatever the process compiled before (the cap is 64)
from tests.test_engine_decide import _every_shape_compiled  # noqa: F401
from tests.test_engine_fast_path import _load, both, record


class LyingStr(str):
    def __eq__(self, other: object) -> bool:
        return True

    def __hash__(self) -> int:
        return 0

    def __str__(self) -> str:
        return "other"


class SubDict(dict[str, Any]):
    pass


class SubDatetime(datetime.datetime):
    pass


class NoLen(dict[str, Any]):
    def __len__(self) -> int:
        raise RuntimeError("no")


def _policy(index: int, condition: str, extra: str = "") -> str:
    return f"""apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {{name: p{index}}}
spec:
  failurePolicy: {'Ignore' if index % 2 else 'Fail'}
  match: {{tools: [t]}}
{extra}  rules:
    - name: r
      when: '{condition.replace("'", "''")}'
      action: deny
      message: 'm'
"""


CONDITIONS = [
    'args.a > 5', 'args.a == "x"', 'has(args.b)', 'principal.role == "admin"',
    'history.size() > 0', 'request.text.contains("pay")', 'tool.description != "x"',
    'now.getFullYear() > 2000', 'args.a.lowerAscii() == "é"', 'args.a.upperAscii() == "ÀB"',
    'args.a.substring(1) == "b"', 'args.a.substring(1, 200) == "b"',
    'args.a.substring(-1) == ""', 'args.a.replace("a", "") == ""',
    'args.a.replace("a", "bb") != ""', 'type(args.a) == int', 'type(args.a) == bool',
    'type(args.a) == uint', 'type(args.a) == double', 'double(args.a) > 1.0',
    'args.a in ["x", "y", "é"]', 'args.a.matches("^a+$")', 'args.a == 1u',
    'args.b.all(x, x > 0)', 'args.b.exists_one(x, x)', 'args.secret == "s3cret-value"',
    'string(args.a).substring(1).upperAscii() == "B"',
]
VALUES: list[Any] = [
    None, True, False, 0, 1, 2**63 - 1, 2**63, -(2**63) - 1, 2**1100, float("nan"),
    float("inf"), -0.0, "", "a", "ab", "AB", "é", "\udcff", "ß", "İ", "K", "a\u0301",
    LyingStr("a"), SubDict(a=1), [1, "a"], {"x": {"y": 1}}, b"a", bytearray(b"a"),
    "x" * 70_000, "1.5", " 1.5", "1e3", "nan", "１", "0x10", "1_0",
]
ODD = [
    {"now": "2026-01-01"}, {"now": SubDatetime(2026, 1, 1)}, {"now": 5},
    {"now": datetime.datetime(2026, 1, 1)}, {"request": LyingStr("pay")}, {"request": 5},
    {"request": b"pay"}, {"request": "p" * 70_000}, {"principal": SubDict(role="admin")},
    {"principal": ["admin"]}, {"principal": "admin"}, {"principal": NoLen()},
    {"history": ({"tool": "t"},)}, {"history": "t"}, {"history": [5]},
    {"description": LyingStr("x")}, {"description": 5},
    {"known_secrets": Scrubber(["x", "s3cret-value"])},
]
ODD_ARGS: list[Any] = [None, SubDict(a=1), {1: "a"}, {LyingStr("a"): 1}, [], NoLen(),
                       {"a": 1, "b": "x" * 65_400}, {"secret": "s3cret-value", "a": "ab"}]


def _cases() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = [{"args": {"a": v, "b": [1, True]}} for v in VALUES]
    cases += [{"args": {"a": "x"}, **odd} for odd in ODD]
    cases += [{"args": a} for a in ODD_ARGS]
    return [{"tool": "t", **c} for c in cases]


@pytest.mark.parametrize("backend", ["compiled", "closures"])
@pytest.mark.parametrize("condition", CONDITIONS)
def test_the_short_path_decides_hostile_calls_as_the_general_path(
        backend: str, condition: str) -> None:
    text = (_policy(0, condition, "  secrets: {arguments: [secret]}\n") + "---\n"
            + _policy(1, condition))
    try:
        ps = _load(text, backend, Limits(max_cost=300))
    except guardrails.PolicyError:
        pytest.skip("refused at load")
    ps.evaluate("t", {})
    # the short path is what is attacked (closures have no fused functions: decide)
    assert (ps._by_tool["t"].short is not None) == (backend == "compiled")
    for case in _cases():
        if "now" in condition and case.get("now") is None:
            continue  # each path reads its own clock
        fast, general = both(ps, case)
        assert record(fast) == record(general), case


@pytest.mark.parametrize("condition", CONDITIONS)
@pytest.mark.parametrize("max_cost", [3_000_000, 6_000, 800, 120, 50])
def test_specialised_operations_decide_as_the_closures(condition: str,
                                                       max_cost: int) -> None:
    try:
        compiled = _load(_policy(0, condition), "compiled", Limits(max_cost=max_cost))
        closures = _load(_policy(0, condition), "closures", Limits(max_cost=max_cost))
    except guardrails.PolicyError:
        pytest.skip("refused at load")
    for case in _cases():
        if "now" in condition or set(case) - {"tool", "args"}:
            continue
        a, b = record(compiled.evaluate("t", case["args"])), record(
            closures.evaluate("t", case["args"]))
        assert a[:7] == b[:7] and a[8:] == b[8:], case  # all but the revision


def test_more_policies_than_a_short_path_runs_decide_as_the_general_path() -> None:
    text = "---\n".join(_policy(i, CONDITIONS[i % 4]) for i in range(SHORT_MAX_POLICIES + 1))
    ps = _load(text, "compiled", Limits())
    ps.evaluate("t", {})
    assert ps._by_tool["t"].short is None
    for case in _cases():
        fast, general = both(ps, case)
        assert record(fast) == record(general), case
