"""Tests for the expression library (guardrails.expr.library).

Functions are called directly; a few end-to-end checks go through compile_expression.
Many cases are bypass attempts: a policy must not be fooled by another spelling of the
same host, address, path or address list.
"""

from __future__ import annotations

import contextlib
import datetime
import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guardrails.expr.library import CIDR, FUNCTIONS, IP, METHODS, TYPES, URL, cel_equal
from guardrails.expr.values import CelError, UInt, cel_type

F = FUNCTIONS
M = METHODS


def err(fn: Callable[..., Any], *args: Any) -> str:
    with pytest.raises(CelError) as info:
        fn(*args)
    assert type(info.value) is CelError
    return info.value.message


# --------------------------------------------------------------------------- strings


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [
        ("charAt", ("tacocat", 3), "o"),
        ("charAt", ("tacocat", 7), ""),
        ("charAt", ("©αT", 1), "α"),
        ("indexOf", ("tacocat", ""), 0),
        ("indexOf", ("tacocat", "ac"), 1),
        ("indexOf", ("tacocat", "none"), -1),
        ("indexOf", ("tacocat", "", 3), 3),
        ("indexOf", ("tacocat", "a", 3), 5),
        ("indexOf", ("ta©o©αT", "©", 3), 4),
        ("indexOf", ("ta©o©αT", "©α", 5), -1),
        ("indexOf", ("tacocat", "a", 7), -1),
        ("indexOf", ("", "a"), -1),
        ("lastIndexOf", ("", "@@"), -1),
        ("lastIndexOf", ("tacocat", ""), 7),
        ("lastIndexOf", ("tacocat", "at"), 5),
        ("lastIndexOf", ("tacocat", "", 3), 3),
        ("lastIndexOf", ("tacocat", "a", 3), 1),
        ("lastIndexOf", ("ta©o©αT", "©α", 4), 4),
        ("lastIndexOf", ("hello wello", "ello", 6), 1),
        ("lastIndexOf", ("bananananana", "nana", 7), 6),
        ("lastIndexOf", ("hello wello", "hello wello"), 0),
        ("lowerAscii", ("TacoCÆt Xii",), "tacocÆt xii"),
        ("upperAscii", ("tacoCαt",), "TACOCαT"),
        ("replace", ("{0} days {0} hours", "{0}", "2"), "2 days 2 hours"),
        ("replace", ("hello hello", "he", "we", 1), "wello hello"),
        ("replace", ("hello hello", "he", "we", 0), "hello hello"),
        ("replace", ("hello hello", "he", "we", -1), "wello wello"),
        ("replace", ("ab", "", "x"), "xaxbx"),
        ("split", ("hello world", " "), ["hello", "world"]),
        ("split", ("hello world events!", " ", 0), []),
        ("split", ("hello world events!", " ", 1), ["hello world events!"]),
        ("split", ("hello world events!", " ", 2), ["hello", "world events!"]),
        ("split", ("o©o©o©o", "©", -1), ["o", "o", "o", "o"]),
        ("split", ("abc", ""), ["a", "b", "c"]),
        ("split", ("abc", "", 2), ["a", "bc"]),
        ("split", ("", ""), []),
        ("split", ("", ","), [""]),
        ("substring", ("tacocat", 4), "cat"),
        ("substring", ("tacocat", 7), ""),
        ("substring", ("ta©o©αT", 2, 6), "©o©α"),
        ("trim", (" \f\n\r\t\vtext  ",), "text"),
        ("trim", ("\u0085\u00a0\u1680text\u2028\u2029\u202f\u205f\u3000",), "text"),
        # zero-width characters are not whitespace (cel-go): kept
        ("trim", ("\u200btext\ufeff",), "\u200btext\ufeff"),
        # Python's strip() would remove these; Go's TrimSpace does not
        ("trim", ("\x1ctext\x1f",), "\x1ctext\x1f"),
        ("reverse", ("Ta©oCαt",), "tαCo©aT"),
        ("reverse", ([1, 2, 3],), [3, 2, 1]),
        ("join", (["x", "y"],), "xy"),
        ("join", (("x", "y"), "-"), "x-y"),
        ("join", ([], "-"), ""),
    ],
)
def test_strings_extension(name: str, args: tuple[Any, ...], expected: Any) -> None:
    assert M[name](*args) == expected


@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        ("charAt", ("tacocat", 30), "index out of range: 30"),
        ("charAt", ("tacocat", -1), "index out of range: -1"),
        ("indexOf", ("tacocat", "a", 30), "index out of range: 30"),
        ("indexOf", ("tacocat", "", -1), "index out of range: -1"),
        ("lastIndexOf", ("tacocat", "a", -1), "index out of range: -1"),
        ("lastIndexOf", ("tacocat", "a", 30), "index out of range: 30"),
        ("substring", ("tacocat", 40), "index out of range: 40"),
        ("substring", ("tacocat", -1), "index out of range: -1"),
        ("substring", ("tacocat", 1, 50), "index out of range: 50"),
        ("substring", ("tacocat", 49, 50), "index out of range: 49"),
        ("substring", ("tacocat", 4, 3), "invalid substring range. start: 4, end: 3"),
    ],
)
def test_strings_out_of_range_messages(name: str, args: tuple[Any, ...], message: str) -> None:
    assert err(M[name], *args) == message


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("charAt", (42, 2)),
        ("charAt", ("hello", True)),
        ("indexOf", ("hello", True)),
        ("indexOf", ("42", "4", UInt(0))),
        ("indexOf", ("42", "4", 0, 1)),
        ("replace", ("42", 2, 1)),
        ("replace", ("42", "2", "1", "1")),
        ("replace", ("42", "2", "1", 1, False)),
        ("split", ("42", 2)),
        ("split", ("42", "2", 1.0)),
        ("substring", ("tacocat", True, 3)),
        ("substring", ("hello", 1, 2, 3)),
        ("lowerAscii", (b"ABC",)),
        ("trim", (None,)),
        ("join", (["a", 1],)),
        ("join", ("ab",)),
        ("join", (["a"], 1)),
        ("reverse", (12,)),
        ("lastIndexOf", ("a",)),
    ],
)
def test_strings_type_errors(name: str, args: tuple[Any, ...]) -> None:
    err(M[name], *args)


