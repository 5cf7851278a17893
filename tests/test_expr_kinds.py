"""Generated code specialises single operations on what it knows statically (rules17):
the exact Python type a constant or an operation's result has (a comparison is a bool,
``size`` an int, ``double()`` a double), library functions' common cases in line
(``lib_common.inline``), a constant list of texts or ints as a set, ``type(x) == T``
without ``CelType.__eq__``. Each must decide exactly what the general code decides:
hypothesis compares the generated-code backend with the closure backend (the reference,
which specialises none of it) on expressions made of these operations and hostile
values (str subclasses, long and non-ASCII texts, bools for ints, NaN, big ints, uints,
nested maps, errors), value, type, error text and the meter's charge alike; and every
declared inline form with its function.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guardrails.expr import CelError, compile_expression, lib_ext, lib_net, lib_strings, lib_text
from guardrails.expr.codegen import IN_FREE
from guardrails.expr.lib_common import InlineForm
from guardrails.expr.limits import METER, Meter
from guardrails.expr.stdlib import membership_cost
from guardrails.expr.values import UInt


class Text(str):
    """A str subclass: never of the exact type the specialised code tests for."""


HOSTILE: list[Any] = [
    "", "a", "ab", "abc", "Ab,c", "KP12", "GB12ABCD", "é", "ÉCOLE", "x" * 70, "y" * 5000,
    ",,", "a,b", "\ud800", "1500.00", "1,500.00", "12", ".5", "1.", ".", "٣", "1e5", "00",
    "1.2.3", "-1.5", " 1", Text("12"), Text("ab"), Text("KP"), 0, 1, 2, 3, -1, 5, 2**53 + 1, 2**63 - 1,
    True, False, 0.0, -0.0, 1.0, 2.5, float("nan"), float("inf"), UInt(2), None, b"ab",
    [], ["a"], ["ab", "KP"], [1, 2], [1, 2.0], [True], {"a": 1}, {"a": {"b": ["c"]}},
]

SOURCES = [
    "dyn(x).substring(0, 2) in ['KP', 'IR', 'SY']",
    "dyn(x).substring(dyn(y), dyn(z))",
    "dyn(x).substring(dyn(y))",
    "dyn(x).substring(1) == 'b'",
    "dyn(x).lowerAscii().contains('ab')",
    "dyn(x).upperAscii() == 'AB'",
    "dyn(x).lowerAscii().contains(dyn(y))",
    "dyn(x).replace(',', '')",
    "dyn(x).replace(dyn(y), dyn(z))",
    "double(dyn(x).replace(',', '')) > 1.0",
    "double(dyn(x))",
    "double(dyn(x).substring(1))",
    "size(dyn(x)) > 3",
    "size(dyn(x).lowerAscii()) == 2",
    "size(dyn(x)) + size(dyn(y)) > 2",
    "type(dyn(x)) == string",
    "type(dyn(x)) != int",
    "int == type(dyn(x))",
    "type(dyn(x)) == type(dyn(y))",
    "type(dyn(x)) == int && dyn(x) > 5000",
    "dyn(x) in [1, 2, 3]",
    "size(dyn(x)) in [1, 2, 3]",
    "dyn(x) in ['a', 'ab', 'KP']",
    "dyn(x) in dyn(y)",
    "'ab' in dyn(y)",
    "!(dyn(x) in dyn(y))",
    "dyn(x).substring(0, 1) in dyn(y)",
    "double(dyn(x)) > double(dyn(y))",
    "double(size(dyn(x))) > dyn(y)",
    "dyn(x) > double(dyn(y))",
    "dyn(x) == double(dyn(y))",
    "dyn(x) <= double(size(dyn(y)))",
    "size(dyn(x)) == dyn(y)",
    "size(dyn(x)) < size(dyn(y))",
    "double(dyn(x)) <= 0.0",
    "!(dyn(x) in dyn(y)) && size(dyn(z)) > 1",
    "dyn(x).contains('a') || dyn(y) == 'a'",
    "dyn(x).contains('http://') || dyn(x).contains('https://')",
    "dyn(x).startsWith('a') && !dyn(y).endsWith('b')",
    "'abc'.startsWith(dyn(x))",
    "dyn(x).matches('^[a-z]+$')",
    "!dyn(x).matches('^[A-Z]{2}[0-9]{2}[A-Z0-9]{4,30}$')",
    "dyn(x).lowerAscii().matches(dyn(y))",
    "has(dyn(x).a) && size(dyn(x).a) > 0",
    "!has(dyn(x).a) || dyn(y) == 1",
    "[1, 2].exists(e, e == dyn(x))",
    "dyn(l).filter(e, e == dyn(x)).size() > 0",
    "dyn(l).exists(e, e.contains('a') && size(e) > 1)",
    "dyn(l).all(e, type(e) == string)",
    "dyn(l).map(e, size(e)).exists(n, n > 1)",
    "dyn(l).exists_one(e, e == 'a')",
    "dyn(l).exists_one(e, dyn(e))",
    "dyn(l).filter(e, dyn(e)).size() == 1",
    "dyn(l).all(e, dyn(e) || e == 'a')",
    "dyn(l).exists(e, dyn(e) && e == 'a')",
    "dyn(x).all(k, k == 'a')",
    "dyn(x) == true || dyn(y) != false",
    "(dyn(x) == 1) == (dyn(y) == 1)",
    "dyn(x) < true",
]
NAMES = ("x", "y", "z", "l")
MEMBERSHIP = {
    "dyn(x) in [1, 2, 3]": lambda b: (b["x"], [1, 2, 3]),
    "dyn(x) in dyn(y)": lambda b: (b["x"], b["y"]),
    "'ab' in dyn(y)": lambda b: ("ab", b["y"]),
    "!(dyn(x) in dyn(y))": lambda b: (b["x"], b["y"]),
    "dyn(x).substring(0, 1) in dyn(y)": lambda b: (
        b["x"][:1] if type(b["x"]) is str and b["x"] else None, b["y"]),
    "!(dyn(x) in dyn(y)) && size(dyn(z)) > 1": lambda b: (b["x"], b["y"]),
}
"""The operands of each source's ``in`` (evaluated first; None: not reached)."""


