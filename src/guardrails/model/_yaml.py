"""Strict YAML reading: nodes with positions, safe values only, exact expression offsets.

PyYAML's constructors lose positions and silently keep the last of duplicate keys, so we
compose nodes (``SafeLoader``'s composer, which records ``start_mark`` on every node) and
build values ourselves. Aliases (``*name``) are rejected: policy files are small, an alias
makes a value appear where it is not written, and expanding alias graphs is the classic
"billion laughs" amplification.
"""

from __future__ import annotations

import bisect
import itertools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeGuard

import yaml
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from guardrails.model.errors import Problem
from guardrails.model.source import Expression, Position, Segment

TAG = "tag:yaml.org,2002:"
STR, INT, FLOAT, BOOL, NULL = (TAG + t for t in ("str", "int", "float", "bool", "null"))
TIMESTAMP, MAP, SEQ = TAG + "timestamp", TAG + "map", TAG + "seq"

_LINE_BREAKS = "\n\r\x85\u2028\u2029"
_DQ_ESCAPES = {
    "0": "\0", "a": "\a", "b": "\b", "t": "\t", "\t": "\t", "n": "\n", "v": "\v", "f": "\f",
    "r": "\r", "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\", "N": "\x85",
    "_": "\xa0", "L": "\u2028", "P": "\u2029",
}
_DQ_HEX = {"x": 2, "u": 4, "U": 8}
_CONSTRUCTOR = SafeConstructor()
_LINE_BREAK_RE = re.compile("\r\n|[\n\r\x85\u2028\u2029]")


@dataclass
class SourceFile:
    """One file's text, with a problem list that every reader of its nodes appends to."""

    name: str
    text: str
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    """Likely mistakes that still load (YAML pitfalls); ``guardrails check`` shows them."""
    _line_starts: list[int] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        # Same line-break rule as PyYAML's Reader, so our lines agree with its marks
        # ("\r\n" is one break; a search, not a loop over every character).
        self._line_starts = [0, *(m.end() for m in _LINE_BREAK_RE.finditer(self.text))]

    def line_col(self, index: int) -> tuple[int, int]:
        line = bisect.bisect_right(self._line_starts, index)
        return line, index - self._line_starts[line - 1] + 1

    def at_index(self, index: int) -> Position:
        line, column = self.line_col(index)
        return Position(self.name, line, column)

    def pos(self, node: Node) -> Position:
        return Position(self.name, node.start_mark.line + 1, node.start_mark.column + 1)

    def error(self, where: Node | Position, message: str) -> None:
        p = where if isinstance(where, Position) else self.pos(where)
        self.problems.append(Problem(p.file, p.line, p.column, message))

    def warn(self, where: Node | Position, message: str) -> None:
        p = where if isinstance(where, Position) else self.pos(where)
        self.warnings.append(Problem(p.file, p.line, p.column, message))


MAX_DEPTH = 64
"""Nesting bound for collections: PyYAML's composer recurses, and a few thousand ``[``
would otherwise end in RecursionError instead of a reported problem."""


class _Loader(yaml.SafeLoader):
    """SafeLoader whose composer reports aliases instead of sharing nodes, and bounds
    nesting."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.alias_marks: list[yaml.Mark] = []
        self.depth = 0

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        if self.check_event(AliasEvent):
            event = self.get_event()  # type: ignore[no-untyped-call]
            self.alias_marks.append(event.start_mark)
            return ScalarNode(NULL, "", event.start_mark, event.end_mark)
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise yaml.composer.ComposerError(
                    None, None, f"nesting deeper than {MAX_DEPTH} levels", mark)
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def compose(src: SourceFile) -> list[Node]:
    """The non-empty documents of ``src``; YAML errors go to ``src.problems``.

    libyaml composes about ten times faster than the pure-Python composer, which matters
    for large policy sets; but it shares alias nodes instead of reporting them and has no
    depth bound. So a file it reads with no alias, no error and no deep nesting is taken
    as it is, and any other file is composed again by the pure-Python composer below,
    whose problems carry exact positions.
    """
    fast = _compose_fast(src.text) if yaml.__with_libyaml__ else None
    return fast if fast is not None else _compose_exact(src)


def _holds_a_document(node: Node | None) -> TypeGuard[Node]:
    """Not an empty document (``---`` alone, or only ``~`` or ``null``): skipped, as
    PyYAML's ``safe_load_all`` would give None for it."""
    return node is not None and not (isinstance(node, ScalarNode) and node.tag == NULL
                                     and node.value in ("", "~", "null"))