def test_quadratic_outputs_are_bounded() -> None:
    assert "result longer" in err(M["replace"], "a" * 10_000, "", "b" * 1_000)
    assert "result longer" in err(M["join"], ["a"] * 10_000, "-" * 1_000)
    assert len(M["replace"]("a" * 10_000, "", "b" * 1_000, 3)) == 13_000
    assert M["replace"]("x" * 1000, "x", "yy" * 100) == "yy" * 100_000


def test_join_message_names_the_problem() -> None:
    assert "join" in err(M["join"], ["a", 1])


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        ("first\nsecond", '"first\\nsecond"'),
        ("bell\a", '"bell\\a"'),
        ("\bbackspace", '"\\bbackspace"'),
        ("\fform feed", '"\\fform feed"'),
        ("carriage \r return", '"carriage \\r return"'),
        ("vertical \v tab", '"vertical \\v tab"'),
        ("ends with \\", '"ends with \\\\"'),
        ('mid " quote', '"mid \\" quote"'),
        ("завтра😀", '"завтра😀"'),
        ("", '""'),
        ("lone \ud800 surrogate", '"lone \ufffd surrogate"'),
    ],
)
def test_strings_quote(text: str, quoted: str) -> None:
    assert F["strings.quote"](text) == quoted


@pytest.mark.parametrize(
    ("fmt", "args", "expected"),
    [
        ("no substitution", [], "no substitution"),
        ("%%%s%%", ["text"], "%text%"),
        ("%d %s", [UInt(64), None], "64 null"),
        ("%.3f", [1.2345], "1.234"),
        ("%.0f|%.0f|%.0f", [2.5, 1.5, 3.5001], "2|2|4"),
        ("%f %e", [2, UInt(3)], "2.000000 3.000000e+00"),
        ("%.6e", [1052.032911275], "1.052033e+03"),
        ("%e %d %f", [math.nan, math.inf, -math.inf], "NaN Infinity -Infinity"),
        ("%b %b %b", [5, UInt(64), True], "101 1000000 1"),
        ("%o %x %X", [11, 30, UInt(6000)], "13 1e 1770"),
        ("%x %X", ["Hello", b"byte"], "48656c6c6f 62797465"),
        ("%s", [["abc", 3.14, None, [9, 8]]], "[abc, 3.14, null, [9, 8]]"),
        ("%s", [{"b": b"xyz", "a": True, "c": 2.71828}], "{a: true, b: xyz, c: 2.71828}"),
        ("%s", [datetime.timedelta(hours=1, minutes=45, seconds=47)], "6347s"),
        ("%s", [datetime.datetime(2023, 2, 3, 23, 31, 20, tzinfo=datetime.UTC)], "2023-02-03T23:31:20Z"),
        ("%s", [cel_type("x")], "string"),
    ],
)
def test_strings_format(fmt: str, args: list[Any], expected: str) -> None:
    assert M["format"](fmt, args) == expected


@pytest.mark.parametrize(
    ("fmt", "args", "message"),
    [
        ("%a", [1], 'unrecognized formatting clause "a"'),
        ("%E", [0.5], 'unrecognized formatting clause "E"'),
        ("%d %d %d", [0, 1], "index 2 out of range"),
        ("%b", ["abc"], "only integers and bools can be formatted as binary, was given string"),
        ("%d", [datetime.timedelta(seconds=1)], "was given google.protobuf.Duration"),
        ("%o", [None], "octal clause can only be used on integers, was given null_type"),
        ("%x", [0.5], "can be formatted as hex, was given double"),
        ("%f", [None], "fixed-point clause can only be used on doubles, was given null_type"),
        ("%e", ["1"], "scientific clause can only be used on doubles, was given string"),
        ("%s", [object()], "string clause can only be used on"),
        ("100%", [], "could not parse formatting clause"),
    ],
)
def test_strings_format_errors(fmt: str, args: list[Any], message: str) -> None:
    assert message in err(M["format"], fmt, args)


# --------------------------------------------------------------------------- sets


def test_sets_follow_cel_equality() -> None:
    assert F["sets.contains"]([], [])
    assert not F["sets.contains"]([], [1])
    assert F["sets.contains"]([1, 2, 3, 4], [2, 3])
    assert F["sets.contains"]([1, 2.0, UInt(3)], [1.0, UInt(2), 3])
    assert F["sets.equivalent"]([1], [UInt(1), 1.0])
    assert F["sets.equivalent"]([1, 2, 3], [UInt(3), 2.0, 1])
    assert not F["sets.equivalent"]([1, 2], [1])
    assert not F["sets.intersects"]([1], [])
    assert F["sets.intersects"]([[1], [2, 3]], [[1, 2], [2, 3.0]])
    assert F["sets.contains"](["a", "b"], ("b",))
    assert not F["sets.intersects"](["a"], ["A"])


def test_sets_bool_is_not_a_number() -> None:
    assert not F["sets.contains"]([1], [True])
    assert not F["sets.intersects"]([True], [1])
    assert not F["sets.contains"]([0], [False])
    assert F["sets.contains"]([{"a": 1}], [{"a": 1.0}])
    assert not F["sets.contains"]([{"a": 1}], [{"a": True}])
    assert not F["sets.contains"]([math.nan], [math.nan])


