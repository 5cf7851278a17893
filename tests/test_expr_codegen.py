"""The generated-code backend: hostile expression text never reaches the generated source,
and the inlined fast paths keep the semantics of the closure backend."""

from __future__ import annotations

import io
import keyword
import tokenize
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guardrails.expr import CelError, CostLimitExceeded, Limits, compile_expression
from guardrails.expr.codegen import GeneratedProgram

# Names the generator may write besides its own "_"-prefixed ones.
_ALLOWED_NAMES = {"b", "type", "len", "True", "False", "None", "KeyError", "RecursionError",
                  "Exception", "startswith", "endswith", "search", "error", "append", "get",
                  "left", "defs"}  # fmt: skip


def generated(source: str, declared: tuple[str, ...] = ("x", "args")) -> GeneratedProgram:
    program = compile_expression(source, declared=declared)
    assert isinstance(program, GeneratedProgram)
    return program


def assert_source_is_ours(text: str) -> None:
    """No literal, no foreign identifier: expression text cannot appear in the code."""
    assert text, "expected generated code, not the closure fallback"
    assert text.isascii()
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.STRING:
            raise AssertionError(f"string literal in generated code: {tok.string}")
        if tok.type == tokenize.NAME:
            name = tok.string
            assert keyword.iskeyword(name) or name in _ALLOWED_NAMES or name.startswith("_"), name
            assert name.startswith("_") is False or name[1:2].isalpha() or name == "_", name
        if tok.type == tokenize.NUMBER:
            assert tok.string in {"0", "1"}, tok.string


def cel_string(s: str) -> str:
    """A CEL double-quoted literal for ``s``: quotes, backslashes and newlines escaped."""
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


hostile = st.one_of(
    st.text(max_size=30),
    st.sampled_from(['"""', "'''", "\\", "\x00", "\n", "'); import os; ('", '"+__import__("os")+"',
                     "\u2028", "é\u0301", "𝔘", "{b}", "%s", "\\x00", "_k0", "b[_k0]"]),
)  # fmt: skip


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(s=hostile, key=hostile)
def test_hostile_strings_are_values_not_code(s: str, key: str) -> None:
    lit, klit = cel_string(s), cel_string(key)
    cases: list[tuple[str, Any]] = [
        (lit, s),
        (f"x == {lit}", True),
        (f"{lit} + x", s + s),
        (f"size({lit}) == {len(s)}", True),
        (f"{{{klit}: {lit}}}[{klit}]", s),
        (f"x.contains({lit}) && x.startsWith({lit}) && x.endsWith({lit})", True),
        (f"[{lit}, {klit}].exists(v, v == x)", True),
        (f"x in [{lit}, {klit}]", True),
        (f"has(args.f) ? args[{klit}] : {lit}", s),
    ]
    bindings = {"x": s, "args": {key: s}}
    for source, want in cases:
        program = generated(source)
        assert program.evaluate(bindings) == want, source
        assert_source_is_ours(program.python_source())
        closures = compile_expression(source, declared=("x", "args"), backend="closures")
        assert closures.evaluate(bindings) == want, source


def test_field_names_and_variables_go_through_constants() -> None:
    program = generated("args.import_os == 1 || has(args.__class__)", declared=("args",))
    assert program.evaluate({"args": {"import_os": 1}}) is True
    assert program.evaluate({"args": {"__class__": 2}}) is True
    text = program.python_source()
    assert_source_is_ours(text)
    assert "import_os" not in text and "__class__" not in text


def test_expressions_differing_in_literals_share_code() -> None:
    a = generated('x == "a" && args.amount > 1.0')
    b = generated('x == "zz" && args.amount > 2.5')
    assert a.python_source() == b.python_source()
    assert a.evaluate({"x": "a", "args": {"amount": 2.0}}) is True
    assert b.evaluate({"x": "a", "args": {"amount": 2.0}}) is False


# ---------------------------------------------------------------------------- semantics


