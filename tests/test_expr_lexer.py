"""The lexer's token regex against the order it replaced (load19).

``parser._TOKEN_RE`` tries words and operators first, for speed; the order before it
(kept here, as it was) tried white space, numbers and strings first, which is cel-go's
lexer. Both must cut every text into the same tokens of the same kinds: compared on
generated texts (CEL-like and hostile: string prefixes, ``.5``, ``//``, unterminated
quotes, non-ASCII), on every expression of the conformance data and on the library's
policies.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from guardrails.expr import parser

_TRIPLE_ESC = r'"""(?:\\[\s\S]|[^\\])*?"""' r"|'''(?:\\[\s\S]|[^\\])*?'''"
_SINGLE_ESC = r'"(?!"")(?:\\[\s\S]|[^\\"\n\r])*"' r"|'(?!'')(?:\\[\s\S]|[^\\'\n\r])*'"
_TRIPLE_RAW = r'"""[\s\S]*?"""' r"|'''[\s\S]*?'''"
_SINGLE_RAW = r'"(?!"")[^"\n\r]*"' r"|'(?!'')[^'\n\r]*'"
_EXP = r"[eE][+-]?[0-9]+"

OLD_TOKEN_RE = re.compile(
    rf"""
    (?P<ws>[ \t\n\r\f]+|//[^\n]*)
  | (?P<float>[0-9]+\.[0-9]+(?:{_EXP})?|[0-9]+{_EXP}|\.[0-9]+(?:{_EXP})?)
  | (?P<uint>(?:0x[0-9a-fA-F]+|[0-9]+)[uU])
  | (?P<int>0x[0-9a-fA-F]+|[0-9]+)
  | (?P<raw>[bB]?[rR](?:{_TRIPLE_RAW}|{_SINGLE_RAW}))
  | (?P<str>[bB]?(?:{_TRIPLE_ESC}|{_SINGLE_ESC}))
  | (?P<unterminated>[bB]?[rR]?(?:\"\"\"|'''|"|'))
  | (?P<word>[_a-zA-Z][_a-zA-Z0-9]*)
  | (?P<quoted>`[_a-zA-Z0-9./\- ]+`)
  | (?P<op>\|\||&&|==|!=|<=|>=|[-+*/%<>!?:.,()\[\]{{}}])
  | (?P<bad>[\s\S])
    """,
    re.VERBOSE,
)
"""The token regex before load19, exactly."""

ROOT = Path(__file__).resolve().parent.parent


def tokens(regex: re.Pattern[str], text: str) -> list[tuple[str | None, int, int]]:
    return [(m.lastgroup, m.start(), m.end()) for m in regex.finditer(text)]


def assert_same(text: str) -> None:
    assert tokens(parser._TOKEN_RE, text) == tokens(OLD_TOKEN_RE, text), text


# Pieces the two orders could disagree on, glued together in any order.
_PIECES = st.sampled_from([
    "r", "R", "b", "B", "br", "bR", "Rb", "rb", "x", "_a1", "true", "in", "ab", "r2",
    '"', "'", '"""', "'''", '"a\\"', "'\\''", "\\", "\n", "\r", " ", "\t", "\f",
    ".", "..", ".5", "5.", "1.5", "1e5", "1E-3", ".5e+2", "0x1F", "0x", "12u", "0x1u", "7U",
    "/", "//", "/ /", "//c\n", "/*", "*", "|", "||", "&", "&&", "=", "==", "!", "!=", "<",
    "<=", ">", ">=", "?", ":", ",", "(", ")", "[", "]", "{", "}", "-", "+", "%", "`a-b`",
    "`", "é", "\u2028", "\x00", "#", "$", "@", "~", "^", ";",
])


@settings(max_examples=3000, deadline=None)
@given(st.lists(_PIECES, max_size=14).map("".join))
def test_glued_pieces_tokenize_alike(text: str) -> None:
    assert_same(text)


@settings(max_examples=1000, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=60))
def test_any_text_tokenizes_alike(text: str) -> None:
    assert_same(text)


@settings(max_examples=1000, deadline=None)
@given(st.text(alphabet="rRbB\"'`._/ x1e5u-\\\n", max_size=30))
def test_prefix_heavy_text_tokenizes_alike(text: str) -> None:
    assert_same(text)


def _conformance_expressions() -> list[str]:
    out: list[str] = []
    folders = [ROOT / "tests" / "conformance", Path("/work/shared/cel-spec")]
    for folder in folders:
        for f in sorted(folder.glob("*.json")) if folder.is_dir() else ():
            data = json.loads(f.read_text())
            for test in data.get("tests", ()):
                expr = test.get("expr") if isinstance(test, dict) else None
                if isinstance(expr, str):
                    out.append(expr)
    return out


def test_conformance_expressions_tokenize_alike() -> None:
    exprs = _conformance_expressions()
    assert len(exprs) > 1000
    for text in exprs:
        assert_same(text)


def test_library_policies_tokenize_alike() -> None:
    files = [*(ROOT / "policies").rglob("*.yaml"),
             *(ROOT / "src" / "guardrails" / "library").rglob("*.yaml")]
    assert files
    for f in files:
        assert_same(f.read_text())  # whole files: YAML around the CEL is more hostile text
