"""Promise 8 swept function by function (benchmarks/cost_sweep.py): work that an
expression did without charging for it.

Each case made one guarded call run for far longer than the 50 ms bound within the budget
before its charge (the figure in each test's docstring). The tests count what is charged
(units on the call's meter) or check that the call runs out of its budget; they never time
anything. Both backends that keep a budget are attacked.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import guardrails
from guardrails.expr import compile_expression, generate_pending
from guardrails.expr.limits import DEFAULT_LIMITS, ITERATION_COST, METER, Meter
from guardrails.expr.values import CelError, CostLimitExceeded

BACKENDS = pytest.mark.parametrize("backend", ["compiled", "closures"])
BUDGET = DEFAULT_LIMITS.max_cost
S = 440_000
LOOP = list(range(270))


def spent(source: str, args: dict[str, Any], backend: str, budget: int = BUDGET) -> int | None:
    """Units ``source`` charges to a fresh meter on ``args``; None when the call is over
    its cost bound (it ran out, or a function went over its own bound of work)."""
    program = compile_expression(source, declared={"args", "now"}, backend=backend)  # type: ignore[arg-type]
    generate_pending()
    meter = Meter(budget)
    try:
        program.evaluate({"args": args, METER: meter})
    except CostLimitExceeded:
        return None
    except CelError:
        if meter.left < 0:
            return None
        raise
    return None if meter.left < 0 else budget - meter.left


def decide(tmp_path: Path, rule: str, args: dict[str, Any], backend: str) -> guardrails.Decision:
    path = tmp_path / "p.yaml"
    path.write_text(
        "apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\nspec:\n"
        "  match: {tools: [t]}\n  rules:\n    - name: r\n"
        f"      when: {json.dumps(rule)}\n      action: warn\n", encoding="utf-8")
    return guardrails.load(path, backend=backend).evaluate("t", args)  # type: ignore[arg-type]


def over_budget(decision: guardrails.Decision) -> bool:
    return decision.effect.value == "deny" and any(
        "cost limit" in e.message for e in decision.errors)


# ---------------------------------------------------------------- the loop itself


@BACKENDS
def test_an_iteration_is_charged_by_the_size_of_its_body(backend: str) -> None:
    """A body of 1,000 additions in two loops of 270 elements: 3.8 s (closures 9.9 s),
    charged 40 units an iteration whatever the body did."""
    small = spent("args.l.all(x, x >= 0)", {"l": LOOP}, backend)
    assert small == len(LOOP) * ITERATION_COST  # the small bodies policies write: unchanged
    body = "[" + ", ".join(f"x + {i}" for i in range(1, 200)) + "].size() > 0"
    big = spent(f"args.l.all(x, {body})", {"l": LOOP}, backend)
    assert big is not None and big >= len(LOOP) * 4 * 2 * 199  # every addition: two nodes
    nested = "[" + ", ".join(f"y + {i}" for i in range(1, 1000)) + "].size() > 0"
    assert spent(f"args.l.all(x, args.l.all(y, {nested}))", {"l": LOOP}, backend) is None


@BACKENDS
def test_both_backends_charge_an_iteration_alike(backend: str) -> None:
    body = "[" + ", ".join(f"x * {i}" for i in range(1, 50)) + "].exists(z, z == 7)"
    for macro in ("all", "exists", "exists_one", "map", "filter"):
        source = f"args.l.{macro}(x, {body})" if macro != "map" else f"args.l.map(x, [{body}])"
        assert spent(source, {"l": LOOP}, backend) == spent(source, {"l": LOOP}, "compiled")


# ---------------------------------------------------------------- comparisons


@BACKENDS
@pytest.mark.parametrize("op", ["==", "!=", "<=", ">="])
def test_comparing_two_long_texts_is_charged_by_their_length(backend: str, op: str) -> None:
    """Two 440 kB texts compared 72,900 times: 0.43 s, uncharged."""
    args = {"l": LOOP, "a": "a" * S, "b": "a" * S}
    assert spent(f"args.l.all(x, args.l.all(y, args.a {op} args.b || true))", args,
                 backend) is None
    once = spent(f"args.a {op} args.b", args, backend)
    assert once is not None and once >= S // 64
    # Short texts (the common case) are free.
    assert spent("args.a == args.b", {"a": "a" * 63, "b": "a" * 63}, backend) == 0


@BACKENDS
def test_comparing_lists_and_maps_is_charged_by_their_values(backend: str) -> None:
    """Two lists of 3,000 numbers compared 2,000 times: 0.39 s; maps of 1,500 keys 0.17 s."""
    lists = {"m": list(range(3_000)), "n": list(range(3_000))}
    units = spent("args.m == args.n", lists, backend)
    assert units is not None and units >= 40 * 3_000
    maps = {"m": {f"k{i}": i for i in range(1_500)}, "n": {f"k{i}": i for i in range(1_500)}}
    units = spent("args.m != args.n", maps, backend)
    assert units is not None and units >= 40 * 1_500
    nested = {"m": [list(range(3_000))], "n": [list(range(3_000))]}  # not the top level only
    units = spent("args.m == args.n", nested, backend)
    assert units is not None and units >= 40 * 3_000
    wrapped = spent("optional.of(args.m) == optional.of(args.n)", lists, backend)
    assert wrapped is not None and wrapped >= 40 * 3_000
    assert spent("args.l.all(x, args.m == args.n)", {"l": list(range(2_000)), **lists},
                 backend) is None


@BACKENDS
def test_a_constant_side_keeps_a_comparison_free(backend: str) -> None:
    assert spent("args.a == 'admin'", {"a": "a" * S}, backend) == 0
    assert spent("'admin' != args.a", {"a": "admin"}, backend) == 0
    assert spent("args.n == 3", {"n": 3}, backend) == 0


@BACKENDS
def test_comparison_attacks_are_stopped_in_evaluate(tmp_path: Path, backend: str) -> None:
    strings = {"l": LOOP, "a": "a" * S, "b": "a" * S}
    assert over_budget(decide(tmp_path, "args.l.all(x, args.l.all(y, args.a == args.b))",
                              strings, backend))
    lists = {"l": list(range(2_000)), "m": list(range(3_000)), "n": list(range(3_000))}
    assert over_budget(decide(tmp_path, "args.l.all(x, args.m == args.n)", lists, backend))


# ---------------------------------------------------------------- standard functions


@BACKENDS
@pytest.mark.parametrize(("body", "args"), [
    # 45 s, 21 s, 26 s, 4 s before: conversions read their whole text uncharged
    ("size(string(bytes(args.a))) > 0", {"a": "é" * S}),
    ("size(bytes(args.a)) > 0", {"a": "é" * S}),
    ("double(args.a) > 0.0", {"a": "1" * S}),
    ("int(args.a) > 0 || true", {"a": "1" * 4_000}),
    ("size(base64.decode(args.a)) > 0", {"a": "QUFB" * (S // 4)}),
    ("args.a.startsWith(args.a)", {"a": "a" * S}),
    ("args.a.endsWith(args.a)", {"a": "a" * S}),
    # 0.12 s and 0.21 s before: a constant-time call of a few microseconds, 40 units
    ("string(args.d) != ''", {"d": 1e-300}),
    ("timestamp(args.t) > timestamp(0)", {"t": "2026-12-01T12:00:00.123456789+01:00"}),
])
def test_standard_functions_are_charged_by_what_they_read(backend: str, body: str,
                                                          args: dict[str, Any]) -> None:
    assert spent(f"args.l.all(x, args.l.all(y, {body}))", {"l": LOOP, **args}, backend) is None
    once = spent(body, args, backend)
    assert once is not None and once > 0


@BACKENDS
def test_a_long_duration_and_a_wide_extremum_are_charged(backend: str) -> None:
    """A duration of 220,000 units took 90 ms in one call; math.greatest of 6,000 numbers
    in a loop 5.8 s."""
    assert spent("duration(args.d) > duration('0s')", {"d": "1h" * (S // 2)}, backend) is None
    units = spent("math.greatest(args.m) > 0", {"m": list(range(6_000))}, backend)
    assert units is not None and units >= 10 * 6_000


@BACKENDS
def test_time_zones_named_by_the_call_are_charged(backend: str) -> None:
    """An unknown zone is a file lookup each time: 8,000 of them took 0.3 s."""
    zones = {"m": [f"Nope/Zone{i}" for i in range(8_000)]}
    program = compile_expression("args.m.exists(z, now.getHours(z) == 99)",
                                 declared={"args", "now"}, backend=backend)  # type: ignore[arg-type]
    generate_pending()
    import datetime
    meter = Meter(BUDGET)
    with pytest.raises(CostLimitExceeded):
        program.evaluate({"args": zones, "now": datetime.datetime.now(datetime.UTC),
                          METER: meter})


@BACKENDS
def test_numbers_and_constant_time_functions_stay_free(backend: str) -> None:
    assert spent("double(args.n) > 1.0 && int(args.f) == 2 && size(args.s) == 3",
                 {"n": 2, "f": 2.5, "s": "abc"}, backend) == 0


def test_every_standard_function_declares_its_cost() -> None:
    """A standard function added without a cost declaration would run uncharged."""
    from guardrails.expr import stdlib

    for name, fn in {**stdlib.GLOBALS, **stdlib.METHODS}.items():
        assert callable(getattr(fn, "cel_extra_cost", None)), name


# ---------------------------------------------------------------- library functions


@BACKENDS
@pytest.mark.parametrize(("body", "args", "at_least"), [
    # 0.58 s: two lists of 4,000 numbers, one unit an element
    ("sets.contains(args.a, args.b)", {"a": list(range(4_000)), "b": list(range(4_000))},
     8 * 8_000),
    # 0.22 s: max() of 8,000 numbers
    ("args.m.max() >= 0", {"m": list(range(8_000))}, 10 * 8_000),
    ("args.m.sum() >= 0", {"m": list(range(8_000))}, 10 * 8_000),
    # 0.17 s and 0.5 s: nested values walked, charged one unit a top-level element
    ("[args.m].flatten(2).size() == 0", {"m": [[] for _ in range(8_000)]}, 16 * 8_000),
    ("[args.m].distinct().size() == 1", {"m": {f"k{i}": 1 for i in range(4_000)}}, 64 * 8_000),
    ("'%s'.format([args.m]) != ''", {"m": [[] for _ in range(8_000)]}, 60 * 8_000),
    # 66 ms in one call: 3,000 long names folded character by character
    ("domains.lookalike('example.com', args.m)", {"m": ["é" * 240 + ".com"] * 3_000},
     8 * 3_000 * 244),
    ("size(strings.quote(args.a)) > 0", {"a": "\ud800" * 10_000}, 10 * 10_000),
])
def test_library_functions_are_charged_by_what_they_walk(backend: str, body: str,
                                                         args: dict[str, Any],
                                                         at_least: int) -> None:
    units = spent(body, args, backend)
    assert units is None or units >= at_least


@BACKENDS
@pytest.mark.parametrize("body", [
    "args.a.findAll('').size() > 0",
    "regex.extractAll(args.a, 'a').size() > 0",
    "size(regex.replace(args.a, 'a', 'b')) > 0",
])
def test_regex_matches_are_charged_and_bounded_per_call(backend: str, body: str) -> None:
    """``findAll('')`` of a 440 kB text: 1.5 s in one call, charged by its length."""
    program = compile_expression(body, declared={"args"}, backend=backend)  # type: ignore[arg-type]
    generate_pending()
    meter = Meter(BUDGET)
    with pytest.raises(CelError, match=r"more than 2048 matches|longer than 2048"):
        program.evaluate({"args": {"a": "a" * S}, METER: meter})
    assert meter.left < 0  # over the call's bound, as if it ran out of the budget
    # Within the per-call bound, every match past a call's first 1,000 costs 500 units.
    first = spent(body, {"a": "a" * 1_000}, backend)
    assert first is not None and first >= 40 * 1_000
    assert spent(f"args.l.all(x, {body})", {"l": LOOP, "a": "a" * 2_000}, backend) is None
    meter = Meter(BUDGET)
    program.evaluate({"args": {"a": "a" * 2_000}, METER: meter})
    assert BUDGET - meter.left >= 40 * 1_000 + 500 * 1_000


@BACKENDS
def test_a_list_looked_for_in_lists_is_charged_by_what_each_comparison_reads(
        backend: str) -> None:
    """``x in l`` for a list ``x`` of 3,000 numbers and ``l`` holding one such list, in a
    loop: 0.39 s, charged 40 units a look; ``sets.contains([m], [x])`` alike."""
    args = {"x": [*range(2_999), -1], "m": [list(range(3_000))]}
    units = spent("args.x in args.m", args, backend)
    assert units is not None and units >= 40 * 3_000
    units = spent("sets.contains(args.m, [args.x])", args, backend)
    assert units is not None and units >= 40 * 3_000
    assert spent("args.l.all(x, !(args.x in args.m))", {"l": list(range(2_000)), **args},
                 backend) is None
    # Elements of another size are unequal without reading them.
    assert spent("args.x in args.m", {"x": [1], "m": [list(range(3_000))]}, backend) == 40


@BACKENDS
def test_lookups_of_keys_python_merges_are_charged(backend: str) -> None:
    """``0 in m`` scanned every key of the map for a non-bool 0: 0.35 s in a loop."""
    wide = {"m": {f"k{i}": 1 for i in range(4_000)}}
    for body in ("0 in args.m", "true in args.m", "args.m[?1].hasValue()"):
        units = spent(f"!({body})", wide, backend)
        assert units is not None and units >= 4 * 4_000, body
    assert spent("args.m['k1'] == 1 && 'k2' in args.m", wide, backend) == 0


def test_every_library_function_declares_its_cost() -> None:
    """A library function added without a declared cost would be charged as a cheap one;
    the import refuses it (``library.COSTS``)."""
    from guardrails.expr import library

    for name, fn in {**library.FUNCTIONS, **library.METHODS}.items():
        assert name in library.COSTS, name
        assert "cel_cost" in vars(fn) and "cel_scan_cost" in vars(fn), name


@BACKENDS
def test_a_call_over_its_bound_of_matches_is_over_its_cost_bound(backend: str) -> None:
    """An error a rule could absorb (``|| true``) must not make the bounded work free, and a
    policy under ``failurePolicy: Ignore`` must not be skipped by flooding its matches: a
    function call over its bound of matches puts the call over its cost bound."""
    near = "password=aaaaaaaa " * 3_000
    for body in ("credentials.found(args.a) || true", "args.a.findAll('') == [] || true"):
        assert spent(body, {"a": near}, backend) is None, body


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streaming"])
async def test_a_flood_of_matches_is_denied_under_ignore(tmp_path: Path, stream: bool) -> None:
    """3,000 allowed links hide the one that is not: the policy's findAll goes over its
    bound. Under ``Ignore`` an ordinary error would skip the policy (allow); a call over its
    bounds never runs, whatever the failurePolicy."""
    from agent_framework import AgentSession, tool

    from guardrails.agent_framework import ScriptedChatClient, guard
    from guardrails.agent_framework.scripted import call
    from tests.af_support import agent_with, run

    ran: list[str] = []

    @tool
    def post(body: str) -> str:
        """Posts a text."""
        ran.append(body)
        return "posted"

    path = tmp_path / "p.yaml"
    path.write_text(
        "apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\nspec:\n"
        "  match: {tools: [post]}\n  failurePolicy: Ignore\n  rules:\n    - name: r\n"
        "      when: \"args.body.findAll('https?://[^ ]+').exists(u, !u.startsWith("
        "'https://ok.example/'))\"\n      action: deny\n", encoding="utf-8")
    policies = guardrails.load(path)
    flood = " ".join(["https://ok.example/x"] * 3_000 + ["https://evil.example/"])
    assert policies.evaluate("post", {"body": "see https://evil.example/"}).effect.value == "deny"
    decision = policies.evaluate("post", {"body": flood})
    # Over the call's bound (an input error), not only an error of the rule: denied by the
    # engine itself, whatever the failurePolicy (a host acting on ``decision.effect``).
    assert decision.effect.value == "deny"
    assert any(e.element == "input" and "cost bound" in e.message and e.handled_as == "fired"
               for e in decision.errors)
    client = ScriptedChatClient([[call("post", body=flood)]])
    await run(agent_with(client, [post], guard(policies)), "post it", stream=stream,
              session=AgentSession())
    assert ran == []


@BACKENDS
def test_credentials_found_charges_the_candidates_it_checks(backend: str) -> None:
    """24,000 near-miss assignments in a 440 kB argument: 0.3 s in one call."""
    assert spent("credentials.found(args.a)", {"a": "password=aaaaaaaa " * 24_000},
                 backend) is None
    few = spent("credentials.found(args.a)", {"a": "password=aaaaaaaa " * 10}, backend)
    assert few is not None and few >= 1_000 + 180 + 40 * 10
    assert spent("credentials.found(args.a)", {"a": "AKIA" + "A" * 16}, backend) == 1_020


# ---------------------------------------------------------------- the real agent loop

LOOP_RULES = {
    "body": ("args.items.all(x, args.items.all(y, ["
             + ", ".join(f"y + {i}" for i in range(1, 400)) + "].size() > 0))"),
    "compare": "args.items.all(x, args.items.all(y, args.other == args.more))",
    "conversion": "args.items.all(x, args.items.all(y, size(bytes(args.other)) > 0))",
    "greatest": "args.items.all(x, math.greatest(args.items) > -1)",
    "matches": "args.items.all(x, args.other.findAll('a').size() >= 0)",
    "credentials": "args.items.all(x, credentials.found(args.other) || true)",
}


def _loop_inputs(kind: str) -> dict[str, Any]:
    items = list(range(270)) if kind in ("body", "compare", "conversion") else list(range(2_000))
    other = {"compare": "a" * 400_000, "conversion": "é" * 200_000,
             "matches": "a" * 2_000, "credentials": "password=aaaaaaaa " * 2_000}
    more = "a" * 400_000 if kind == "compare" else ""
    return {"items": items, "other": other.get(kind, ""), "more": more}


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streaming"])
@pytest.mark.parametrize("kind", sorted(LOOP_RULES))
async def test_the_sweeps_attacks_are_stopped_in_the_real_loop(tmp_path: Path, kind: str,
                                                               stream: bool) -> None:
    """Each took 0.4-45 s in one guarded call before its charge. In the real loop the call
    is denied at the budget: the tool never runs and the secret argument is never quoted."""
    from agent_framework import AgentSession, tool

    from guardrails.agent_framework import ScriptedChatClient, guard
    from guardrails.agent_framework.scripted import call, result_text
    from tests.af_support import agent_with, run

    ran: list[Any] = []
    secret = "tok-Zq81-very-secret-value"

    @tool
    def submit(items: Any = None, other: Any = None, more: Any = None,
               token: Any = None) -> str:
        """Submit items."""
        ran.append(items)
        return "submitted"

    path = tmp_path / "p.yaml"
    path.write_text(
        "apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\nspec:\n"
        "  match: {tools: [submit]}\n  secrets: {arguments: [token]}\n  rules:\n"
        f"    - name: r\n      when: {json.dumps(LOOP_RULES[kind])}\n      action: warn\n",
        encoding="utf-8")
    policies = guardrails.load(path)
    session = AgentSession()
    client = ScriptedChatClient([[call("submit", token=secret, **_loop_inputs(kind))]])
    response = await run(agent_with(client, [submit], guard(policies)), "submit them",
                         stream=stream, session=session)
    result = result_text(client.tool_results()[-1])
    assert ran == []
    assert "denied" in result
    assert secret not in result and secret not in str(response)
    entry = session.state["guardrails"]["history"][-1]
    assert entry["effect"] == "deny"
    decision = policies.evaluate("submit", {"token": secret, **_loop_inputs(kind)})
    assert over_budget(decision)


DIFFERENTIAL = [
    "args.a == args.b", "args.a < args.b", "args.m == args.n", "args.m != args.n",
    "optional.of(args.m) == optional.of(args.n)", "[args.m] == [args.n]",
    "args.l.all(x, x == args.l[0])", "args.l.exists(x, [x, x + 1, x * 2].size() == 9)",
    "string(bytes(args.a)) == args.a", "double(args.d) > 0.0", "int(args.i) > 0",
    "duration(args.dur) > duration('0s')", "math.greatest(args.l) > 0",
    "args.a.startsWith(args.b)", "args.a.endsWith('x')", "0 in args.map", "true in args.map",
    "args.map[?1].hasValue()", "args.l.max() > 0", "sets.contains(args.l, args.l)",
    "[args.m].flatten(2).size() >= 0", "args.m.distinct().size() > 0",
    "'%s %s'.format([args.m, args.a]) != ''", "args.a.findAll('a').size() >= 0",
    "regex.replace(args.a, 'a', '\\\\0-') != ''", "credentials.found(args.a)",
    "domains.lookalike('example.com', args.names)", "strings.quote(args.u) != ''",
    "args.m[0] in args.n", "[args.a] in [args.m, [args.b]]", "sets.intersects(args.m, args.n)",
]


@pytest.mark.parametrize("size", [1, 40, 700])
@pytest.mark.parametrize("source", DIFFERENTIAL)
def test_both_backends_charge_every_function_alike(source: str, size: int) -> None:
    """What a call is charged is the policies' and the call's, never the backend's."""
    args = {
        "a": "a" * size, "b": "a" * size, "u": "é\ud800" * size, "d": "1" * min(size, 300),
        "i": "7" * min(size, 18), "dur": "1h" * min(size, 50),
        "m": [[i, str(i)] for i in range(size)], "n": [[i, str(i)] for i in range(size)],
        "l": list(range(1, size + 1)), "map": {f"k{i}": i for i in range(size)},
        "names": ["exámple.com"] * size,
    }
    assert spent(source, args, "closures") == spent(source, args, "compiled")
