"""Red team of issue 14's speed work: where a fast path, a cache or a shortcut could decide
differently from the general path, or loosen a bound.

Each finding has its regression test here; what was tried and held is tested too, so it
keeps holding. The engine is driven through ``PolicySet.evaluate`` (the short path),
``PolicySet.explain`` (the general path) and the real agent loop (ScriptedChatClient).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import guardrails
from guardrails.engine import evaluate
from guardrails.expr.limits import ITERATION_COST, Limits, Meter

BACKENDS = ("compiled", "closures")


class _Recorded(Meter):
    """The engine's meter, remembered: how much of the call's budget was spent."""

    made: ClassVar[list[Meter]] = []

    def __init__(self, left: int, free: frozenset[str] = frozenset()) -> None:
        super().__init__(left, free)
        _Recorded.made.append(self)


def _spent(monkeypatch: pytest.MonkeyPatch, ps: guardrails.PolicySet, budget: int,
           args: dict[str, Any], *, explain: bool = False) -> tuple[Any, int]:
    _Recorded.made = []
    monkeypatch.setattr(evaluate, "Meter", _Recorded)
    decision = ps.explain("t", args).decision if explain else ps.evaluate("t", args)
    monkeypatch.undo()
    (meter,) = _Recorded.made
    return decision, budget - meter.left


def _load(tmp_path: Path, text: str, backend: str, **limits: Any) -> guardrails.PolicySet:
    path = tmp_path / f"p-{backend}.yaml"
    path.write_text(text, encoding="utf-8")
    return guardrails.load(path, backend=backend, limits=Limits(**limits))  # type: ignore[arg-type]


# --- finding 1: a chain of variables spent one budget per link ---------------------------
#
# Every evaluation charged a local copy of the call's meter and gave the spent units back
# when it returned. A variable is evaluated when read, inside the evaluation that reads it,
# and started from a meter that did not show what the reader had spent so far: each link
# of a chain (v1 reads v0, v2 reads v1, ...) could spend a whole budget. Ten variables, nine
# budgets before the call was stopped. An evaluation that reads ``variables`` now charges
# the meter itself (codegen and closures alike).


def _chain(n: int, failure: str = "Fail") -> str:
    lines = ["    - {name: v0, expression: 'args.l.all(x, x != \"b\")'}"]
    lines += [f"    - {{name: v{i}, expression: 'args.l.all(x, x != \"b\") && variables.v{i - 1}'}}"
              for i in range(1, n)]
    return (
        "apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\nspec:\n"
        f"  match: {{tools: [t]}}\n  failurePolicy: {failure}\n  variables:\n"
        + "\n".join(lines) + "\n"
        f"  rules:\n    - {{name: r, when: 'variables.v{n - 1}', action: deny}}\n")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("explain", [False, True])
def test_a_chain_of_variables_spends_one_budget(tmp_path: Path, backend: str, explain: bool,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    budget = 400_000
    ps = _load(tmp_path, _chain(10), backend, max_cost=budget)
    # each link scans 9,000 elements: 360,000 units, 0.9 of the whole budget
    decision, spent = _spent(monkeypatch, ps, budget, {"l": ["a"] * 9000}, explain=explain)
    assert spent <= budget + ITERATION_COST  # was 3,600,000: nine budgets
    assert decision.effect == "deny"  # fail closed
    assert any("cost limit" in e.message for e in decision.errors if e.element == "rules.r")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_chain_within_the_budget_still_decides(tmp_path: Path, backend: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The meter charged directly is the same meter: a chain that fits runs to the end and
    is charged exactly what it spent (each link once, however often it is read)."""
    budget = 400_000
    ps = _load(tmp_path, _chain(4), backend, max_cost=budget)
    decision, spent = _spent(monkeypatch, ps, budget, {"l": ["a"] * 2000})
    assert decision.effect == "deny" and not decision.errors
    assert spent == 4 * 2000 * ITERATION_COST
    general, spent_general = _spent(monkeypatch, ps, budget, {"l": ["a"] * 2000}, explain=True)
    assert spent_general == spent and general.effect == decision.effect


