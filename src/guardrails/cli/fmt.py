"""``guardrails fmt``: one layout for policy files, without changing what they mean.

A conservative formatter: it re-indents the block structure (two spaces per level, list
items indented under their key, one space after a dash) and trims trailing whitespace and
blank lines at the end, and nothing else. Every scalar and every flow collection
(``{...}``, ``[...]``) is copied character for character, so quoting, escapes such as
``\\u200b``, hand-wrapped lists and comments all survive. That matters for policies: CEL
expressions are single-quoted on purpose (YAML double quotes turn ``\\b`` into a
backspace), and a round-tripping YAML library re-quotes, unescapes and re-wraps them.

Two checks make it safe to run over a whole repository: the formatted text must parse
(with the loader's own YAML reader) to exactly the data of the original, and formatting
it again must not change it. A file that fails either is reported and left alone.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

__all__ = ["FormatError", "format_text"]

_STEP = 2


@dataclass(frozen=True)
class FormatError(Exception):
    """A file ``fmt`` will not touch: broken YAML, or a layout it cannot re-indent safely."""

    file: str
    line: int
    column: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}: {self.message}"


@dataclass(frozen=True, slots=True)
class _Shift:
    """How one line that starts a key or a list item moves."""

    delta: int
    """Columns added at the start of the line (negative: removed)."""
    gap_at: int = -1
    """For ``-   item``: the column where the item starts after the dash, else -1."""

    def apply(self, line: str) -> str:
        lead = len(line) - len(line.lstrip(" "))
        if self.gap_at < 0:
            return " " * (lead + self.delta) + line[lead:]
        return " " * (lead + self.delta) + "- " + line[self.gap_at:]

    def continuation(self, lead: int) -> int:
        """The shift of the lines that continue this line's value (scalars, flows)."""
        return self.delta + (lead + _STEP - self.gap_at if self.gap_at >= 0 else 0)


class _Unsupported(Exception):
    pass


def format_text(text: str, file: str = "<text>") -> str:
    """``text`` in the canonical layout; raises ``FormatError`` rather than change meaning."""
    text = text.replace("\r\n", "\n")
    try:
        documents = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (0, 0)
        raise FormatError(file, line, column,
                          f"invalid YAML: {e.problem or e.context or 'cannot parse'}") from None
    except yaml.YAMLError as e:
        raise FormatError(file, 0, 0, f"invalid YAML: {' '.join(str(e).split())}") from None
    lines = text.split("\n")
    shifts: dict[int, _Shift] = {}
    try:
        for doc in documents:
            if doc is not None:
                _walk(doc, 0, lines, shifts, set())
    except _Unsupported as e:
        raise FormatError(file, int(str(e)) + 1, 1, "a layout fmt does not re-indent "
                          "(an item or key not first on its line); left unchanged") from None
    want = _data(text)
    for trim in (True, False):
        out = _render(lines, shifts, trim)
        if _data(out) == want and _render_again(out) == out:
            return out
    raise FormatError(file, 1, 1, "re-indenting would change the data this file holds; "
                      "left unchanged")


def _render_again(text: str) -> str:
    try:
        return format_text_once(text)
    except (FormatError, _Unsupported, yaml.YAMLError):
        return ""


def format_text_once(text: str) -> str:
    """One formatting pass without the safety checks (for the idempotence check)."""
    lines = text.split("\n")
    shifts: dict[int, _Shift] = {}
    for doc in yaml.compose_all(text, Loader=yaml.SafeLoader):
        if doc is not None:
            _walk(doc, 0, lines, shifts, set())
    return _render(lines, shifts, True)


def _walk(node: Node, target: int, lines: list[str], shifts: dict[int, _Shift],
          seen: set[int]) -> None:
    """Record where each key and each dash of a block collection at ``target`` goes."""
    if id(node) in seen or isinstance(node, ScalarNode) or getattr(node, "flow_style", False):
        return
    seen.add(id(node))
    if isinstance(node, MappingNode):
        for key, value in node.value:
            line, col = key.start_mark.line, key.start_mark.column
            if line not in shifts:
                _first_on_line(lines, line, col)
                shifts[line] = _Shift(target - col)
            if value.start_mark.line > line:
                _walk(value, target + _STEP, lines, shifts, seen)
    elif isinstance(node, SequenceNode):
        dash = node.start_mark.column
        for item in node.value:
            line = item.start_mark.line
            text = lines[line] if line < len(lines) else ""
            if not (len(text) > dash and text[dash] == "-" and item.start_mark.column > dash):
                raise _Unsupported(str(line))
            if line not in shifts:
                _first_on_line(lines, line, dash)
                shifts[line] = _Shift(target - dash, item.start_mark.column)
            _walk(item, target + _STEP, lines, shifts, seen)


def _first_on_line(lines: list[str], line: int, col: int) -> None:
    text = lines[line]
    if len(text) - len(text.lstrip(" ")) != col:
        raise _Unsupported(str(line))


def _render(lines: list[str], shifts: dict[int, _Shift], trim: bool) -> str:
    starts = sorted(shifts)
    out: list[str] = []
    current = 0  # the shift of the value being continued
    for i, line in enumerate(lines):
        shift = shifts.get(i)
        stripped = line.lstrip(" ")
        lead = len(line) - len(stripped)
        if shift is not None:
            new = shift.apply(line)
            current = shift.continuation(lead)
        elif stripped.startswith("#") and not _inside_value(lines, starts, i):
            new = " " * max(0, lead + _next_delta(shifts, starts, i, current)) + stripped
        elif not stripped or stripped in ("---", "...") or (lead == 0 and stripped[0] in "#%"):
            new = line
        else:
            new = " " * max(0, lead + current) + stripped if lead > 0 else line
        out.append(new.rstrip() if trim else new)
    while out and not out[-1].strip():
        out.pop()
    return "\n".join(out) + "\n"


def _inside_value(lines: list[str], starts: list[int], i: int) -> bool:
    """Whether a ``#`` line is text of a block scalar opened by the last key or item."""
    k = bisect.bisect_left(starts, i)
    if k == 0:
        return False
    opener = lines[starts[k - 1]].split("#", 1)[0].rstrip()
    return opener.endswith(("|", ">", "|-", ">-", "|+", ">+")) or (
        opener[-2:-1] in ("|", ">") and opener[-1:].isdigit())


def _next_delta(shifts: dict[int, _Shift], starts: list[int], i: int, default: int) -> int:
    """A comment line moves with the key or item it precedes."""
    k = bisect.bisect_right(starts, i)
    return shifts[starts[k]].delta if k < len(starts) else default


def _data(text: str) -> Any:
    """What the policy loader (PyYAML) reads from ``text``."""
    try:
        return list(yaml.safe_load_all(text))
    except yaml.YAMLError as e:
        return ("unparsable", str(e))
