"""How every command ends: the exit codes, and ``UsageError`` for bad input (``main``
reports it as one line, ``guardrails <command>: error: ...``, and exits 2)."""

from __future__ import annotations

OK, PROBLEMS, BAD_INPUT = 0, 1, 2


class UsageError(Exception):
    """Bad input: reported as one line on stderr, exit 2."""