@pytest.mark.parametrize(
    ("source", "bindings", "want"),
    [
        ("false && x.y", {}, False),  # x unbound: error absorbed
        ("x.y || true", {}, True),
        ("1 / 0 == 1 || true || 2 > 1", {}, True),
        ("true && 1 / 0 == 1 && false", {}, False),
        ("1 == 1.0 && 1u < 2 && 1500 > 1000.0", {}, True),
        ("true == 1", {}, False),
        ("x > 1.5", {"x": 2}, True),
        ("x == 'a'", {"x": 1}, False),
        ("[x, 2] == [1.0, 2u]", {"x": 1}, True),
        ("x.a.b", {"x": {"a": {"b": [1]}}}, [1]),
        ("has(x.a) && !has(x.b)", {"x": {"a": 1}}, True),
        ("x in {'k': 1} && !(x in ['a'])", {"x": "k"}, True),
        ("1u in {1: 'a'} && 1.0 in {1: 'a'}", {}, True),
        ("x.exists(v, v > 2) && x.all(v, v > 0) && x.exists_one(v, v == 1)", {"x": [1, 3]}, True),
        ("x.map(v, v * 2).filter(v, v > 2)", {"x": [1, 3]}, [6]),
        ("x.all(v, v / 0 > 1 || v > 0)", {"x": [1]}, True),
        ("x.exists(v, 1 / v > 0)", {"x": [0, 1]}, True),  # the error is absorbed by a true
        ("x.all(v, 1 / v > 0)", {"x": [0, -1]}, False),
        ("cel.bind(y, x + 1, y * y)", {"x": 2}, 9),
        ("x ? 'a' : 1 / 0", {"x": True}, "a"),
        ("x.size() + size('é') + size(b'ab')", {"x": "ab"}, 5),
        ("x.matches('^a+$') && 'ab'.matches(x)", {"x": "a"}, True),
        ("x + 1 - 2 * 3", {"x": 10}, 5),
        ("x + 0.5 - 0.25 * 2.0", {"x": 1.0}, 1.0),
        ("x + [3] + y", {"x": [1], "y": (2,)}, [1, 3, 2]),
        ("x[1] + {'a': 2}['a']", {"x": [1, 5]}, 7),
        ("[x, y]", {"x": 1, "y": "s"}, [1, "s"]),
        ("{x: y}", {"x": "k", "y": 2}, {"k": 2}),
        ("[1, 2, 3].exists(i, [4, 5].exists(j, i + j == 7))", {}, True),
        ("x.lowerAscii().contains('ab')", {"x": "xAB"}, True),
    ],
)
def test_agrees_with_closures(source: str, bindings: dict[str, Any], want: Any) -> None:
    declared = ("x", "y")
    program = compile_expression(source, declared=declared)
    closures = compile_expression(source, declared=declared, backend="closures")
    assert program.evaluate(bindings) == want == closures.evaluate(bindings)
    assert isinstance(program, GeneratedProgram) and program.python_source()


@pytest.mark.parametrize(
    "source",
    [
        "42 || false",
        "true && 1",
        "x.y",
        "1 / 0 == 1 || false",
        "x < 'a'",
        "[1] < [2]",
        "x.all(v, v)",
        "x.exists_one(v, v / 0 == 1)",
        "x.filter(v, 1)",
        "9223372036854775807 + x",
        "-9223372036854775807 - x - x",
        "x * 9223372036854775807 * 2",
        "1 ? 2 : 3",
        "!x",
        "x[5]",
        "{'a': 1}.b",
        "size(x) == 1 && size(1) == 1",
        "'a'.matches('(')",
    ],
)
def test_errors_agree_with_closures(source: str) -> None:
    bindings = (
        {"x": [1, 2]}
        if "all" in source or "exists" in source or "filter" in source or "[5]" in source
        else {"x": 1}
    )
    for backend in ("compiled", "closures"):
        program = compile_expression(source, declared=("x",), backend=backend)
        with pytest.raises(CelError):
            program.evaluate(bindings)


