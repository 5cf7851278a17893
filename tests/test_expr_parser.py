"""The CEL parser: grammar, literals, macros, positions of errors and load-time bounds."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guardrails.expr.ast import (
    Call,
    Comprehension,
    Ident,
    ListLit,
    Literal,
    MapLit,
    Node,
    Select,
    StructLit,
    walk,
)
from guardrails.expr.limits import Limits
from guardrails.expr.parser import ACCUMULATOR, RESERVED_WORDS, CelSyntaxError, parse
from guardrails.expr.values import UInt

CONFORMANCE = Path(__file__).parent / "conformance"


def sx(node: Node) -> str:
    """A compact, offset-free rendering of a tree, so expected shapes are readable."""
    if isinstance(node, Literal):
        return repr(node.value)
    if isinstance(node, Ident):
        return node.name
    if isinstance(node, Select):
        inner = f"{sx(node.operand)}.{node.field}"
        return f"has({inner})" if node.test_only else inner
    if isinstance(node, Call):
        args = ", ".join(sx(a) for a in node.args)
        if node.target is not None:
            return f"{sx(node.target)}.{node.function}({args})"
        return f"{node.function}({args})"
    if isinstance(node, ListLit):
        return "[" + ", ".join(sx(e) for e in node.elements) + "]"
    if isinstance(node, MapLit):
        return "{" + ", ".join(f"{sx(k)}: {sx(v)}" for k, v in node.entries) + "}"
    if isinstance(node, StructLit):
        return node.type_name + "{" + ", ".join(f"{f}: {sx(v)}" for f, v in node.fields) + "}"
    assert isinstance(node, Comprehension)
    parts = (node.accu_init, node.loop_condition, node.loop_step, node.result)
    return (
        f"{node.macro}<{node.iter_var} in {sx(node.iter_range)}; {node.accu_var}; "
        + "; ".join(sx(p) for p in parts)
        + ">"
    )


def p(source: str) -> str:
    return sx(parse(source))


def error(source: str, limits: Limits | None = None) -> CelSyntaxError:
    with pytest.raises(CelSyntaxError) as info:
        parse(source) if limits is None else parse(source, limits)
    return info.value


# ----------------------------------------------------------------- precedence


@pytest.mark.parametrize(
    ("source", "shape"),
    [
        ("a || b && c", "_||_(a, _&&_(b, c))"),
        ("a && b || c", "_||_(_&&_(a, b), c)"),
        ("a || b || c", "_||_(_||_(a, b), c)"),
        ("a && b && c", "_&&_(_&&_(a, b), c)"),
        ("a == b && c < d", "_&&_(_==_(a, b), _<_(c, d))"),
        ("a < b == c", "_==_(_<_(a, b), c)"),
        ("a in b == c", "_==_(@in(a, b), c)"),
        ("a + b < c * d", "_<_(_+_(a, b), _*_(c, d))"),
        ("a - b - c", "_-_(_-_(a, b), c)"),
        ("a / b * c % d", "_%_(_*_(_/_(a, b), c), d)"),
        ("a + b * c - d", "_-_(_+_(a, _*_(b, c)), d)"),
        ("a <= b != c >= d > e", "_>_(_>=_(_!=_(_<=_(a, b), c), d), e)"),
        ("!a && b", "_&&_(!_(a), b)"),
        ("-a * b", "_*_(-_(a), b)"),
        ("!a.b", "!_(a.b)"),
        ("-a[0]", "-_(_[_](a, 0))"),
        ("!!x", "!_(!_(x))"),
        ("--x", "-_(-_(x))"),
        ("!!!x", "!_(!_(!_(x)))"),
        ("a - -b", "_-_(a, -_(b))"),
        ("(a || b) && c", "_&&_(_||_(a, b), c)"),
        ("(a + b) * c", "_*_(_+_(a, b), c)"),
        ("a ? b : c", "_?_:_(a, b, c)"),
        ("a ? b : c ? d : e", "_?_:_(a, b, _?_:_(c, d, e))"),
        ("a || b ? c && d : e || f", "_?_:_(_||_(a, b), _&&_(c, d), _||_(e, f))"),
        ("(a ? b : c) ? d : e", "_?_:_(_?_:_(a, b, c), d, e)"),
        ("a ? (b ? c : d) : e", "_?_:_(a, _?_:_(b, c, d), e)"),
        ("a.b.c", "a.b.c"),
        ("a.b(c).d[e]", "_[_](a.b(c).d, e)"),
        ("f(a, b)(", None),
    ],
)
def test_precedence_and_associativity(source: str, shape: str | None) -> None:
    if shape is None:
        error(source)
    else:
        assert p(source) == shape


def test_typical_policy_expressions() -> None:
    assert (
        p("args.amount > params.max_amount && !(args.recipient in params.known)")
        == "_&&_(_>_(args.amount, params.max_amount), !_(@in(args.recipient, params.known)))"
    )
    assert p("type(args.amount) == string") == "_==_(type(args.amount), string)"
    assert p("sets.contains(a, b)") == "sets.contains(a, b)"
    node = parse("sets.contains(a, b)")
    assert isinstance(node, Call) and node.target == Ident(0, "sets")


def test_then_branch_must_be_a_conditional_or() -> None:
    # cel-spec: Expr = ConditionalOr ["?" ConditionalOr ":" Expr]
    e = error("a ? b ? c : d : e")
    assert (e.message, e.offset) == ("expected ':', found '?'", 6)


def test_mixed_unary_operators_need_parentheses() -> None:
    # cel-spec: Unary = "!" {"!"} Member | "-" {"-"} Member
    e = error("!-x")
    assert e.offset == 1 and "'-'" in e.message
    assert p("!(-x)") == "!_(-_(x))"
    assert p("-(!x)") == "-_(!_(x))"


# ------------------------------------------------------------------ literals


@pytest.mark.parametrize(
    ("source", "value"),
    [
        ("0", 0),
        ("42", 42),
        ("0x1F", 31),
        ("0xff", 255),
        ("-7", -7),
        ("-0x10", -16),
        ("9223372036854775807", 2**63 - 1),
        ("-9223372036854775808", -(2**63)),
        ("0123", 123),
        ("1.5", 1.5),
        ("1e3", 1000.0),
        ("1E-2", 0.01),
        ("2.5e+2", 250.0),
        (".5", 0.5),
        (".5e1", 5.0),
        ("-1.5", -1.5),
        ("true", True),
        ("false", False),
        ("null", None),
        ("'a'", "a"),
        ('"a"', "a"),
        ("''", ""),
        ('""', ""),
        ("'''a'b\"c'''", "a'b\"c"),
        ('"""a"b\n\'c"""', "a\"b\n'c"),
        ("''''''", ""),
        ("'é😀'", "é😀"),
    ],
)
def test_literal_values(source: str, value: object) -> None:
    node = parse(source)
    assert isinstance(node, Literal)
    assert node.value == value
    assert type(node.value) is type(value)


