"""``PolicySet.evaluate`` never raises and every call's cost is bounded (issue 10, 3 and 6).

Never raises: hostile inputs (objects whose methods raise, recursive containers, huge
numbers, bytes, sets, custom mappings and sequences, generators, NaN keys, wrong types for
``history``, ``now``, ``request``) all give a decision with an ``input`` error, denied under
``Fail``. Bounded: the cost budget is one per call, shared by all expressions; many values
are charged per value, so the attacks that once took seconds are refused by counted work.
No timing assertions: each test asserts on the decision, or on work counted.
"""

from __future__ import annotations

import datetime
import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import guardrails
from guardrails import Effect
from guardrails.engine.evaluate import NODE_COST, Budget, InputError, normalize
from guardrails.expr.limits import DEFAULT_LIMITS, ITERATION_COST, Limits
from tests.engine_support import load_text, policy

READS_ALL = """
    rules:
      - name: any-arg
        when: 'args.exists(k, k == "x") || principal.exists(k, k == "x") ||
               history.exists(h, h.tool == "x") || request.text == "x" ||
               now < timestamp("1971-01-01T00:00:00Z")'
        action: deny
"""


@pytest.fixture(scope="module")
def ps(tmp_path_factory: pytest.TempPathFactory) -> guardrails.PolicySet:
    return load_text(tmp_path_factory.mktemp("p"), policy(spec=READS_ALL))


@pytest.fixture(scope="module")
def lenient(tmp_path_factory: pytest.TempPathFactory) -> guardrails.PolicySet:
    return load_text(tmp_path_factory.mktemp("p"),
                     policy(spec="failurePolicy: Ignore\n" + READS_ALL.strip()))


def _input_error(d: guardrails.Decision) -> str:
    assert d.effect is Effect.DENY, d
    (err,) = [e for e in d.errors if e.element == "input"]
    assert err.handled_as == "fired"
    return err.message


# -- hostile objects -----------------------------------------------------------------------


class Boom(Exception):
    pass


class RaisingMapping(Mapping[str, Any]):
    """A Mapping whose every method raises."""

    def __getitem__(self, key: str) -> Any:
        raise Boom("secret-ish text 4111")

    def __iter__(self) -> Iterator[str]:
        raise Boom("iter")

    def __len__(self) -> int:
        raise Boom("len")


class LyingMapping(Mapping[str, Any]):
    """Says it has one entry; yields a million."""

    def __getitem__(self, key: str) -> Any:
        return ""

    def __iter__(self) -> Iterator[str]:
        return (str(i) for i in range(10**6))

    def __len__(self) -> int:
        return 1


class EndlessMapping(Mapping[str, Any]):
    """Says it has two entries; its entries never end."""

    def __getitem__(self, key: str) -> Any:
        return "x"

    def __iter__(self) -> Iterator[str]:
        return (str(i) for i in itertools.count())

    def __len__(self) -> int:
        return 2


class HugeMapping(EndlessMapping):
    """Says it holds a billion entries (and would yield them)."""

    def __len__(self) -> int:
        return 10**9


class ItemsRaise(dict[str, Any]):
    def items(self) -> Any:
        raise Boom("items")


class BadKey(str):
    def __hash__(self) -> int:
        raise Boom("hash")

    def __eq__(self, other: object) -> bool:
        raise Boom("eq")


class BadKeyMapping(Mapping[Any, Any]):
    """One entry whose key's ``__hash__`` and ``__eq__`` raise."""

    def __getitem__(self, key: Any) -> Any:
        return 1

    def __iter__(self) -> Iterator[Any]:
        return iter([BadKey("k")])

    def __len__(self) -> int:
        return 1


class BadSequence(Sequence[Any]):
    def __getitem__(self, i: Any) -> Any:
        raise Boom("getitem")

    def __len__(self) -> int:
        return 3


