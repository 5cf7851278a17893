"""Every bound on expressions and their inputs, in one place (documented in docs/).

Load-time bounds reject a policy set; run-time bounds raise ``CelError`` inside the
evaluation, which the decision engine handles by the rule's ``failurePolicy``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Limits:
    # load time
    max_expression_length: int = 10_000
    """Characters in one expression."""
    max_nesting_depth: int = 64
    """Nesting of parentheses, calls, lists, maps and operators (parser recursion)."""
    max_comprehension_nesting: int = 3
    """Macros (all/exists/map/...) inside macros."""
    # run time
    max_cost: int = 1_000_000
    """Cost units per expression evaluation: one per comprehension iteration, plus the
    length of strings and lists that string/list functions and regexes scan."""
    max_input_bytes: int = 1_000_000
    """Serialized size of a call's arguments, principal, history and request together."""
    max_input_depth: int = 32
    """Nesting depth of the arguments, principal and history values."""
    max_history: int = 100
    """Earlier calls kept in ``history`` (oldest dropped first)."""
    max_result_chars: int = 65_536
    """Characters of one history entry's ``result`` (the rest is cut)."""
    max_history_result_chars: int = 6_553_600
    """Characters of all ``result`` texts of ``history`` together; they count here, not in
    ``max_input_bytes``. Beyond it the oldest results are cut (newest kept whole)."""


DEFAULT_LIMITS = Limits()
