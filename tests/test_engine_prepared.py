"""What a load prepares ahead is what a call would have built itself.

``PolicySet`` works out, at load, the candidates of every tool a policy names exactly
(``policyset._prepared``): the policies whose globs match it and the short path's plan.
A call of any other tool (a name only a glob matches, a call with aliases) builds them on
its first call, as every call did before. Hypothesis generates policy sets with exact,
wildcard, character-class and missing globs, names that are regex metacharacters, and
duplicates, and checks that every prepared entry equals the one built on first use, and
that every decision of a prepared set equals the decision of the same set with nothing
prepared, on both backends, hostile calls included.
"""

from __future__ import annotations

import dataclasses
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import guardrails
from guardrails.engine import policyset
from guardrails.engine.evaluate import Candidates
from guardrails.expr.limits import Limits
from tests.test_engine_fast_path import calls, policy_sets, record

NAMES = ["t", "t2", "other", "a.b", "a+b", "x]", "a!b", "T", "t ", "mcp:srv/t", "é"]
"""Tool names: ones policies spell exactly, regex metacharacters, case and space variants."""
GLOBS = [*NAMES, "t*", "*", "?", "a[.]b", "[!t]*", "a?b", "mcp:*/t", "t[0-9]"]


def _load(text: str, backend: str = "compiled",
          limits: Limits | None = None) -> guardrails.PolicySet:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "p.yaml"
        path.write_text(text)
        return guardrails.load(path, backend=backend,  # type: ignore[arg-type]
                               limits=limits or Limits())


def _quoted(glob: str) -> str:
    return "'" + glob.replace("'", "''") + "'"


_TOOLS = re.compile(r"^    tools: \[.*\]$", re.MULTILINE)


@st.composite
def tool_lines(draw: st.DrawFn) -> str:
    """A ``match.tools`` line, or none (a policy for every tool)."""
    globs = draw(st.lists(st.sampled_from(GLOBS), min_size=0, max_size=4))
    if not globs and draw(st.booleans()):
        return ""
    return "    tools: [" + ", ".join(_quoted(g) for g in globs) + "]"


@st.composite
def sets_of_tools(draw: st.DrawFn) -> str:
    """``test_engine_fast_path``'s generated policies, each with its own tool globs."""
    text = draw(policy_sets())
    return _TOOLS.sub(lambda _: draw(tool_lines()), text)


def _unprepared(ps: guardrails.PolicySet) -> guardrails.PolicySet:
    """The same policies with nothing prepared: every tool's candidates on first use."""
    fresh = guardrails.PolicySet(ps.policies, revision=ps.revision, limits=ps.limits)
    fresh._by_tool.clear()
    return fresh


def _built(ps: guardrails.PolicySet, name: str) -> Candidates:
    """A tool's candidates as a call builds them (``PolicySet._candidates``)."""
    return Candidates(tuple(p for p in ps.policies if p.matches_tool(name)))


def _same(a: Candidates, b: Candidates) -> bool:
    """Equal in every field; the redactors (compared by identity) by what they do."""
    texts = ["", "no digits", "call 555 now 1234", "s3cret-value 3141"]
    redacts = (a.redact is None) == (b.redact is None) and (
        a.redact is None or b.redact is None
        or [a.redact(t) for t in texts] == [b.redact(t) for t in texts])
    return redacts and all(getattr(a, f.name) == getattr(b, f.name)
                           for f in dataclasses.fields(Candidates)
                           if f.name not in ("redact", "_shared_scrubber"))


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(text=sets_of_tools())
def test_every_prepared_tool_has_the_candidates_its_first_call_builds(text: str) -> None:
    try:
        ps = _load(text)
    except guardrails.PolicyError:
        assume(False)
        raise
    exact = {g for p in ps.policies for g in p.tools or () if not set(g) & set("*?[")}
    assert set(ps._by_tool) == exact  # every exact name, nothing else
    for name, prepared in ps._by_tool.items():
        assert _same(prepared, _built(ps, name))
        assert prepared.policies == tuple(p for p in ps.policies if p.matches_tool(name))


@pytest.mark.parametrize("backend", ["compiled", "closures"])
@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.filter_too_much])
@given(text=sets_of_tools(), call_list=st.lists(calls(), min_size=1, max_size=4),
       tools=st.lists(st.sampled_from(NAMES), min_size=1, max_size=4),
       max_cost=st.sampled_from([3_000_000, 400, 60]))