def test_sets_large_scalar_lists_are_fast_and_exact() -> None:
    big = list(range(20_000))
    assert F["sets.contains"](big, [float(x) for x in range(0, 20_000, 7)])
    assert not F["sets.contains"](big, [*big, 20_000.5])
    assert F["sets.intersects"]([*["x"] * 20_000, UInt(5)], [5.0])
    assert not F["sets.intersects"](["1"] * 20_000, [1, True])
    assert F["sets.equivalent"]([b"a", None, False], [False, None, b"a"])


def test_sets_type_errors() -> None:
    err(F["sets.contains"], "ab", ["a"])
    err(F["sets.intersects"], ["a"], {"a": 1})
    err(F["sets.equivalent"], ["a"])


def test_cel_equal_edges() -> None:
    assert cel_equal(1, UInt(1)) and cel_equal(UInt(1), 1.0)
    assert not cel_equal(True, 1) and not cel_equal(1, True)
    assert not cel_equal("1", 1) and not cel_equal(None, 0) and cel_equal(None, None)
    assert cel_equal({1: "a"}, {1.0: "a"})
    assert not cel_equal({1: "a"}, {True: "a"})
    assert not cel_equal([1, 2], [1, 2, 3])
    assert cel_equal(ip_("10.0.0.1"), ip_("10.0.0.1"))
    assert not cel_equal(ip_("10.0.0.1"), "10.0.0.1")
    day = datetime.timedelta(days=1)
    assert cel_equal(day, datetime.timedelta(hours=24)) and not cel_equal(day, 86400)


# --------------------------------------------------------------------------- regex


def test_find_and_find_all_follow_go() -> None:
    assert M["find"]("abc 123", "[0-9]+") == "123"
    assert M["find"]("abc 123", "xyz") == ""
    assert M["find"]("abc 123", "[0-9]*") == ""  # leftmost match is empty, as in Go
    assert M["findAll"]("123 abc 456", "[0-9]+") == ["123", "456"]
    assert M["findAll"]("123 abc 456", "[0-9]+", 1) == ["123"]
    assert M["findAll"]("123 abc 456", "[0-9]+", 0) == []
    assert M["findAll"]("123 abc 456", "xyz") == []
    # Go drops an empty match that directly follows a match.
    assert M["findAll"]("12 ab", "[0-9]*") == ["12", "", "", ""]
    assert M["findAll"]("é😀x", ".") == ["é", "😀", "x"]


def test_regex_is_re2_and_errors_are_cel_errors() -> None:
    assert "invalid regular expression" in err(M["find"], "abc", "(?=a)")  # lookahead: not RE2
    err(M["find"], "abc", "(a")
    err(M["findAll"], "abc", "a{1001}")
    err(M["find"], "abc", 1)
    err(M["findAll"], "abc", "a", "1")
    # Catastrophic backtracking patterns are linear in RE2.
    assert M["find"]("a" * 5000 + "!", "(a+)+$") == ""


# --------------------------------------------------------------------------- parseJSON


def test_parse_json_values() -> None:
    parse = F["parseJSON"]
    assert parse('{"a": [1, 2.5, "x", true, null]}') == {"a": [1, 2.5, "x", True, None]}
    assert type(parse("1")) is int and type(parse("1.0")) is float and type(parse("1e2")) is float
    assert parse('"1,500.00"') == "1,500.00"
    assert parse(" [] ") == []
    assert parse('"\\ud83d\\ude00"') == "😀"  # a valid surrogate pair is one code point
    assert parse(str(2**63 - 1)) == 2**63 - 1


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1, "a": 2}',  # duplicate keys: parsers disagree on which wins
        "NaN",
        "[Infinity]",
        "-Infinity",
        "1e400",
        str(2**63),
        str(-(2**63) - 1),
        "1" * 5000,
        '"\\ud800"',  # lone surrogate
        "[1,]",
        "{'a': 1}",
        "",
        "[" * 33 + "]" * 33,
        '{"a":' * 40 + "1" + "}" * 40,
        "[" * 100_000,
        '"a\x01b"',  # raw control character in a string
    ],
)
def test_parse_json_rejects(text: str) -> None:
    err(F["parseJSON"], text)


def test_parse_json_depth_and_size_bounds() -> None:
    assert F["parseJSON"]("[" * 32 + "]" * 32) is not None
    # brackets inside strings do not count towards depth
    assert F["parseJSON"]('["' + "[" * 100 + '"]') == ["[" * 100]
    err(F["parseJSON"], " " * 1_000_001)
    err(F["parseJSON"], 12)


# --------------------------------------------------------------------------- URL


def url_(s: str) -> URL:
    u = F["url"](s)
    assert type(u) is URL
    return u