def _run(program: Any, bindings: dict[str, Any]) -> tuple[str, int]:
    meter = Meter(200_000)
    try:
        value = program.evaluate({**bindings, METER: meter})
    except CelError as e:
        return f"error {type(e).__name__}: {e}", meter.left
    shown = "nan" if type(value) is float and math.isnan(value) else repr(value)
    return f"value {shown} {type(value).__name__}", meter.left


_PROGRAMS: dict[str, tuple[Any, Any]] = {}


def _programs(source: str) -> tuple[Any, Any]:
    found = _PROGRAMS.get(source)
    if found is None:
        found = _PROGRAMS[source] = (
            compile_expression(source, declared=NAMES, backend="compiled"),
            compile_expression(source, declared=NAMES, backend="closures"))
    return found


values = st.one_of(st.sampled_from(HOSTILE), st.text(max_size=12), st.integers(-5, 80),
                   st.floats(allow_nan=True, allow_infinity=True),
                   st.lists(st.sampled_from(["a", "ab", "", "KP", Text("a"), 1, True]),
                            max_size=4))


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(source=st.sampled_from(SOURCES), bound=st.lists(values, min_size=4, max_size=4))
def test_specialised_operations_decide_as_the_closures(source: str, bound: list[Any]) -> None:
    compiled, closures = _programs(source)
    bindings = dict(zip(NAMES, bound, strict=True))
    outcome, left = _run(compiled, bindings)
    expected, reference = _run(closures, bindings)
    assert outcome == expected
    searched = MEMBERSHIP.get(source)
    if searched is not None:
        # Generated code searches a short list for a text without a charge (``IN_FREE``,
        # as before); the closures charge every search.
        item, container = searched(bindings)
        if type(item) is str and type(container) is list and len(container) <= IN_FREE:
            reference += membership_cost(item, container)
    assert left == reference


def test_the_specialisations_are_in_the_generated_code() -> None:
    """The test above compares something: each specialisation is in the source."""
    def source(text: str) -> str:
        code: str = _programs(text)[0].python_source()
        return code

    assert ".lower()" in source("dyn(x).lowerAscii().contains('ab')")
    assert "[_k" in source("dyn(x).substring(0, 2) in ['KP', 'IR', 'SY']")
    assert "type(_k" not in source("dyn(x).contains('http://')")  # a constant's type
    assert ".name ==" in source("type(dyn(x)) == string")
    assert ".isascii()" in source("dyn(x).matches('^[a-z]+$')")  # Python's re in line
    one = source("size(dyn(x)) > 3")
    assert "_gt(" not in one  # an int against an int constant: Python's operator only
    assert source("dyn(x).substring(0, 2) == 'a'").count("_SEQS") == 1  # ints: 0


LIBRARY = [fn for module in (lib_strings, lib_ext, lib_net, lib_text)
           for fn in vars(module).values() if getattr(fn, "cel_inline", None)]

arguments = st.one_of(st.sampled_from(HOSTILE), st.text(max_size=8),
                      st.integers(-3, 12), st.booleans())


def _outcome(fn: Any, args: tuple[Any, ...]) -> Any:
    try:
        value = fn(*args)
    except CelError as e:
        return ("error", str(e))
    return ("value", value, type(value))


@pytest.mark.parametrize("fn", LIBRARY, ids=lambda f: f.__name__)
@settings(max_examples=1500, deadline=None)
@given(args=st.lists(arguments, min_size=3, max_size=3))
def test_inline_forms_are_what_their_functions_return(fn: Any, args: list[Any]) -> None:
    """Where a form applies (exact types, its condition), it is the function's value."""
    form: InlineForm
    for form in fn.cel_inline:
        chosen = tuple(args[: len(form.types)])
        names = [f"a{i}" for i in range(len(chosen))]
        scope = dict(zip(names, chosen, strict=True))
        if not all(type(a) is t for a, t in zip(chosen, form.types, strict=True)):
            continue
        if not eval(form.condition.format(*names), {}, scope):
            continue
        expected = _outcome(fn, chosen)
        assert expected[0] == "value"
        value = eval(form.expression.format(*names), {}, scope)
        assert (value, type(value)) == expected[1:]


def test_the_forms_are_declared() -> None:
    assert {f.__name__ for f in LIBRARY} >= {"lower_ascii", "upper_ascii", "substring",
                                              "replace"}