@pytest.mark.parametrize(
    ("source", "value"),
    [("1u", 1), ("0U", 0), ("0x1Fu", 31), ("18446744073709551615u", 2**64 - 1)],
)
def test_uint_literals(source: str, value: int) -> None:
    node = parse(source)
    assert isinstance(node, Literal)
    assert type(node.value) is UInt
    assert node.value == value


def test_negative_uint_is_kept_as_a_call() -> None:
    node = parse("-1u")
    assert isinstance(node, Call) and node.function == "-_"
    assert node.args == (Literal(1, UInt(1)),)


def test_one_dot_is_not_a_double() -> None:
    # cel-go's NUM_FLOAT needs digits after the '.'; "1." is an int followed by '.'.
    e = error("1.")
    assert e.offset == 2
    assert p("1.e") == "1.e"  # a (meaningless but valid) field selection on an int


def test_repeated_minus_keeps_nested_calls_and_folds_only_the_innermost() -> None:
    assert p("--19") == "-_(-19)"
    assert p("---x") == "-_(-_(-_(x)))"
    assert p("- 5") == "-5"


@pytest.mark.parametrize(
    ("source", "offset"),
    [
        ("9223372036854775808", 0),
        ("-9223372036854775809", 0),
        ("1 + 9223372036854775808", 4),
        ("-(9223372036854775808)", 2),
        ("0x8000000000000000", 0),
        ("18446744073709551616u", 0),
        ("0x10000000000000000u", 0),
        ("1" * 5000, 0),
        ("1e999", 0),
        ("-1e999", 0),
    ],
)
def test_numbers_out_of_range(source: str, offset: int) -> None:
    e = error(source)
    assert "out of range" in e.message
    assert e.offset == offset