class EndlessSequence(Sequence[Any]):
    def __getitem__(self, i: Any) -> Any:
        return {"tool": "t", "args": {}, "effect": "allow"}

    def __len__(self) -> int:
        return 10**12


class BadInt(int):
    def __index__(self) -> int:
        raise Boom("index")

    def __int__(self) -> int:
        raise Boom("int")


class BadStr(str):
    def __str__(self) -> str:
        raise Boom("str")


def _recursive_list() -> list[Any]:
    x: list[Any] = []
    x.extend([x] * 50)
    return x


def _recursive_dict() -> dict[str, Any]:
    d: dict[str, Any] = {}
    d["a"] = d
    d["b"] = [d, d]
    return d


def _nested(depth: int) -> list[Any]:
    x: list[Any] = ["deep"]
    for _ in range(depth):
        x = [x]
    return x


HOSTILE_ARGS: list[Any] = [
    RaisingMapping(),
    LyingMapping(),
    ItemsRaise(a=1),
    BadKeyMapping(),
    {"a": BadKeyMapping()},
    {"a": RaisingMapping()},
    {"a": BadSequence()},
    {"a": _recursive_list()},
    _recursive_dict(),
    {"a": 10**400},
    {"a": -(10**400)},
    {"a": b"bytes"},
    {"a": {1, 2}},
    {"a": frozenset()},
    {"a": object()},
    {"a": {math.nan: 1}},
    {"a": {1: "x"}},
    {"a": (x for x in range(3))},
    {"a": BadInt(3)},
    {"a": BadStr("x")},
    {"a": complex(1, 2)},
    {"a": datetime.datetime.now()},
    {"a": _nested(40)},
    [("a", 1)],
    "text",
    42,
]


@pytest.mark.parametrize("args", HOSTILE_ARGS, ids=lambda a: type(a).__name__)
def test_hostile_arguments_are_an_input_error_never_an_exception(
        ps: guardrails.PolicySet, args: Any) -> None:
    d = ps.evaluate("t", args)
    message = _input_error(d)
    assert "4111" not in message  # a hostile object's own text is never quoted
    assert d.to_dict()  # the decision itself is readable
    ps.explain("t", args).to_dict()


@pytest.mark.parametrize("principal", [RaisingMapping(), LyingMapping(), ["a"], "x",
                                       {"a": {1, 2}}, {"a": _recursive_list()}])
def test_hostile_principal(ps: guardrails.PolicySet, principal: Any) -> None:
    _input_error(ps.evaluate("t", {}, principal=principal))


def _gen() -> Iterator[dict[str, Any]]:
    while True:  # a generator that never ends must not be consumed
        yield {"tool": "t", "args": {}, "effect": "allow"}


@pytest.mark.parametrize("history", [42, object(), _gen(), "text", b"bytes", {"a": 1},
                                     BadSequence(), [RaisingMapping()], [{"a": {1}}],
                                     [_recursive_dict()], [LyingMapping()], [EndlessMapping()],
                                     [HugeMapping()]],
                         ids=lambda h: type(h).__name__)
def test_hostile_history(ps: guardrails.PolicySet, history: Any) -> None:
    _input_error(ps.evaluate("t", {}, history=history))


def test_a_sequence_history_is_read_by_index_only_as_far_as_kept(ps: guardrails.PolicySet,
                                                                 ) -> None:
    # len() says a trillion entries: only the newest max_history are read
    d = ps.evaluate("t", {}, history=EndlessSequence())
    assert d.effect is Effect.ALLOW and not d.errors


@pytest.mark.parametrize("now", ["2026-01-01", 0, 1.5, datetime.date(2026, 1, 1), object()],
                         ids=lambda n: type(n).__name__)
def test_now_that_is_not_a_datetime(ps: guardrails.PolicySet, now: Any) -> None:
    assert "now must be a datetime" in _input_error(ps.evaluate("t", {}, now=now))