_PLAIN_TAGS: dict[str, str] = {}
"""The tag of each plain scalar's text (``_CLoader.resolve``), at most ``_PLAIN_TAGS_MAX``."""
_PLAIN_TAGS_MAX = 4096


_C_BASE: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # used only with libyaml


class _CLoader(_C_BASE):  # type: ignore[misc]
    """libyaml's composer, with the tags of plain scalars remembered by text.

    libyaml calls ``resolve`` (Python, a regex per implicit type) for every scalar: a
    large policy set repeats the same keys and words (``name``, ``action``, ``deny``)
    thousands of times. Without path resolvers (``SafeLoader`` has none), the tag of a
    plain scalar depends only on its text, and a quoted one's, a mapping's or a list's
    is the default.
    """

    def resolve(self, kind: type[Node], value: str, implicit: tuple[bool, bool]) -> str:
        if self.yaml_path_resolvers or kind is not ScalarNode:
            return super().resolve(kind, value, implicit)  # type: ignore[no-any-return]
        if not implicit[0]:
            return STR
        tag = _PLAIN_TAGS.get(value)
        if tag is None:
            tag = super().resolve(kind, value, implicit)
            if len(_PLAIN_TAGS) >= _PLAIN_TAGS_MAX:
                _PLAIN_TAGS.clear()
            _PLAIN_TAGS[value] = tag
        return tag


def _compose_fast(text: str) -> list[Node] | None:
    loader = _CLoader(text)
    nodes: list[Node] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if _holds_a_document(node):
                nodes.append(node)
    except Exception:
        return None
    finally:
        loader.dispose()
    # An alias needs a "*" in the text; without one, no node can be shared.
    seen: set[int] | None = set() if "*" in text else None
    for node in nodes:
        if not _plain_tree(node, seen):
            return None  # an alias or deep nesting: let the exact composer report it
    return nodes


def _plain_tree(root: Node, seen: set[int] | None) -> bool:
    """No node reached twice (no alias) and none deeper than MAX_DEPTH (as ``_Loader``;
    the root is at depth 1). A loop, not recursion: it runs over every node of a load."""
    stack = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            return False
        if seen is not None:
            if id(node) in seen:
                return False
            seen.add(id(node))
        if isinstance(node, MappingNode):
            for k, v in node.value:
                stack.append((k, depth + 1))
                stack.append((v, depth + 1))
        elif isinstance(node, SequenceNode):
            stack.extend((v, depth + 1) for v in node.value)
    return True


def _compose_exact(src: SourceFile) -> list[Node]:
    nodes: list[Node] = []
    loader: _Loader | None = None
    try:
        loader = _Loader(src.text)  # checks for unprintable characters first
        while loader.check_node():
            node = loader.get_node()
            if _holds_a_document(node):
                nodes.append(node)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        text = ": ".join(s for s in (e.context, e.problem) if s) or "invalid YAML"
        text += _syntax_hint(e.problem or "")
        where = (Position(src.name, mark.line + 1, mark.column + 1) if mark is not None
                 else Position(src.name, 0, 0))
        src.error(where, f"YAML syntax error: {text}")
    except yaml.reader.ReaderError as e:
        src.error(src.at_index(e.position),
                  f"YAML syntax error: unacceptable character #x{e.character:04x}")
    finally:
        if loader is not None:
            loader.dispose()
    for mark in loader.alias_marks if loader is not None else ():
        src.error(Position(src.name, mark.line + 1, mark.column + 1),
                  "YAML aliases (*name) are not supported: write the value out")
    return nodes


def describe(node: Node) -> str:
    """A node's type the way an author thinks of it, for "expected X, got Y"."""
    if isinstance(node, MappingNode):
        return "a mapping"
    if isinstance(node, SequenceNode):
        return "a list"
    return {STR: "a string", INT: "an integer", FLOAT: "a number", BOOL: "a boolean",
            NULL: "null", TIMESTAMP: "a timestamp"}.get(node.tag, f"a value tagged {node.tag}")


