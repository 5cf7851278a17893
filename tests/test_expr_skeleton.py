"""Trees built from a skeleton's template against the parser's own (load19).

``parser.parse`` builds the third and later expression of a token skeleton (kinds and
words equal, literals free) from a template of the tree the parser made. Each family
below is parsed twice to make the template, then every member is parsed again and
compared, node by node (type, offset, fields, literal type and value, which nodes are
shared), with the parser proper, or error for error (message, offset, line, column).
Families are generated from a grammar with every form the parser has (macros, optional
syntax, message literals, folded ``-``), their literals drawn from hostile values
(int64 and uint64 bounds and past them, infinite doubles, escapes, bytes), and also
glued from random tokens.
"""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from guardrails.expr import ast, parser
from guardrails.expr.limits import DEFAULT_LIMITS, Limits
from guardrails.expr.parser import CelSyntaxError


def canon(root: ast.Node) -> list[tuple[Any, ...]]:
    """The tree as a list, with identity: a shared node appears once, by number."""
    ids: dict[int, int] = {}
    out: list[tuple[Any, ...]] = []

    def visit(n: Any) -> Any:
        if isinstance(n, tuple):
            return tuple(visit(x) for x in n)
        if not isinstance(n, ast.Node):
            return (type(n).__name__, repr(n))
        if id(n) in ids:
            return ("ref", ids[id(n)])
        ids[id(n)] = len(ids)
        fields = tuple(visit(getattr(n, f)) for f in n.__slots__)  # type: ignore[attr-defined]
        out.append((type(n).__name__, n.offset, fields))
        return ("ref", ids[id(n)])

    visit(root)
    return out


def outcome(parse: Any, text: str, limits: Limits) -> tuple[Any, ...]:
    try:
        return ("ok", canon(parse(text, limits)))
    except CelSyntaxError as e:
        return ("error", e.message, e.offset, e.line, e.column)


def general(text: str, limits: Limits = DEFAULT_LIMITS) -> ast.Node:
    """The parser proper, no template."""
    fail = parser._Fail(text)
    if len(text) > limits.max_expression_length:
        return parser.parse(text, limits)  # the length error comes before any template
    return parser._parse_tokens(parser._tokenize(text, fail), fail, limits)


def check_family(texts: list[str], limits: Limits = DEFAULT_LIMITS) -> None:
    """Every text three times over: the first two rounds make the templates (from
    whichever member of a skeleton comes second), the third builds from them."""
    for text in texts + texts:
        assert outcome(parser.parse, text, limits) == outcome(general, text, limits), text
    for text in texts:
        assert outcome(parser.parse, text, limits) == outcome(general, text, limits), text
        assert_shaped_alike(text, limits)
        # A text the parser accepts, its skeleton parsed at least twice: it has a
        # template now, so the comparison above took the template's path.
        if outcome(general, text, limits)[0] == "ok" and (
                len(parser._TEMPLATES) < parser._TEMPLATES_MAX - 100):
            lexed = parser._tokenize(text, parser._Fail(text))
            key = (limits, tuple(lexed.kinds), tuple(lexed.words))
            assert parser._TEMPLATES.get(key, parser._NEVER)[0], text


def assert_shaped_alike(text: str, limits: Limits) -> None:
    """``parse_shaped``'s shape (from the template's, for a built tree) is ``ast.shape``
    of its tree: the same key, and the tree's own literal nodes in the same order."""
    try:
        node, shaped = parser.parse_shaped(text, limits)
    except CelSyntaxError:
        return
    walked = ast.shape(node)
    if walked is None:
        assert shaped is None, text
        return
    assert shaped is not None, text
    assert shaped[0] == walked[0], text
    assert [id(n) for n in shaped[1]] == [id(n) for n in walked[1]], text


_INTS = ["0", "1", "7", "9223372036854775807", "9223372036854775808", "9223372036854775809",
         "18446744073709551615", "18446744073709551616", "0x7fffffffffffffff",
         "0x8000000000000000", "0xffffffffffffffffff", "123456789012345678901234567890"]
_LITS = [*_INTS, "1u", "0xFFu", "18446744073709551616u", "1.5", ".5", "0.0", "1e999",
         "1e-999", "2.5e3", "'a'", '"b\\n"', "r'x\\d'", "b'y'", "b'\\xff'", "'''t'''",
         "'\\u00e9'", "'\\q'", "'\\ud800'", "b'\\u00e9'", '"""a"b"""', "''", "'é'"]

_literal = st.sampled_from(_LITS)
_SLOT = object()


_OPS = ["||", "&&", "==", "!=", "<", "<=", ">", ">=", "in", "+", "-", "*", "/", "%"]
_BASES = [[_SLOT], ["-", _SLOT], ["--", _SLOT], ["a"], ["args"], ["x"], ["true"], ["null"],
          ["args", ".", "f"], [".", "a"], ["__result__"], ["if"]]