def test_tiny_double_underflows_to_zero() -> None:
    assert parse("1e-999") == Literal(0, 0.0)


@pytest.mark.parametrize(
    ("escape", "value"),
    [
        ("\\n", "\n"),
        ("\\t", "\t"),
        ("\\\\", "\\"),
        ('\\"', '"'),
        ("\\'", "'"),
        ("\\`", "`"),
        ("\\?", "?"),
        ("\\a", "\a"),
        ("\\b", "\b"),
        ("\\f", "\f"),
        ("\\r", "\r"),
        ("\\v", "\v"),
        ("\\x41", "A"),
        ("\\X4a", "J"),
        ("\\xff", "\u00ff"),
        ("\\u00e9", "é"),
        ("\\uFFFB", "\ufffb"),
        ("\\U0001F600", "😀"),
        ("\\U0010FFFF", "\U0010ffff"),
        ("\\101", "A"),
        ("\\000", "\x00"),
        ("\\377", "\u00ff"),
    ],
)
def test_string_escapes(escape: str, value: str) -> None:
    for quote in ('"', "'", '"""', "'''"):
        node = parse(f"{quote}<{escape}>{quote}")
        assert node == Literal(0, f"<{value}>")


@pytest.mark.parametrize(
    ("source", "message", "offset"),
    [
        ("'\\q'", "invalid escape sequence \\q", 1),
        ("'ab\\8'", "invalid escape sequence \\8", 3),
        ("'\\400'", "invalid escape sequence \\4", 1),
        ("'\\x4'", "invalid escape sequence \\x", 1),
        ("'\\u12'", "invalid escape sequence \\u", 1),
        ("'\\uD800'", "invalid code point in escape sequence \\uD800", 1),
        ("'x\\uDFFF'", "invalid code point in escape sequence \\uDFFF", 2),
        ("'\\U00110000'", "invalid code point in escape sequence \\U00110000", 1),
        ("'\\U0000D800'", "invalid code point in escape sequence \\U0000D800", 1),
        ("b'\\u0041'", "unicode escape sequence \\u is not allowed in bytes literals", 2),
        ("b'\\U00000041'", "unicode escape sequence \\U is not allowed in bytes literals", 2),
        ("'''\\z'''", "invalid escape sequence \\z", 3),
        ("1 + '\\w'", "invalid escape sequence \\w", 5),
        ("'''a\\\nb'''", "invalid escape sequence: backslash followed by '\\n'", 4),
    ],
)
def test_invalid_escapes(source: str, message: str, offset: int) -> None:
    e = error(source)
    assert (e.message, e.offset) == (message, offset)


@pytest.mark.parametrize(
    ("source", "value"),
    [
        ("r'\\n\\q'", "\\n\\q"),
        ('R"\\x41"', "\\x41"),
        ("r'''a\\'''", "a\\"),
        ('r"""\\"x"""', '\\"x'),
        ("r'\\'", "\\"),
        ('r"\'"', "'"),
    ],
)
def test_raw_strings(source: str, value: str) -> None:
    assert parse(source) == Literal(0, value)


@pytest.mark.parametrize(
    ("source", "value"),
    [
        ("b'abc'", b"abc"),
        ('B"abc"', b"abc"),
        ("b'\\xff\\x00'", b"\xff\x00"),
        ("b'\\377\\101'", b"\xffA"),
        ("b'é'", "é".encode()),
        ("b'\\n\\t\\\\'", b"\n\t\\"),
        ("b'''a\nb'''", b"a\nb"),
        ("br'\\xff'", b"\\xff"),
        ("bR'\\u0041'", b"\\u0041"),
        ("b''", b""),
    ],
)
def test_bytes_literals(source: str, value: bytes) -> None:
    node = parse(source)
    assert node == Literal(0, value)
    assert isinstance(node, Literal) and type(node.value) is bytes