def pairs(src: SourceFile, node: MappingNode) -> list[tuple[str, ScalarNode, Node]]:
    """``(key, key node, value node)`` in file order; reports non-string and duplicate keys.

    Keys are the scalar's text: a plain ``on`` or ``1`` key is the string ``"on"``/``"1"``,
    not YAML 1.1's boolean or integer.
    """
    _check_tag(src, node, MAP)
    seen: dict[str, ScalarNode] = {}
    out: list[tuple[str, ScalarNode, Node]] = []
    for key_node, value_node in node.value:
        if not isinstance(key_node, ScalarNode) or (key_node.tag == NULL and key_node.value in (
                "", "~")):
            src.error(key_node, f"mapping keys must be strings, got {describe(key_node)}")
            continue
        key = key_node.value
        if key_node.tag == "tag:yaml.org,2002:merge":
            src.error(key_node, "YAML merge keys (<<) are not supported: write the fields "
                                "out in each mapping (a policy's shared values go in params "
                                "or a Library)")
            continue
        first = seen.get(key)
        if first is not None:
            src.error(key_node, f"duplicate key '{key}' (first at "
                                f"{first.start_mark.line + 1}:{first.start_mark.column + 1})")
            continue
        seen[key] = key_node
        out.append((key, key_node, value_node))
    return out


def _check_tag(src: SourceFile, node: Node, expected: str) -> bool:
    if node.tag != expected:
        src.error(node, tag_problem(node))
        return False
    return True


def tag_problem(node: Node) -> str:
    """A tag we do not read; an expression written unquoted with a leading ``!``
    (``when: !has(args.x)``) is one, which YAML takes for a tag."""
    text = f"unsupported YAML tag '{node.tag}'"
    if node.tag.startswith("!") and not node.tag.startswith("!!"):
        text += (" (a plain value starting with '!' is a YAML tag: quote the expression, "
                 f"e.g. '{node.tag}{' ' + str(node.value) if isinstance(node, ScalarNode) and node.value else ''}')")
    return text


def to_value(src: SourceFile, node: Node) -> Any:
    """Plain data (dict, list, str, int, float, bool, None) built from ``node``.

    Timestamps stay the text that was written: JSON has no timestamp type and CEL's
    ``timestamp("...")`` reads the text.
    """
    if isinstance(node, MappingNode):
        return {key: to_value(src, value) for key, _, value in pairs(src, node)}
    if isinstance(node, SequenceNode):
        _check_tag(src, node, SEQ)
        return [to_value(src, item) for item in node.value]
    assert isinstance(node, ScalarNode)
    if node.tag in (STR, TIMESTAMP):
        return node.value
    if node.tag == NULL:
        return None
    constructors: dict[str, Callable[[ScalarNode], Any]] = {
        INT: _CONSTRUCTOR.construct_yaml_int,
        FLOAT: _CONSTRUCTOR.construct_yaml_float,
        BOOL: _CONSTRUCTOR.construct_yaml_bool,
    }
    build = constructors.get(node.tag)
    if build is None:
        src.error(node, tag_problem(node))
        return None
    try:
        value = build(node)
    except (ValueError, yaml.YAMLError) as e:
        src.error(node, f"invalid value {node.value!r}: {e}")
        return None
    if isinstance(value, float) and not math.isfinite(value):
        src.error(node, "infinite and NaN numbers are not supported")
        return None
    return value


def expression(src: SourceFile, node: ScalarNode) -> Expression:
    """An ``Expression`` whose offsets map back to ``src`` (see ``Expression``)."""
    text, value, style = src.text, node.value, node.style
    p, end = node.start_mark.index, node.end_mark.index
    if style in ("'", '"'):
        q = text.find(style, p, end)
        p, end = (q + 1 if q >= 0 else p + 1), end - 1
    elif style in ("|", ">"):
        while p < end and text[p] not in _LINE_BREAKS:
            p += 1
        p += 2 if text[p:p + 2] == "\r\n" else 1
    else:
        while p < end and text[p] in "!&":  # tag or anchor properties before the value
            while p < end and text[p] not in " \t" + _LINE_BREAKS:
                p += 1
            while p < end and text[p] in " \t" + _LINE_BREAKS:
                p += 1
    start = min(p, len(text))
    if style not in ("|", ">") and "\n" not in value and text.startswith(value, start):
        # Written as it reads, on one line (the common case): offsets add to the column.
        return Expression(value, src.at_index(start))
    indent = _block_indent(text, start, end, value) if style in ("|", ">") else -1
    indices = _align(text, start, end, value, style, indent)
    if indices is None or not value:
        return Expression(value, src.at_index(start))
    segments: list[Segment] = []
    last = (0, -2)
    for i, index in enumerate(indices):
        line, column = src.line_col(index)
        if not (line == last[0] and column == last[1] + 1):
            segments.append((i, line, column))
        last = (line, column)
    return Expression(value, src.at_index(indices[0]), tuple(segments))