def parts(s: str) -> tuple[str, str, str, str, str]:
    u = url_(s)
    return (
        M["getScheme"](u),
        M["getHost"](u),
        M["getHostname"](u),
        M["getPort"](u),
        M["getEscapedPath"](u),
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "https://user:pass@example.com:80/path?query=val#fragment",
            ("https", "example.com:80", "example.com", "80", "/path"),
        ),
        ("/absolute-path", ("", "", "", "", "/absolute-path")),
        ("https://example.com", ("https", "example.com", "example.com", "", "")),
        ("https://[::1]:80/", ("https", "[::1]:80", "::1", "80", "/")),
        ("https://[0:0:0:0:0:0:0:1]/", ("https", "[::1]", "::1", "", "/")),
        ("https://[2001:DB8::1]/", ("https", "[2001:db8::1]", "2001:db8::1", "", "/")),
        ("https://127.0.0.1/", ("https", "127.0.0.1", "127.0.0.1", "", "/")),
        ("https://example.com/path with spaces/", ("https", "example.com", "example.com", "", "/path%20with%20spaces/")),
        # normalisation: case, trailing dot, port spelling, empty port
        ("HTTPS://INTERNAL./x", ("https", "internal", "internal", "", "/x")),
        ("https://Internal:0443/", ("https", "internal:443", "internal", "443", "/")),
        ("https://internal:/", ("https", "internal", "internal", "", "/")),
        # userinfo: the host is what follows the '@'
        ("https://internal@evil.com/", ("https", "evil.com", "evil.com", "", "/")),
        ("https://evil.com:443@internal/", ("https", "internal", "internal", "", "/")),
        # SPEC: scheme-less text is https
        ("www.x.com/a", ("https", "www.x.com", "www.x.com", "", "/a")),
        ("internal", ("https", "internal", "internal", "", "")),
        ("localhost:8080/admin", ("https", "localhost:8080", "localhost", "8080", "/admin")),
        ("[::1]:8080", ("https", "[::1]:8080", "::1", "8080", "")),
        ("10.0.0.1:22", ("https", "10.0.0.1:22", "10.0.0.1", "22", "")),
        ("//evil.com/a", ("", "evil.com", "evil.com", "", "/a")),
        # paths are not decoded nor resolved
        ("https://x.com/%2e%2e/admin", ("https", "x.com", "x.com", "", "/%2e%2e/admin")),
        ("https://x.com/a/../b", ("https", "x.com", "x.com", "", "/a/../b")),
        ("https://x.com/é", ("https", "x.com", "x.com", "", "/%C3%A9")),
        ("file:///etc/passwd", ("file", "", "", "", "/etc/passwd")),
        ("mailto:bob@x.com", ("mailto", "", "", "", "")),
        ("javascript:alert(1)", ("javascript", "", "", "", "")),
    ],
)
def test_url_components(text: str, expected: tuple[str, ...]) -> None:
    assert parts(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "https://a:b:c/",
        "../relative-path",
        # hosts that clients would read as another host
        "https://%69nternal/",
        "https://inter%6eal/",
        "https://ｉｎｔｅｒｎａｌ/",  # fullwidth: IDNA maps it to "internal"
        "https://іnternal/",  # Cyrillic i look-alike
        "https://xn--nternal-bjg.com@ｉｎｔｅｒｎａｌ/",
        "https://good.com\\@evil.com/",
        "https:\\\\evil.com/",
        "/\\evil.com",
        "https://a@b@internal/",
        "http:internal/",
        "https:/internal/",
        "https:///internal/",
        "//",
        "https://internal..",
        "https://a..b/",
        "https://-x.com/",
        "https://x.com:65536/",
        "https://x.com:8o/",
        "https://x.com:١٢/",
        # numeric IPv4 shorthands: inet_aton and browsers read these as 127.0.0.1
        "http://127.1/",
        "http://2130706433/",
        "http://0x7f000001/",
        "http://0x7f.0.0.1/",
        "http://0177.0.0.1/",
        "http://127.0.0.01/",
        "http://1.2.3.4.5/",
        "http://256.1.1.1/",
        "http://foo.0x10/",
        # IPv6 forms
        "https://[::ffff:127.0.0.1]/",
        "https://[::ffff:7f00:1]/",
        "https://[fe80::1%25eth0]/",
        "https://[::1/",
        "https://[::1]x/",
        "https://[1.2.3.4]/",
        # whitespace and control characters
        " https://x.com",
        "https://x.com ",
        "https://x.com\n",
        "https://x\t.com/",
        "https://x.com/\x00",
        "https://x.com/\x7f",
        "https://x.com/\x85",
        "https://x .com/",
        "https://x.com/%zz",
        "https://x.com/%4",
        "https://us er@x.com/",
    ],
)
def test_url_rejects_ambiguous_or_invalid(text: str) -> None:
    err(F["url"], text)
    assert F["isURL"](text) is False


def test_url_value_semantics() -> None:
    a = url_("HTTPS://Example.COM./x")
    b = url_("https://example.com/x")
    assert a == b and hash(a) == hash(b) and str(a) == "https://example.com/x"
    assert url_("https://x.com/a") != url_("https://x.com/b")
    assert cel_type(a) is TYPES["kubernetes.URL"]
    assert str(url_("www.x.com/a")) == "https://www.x.com/a"
    assert str(url_("mailto:bob@x.com")) == "mailto:bob@x.com"
    assert str(url_("file:///etc")) == "file:///etc"
    assert str(url_("https://u:p@x.com:8/p?q=1#f")) == "https://u:p@x.com:8/p?q=1#f"
    assert F["isURL"]("https://example.com/")
    with pytest.raises(AttributeError):
        a.hostname = "evil.com"
    assert F["url"]("https://example.com/x") is F["url"]("https://example.com/x")  # cached


def test_url_query() -> None:
    q = M["getQuery"]
    assert q(url_("https://example.com/path?k1=a&k2=b&k2=c")) == {"k1": ["a"], "k2": ["b", "c"]}
    assert q(url_("https://example.com/path?key with spaces=value with spaces")) == {
        "key with spaces": ["value with spaces"]
    }
    assert q(url_("https://example.com/path?")) == {}
    assert q(url_("https://example.com/path")) == {}
    assert q(url_("https://x.com/?a+b=c%20d&e=%C3%A9")) == {"a b": ["c d"], "e": ["é"]}
    # pairs Go's ParseQuery rejects are dropped
    assert q(url_("https://x.com/?a=1;b=2&bad=%zz&ok")) == {"ok": [""]}
    # backslashes after the path are literal
    assert q(url_("https://x.com/?p=a\\b")) == {"p": ["a\\b"]}


def test_url_methods_type_errors() -> None:
    for name in ("getScheme", "getHost", "getHostname", "getPort", "getEscapedPath", "getQuery"):
        err(M[name], "https://x.com/")
        err(M[name], ip_("10.0.0.1"))
    err(F["url"], None)
    err(F["isURL"], b"https://x.com")


