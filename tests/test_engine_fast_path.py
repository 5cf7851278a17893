"""The common-case path (``evaluate.decide``, taken by ``PolicySet.evaluate``) and the
general path (``evaluate_call``) return the same decision.

``PolicySet.evaluate`` takes the short path whenever the tool's candidates allow it (no
counters, binding selectors or provenance) and the inputs are within the bounds;
``PolicySet._decide`` always runs the general path (``explain`` uses it too). Hypothesis
generates policies (match conditions, agent selectors, params, variables, repairs that set,
unset and fail, rules that fire, fail, return non-bools or exceed the cost budget, message
expressions, audit mode, both failure policies, secrets and redact patterns) and calls
(hostile ones included: non-JSON values, mapping subclasses, huge and deep inputs), and
every field of the two decisions must be equal, on the generated-code and closures
backends.
"""

from __future__ import annotations

import collections
import datetime
import pickle
import tempfile
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

import guardrails
from guardrails.engine.decision import Decision, Effect
from guardrails.engine.scrub import Scrubber
from guardrails.expr.limits import Limits

BACKENDS = ("compiled", "closures")

CONDITIONS = [
    'args.a > 5',
    'args.a == "x"',
    'has(args.b)',
    'size(args.c) > 2',
    'args.a.startsWith("s")',
    'string(args.a).contains("3")',
    'args.b in params.known',
    'params.limit < args.a',
    'dyn(variables.v1) > 3',
    'dyn(variables.v2) == "sX"',
    'dyn(variables.v1) > 1 && string(variables.v2).size() > 1',
    '1 / (args.a - args.a) == 1',
    'args.missing == 1',
    'args.a',
    'principal.role == "admin"',
    '"ops" in principal.groups',
    'history.exists(h, h.tool == "t")',
    'history.size() > 1',
    'request.text.contains("pay")',
    'tool.name == "t" && tool.description != "x"',
    'now.getFullYear() > 2000',
    'string(args.a).matches("^[a-z0-9]+$")',
    'args.c.map(x, string(x) + string(x)).size() > 0',
    'args.c.all(x, string(x).size() < 100000)',
    'true',
    'false',
    'args.secret == "s3cret-value"',
    'args.a == 9999.0 || has(args.secret)',
]
ARG_CONDITIONS = [c for c in CONDITIONS if "variables" not in c]
"""What a repair's or a match's ``when`` may read (no ``variables``)."""
VALUES = ['args.a', 'string(args.a)', 'double(args.a)', 'args.b + "!"', '[args.a]',
          'double("nan")', 'args.c', '"s" + string(args.a)', '7']
SAFE_VALUES = ['7', '"s" + "X"', '[1, 2, 3]', '"s3cret-value"', 'has(args.a)']
"""Values a repair can always set (it applies whatever the arguments)."""
MESSAGES = ['"got " + string(args.a)', 'args.a', '"secret " + string(args.secret)',
            'dyn(variables.v2)']
ACTIONS = ["allow", "deny", "halt", "require_approval", "warn"]


