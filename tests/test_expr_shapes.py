"""Generated code shared by shape: expressions that differ only in literals get their
source from one template (``codegen._shape``/``_Template``), and that must be exactly what
generating their own source gives.

The property: for a tree A and a tree B made from it by replacing literals with other
values of the same type (hostile ones too: invalid regexes, zero divisors, values equal to
field names or to the code's own constants, -0.0, the integer bounds), whenever the two
shapes are equal the template of A filled with B's literals is B's own source and
constants, and the program built from the template evaluates as B's closures do.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Iterator
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guardrails.expr import CelError, ast, codegen, compile_expression
from guardrails.expr.checker import Checked, check
from guardrails.expr.closures import closure_program
from guardrails.expr.parser import parse
from guardrails.expr.values import INT64_MAX, INT64_MIN, UInt
from tests.test_expr_differential import DECLARED, bindings, exprs, same, wild_exprs

STRINGS = ["", "a", "[", "(?P<", "x", "i1", "s1", "_k0", "_k1", "args", "é", "\\", "'",
           "a" * 300, "matches", "__class__", "\x00"]
INTS = [0, 1, -1, 2, 7, 1000, INT64_MAX, INT64_MIN, 3_000_000, 8, 128]
FLOATS = [0.0, -0.0, 1.0, 0.5, 1e308, -1e-308, 2.0]


def replacement(value: Any) -> st.SearchStrategy[Any]:
    """Another value of the literal's own type."""
    t = type(value)
    if t is str:
        return st.one_of(st.sampled_from(STRINGS), st.text(max_size=5))
    if t is UInt:
        return st.sampled_from([0, 1, 2, 2**64 - 1]).map(UInt)
    if t is int:
        return st.one_of(st.sampled_from(INTS), st.integers(-5, 5))
    if t is float:
        return st.one_of(st.sampled_from(FLOATS), st.floats(-10, 10, allow_nan=False))
    if t is bytes:
        return st.binary(max_size=3)
    return st.just(value)  # true, false, null: part of the shape


def relabel(node: ast.Node, draw: st.DrawFn) -> ast.Node:
    """``node`` with every literal replaced by a drawn value of the same type."""
    if isinstance(node, ast.Literal):
        return dataclasses.replace(node, value=draw(replacement(node.value)))
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(node):
        v = getattr(node, f.name)
        if isinstance(v, ast.Node):
            changes[f.name] = relabel(v, draw)
        elif isinstance(v, tuple) and v and isinstance(v[0], ast.Node):
            changes[f.name] = tuple(relabel(x, draw) for x in v)
        elif isinstance(v, tuple) and v and isinstance(v[0], tuple):
            changes[f.name] = tuple(tuple(relabel(x, draw) for x in pair) for pair in v)
    return dataclasses.replace(node, **changes)


EXTRA = [
    "s1.matches('a+') && s1.matches('[')",
    "s1.matches(s1) || 'x'.matches(s1)",
    "[1, 2, 3].exists_one(x, x == i1)",
    "l1.exists_one(x, x > 1) && l1.all(x, x != 7)",
    "i1 > 1 / 0 || i2 < 4 / 2",
    "(true ? i1 : 2) + (1 < 2 ? 3 : i2)",
    "s1 in ['a', 'b'] && !(s1 in {'k': 1, 'k2': 2})",
    "{'a': i1, 'b': 2}.a + {s1: 1}[s1]",
    "s1 == 'x' && s1 != 'x' && s1 + 'x' == 'xx'",
    "size(s1) == 3 && size('abc') == i1 && 'abc'.startsWith(s1)",
    "double(i1) > 1.5 && 1u < 2u && b'ab' == b'ab'",
    "cel.bind(y, i1 + 1, y * 2 > 8)",
    "l1.map(x, x + 1).filter(x, x > 2) == [3, 4]",
]


