"""A hand-written CEL parser producing the tree in ``guardrails.expr.ast``.

Policies are loaded (and re-loaded) as a whole, so parsing thousands of expressions must
stay cheap: the lexer is one compiled regular expression and the parser is a small
recursive-descent / precedence-climbing parser over the token list; an expression
whose token skeleton was parsed twice before is built from a template instead (see
"trees by skeleton" below). It follows the
cel-spec grammar (langdef.md) and cel-go's lexer and macro expansion, so an expression
accepted by cel-go is accepted here with the same meaning.

Node offsets (0-based character index in the source):

* literals, identifiers, lists, maps, struct literals, global calls, unary operators and
  macros written as global calls (``has``): the first character of their first token;
* infix and postfix forms point at their operator, as cel-go does: binary operators at
  the operator, ``?:`` at the ``?``, indexing at the ``[``, field selection and method
  calls (including the comprehension macros) at the field or method name;
* nodes synthesised by macro expansion take the offset of the macro's name.

A parenthesised expression has no node of its own. ``-`` directly before an int or
double literal is folded into the literal (cel-go's grammar has a signed literal), which
is what lets ``-9223372036854775808`` parse; any other ``-`` or ``!`` is kept as a call.

Bounds (``Limits``): the expression length, the parser's recursion (every descent into
a sub-expression and every unary operator counts one level), the height of the
resulting tree (so long operator chains cannot build a tree that later recursion over
it could not handle) and the nesting of comprehension macros inside the predicates of
other macros. Breaking any of them is a ``CelSyntaxError`` at the offending character.
"""

from __future__ import annotations

import re
from typing import Any, Final, NoReturn

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
    TreeShape,
    shape,
)
from guardrails.expr.limits import DEFAULT_LIMITS, Limits
from guardrails.expr.values import INT64_MAX, INT64_MIN, UINT64_MAX, UInt

__all__ = ["ACCUMULATOR", "RESERVED_WORDS", "CelSyntaxError", "parse", "parse_shaped"]

ACCUMULATOR: Final = "__result__"
"""The accumulator variable of expanded macros (cel-go's historical name)."""

RESERVED_WORDS: Final = frozenset(
    {
        "as", "break", "const", "continue", "else", "for", "function", "if", "import",
        "let", "loop", "package", "namespace", "return", "var", "void", "while",
    }
)  # fmt: skip
"""Words that cannot name a variable or global function (they may still be field names)."""


class CelSyntaxError(Exception):
    """An expression that is not valid CEL, or that breaks a load-time bound.

    ``offset`` is the 0-based character index in the expression; ``line`` and
    ``column`` are 1-based and relative to the expression (lines end at ``\\n``), so
    the engine can add where the expression starts in its file.
    """

    def __init__(self, message: str, offset: int, line: int, column: int) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset
        self.line = line
        self.column = column

    def __str__(self) -> str:
        return f"{self.message} (line {self.line}, column {self.column})"


# ---------------------------------------------------------------------------- lexer

_TRIPLE_ESC = r'"""(?:\\[\s\S]|[^\\])*?"""' r"|'''(?:\\[\s\S]|[^\\])*?'''"
_SINGLE_ESC = r'"(?!"")(?:\\[\s\S]|[^\\"\n\r])*"' r"|'(?!'')(?:\\[\s\S]|[^\\'\n\r])*'"
_TRIPLE_RAW = r'"""[\s\S]*?"""' r"|'''[\s\S]*?'''"
_SINGLE_RAW = r'"(?!"")[^"\n\r]*"' r"|'(?!'')[^'\n\r]*'"
_EXP = r"[eE][+-]?[0-9]+"

_TOKEN_RE: Final = re.compile(
    rf"""
    (?P<word>(?![bB]?[rR]?["'])[_a-zA-Z][_a-zA-Z0-9]*)
  | (?P<op>\|\||&&|==|!=|<=|>=|\.(?![0-9])|/(?!/)|[-+*%<>!?:,()\[\]{{}}])
  | (?P<ws>[ \t\n\r\f]+|//[^\n]*)
  | (?P<float>[0-9]+\.[0-9]+(?:{_EXP})?|[0-9]+{_EXP}|\.[0-9]+(?:{_EXP})?)
  | (?P<uint>(?:0x[0-9a-fA-F]+|[0-9]+)[uU])
  | (?P<int>0x[0-9a-fA-F]+|[0-9]+)
  | (?P<raw>[bB]?[rR](?:{_TRIPLE_RAW}|{_SINGLE_RAW}))
  | (?P<str>[bB]?(?:{_TRIPLE_ESC}|{_SINGLE_ESC}))
  | (?P<unterminated>[bB]?[rR]?(?:\"\"\"|'''|"|'))
  | (?P<quoted>`[_a-zA-Z0-9./\- ]+`)
  | (?P<bad>[\s\S])
    """,
    re.VERBOSE,
)
"""One token per match. The commonest tokens (words, operators) come first, so most are
found by the first or second alternative; each is written so that it never takes what a
later alternative would take in cel-go's order, the order before (a word is not the
``b``/``r`` prefix of a string literal, ``.`` not the start of ``.5``, ``/`` not of a
``//`` comment): tests/test_expr_lexer.py compares the two on generated and real texts."""

_ESCAPE_RE: Final = re.compile(
    r"""\\(?:
        (?P<simple>[abfnrtv"'\\?`])
      | [xX](?P<hex>[0-9a-fA-F]{2})
      | u(?P<u4>[0-9a-fA-F]{4})
      | U(?P<u8>[0-9a-fA-F]{8})
      | (?P<oct>[0-3][0-7]{2})
      | (?P<bad>[\s\S])
    )""",
    re.VERBOSE,
)