# --------------------------------------------------------------------------- IP / CIDR


def ip_(s: str) -> IP:
    v = F["ip"](s)
    assert type(v) is IP
    return v


def cidr_(s: str) -> CIDR:
    v = F["cidr"](s)
    assert type(v) is CIDR
    return v


@pytest.mark.parametrize(
    "text",
    [
        "192.168.0.1.0",
        "2001:db8:::68",
        "fe80::1%en0",
        "::ffff:192.168.0.1",
        "0177.0.0.1",  # octal
        "2130706433",  # one big number
        "0x7f.0.0.1",
        "127.1",
        "127.000.0.1",
        " 127.0.0.1",
        "127.0.0.1\n",
        "[::1]",
        "١٢٧.0.0.1",
        "",
        "::ffff:01.2.3.4",
    ],
)
def test_ip_rejects(text: str) -> None:
    err(F["ip"], text)
    assert F["isIP"](text) is False


def test_ip_values_and_predicates() -> None:
    assert str(ip_("192.168.0.1")) == "192.168.0.1"
    assert str(ip_("2001:DB8::68")) == "2001:db8::68"
    assert ip_("2001:db8::1") == ip_("2001:DB8::1")
    assert ip_("::") != ip_("::ffff")
    assert cel_type(ip_("::1")) is TYPES["net.IP"]
    assert M["family"](ip_("192.168.0.1")) == 4 and M["family"](ip_("::1")) == 6
    assert M["isUnspecified"](ip_("0.0.0.0")) and M["isUnspecified"](ip_("::"))
    assert not M["isUnspecified"](ip_("127.0.0.1"))
    assert M["isLoopback"](ip_("127.0.0.1")) and M["isLoopback"](ip_("127.255.0.9"))
    assert M["isLoopback"](ip_("::1")) and not M["isLoopback"](ip_("1.2.3.4"))
    assert M["isLinkLocalMulticast"](ip_("224.0.0.1")) and not M["isLinkLocalMulticast"](ip_("224.0.1.1"))
    assert M["isLinkLocalMulticast"](ip_("ff02::1")) and M["isLinkLocalMulticast"](ip_("ff12::1"))
    assert not M["isLinkLocalMulticast"](ip_("fd00::1"))
    assert M["isLinkLocalUnicast"](ip_("169.254.169.254")) and M["isLinkLocalUnicast"](ip_("fe80::1"))
    assert M["isLinkLocalUnicast"](ip_("febf::1")) and not M["isLinkLocalUnicast"](ip_("fec0::1"))
    assert not M["isLinkLocalUnicast"](ip_("fd80::1"))
    assert M["isGlobalUnicast"](ip_("192.168.0.1")) and M["isGlobalUnicast"](ip_("2001:db8::abcd"))
    assert not M["isGlobalUnicast"](ip_("255.255.255.255"))
    assert not M["isGlobalUnicast"](ip_("ff00::1")) and not M["isGlobalUnicast"](ip_("127.0.0.1"))
    assert not M["isGlobalUnicast"](ip_("169.254.1.1")) and not M["isGlobalUnicast"](ip_("::"))
    assert F["ip.isCanonical"]("127.0.0.1") and F["ip.isCanonical"]("2001:db8::abcd")
    assert not F["ip.isCanonical"]("2001:DB8::ABCD")
    assert not F["ip.isCanonical"]("2001:db8::0:0:0:abcd")
    err(F["ip.isCanonical"], "127.0.0.1.0")


@pytest.mark.parametrize(
    ("text", "private"),
    [
        ("10.0.0.1", True),
        ("10.255.255.255", True),
        ("172.16.0.1", True),
        ("172.31.255.255", True),
        ("172.32.0.1", False),
        ("172.15.255.255", False),
        ("192.168.1.1", True),
        ("192.169.0.1", False),
        ("fc00::1", True),
        ("fdff:ffff::1", True),
        ("fe00::1", False),
        ("100.64.0.1", False),  # CGNAT: not private (Go's definition); see docs
        ("127.0.0.1", False),
        ("8.8.8.8", False),
        ("::ffff:a00:1", True),  # hex IPv4-mapped 10.0.0.1 is read as 10.0.0.1
    ],
)
def test_ip_is_private(text: str, private: bool) -> None:
    assert M["isPrivate"](ip_(text)) is private


def test_ipv4_mapped_hex_form_is_the_ipv4_address() -> None:
    mapped = ip_("::ffff:7f00:1")
    assert mapped == ip_("127.0.0.1") and str(mapped) == "127.0.0.1"
    assert M["family"](mapped) == 4 and M["isLoopback"](mapped)
    assert ip_("::ffff:c0a8:1") == ip_("192.168.0.1")
    assert ip_("::ffff:c0a8:1") != ip_("192.168.10.1")