@st.composite
def _variable_policies(draw: st.DrawFn) -> tuple[str, int]:
    """Variables reading earlier ones in random ways (select, index, has, in, nested in
    comprehensions, under && and ||), each scanning the list, and rules over them."""
    n = draw(st.integers(1, 6))
    lines = []
    for i in range(n):
        reads = [f"variables.v{j}" if draw(st.booleans()) else f'variables["v{j}"]'
                 for j in range(i) if draw(st.booleans())]
        scan = draw(st.sampled_from(['args.l.all(x, x != "b")', 'args.l.exists(x, x == "b")',
                                     'args.l.map(x, x + "!").size() > 0']))
        joiner = draw(st.sampled_from([" && ", " || "]))
        wrapped = [draw(st.sampled_from([r, f"args.l.all(y, {r})", f"({r} || true)"]))
                   for r in reads]
        text = joiner.join([scan, *wrapped])
        lines.append(f"    - {{name: v{i}, expression: '{text}'}}")
    rule = " || ".join(f"variables.v{i}" for i in range(n) if draw(st.booleans())) or "true"
    failure = draw(st.sampled_from(["Fail", "Ignore"]))
    text = (
        "apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\nspec:\n"
        f"  match: {{tools: [t]}}\n  failurePolicy: {failure}\n  variables:\n"
        + "\n".join(lines) + "\n"
        f"  rules:\n    - {{name: r, when: '{rule}', action: deny}}\n"
        "    - {name: s, when: 'has(variables.v0) && args.l.all(x, x != \"c\")', action: warn}\n")
    return text, draw(st.integers(0, 4000))


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(case=_variable_policies(), budget=st.sampled_from([50_000, 200_000, 1_000_000]))
def test_variables_never_spend_more_than_the_calls_budget(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str, case: tuple[str, int],
        budget: int) -> None:
    text, size = case
    ps = _load(tmp_path, text, backend, max_cost=budget)
    args = {"l": ["a"] * size}
    decision, spent = _spent(monkeypatch, ps, budget, args)
    general, spent_general = _spent(monkeypatch, ps, budget, args, explain=True)
    # one string built or one iteration past the budget at most, whatever the nesting
    assert spent <= budget + 2 * ITERATION_COST + 8
    assert spent_general == spent
    assert general.to_dict() | {"id": ""} == decision.to_dict() | {"id": ""}
    if spent > budget and "Fail" in text:
        assert decision.effect == "deny"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(case=_variable_policies(), budget=st.sampled_from([5_000, 50_000, 200_000]))
def test_variables_under_the_budget_decide_alike_on_both_backends(
        tmp_path: Path, case: tuple[str, int], budget: int) -> None:
    """Generated code charges the meter itself where the closures charge their activation's
    view of it: the same units, so the same decisions at the edge of the budget."""
    text, size = case
    records = [_load(tmp_path, text, backend, max_cost=budget).evaluate(
        "t", {"l": ["a"] * size}).to_dict() | {"id": ""} for backend in BACKENDS]
    assert records[0] == records[1]


# --- held: the short path binds every policy on one map --------------------------------
#
# ``decide`` reuses the call's base map as each policy's bindings in turn (params,
# variables). Tried: policies whose variables read their own params, variables read
# lazily from messages, a later policy with a same-named variable or none, reads of a
# missing variable, and the same tool called again (static fired records are kept per
# rule): every decision equals the general path's.