class LazyVars(Mapping[str, Any]):
    """A Mapping like the engine's ``variables``: values computed on first use."""

    def __init__(self) -> None:
        self.calls = 0

    def __getitem__(self, name: str) -> Any:
        self.calls += 1
        if name == "boom":
            raise CelError("variable failed")
        if name == "amount":
            return 1500.0
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return iter(["amount", "boom"])

    def __len__(self) -> int:
        return 2


def test_lazy_mapping_bindings() -> None:
    program = generated("variables.amount > 1000.0 && has(variables.amount)", ("variables",))
    lazy = LazyVars()
    assert program.evaluate({"variables": lazy}) is True
    assert lazy.calls >= 1
    absorbed = generated("variables.boom > 1 || variables.amount == 1500.0", ("variables",))
    assert absorbed.evaluate({"variables": LazyVars()}) is True
    with pytest.raises(CelError, match="variable failed"):
        generated("variables.boom", ("variables",)).evaluate({"variables": LazyVars()})
    with pytest.raises(CelError, match="no such key"):
        generated("variables.other", ("variables",)).evaluate({"variables": LazyVars()})


def test_cost_limit_is_never_absorbed() -> None:
    limits = Limits(max_cost=15)
    for source in [
        "x.all(a, x.all(b, true)) || true",
        "true || x.exists(a, x.exists(b, false))",  # never evaluated: no cost
        "x.map(a, a).size() > 0 || true",
        "x.exists(a, x.exists(b, 1 / 0 == 1)) || true",
    ]:
        program = compile_expression(source, declared=("x",), limits=limits)
        closures = compile_expression(source, declared=("x",), limits=limits, backend="closures")
        bindings = {"x": list(range(20))}
        outcomes = []
        for p in (program, closures):
            try:
                outcomes.append(p.evaluate(bindings))
            except CostLimitExceeded:
                outcomes.append("cost")
        assert outcomes[0] == outcomes[1], source
        if source.startswith("true ||"):
            assert outcomes[0] is True
        else:
            assert outcomes[0] == "cost", source


def test_string_building_is_charged() -> None:
    limits = Limits(max_cost=100)
    program = compile_expression("x + x + x", declared=("x",), limits=limits)
    assert program.evaluate({"x": "a" * 10}) == "a" * 30
    with pytest.raises(CostLimitExceeded):
        program.evaluate({"x": "a" * 40})
    contains = compile_expression(
        "x.contains('z') || x.contains('y')", declared=("x",), limits=limits
    )
    with pytest.raises(CostLimitExceeded):
        contains.evaluate({"x": "a" * 60})


def test_folded_list_result_is_fresh() -> None:
    program = generated("[1, [2]]", ())
    first = program.evaluate({})
    first[1].append(3)
    assert program.evaluate({}) == [1, [2]]


def test_deep_nesting_falls_back_to_closures() -> None:
    source = " && ".join(f"(x > {i} || x < -{i})" for i in range(3))
    for _ in range(6):
        bigger = f"({source}) || ({source.replace('x', 'y')}) && ({source} ? x.size() > 0 : false)"
        if len(bigger) > 9000:
            break
        source = bigger
    nested = "[" * 30 + "x" + "]" * 30
    fallbacks = 0
    for text in (source, f"size({nested}) == 1", "x.all(a, x.all(b, x.all(c, a + b + c > 0)))"):
        program = compile_expression(
            text, declared=("x", "y"), limits=Limits(max_nesting_depth=200)
        )
        closures = compile_expression(
            text, declared=("x", "y"), backend="closures", limits=Limits(max_nesting_depth=200)
        )
        bindings = {"x": [1], "y": 2}
        try:
            want: Any = closures.evaluate(bindings)
        except CelError:
            want = "error"
        try:
            got: Any = program.evaluate(bindings)
        except CelError:
            got = "error"
        assert got == want
        fallbacks += isinstance(program, GeneratedProgram) and program.python_source() == ""
    assert fallbacks == 1