def fresh(checked: Checked) -> tuple[str, list[Any]]:
    source, consts, _ = codegen._generate(checked)
    return source, consts


def run(source: str, consts: tuple[Any, ...], env: dict[str, Any]) -> tuple[str, Any]:
    namespace = dict(codegen._GLOBALS)
    exec(compile(source, "<test>", "exec"), namespace)
    try:
        return ("value", namespace["_make"](*consts)(env))
    except CelError:
        return ("error", None)


def closures_outcome(checked: Checked, env: dict[str, Any]) -> tuple[str, Any]:
    try:
        return ("value", closure_program(checked).evaluate(env))
    except CelError:
        return ("error", None)


def same_const(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return math.copysign(1, a) == math.copysign(1, b) and a == b
    if callable(a):
        return True  # functions by name in the shape; regex testers by pattern
    return bool(a == b)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), env=bindings)
def test_a_template_is_exactly_the_source_of_every_tree_of_its_shape(
        data: st.DataObject, env: dict[str, Any]) -> None:
    source = data.draw(st.one_of(wild_exprs(), exprs("bool", 3), st.sampled_from(EXTRA)),
                       label="source")
    tree_a = parse(source)
    tree_b = relabel(tree_a, data.draw)
    a = check(tree_a, source=source, declared=DECLARED)
    b = check(tree_b, source=source, declared=DECLARED)
    shape_a, shape_b = codegen._shape(a), codegen._shape(b)
    assert shape_a is not None and shape_b is not None
    template = codegen.make_template(*codegen._generate(a), shape_a.literals)
    if shape_a.key != shape_b.key:
        return
    own_source, own_consts = fresh(b)
    filled = template.constants(shape_b.literals)
    assert own_source == template.source
    assert len(own_consts) == len(filled)
    assert all(same_const(x, y) for x, y in zip(own_consts, filled, strict=True)), source
    outcome = run(template.source, filled, env)
    reference = closures_outcome(b, env)
    assert outcome[0] == reference[0], (source, tree_b, outcome, reference)
    assert same(outcome[1], reference[1]), (source, tree_b, outcome, reference)


def test_values_code_generation_reads_are_part_of_the_shape() -> None:
    def key(source: str) -> Any:
        shaped = codegen._shape(check(parse(source), source=source, declared=DECLARED))
        assert shaped is not None
        return shaped.key

    assert key("s1 > 'a' && i1 < 2") == key("s1 > 'zz' && i1 < -7")  # passed on only
    assert key("s1.matches('a+')") != key("s1.matches('[')")  # compiled at load
    assert key("s1 == 'a' || b1 == true") != key("s1 == 'a' || b1 == false")
    assert key("i1 > 4 / 2") != key("i1 > 4 / 1")  # folded: by value
    assert key("i1 > 4 / 0") == key("i1 > 5 / 0")  # not folded (an error): passed on
    assert key("i1 > 4 / 0") != key("i1 > 4 / 2")
    assert key("1 > 2 ? i1 : i2") != key("2 > 1 ? i1 : i2")
    assert key("s1 in ['a']") != key("s1 in ['b']")
    assert key("i1 > 1") != key("i1 > 1.0") != key("i1 > 1u")


def test_programs_of_one_shape_keep_their_own_literals() -> None:
    """Through the public compiler: many expressions of one shape, each its own values."""
    programs = [compile_expression(f"s1.startsWith('p{i}') && i1 > {i}", declared=DECLARED)
                for i in range(50)]
    assert len({p.python_source() for p in programs}) == 1  # type: ignore[attr-defined]
    for i, p in enumerate(programs):
        assert p.evaluate({"s1": f"p{i}x", "i1": i + 1}) is True
        assert p.evaluate({"s1": f"p{i}x", "i1": i}) is False
        assert p.evaluate({"s1": f"q{i}", "i1": i + 1}) is False
    # an invalid pattern stays a run-time error, next to a valid one of the same look
    good = compile_expression("s1.matches('a+')", declared=DECLARED)
    bad = compile_expression("s1.matches('(')", declared=DECLARED)
    assert good.evaluate({"s1": "aa"}) is True
    try:
        bad.evaluate({"s1": "aa"})
    except CelError:
        pass
    else:
        raise AssertionError("an invalid pattern must fail")