_SIMPLE_ESCAPES: Final = {
    "a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
    '"': '"', "'": "'", "\\": "\\", "?": "?", "`": "`",
}  # fmt: skip

_KEYWORDS: Final = {"true": "lit", "false": "lit", "null": "lit", "in": "in"}
_KEYWORD_VALUES: Final = {"true": True, "false": False, "null": None}

_HINTS: Final = {"=": "'=='", "&": "'&&'", "|": "'||'"}

# Kinds of token: an operator's kind is its own text ("&&", "(", ...); otherwise
# "lit" (value is the literal's value), "int" and "float" (value is the unsigned
# number, range-checked by the parser so a leading '-' can be folded in), "word"
# (identifiers, reserved words too), "quoted" (a backquoted field name such as
# `content-type`, only valid after '.' and as a struct field name), "in", "eof".


class _Lexed:
    __slots__ = ("kinds", "offsets", "values", "words")

    def __init__(self) -> None:
        self.kinds: list[str] = []
        self.values: list[object] = []
        self.offsets: list[int] = []
        self.words: list[str] = []
        """The text of every word and backquoted name, in order (for ``_skeleton``)."""


def _tokenize(src: str, fail: _Fail) -> _Lexed:
    out = _Lexed()
    kinds = out.kinds
    values = out.values
    offsets = out.offsets
    words = out.words
    for m in _TOKEN_RE.finditer(src):
        group = m.lastgroup or "bad"
        if group == "ws":
            continue
        text = m.group()
        start = m.start()
        if group == "op":
            kinds.append(text)
            values.append(text)
        elif group == "word":
            kind = _KEYWORDS.get(text, "word")
            kinds.append(kind)
            values.append(_KEYWORD_VALUES.get(text, text))
            words.append(text)
        elif group == "int":
            kinds.append("int")
            values.append(_int_value(text, start, fail))
        elif group == "str":
            kinds.append("lit")
            values.append(_decode_string(text, start, fail))
        elif group == "float":
            kinds.append("float")
            values.append(float(text))
        elif group == "uint":
            value = _int_value(text[:-1], start, fail)
            if value > UINT64_MAX:
                fail.at("unsigned integer literal out of range", start)
            kinds.append("lit")
            values.append(UInt(value))
        elif group == "raw":
            kinds.append("lit")
            values.append(_decode_raw(text, start, fail))
        elif group == "quoted":
            kinds.append("quoted")
            values.append(text[1:-1])
            words.append(text)
        elif group == "unterminated":
            fail.at("unterminated string", start)
        else:
            hint = _HINTS.get(text)
            if hint is not None:
                fail.at(f"unexpected character {text!r}; did you mean {hint}?", start)
            fail.at(f"unexpected character {text!r}", start)
        offsets.append(start)
    kinds.append("eof")
    values.append(None)
    offsets.append(len(src))
    return out


def _int_value(text: str, start: int, fail: _Fail) -> int:
    # Longer than any uint64 (20 digits, 16 hex digits) is out of range anyway, and
    # checking first keeps int() away from huge digit strings.
    if text.startswith("0x"):
        if len(text) > 2 + 16 + 16:
            fail.at("integer literal out of range", start)
        return int(text[2:], 16)
    if len(text) > 40:
        fail.at("integer literal out of range", start)
    return int(text)


def _decode_raw(text: str, start: int, fail: _Fail) -> str | bytes:
    is_bytes = text[0] in "bB"
    body_start = 2 if is_bytes else 1
    q = 3 if text.startswith(('"""', "'''"), body_start) and len(text) - body_start >= 6 else 1
    body = text[body_start + q : len(text) - q]
    if is_bytes:
        return _utf8(body, start, fail)
    return body


def _utf8(text: str, start: int, fail: _Fail) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        fail.at("bytes literal contains a surrogate code point", start)


def _decode_string(text: str, start: int, fail: _Fail) -> str | bytes:
    is_bytes = text[0] in "bB"
    body_start = 1 if is_bytes else 0
    q = 3 if text.startswith(('"""', "'''"), body_start) and len(text) - body_start >= 6 else 1
    first = body_start + q
    body = text[first : len(text) - q]
    if "\\" not in body:
        return _utf8(body, start, fail) if is_bytes else body
    base = start + first
    if is_bytes:
        return _unescape_bytes(body, base, fail)
    return _unescape_str(body, base, fail)


def _bad_escape(text: str) -> str:
    if text.isprintable():
        return f"invalid escape sequence {text}"
    return f"invalid escape sequence: backslash followed by {text[1:]!r}"


def _unescape_str(body: str, base: int, fail: _Fail) -> str:
    parts: list[str] = []
    pos = 0
    for m in _ESCAPE_RE.finditer(body):
        parts.append(body[pos : m.start()])
        pos = m.end()
        group = m.lastgroup or "bad"
        if group == "simple":
            parts.append(_SIMPLE_ESCAPES[m.group(group)])
        elif group == "bad":
            fail.at(_bad_escape(m.group()), base + m.start())
        else:
            digits = m.group(group)
            code = int(digits, 8 if group == "oct" else 16)
            if 0xD800 <= code <= 0xDFFF or code > 0x10FFFF:
                fail.at(f"invalid code point in escape sequence {m.group()}", base + m.start())
            parts.append(chr(code))
    parts.append(body[pos:])
    return "".join(parts)