@pytest.mark.parametrize(
    ("source", "offset"),
    [
        ("'abc", 0),
        ('"abc', 0),
        ("x + 'abc\ndef'", 4),
        ("'''abc''", 0),
        ('"""abc', 0),
        ("r'abc", 0),
        ('b"abc', 0),
        ("a == 'unterminated", 5),
    ],
)
def test_unterminated_strings(source: str, offset: int) -> None:
    e = error(source)
    assert (e.message, e.offset) == ("unterminated string", offset)


def test_single_quoted_strings_cannot_span_lines() -> None:
    assert error("'a\nb'").message == "unterminated string"
    assert error('r"a\rb"').message == "unterminated string"


# ------------------------------------------------------- aggregates and calls


def test_lists_maps_and_trailing_commas() -> None:
    assert p("[]") == "[]"
    assert p("[1, 2,]") == "[1, 2]"
    assert p("{}") == "{}"
    assert p("{'a': 1, 'b': [2],}") == "{'a': 1, 'b': [2]}"
    assert p("{1: {2: 3}}[1][2]") == "_[_](_[_]({1: {2: 3}}, 1), 2)"
    assert error("[,]").offset == 1
    assert error("[1,,]").offset == 3
    assert error("{1: 2,,}").offset == 6
    e = error("{1 2}")
    assert (e.message, e.offset) == ("expected ':', found literal 2", 3)


def test_struct_literals() -> None:
    node = parse("a.b.Msg{f: 1, g: 'x',}")
    assert isinstance(node, StructLit)
    assert node.type_name == "a.b.Msg"
    assert node.fields == (("f", Literal(11, 1)), ("g", Literal(17, "x")))
    assert node.offset == 0
    assert p("Msg{}") == "Msg{}"
    assert p(".pkg.Msg{x: 1}.x") == ".pkg.Msg{x: 1}.x"
    # reserved words are fine as field names, language keywords are not
    assert p("Msg{if: 1, while: 2}") == "Msg{if: 1, while: 2}"
    e = error("Msg{in: 1}")
    assert (e.message, e.offset) == ("expected a field name, found 'in'", 4)
    e = error("Msg{f 1}")
    assert (e.message, e.offset) == ("expected ':', found literal 1", 6)


def test_global_and_method_calls() -> None:
    assert p("f()") == "f()"
    assert p("f(a, b + c)") == "f(a, _+_(b, c))"
    assert p("a.f()") == "a.f()"
    assert p("a.b.f(1).g(2)") == "a.b.f(1).g(2)"
    assert p("size([1]) > 0") == "_>_(size([1]), 0)"
    e = error("f(a b)")
    assert (e.message, e.offset) == ("expected ',' or ')', found 'b'", 4)
    e = error("f(a,)")
    assert e.offset == 4


def test_leading_dot_identifiers() -> None:
    assert parse(".x") == Ident(0, "x")
    assert p(".x.y") == "x.y"
    assert p(".f(1)") == "f(1)"
    assert p(". x") == "x"  # tokens may be separated by whitespace (cel-spec parse tests)
    assert error(". 1").offset == 0


def test_backquoted_field_names() -> None:
    assert p("m.`content-type`") == "m.content-type"
    assert p("has(m.`a/b.c d`)") == "has(m.a/b.c d)"
    assert p("Msg{`in`: true}") == "Msg{in: True}"
    e = error("`x`")
    assert e.offset == 0


@pytest.mark.parametrize("word", sorted(RESERVED_WORDS))
def test_reserved_words(word: str) -> None:
    e = error(word)
    assert (e.message, e.offset) == (f"reserved word '{word}' cannot be used as an identifier", 0)
    assert error(f"1 + {word}(2)").offset == 4
    assert error(f".{word}").offset == 1
    # permitted as selectors, method names and struct field names (cel-spec parse tests)
    assert p(f"a.{word}") == f"a.{word}"
    assert p(f"a.{word}()") == f"a.{word}()"
    assert p(f"M{{{word}: 1}}") == f"M{{{word}: 1}}"