# ---------------------------------------------------------------------------- type checking

TYPED_EXTRA = [
    "s1.matches('a+') && matches(s1, 'b') && s1.find('c') != ''",
    "timestamp('2024-01-01T00:00:00Z') < now && duration('1h') > duration('1m')",
    "ip('10.0.0.1') == ip(s1) && cidr('10.0.0.0/8').containsIP(ip(s1))",
    "url('https://a.example/x').getHost() == s1",
    "'f' in params && params['f'] > 1 && params.g == 'x'",
    "'at' in history[0] && history[0].at > now",
    "params.limit > '5' || params.limit > 5",
    "params.name + 1 == 'x'",
    "s1 == 'x' ? params.limit : 2",
]


def envs() -> st.SearchStrategy[dict[str, Any]]:
    from guardrails.engine.typecheck import _HISTORY
    from guardrails.expr.types import DYN, INT, STRING, TIMESTAMP, map_of, of_value

    params = st.sampled_from([{}, {"limit": 5, "f": 2, "g": "x"}, {"name": "n", "limit": "5"},
                              {"f": [1], "limit": 1.5}])
    return params.map(lambda p: {"params": of_value(p), "history": _HISTORY, "now": TIMESTAMP,
                                 **{n: DYN for n in DECLARED}, "i1": INT, "s1": STRING,
                                 "principal": map_of(STRING, DYN)})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), env=envs())
def test_trees_of_one_type_shape_check_alike(data: st.DataObject, env: dict[str, Any]) -> None:
    """Equal ``typechecker.shape``, and A checks without a diagnostic: then B has none and
    the same type (what the engine's result cache relies on)."""
    from guardrails.expr import typechecker

    source = data.draw(st.one_of(wild_exprs(), exprs("bool", 3), st.sampled_from(EXTRA),
                                 st.sampled_from(TYPED_EXTRA)), label="source")
    tree_a = parse(source)
    tree_b = relabel(tree_a, data.draw)
    typechecker._READ_POSITIONS.clear()  # worked out on B's tree as often as on A's
    first, second = (tree_a, tree_b) if data.draw(st.booleans()) else (tree_b, tree_a)
    keyed = [(typechecker.shape(first, ast.shape(first)), typechecker.shape(second,
                                                                          ast.shape(second)))]
    keyed.append((typechecker.shape(tree_a), typechecker.shape(tree_b)))
    if first is tree_b:
        keyed[0] = keyed[0][::-1]
    for shape_a, shape_b in keyed:
        assert shape_a is not None and shape_b is not None
        for guards in (True, False):
            t_a, found_a = typechecker.check(tree_a, env, guards=guards)
            t_b, found_b = typechecker.check(tree_b, env, guards=guards)
            if shape_a == shape_b and not found_a:
                assert not found_b, (source, tree_b, found_b)
                assert t_a == t_b


def test_literals_the_type_checker_reads_are_part_of_its_shape() -> None:
    from guardrails.expr import typechecker

    def key(source: str) -> Any:
        return typechecker.shape(parse(source))

    assert key("s1.startsWith('a') && i1 > 2") == key("s1.startsWith('zz') && i1 > 9")
    assert key("s1.matches('a')") != key("s1.matches('(')")
    assert key("timestamp('2024-01-01T00:00:00Z') < now") != key("timestamp('x') < now")
    assert key("params['a'] > 1") != key("params['b'] > 1")
    assert key("'a' in params") != key("'b' in params")
    assert key("i1 > 1") != key("i1 > 1.0")