@st.composite
def _param_policies(draw: st.DrawFn) -> str:
    docs = []
    for i in range(draw(st.integers(2, 4))):
        limit = draw(st.integers(-3, 3))
        lines = ["apiVersion: guardrails/v1", "kind: ToolPolicy", f"metadata: {{name: p{i}}}",
                 "spec:", "  match: {tools: [t]}",
                 f"  failurePolicy: {draw(st.sampled_from(['Fail', 'Ignore']))}",
                 f"  params: {{limit: {limit}, tag: t{i}}}"]
        has_vars = draw(st.booleans())
        if has_vars:
            lines += ["  variables:",
                      "    - {name: v, expression: 'params.limit + size(args.l)'}",
                      "    - {name: w, expression: 'params.tag + string(variables.v)'}"]
        lines.append("  rules:")
        for j in range(draw(st.integers(1, 3))):
            plain = ["params.limit < size(args.l)", "true", "args.l.size() > 2"]
            reading = ["variables.v > 1", 'variables.w.endsWith("2")',
                       "has(variables.v) && variables.v == params.limit"]
            when = draw(st.sampled_from([*plain, *reading] if has_vars else plain))
            action = draw(st.sampled_from(["deny", "warn", "allow", "require_approval"]))
            lines.append(f"    - name: r{j}")
            lines.append(f"      when: '{when}'")
            lines.append(f"      action: {action}")
            if draw(st.booleans()):
                shown = "string(variables.w)" if has_vars else "string(params.limit)"
                lines.append(f"      messageExpression: 'params.tag + \" \" + {shown}'")
            elif draw(st.booleans()):
                lines.append(f"      message: static {i} {j}")
        docs.append("\n".join(lines) + "\n")
    return "---\n".join(docs)


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(text=_param_policies(), sizes=st.lists(st.integers(0, 5), min_size=1, max_size=4))
def test_each_policy_reads_its_own_params_and_variables_on_the_short_path(
        tmp_path: Path, backend: str, text: str, sizes: list[int]) -> None:
    ps = _load(tmp_path, text, backend)
    assert ps._candidates("t").plan is not None
    for size in sizes * 2:  # a second round reuses what the first kept
        args = {"l": list(range(size))}
        fast = ps.evaluate("t", args)
        general = ps.explain("t", args).decision
        assert fast.to_dict() | {"id": ""} == general.to_dict() | {"id": ""}
        assert (fast.rules, fast.errors, fast.repairs) == (general.rules, general.errors,
                                                           general.repairs)


# --- finding 2: decisions of forked processes took their parent's ids --------------------
#
# Ids are a random per-process prefix and a counter. A forked process (a pre-fork server's
# workers, a ``fork`` pool) inherited both, and its decisions had exactly the ids of its
# parent's next decisions and of its siblings'. A forked process now draws a prefix of its
# own; the counter goes on, so a decision built before the fork and read after it does not
# take the number of a later one.

_DENY_ALL = ("apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\nspec:\n"
             "  match: {tools: [t]}\n  rules:\n    - {name: r, when: 'true', action: deny}\n")
_FORKED: dict[str, Any] = {}


def _ids_in_child(_: int) -> list[str]:
    ps = _FORKED["policies"]
    early = _FORKED["unread"]  # built before the fork, read only here
    return [early.id, *(ps.evaluate("t", {}).id for _ in range(3))]


def test_forked_processes_mint_their_own_decision_ids(tmp_path: Path) -> None:
    import multiprocessing

    ps = _load(tmp_path, _DENY_ALL, "compiled")
    ps.evaluate("t", {})
    _FORKED["policies"] = ps
    _FORKED["unread"] = ps.evaluate("t", {})
    try:
        with multiprocessing.get_context("fork").Pool(2) as pool:
            children = pool.map(_ids_in_child, range(4), chunksize=1)
    finally:
        _FORKED.clear()
    mine = [ps.evaluate("t", {}).id for _ in range(3)]
    every = [i for ids in children for i in ids[1:]] + mine
    assert len(set(every)) == len(every)
    for ids in children:  # within one process, the early decision keeps apart too
        assert len(set(ids)) == len(ids)


# --- held: literals that change meaning under the load-time shape caches -----------------
#
# Expressions of one shape share checks, type-check results and generated code. Tried: a
# valid expression first and an invalid one of its shape second (and the other way round),
# for every literal a check reads (regex patterns of each regex function, timestamp,
# duration, ip, cidr and url literals, folded division by zero, repeated map keys, params
# patterns, the int64 bounds, folded sizes): each error is reported at its own line and
# column, and decisions equal those of the closure backend, which shares no code.

