"""The ``guardrails`` command: check, test, eval, schema and demo.

Exit codes are part of the contract (CI jobs depend on them): ``check`` 0 ok, 1 problems;
``test`` 0 pass, 1 fail; ``eval`` and ``schema`` 0; every command 2 for bad input or
usage, with a one-line error on stderr. Heavy modules (the engine, the demo) are
imported inside the command that needs them so that ``--help`` and ``schema`` stay fast.
"""

from __future__ import annotations

from guardrails.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