def _block_indent(raw: str, p: int, end: int, value: str) -> int:
    """The indentation of a block scalar's content, from its first non-blank line: that
    line's leading spaces in the file minus those kept in the value (more-indented text)."""
    for raw_line, value_line in zip(raw[p:end].splitlines(), value.splitlines(), strict=False):
        if value_line.strip():
            return (len(raw_line) - len(raw_line.lstrip(" "))) - (
                len(value_line) - len(value_line.lstrip(" ")))
    return 0


def _skip_indent(raw: str, p: int, end: int, indent: int) -> int:
    """Past the indentation YAML drops at a line start: ``indent`` spaces in a block
    scalar, all leading white space in a flow (plain or quoted) scalar (``indent < 0``)."""
    if indent < 0:
        while p < end and raw[p] in " \t":
            p += 1
        return p
    stop = min(p + indent, end)
    while p < stop and raw[p] == " ":
        p += 1
    return p


def _align(raw: str, p: int, end: int, value: str, style: str | None,
           indent: int = -1) -> list[int] | None:
    """Raw index of every character of ``value``, or None when they cannot be matched.

    Walks the raw text once. Between matched characters only what YAML drops may be
    skipped: indentation (exactly ``indent`` columns in a block scalar, so that kept
    leading spaces map to themselves), line breaks, escaped line breaks and the doubled
    quote of ``''``; anything else means our reading of the scalar is wrong, and the
    caller falls back to counting from the start.
    """
    out: list[int] = []
    if indent >= 0:
        p = _skip_indent(raw, p, end, indent)
    for c in value:
        while True:
            if p >= end:
                return None
            r = raw[p]
            if style == '"' and r == "\\":
                decoded, n = _escape(raw, p)
                if decoded == c:
                    out.append(p)
                    p += n
                    break
                if decoded:
                    return None
                p = _skip_indent(raw, p + n, end, indent)  # an escaped line break
                continue
            if style == "'" and r == "'" and raw[p + 1:p + 2] == "'":
                if c != "'":
                    return None
                out.append(p)
                p += 2
                break
            if r == c or (c in " \n" and r in _LINE_BREAKS):
                out.append(p)
                p += 2 if raw[p:p + 2] == "\r\n" else 1
                if r in _LINE_BREAKS:
                    p = _skip_indent(raw, p, end, indent)
                break
            if r not in " \t" + _LINE_BREAKS:
                return None
            p += 2 if raw[p:p + 2] == "\r\n" else 1
            if r in _LINE_BREAKS:
                p = _skip_indent(raw, p, end, indent)
    return out


def _escape(raw: str, p: int) -> tuple[str, int]:
    """The character a double-quoted escape at ``raw[p]`` stands for ('' for an escaped line
    break) and its raw length."""
    c = raw[p + 1:p + 2]
    if c in _DQ_ESCAPES:
        return _DQ_ESCAPES[c], 2
    if c in _DQ_HEX:
        n = _DQ_HEX[c]
        try:
            return chr(int(raw[p + 2:p + 2 + n], 16)), 2 + n
        except ValueError:
            return "", 1
    if c and c in _LINE_BREAKS:
        return "", 3 if raw[p + 1:p + 3] == "\r\n" else 2
    return "", 1