def test_a_load_still_reports_type_errors_in_expressions_of_a_cached_shape(
        tmp_path: Any) -> None:
    """Many rules of one shape type-check once; a rule of that shape whose own literal is
    wrong (an invalid regex, a bad timestamp) is still reported at its own position."""
    import pytest

    import guardrails

    rules = "\n".join(f"    - {{name: r{i}, when: 'args.s.matches(\"a{i}+\") && "
                      f"timestamp(\"2024-01-0{i % 9 + 1}T00:00:00Z\") < now', action: deny}}"
                      for i in range(20))
    bad = ("    - {name: bad1, when: 'args.s.matches(\"(\") && "
           "timestamp(\"2024-01-01T00:00:00Z\") < now', action: deny}\n"
           "    - {name: bad2, when: 'args.s.matches(\"a+\") && "
           "timestamp(\"yesterday\") < now', action: deny}\n")
    text = ("apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\nspec:\n"
            f"  match: {{tools: [t]}}\n  rules:\n{rules}\n")
    (tmp_path / "p.yaml").write_text(text)
    policies = guardrails.load(tmp_path / "p.yaml")
    assert policies.evaluate("t", {"s": "a1"}).effect == "deny"
    assert policies.evaluate("t", {"s": "b"}).effect == "allow"
    (tmp_path / "p.yaml").write_text(text + bad)
    with pytest.raises(guardrails.PolicyError) as e:
        guardrails.load(tmp_path / "p.yaml")
    messages = [(p.line, p.column, p.message) for p in e.value.errors]
    assert [(line, column) for line, column, _ in messages] == [(27, 42), (28, 61)], messages
    assert "invalid regular expression '('" in messages[0][2]
    assert "invalid timestamp literal 'yesterday'" in messages[1][2]


# ---------------------------------------------------------------------------- whole loads


def _cel_string(s: str) -> str:
    import json

    return json.dumps(s, ensure_ascii=False)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(st.tuples(st.integers(-3, 3), st.floats(-5, 5, allow_nan=False),
                                 st.sampled_from(STRINGS[:-1]),
                                 st.sampled_from(["a+", "^x", ".*", "b$"] * 4 + ["(", "[a-"])),
                       min_size=2, max_size=8),
       calls=st.lists(st.fixed_dictionaries({"n": st.integers(-4, 4),
                                             "x": st.floats(-6, 6, allow_nan=False),
                                             "s": st.sampled_from([*STRINGS[:-1], "ax", "b"])}),
                      min_size=1, max_size=4))
def test_policies_of_one_shape_decide_alike_on_every_backend(
        tmp_path_factory: Any, values: list[tuple[int, float, str, str]],
        calls: list[dict[str, Any]]) -> None:
    """Many policies of one shape, loaded together (their code from one template), decide
    every call as the closure backend does, with variables, repairs and params."""
    import yaml

    import guardrails

    docs = []
    for i, (n, x, s, pattern) in enumerate(values):
        docs.append({
            "apiVersion": "guardrails/v1", "kind": "ToolPolicy", "metadata": {"name": f"p{i}"},
            "spec": {
                "match": {"tools": ["t"]},
                "params": {"limit": n, "tag": s},
                "repairs": [{"name": "clamp", "when": f"args.x > {x!r}",
                             "set": {"x": f"{x!r} + 0.5"}}],
                "variables": [{"name": "big", "expression": f"args.n * {n} > params.limit"}],
                "rules": [
                    {"name": "a", "when": f"variables.big && args.s.startsWith({_cel_string(s)})",
                     "action": "deny"},
                    {"name": "b", "when": f"args.s.matches({_cel_string(pattern)}) || "
                                          f"args.x < {x!r} - 1.0", "action": "warn"},
                    {"name": "c", "when": f"args.s == params.tag && {n} < args.n",
                     "action": "require_approval"},
                ]}})
    path = tmp_path_factory.mktemp("shapes") / "p.yaml"
    path.write_text(yaml.safe_dump_all(docs, allow_unicode=True))
    invalid = [i for i, (_, _, _, pattern) in enumerate(values) if pattern in ("(", "[a-")]
    if invalid:  # each invalid pattern reported, once, whatever shape it shares
        import pytest

        with pytest.raises(guardrails.PolicyError) as e:
            guardrails.load(path)
        bad = [p for p in e.value.errors if "invalid regular expression" in p.message]
        assert len(bad) == len(e.value.errors) == len(invalid), e.value.errors
        return
    sets = {b: guardrails.load(path, backend=b) for b in ("compiled", "closures")}

    def summary(d: guardrails.Decision) -> Any:
        out = d.to_dict()
        return (out["effect"], [(r["policy"], r["rule"]) for r in out["rules"]],
                out.get("arguments"), [(e["policy"], e["element"]) for e in out["errors"]])

    for call in calls:
        got = {b: summary(ps.evaluate("t", dict(call))) for b, ps in sets.items()}
        assert got["compiled"] == got["closures"], (call, got)


