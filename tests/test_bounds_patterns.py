"""Regular expressions known only at run time are charged for compiling them (promise 8).

A constant pattern is compiled once, at load. A pattern an expression reads (from params, an
argument, a history entry) is compiled the first time it is seen: 20-250 µs with RE2, more
as it grows, far more than the scan the cost budget used to charge. Before the fix a call
carrying thousands of distinct patterns compiled them all (and proved each one safe for
Python's ``re``, up to a millisecond apiece): 400 ms for one call of the worst-case
benchmark. Each test counts compiles, never time.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from guardrails import Effect
from guardrails.engine.scrub import MAX_LAYER_CHARS
from guardrails.expr import lib_common, safe_re
from guardrails.expr import stdlib as std
from guardrails.expr.compiler import compile_expression
from guardrails.expr.limits import (
    DEFAULT_LIMITS,
    IN_COMPARE_COST,
    METER,
    PATTERN_CHAR_COST,
    PATTERN_COST,
    Meter,
)
from guardrails.expr.values import CostLimitExceeded
from tests.engine_support import load_text, policy

BACKENDS = ("compiled", "closures")
MAX_COMPILES = DEFAULT_LIMITS.max_cost // PATTERN_COST + 1
"""The most patterns one call's budget pays for, whatever their length."""


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every pattern compiled at run time, by either cache, from now on (both start empty)."""
    seen: list[str] = []
    monkeypatch.setattr(std, "_TESTERS", {})
    monkeypatch.setattr(std, "_REGEX_CACHE", {})
    monkeypatch.setattr(lib_common, "_RE2_CACHE", {})
    real_std, real_lib = std.regex, lib_common._compile_cached

    def counted_std(pattern: str) -> Any:
        seen.append(pattern)
        return real_std(pattern)

    def counted_lib(pattern: str) -> Any:
        seen.append(pattern)
        return real_lib(pattern)

    monkeypatch.setattr(std, "regex", counted_std)
    monkeypatch.setattr(lib_common, "_compile_cached", counted_lib)
    yield seen


def _patterns(n: int) -> list[str]:
    return [f"(?i)n{i}[0-9a-f]{{8,}}z|q{i}.*w{i}" for i in range(n)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("source", [
    'args.p.exists(p, "hello".matches(p))',
    'args.p.exists(p, "hello".find(p) != "")',
    'args.p.exists(p, "hello".findAll(p).size() > 0)',
    'args.p.exists(p, regex.extract("hello", p).hasValue())',
    'args.p.exists(p, regex.extractAll("hello", p).size() > 0)',
    'args.p.exists(p, regex.replace("hello", p, "x") != "hello")',
])
def test_many_distinct_patterns_run_out_of_budget(source: str, backend: Any,
                                                   compiles: list[str]) -> None:
    program = compile_expression(source, declared=("args",), backend=backend)
    meter = Meter(DEFAULT_LIMITS.max_cost)
    with pytest.raises(CostLimitExceeded):
        program.evaluate({"args": {"p": _patterns(5_000)}, METER: meter})
    assert 0 < len(compiles) <= MAX_COMPILES


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_enormous_pattern_is_refused_before_compiling(backend: Any,
                                                         compiles: list[str]) -> None:
    program = compile_expression('"hello".matches(args.p)', declared=("args",),
                                 backend=backend)
    pattern = "a" * (DEFAULT_LIMITS.max_cost // PATTERN_CHAR_COST + 1)
    with pytest.raises(CostLimitExceeded):
        program.evaluate({"args": {"p": pattern}, METER: Meter(DEFAULT_LIMITS.max_cost)})
    assert compiles == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_pattern_is_charged_once_per_call_whatever_the_process_compiled(
        backend: Any, compiles: list[str]) -> None:
    """The charge depends on the call only: the first call (which compiles the patterns)
    and a later one (which finds them compiled) spend the same, and a pattern a call uses
    twice is charged once."""
    program = compile_expression('args.p.exists(p, "hello".matches(p))', declared=("args",),
                                 backend=backend)
    patterns = _patterns(20)
    spent = []
    for listed in (patterns, patterns, patterns + patterns):
        meter = Meter(DEFAULT_LIMITS.max_cost)
        assert program.evaluate({"args": {"p": listed}, METER: meter}) is False
        spent.append(DEFAULT_LIMITS.max_cost - meter.left)
    assert len(compiles) == 20  # compiled once, by the first call
    assert spent[0] == spent[1]
    assert spent[2] - spent[1] < len(patterns) * PATTERN_COST  # only the scans again
    assert spent[0] > sum(PATTERN_COST + PATTERN_CHAR_COST * len(p) for p in patterns)


@pytest.mark.parametrize("backend", BACKENDS)
def test_params_texts_cost_nothing(backend: Any) -> None:
    program = compile_expression('args.p.exists(p, "hello".matches(p))', declared=("args",),
                                 backend=backend)
    patterns = _patterns(20)
    free, charged = (Meter(DEFAULT_LIMITS.max_cost, frozenset(patterns)),
                     Meter(DEFAULT_LIMITS.max_cost))
    program.evaluate({"args": {"p": patterns}, METER: free})
    program.evaluate({"args": {"p": patterns}, METER: charged})
    assert free.left - charged.left == sum(PATTERN_COST + PATTERN_CHAR_COST * len(p)
                                           for p in patterns)


def test_run_time_patterns_are_never_analysed_for_python_re(
        monkeypatch: pytest.MonkeyPatch, compiles: list[str]) -> None:
    """Proving a pattern safe for Python's ``re`` costs up to a millisecond: done for
    constants at load, never for a pattern a call brings."""
    program = compile_expression('args.p.exists(p, "hello".matches(p))', declared=("args",))
    analysed: list[str] = []
    real = safe_re.translate
    monkeypatch.setattr(safe_re, "translate", lambda p: analysed.append(p) or real(p))
    program.evaluate({"args": {"p": _patterns(50)}, METER: Meter(DEFAULT_LIMITS.max_cost)})
    assert len(compiles) == 50 and analysed == []


def test_params_patterns_decide_every_call_within_budget(tmp_path: Path,
                                                         compiles: list[str]) -> None:
    """A policy's own patterns (params) are paid for by the first call only, and a legit
    call stays well inside the budget."""
    ps = load_text(tmp_path, policy(spec="""
        match: {tools: [send]}
        params:
          blocked: ["(?i)password\\\\s*[:=]", "\\\\b(?:\\\\d[ -]?){13,16}\\\\b", "(?i)bearer\\\\s+\\\\S+"]
        rules:
          - name: leak
            when: 'params.blocked.exists(p, args.memo.matches(p))'
            action: deny
    """))
    for _ in range(3):
        assert ps.evaluate("send", {"memo": "rent for November"}).effect is Effect.ALLOW
        assert ps.evaluate("send", {"memo": "my password: hunter2"}).effect is Effect.DENY
    assert len(compiles) == 3


def test_the_engine_scrubber_does_not_spell_an_enormous_secret(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A secret argument is spelled (escaped, percent-encoded, normal forms) to be scrubbed:
    linear in its length, on every call. Past ``MAX_LAYER_CHARS`` the engine's scrubber of
    the call is opaque, as the guard's layer is: messages are blanked whole, never spelled."""
    from guardrails.engine import scrub

    spelled: list[int] = []
    real = scrub.spellings
    monkeypatch.setattr(scrub, "spellings", lambda t: spelled.append(len(t)) or real(t))
    ps = load_text(tmp_path, policy(spec="""
        match: {tools: [send]}
        secrets: {arguments: [token]}
        rules:
          - {name: big, when: 'size(args.token) > 10', action: deny,
             messageExpression: '"token " + args.token + " refused"'}
    """))
    secret = "s3cr3t-" * (MAX_LAYER_CHARS // 7 + 1)
    d = ps.evaluate("send", {"token": secret})
    assert d.effect is Effect.DENY
    assert secret not in d.message and "s3cr3t" not in repr(d.to_dict())
    assert spelled == []
    small = ps.evaluate("send", {"token": "s3cr3t-value"})
    assert small.effect is Effect.DENY and "s3cr3t-value" not in small.message
    assert spelled  # within the bound, the value is spelled and scrubbed as before


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("call", ['"hello".find({})', 'regex.extract("hello", {}).hasValue()',
                                  'regex.replace("hello", {}, "x")', '"hello".matches({})'])
def test_a_constant_pattern_is_compiled_at_load_and_never_charged(backend: Any,
                                                                  call: str) -> None:
    constant = compile_expression(call.format("'l+'"), declared=("args",), backend=backend)
    run_time = compile_expression(call.format("args.p"), declared=("args",), backend=backend)
    spent = []
    for program in (constant, run_time):
        meter = Meter(DEFAULT_LIMITS.max_cost)
        program.evaluate({"args": {"p": "l+"}, METER: meter})
        spent.append(DEFAULT_LIMITS.max_cost - meter.left)
    assert spent[0] < PATTERN_COST <= spent[1] - spent[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_run_time_globs_are_charged_like_patterns_and_constant_ones_are_not(
        backend: Any, compiles: list[str]) -> None:
    """``paths.glob`` compiles the RE2 form of its glob: a glob a call brings is charged for
    it, a constant glob is compiled at load."""
    program = compile_expression('args.g.exists(g, paths.glob("/srv/app/x.py", g))',
                                 declared=("args",), backend=backend)
    with pytest.raises(CostLimitExceeded):
        program.evaluate({"args": {"g": [f"/srv/d{i}/**/*.py" for i in range(5_000)]},
                          METER: Meter(DEFAULT_LIMITS.max_cost)})
    assert 0 < len(compiles) <= MAX_COMPILES
    constant = compile_expression('paths.glob(args.p, "/srv/**/*.py")', declared=("args",),
                                  backend=backend)
    meter = Meter(DEFAULT_LIMITS.max_cost)
    assert constant.evaluate({"args": {"p": "/srv/app/x.py"}, METER: meter}) is True
    assert DEFAULT_LIMITS.max_cost - meter.left < PATTERN_COST


# --- provenance: one search per value and text, one pattern per value --------------------


def _provenance_set(tmp_path: Path) -> Any:
    return load_text(tmp_path, policy(spec="""
        match: {tools: [send]}
        rules:
          - {name: u, when: 'args.to.exists(r, untrusted(r))', action: deny}
    """))


def _inbox(values: list[str], *, trusted: bool = False) -> list[dict[str, Any]]:
    text = " ".join(values)
    return [{"tool": "read_inbox", "args": {}, "effect": "allow", "trusted": trusted,
             "result": text[i:i + 60_000]} for i in range(0, len(text), 60_000)][:50]


def test_thousands_of_values_found_in_results_are_bounded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each value found in a text compiles its pattern (1-2.5 ms with RE2): a call naming
    thousands of values an untrusted result holds ran for 15 s. Now each search, each
    value and each pattern's first use in the call is charged."""
    from guardrails.expr import lib_provenance

    compiled: list[str] = []
    real = lib_provenance.compile_re2
    monkeypatch.setattr(lib_provenance, "compile_re2",
                        lambda p: compiled.append(p) or real(p))
    ps = _provenance_set(tmp_path)
    values = [f"w{i}x{i * 7}" for i in range(6_000)]
    # Found in a trusted result: no value is untrusted, so every one is searched.
    d = ps.evaluate("send", {"to": values}, history=_inbox(values, trusted=True))
    assert d.effect is Effect.DENY
    assert any("cost" in e.message or "budget" in e.message for e in d.errors)
    limit = lib_provenance.SCAN_BUDGET // lib_provenance.COMPILE_SCAN_COST + 1
    assert len(set(compiled)) <= limit


def test_a_provenance_call_decides_alike_cold_and_warm(tmp_path: Path) -> None:
    ps = _provenance_set(tmp_path)
    values = [f"v{i}q{i * 3}" for i in range(40)]
    history = _inbox(values)
    first = ps.evaluate("send", {"to": values}, history=history)
    again = ps.explain("send", {"to": values}, history=history).decision
    assert first.to_dict() | {"id": ""} == again.to_dict() | {"id": ""}


def test_a_few_values_in_results_are_judged_as_before(tmp_path: Path) -> None:
    ps = _provenance_set(tmp_path)
    names = [f"person{i}@example.com" for i in range(10)]
    history = _inbox([*names, "and some ordinary words"])
    assert ps.evaluate("send", {"to": names}, history=history).effect is Effect.DENY
    d = ps.evaluate("send", {"to": ["nobody@else.org"]}, history=history)
    assert d.effect is Effect.ALLOW and not d.errors


@pytest.mark.parametrize("backend", BACKENDS)
def test_edit_distances_of_long_names_are_charged_by_their_table(backend: Any) -> None:
    """``domains.distance`` fills a table of len(a) x len(b) cells (10 ms for two names of
    253 characters), charged per character before: 300 of them in one call took 3 s."""
    from guardrails.expr.lib_ext import DISTANCE_CELL_COST

    a = ".".join(["a" * 62] * 4)
    b = ".".join(["b" * 62] * 4)
    program = compile_expression("args.l.exists(x, domains.distance(x, args.b) < 3)",
                                 declared=("args",), backend=backend)
    with pytest.raises(CostLimitExceeded):
        program.evaluate({"args": {"l": [a] * 300, "b": b}, METER: Meter(DEFAULT_LIMITS.max_cost)})
    meter = Meter(DEFAULT_LIMITS.max_cost)
    assert program.evaluate({"args": {"l": ["example.com"], "b": "exmaple.com"},
                             METER: meter}) is True
    spent = DEFAULT_LIMITS.max_cost - meter.left
    assert DISTANCE_CELL_COST * 11 * 11 <= spent < 10_000


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("function", ["sets.contains", "sets.intersects", "sets.equivalent"])
def test_sets_of_lists_are_charged_by_the_pairs_they_compare(backend: Any,
                                                            function: str) -> None:
    """Lists holding lists or maps cannot be hashed: every pair is compared (two lists of
    4,000 short lists took 13 s). Lists of scalars still cost their length."""
    program = compile_expression(f"{function}(args.a, args.b)", declared=("args",),
                                 backend=backend)
    lists = {"a": [[i] for i in range(4_000)], "b": [[i + 4_000] for i in range(4_000)]}
    with pytest.raises(CostLimitExceeded):
        program.evaluate({"args": lists, METER: Meter(DEFAULT_LIMITS.max_cost)})
    scalars = {"a": list(range(4_000)), "b": list(range(4_000, 8_000))}
    meter = Meter(DEFAULT_LIMITS.max_cost)
    program.evaluate({"args": scalars, METER: meter})
    assert DEFAULT_LIMITS.max_cost - meter.left < 100_000


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("items", ["lists", "strings"])
def test_membership_in_a_list_is_charged_by_what_it_reads(backend: Any, items: str) -> None:
    """``x in list`` reads the list element by element: a filter of 4,000 short lists by
    membership in the same list took 6 s, charged nothing for the reads."""
    program = compile_expression("args.a.filter(x, x in args.a).size() > 0",
                                 declared=("args",), backend=backend)
    data = [[i] for i in range(4_000)] if items == "lists" else [f"s{i}" for i in range(4_000)]
    with pytest.raises(CostLimitExceeded):
        program.evaluate({"args": {"a": data}, METER: Meter(DEFAULT_LIMITS.max_cost)})
    small = Meter(DEFAULT_LIMITS.max_cost)
    assert program.evaluate({"args": {"a": data[:20]}, METER: small}) is True
    assert DEFAULT_LIMITS.max_cost - small.left < 100_000


@pytest.mark.parametrize("backend", BACKENDS)
def test_membership_of_lists_in_a_short_list_is_charged(backend: Any) -> None:
    """A short list searched for a list compares element by element (CEL equality): many
    such searches must be charged, even when each list is short."""
    program = compile_expression("args.a.filter(x, x in args.b).size() > 0",
                                 declared=("args",), backend=backend)
    big = [[i, i] for i in range(9_000)]
    short = [[-i, -i] for i in range(30)]
    meter = Meter(DEFAULT_LIMITS.max_cost)
    with contextlib.suppress(CostLimitExceeded):
        program.evaluate({"args": {"a": big, "b": short}, METER: meter})
    assert DEFAULT_LIMITS.max_cost - meter.left >= min(DEFAULT_LIMITS.max_cost,
                                                       9_000 * 30 * IN_COMPARE_COST)