@pytest.mark.parametrize("keyword", ["true", "false", "null", "in"])
def test_language_keywords_are_not_selectors(keyword: str) -> None:
    e = error(f"a.{keyword}")
    assert e.offset == 2
    assert e.message.startswith("expected a field name after '.'")


def test_identifiers_similar_to_keywords() -> None:
    assert p("inx || truex || nullable || _in") == "_||_(_||_(_||_(inx, truex), nullable), _in)"
    assert p("x in y") == "@in(x, y)"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("a.?b", "optional.@select(a, 'b')"),
        ("a.?b.c", "optional.@select(a, 'b').c"),
        ("a[?0]", "optional.@index(a, 0)"),
        ("{?'k': v, 'j': w}", "optional.@map('10', 'k', v, 'j', w)"),
        ("[?a, b]", "optional.@list('10', a, b)"),
        ("[a, b]", "[a, b]"),
    ],
)
def test_optional_syntax_desugars_to_the_optional_library(source: str, expected: str) -> None:
    assert p(source) == expected


@pytest.mark.parametrize("source", ["a.?", "a.?1", "a[?]", "[?]", "{?: 1}", "M{?f: 1}"])
def test_broken_optional_syntax_is_a_syntax_error(source: str) -> None:
    error(source)


# -------------------------------------------------------------------- macros


def test_has_macro() -> None:
    node = parse("has(a.b.c)")
    assert node == Select(0, Select(6, Ident(4, "a"), "b"), "c", test_only=True)
    assert p("has(a.b) && a.b") == "_&&_(has(a.b), a.b)"
    for bad, offset in (("has(a)", 4), ("has(a[0])", 5), ("has(f(x))", 4), ("has(has(a.b))", 4)):
        e = error(bad)
        assert e.message == "invalid argument to has() macro: expected a field selection"
        assert e.offset == offset
    # not the macro: other arities and receiver style stay calls
    assert p("has(a.b, c)") == "has(a.b, c)"
    assert p("x.has(a.b)") == "x.has(a.b)"


ACC = ACCUMULATOR


@pytest.mark.parametrize(
    ("source", "shape"),
    [
        (
            "l.all(x, x > 0)",
            f"all<x in l; {ACC}; True; @not_strictly_false({ACC}); _&&_({ACC}, _>_(x, 0)); {ACC}>",
        ),
        (
            "l.exists(x, x > 0)",
            f"exists<x in l; {ACC}; False; @not_strictly_false(!_({ACC})); "
            f"_||_({ACC}, _>_(x, 0)); {ACC}>",
        ),
        (
            "l.exists_one(x, x > 0)",
            f"exists_one<x in l; {ACC}; 0; True; _?_:_(_>_(x, 0), _+_({ACC}, 1), {ACC}); "
            f"_==_({ACC}, 1)>",
        ),
        (
            "l.map(x, x * 2)",
            f"map<x in l; {ACC}; []; True; _+_({ACC}, [_*_(x, 2)]); {ACC}>",
        ),
        (
            "l.map(x, x > 0, x * 2)",
            f"map<x in l; {ACC}; []; True; _?_:_(_>_(x, 0), _+_({ACC}, [_*_(x, 2)]), {ACC}); {ACC}>",
        ),
        (
            "l.filter(x, x > 0)",
            f"filter<x in l; {ACC}; []; True; _?_:_(_>_(x, 0), _+_({ACC}, [x]), {ACC}); {ACC}>",
        ),
    ],
)
def test_comprehension_macros(source: str, shape: str) -> None:
    assert p(source) == shape


def test_macro_offsets_point_at_the_macro_name() -> None:
    node = parse("args.items.exists(i, i.price > 100.0)")
    assert isinstance(node, Comprehension)
    assert node.offset == 11
    assert node.iter_range == Select(5, Ident(0, "args"), "items")
    assert {n.offset for n in walk(node.loop_condition)} == {11}


def test_macro_name_with_other_arity_is_a_plain_method_call() -> None:
    assert p("l.all(x)") == "l.all(x)"
    assert p("l.exists(x, y, z)") == "l.exists(x, y, z)"
    assert p("all(l, x, p)") == "all(l, x, p)"