def _q(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


@st.composite
def policy_docs(draw: st.DrawFn, index: int) -> str:
    lines = ["apiVersion: guardrails/v1", "kind: ToolPolicy",
             f"metadata: {{name: p{index}}}", "spec:"]
    lines.append(f"  mode: {draw(st.sampled_from(['enforce', 'enforce', 'audit']))}")
    lines.append(f"  failurePolicy: {draw(st.sampled_from(['Fail', 'Ignore']))}")
    lines.append(f"  defaultAction: {draw(st.sampled_from(['allow', 'allow', 'deny']))}")
    lines.append("  match:")
    lines.append(f"    tools: [{draw(st.sampled_from(['t', 't*', 'other']))}]")
    if draw(st.booleans()):
        lines.append(f"    when: {_q(draw(st.sampled_from(ARG_CONDITIONS)))}")
    if draw(st.integers(0, 4)) == 0:
        lines.append(f"    agents: [{draw(st.sampled_from(['alpha', 'beta']))}]")
    lines.append("  params: {limit: 4, known: [x, y, sX]}")
    lines.append("  variables:")
    lines.append(f"    - {{name: v1, expression: {_q(draw(st.sampled_from(VALUES)))}}}")
    lines.append(f"    - {{name: v2, expression: {_q(draw(st.sampled_from(VALUES)))}}}")
    repairs = draw(st.integers(0, 2))
    if repairs:
        lines.append("  repairs:")
        for i in range(repairs):
            lines.append(f"    - name: r{i}")
            if draw(st.integers(0, 2)) == 0:
                lines.append(f"      when: {_q(draw(st.sampled_from(ARG_CONDITIONS)))}")
            target = draw(st.sampled_from(["a", "b", "secret", "d"]))
            value = draw(st.sampled_from(SAFE_VALUES if draw(st.booleans()) else VALUES))
            lines.append(f"      set: {{{target}: {_q(value)}}}")
            if draw(st.booleans()):
                lines.append(f"      unset: [{draw(st.sampled_from(['b', 'c', 'secret']))}]")
    if draw(st.booleans()):
        lines.append("  secrets: {arguments: [secret]}")
    if draw(st.booleans()):
        lines.append("  redact: [{name: digits, regex: '[0-9]{3}'}]")
    lines.append("  rules:")
    for i in range(draw(st.integers(1, 6))):
        lines.append(f"    - name: rule{i}")
        lines.append(f"      when: {_q(draw(st.sampled_from(CONDITIONS)))}")
        lines.append(f"      action: {draw(st.sampled_from(ACTIONS))}")
        if draw(st.booleans()):
            lines.append("      message: 'static text 3141 s3cret-value'")
        if draw(st.integers(0, 2)) == 0:
            lines.append(f"      messageExpression: {_q(draw(st.sampled_from(MESSAGES)))}")
    return "\n".join(lines) + "\n"


@st.composite
def policy_sets(draw: st.DrawFn) -> str:
    n = draw(st.integers(1, 3))
    return "---\n".join(draw(policy_docs(i)) for i in range(n))


class OddMapping(Mapping[str, Any]):
    """A mapping that is not a dict (converted, not passed through)."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


class Lying(Mapping[str, Any]):
    """A hostile mapping: says it holds one entry and yields many."""

    def __getitem__(self, key: str) -> Any:
        return 1

    def __iter__(self) -> Iterator[str]:
        return (f"k{i}" for i in range(10**9))

    def __len__(self) -> int:
        return 1


def _deep(n: int) -> Any:
    v: Any = 1
    for _ in range(n):
        v = [v]
    return v


scalars = st.one_of(st.integers(-10, 10), st.sampled_from([9999.0, 2**70, 2**2000, -0.0]),
                    st.floats(allow_nan=False, allow_infinity=False),
                    st.sampled_from(["x", "s", "sX", "pay 3", "s3cret-value", "", "ab1"]),
                    st.booleans(), st.none())
json_values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(["a", "b", "k"]), inner,
                                                 max_size=3)), max_leaves=8)
hostile = st.sampled_from([
    float("nan"), float("inf"), object(), b"bytes", (1, 2), {1: 2}, _deep(40), "x" * 1_100_000,
    ["y"] * 20_000, OddMapping({"k": 1}), Lying(), collections.OrderedDict(k=1),
    {"k": (1, "a")}, frozenset({1})])


@st.composite
def arguments(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 15)) == 0:
        return draw(st.sampled_from([None, [], "text", 5, OddMapping({"a": 1}), Lying()]))
    args: dict[Any, Any] = {}
    for key in ("a", "b", "c", "secret", "d"):
        if draw(st.booleans()):
            args[key] = draw(st.one_of(scalars, json_values, st.lists(scalars, max_size=5)))
    if draw(st.integers(0, 5)) == 0:
        args[draw(st.sampled_from(["a", "c", "e"]))] = draw(hostile)
    if draw(st.integers(0, 20)) == 0:
        args[3] = "not a string key"
    return args


@st.composite
def calls(draw: st.DrawFn) -> dict[str, Any]:
    kw: dict[str, Any] = {"args": draw(arguments())}
    if draw(st.booleans()):
        kw["principal"] = draw(st.one_of(
            st.fixed_dictionaries({"role": st.sampled_from(["admin", "user"]),
                                   "groups": st.lists(st.sampled_from(["ops", "dev"]))}),
            hostile))
    if draw(st.booleans()):
        kw["history"] = draw(st.one_of(
            st.lists(st.fixed_dictionaries(
                {"tool": st.sampled_from(["t", "u"]), "args": json_values},
                optional={"result": st.sampled_from(["", "ok 123"]),
                          "trusted": st.booleans()}), max_size=3),
            st.sampled_from([[{"tool": "t", "result": 5}], "not a list", [1], [Lying()],
                             [OddMapping({"tool": "t", "result": "ok", "trusted": True})],
                             ({"tool": "t", "at": "2026-01-01T00:00:00Z"},)])))
    if draw(st.booleans()):
        kw["request"] = draw(st.sampled_from(["please pay x", "", "s3cret-value"]))
    if draw(st.booleans()):
        kw["description"] = draw(st.sampled_from(["", "x", "pays"]))
    if draw(st.booleans()):
        kw["now"] = datetime.datetime(2026, 12, 1, 10, 0)
    if draw(st.booleans()):
        kw["agent"] = draw(st.sampled_from(["alpha", ("beta", "id-1"), "", ["gamma"]]))
    if draw(st.booleans()):
        kw["known_secrets"] = Scrubber(["xy-known-value", draw(st.sampled_from(["x", "sX"]))])
    kw["tool"] = draw(st.sampled_from(["t", "t", "t", "t2", "other"]))
    return kw


def record(d: Decision) -> tuple[Any, ...]:
    """Everything a decision holds and shows, but its id."""
    out = d.to_dict()
    out.pop("id")
    texts = ["s3cret-value", "xy-known-value", "pay 314", "x", "sX", "ab1"]
    return (out, d.effect, dict(d.arguments), d.rules, d.repairs, d.errors, d.policies,
            d.revision, d.secret_arguments, d.reservations, d.message,
            [d.scrub(t) for t in texts], repr(d).split(", tool=", 1)[1])


def both(ps: guardrails.PolicySet, call: dict[str, Any]) -> tuple[Decision, Decision]:
    kw = dict(call)
    tool = kw.pop("tool")
    args = kw.pop("args")
    fast = ps.evaluate(tool, args, **kw)
    general = ps._decide(tool, args, kw.get("principal"), kw.get("history"),
                         kw.get("request"), kw.get("description", ""), kw.get("now"), None,
                         kw.get("known_secrets"), (), Effect.ALLOW, agent=kw.get("agent"))
    return fast, general


def _load(text: str, backend: str, limits: Limits) -> guardrails.PolicySet:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "p.yaml"
        path.write_text(text)
        return guardrails.load(path, backend=backend, limits=limits)  # type: ignore[arg-type]


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.filter_too_much])
@given(text=policy_sets(), call_list=st.lists(calls(), min_size=1, max_size=4),
       max_cost=st.sampled_from([3_000_000, 3_000_000, 400, 60]))
def test_the_short_path_decides_as_the_general_path(backend: str, text: str,
                                                    call_list: list[dict[str, Any]],
                                                    max_cost: int) -> None:
    try:
        ps = _load(text, backend, Limits(max_cost=max_cost))
    except guardrails.PolicyError:
        assume(False)  # a combination the type checker refuses at load (never true...)
        raise
    for call in call_list:
        fast, general = both(ps, call)
        assert record(fast) == record(general)
        assert fast.id != general.id
        event(f"effect {fast.effect.value}")
        event(f"short path {_taken(ps, call['tool'])}")
        for what, there in (("fired", fast.rules), ("repaired", fast.repairs),
                            ("errors", fast.errors)):
            event(f"{what} {bool(there)}")
        if any(e.element == "input" for e in fast.errors):
            event("input or cost error")


def _taken(ps: guardrails.PolicySet, tool: str) -> bool:
    return ps._candidates(tool).plan is not None


def test_the_generated_cases_take_the_short_path() -> None:
    """The differential test above compares something: its policies take the short path
    (and a tool no policy names the general one)."""
    text = (  # what the generator writes, fixed
        "apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p0}\nspec:\n"
        "  match: {tools: [t], when: 'has(args.b)', agents: [alpha]}\n"
        "  params: {limit: 4}\n  variables:\n    - {name: v1, expression: 'args.a'}\n"
        "  repairs:\n    - {name: r0, set: {a: 'string(args.a)'}}\n"
        "  secrets: {arguments: [secret]}\n"
        "  redact: [{name: digits, regex: '[0-9]{3}'}]\n"
        "  rules:\n    - {name: r, when: 'dyn(variables.v1) > 3', action: deny}\n")
    ps = _load(text, "compiled", Limits())
    assert _taken(ps, "t")
    assert not _taken(ps, "no-policy-names-this")


COUNTER = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: c}
spec:
  match: {tools: [t]}
  counters:
    - {name: calls, key: '"k"', window: 60, limit: 5}
  rules:
    - {name: many, when: 'counters.calls.exceeded', action: deny}
"""

PROVENANCE = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: prov}
spec:
  match: {tools: [t]}
  rules:
    - {name: untrusted, when: 'untrusted(args.a)', action: deny}