def test_cidr() -> None:
    net = cidr_("192.168.0.0/24")
    assert cel_type(net) is TYPES["net.CIDR"]
    assert M["containsIP"](net, ip_("192.168.0.1")) and not M["containsIP"](net, "192.168.1.1")
    assert M["containsIP"](net, "192.168.0.255")
    assert M["containsCIDR"](net, cidr_("192.168.0.0/25"))
    assert M["containsCIDR"](net, "192.168.0.1/32")
    assert not M["containsCIDR"](net, cidr_("192.168.0.0/23"))
    assert M["containsCIDR"](cidr_("10.0.0.0/8"), "10.0.0.0/8")
    assert not M["containsIP"](cidr_("2001:db8::/32"), ip_("192.168.1.1"))
    assert not M["containsIP"](cidr_("192.168.1.1/32"), ip_("2001:db8::1"))
    assert not M["containsCIDR"](cidr_("0.0.0.0/0"), "::/0")
    assert M["containsIP"](cidr_("0.0.0.0/0"), "8.8.8.8")
    assert M["containsIP"](cidr_("100.64.0.0/10"), "100.127.255.255")
    assert M["ip"](cidr_("192.168.0.1/24")) == ip_("192.168.0.1")
    assert M["masked"](cidr_("192.168.0.1/24")) == cidr_("192.168.0.0/24")
    assert cidr_("192.168.0.1/24") != cidr_("192.168.0.0/24")
    assert M["prefixLength"](cidr_("::1/128")) == 128
    assert str(cidr_("2001:DB8::/32")) == "2001:db8::/32"
    assert M["isMask"](cidr_("10.0.0.0/8")) and not M["isMask"](cidr_("10.0.0.1/8"))
    assert F["isCIDR"]("::1/128") and not F["isCIDR"]("::1/129")


@pytest.mark.parametrize(
    "text",
    [
        "192.168.0.0/",
        "192.168.0.0",
        "192.168.0.0/33",
        "::1/129",
        "10.0.0.0/08",
        "10.0.0.0/+8",
        "10.0.0.0/8/8",
        "fe80::1%en0/24",
        "::ffff:192.168.0.1/24",
        "::ffff:c0a8:1/128",
        "010.0.0.0/8",
        "10.0.0.0/٨",
    ],
)
def test_cidr_rejects(text: str) -> None:
    err(F["cidr"], text)
    assert F["isCIDR"](text) is False


def test_ip_cidr_type_errors() -> None:
    err(F["ip"], 1)
    err(F["isIP"], cidr_("10.0.0.0/8"))
    err(M["isLoopback"], "127.0.0.1")
    err(M["family"], cidr_("10.0.0.0/8"))
    err(M["containsIP"], cidr_("10.0.0.0/8"), 1)
    err(M["containsIP"], "10.0.0.0/8", "10.0.0.1")
    err(M["containsIP"], cidr_("10.0.0.0/8"), "10.0.0.1/32")
    err(M["containsCIDR"], cidr_("10.0.0.0/8"), ip_("10.0.0.1"))
    err(M["ip"], ip_("10.0.0.1"))
    err(M["masked"], "10.0.0.0/8")


# --------------------------------------------------------------------------- paths


@pytest.mark.parametrize(
    ("path", "clean"),
    [
        ("", "."),
        (".", "."),
        ("/", "/"),
        ("//", "/"),
        ("a/b/", "a/b"),
        ("a//b", "a/b"),
        ("/a/./b/.", "/a/b"),
        ("/a/b/..", "/a"),
        ("/..", "/"),
        ("/../etc/passwd", "/etc/passwd"),
        ("a/../..", ".."),
        ("a/../../b", "../b"),
        ("../../x", "../../x"),
        ("/srv/data/../../etc/passwd", "/etc/passwd"),
        ("//srv//data///x", "/srv/data/x"),
        ("a\\..\\b", "a\\..\\b"),  # backslash is an ordinary character in POSIX paths
        ("/srv/%2e%2e/etc", "/srv/%2e%2e/etc"),  # no percent-decoding
        ("...", "..."),
    ],
)
def test_paths_clean(path: str, clean: str) -> None:
    assert F["paths.clean"](path) == clean


@pytest.mark.parametrize(
    ("path", "root", "within"),
    [
        ("/srv/data", "/srv/data", True),
        ("/srv/data/", "/srv/data", True),
        ("/srv/data/a/b", "/srv/data", True),
        ("/srv/data/a/../b", "/srv/data/", True),
        ("/srv/data/../data/x", "/srv/data", True),
        ("/srv/data2", "/srv/data", False),
        ("/srv/data/../secret", "/srv/data", False),
        ("/srv/data/../../etc/passwd", "/srv/data", False),
        ("/srv//data/./x", "/srv/data", True),
        ("/SRV/data/x", "/srv/data", False),  # case-sensitive
        ("srv/data/x", "/srv/data", False),  # relative vs absolute
        ("/srv/data/x", "srv/data", False),
        ("/anything", "/", True),
        ("a/b", ".", True),
        ("", ".", True),
        ("..", ".", False),
        ("../x", ".", False),
        ("a/../../x", ".", False),
        ("docs/a", "docs", True),
        ("docs/../src", "docs", False),
        ("/srv/data/..", "/srv/data", False),
    ],
)
def test_paths_within(path: str, root: str, within: bool) -> None:
    assert F["paths.within"](path, root) is within


@pytest.mark.parametrize(
    ("path", "pattern", "match"),
    [
        ("/srv/a.py", "/srv/*.py", True),
        ("/srv/x/a.py", "/srv/*.py", False),  # * does not cross '/'
        ("/srv/x/a.py", "/srv/**/*.py", True),
        ("/srv/a.py", "/srv/**/*.py", True),  # **/ matches zero directories
        ("/srv/x/y/z/a.py", "/srv/**/*.py", True),
        ("/srv", "/srv/**", True),
        ("/srv/x/y", "/srv/**", True),
        ("/srvx", "/srv/**", False),
        ("/srv/.env", "/srv/*", True),  # * matches dotfiles
        ("/srv/a", "/srv/?", True),
        ("/srv/ab", "/srv/?", False),
        ("/srv/b", "/srv/[a-c]", True),
        ("/srv/d", "/srv/[!a-c]", True),
        ("/srv/b", "/srv/[^a-c]", False),
        ("/srv/*", "/srv/\\*", True),
        ("/srv/a", "/srv/\\*", False),
        ("/srv/x/../a.py", "/srv/*.py", True),  # the path is cleaned first
        ("/srv/../etc/passwd", "/srv/**", False),
        ("/etc/passwd", "**", True),
        ("a/b.txt", "*.txt", False),
        ("a/b.txt", "**.txt", True),
        ("/srv/a.PY", "/srv/*.py", False),
    ],
)
def test_paths_glob(path: str, pattern: str, match: bool) -> None:
    assert F["paths.glob"](path, pattern) is match