@pytest.mark.parametrize("request_text", [42, b"x", ["x"], BadStr("y")])
def test_request_that_is_not_text(ps: guardrails.PolicySet, request_text: Any) -> None:
    d = ps.evaluate("t", {}, request=request_text)
    if isinstance(request_text, str):  # a str subclass is read as its plain text
        assert d.effect is Effect.ALLOW
    else:
        _input_error(d)


@pytest.mark.parametrize("tool", [BadStr("t"), 42, None, object()])
def test_tool_names_that_are_not_text(ps: guardrails.PolicySet, tool: Any) -> None:
    d = ps.evaluate(tool, {})
    assert isinstance(d.tool, str)


def test_description_that_is_not_text(ps: guardrails.PolicySet) -> None:
    assert ps.evaluate("t", {}, description=42).effect is Effect.ALLOW  # type: ignore[arg-type]


def test_under_ignore_a_hostile_input_is_denied_all_the_same(
        lenient: guardrails.PolicySet) -> None:
    """Inputs the engine cannot read are the caller's doing, not an error of the policy's
    own rules: ``Ignore`` does not skip the policy for them (it did: allowed)."""
    d = lenient.evaluate("t", RaisingMapping())
    assert d.effect is Effect.DENY
    assert [(e.element, e.handled_as) for e in d.errors] == [("input", "fired")]


json_leaf = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5)
hostile_leaf = (json_leaf | st.binary(max_size=3) | st.sets(st.integers(), max_size=2)
                | st.builds(object) | st.builds(RaisingMapping) | st.builds(BadSequence)
                | st.builds(BadKeyMapping) | st.builds(LyingMapping)
                | st.integers(min_value=2**64, max_value=2**2000)
                | st.builds(BadInt, st.integers()) | st.builds(BadStr, st.text(max_size=3)))
keys = st.text(max_size=4) | st.integers() | st.floats()
hostile = st.recursive(hostile_leaf, lambda inner: st.lists(inner, max_size=4)
                       | st.tuples(inner, inner)
                       | st.dictionaries(keys, inner, max_size=4), max_leaves=15)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(args=st.dictionaries(keys, hostile, max_size=4), principal=hostile, history=hostile,
       now=st.none() | st.datetimes() | hostile, request=st.none() | st.text() | hostile)
def test_evaluate_never_raises(ps: guardrails.PolicySet, args: Any, principal: Any,
                               history: Any, now: Any, request: Any) -> None:
    d = ps.evaluate("t", args, principal=principal, history=history, now=now, request=request)
    assert d.effect in (Effect.ALLOW, Effect.DENY)
    if d.effect is Effect.ALLOW:
        assert not d.errors
    d.to_dict()


# -- counted work: the size bound charges per value -----------------------------------------


def test_many_empty_strings_are_over_the_size_bound() -> None:
    # 300,000 empty strings once weighed 600 kB, under the 1 MB bound: seconds of work
    with pytest.raises(InputError):
        normalize({"l": [""] * 300_000}, DEFAULT_LIMITS)
    with pytest.raises(InputError):
        normalize({"m": {f"{i:x}": "" for i in range(95_000)}}, DEFAULT_LIMITS)
    with pytest.raises(InputError):
        normalize({f"{i}": None for i in range(20_000)}, DEFAULT_LIMITS)


def test_every_value_key_and_element_is_charged() -> None:
    def spent(value: Any) -> int:
        b = Budget(10**9)
        normalize(value, DEFAULT_LIMITS, b)
        return 10**9 - b.left

    assert spent("") == NODE_COST
    assert spent("abc") == NODE_COST + 3
    assert spent([""] * 10) == 11 * NODE_COST
    assert spent({"ab": ""}) == 3 * NODE_COST + 2
    assert spent({"ab": [1, 2]}) == 5 * NODE_COST + 2
    assert spent((1, 2)) == spent([1, 2])
    assert spent({"a": {"b": None}}) == 5 * NODE_COST + 2