_PAIRS = [
    ("args.a.matches('a+')", "args.a.matches('(')"),
    ("matches(args.a, 'a+')", "matches(args.a, '(')"),
    ("args.a.find('a+') == ''", "args.a.find('(') == ''"),
    ("timestamp('2020-01-01T00:00:00Z') < now", "timestamp('bogus') < now"),
    ("duration('1h') > duration('1m')", "duration('1x') > duration('1m')"),
    ("ip(args.a) == ip('1.2.3.4')", "ip(args.a) == ip('1.2.3')"),
    ("cidr('10.0.0.0/8').containsIP(args.a)", "cidr('10.0.0.0/33').containsIP(args.a)"),
    ("url(args.a).getHost() == url('https://x.com').getHost()",
     "url(args.a).getHost() == url('ht tp://x').getHost()"),
    ("args.a == 'x' && 1 / 1 == 1", "args.a == 'x' && 1 / 0 == 1"),
    ("{'a': 1, 'b': 2}[args.a] == 1", "{'a': 1, 'a': 2}[args.a] == 1"),
    ("{'a': args.b, 'b': args.c} == {}", "{'a': args.b, 'a': args.c} == {}"),
    ("[args.a, 'x'].size() > 1", "[args.a, 1].size() > 1"),
    ("args.a.matches(params.re)", "args.a.matches(params.re2)"),
    ("9223372036854775807 > args.n", "-9223372036854775808 < args.n"),
    ("args.n + 9223372036854775807 > 0", "args.n + 1 > 0"),
    ("'abc'.size() == 3", "'abcd'.size() == 3"),
    ("args.a in ['x', 'y']", "args.a in ['x', 1]"),
    ("args.f == -0.0 && 1.0 / -0.0 < 0.0", "args.f == 0.0 && 1.0 / 0.0 < 0.0"),
    ("args.a == 'x'", "args.a == x'"),
]


def _outcome(tmp_path: Path, first: str, second: str, backend: str) -> Any:
    def q(s: str) -> str:
        return "'" + s.replace("'", "''") + "'"

    text = ("apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\nspec:\n"
            "  match: {tools: [t]}\n  params: {re: 'a+', re2: '('}\n  rules:\n"
            f"    - name: r1\n      when: {q(first)}\n      action: deny\n"
            f"    - name: r2\n      when: {q(second)}\n      action: deny\n")
    try:
        ps = _load(tmp_path, text, backend)
    except guardrails.PolicyError as e:
        return sorted((p.line, p.column, p.message) for p in e.errors)
    out = []
    for args in ({"a": "x", "b": 1, "c": 2, "n": 1, "f": -0.0}, {"a": 1, "n": -5, "f": 0.0}):
        d = ps.evaluate("t", args)
        out.append((d.effect, d.rules, d.errors))
    return out


@pytest.mark.parametrize(("first", "second"), _PAIRS)
def test_expressions_of_one_shape_keep_their_own_literals(tmp_path: Path, first: str,
                                                          second: str) -> None:
    for a, b, line_of_b in ((first, second, 12), (second, first, 9)):
        compiled = _outcome(tmp_path, a, b, "compiled")
        assert compiled == _outcome(tmp_path, a, b, "closures")
        if type(compiled[0][0]) is int:  # load errors: the invalid one's own position
            assert {line for line, _, _ in compiled} == {line_of_b}


_LINK = "args.l.all(x, args.l.all(y, y != \"b\"))"  # 270 elements: 0.98 of the budget


def _real_chain(n: int) -> str:
    lines = [f"    - {{name: v0, expression: '{_LINK}'}}"]
    lines += [f"    - {{name: v{i}, expression: '{_LINK} && variables.v{i - 1}'}}"
              for i in range(1, n)]
    return ("apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\nspec:\n"
            "  match: {tools: [submit]}\n  variables:\n" + "\n".join(lines) + "\n"
            f"  rules:\n    - {{name: r, when: '!variables.v{n - 1}', action: deny}}\n")