# ---------------------------------------------------------------------------- the front end's cache


@contextlib.contextmanager
def empty_caches() -> Iterator[None]:
    """The shape caches of the front end and of code generation, empty for a while."""
    from guardrails.expr import compiler

    saved = compiler._VARIANTS, codegen._TEMPLATES
    compiler._VARIANTS, codegen._TEMPLATES = {}, {}
    try:
        yield
    finally:
        compiler._VARIANTS, codegen._TEMPLATES = saved


def cells(program: Any) -> list[Any]:
    codegen.generate_pending()
    return [c.cell_contents for c in program.evaluate.__closure__ or ()]


def program_outcome(program: Any, env: dict[str, Any]) -> tuple[str, Any]:
    try:
        return ("value", program.evaluate(env))
    except CelError:
        return ("error", None)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), env=bindings)
def test_a_tree_built_from_the_cache_is_the_tree_built_alone(
        data: st.DataObject, env: dict[str, Any]) -> None:
    """A tree whose program comes from another tree's variant (not checked itself) gets
    the program checking and generating it alone gives: the same code, the same
    constants, the same results; and it is never taken where checking it alone fails."""
    from guardrails.expr import compiler
    from guardrails.expr.limits import DEFAULT_LIMITS

    source = data.draw(st.one_of(wild_exprs(), exprs("bool", 3), st.sampled_from(EXTRA)),
                       label="source")
    tree_a = parse(source)
    tree_b = relabel(tree_a, data.draw)
    names = frozenset(DECLARED)
    with empty_caches():
        compiler._generated(tree_a, ast.shape(tree_a), source, names, DEFAULT_LIMITS, "")
        shaped = ast.shape(tree_b)
        assert shaped is not None
        variants = compiler._VARIANTS.get((shaped[0], names, DEFAULT_LIMITS, ""), [])
        hit = any(v.matches(shaped[1]) for v in variants)
        cached = compiler._generated(tree_b, shaped, source, names, DEFAULT_LIMITS, "")
    with empty_caches():
        alone = compiler._generated(tree_b, ast.shape(tree_b), source, names, DEFAULT_LIMITS,
                                    "")
    assert cached.python_source() == alone.python_source(), (source, tree_b, hit)  # type: ignore[attr-defined]
    assert all(same_const(x, y) for x, y in zip(cells(cached), cells(alone), strict=True))
    reference = closures_outcome(check(tree_b, source=source, declared=DECLARED), env)
    for program in (cached, alone):
        got = program_outcome(program, env)
        assert got[0] == reference[0] and same(got[1], reference[1]), (source, tree_b, got)