def test_paths_errors() -> None:
    for fn, args in [
        (F["paths.clean"], ("a\x00b",)),
        (F["paths.within"], ("/srv/a\x00/../../etc", "/srv")),
        (F["paths.glob"], ("/a", "/[")),
        (F["paths.glob"], ("/a", "/a\\")),
        (F["paths.glob"], ("/a", "/[]")),
        (F["paths.glob"], ("/a/b", "/a[/]b")),
        (F["paths.glob"], ("/a/b", "/a[+-0]b")),  # range containing '/'
        (F["paths.clean"], (None,)),
        (F["paths.within"], ("/a", 1)),
        (F["paths.glob"], (["/a"], "*")),
    ]:
        err(fn, *args)


# --------------------------------------------------------------------------- e-mail


@pytest.mark.parametrize(
    ("addr", "domain"),
    [
        ("bob@example.com", "example.com"),
        ("Bob.Smith+tag@Example.COM", "example.com"),
        ("bob@example.com.", "example.com"),
        ("bob@mail.EXAMPLE.co.uk", "mail.example.co.uk"),
        ('"a@b"@example.com', "example.com"),
        ('"quoted\\"x"@example.com', "example.com"),
        ("x@xn--80ak6aa92e.com", "xn--80ak6aa92e.com"),
        ("a!#$%&'*+/=?^_`{|}~-@example.com", "example.com"),
    ],
)
def test_emails_valid_and_domain(addr: str, domain: str) -> None:
    assert F["emails.valid"](addr) is True
    assert F["emails.domain"](addr) == domain


@pytest.mark.parametrize(
    "addr",
    [
        "",
        "bob",
        "@example.com",
        "bob@",
        "Bob <bob@example.com>",
        "bob@example.com (Bob)",
        "a@evil.com,b@good.com",
        "a@evil.com b@good.com",
        "a@evil.com;b@good.com",
        "a@b@good.com",
        "bob @example.com",
        "bob@ example.com",
        " bob@example.com",
        "bob@example.com\n",
        "bob@exa\x00mple.com",
        "bób@example.com",
        "bob@exämple.com",
        "bob@ｅxample.com",
        "bob@localhost",
        "bob@[127.0.0.1]",
        "bob@127.0.0.1",
        "bob@example..com",
        "bob@-example.com",
        "bob@example.com..",
        ".bob@example.com",
        "bob.@example.com",
        "b..ob@example.com",
        '"a b"@example.com',
        "a" * 65 + "@example.com",
        "bob@" + "a" * 250 + ".com",
        "bob@example.c%6fm",
    ],
)
def test_emails_invalid(addr: str) -> None:
    assert F["emails.valid"](addr) is False
    assert "not a valid e-mail address" in err(F["emails.domain"], addr)


def test_emails_type_errors() -> None:
    err(F["emails.valid"], None)
    err(F["emails.domain"], ["bob@example.com"])


# --------------------------------------------------------------------------- credentials

CREDENTIALS = [
    "AKIAIOSFODNN7EXAMPLE",
    "aws key: ASIAY34FZKBOKMUTVV7A, region us-east-1",
    "ghp_" + "A1b2C3d4E5" * 3 + "f6G7h8",
    "token gho_" + "x" * 36,
    "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVW",
    "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "slack: xoxp-1234-5678-abcdefgh",
    "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "rk_live_" + "51H8abcdefghijklmnopqr",
    "AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe",
    "sk-" + "T3BlbkFJ" * 6,
    "OPENAI_API_KEY=sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z_AbCdEf-GhIjKl",
    "sk-ant-api03-abcDEF123ghiJKL456mnoPQR789stuVWX012yzaBCD",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA...",
    "-----BEGIN PRIVATE KEY-----",
    "-----BEGIN OPENSSH PRIVATE KEY-----",
    "-----BEGIN EC PRIVATE KEY-----",
    "-----BEGIN PGP PRIVATE KEY BLOCK-----",
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    "Authorization: Bearer ya29a0AfH6SMBx3kd8Q2lPqZz9X",
    "postgres://admin:Sup3rS3cret@db.internal:5432/app",
    "password=hunter22",
    "DB_PASSWORD=s3cretValue",
    '{"password": "c0rrect-h0rse"}',
    "api_key: 9f8e7d6c5b4a3210",
    "client_secret = 'Abc-Def-Ghi-Jkl'",
    "export AUTH_TOKEN=abc123def456",
    "secret := \"x9y8z7w6v5\"",
]

PROSE = [
    "",
    "Please pay invoice 4411 to ACME Corp by Friday.",
    "The password is required to log in.",
    "password: Required.",
    "Please reset your password: click the link below",
    "token: not-provided",
    "api_key: ${API_KEY}",
    "password = <your password>",
    "password: ********",
    "secret: xxxxxxxx",
    "password_hash = abcdef123456",
    "We use AKIA prefixes for AWS access keys.",
    "sk-learn-random-forest-classifier-pipeline",
    "use bearer authentication-is-recommended-everywhere",
    "ghp_ tokens are GitHub personal access tokens",
    "The BEGIN PRIVATE KEY marker starts a PEM block",
    "https://example.com/path?user=bob",
    "mailto:bob@example.com",
    "eyJ is how base64 JSON starts",
    "task-management-system-overview-document-2024",
]


@pytest.mark.parametrize("text", CREDENTIALS)
def test_credentials_found(text: str) -> None:
    assert F["credentials.found"](text) is True
    assert F["credentials.found"]("some preamble text. " + text + " trailing words") is True