def _pieces(rnd: random.Random, leaves: int) -> list[Any]:
    """An expression of about ``leaves`` leaves from every form the parser has, literals
    left as slots (drawn with a seeded ``random``: hypothesis' own recursive strategies
    were a hundred times slower to draw than the parses are to compare)."""
    if leaves <= 1 or rnd.random() < 0.2:
        return list(rnd.choice(_BASES))
    c = lambda: _pieces(rnd, leaves // 2)  # noqa: E731
    form = rnd.randrange(22)
    op = rnd.choice(_OPS)
    if form == 0:
        return ["(", *c(), f" {op} ", *c(), ")"]
    if form == 1:
        return [*c(), f" {op} ", *c()]
    if form == 2:
        return ["!", *c()]
    if form == 3:
        return ["-", "(", *c(), ")"]
    if form == 4:
        return [*c(), rnd.choice([".f", ".?g"])]
    if form == 5:
        return [*c(), ".m(", *c(), ")"]
    if form == 6:
        return [*c(), rnd.choice(["[", "[?"]), *c(), "]"]
    if form == 7:
        return ["[", *c(), rnd.choice([", ?", ", "]), *c(), "]"]
    if form == 8:
        return [rnd.choice(["{", "{?"]), *c(), ": ", *c(), "}"]
    if form == 9:
        return [*c(), " ? ", *c(), " : ", *c()]
    if form == 10:
        macro = rnd.choice(["all", "exists", "exists_one", "map", "filter", "optMap",
                            "optFlatMap"])
        return [*c(), f".{macro}(v, ", *c(), ")"]
    if form == 11:
        return [*c(), ".map(v, ", *c(), ", ", *c(), ")"]
    if form == 12:
        macro = rnd.choice(["all", "exists", "existsOne", "transformList", "transformMap",
                            "transformMapEntry"])
        return [*c(), f".{macro}(k, v, ", *c(), ")"]
    if form == 13:
        return [*c(), f".{rnd.choice(['transformList', 'transformMap'])}(k, v, ", *c(), ", ",
                *c(), ")"]
    if form == 14:
        return ["has(", *c(), rnd.choice([".f)", ")"])]
    if form == 15:
        return ["M.N{f: ", *c(), "}"]
    if form == 16:
        return ["optional.of(", *c(), ")"]
    if form == 17:
        return ["f(", *c(), ", ", *c(), ")"]
    if form == 18:
        return [*c(), ".all(", *c(), ", ", *c(), ")"]  # a bad variable: an error
    return [*c(), f" {op} ", *c()]


@st.composite
def families(draw: st.DrawFn) -> list[str]:
    rnd = random.Random(draw(st.integers(0, 2**32)))
    pieces = _pieces(rnd, draw(st.integers(1, 14)))
    slots = sum(1 for p in pieces if p is _SLOT)
    fills = draw(st.lists(st.lists(_literal, min_size=slots, max_size=slots),
                          min_size=3, max_size=5))
    texts = []
    for fill in fills:
        it = iter(fill)
        texts.append("".join(next(it) if p is _SLOT else p for p in pieces))
    return texts


@settings(max_examples=1500, deadline=None)
@given(families())
def test_generated_families_parse_alike(texts: list[str]) -> None:
    check_family(texts)


@settings(max_examples=100, deadline=None)
@given(families(), st.integers(1, 12), st.integers(0, 4))
def test_families_under_small_bounds_parse_alike(texts: list[str], depth: int,
                                                 comprehensions: int) -> None:
    check_family(texts, Limits(max_nesting_depth=depth, max_comprehension_nesting=comprehensions))


_TOKENS = st.sampled_from(["a", "b.c", "(", ")", "[", "]", "{", "}", ",", ":", "?", ".", "-",
                           "!", "&&", "||", "==", "in", "has", "all", "x", "1", "2.5", "'s'",
                           "1u", "true", "M{", ".?", "[?", " "])


@settings(max_examples=300, deadline=None)
@given(st.lists(_TOKENS, max_size=16), st.lists(_literal, min_size=3, max_size=3))
def test_glued_tokens_parse_alike(tokens: list[str], literals: list[str]) -> None:
    # The same glued tokens with a literal put in front of each, three ways.
    check_family([f"{lit} + " + "".join(tokens) for lit in literals]
                 + ["".join(tokens)] * 3)


def test_templates_are_used() -> None:
    """The families above do reach the template (not only the parser twice)."""
    parser._TEMPLATES.clear()
    texts = [f"args.amount > {i}.0 && args.to.startsWith('X{i}') || 'p' in principal.roles"
             for i in range(5)]
    check_family(texts)
    key = next(iter(parser._TEMPLATES))
    assert parser._TEMPLATES[key][0]
    assert outcome(parser.parse, texts[4], DEFAULT_LIMITS) == outcome(general, texts[4],
                                                                      DEFAULT_LIMITS)
    # Literals out of range on the template path are the parser's errors, with positions.
    for bad in ("9223372036854775808", "1e999"):
        text = f"args.amount > {bad} && args.to.startsWith('X') || 'p' in principal.roles"
        assert outcome(parser.parse, text, DEFAULT_LIMITS)[0] == "error"
        assert outcome(parser.parse, text, DEFAULT_LIMITS) == outcome(general, text,
                                                                      DEFAULT_LIMITS)
    folded = ["-9223372036854775808 < x", "-1 < x", "-9223372036854775808 < x"]
    check_family(folded)
    assert parser.parse(folded[2]) == general(folded[2])