def test_folded_and_inspected_literals_keep_trees_apart() -> None:
    """Trees of one shape whose folding or code differs by a literal's value never share
    a variant: each gets its own, correct, program."""
    pairs = [
        ("i1 > 4 / 2", {"i1": 3}, True, "i1 > 4 / 0", "error"),   # folded vs an error
        ("(1 < 2 ? i1 : 0) == 5", {"i1": 5}, True, "(2 < 1 ? i1 : 0) == 5", False),
        ("s1.matches('a+')", {"s1": "aa"}, True, "s1.matches('(')", "error"),
        ("'abc'.startsWith('a') && b1", {"b1": True}, True,
         "'abc'.startsWith('z') && b1", False),
        ("[1, 2].exists_one(x, x == i1)", {"i1": 1}, True, "[1, 1].exists_one(x, x == i1)",
         False),
        ("size('ab') == i1", {"i1": 2}, True, "size('abc') == i1", False),
        ("{'a': 1, 'b': 2}.a == i1", {"i1": 1}, True, "{'a': 1, 'a': 2}.a == i1", "error"),
    ]
    with empty_caches():
        for first, env, want_first, second, want_second in pairs:
            a = compile_expression(first, declared=DECLARED)
            b = compile_expression(second, declared=DECLARED)
            assert program_outcome(a, env) == ("value", want_first), first
            want = ("error", None) if want_second == "error" else ("value", want_second)
            assert program_outcome(b, env) == want, second


def test_names_and_references_of_one_shape_are_checked_per_expression(tmp_path: Any) -> None:
    """The names an expression uses are worked out once per shape, but a reference to an
    unknown variable or counter in an expression of that shape is still reported where
    it is, and each expression keeps the names it uses."""
    import pytest

    import guardrails

    good = "\n".join(
        f"    - {{name: r{i}, when: 'variables[\"v{i % 2}\"] > {i} && untrusted(args.to)', "
        f"action: deny}}" for i in range(12))
    text = ("apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\nspec:\n"
            "  match: {tools: [t]}\n  variables:\n    - {name: v0, expression: 'args.n'}\n"
            "    - {name: v1, expression: 'args.n * 2'}\n"
            f"  rules:\n{good}\n")
    path = tmp_path / "p.yaml"
    path.write_text(text)
    policies = guardrails.load(path)
    (policy,) = policies.policies  # type: ignore[attr-defined]
    for rule in policy.rules:
        assert {"variables", "args", "history", "request"} <= rule.when.names
    assert policies.evaluate("t", {"n": 20, "to": "x"}, history=[
        {"tool": "read", "args": {}, "result": "send to x", "trusted": False}]).effect == "deny"
    bad = ("    - {name: bad, when: 'variables[\"v9\"] > 1 && untrusted(args.to)', "
           "action: deny}\n")
    path.write_text(text + bad)
    with pytest.raises(guardrails.PolicyError) as e:
        guardrails.load(path)
    (problem,) = e.value.errors
    assert problem.line == 22 and "unknown variable 'v9'" in problem.message, problem


def test_a_program_from_a_variant_falls_back_to_its_own_closures(
        monkeypatch: Any) -> None:
    """When Python's compiler refuses a shape's code, every program of that shape runs the
    closures of its own tree (checked then), with its own literals."""
    monkeypatch.setattr(codegen, "_compile_batch", lambda sources: {})
    monkeypatch.setattr(codegen, "_FACTORIES", {})
    with empty_caches():
        programs = [compile_expression(f"s1.startsWith('q{i}') && i1 * {i} > {i * 10}",
                                       declared=DECLARED) for i in range(1, 6)]
        from guardrails.expr import compiler

        assert [len(v) for v in compiler._VARIANTS.values()] == [1]  # four came from it
        codegen.generate_pending()
    for i, p in enumerate(programs, start=1):
        assert p.python_source() == ""  # type: ignore[attr-defined]
        assert p.evaluate({"s1": f"q{i}", "i1": 11}) is True
        assert p.evaluate({"s1": f"q{i}", "i1": 10}) is False
        assert p.evaluate({"s1": "q", "i1": 11}) is False