def _unescape_bytes(body: str, base: int, fail: _Fail) -> bytes:
    out = bytearray()
    pos = 0
    for m in _ESCAPE_RE.finditer(body):
        out += _utf8(body[pos : m.start()], base + pos, fail)
        pos = m.end()
        group = m.lastgroup or "bad"
        if group == "simple":
            out += _SIMPLE_ESCAPES[m.group(group)].encode("ascii")
        elif group == "hex":
            out.append(int(m.group(group), 16))
        elif group == "oct":
            out.append(int(m.group(group), 8))
        elif group == "bad":
            fail.at(_bad_escape(m.group()), base + m.start())
        else:
            fail.at(
                f"unicode escape sequence {m.group()[:2]} is not allowed in bytes literals",
                base + m.start(),
            )
    out += _utf8(body[pos:], base + pos, fail)
    return bytes(out)


class _Fail:
    """Turns an offset into a ``CelSyntaxError`` with the line and column."""

    __slots__ = ("src",)

    def __init__(self, src: str) -> None:
        self.src = src

    def at(self, message: str, offset: int) -> NoReturn:
        raise _error(self.src, message, offset)


def _error(src: str, message: str, offset: int) -> CelSyntaxError:
    line = src.count("\n", 0, offset) + 1
    column = offset - (src.rfind("\n", 0, offset) + 1) + 1
    return CelSyntaxError(message, offset, line, column)


# --------------------------------------------------------------------------- parser

_BINARY_PREC: Final = {
    "||": 1, "&&": 2,
    "<": 3, "<=": 3, ">": 3, ">=": 3, "==": 3, "!=": 3, "in": 3,
    "+": 4, "-": 4, "*": 5, "/": 5, "%": 5,
}  # fmt: skip
_BINARY_FUNC: Final = {
    "||": "_||_", "&&": "_&&_", "<": "_<_", "<=": "_<=_", ">": "_>_", ">=": "_>=_",
    "==": "_==_", "!=": "_!=_", "in": "@in", "+": "_+_", "-": "_-_", "*": "_*_",
    "/": "_/_", "%": "_%_",
}  # fmt: skip

_COMPREHENSION_MACROS: Final = frozenset(
    {"all", "exists", "exists_one", "map", "filter", "optMap", "optFlatMap", "existsOne",
     "transformList", "transformMap", "transformMapEntry"})
_MACRO_ARITY: Final = {
    "all": (2, 3),
    "exists": (2, 3),
    "exists_one": (2,),
    "map": (2, 3),
    "filter": (2,),
    "optMap": (2,),
    "optFlatMap": (2,),
    "existsOne": (3,),
    "transformList": (3, 4),
    "transformMap": (3, 4),
    "transformMapEntry": (3, 4),
}
_TWO_VARIABLE: Final = frozenset(
    {"existsOne", "transformList", "transformMap", "transformMapEntry"})
"""cel-go's two-variable comprehension macros (``all`` and ``exists`` take two variables
when called with three arguments)."""


def _describe(kind: str, value: object) -> str:
    if kind == "eof":
        return "end of expression"
    if kind in ("word", "in"):
        return f"'{value}'"
    if kind == "quoted":
        return f"'`{value}`'"
    if kind in ("lit", "int", "float"):
        text = repr(value)
        if len(text) > 20:
            text = text[:17] + "..."
        return f"literal {text}"
    return f"'{kind}'"