@pytest.mark.parametrize(
    ("source", "offset"),
    [
        ("l.all(x.y, true)", 8),
        ("l.map(1, 2)", 6),
        ("l.exists(f(x), true)", 9),
        (f"l.all({ACC}, true)", 6),
    ],
)
def test_macro_iteration_variable_must_be_a_simple_name(source: str, offset: int) -> None:
    e = error(source)
    assert e.offset == offset
    assert "iteration variable" in e.message


def test_nested_macros() -> None:
    node = parse("a.all(x, x.b.exists(y, y == x))")
    assert isinstance(node, Comprehension)
    inner = node.loop_step
    assert isinstance(inner, Call)
    assert isinstance(inner.args[1], Comprehension)
    assert inner.args[1].macro == "exists"


def test_comprehension_nesting_limit() -> None:
    three = "a.all(x, b.exists(y, c.map(z, z)))"
    parse(three)
    four = "a.all(x, b.exists(y, c.map(z, d.filter(w, w))))"
    e = error(four)
    assert e.message == "comprehensions nested too deeply (more than 3)"
    assert e.offset == four.index("filter")
    assert error(three, Limits(max_comprehension_nesting=2)).offset == three.index("map")
    # a comprehension used as the range of another is not nested in its loop
    parse("a.map(x, x).map(x, x).map(x, x).map(x, x).all(x, x)")


# -------------------------------------------------- errors and their positions


@pytest.mark.parametrize(
    ("source", "message", "offset"),
    [
        ("", "unexpected end of expression", 0),
        ("   ", "unexpected end of expression", 3),
        ("1 +", "unexpected end of expression", 3),
        ("(1", "expected ')', found end of expression", 2),
        ("(1]", "expected ')', found ']'", 2),
        ("a[1", "expected ']', found end of expression", 3),
        ("a[1)", "expected ']', found ')'", 3),
        ("[1, 2", "expected ',' or ']', found end of expression", 5),
        (")", "unexpected token ')'", 0),
        ("a b", "unexpected token 'b'", 2),
        ("1 2", "unexpected token literal 2", 2),
        ("a.", "expected a field name after '.', found end of expression", 2),
        ("a.1", "unexpected token literal 0.1", 1),
        ("a = b", "unexpected character '='; did you mean '=='?", 2),
        ("a & b", "unexpected character '&'; did you mean '&&'?", 2),
        ("a | b", "unexpected character '|'; did you mean '||'?", 2),
        ("a # b", "unexpected character '#'", 2),
        ("a ? b", "expected ':', found end of expression", 5),
        ("a ? b : ", "unexpected end of expression", 8),
        ("é", "unexpected character 'é'", 0),
        ("a\u000bb", "unexpected character '\\x0b'", 1),
    ],
)
def test_error_messages_and_offsets(source: str, message: str, offset: int) -> None:
    e = error(source)
    assert (e.message, e.offset) == (message, offset)
    assert e.line == 1 and e.column == offset + 1


def test_multi_line_positions() -> None:
    source = "args.amount > 10 &&\n  args.to in params.known &&\n  args.x = 3"
    e = error(source)
    assert e.offset == source.index("=")
    assert (e.line, e.column) == (3, 10)
    assert str(e) == "unexpected character '='; did you mean '=='? (line 3, column 10)"

    source = "f(\n'''line one\nline two''' +\n  )"
    e = error(source)
    assert (e.line, e.column, e.offset) == (4, 3, len(source) - 1)

    e = error("a &&\n")
    assert (e.line, e.column) == (2, 1)


def test_whitespace_and_comments_are_ignored() -> None:
    assert p("a\t&&\r\nb\x0c||c") == "_||_(_&&_(a, b), c)"
    assert p("a // comment\n&& b // trailing") == "_&&_(a, b)"
    assert p("a // a comment with 'quote\n+ 1") == "_+_(a, 1)"
    # a carriage return alone does not end a comment (cel-spec parse tests)
    e = error("a + // c\r b")
    assert e.message == "unexpected end of expression"


