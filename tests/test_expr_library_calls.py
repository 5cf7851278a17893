"""Generated code calls a library function itself, not its ``guarded`` wrapper, and makes
its errors what the wrapper makes them (``lib_common.library_error``): for every library
function and method, called with values of every kind (wrong types, wrong arity, out of
range, hostile text), the generated-code backend returns the same value or fails with the
same message as the closure backend, which calls the wrapper; and the meter is charged the
same on both.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from guardrails.expr import CelError, ExpressionError, compile_expression
from guardrails.expr.library import FUNCTIONS, METHODS
from guardrails.expr.limits import METER, Meter

VALUES: list[Any] = [
    "abc", "a,b,c", "", "é ü", "10.0.0.1", "192.168.0.0/16", "https://x.example/p?q=1#f",
    "/etc/../passwd", "a@b.example", "[1, 2]", '{"a": 1}', "%s and %d", "x" * 300,
    0, 2, -1, 7, 2**62, 1.5, -0.0, True, False, None, [], [1, 2], ["a", "b"], [[1], [2]],
    {"a": 1}, {"k": ["v"]},
]
NAMES = ("x", "y", "z")


def _call_source(name: str, method: bool, arity: int) -> str:
    args = [f"dyn({n})" for n in NAMES[:arity]]
    if method:
        return f"dyn(r).{name}({', '.join(args)})"
    return f"{name}({', '.join(args)})"


def _run(program: Any, bindings: dict[str, Any]) -> tuple[str, int]:
    meter = Meter(100_000)
    try:
        value = program.evaluate({**bindings, METER: meter})
        outcome = f"value {value!r} {type(value).__name__}"
    except CelError as e:
        outcome = f"error {type(e).__name__}: {e}"
    return outcome, meter.left


def _programs(source: str) -> tuple[Any, Any]:
    declared = ("r", *NAMES)
    try:
        return (compile_expression(source, declared=declared, backend="compiled"),
                compile_expression(source, declared=declared, backend="closures"))
    except ExpressionError:
        assume(False)  # the checker refuses the call at load: nothing runs
        raise


CALLS = [(name, True) for name in sorted(METHODS)] + [
    (name, False) for name in sorted(FUNCTIONS) if "@" not in name]


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.filter_too_much])
@given(call=st.sampled_from(CALLS), arity=st.integers(0, 3),
       values=st.lists(st.sampled_from(VALUES), min_size=4, max_size=4))
def test_generated_library_calls_fail_as_the_wrapper(call: tuple[str, bool], arity: int,
                                                     values: list[Any]) -> None:
    name, method = call
    compiled, closures = _programs(_call_source(name, method, arity))
    bindings = dict(zip(("r", *NAMES), values, strict=True))
    assert _run(compiled, bindings) == _run(closures, bindings)


@pytest.mark.parametrize(("source", "bindings", "message"), [
    ("dyn(r).substring(dyn(x))", {"r": "abc", "x": 5}, "index out of range: 5"),
    ("dyn(r).substring(dyn(x), dyn(y))", {"r": 5, "x": 1, "y": 2},
     "no matching overload for substring(int, int, int)"),
    ("dyn(r).replace(dyn(x), dyn(y))", {"r": ["a"], "x": "a", "y": "b"},
     "no matching overload for replace(list, string, string)"),
    ("dyn(r).lowerAscii()", {"r": 3}, "no matching overload for lowerAscii(int)"),
])
def test_library_errors_keep_their_messages(source: str, bindings: dict[str, Any],
                                            message: str) -> None:
    """The messages themselves, on both backends (the wrapper's, as before)."""
    for backend in ("compiled", "closures"):
        program = compile_expression(source, declared=("r", "x", "y"), backend=backend)
        with pytest.raises(CelError) as caught:
            program.evaluate(bindings)
        assert str(caught.value) == message


def test_generated_code_calls_the_function_itself() -> None:
    """The test above compares something: the generated source does not call the
    wrapper, and a wrapper of the wrapper (which copies its attributes) is called as is."""
    import functools

    from guardrails.expr import lib_strings

    program = compile_expression("dyn(r).substring(1)", declared=("r",), backend="compiled")
    python = program.python_source()  # type: ignore[attr-defined]
    assert "_library_error(" in python
    consts = program._consts  # type: ignore[attr-defined]
    assert lib_strings.substring.cel_guarded[1] in consts  # type: ignore[attr-defined]
    assert lib_strings.substring not in consts

    @functools.wraps(lib_strings.substring)
    def outer(*args: Any) -> Any:
        return lib_strings.substring(*args)

    assert outer.cel_guarded[2] is not outer  # type: ignore[attr-defined]


@settings(max_examples=1500, deadline=None)
@given(text=st.text(alphabet="0123456789.eE+-_ ٣١x", max_size=8))
def test_double_of_text_decides_as_its_pattern(text: str) -> None:
    """``double(string)`` reads plain decimal text without its pattern: exactly the texts
    the pattern accepts get a number, the same number."""
    from guardrails.expr import stdlib

    expected: Any = float(text) if stdlib._FLOAT_RE.fullmatch(text) else "error"
    try:
        got: Any = stdlib.to_double(None, text)  # type: ignore[arg-type]
    except CelError:
        got = "error"
    assert repr(got) == repr(expected)
