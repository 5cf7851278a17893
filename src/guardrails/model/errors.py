"""Load-time problems: every one names the file, line and column it is about."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Problem:
    """One load-time problem. ``line`` and ``column`` are 1-based; 0 means unknown."""

    file: str
    line: int
    column: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}: {self.message}"

    def to_dict(self) -> dict[str, object]:
        return {"file": self.file, "line": self.line, "column": self.column,
                "message": self.message}


class PolicyError(Exception):
    """A policy set could not be loaded; ``errors`` lists every problem found."""

    __module__ = "guardrails"  # as users import it, in tracebacks

    def __init__(self, errors: Iterable[Problem]) -> None:
        self.errors: list[Problem] = sorted(
            errors, key=lambda p: (p.file, p.line, p.column, p.message)
        )
        super().__init__(self._render())

    def _render(self) -> str:
        n = len(self.errors)
        head = f"{n} problem{'s' if n != 1 else ''} in policy set"
        return head + "".join(f"\n  {p}" for p in self.errors)