def test_node_offsets() -> None:
    node = parse("f(x)  +  a.b[c] ? -1 : [d]")
    assert isinstance(node, Call) and node.function == "_?_:_"
    assert node.offset == 16
    add, neg, lst = node.args
    assert isinstance(add, Call) and add.offset == 6
    call, index = add.args
    assert call.offset == 0
    assert isinstance(index, Call) and index.function == "_[_]" and index.offset == 12
    assert index.args[0] == Select(11, Ident(9, "a"), "b")
    assert neg == Literal(18, -1)
    assert lst == ListLit(23, (Ident(24, "d"),))
    assert parse("!x") == Call(0, "!_", (Ident(1, "x"),))
    assert parse("{1: 2}").offset == 0


# -------------------------------------------------------------------- bounds


def test_expression_length_limit() -> None:
    limits = Limits(max_expression_length=10)
    parse("a" * 10, limits)
    e = error("a" * 11, limits)
    assert e.offset == 10 and "too long" in e.message


@pytest.mark.parametrize("opener", ["(", "!", "-", "[", "a[", "f(", "{1: ", "[[", "x ? y : "])
def test_deep_nesting_is_a_syntax_error_not_a_recursion_error(opener: str) -> None:
    source = opener * 10_000 + "1"
    e = error(source, Limits(max_expression_length=100_000))
    assert "nested too deeply" in e.message
    assert 0 < e.offset < 64 * len(opener) + 5


def test_nesting_limit_boundary() -> None:
    limits = Limits(max_nesting_depth=10)
    parse("(" * 9 + "1" + ")" * 9, limits)
    e = error("(" * 10 + "1" + ")" * 10, limits)
    assert e.offset == 10
    parse("!" * 9 + "x", limits)
    assert error("!" * 10 + "x", limits).offset == 9


def test_long_operator_chains_are_bounded_by_tree_height() -> None:
    limits = Limits(max_nesting_depth=64)
    ok = " || ".join(["a"] * 60)
    parse(ok, limits)
    long = " || ".join(["a"] * 100)
    e = error(long, limits)
    assert "nested too deeply" in e.message
    assert 0 < e.offset < len(long)
    # wide but shallow expressions are fine
    parse("[" + ", ".join(["1"] * 1000) + "]")
    parse("f(" + ", ".join(["x"] * 500) + ")")


def test_huge_limits_still_never_raise_recursion_error() -> None:
    limits = Limits(max_expression_length=10**6, max_nesting_depth=10**6)
    e = error("(" * 100_000 + "1" + ")" * 100_000, limits)
    assert "nested too deeply" in e.message


# -------------------------------------------------------------- conformance


def _conformance_cases() -> list[tuple[str, str]]:
    path = CONFORMANCE / "parse.json"
    if not path.exists():
        return []
    tests = json.loads(path.read_text(encoding="utf-8"))["tests"]
    return [(f"{t['section']}/{t['name']}", t["expr"]) for t in tests]


@pytest.mark.skipif(not (CONFORMANCE / "parse.json").exists(), reason="conformance data absent")
def test_cel_spec_parse_conformance_expressions_all_parse() -> None:
    cases = _conformance_cases()
    assert len(cases) > 200
    failures = []
    for name, source in cases:
        try:
            parse(source)
        except CelSyntaxError as e:
            failures.append((name, e.message))
    assert failures == []


def test_conformance_values_of_string_literals() -> None:
    assert parse("'\\a\\b\\f\\t\\v'") == Literal(0, "\a\b\f\t\v")
    assert parse("b' \\000 \\012 \\177 \\377 '") == Literal(0, b" \x00 \n \x7f \xff ")
    assert parse("'\\U00088888'") == Literal(0, "\U00088888")


# ------------------------------------------------------------------ robustness

CEL_ALPHABET = "ab.xyz_019 ()[]{},:?!-+*/%<>=&|'\"\\`rbu\nne"
TOKENS = [
    "a", "b.c", "1", "2u", "1.5", "'s'", "b'x'", "r'\\'", "true", "null", "in", "(", ")", "[", "]",
    "{", "}", ",", ":", "?", ".", "!", "-", "+", "*", "/", "%", "<", "<=", "==", "!=", "&&",
    "||", "has(", ".all(", ".exists(", ".map(", "x", "if", "M{", "`k`", "'''", "\\", "//",
]  # fmt: skip