"""


@pytest.mark.parametrize("text", [COUNTER, PROVENANCE])
def test_what_the_short_path_does_not_do_takes_the_general_path(text: str) -> None:
    ps = _load(text, "compiled", Limits())
    assert not _taken(ps, "t")
    fast, general = both(ps, {"tool": "t", "args": {"a": "x"},
                              "history": [{"tool": "u", "result": "x", "trusted": False}]})
    assert record(fast) == record(general)


def test_a_short_path_decision_is_the_same_record(tmp_path: Path) -> None:
    """Built without ``__init__``: still frozen, its id spelled on first read and unique,
    copied and pickled like any decision, and its repr redacts secret arguments."""
    ps = _load(COUNTER.replace("counters:\n    - {name: calls, key: '\"k\"', window: 60, "
                               "limit: 5}\n", "secrets: {arguments: [secret]}\n")
               .replace("counters.calls.exceeded", 'args.secret == "hunter22"'),
               "compiled", Limits())
    assert _taken(ps, "t")
    d = ps.evaluate("t", {"secret": "hunter22", "n": 1})
    assert d.effect == "deny"
    assert "hunter22" not in repr(d) and "hunter22" not in str(d.to_dict())
    with pytest.raises(AttributeError):
        d.effect = Effect.ALLOW  # type: ignore[misc]
    with pytest.raises(AttributeError):
        d.id = "forged"  # type: ignore[misc]
    other = ps.evaluate("t", {"secret": "x"})
    assert len(d.id) == 32 and d.id != other.id
    assert d.id == d.id and d.to_dict()["id"] == d.id
    copied = pickle.loads(pickle.dumps(d))
    assert copied is not d and copied == d and copied.id == d.id
    assert "hunter22" not in repr(copied) and copied.scrub("hunter22") == "[REDACTED]"
    with pytest.raises(AttributeError):
        d.not_a_field  # noqa: B018


def test_each_decision_scrubs_with_its_own_callers_known_secrets() -> None:
    """The scrubber shared by calls of a tool without secret arguments is per caller's
    ``known_secrets``: calls alternating between two guards' memories (and none) each
    scrub exactly their own values, in messages and records, however they interleave."""
    text = ("apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: echo}\nspec:\n"
            "  match: {tools: [t]}\n  rules:\n"
            "    - {name: echo, when: 'true', action: deny,"
            " messageExpression: '\"saw \" + args.a'}\n")
    ps = _load(text, "compiled", Limits())
    assert _taken(ps, "t") and not ps.secret_arguments("t")
    memories = {"one": Scrubber(["alpha-secret-1"]), "two": Scrubber(["beta-secret-2"]),
                "none": None}
    for order in (["one", "one", "two", "two", "one"], ["two", "none", "none", "one", "two"]):
        for who in order:
            known = memories[who]
            d = ps.evaluate("t", {"a": "alpha-secret-1 beta-secret-2"}, known_secrets=known)
            message = d.rules[0].message
            record = str(d.to_dict())
            assert ("alpha-secret-1" in message) == (who != "one")
            assert ("beta-secret-2" in message) == (who != "two")
            assert ("alpha-secret-1" in record) == (who != "one")
            assert ("beta-secret-2" in record) == (who != "two")
            assert (d.scrub("alpha-secret-1") == "[REDACTED]") == (who == "one")
            assert (d.scrub("beta-secret-2") == "[REDACTED]") == (who == "two")


def test_threads_sharing_a_tool_scrub_their_own_values() -> None:
    text = ("apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: echo}\nspec:\n"
            "  match: {tools: [t]}\n  rules:\n"
            "    - {name: echo, when: 'true', action: deny,"
            " messageExpression: '\"saw \" + args.a'}\n")
    ps = _load(text, "compiled", Limits())
    memories = [Scrubber([f"value-of-guard-{i}"]) for i in range(4)]
    leaks: list[str] = []

    def work(i: int) -> None:
        for n in range(300):
            mine = memories[(i + n) % 4]
            d = ps.evaluate("t", {"a": " ".join(f"value-of-guard-{j}" for j in range(4))},
                            known_secrets=mine)
            own = f"value-of-guard-{(i + n) % 4}"
            if own in d.rules[0].message or own in str(d.to_dict()):
                leaks.append(own)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert leaks == []


class ReadCounting(Mapping[str, Any]):
    """Arguments that count how often they are read, and fail the bounds when read."""

    reads = 0

    def __getitem__(self, key: str) -> Any:
        return "x"

    def __iter__(self) -> Iterator[str]:
        ReadCounting.reads += 1
        return iter(["a", "b"])

    def __len__(self) -> int:
        return 1  # a lie: an input error


def test_inputs_over_the_bounds_are_read_once() -> None:
    ps = _load("apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\nspec:\n"
               "  match: {tools: [t]}\n  rules:\n    - {name: r, when: 'true', action: warn}\n",
               "compiled", Limits())
    assert _taken(ps, "t")
    d = ps.evaluate("t", ReadCounting(), agent="alpha")
    assert d.effect == "deny" and d.errors[0].element == "input"
    assert ReadCounting.reads == 1
