"""The ``guardrails`` command: check, test, eval, expr, fmt, schema and demo.

Exit codes are part of the contract (CI jobs depend on them): ``check`` 0 ok, 1 problems;
``test`` 0 pass, 1 fail; ``expr`` 0 a value, 1 an evaluation error; ``fmt`` 0, or with
``--check``/``--diff`` 1 when files would change; ``eval`` and ``schema`` 0; every command
2 for bad input or
usage, with a one-line error on stderr. Heavy modules (the engine, the demo) are
imported inside the command that needs them so that ``--help`` and ``schema`` stay fast.
"""

from __future__ import annotations

from guardrails.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