def _check(source: str) -> None:
    try:
        node = parse(source)
    except CelSyntaxError as e:
        assert 0 <= e.offset <= len(source)
        assert e.line >= 1 and e.column >= 1
        return
    assert isinstance(node, Node)
    for n in walk(node):
        assert 0 <= n.offset <= len(source)


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_arbitrary_text_parses_or_raises_syntax_error(source: str) -> None:
    _check(source)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=CEL_ALPHABET, max_size=60))
def test_cel_like_text_parses_or_raises_syntax_error(source: str) -> None:
    _check(source)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=40).map(" ".join))
def test_token_soup_parses_or_raises_syntax_error(source: str) -> None:
    _check(source)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["(", "!", "-", "[", "{1:", "a.all(x,", "f("]), min_size=60))
def test_random_deep_openers_raise_syntax_error(openers: list[str]) -> None:
    _check("".join(openers) + "1")


def test_float_values_are_finite_or_rejected() -> None:
    node = parse("1.7976931348623157e308")
    assert isinstance(node, Literal) and math.isfinite(node.value)


# A generated expression and the shape ``sx`` must give for it: parsing arbitrary
# well-formed sources reproduces the structure they were built from.
_NAMES = st.from_regex(r"[a-z_][a-z0-9_]{0,5}", fullmatch=True).filter(
    lambda n: n not in RESERVED_WORDS and n not in ("true", "false", "null", "in")
)
_ATOMS = st.one_of(
    _NAMES.map(lambda n: (n, n)),
    st.integers(0, 2**63 - 1).map(lambda i: (str(i), repr(i))),
    st.integers(-(2**63), -1).map(lambda i: (str(i), repr(i))),
    st.integers(0, 2**64 - 1).map(lambda i: (f"{i}u", repr(UInt(i)))),
    st.floats(allow_nan=False, allow_infinity=False, min_value=0).map(lambda f: (repr(f), repr(f))),
    st.text(max_size=8).map(lambda s: (json.dumps(s, ensure_ascii=False), repr(s))),
    st.binary(max_size=6).map(lambda b: ("b'" + "".join(f"\\x{c:02x}" for c in b) + "'", repr(b))),
)
_BINARY_OPS = ["||", "&&", "<", "<=", ">", ">=", "==", "!=", "in", "+", "-", "*", "/", "%"]


def _combine(children: st.SearchStrategy[tuple[str, str]]) -> st.SearchStrategy[tuple[str, str]]:
    def binary(op: str, a: tuple[str, str], b: tuple[str, str]) -> tuple[str, str]:
        fn = "@in" if op == "in" else f"_{op}_"
        return (f"({a[0]}) {op} ({b[0]})", f"{fn}({a[1]}, {b[1]})")

    return st.one_of(
        st.builds(binary, st.sampled_from(_BINARY_OPS), children, children),
        children.map(lambda a: (f"!({a[0]})", f"!_({a[1]})")),
        children.map(lambda a: (f"-({a[0]})", f"-_({a[1]})")),
        st.tuples(_NAMES, children).map(lambda t: (f"({t[1][0]}).{t[0]}", f"{t[1][1]}.{t[0]}")),
        st.tuples(children, children).map(
            lambda t: (f"({t[0][0]})[{t[1][0]}]", f"_[_]({t[0][1]}, {t[1][1]})")
        ),
        st.lists(children, max_size=3).map(
            lambda xs: (f"f({', '.join(x[0] for x in xs)})", f"f({', '.join(x[1] for x in xs)})")
        ),
        st.lists(children, max_size=3).map(
            lambda xs: (f"[{', '.join(x[0] for x in xs)}]", f"[{', '.join(x[1] for x in xs)}]")
        ),
        st.tuples(children, children, children).map(
            lambda t: (
                f"({t[0][0]}) ? ({t[1][0]}) : ({t[2][0]})",
                f"_?_:_({t[0][1]}, {t[1][1]}, {t[2][1]})",
            )
        ),
    )


@settings(max_examples=200, deadline=None)
@given(st.recursive(_ATOMS, _combine, max_leaves=12))
def test_generated_expressions_parse_to_the_shape_they_were_built_from(
    case: tuple[str, str],
) -> None:
    source, shape = case
    assert p(source) == shape