def _syntax_hint(problem: str) -> str:
    """What an author usually did to get this YAML error, and the fix."""
    if "mapping values are not allowed" in problem or "but got ':'" in problem:
        return (" (hint: an unquoted ': ' inside a value starts a mapping; quote the "
                "expression or text, e.g. when: 'a ? b : c')")
    if "expected <block end>, but found '?'" in problem:
        return (" (hint: indentation: a key at the column of a list's '-' ends that item; "
                "indent it to line up with the item's other keys)")
    if "expected <block end>, but found '<block mapping start>'" in problem:
        return (" (hint: indentation: this line is indented differently from the keys "
                "above it; the keys of one mapping must line up exactly, with spaces)")
    if "expected <block end>, but found" in problem or "expected ',' or ']'" in problem:
        return (" (hint: a quote inside a quoted value ends it; wrap the expression in "
                "single quotes and write its strings in double quotes, or write a single "
                "quote inside single quotes as '')")
    if "unknown escape character" in problem:
        return (" (hint: inside double quotes YAML reads backslash escapes; write CEL "
                "expressions and regexes in single quotes, where a backslash is kept)")
    if "found character '\\t'" in problem or "found character '\t'" in problem:
        return " (hint: indent with spaces; YAML does not allow tabs there)"
    return ""


_CONTROL_ESCAPES = {"0": "\\0", "a": "\\a", "b": "\\b", "v": "\\v", "f": "\\f", "e": "\\e"}


def escape_warning(src: SourceFile, node: ScalarNode) -> None:
    """Warn when YAML escapes in a double-quoted scalar made control characters.

    ``"\\bdrop\\b"`` is what an author means; ``"\\b"`` in double quotes is a
    backspace, so a regex or string built from it silently matches nothing. Single
    quotes keep backslashes as written.
    """
    if node.style != '"' or not any((c < " " and c not in "\n\t\r") or c == "\x7f"
                                    for c in node.value):
        return
    raw = src.text[node.start_mark.index:node.end_mark.index]
    at = node.start_mark.index
    offset = next((i for i in range(len(raw) - 1) if raw[i] == "\\"
                   and raw[i + 1] in _CONTROL_ESCAPES), None)
    if offset is None:
        offset = next((i for i in range(len(raw) - 1) if raw[i] == "\\"
                       and raw[i + 1] in "xuU"), 0)
    escape = raw[offset:offset + 2] if raw[offset:offset + 1] == "\\" else "an escape"
    src.warn(src.at_index(at + offset),
             f"in double quotes YAML turns {escape} into a control character, so the "
             f"value does not contain the backslash written here; use single quotes "
             f"(where a backslash is kept) and write a single quote inside as ''")


YAML11_PLAIN = frozenset({"y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on",
                          "On", "ON", "off", "Off", "OFF", "~", ""})
"""Plain scalars PyYAML (YAML 1.1) reads as booleans or null that YAML 1.2 and JSON would
not: ``[prod, staging, no]`` holds ``false``."""


def yaml11_warnings(src: SourceFile, node: Node, where: str) -> None:
    """Warn about YAML 1.1 booleans and nulls written among strings in data."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, SequenceNode):
            values = list(n.value)
        elif isinstance(n, MappingNode):
            values = [v for _, v in n.value]
        else:
            continue
        stack.extend(values)
        if isinstance(n, MappingNode) and n.flow_style:
            _split_number_warning(src, n, where)
        if not any(isinstance(v, ScalarNode) and v.tag == STR for v in values):
            continue
        for v in values:
            if (isinstance(v, ScalarNode) and not v.style and v.tag in (BOOL, NULL)
                    and v.value in YAML11_PLAIN):
                read = "null" if v.tag == NULL else str(_CONSTRUCTOR.construct_yaml_bool(v)).lower()
                text = repr(v.value) if v.value else "an empty value"
                src.warn(v, f"{where}: YAML reads the plain {text} among strings as {read} "
                            f"(YAML 1.1); quote it (\"{v.value}\") if you mean the text")


def _split_number_warning(src: SourceFile, node: MappingNode, where: str) -> None:
    """``{limit: 1,000}``: in a flow mapping the comma separates entries, so YAML reads
    ``limit: 1`` and a key ``000`` with no value."""
    pairs_ = node.value
    for (_, before), (key, value) in itertools.pairwise(pairs_):
        if (isinstance(before, ScalarNode) and before.tag == INT and not before.style
                and isinstance(key, ScalarNode) and not key.style
                and re.fullmatch(r"\d{3}(\.\d+)?", key.value)
                and isinstance(value, ScalarNode) and value.tag == NULL and not value.value):
            src.warn(key, f"{where}: YAML reads '{before.value},{key.value}' in a flow "
                          f"mapping as {before.value} and a key '{key.value}': the comma "
                          f"separates entries; write {before.value}{key.value}")