def test_a_prepared_set_decides_as_one_with_nothing_prepared(
        backend: str, text: str, call_list: list[dict[str, Any]], tools: list[str],
        max_cost: int) -> None:
    try:
        ps = _load(text, backend, Limits(max_cost=max_cost))
    except guardrails.PolicyError:
        assume(False)
        raise
    lazy = _unprepared(ps)
    for call, tool in zip(call_list, tools * len(call_list), strict=False):
        kw = dict(call)
        del kw["tool"]
        args = kw.pop("args")
        for aliases in ((), ("mcp:srv/t",)):
            assert record(ps.evaluate(tool, args, aliases=aliases, **kw)) == record(
                lazy.evaluate(tool, args, aliases=aliases, **kw))
            assert ps.for_tool(tool, aliases) == lazy.for_tool(tool, aliases)
            assert ps.secret_arguments(tool, aliases) == lazy.secret_arguments(tool, aliases)


def _many(n: int, glob: str = "tool_{i}") -> str:
    return "---\n".join(
        "apiVersion: guardrails/v1\nkind: ToolPolicy\n"
        f"metadata: {{name: p{i}}}\nspec:\n  match: {{tools: [{glob.format(i=i)}]}}\n"
        "  rules:\n    - {name: r, when: 'args.a > 1', action: deny}\n" for i in range(n))


def test_a_load_prepares_at_most_its_bound_of_names() -> None:
    ps = _load(_many(policyset._PREPARED_MAX + 5))
    assert len(ps._by_tool) == policyset._PREPARED_MAX
    last = f"tool_{policyset._PREPARED_MAX + 4}"
    assert last not in ps._by_tool  # worked out on its first call instead
    assert ps.evaluate(last, {"a": 0}).effect.value == "allow"
    assert _same(ps._by_tool[last], _built(ps, last))
    assert ps.evaluate(last, {"a": 2}).effect.value == "deny"


def test_a_load_bounds_the_glob_tests_it_spends_on_preparing() -> None:
    # Every policy has a wildcard: each prepared name costs a test of each of them.
    wild = 300
    text = _many(wild, "'w{i}*'") + "---\n" + _many(400, "'n{i}'").replace(
        "name: p", "name: q")
    ps = _load(text)
    assert len(ps._by_tool) == policyset._PREPARE_TESTS // wild
    for name in ("n0", "n399", "w5x", "w5"):
        assert ps.evaluate(name, {"a": 0}).effect.value == "allow"  # nothing fired: no
        assert _same(ps._by_tool[name], _built(ps, name))  # shared record kept yet


def test_the_tools_a_policy_names_are_ready_before_their_first_call() -> None:
    ps = _load(_many(3) + "---\n" + _many(1, "'tool_*'").replace("name: p0", "name: w"))
    for i in range(3):
        ready = ps._by_tool[f"tool_{i}"]
        assert ready.plan is not None
        assert [p.name for p in ready.policies] == [f"p{i}", "w"]
        assert ps.evaluate(f"tool_{i}", {"a": 2}).policies == (f"p{i}", "w")
        assert ps._by_tool[f"tool_{i}"] is ready  # the call used what the load prepared


def test_a_fused_function_holds_its_constants_in_its_defaults_not_in_cells() -> None:
    """A closure cell per constant was copied into the frame on every call, whichever rules
    ran (``codegen._fused_source``): the fused function has none, and its defaults are
    exactly its rules' constants, each policy of a shape its own (its literals)."""
    text = "---\n".join(
        "apiVersion: guardrails/v1\nkind: ToolPolicy\n"
        f"metadata: {{name: p{i}}}\nspec:\n  match: {{tools: [t]}}\n  rules:\n"
        f"    - {{name: a, when: 'args.a > {i}.5', action: deny}}\n"
        f"    - {{name: b, when: 'args.b == \"v{i}\" || \"r{i}\" in principal.roles', "
        "action: warn}\n" for i in range(3))
    ps = _load(text)
    runs = [p.fused.run for p in ps.policies if p.fused is not None]
    assert len(runs) == 3 and len({run.__code__ for run in runs}) == 1  # one shape
    for i, run in enumerate(runs):
        defaults = run.__defaults__ or ()
        assert run.__closure__ is None and not run.__code__.co_freevars
        assert run.__code__.co_argcount == 3 + len(defaults)
        assert f"{i}.5" in map(repr, defaults) and f"v{i}" in defaults
    for i in range(3):
        def fired(args: dict[str, Any], roles: tuple[str, ...] = ()) -> list[str]:
            decision = ps.evaluate("t", args, principal={"roles": list(roles)})
            return [f"{r.policy}/{r.rule}" for r in decision.rules]
        assert fired({"a": i + 0.6, "b": ""}) == [f"p{j}/a" for j in range(i + 1)]
        assert fired({"a": -1, "b": f"v{i}"}) == [f"p{i}/b"]
        assert fired({"a": -1, "b": ""}, (f"r{i}",)) == [f"p{i}/b"]