def test_unexpected_python_errors_fail_closed() -> None:
    class Weird(Mapping[str, Any]):
        def __getitem__(self, k: str) -> Any:
            raise ZeroDivisionError("boom")

        def __iter__(self) -> Iterator[str]:
            return iter(())

        def __len__(self) -> int:
            return 0

    with pytest.raises(CelError, match="evaluation failed"):
        generated("x.a == 1", ("x",)).evaluate({"x": Weird()})


# --------------------------------------------------------------------------- generated at load


def _unique_policies(tmp_path: Any, n: int) -> Any:
    """Policies whose rules all have different shapes (a shape is the code without its
    literals: each rule nests ``+`` to a depth of its own)."""
    rules = "\n".join(
        f"    - {{name: r{i}, when: 'args.f{i} {'+ 1 ' * i}> 5 || size(args) > {i}',"
        " action: deny}" for i in range(n)
    )
    path = tmp_path / "unique.yaml"
    path.write_text(
        "apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: unique}\n"
        f"spec:\n  match: {{tools: [t]}}\n  rules:\n{rules}\n",
        encoding="utf-8",
    )
    return path


def test_load_generates_every_program_in_one_compile(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import builtins

    import guardrails
    from guardrails.expr import codegen

    calls: list[str] = []
    real = builtins.compile

    def counting(source: Any, filename: Any, *args: Any, **kwargs: Any) -> Any:
        if filename == "<cel>":
            calls.append(source)
        return real(source, filename, *args, **kwargs)

    monkeypatch.setattr(builtins, "compile", counting)
    monkeypatch.setattr(codegen, "_FACTORIES", {})  # no code compiled before
    ps = guardrails.load(_unique_policies(tmp_path, 30))
    programs = [r.when.program for p in ps.policies for r in p.rules]
    assert len(programs) == 30
    assert len(calls) == 1  # one batch for the whole load
    # The shapes are all different: 30 rule functions, and the policy's rules fused in one
    # more (``codegen.fused_rules``), in the same batch.
    assert calls[0].count("def _make") == 31
    assert calls[0].count("    def _p(b, _m, _s") == 1  # its constants are its defaults
    assert all(p.fused is not None and p.fused.run is not None for p in ps.policies)
    assert not codegen._PENDING
    for program in programs:
        assert isinstance(program, GeneratedProgram)
        assert program._pending is None and program._python  # installed, generated code
    # Nothing is left for the first decision to compile.
    decision = ps.evaluate("t", {f"f{i}": 0 for i in range(3)})
    assert len(calls) == 1
    assert decision.effect.value == "deny"  # errors on missing arguments fire (fail closed)


def test_a_program_used_before_its_batch_compiles_it() -> None:
    import uuid

    from guardrails.expr import codegen

    name = "v_" + uuid.uuid4().hex[:8]
    program = generated(f"{name} + 1 > 2", declared=(name,))
    assert program._pending is not None and program in codegen._PENDING
    assert program.evaluate({name: 5}) is True
    assert program._pending is None and program not in codegen._PENDING
    assert program.evaluate({name: 0}) is False


def test_programs_evaluated_from_threads_during_their_batch() -> None:
    import threading
    import uuid

    names = ["w_" + uuid.uuid4().hex[:8] for _ in range(40)]
    programs = [generated(f"{n} * 2 == 4 && {n} > 0", declared=(n,)) for n in names]
    results: list[list[bool]] = [[], []]

    def work(slot: int) -> None:
        for n, p in zip(names, programs, strict=True):
            results[slot].append(p.evaluate({n: 2}))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [[True] * 40, [True] * 40]


def test_shared_constants_are_one_object() -> None:
    """Equal scalar constants of different programs are one (interned) object."""
    a = generated("args.amount_shared > 10 && args.kind_shared == 'x'")
    b = generated("args.amount_shared < 99 || args.kind_shared == 'x'")
    a.evaluate({"args": {"amount_shared": 1, "kind_shared": "x"}})
    b.evaluate({"args": {"amount_shared": 1, "kind_shared": "x"}})
    assert a._python and b._python

    def constants(p: GeneratedProgram) -> list[Any]:
        cells = p.evaluate.__closure__ or ()  # type: ignore[attr-defined]
        return [c.cell_contents for c in cells]

    shared = [c for c in constants(a) if c == "amount_shared"]
    other = [c for c in constants(b) if c == "amount_shared"]
    assert shared and other and shared[0] is other[0]


def test_pending_programs_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Programs built outside a load and never evaluated do not pile up: past the bound
    the batch is compiled."""
    import uuid

    from guardrails.expr import codegen

    codegen.generate_pending()
    monkeypatch.setattr(codegen, "_PENDING_MAX", 3)
    monkeypatch.setattr(codegen, "_FACTORIES", {})  # no shape compiled before
    names = ["p_" + uuid.uuid4().hex[:8] for _ in range(3)]
    programs = [generated(f"{n} + {i} * 3 > {'1 + ' * i}0", declared=(n,))
                for i, n in enumerate(names)]
    assert not codegen._PENDING
    assert all(p._pending is None and p._python for p in programs)
    assert programs[2].evaluate({names[2]: 5}) is True


def test_select_on_engine_mappings_and_the_type_cache() -> None:
    """Field selection on non-dict mappings (the engine's ``params`` proxy, lazy
    ``variables``) takes a remembered-type fast path with the same results."""
    from types import MappingProxyType

    from guardrails.expr import stdlib

    class Lazy(Mapping[str, Any]):
        def __getitem__(self, k: str) -> Any:
            if k == "boom":
                raise CelError("variable boom failed")
            if k != "a":
                raise KeyError(k)
            return 1

        def __iter__(self) -> Iterator[str]:
            return iter(["a"])

        def __len__(self) -> int:
            return 1

    for value in (MappingProxyType({"a": 1}), Lazy(), {"a": 1}):
        for _ in range(2):  # the first check fills the cache, the second uses it
            assert stdlib.select(value, "a") == 1
            assert stdlib.has_field(value, "a") is True
            with pytest.raises(CelError, match="no such key"):
                stdlib.select(value, "zz")
    with pytest.raises(CelError, match="boom failed"):
        stdlib.select(Lazy(), "boom")
    for not_a_map in ([1], "s", 3, None):
        with pytest.raises(CelError):
            stdlib.select(not_a_map, "a")
    assert len(stdlib._MAPPING_TYPES) <= 64 and list not in stdlib._MAPPING_TYPES
    p = compile_expression("params.limit > 3 && variables.v.size() == 1",
                           declared=("params", "variables"))
    assert p.evaluate({"params": MappingProxyType({"limit": 4}), "variables": {"v": [1]}})


_ODD_VALUES: list[Any] = [1, -0.0, 2.5, 2**62, True, False, None, "1.5", "x", "1e3", b"1",
                          [1], {"a": 1}, (1,), float("inf")]


@pytest.mark.parametrize("source", ["double(x)", "type(x)", "type(x) == string",
                                    "type(x) == type(1)", "double(x) > 1.0"])
@pytest.mark.parametrize("value", _ODD_VALUES, ids=repr)
def test_inlined_double_and_type_agree_with_the_closures(source: str, value: Any) -> None:
    fast = generated(source, declared=("x",))
    assert "_TYPE_OF" in fast.python_source() or "_float(" in fast.python_source()
    slow = compile_expression(source, declared=("x",), backend="closures")

    def run(program: Any) -> Any:
        try:
            return ("value", program.evaluate({"x": value}))
        except CelError as e:
            return ("error", e.message)

    assert run(fast) == run(slow)