class _Parser:
    __slots__ = (
        "comprehension_depth",
        "depth",
        "fail",
        "kinds",
        "limits",
        "offsets",
        "pos",
        "values",
    )

    def __init__(self, lexed: _Lexed, fail: _Fail, limits: Limits) -> None:
        self.kinds = lexed.kinds
        self.values = lexed.values
        self.offsets = lexed.offsets
        self.pos = 0
        self.depth = 0
        self.comprehension_depth = 0
        self.fail = fail
        self.limits = limits

    # -- helpers

    def unexpected(self) -> NoReturn:
        pos = self.pos
        kind = self.kinds[pos]
        if kind == "eof":
            self.fail.at("unexpected end of expression", self.offsets[pos])
        self.fail.at(f"unexpected token {_describe(kind, self.values[pos])}"
                     f"{self.word_hint(pos)}", self.offsets[pos])

    def word_hint(self, pos: int) -> str:
        """Words from Python, SQL or Rego where CEL has operators: ``and``, ``or``,
        ``not``, ``x not in y``."""
        value = self.values[pos]
        before = self.values[pos - 1] if pos > 0 and self.kinds[pos - 1] == "word" else None
        if self.kinds[pos] == "word" and value in ("and", "or"):
            return " (CEL writes 'and' as && and 'or' as ||)"
        if (self.kinds[pos] == "word" and value == "not") or before == "not":
            return " (CEL writes 'not' as !: !(x in list), !has(args.x))"
        if self.kinds[pos] == "word" and str(value).lower() == "like":
            return (" (SQL's and Cedar's LIKE: write x.startsWith(p), x.endsWith(s), "
                    "x.contains(t) or x.matches(regex))")
        if self.kinds[pos] == "word" and str(value).lower() == "is":
            return (" (SQL's IS NULL is == null; an argument left out is tested with "
                    "!has(args.x))")
        if self.kinds[pos] == "word" and value == "has":
            return " (Cedar's 'x has y' is has(x.y) here)"
        if self.kinds[pos] == "/" and (pos == 0 or self.kinds[pos - 1] in ("(", ",")):
            return (" (CEL has no regex literals: write the pattern as a string, "
                    "x.matches(\"^a.*\"))")
        return ""

    def expect(self, kind: str, what: str, hint: str = "") -> None:
        pos = self.pos
        if self.kinds[pos] != kind:
            found = _describe(self.kinds[pos], self.values[pos])
            if self.kinds[pos] == ":" and self.kinds[pos + 1] == ":":
                hint = (" (Cedar's entities such as Group::\"admins\" do not exist here: "
                        "the caller is principal, as the host passes it, e.g. \"admins\" in "
                        "principal.groups)")
            self.fail.at(f"expected {what}, found {found}{hint}", self.offsets[pos])
        self.pos = pos + 1

    def enter(self) -> None:
        self.depth += 1
        if self.depth > self.limits.max_nesting_depth:
            self.fail.at(
                f"expression nested too deeply (more than {self.limits.max_nesting_depth} levels)",
                self.offsets[self.pos],
            )

    @staticmethod
    def optional_call(offset: int, name: str, args: tuple[Node, ...]) -> Node:
        """The optional syntax as a call of the optional library (see lib_optional)."""
        return Call(offset, name, args, Ident(offset, "optional"))

    # -- grammar

    def expr(self) -> Node:
        """Expr = ConditionalOr ["?" ConditionalOr ":" Expr]"""
        self.enter()
        node = self.binary(1)
        if self.kinds[self.pos] == "?":
            offset = self.offsets[self.pos]
            self.pos += 1
            then = self.binary(1)
            self.expect(":", "':'")
            otherwise = self.expr()
            node = Call(offset, "_?_:_", (node, then, otherwise))
        self.depth -= 1
        return node

    def binary(self, min_prec: int) -> Node:
        left = self.unary()
        kinds = self.kinds
        while True:
            kind = kinds[self.pos]
            prec = _BINARY_PREC.get(kind)
            if prec is None or prec < min_prec:
                return left
            offset = self.offsets[self.pos]
            self.pos += 1
            right = self.binary(prec + 1)
            left = Call(offset, _BINARY_FUNC[kind], (left, right))

    def unary(self) -> Node:
        kinds = self.kinds
        op = kinds[self.pos]
        if op != "!" and op != "-":
            return self.member(self.primary())
        ops: list[int] = []
        while kinds[self.pos] == op:
            self.enter()
            ops.append(self.offsets[self.pos])
            self.pos += 1
        pos = self.pos
        nxt = kinds[pos]
        if nxt in ("!", "-"):
            self.fail.at(
                f"unexpected token '{nxt}': write {op}({nxt}...) to combine unary operators",
                self.offsets[pos],
            )
        if op == "-" and (nxt == "int" or nxt == "float"):
            # cel-go's signed literal: fold the innermost '-' into the number.
            offset = ops.pop()
            self.depth -= 1
            value = self.values[pos]
            assert isinstance(value, (int, float))
            self.pos = pos + 1
            operand = self.member(self.number(-value, offset))
        else:
            operand = self.member(self.primary())
        function = "!_" if op == "!" else "-_"
        for offset in reversed(ops):
            operand = Call(offset, function, (operand,))
        self.depth -= len(ops)
        return operand

    def number(self, value: int | float, offset: int) -> Literal:
        if type(value) is int and not INT64_MIN <= value <= INT64_MAX:
            self.fail.at("integer literal out of range", offset)
        if value in (float("inf"), float("-inf")):
            self.fail.at("double literal out of range", offset)
        return Literal(offset, value)

    def member(self, node: Node) -> Node:
        kinds = self.kinds
        while True:
            kind = kinds[self.pos]
            if kind == ".":
                self.pos += 1
                pos = self.pos
                optional = kinds[pos] == "?"
                if optional:
                    pos += 1
                if kinds[pos] != "word" and kinds[pos] != "quoted":
                    found = _describe(kinds[pos], self.values[pos])
                    self.fail.at(
                        f"expected a field name after '.', found {found}", self.offsets[pos]
                    )
                name = self.values[pos]
                assert isinstance(name, str)
                offset = self.offsets[pos]
                self.pos = pos + 1
                if optional:
                    node = self.optional_call(offset, "@select", (node, Literal(offset, name)))
                elif kinds[self.pos] == "(":
                    node = self.method_call(node, name, offset)
                else:
                    node = Select(offset, node, name)
            elif kind == "[":
                offset = self.offsets[self.pos]
                self.pos += 1
                optional = kinds[self.pos] == "?"
                if optional:
                    self.pos += 1
                index = self.expr()
                self.expect("]", "']'", " (CEL has no slices: s.substring(i, j), "
                            "s.startsWith(p), s.endsWith(s2))" if self.kinds[self.pos] == ":"
                            else "")
                if optional:
                    node = self.optional_call(offset, "@index", (node, index))
                else:
                    node = Call(offset, "_[_]", (node, index))
            else:
                return node

    def method_call(self, target: Node, name: str, offset: int) -> Node:
        macro = name in _COMPREHENSION_MACROS
        if macro:
            self.comprehension_depth += 1
        args = self.arguments()
        if macro:
            self.comprehension_depth -= 1
            if len(args) in _MACRO_ARITY[name]:
                return self.expand(name, target, args, offset)
        return Call(offset, name, args, target)

    def arguments(self) -> tuple[Node, ...]:
        self.pos += 1  # the '('
        args: list[Node] = []
        if self.kinds[self.pos] != ")":
            while True:
                args.append(self.expr())
                if self.kinds[self.pos] != ",":
                    break
                self.pos += 1
        self.expect(")", "',' or ')'", " (no generator expressions: write "
                    "list.exists(x, condition) for any(), list.all(x, condition) for all())"
                    if self.kinds[self.pos] == "word" and self.values[self.pos] == "for"
                    else "")
        return tuple(args)

    def primary(self) -> Node:
        pos = self.pos
        kind = self.kinds[pos]
        offset = self.offsets[pos]
        if kind == "word":
            return self.identifier(pos, "")
        if kind == "lit":
            self.pos = pos + 1
            return Literal(offset, self.values[pos])
        if kind == "int" or kind == "float":
            self.pos = pos + 1
            value = self.values[pos]
            assert isinstance(value, (int, float))
            return self.number(value, offset)
        if kind == "(":
            self.pos = pos + 1
            node = self.expr()
            self.expect(")", "')'", " (a list is written in brackets: x in [\"a\", \"b\"])"
                        if self.kinds[self.pos] == "," else "")
            return node
        if kind == "[":
            return self.list_literal()
        if kind == "{":
            return self.map_literal()
        if kind == "." and self.kinds[pos + 1] == "word":
            self.pos = pos + 1
            return self.identifier(pos + 1, ".")
        self.unexpected()

    def identifier(self, pos: int, prefix: str) -> Node:
        """``[.]IDENT``, ``[.]IDENT(args)`` or ``[.]A.B.C{fields}``; ``pos`` is the IDENT."""
        kinds = self.kinds
        name = self.values[pos]
        assert isinstance(name, str)
        start = self.offsets[pos - 1] if prefix else self.offsets[pos]
        if name in RESERVED_WORDS:
            self.fail.at(
                f"reserved word '{name}' cannot be used as an identifier", self.offsets[pos]
            )
        nxt = kinds[pos + 1]
        if nxt == "(":
            self.pos = pos + 1
            args = self.arguments()
            if name == "has" and len(args) == 1 and not prefix:
                arg = args[0]
                if not isinstance(arg, Select) or arg.test_only:
                    self.fail.at(
                        "invalid argument to has() macro: expected a field selection"
                        + _has_hint(arg), arg.offset
                    )
                return Select(start, arg.operand, arg.field, test_only=True)
            return Call(start, name, args)
        if nxt == "{" or nxt == ".":
            # A struct literal's type name is a dotted name directly followed by '{'.
            end = pos + 1
            while kinds[end] == "." and kinds[end + 1] == "word":
                end += 2
            if kinds[end] == "{":
                type_name = prefix + ".".join(str(self.values[i]) for i in range(pos, end, 2))
                self.pos = end
                return self.struct_literal(start, type_name)
        self.pos = pos + 1
        return Ident(start, name)

    def list_literal(self) -> Node:
        offset = self.offsets[self.pos]
        self.pos += 1
        elements: list[Node] = []
        mask = ""
        kinds = self.kinds
        while kinds[self.pos] != "]":
            optional = kinds[self.pos] == "?"
            if optional:
                self.pos += 1
            mask += "1" if optional else "0"
            elements.append(self.expr())
            if kinds[self.pos] != ",":
                break
            self.pos += 1
        self.expect("]", "',' or ']'")
        if "1" in mask:
            return self.optional_call(offset, "@list", (Literal(offset, mask), *elements))
        return ListLit(offset, tuple(elements))

    def map_literal(self) -> Node:
        offset = self.offsets[self.pos]
        self.pos += 1
        entries: list[tuple[Node, Node]] = []
        mask = ""
        kinds = self.kinds
        while kinds[self.pos] != "}":
            optional = kinds[self.pos] == "?"
            if optional:
                self.pos += 1
            mask += "1" if optional else "0"
            key = self.expr()
            self.expect(":", "':'")
            entries.append((key, self.expr()))
            if kinds[self.pos] != ",":
                break
            self.pos += 1
        self.expect("}", "',' or '}'")
        if "1" in mask:
            flat = tuple(n for entry in entries for n in entry)
            return self.optional_call(offset, "@map", (Literal(offset, mask), *flat))
        return MapLit(offset, tuple(entries))

    def struct_literal(self, offset: int, type_name: str) -> Node:
        self.pos += 1  # the '{'
        fields: list[tuple[str, Node]] = []
        kinds = self.kinds
        while kinds[self.pos] != "}":
            pos = self.pos
            if kinds[pos] == "?":
                self.fail.at("optional fields (?field) of message literals are not supported",
                             self.offsets[pos])
            if kinds[pos] != "word" and kinds[pos] != "quoted":
                found = _describe(kinds[pos], self.values[pos])
                self.fail.at(f"expected a field name, found {found}", self.offsets[pos])
            name = self.values[pos]
            assert isinstance(name, str)
            self.pos = pos + 1
            self.expect(":", "':'")
            fields.append((name, self.expr()))
            if kinds[self.pos] != ",":
                break
            self.pos += 1
        self.expect("}", "',' or '}'")
        return StructLit(offset, type_name, tuple(fields))

    # -- macros

    def expand(self, name: str, target: Node, args: tuple[Node, ...], offset: int) -> Node:
        """Expand a comprehension macro exactly as cel-go's parser/macro.go (and, for two
        variables, ext/comprehensions.go) does."""
        if name in _TWO_VARIABLE or (name in ("all", "exists") and len(args) == 3):
            return self.expand_two(name, target, args, offset)
        var = args[0]
        if not isinstance(var, Ident):
            self.fail.at(
                f"{name}() macro: the iteration variable must be a simple name", var.offset
            )
        if var.name == ACCUMULATOR:
            self.fail.at(
                f"{name}() macro: the iteration variable cannot be named {ACCUMULATOR}", var.offset
            )
        limit = self.limits.max_comprehension_nesting
        if self.comprehension_depth + 1 > limit:
            self.fail.at(f"comprehensions nested too deeply (more than {limit})", offset)
        accu = Ident(offset, ACCUMULATOR)
        true = Literal(offset, True)
        step: Node
        result: Node = accu
        if name in ("optMap", "optFlatMap"):
            # cel-go's optional macros: a comprehension over no element or the one value.
            value = args[1]
            step = (self.optional_call(offset, "of", (value,)) if name == "optMap"
                    else self.optional_call(offset, "@flat", (value,)))
            return Comprehension(
                offset, name, var.name, self.optional_call(offset, "@items", (target,)),
                ACCUMULATOR, self.optional_call(offset, "none", ()), true, step, accu)
        if name == "all":
            init: Node = Literal(offset, True)
            condition: Node = Call(offset, "@not_strictly_false", (accu,))
            step = Call(offset, "_&&_", (accu, args[1]))
        elif name == "exists":
            init = Literal(offset, False)
            condition = Call(offset, "@not_strictly_false", (Call(offset, "!_", (accu,)),))
            step = Call(offset, "_||_", (accu, args[1]))
        elif name == "exists_one":
            init = Literal(offset, 0)
            condition = true
            one = Literal(offset, 1)
            step = Call(offset, "_?_:_", (args[1], Call(offset, "_+_", (accu, one)), accu))
            result = Call(offset, "_==_", (accu, one))
        elif name == "map":
            init = ListLit(offset, ())
            condition = true
            appended = Call(offset, "_+_", (accu, ListLit(offset, (args[-1],))))
            step = appended if len(args) == 2 else Call(offset, "_?_:_", (args[1], appended, accu))
        else:  # filter
            init = ListLit(offset, ())
            condition = true
            appended = Call(offset, "_+_", (accu, ListLit(offset, (Ident(offset, var.name),))))
            step = Call(offset, "_?_:_", (args[1], appended, accu))
        return Comprehension(
            offset, name, var.name, target, ACCUMULATOR, init, condition, step, result
        )

    def expand_two(self, name: str, target: Node, args: tuple[Node, ...], offset: int) -> Node:
        """The two-variable macros: the first variable is the list index or map key, the
        second the element or value. ``transformMap`` and ``transformMapEntry`` collect
        entries in a list the result turns into a map (``cel.@pairsToMap``,
        ``cel.@mergeMaps``), so no step copies a growing map."""
        names: list[str] = []
        for var in args[:2]:
            if not isinstance(var, Ident):
                self.fail.at(
                    f"{name}() macro: the iteration variables must be simple names", var.offset)
            if var.name == ACCUMULATOR:
                self.fail.at(f"{name}() macro: an iteration variable cannot be named "
                             f"{ACCUMULATOR}", var.offset)
            names.append(var.name)
        if names[0] == names[1]:
            self.fail.at(f"{name}() macro: the two iteration variables must differ "
                         f"(both are '{names[0]}')", args[1].offset)
        limit = self.limits.max_comprehension_nesting
        if self.comprehension_depth + 1 > limit:
            self.fail.at(f"comprehensions nested too deeply (more than {limit})", offset)
        accu = Ident(offset, ACCUMULATOR)
        true = Literal(offset, True)
        body = args[2:]
        result: Node = accu
        step: Node
        if name == "all":
            init: Node = Literal(offset, True)
            condition: Node = Call(offset, "@not_strictly_false", (accu,))
            step = Call(offset, "_&&_", (accu, body[0]))
        elif name == "exists":
            init = Literal(offset, False)
            condition = Call(offset, "@not_strictly_false", (Call(offset, "!_", (accu,)),))
            step = Call(offset, "_||_", (accu, body[0]))
        elif name == "existsOne":
            init = Literal(offset, 0)
            condition = true
            one = Literal(offset, 1)
            step = Call(offset, "_?_:_", (body[0], Call(offset, "_+_", (accu, one)), accu))
            result = Call(offset, "_==_", (accu, one))
        else:
            init = ListLit(offset, ())
            condition = true
            value = body[-1]
            if name == "transformMap":
                value = ListLit(offset, (Ident(offset, names[0]), value))
                result = Call(offset, "@pairsToMap", (accu,), Ident(offset, "cel"))
            elif name == "transformMapEntry":
                result = Call(offset, "@mergeMaps", (accu,), Ident(offset, "cel"))
            appended = Call(offset, "_+_", (accu, ListLit(offset, (value,))))
            step = appended if len(body) == 1 else Call(offset, "_?_:_",
                                                        (body[0], appended, accu))
        return Comprehension(offset, name, names[0], target, ACCUMULATOR, init, condition,
                             step, result, names[1])


