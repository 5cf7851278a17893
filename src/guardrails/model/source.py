"""Source positions for values read from YAML files."""

from __future__ import annotations

import bisect
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Position:
    """Where a YAML node starts: ``file``, 1-based ``line`` and ``column``."""

    file: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


Segment = tuple[int, int, int]
"""``(offset in source, file line, file column)``: from ``offset`` on, characters sit on
``line`` at consecutive columns, until the next segment starts."""


@dataclass(frozen=True, slots=True)
class Expression:
    """A CEL expression read from a policy file.

    ``position`` is where the expression's first character sits in the file (after the
    opening quote of a quoted scalar; on the first content line of a block scalar).

    ``segments`` maps offsets inside ``source`` back to the file. The loader builds it by
    aligning the decoded scalar with its raw text, so every character maps to where it is
    written, in every scalar style: plain, quoted (a character written as an escape maps
    to its backslash) and block (``|``, ``>``, any chomping or indentation indicator).
    The one approximation: where YAML folded a line break into a space (plain, quoted and
    ``>`` scalars), that space maps to the line break. Should the alignment ever fail,
    the loader leaves ``segments`` empty and offsets count from ``position``; that is also
    how an expression built by hand (no segments) behaves, a newline in ``source``
    starting a new line at column 1.
    """

    source: str
    position: Position
    segments: tuple[Segment, ...] = ()

    def position_of(self, offset: int) -> Position:
        """The file position of character ``offset`` of ``source`` (clamped to its bounds).

        ``offset == len(source)`` is the position just after the last character, where a
        parser reports "unexpected end of input".
        """
        offset = max(0, min(offset, len(self.source)))
        file = self.position.file
        if self.segments:
            i = bisect.bisect_right(self.segments, (offset, 1 << 62, 1 << 62)) - 1
            start, line, column = self.segments[max(i, 0)]
            return Position(file, line, column + offset - start)
        before = self.source[:offset]
        line_index = before.count("\n")
        if line_index == 0:
            return Position(file, self.position.line, self.position.column + offset)
        return Position(file, self.position.line + line_index,
                        offset - before.rfind("\n"))