def test_a_walk_stops_once_the_budget_is_spent() -> None:
    """A self-containing list 50 wide would be 50**32 values deep: the walk stops at the
    bound, having visited at most bound / NODE_COST values."""
    visited = 0

    class Counting(list[Any]):
        def __iter__(self) -> Iterator[Any]:
            nonlocal visited
            for v in super().__iter__():
                visited += 1
                yield v

    x = Counting()
    x.extend([x] * 50)
    with pytest.raises(InputError):
        normalize({"a": x}, DEFAULT_LIMITS)
    assert visited <= DEFAULT_LIMITS.max_input_bytes // NODE_COST


def test_plain_json_is_not_copied_and_conversions_are() -> None:
    inner = {"a": [1, "x", {"b": None}]}
    out = normalize(inner, DEFAULT_LIMITS)
    assert out is inner
    converted = normalize({"a": (1, 2), "b": [2**70], "c": {"d": True}}, DEFAULT_LIMITS)
    assert converted == {"a": [1, 2], "b": [float(2**70)], "c": {"d": True}}
    assert type(converted["a"]) is list


def test_evaluate_is_still_pure_without_the_copy(tmp_path: Path) -> None:
    ps = load_text(tmp_path, policy(spec="""
        repairs:
          - {name: r, set: {items: 'args.items + ["added"]', n: '1'}}
    """))
    args = {"items": ["a"], "n": 0, "deep": {"k": ["v"]}}
    d = ps.evaluate("t", args)
    assert d.arguments["items"] == ["a", "added"]
    assert args == {"items": ["a"], "n": 0, "deep": {"k": ["v"]}}


# -- one cost budget per call -----------------------------------------------------------


def _many_rules(tmp_path: Path, n: int, failure: str = "Fail") -> guardrails.PolicySet:
    rules = "\n".join(f"  - {{name: r{i}, when: 'args.l.exists(x, x == \"{i}\")', "
                      f"action: allow}}" for i in range(n))
    return load_text(tmp_path, policy(spec=f"failurePolicy: {failure}\nrules:\n{rules}"))


def test_the_budget_is_shared_by_every_expression_of_a_call(tmp_path: Path) -> None:
    """Each rule alone is far under the bound; 40 of them over one list are not."""
    ps = _many_rules(tmp_path, 40)
    n = DEFAULT_LIMITS.max_cost // ITERATION_COST // 20  # each rule: a 20th of the budget
    d = ps.evaluate("t", {"l": ["no"] * n})
    assert d.effect is Effect.DENY
    assert any(e.element == "input" and "cost bound" in e.message for e in d.errors)
    # the same list with fewer rules is within the budget
    (tmp_path / "few").mkdir()
    assert _many_rules(tmp_path / "few", 10).evaluate("t", {"l": ["no"] * n}).effect \
        is Effect.ALLOW


def test_over_budget_denies_even_when_no_rule_would_fire(tmp_path: Path) -> None:
    ps = _many_rules(tmp_path, 40)
    n = DEFAULT_LIMITS.max_cost // ITERATION_COST // 20
    d = ps.evaluate("t", {"l": [str(i + 1000) for i in range(n)]})
    assert d.effect is Effect.DENY


def test_over_budget_under_ignore_is_denied_like_any_input_error(tmp_path: Path) -> None:
    """Padding the input past the budget must not turn an ``Ignore`` policy off (it was
    skipped: allowed)."""
    ps = _many_rules(tmp_path, 40, failure="Ignore")
    n = DEFAULT_LIMITS.max_cost // ITERATION_COST // 20
    d = ps.evaluate("t", {"l": ["no"] * n})
    assert d.effect is Effect.DENY
    assert any(e.element == "input" and e.handled_as == "fired" and "cost bound" in e.message
               for e in d.errors)