def _height_offender(root: Node, limit: int) -> Node | None:
    """The first node found deeper than ``limit`` levels, without recursion."""
    stack: list[tuple[Node, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return node
        depth += 1
        if isinstance(node, Call):
            stack.extend((arg, depth) for arg in node.args)
            if node.target is not None:
                stack.append((node.target, depth))
        elif isinstance(node, Select):
            stack.append((node.operand, depth))
        elif isinstance(node, ListLit):
            stack.extend((e, depth) for e in node.elements)
        elif isinstance(node, MapLit):
            for k, v in node.entries:
                stack.append((k, depth))
                stack.append((v, depth))
        elif isinstance(node, StructLit):
            stack.extend((v, depth) for _, v in node.fields)
        elif isinstance(node, Comprehension):
            stack.extend(
                (child, depth)
                for child in (
                    node.iter_range,
                    node.accu_init,
                    node.loop_condition,
                    node.loop_step,
                    node.result,
                )
            )
    return None


def _has_hint(arg: Node) -> str:
    """``has(args["cc"])``: the macro takes a field selection, ``in`` tests a key."""
    if (isinstance(arg, Call) and arg.function == "_[_]" and arg.target is None
            and len(arg.args) == 2 and isinstance(arg.args[1], Literal)
            and isinstance(arg.args[1].value, str)):
        key = arg.args[1].value
        of = arg.args[0].name if isinstance(arg.args[0], Ident) else "x"
        written = f"has({of}.{key}) or " if key.isidentifier() else ""
        return f" (to test a key, write {written}\"{key}\" in {of})"
    return ""


def parse(source: str, limits: Limits = DEFAULT_LIMITS) -> Node:
    """Parse one CEL expression into its syntax tree, macros expanded.

    Raises ``CelSyntaxError`` for invalid syntax and for expressions that break the
    load-time bounds in ``limits``; never anything else.
    """
    return parse_shaped(source, limits)[0]


def parse_shaped(source: str, limits: Limits = DEFAULT_LIMITS) -> tuple[Node, TreeShape | None]:
    """``parse``, and the tree's ``ast.shape`` (the front end's cache key): for a tree built
    from a template, from what the template's trees share (``_shape_of``) instead of a walk
    over every node, which was a fifteenth of a 10,000-rule load."""
    fail = _Fail(source)
    if len(source) > limits.max_expression_length:
        fail.at(
            f"expression too long ({len(source)} characters, "
            f"at most {limits.max_expression_length})",
            limits.max_expression_length,
        )
    lexed = _tokenize(source, fail)
    key = (limits, tuple(lexed.kinds), tuple(lexed.words))
    template = _TEMPLATES.get(key)
    if template is not None and template[0] and _fits(template, lexed):
        nodes = _build_nodes(template, lexed.values, lexed.offsets)
        return nodes[-1], _shape_of(template[2], nodes)
    node = _parse_tokens(lexed, fail, limits)
    if template is None:
        if len(_TEMPLATES) >= _TEMPLATES_MAX:
            _TEMPLATES.clear()
        _TEMPLATES[key] = _ONCE
    elif template is _ONCE:  # the second tree of this skeleton: later ones are built
        _TEMPLATES[key] = _template(node, lexed) or _NEVER
    return node, shape(node)


def _parse_tokens(lexed: _Lexed, fail: _Fail, limits: Limits) -> Node:
    """The parser proper, on the tokens of one expression."""
    parser = _Parser(lexed, fail, limits)
    try:
        node = parser.expr()
    except RecursionError:
        # Only reachable when the caller's stack is already deep or the nesting
        # limit is set very high: still a syntax error, never a crash.
        fail.at(
            "expression nested too deeply", lexed.offsets[min(parser.pos, len(lexed.offsets) - 1)]
        )
    if lexed.kinds[parser.pos] != "eof":
        parser.unexpected()
    # A tree is never higher than its token count, so only long expressions need the walk.
    limit = limits.max_nesting_depth
    if len(lexed.kinds) > limit:
        offender = _height_offender(node, limit)
        if offender is not None:
            fail.at(f"expression nested too deeply (more than {limit} levels)", offender.offset)
    return node


# ---------------------------------------------------------------- trees by skeleton
#
# Policy sets repeat expressions that differ only in literals (``args.amount > 100``,
# ``> 250``). What the parser builds depends only on the tokens' kinds and the words'
# texts (the skeleton), never on a literal's value, except that an int must fit int64
# and a double be finite, which ``_fits`` checks. So the third expression of a skeleton
# (the second records the tree) is built from a template of the tree the parser made:
# each node, children first, with its offset as a token index and each literal taken
# from its token, nodes the parser shares (macro expansions) shared again. Any other
# expression, and any error, goes through the parser. tests/test_expr_skeleton.py
# compares both on generated and hostile expressions.

_Step = tuple[Any, ...]


class _Shapes:
    """What ``ast.shape`` gives for a template's trees, learnt from the first one built.

    Its literals are the same steps in every tree (an int or double token, a string,
    bytes or uint one, a fixed value), and its key differs only by their types (a
    ``lit`` token is a string, bytes or a uint): so the key is kept by those types.
    tests/test_expr_skeleton.py compares it with ``ast.shape`` on every family."""

    __slots__ = ("keys", "literals", "unshaped")

    def __init__(self) -> None:
        self.literals: tuple[int, ...] | None = None
        """The steps of the literals ``shape`` lists, in its order (None: not yet learnt)."""
        self.unshaped = False
        """``shape`` does not describe these trees (a message literal, too deep)."""
        self.keys: dict[tuple[type, ...], tuple[object, ...]] = {}


_SHAPE_KEYS_MAX: Final = 64
"""Type combinations kept a template (beyond them, the tree is walked)."""

_Template = tuple[tuple[_Step, ...], tuple[int, ...], _Shapes]
"""The steps that build the tree (the last one is the root), the token indices of
the int and double literals (``_fits``), and the trees' shapes."""

_ONCE: Final[_Template] = ((), (), _Shapes())
"""A skeleton parsed once (no steps: never built from)."""
_NEVER: Final[_Template] = ((), (-1,), _Shapes())
"""A skeleton whose tree ``_template`` cannot describe: always parsed."""
_TEMPLATES: dict[tuple[object, ...], _Template] = {}
"""By (limits, token kinds, words): ``_ONCE``, then the template (or ``_NEVER``) after
the second tree; at most ``_TEMPLATES_MAX`` skeletons, cleared when full."""
_TEMPLATES_MAX: Final = 20_000

_LIT, _NEG, _CONST, _IDENT, _SELECT, _CALL, _LIST, _MAP, _STRUCT, _COMP = range(10)


def _fits(template: _Template, lexed: _Lexed) -> bool:
    """Every int and double literal as the parser requires, with or without a ``-``."""
    values = lexed.values
    for i in template[1]:
        value = values[i]
        if type(value) is int:
            if value > INT64_MAX:
                return False
        elif value in (float("inf"), float("-inf")):
            return False
    return True


def _template(root: Node, lexed: _Lexed) -> _Template | None:
    """The steps that rebuild ``root`` from ``lexed`` (see above), or None when a node's
    offset is not a token's or a literal's value is not its token's: the skeleton is then
    always parsed."""
    at = {offset: i for i, offset in enumerate(lexed.offsets)}
    kinds = lexed.kinds
    values: list[Any] = lexed.values
    steps: list[_Step] = []
    index: dict[int, int] = {}
    numbers: set[int] = {i for i, k in enumerate(kinds) if k == "int" or k == "float"}

    def add(n: Node) -> int:
        found = index.get(id(n))
        if found is not None:
            return found
        tok = at.get(n.offset)
        if tok is None:
            raise _NoTemplate
        step: _Step
        if isinstance(n, Literal):
            if kinds[tok] in ("lit", "int", "float") and n.value is values[tok]:
                step = (_LIT, tok)
            elif (kinds[tok] == "-" and kinds[tok + 1] in ("int", "float")
                  and repr(n.value) == repr(-values[tok + 1])
                  and type(n.value) is type(values[tok + 1])):
                step = (_NEG, tok)
            elif kinds[tok] in ("lit", "int", "float", "-"):
                raise _NoTemplate
            else:
                step = (_CONST, tok, n.value)
        elif isinstance(n, Ident):
            step = (_IDENT, tok, n.name)
        elif isinstance(n, Select):
            step = (_SELECT, tok, add(n.operand), n.field, n.test_only)
        elif isinstance(n, Call):
            target = -1 if n.target is None else add(n.target)
            step = (_CALL, tok, n.function, tuple(add(a) for a in n.args), target)
        elif isinstance(n, ListLit):
            step = (_LIST, tok, tuple(add(e) for e in n.elements))
        elif isinstance(n, MapLit):
            step = (_MAP, tok, tuple((add(k), add(v)) for k, v in n.entries))
        elif isinstance(n, StructLit):
            step = (_STRUCT, tok, n.type_name, tuple((f, add(v)) for f, v in n.fields))
        elif isinstance(n, Comprehension):
            step = (_COMP, tok, n.macro, n.iter_var, add(n.iter_range), n.accu_var,
                    add(n.accu_init), add(n.loop_condition), add(n.loop_step), add(n.result),
                    n.iter_var2)
        else:
            raise _NoTemplate
        index[id(n)] = len(steps)
        steps.append(step)
        return len(steps) - 1

    try:
        add(root)
    except (_NoTemplate, RecursionError):
        return None
    return tuple(steps), tuple(sorted(numbers)), _Shapes()


class _NoTemplate(Exception):
    pass


def _shape_of(shapes: _Shapes, nodes: list[Any]) -> TreeShape | None:
    """``ast.shape`` of the tree whose nodes, one a step, ``_build_nodes`` gave."""
    if shapes.unshaped:
        return None
    if shapes.literals is None:
        found = shape(nodes[-1])
        if found is None:
            shapes.unshaped = True
            return None
        index = {id(n): i for i, n in enumerate(nodes)}
        shapes.literals = tuple(index[id(n)] for n in found[1])
        shapes.keys[tuple(type(n.value) for n in found[1])] = found[0]
        return found
    literals = [nodes[i] for i in shapes.literals]
    types = tuple([type(n.value) for n in literals])
    key = shapes.keys.get(types)
    if key is None:
        found = shape(nodes[-1])
        if found is None:  # not reached: the same steps, other literal types
            return None
        key = found[0]
        if len(shapes.keys) < _SHAPE_KEYS_MAX:
            shapes.keys[types] = key
    return key, literals


def _build_nodes(template: _Template, values: list[Any], offsets: list[int]) -> list[Any]:
    """The nodes of ``template``'s tree, one a step (the root last), with these tokens'
    offsets and literals."""
    nodes: list[Any] = []
    add = nodes.append
    for step in template[0]:
        kind = step[0]
        offset = offsets[step[1]]
        if kind == _CALL:
            target = step[4]
            add(Call(offset, step[2], tuple([nodes[i] for i in step[3]]),
                     None if target < 0 else nodes[target]))
        elif kind == _LIT:
            add(Literal(offset, values[step[1]]))
        elif kind == _SELECT:
            add(Select(offset, nodes[step[2]], step[3], step[4]))
        elif kind == _IDENT:
            add(Ident(offset, step[2]))
        elif kind == _NEG:
            add(Literal(offset, -values[step[1] + 1]))
        elif kind == _CONST:
            add(Literal(offset, step[2]))
        elif kind == _LIST:
            add(ListLit(offset, tuple([nodes[i] for i in step[2]])))
        elif kind == _MAP:
            add(MapLit(offset, tuple([(nodes[k], nodes[v]) for k, v in step[2]])))
        elif kind == _STRUCT:
            add(StructLit(offset, step[2], tuple([(f, nodes[v]) for f, v in step[3]])))
        else:
            add(Comprehension(offset, step[2], step[3], nodes[step[4]], step[5],
                              nodes[step[6]], nodes[step[7]], nodes[step[8]], nodes[step[9]],
                              step[10]))
    return nodes
