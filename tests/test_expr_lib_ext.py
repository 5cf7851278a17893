"""Lists (flatten, distinct, sum, min, max), IBAN validation and look-alike domains, on both
production backends, with the bypass attempts a policy must not be fooled by."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guardrails.expr import CelError, compile_expression
from guardrails.expr.lib_ext import _distance, _within_one, skeleton

BACKENDS = ["compiled", "closures"]


def ev(source: str, backend: str, **bindings: Any) -> Any:
    return compile_expression(source, declared=set(bindings) | {"x"},
                              backend=backend).evaluate(bindings)  # type: ignore[arg-type]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("source", "expected"), [
    ("[1, [2, [3]]].flatten()", [1, 2, [3]]),
    ("[1, [2, [3]]].flatten(2)", [1, 2, 3]),
    ("[[], [[]]].flatten(0)", [[], [[]]]),
    ("[1, 1.0, 1u, true, 'a', 'a', [1], [1.0], {'a': 1}, {'a': 1.0}].distinct()",
     [1, True, "a", [1], {"a": 1}]),
    ("[].distinct()", []),
    ("[1, 2, 3].sum()", 6),
    ("[0.5, 0.25].sum()", 0.75),
    ("[].sum()", 0),
    ("[3, 1, 2].min()", 1),
    ("[3, 1u, 2.5].max()", 3),
    ("['b', 'a'].min()", "a"),
    ("iban.valid('GB82 WEST 1234 5698 7654 32')", True),
    ("iban.valid('DE89370400440532013000')", True),
    ("iban.valid('GB82WEST12345698765433')", False),  # check digits do not match
    ("iban.valid('gb82west12345698765432')", False),  # lower case
    ("iban.valid('GB82WEST1234569876543')", False),   # one short for GB
    ("iban.valid('GB82WEST123456987654322')", False),  # one long
    ("iban.valid('GB82WEST\u200b12345698765432')", False),  # zero-width space
    ("iban.valid('')", False),
    ("domains.lookalike('ex\u0430mple.com', 'example.com')", True),  # Cyrillic а
    ("domains.lookalike('EXAMP1E.com.', ['other.org', 'example.com'])", True),
    ("domains.lookalike('rnicrosoft.com', 'microsoft.com')", True),
    ("domains.lookalike('exmaple.com', 'example.com')", True),  # swapped letters
    ("domains.lookalike('examples.com', 'example.com')", True),  # one added
    ("domains.lookalike('e\u0301xample.com', 'example.com')", True),  # combining accent
    ("domains.lookalike('Example.COM', 'example.com')", False),  # the same name
    ("domains.lookalike('github.com', 'gitlab.com')", False),
    ("domains.lookalike('a.io', 'b.io')", False),  # short names: one edit is not a look-alike
    ("domains.distance('example.com', 'exmaple.com')", 1),
    ("domains.distance('kitten', 'sitting')", 3),
])
def test_values(source: str, expected: Any, backend: str) -> None:
    value = ev(source, backend)
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("source", "message"), [
    ("[].max()", "empty"),
    ("[1, 'a'].sum()", "one kind"),
    ("[9223372036854775807, 1].sum()", "overflow"),
    ("[1].flatten(-1)", "negative"),
    ("'ab'.flatten()", "no matching overload"),
    ("[1, 'a'].min()", "no matching overload"),
    ("iban.valid(1)", "no matching overload"),
    ("domains.lookalike('a.com', 1)", "no matching overload"),
])
def test_errors(source: str, message: str, backend: str) -> None:
    with pytest.raises(CelError, match=message):
        ev(source, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_domain_comparisons_refuse_names_longer_than_dns_allows(backend: str) -> None:
    long = "a" * 254
    with pytest.raises(CelError, match="at most 253"):
        ev("domains.distance(x, 'example.com')", backend, x=long)
    with pytest.raises(CelError, match="at most 253"):
        ev("domains.lookalike('example.com', [x])", backend, x=long)


@pytest.mark.parametrize("backend", BACKENDS)
def test_lookalike_against_many_long_names_is_linear(backend: str) -> None:
    # Quadratic edit distance here would be 1,000 x 250 x 250 steps: it is never run.
    names = [f"{'b' * 249}{i:03d}" for i in range(1000)]
    program = compile_expression("domains.lookalike(x, y)", declared={"x", "y"},
                                 backend=backend)
    assert program.evaluate({"x": "b" * 249 + "9999", "y": names}) is True  # one added
    assert program.evaluate({"x": "a" * 252, "y": names}) is False


@given(st.text(alphabet="abcdeilmnorsw01.", max_size=12),
       st.text(alphabet="abcdeilmnorsw01.", max_size=12))
@settings(max_examples=300, deadline=None)
def test_the_linear_check_agrees_with_the_distance(a: str, b: str) -> None:
    assert _within_one(a, b) == (_distance(a, b) <= 1)


@given(st.text(alphabet="abcdeilmnorsw01.", max_size=12),
       st.text(alphabet="abcdeilmnorsw01.", max_size=12))
@settings(max_examples=200, deadline=None)
def test_distance_is_a_metric_like_function(a: str, b: str) -> None:
    assert _distance(a, b) == _distance(b, a)
    assert (_distance(a, b) == 0) == (a == b)
    assert _distance(a, b) <= max(len(a), len(b))


def test_skeleton_folds_the_usual_tricks() -> None:
    assert skeleton("p\u0430yp\u0430l.com") == skeleton("paypal.com")
    assert skeleton("g\u043e\u043egle.com") == skeleton("google.com")