def test_variables_and_match_conditions_draw_on_the_same_budget(tmp_path: Path) -> None:
    """Three nested walks of n x n iterations: each is under half the budget, together
    they are over it."""
    ps = load_text(tmp_path, policy(spec="""
        match:
          when: 'args.l.all(x, args.l.all(y, y != "stop"))'
        variables:
          - {name: a, expression: 'args.l.filter(x, args.l.exists(y, y == "a")).size()'}
          - {name: b, expression: 'args.l.filter(x, args.l.exists(y, y == "b")).size() + variables.a'}
        rules:
          - {name: r, when: 'variables.b > 0', action: deny}
    """), )
    n = 223  # 223 * 223 * 40 is 0.4 of the budget
    d = ps.evaluate("t", {"l": ["z"] * n})
    assert d.effect is Effect.DENY and any("cost bound" in e.message for e in d.errors)
    small = ps.evaluate("t", {"l": ["z"] * 150})
    assert small.effect is Effect.ALLOW and not small.errors


def test_a_library_call_is_charged_its_weight(tmp_path: Path) -> None:
    """credentials.found runs several regexes: calling it on many empty strings (once
    charged one unit each) runs the budget out long before it takes seconds."""
    ps = load_text(tmp_path, policy(spec="""
        rules:
          - {name: r, when: 'args.l.exists(x, credentials.found(x))', action: halt}
    """))
    n = DEFAULT_LIMITS.max_cost // 1000 + 100
    d = ps.evaluate("t", {"l": [""] * n})
    assert d.effect is Effect.HALT  # the erroring halt rule fires (fail closed)
    assert any("cost bound" in e.message for e in d.errors)
    assert ps.evaluate("t", {"l": [""] * (n // 2)}).effect is Effect.ALLOW


def test_the_shipped_exfiltration_policy_bounds_many_values() -> None:
    """The issue's attacks on the library: every one is refused (input error), none runs."""
    ps = guardrails.load(Path(__file__).parent.parent / "policies")
    for args in ({"l": [""] * 300_000}, {"m": {f"{i:03x}": "" for i in range(95_000)}},
                 {"l": [""] * 14_000}, {"m": {f"k{i}": "" for i in range(7_000)}}):
        d = ps.evaluate("send_email", args)
        assert d.effect in (Effect.DENY, Effect.HALT), d
        assert any(e.element == "input" for e in d.errors), d.errors


def test_a_configured_budget_is_used(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(policy(spec="rules:\n  - {name: r, when: 'args.l.all(x, x != 1)', "
                                "action: deny}"))
    small = guardrails.load(path, limits=Limits(max_cost=100 * ITERATION_COST))
    assert small.evaluate("t", {"l": [0] * 99}).effect is Effect.DENY
    assert small.evaluate("t", {"l": [0] * 90}).effect is Effect.DENY  # rule fires: all != 1
    d = small.evaluate("t", {"l": [0] * 200})
    assert any("cost bound" in e.message for e in d.errors)


# -- the scrubber's spellings are computed in C, equal to the per-character definition -----

_PY_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _py_escaped_reference(text: str, ascii_only: bool = False) -> str:
    out = []
    for ch in text:
        escaped = _PY_ESCAPES.get(ch)
        if escaped is not None:
            out.append(escaped)
        elif ch.isprintable() and not (ascii_only and ord(ch) > 0x7E):
            out.append(ch)
        else:
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else
                       f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return "".join(out)


@settings(max_examples=2000, deadline=None)
@given(text=st.text(max_size=30) | st.text(alphabet="'\"\\\n\t\r\x7f\x00\x85é€😀a",
                                          max_size=20))
def test_python_escaped_spelling_matches_its_definition(text: str) -> None:
    from guardrails.engine.scrub import _py_escaped

    assert _py_escaped(text) == _py_escaped_reference(text)
    assert _py_escaped(text, ascii_only=True) == _py_escaped_reference(text, True)