@pytest.mark.parametrize("text", PROSE)
def test_credentials_not_found_in_prose(text: str) -> None:
    assert F["credentials.found"](text) is False


def test_credentials_type_error_and_large_input() -> None:
    err(F["credentials.found"], {"password": "hunter22"})
    big = "lorem ipsum dolor sit amet " * 40_000
    assert F["credentials.found"](big) is False
    assert F["credentials.found"](big + "AKIAIOSFODNN7EXAMPLE") is True


# --------------------------------------------------------------------------- robustness

ODD_VALUES: list[Any] = [
    None,
    True,
    0,
    -1,
    2**63,
    UInt(1),
    1.5,
    math.nan,
    "",
    "a",
    b"a",
    [],
    ["a"],
    {},
    {"a": 1},
    datetime.timedelta(seconds=1),
    datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC),
    object(),
]


def _call(fn: Callable[..., Any], *args: Any) -> None:
    """Any outcome but a non-CEL exception is fine here."""
    with contextlib.suppress(CelError):
        fn(*args)


@pytest.mark.parametrize("name", sorted(F))
def test_every_function_raises_only_cel_errors_on_odd_arguments(name: str) -> None:
    fn = F[name]
    _call(fn)
    for a in ODD_VALUES:
        _call(fn, a)
        _call(fn, a, a)
        _call(fn, "x", a)
        _call(fn, a, "x", 1, 2)


@pytest.mark.parametrize("name", sorted(M))
def test_every_method_raises_only_cel_errors_on_odd_receivers(name: str) -> None:
    fn = M[name]
    receivers = [*ODD_VALUES, ip_("10.0.0.1"), cidr_("10.0.0.0/8"), url_("https://x.com/")]
    for r in receivers:
        _call(fn, r)
        for a in ODD_VALUES:
            _call(fn, r, a)
            _call(fn, r, "x", a)
            _call(fn, r, a, 1, 2)


ARG = st.one_of(
    st.text(max_size=40),
    st.text(alphabet="/.%@:[]\\*?!-_aZ09 \t\x00", max_size=40),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
)
NAMES = sorted([("F", n) for n in F] + [("M", n) for n in M])


@settings(max_examples=200, deadline=None)
@given(which=st.sampled_from(NAMES), args=st.lists(ARG, min_size=1, max_size=3))
def test_hypothesis_any_string_gives_a_value_or_cel_error(
    which: tuple[str, str], args: list[Any]
) -> None:
    kind, name = which
    fn = F[name] if kind == "F" else M[name]
    _call(fn, *args)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_hypothesis_string_parsers(text: str) -> None:
    for name in ("url", "ip", "cidr", "parseJSON", "paths.clean", "emails.domain"):
        _call(F[name], text)
    for name in ("isURL", "isIP", "isCIDR", "emails.valid", "credentials.found"):
        assert type(F[name](text)) is bool


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab/.", max_size=30), st.text(alphabet="ab/.", max_size=12))
def test_hypothesis_within_agrees_with_clean(path: str, root: str) -> None:
    inside = F["paths.within"](path, root)
    c, r = F["paths.clean"](path), F["paths.clean"](root)
    if inside:
        assert c == r or r in ("/", ".") or c.startswith(r + "/")
        assert ".." not in c.split("/") or r.startswith("..")
    assert F["paths.clean"](c) == c  # idempotent


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="abcAB.-:/[]@%0123456789", min_size=1, max_size=30))
def test_hypothesis_url_hostname_is_normalised(text: str) -> None:
    try:
        u = F["url"](text)
    except CelError:
        return
    host = M["getHostname"](u)
    assert host == host.lower() and not host.endswith(".")
    assert "%" not in host and "@" not in host
    assert F["url"](str(u)) == u  # the normal form parses to itself


# --------------------------------------------------------------------------- end to end


def _evaluate(source: str, **bindings: Any) -> Any:
    from guardrails.expr import compile_expression

    return compile_expression(source, declared=list(bindings)).evaluate(bindings)


@pytest.mark.parametrize(
    ("source", "bindings", "expected"),
    [
        ("url(u).getHostname() == 'internal'", {"u": "https://INTERNAL.:8443/x"}, True),
        ("url(u).getHostname() == 'internal'", {"u": "https://internal@evil.com/"}, False),
        ("ip(url(u).getHostname()).isLoopback()", {"u": "http://127.0.0.1:8080/"}, True),
        ("cidr('10.0.0.0/8').containsIP(h)", {"h": "10.2.3.4"}, True),
        ("paths.within(p, '/srv/data')", {"p": "/srv/data/../../etc/passwd"}, False),
        ("emails.domain(a) == 'example.com'", {"a": "Bob@Example.com"}, True),
        ("credentials.found(s)", {"s": "key AKIAIOSFODNN7EXAMPLE"}, True),
        ("sets.contains(['a', 'b'], l)", {"l": ["b"]}, True),
        ("parseJSON(s).amount", {"s": '{"amount": 12}'}, 12),
        ("s.lowerAscii().trim().split(',')", {"s": " A,B "}, ["a", "b"]),
        ("['x', 'y'].join('-')", {}, "x-y"),
        ("s.find('[0-9]+')", {"s": "order 66"}, "66"),
    ],
)
def test_end_to_end_through_compiler(source: str, bindings: dict[str, Any], expected: Any) -> None:
    assert _evaluate(source, **bindings) == expected


def test_end_to_end_errors_are_cel_errors() -> None:
    from guardrails.expr import CelError as ExprCelError

    with pytest.raises(ExprCelError):
        _evaluate("url(u).getHost() == 'internal'", u="http://2130706433/")
    with pytest.raises(ExprCelError):
        _evaluate("ip(h).isLoopback()", h="0177.0.0.1")