# --- params patterns ---------------------------------------------------------------------

PATTERNS = ["^a+b$", "[0-9]{3}", "(?i)rm -rf", "[invalid", "", "x|y", "\\d+", "é.*"]


def _pattern_policy(ps_list: list[str], one: str, mode: str) -> str:
    import json

    return ("apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\nspec:\n"
            f"  match: {{tools: [t]}}\n  failurePolicy: {mode}\n"
            f"  params: {{ps: {json.dumps(ps_list)}, one: {json.dumps(one)}, n: 3}}\n"
            "  rules:\n"
            "    - {name: any, when: 'params.ps.exists(p, args.x.matches(p))', action: deny}\n"
            "    - {name: one, when: 'args.y.matches(params.one)', action: warn}\n"
            "    - {name: fn, when: 'matches(args.y, params[\"one\"])', action: warn}\n"
            "    - {name: shadow, when: 'params.ps.exists(p, [\"z\"].exists(p, "
            "args.x.matches(p)))', action: warn}\n")


def test_a_load_compiles_the_params_texts_its_rules_use_as_patterns() -> None:
    from guardrails.expr import stdlib

    stdlib._TESTERS.clear()
    ps = _load(_pattern_policy(["^a+b$", "[invalid", "x|y"], "[0-9]{3}", "Fail"))
    assert {"^a+b$", "x|y", "[0-9]{3}"} <= set(stdlib._TESTERS)
    assert "[invalid" not in stdlib._TESTERS  # still the call's error
    assert "z" not in stdlib._TESTERS  # a macro variable over a list literal, not params
    decision = ps.evaluate("t", {"x": "q", "y": "123"})
    assert decision.effect.value == "deny"  # "[invalid" fails the rule (Fail)
    assert [r.rule for r in decision.rules] == ["any", "one", "fn"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ps_list=st.lists(st.sampled_from(PATTERNS), max_size=5),
       one=st.sampled_from(PATTERNS), mode=st.sampled_from(["Fail", "Ignore"]),
       x=st.sampled_from(["aab", "123", "RM -RF /", "y", "", "é!"]),
       y=st.sampled_from(["aab", "123", "nope", ""]),
       max_cost=st.sampled_from([3_000_000, 400, 60]))
def test_prepared_patterns_decide_as_patterns_compiled_on_first_use(
        ps_list: list[str], one: str, mode: str, x: str, y: str, max_cost: int) -> None:
    from guardrails.expr import stdlib

    try:
        ps = _load(_pattern_policy(ps_list, one, mode), limits=Limits(max_cost=max_cost))
    except guardrails.PolicyError:
        assume(False)  # an invalid params.one is refused at load (the type checker)
        raise
    prepared = record(ps.evaluate("t", {"x": x, "y": y}))
    stdlib._TESTERS.clear()  # as if nothing were prepared: compiled by the call itself
    assert record(ps.evaluate("t", {"x": x, "y": y})) == prepared
    stdlib._TESTERS.clear()
    assert record(_unprepared(ps).evaluate("t", {"x": x, "y": y})) == prepared


def test_a_load_compiles_the_own_patterns_of_the_library_functions_it_calls() -> None:
    from guardrails.expr import lib_common, lib_net, lib_text

    lib_common._RE2_CACHE.clear()
    ps = _load("apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\nspec:\n"
               "  match: {tools: [t]}\n  rules:\n"
               "    - {name: key, when: 'credentials.found(args.body)', action: deny}\n"
               "    - {name: host, when: 'url(args.u).getHost() == \"x.test\"', action: warn}\n")
    for pattern in (lib_text._DIRECT, lib_text._BEARER, *lib_net._URL_PATTERNS):
        assert pattern in lib_common._RE2_CACHE
    assert lib_text._EMAIL_RE not in lib_common._RE2_CACHE  # emails.* is not called
    call = {"body": "Authorization: Bearer abcdefghijklmnopqrstuvwxyz0123", "u": "http://x.test/"}
    prepared = record(ps.evaluate("t", call))
    lib_common._RE2_CACHE.clear()  # as if nothing were prepared
    assert record(ps.evaluate("t", call)) == prepared
    assert [r.rule for r in ps.evaluate("t", call).rules] == ["key", "host"]