async def test_a_chain_of_variables_is_stopped_at_one_budget_in_the_real_loop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_framework import tool

    from guardrails.agent_framework import ScriptedChatClient, guard
    from guardrails.agent_framework.scripted import call
    from tests.af_support import agent_with, load_text, run

    ran: list[Any] = []

    @tool
    def submit(l: list[str]) -> str:  # noqa: E741 - the argument the policy reads
        """Submit a list."""
        ran.append(l)
        return "submitted"

    policies = load_text(tmp_path, _real_chain(10))
    budget = Limits().max_cost
    _Recorded.made = []
    monkeypatch.setattr(evaluate, "Meter", _Recorded)
    client = ScriptedChatClient([[call("submit", l=["a"] * 270)]])
    await run(agent_with(client, [submit], guard(policies)), "go")
    monkeypatch.undo()
    assert not ran  # fail closed: the chain ran the call's budget out
    assert _Recorded.made
    # each evaluation of the call stopped at its budget (ten links spent 9.8 budgets before)
    assert all(budget - m.left <= budget + 2 * ITERATION_COST for m in _Recorded.made)


# --- finding 3: a misspelt ``unmatched`` passed unnoticed on the short path --------------
#
# ``PolicySet.evaluate`` converted ``unmatched`` only on the general path: a tool with a
# short path decided whatever it was given, and the same policy set raised ValueError
# only once a tool no policy names was called (in production, not at the first call).


def test_an_invalid_unmatched_is_refused_on_every_path(tmp_path: Path) -> None:
    ps = _load(tmp_path, _DENY_ALL, "compiled")
    assert ps._candidates("t").plan is not None
    for tool in ("t", "no-policy-names-this"):
        with pytest.raises(ValueError, match="Deny"):
            ps.evaluate(tool, {}, unmatched="Deny")
    assert ps.evaluate("no-policy-names-this", {}, unmatched="deny").effect == "deny"
    assert ps.evaluate("t", {}, unmatched="allow").effect == "deny"


# --- held: spans skipped while nothing records, and a provider installed mid-run -------
#
# The guard starts no span while its tracer is the global proxy with no provider behind it
# (``GuardTelemetry._can_record``). Tried, in a process of its own (the global provider is
# set once per process): an SDK provider installed by the tool during the first call of a
# run; the later calls' spans are recorded (allow, deny with a message quoting the secret
# argument, a call id carrying it), and none carries the secret, nor does any tool result.


def test_a_provider_installed_mid_run_records_no_secret() -> None:
    import json
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, str(root / "tests" / "redteam_midrun_otel.py"),
                           str(root)], capture_output=True, text=True, timeout=120, check=True)
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["ran"] == [1, 2]  # the deny and the secret call id did not run
    assert out["guard_spans"] == 3  # the first call's span was skipped: none could record
    assert out["leaks"] == [] and out["result_leaks"] == []


# --- held: a tool that changes the values it was given ----------------------------------
#
# The guard's JSON view of the validated arguments is now a direct copy for plain JSON
# (``json_view``). Tried: a tool that appends to its list argument and rewrites its dict
# argument in place: history keeps what was judged, and a later call whose rule reads
# history is not misled by what the tool wrote.


async def test_a_tool_mutating_its_arguments_changes_nothing_judged(tmp_path: Path) -> None:
    from agent_framework import AgentSession, tool

    from guardrails.agent_framework import ScriptedChatClient, guard
    from guardrails.agent_framework.scripted import call
    from tests.af_support import agent_with, load_text, run

    ran: list[list[str]] = []

    @tool
    def submit(items: list[str], meta: dict[str, str] | None = None) -> str:
        """Submit."""
        ran.append(list(items))
        items.append("EVIL")
        if meta is not None:
            meta["k"] = "EVIL"
        return "ok"

    policies = load_text(tmp_path, (
        "apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\nspec:\n"
        "  match: {tools: [submit]}\n  rules:\n    - name: r\n"
        "      when: '\"EVIL\" in args.items || history.exists(h, \"EVIL\" in h.args.items"
        " || (has(h.args.meta) && h.args.meta != null && h.args.meta.k == \"EVIL\"))'\n"
        "      action: deny\n"))
    session = AgentSession()
    client = ScriptedChatClient([[call("submit", items=["a"], meta={"k": "v"})],
                                 [call("submit", items=["b"])]])
    await run(agent_with(client, [submit], guard(policies)), "go", session=session)
    assert ran == [["a"], ["b"]]  # the second call was judged on what the first was given
    state = session.state
    history = (state.get("guardrails") or state)["history"]
    assert [h["args"] for h in history] == [{"items": ["a"], "meta": {"k": "v"}},
                                            {"items": ["b"], "meta": None}]


