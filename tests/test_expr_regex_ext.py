"""cel-go's regex extension (``regex.extract``, ``regex.extractAll``, ``regex.replace``) on
both production backends: results, error cases, load-time pattern checks and cost bounds."""

from __future__ import annotations

from typing import Any

import pytest

from guardrails.expr import CelError, compile_expression
from guardrails.expr.values import Optional

BACKENDS = ["compiled", "closures"]


def ev(source: str, backend: str, **bindings: Any) -> Any:
    return compile_expression(source, declared=set(bindings) | {"x"},
                              backend=backend).evaluate(bindings)  # type: ignore[arg-type]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("source", "expected"), [
    # extract: the first match's group, the whole match without a group, none otherwise
    ("regex.extract('https://api.example.com/v1', '://([^/:]+)').value()", "api.example.com"),
    ("regex.extract('order 123 and 456', '[0-9]+').value()", "123"),
    ("regex.extract('no digits', '[0-9]+').hasValue()", False),
    ("regex.extract('ab', 'a(x)?b').hasValue()", False),  # the group took part in no match
    ("regex.extract('aXb', 'a(?:X)b').value()", "aXb"),  # non-capturing group: whole match
    ("regex.extract('héllo wörld', '(w\\\\pL+)').value()", "wörld"),
    ("regex.extract('a', 'b').orValue('none')", "none"),
    # extractAll: every non-overlapping match; empty groups are left out
    ("regex.extractAll('id:1 id:22 id: id:333', 'id:([0-9]*)')", ["1", "22", "333"]),
    ("regex.extractAll('a1b22c', '[0-9]+')", ["1", "22"]),
    ("regex.extractAll('abc', 'x')", []),
    ("regex.extractAll('abc', '')", ["", "", "", ""]),
    # replace: all, or the first count; \\N is group N, \\\\ a backslash
    ("regex.replace('a1b22c333', '[0-9]+', '#')", "a#b#c#"),
    ("regex.replace('a1b22c333', '[0-9]+', '#', 2)", "a#b#c333"),
    ("regex.replace('a1b22c333', '[0-9]+', '#', 0)", "a1b22c333"),
    ("regex.replace('a1b22c333', '[0-9]+', '#', -1)", "a#b#c#"),
    ("regex.replace('john.doe@example.com', '(\\\\w+)\\\\.(\\\\w+)@', '\\\\2 \\\\1 at ')",
     "doe john at example.com"),
    ("regex.replace('abc', 'b', '\\\\\\\\')", "a\\c"),
    ("regex.replace('abc', 'b', '[\\\\0]')", "a[b]c"),
    ("regex.replace('ab', 'a(x)?b', '<\\\\1>')", "<>"),
    ("regex.replace('abc', '', '-')", "-a-b-c-"),
    ("regex.replace('aaa', 'a*', '-')", "-"),  # Go: no empty match right after a match
    ("regex.replace('$1 stays', 'x', 'y')", "$1 stays"),
])
def test_values(source: str, expected: Any, backend: str) -> None:
    value = ev(source, backend)
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize("backend", BACKENDS)
def test_extract_returns_an_optional(backend: str) -> None:
    value = ev("regex.extract(x, 'k=([a-z]+)')", backend, x="k=v")
    assert isinstance(value, Optional) and value.has_value and value.value == "v"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("source", "message"), [
    ("regex.extract(x, '(a)(b)')", "more than one capturing group"),
    ("regex.extractAll(x, '(a)|(b)')", "more than one capturing group"),
    ("regex.replace(x, 'a', '\\\\2')", "references group 2"),
    ("regex.replace(x, '(a)', '\\\\x')", "must be followed by a digit"),
    ("regex.replace(x, 'a', 'tail\\\\')", "not allowed at end"),
    ("regex.extract(x, y)", "invalid regular expression"),
    ("regex.extract(1, 'a')", "no matching overload"),
    ("regex.replace(x, 'a', 'b', 'c')", "no matching overload"),
    ("regex.replace(x, 'a', 'b', 1, 2)", "no matching overload"),
])
def test_errors(source: str, message: str, backend: str) -> None:
    with pytest.raises(CelError, match=message):
        ev(source, backend, x="ab", y="(unclosed")


def test_bad_group_reference_in_replace_errs_only_when_something_matches() -> None:
    # as cel-go: the replacement is expanded per match
    assert ev("regex.replace(x, 'z', '\\\\9')", "compiled", x="abc") == "abc"


def test_cost_grows_with_the_text_scanned() -> None:
    from guardrails.expr import Limits
    tight = Limits(max_cost=5_000)
    prog = compile_expression("regex.replace(x, 'a', 'b').size() > 0", declared={"x"},
                              limits=tight)
    assert prog.evaluate({"x": "a" * 100}) is True
    with pytest.raises(CelError, match="cost"):
        prog.evaluate({"x": "a" * 100_000})


def test_replace_output_is_bounded() -> None:
    prog = compile_expression("regex.replace(x, '', y)", declared={"x", "y"})
    with pytest.raises(CelError, match="longer than"):
        prog.evaluate({"x": "a" * 200_000, "y": "b" * 50})
