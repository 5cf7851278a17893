"""Source positions for values read from YAML files."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Position:
    """Where a YAML node starts: ``file``, 1-based ``line`` and ``column``."""

    file: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


@dataclass(frozen=True, slots=True)
class Expression:
    """A CEL expression read from a policy file.

    ``position`` is where the expression's first character sits in the file.
    ``line_starts`` maps a character offset inside ``source`` back to the file: for a
    plain or quoted scalar on one line it is ``(0,)`` and columns add to
    ``position.column``; for block scalars (``|``, ``>``) each source line starts at
    the column given by ``indent`` on the line ``position.line + i``.
    """

    source: str
    position: Position
    block_indent: int = 0
    """For block scalars: the column (1-based) where every content line starts; 0 otherwise."""

    def position_of(self, offset: int) -> Position:
        """The file position of character ``offset`` of ``source``."""
        offset = max(0, min(offset, len(self.source)))
        before = self.source[:offset]
        line_index = before.count("\n")
        if line_index == 0 and not self.block_indent:
            return Position(self.position.file, self.position.line,
                            self.position.column + offset)
        col_in_line = offset - (before.rfind("\n") + 1)
        start_col = self.block_indent if self.block_indent else 1
        return Position(self.position.file, self.position.line + line_index,
                        start_col + col_in_line)