# --- finding 4: a huge history entry was copied before it was bounded -------------------
#
# ``normalize_history`` copied each ``dict`` entry whole (to take out the keys it reads
# itself) before charging its size: a history entry of two million keys cost 35 ms where
# arguments of that size are refused in 0.1 ms. An entry is now refused by its size first,
# exactly when the charge that follows would refuse it.


class _Entry(Mapping[str, Any]):
    """A history entry that is a mapping of its own, not a dict."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def _history_policy(tmp_path: Path, max_bytes: int) -> guardrails.PolicySet:
    text = ("apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\nspec:\n"
            "  match: {tools: [t]}\n  rules:\n"
            "    - {name: r, when: 'history.exists(h, h.result == \"x\")', action: deny}\n")
    return _load(tmp_path, text, "compiled", max_input_bytes=max_bytes)


def test_a_huge_history_entry_is_refused_without_a_copy(tmp_path: Path) -> None:
    import tracemalloc

    ps = _history_policy(tmp_path, 1_000_000)
    entry = {f"k{i}": 1 for i in range(200_000)}
    tracemalloc.start()
    try:
        decision = ps.evaluate("t", {}, history=[entry])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert decision.effect == "deny"
    assert [e.message for e in decision.errors] == ["inputs exceed the size bound"]
    assert peak < 1_000_000  # a copy of the entry takes some 10 MB


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(others=st.integers(0, 40), own=st.sets(st.sampled_from(["result", "trusted", "at"])),
       max_bytes=st.integers(200, 9000), mapping=st.booleans())
def test_the_size_check_of_a_history_entry_refuses_only_what_the_charge_refuses(
        tmp_path: Path, others: int, own: set[str], max_bytes: int, mapping: bool) -> None:
    """The early check on the entry's size never refuses an entry the walk accepts: the
    entry decides as the same entry without the keys the engine reads itself."""
    ps = _history_policy(tmp_path, max_bytes)
    values = {"result": "x", "trusted": True, "at": "2026-01-01T00:00:00Z"}
    entry: dict[str, Any] = {f"k{i}": "v" for i in range(others)}
    entry |= {k: values[k] for k in own}
    bare = {k: v for k, v in entry.items() if k not in values}
    shown: Any = _Entry(entry) if mapping else entry
    full = ps.evaluate("t", {}, history=[shown])
    reference = ps.evaluate("t", {}, history=[bare])
    assert bool(full.errors) == bool(reference.errors)
    assert ps.explain("t", {}, history=[shown]).decision.to_dict() | {"id": ""} == (
        full.to_dict() | {"id": ""})


# --- finding 5: aliases given as an iterator were dropped on the short path --------------
#
# ``PolicySet.evaluate`` looked the candidates up by ``(tool, *aliases)`` and, on a miss,
# made them with ``tuple(aliases)``: an iterator was spent by the first, and the candidates
# were made for the tool alone, so a policy that names an MCP tool by its ``mcp:`` alias
# did not apply and the call was allowed (cached so for the tool alone too). The aliases
# are now read once.

_ALIASED = ("apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\nspec:\n"
            "  match: {tools: ['mcp:bank/send_money']}\n"
            "  rules:\n    - {name: r, when: 'true', action: deny}\n")


@pytest.mark.parametrize("form", [tuple, list, iter, lambda a: (x for x in a), dict.fromkeys])
def test_aliases_of_any_iterable_form_name_the_tool(tmp_path: Path, form: Any) -> None:
    ps = _load(tmp_path, _ALIASED, "compiled")
    aliases = ["mcp:bank/send_money"]
    assert ps.evaluate("send_money", {}, aliases=form(aliases)).effect == "deny"
    assert ps.evaluate("send_money", {}, aliases=form(aliases)).effect == "deny"  # cached
    assert ps.evaluate("send_money", {}).effect == "allow"  # the tool alone: no policy
    assert ps.evaluate("send_money", {}, aliases=form(aliases)).effect == "deny"


# --- finding 6: an agent name of a hostile ``str`` subclass made ``evaluate`` raise -------
#
# Agent names were kept as given when they were strings: a subclass's own ``__hash__`` or
# ``__eq__`` then ran in the agent match, outside every guard, and ``evaluate`` (short and
# general path alike) raised; one that lied matched a policy of another agent. Names are
# now plain strings of their data, as every other input is.


class _RaisingName(str):
    def __hash__(self) -> int:
        raise RuntimeError("hash")

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("eq")


class _LyingName(str):
    def __hash__(self) -> int:
        return hash("alpha")

    def __eq__(self, other: object) -> bool:
        return True


_SCOPED = ("apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\nspec:\n"
           "  match: {tools: [t], agents: [alpha]}\n"
           "  rules:\n    - {name: r, when: 'true', action: deny}\n")


@pytest.mark.parametrize(("agent", "plain"), [
    (_RaisingName("x"), "x"), ([_RaisingName("alpha")], ["alpha"]), (_LyingName("beta"), "beta"),
    (("beta", _LyingName("id-1")), ("beta", "id-1")), (_RaisingName(""), ""),
])
def test_agent_names_are_judged_by_their_text(tmp_path: Path, agent: Any, plain: Any) -> None:
    ps = _load(tmp_path, _SCOPED, "compiled")
    expected = ps.evaluate("t", {}, agent=plain).to_dict() | {"id": ""}
    assert ps.evaluate("t", {}, agent=agent).to_dict() | {"id": ""} == expected
    assert ps.explain("t", {}, agent=agent).decision.to_dict() | {"id": ""} == expected


class _OtherName(str):
    def __str__(self) -> str:
        return "harmless"


def test_a_tool_name_of_a_str_subclass_is_judged_by_its_text(tmp_path: Path) -> None:
    """The short path takes exact strings only; the general path named the tool by its
    ``__str__``, which a subclass chooses (a harmless name for a denied tool)."""
    ps = _load(tmp_path, _DENY_ALL, "compiled")
    assert ps.evaluate(_OtherName("t"), {}).effect == "deny"
    assert ps.evaluate(_OtherName("t"), {}).tool == "t"
    assert type(ps.evaluate(_OtherName("t"), {}).tool) is str


# --- finding 7 (open): a run-time pattern's compile cost depends on the process's cache --
#
# A pattern known only at run time is charged the first time *this call* uses it (state on
# the call's ``Meter``), never by what earlier calls of the process compiled: a call near its
# budget is decided alike by ``evaluate`` and ``explain``, now and later, on every replica.

_PATTERN_EDGE = ("apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\nspec:\n"
                 "  match: {tools: [t]}\n  rules:\n"
                 "    - {name: shape, when: 'args.s.matches(args.p)', action: warn}\n"
                 "    - {name: scan, when: 'args.l.exists(x, x == \"b\")', action: deny}\n")


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_call_decides_alike_whatever_patterns_earlier_calls_compiled(
        tmp_path: Path, backend: str) -> None:
    import uuid

    ps = _load(tmp_path, _PATTERN_EDGE, backend, max_cost=100_000)
    pattern = "x" + uuid.uuid4().hex[:6]  # compiled by no call before
    # 2,000 iterations (80,000 units) fit; with a cold pattern's compile (21,400) they do not
    args = {"s": pattern, "p": pattern, "l": ["a"] * 2000}
    first = ps.evaluate("t", args)
    again = ps.explain("t", args).decision
    assert first.to_dict() | {"id": ""} == again.to_dict() | {"id": ""}
