"""Every bound on expressions and their inputs, in one place (documented in docs/).

Load-time bounds reject a policy set; run-time bounds raise ``CelError`` inside the
evaluation, which the decision engine handles by the rule's ``failurePolicy``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from guardrails.expr.values import CelError


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
    max_cost: int = 3_000_000
    """Cost units of one call: every expression evaluated for it together (match
    conditions, repairs, variables, rules, messages). A unit is about one character a
    string function or regex scans; a comprehension iteration costs ``ITERATION_COST``, a
    function call ``CALL_COST`` or its own weight. Calibrated so a call's whole budget is
    tens of milliseconds of CPU at most (``benchmarks/worst_case.py``)."""
    max_input_bytes: int = 1_000_000
    """Size of a call's arguments, principal, history and request together: their text,
    plus ``engine.evaluate.NODE_COST`` (100) for every value, key and list element, so at
    most 10,000 values at the default."""
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

ITERATION_COST = 40
"""Cost units of one comprehension iteration (its loop step: 50-200 ns), at least: a
body larger than a few operations costs ``BODY_NODE_COST`` a node (``iteration_cost``)."""
BODY_NODE_COST = 4
"""Cost units of each node of a comprehension's body, every iteration (an operation of
generated code takes 15-20 ns, of closures up to 50 ns). Before, an iteration cost 40 units
whatever its body did: a body of 1,000 additions, nested in two loops of 270 elements,
took 3.8 s (closures: 9.9 s) within the budget."""


def iteration_cost(body_nodes: int) -> int:
    """What one iteration of a comprehension whose condition and step hold ``body_nodes``
    nodes costs: ``ITERATION_COST`` for the small bodies policies write, more as the body
    grows, so a long body cannot multiply the work an iteration is charged for."""
    return max(ITERATION_COST, BODY_NODE_COST * body_nodes)
IN_SCAN_COST = 4
"""Cost units of each element ``x in list`` reads when ``x`` is a string (Python's own
search: about 20 ns an element)."""
IN_COMPARE_COST = 40
"""Cost units of each element ``x in list`` reads otherwise (CEL equality, element by
element: up to a microsecond for lists and maps). Before, membership was free: a filter of
4,000 short lists by ``x in`` the same list took 6 s."""
CALL_COST = 200
"""Cost units of one library function call before what it scans (about 1 µs: most are
cheaper; the dearer ones declare their own ``cel_cost``)."""
SCAN_COST = 100
"""Cost units of one ``contains``/``matches``/``startsWith`` call before what it scans."""


PATTERN_COST = 20_000
PATTERN_CHAR_COST = 200
"""Cost units of a regular expression known only at run time (an argument, text built by
the expression...): compiling one with RE2 takes 20-250 µs for the patterns policies use,
more as they grow. Charged before compiling, the first time a call uses the pattern, so a
call bringing thousands of distinct patterns, or one enormous one, runs out of its budget
instead of compiling them. What a call is charged depends on the call and the policies
only, never on what earlier calls of the process compiled (``Meter.seen``): a call is
decided alike by ``evaluate`` and ``explain``, now and later, on every replica. Constant
patterns are compiled at load, and a policy's own ``params`` strings are free
(``Meter.free``): they are the policy's, not the call's, and compiled once per process."""


def pattern_charge(meter: Meter | None, pattern: Any) -> int:
    """What using ``pattern`` (a regular expression known only at run time) costs the call
    of ``meter`` now: 0 for a ``params`` string of its policies or one it already used."""
    if type(pattern) is not str:
        return 0  # the function refuses it
    if meter is not None:
        if pattern in meter.free:
            return 0
        seen = meter.seen
        if seen is None:
            meter.seen = seen = set()
        elif pattern in seen:
            return 0
        seen.add(pattern)
    return PATTERN_COST + PATTERN_CHAR_COST * len(pattern)


def pattern_arg(fn: Callable[..., Any]) -> int | None:
    """Which argument of library function ``fn`` is a regular expression it compiles (its
    ``cel_pattern`` attribute), or None."""
    index = getattr(fn, "cel_pattern", None)
    return index if type(index) is int and index >= 0 else None


def extra_cost(fn: Callable[..., Any]) -> Callable[..., int] | None:
    """A library function's cost that its arguments' lengths do not add up to (its
    ``cel_extra_cost``: units from the arguments themselves, such as the product of two
    lengths for an edit distance), or None."""
    extra = getattr(fn, "cel_extra_cost", None)
    return extra if callable(extra) else None


MAX_MATCHES = 2_048
"""Most regex matches one call of ``findAll``, ``regex.extractAll``, ``regex.replace`` or
``credentials.found`` goes through: one function call is bounded before it is charged for
them (``match_units``). More puts the whole call over its cost bound (an input error,
denied whatever the policies' ``failurePolicy``), as running out of the budget does."""
FREE_MATCHES = 1_000
"""Regex matches of one call charged ``FIRST_MATCH_COST`` each; the rest ``MATCH_COST``."""
FIRST_MATCH_COST = 40
MATCH_COST = 500
"""Cost units of a regex match ``findAll``, ``regex.extractAll`` or ``regex.replace`` went
through (3-6 µs of Python each, which their input's length does not show: ``findAll('')``
of a 440 kB text took 1.5 s in one call). A call's first ``FREE_MATCHES`` matches cost
``FIRST_MATCH_COST``, so the few matches policies look for stay cheap: at most 3-6 ms of a
call's work is charged at the lower rate."""


def match_units(meter: Meter | None, matches: int) -> int:
    """What ``matches`` more regex matches cost the call of ``meter`` (``FREE_MATCHES``)."""
    if meter is None:
        first = min(matches, FREE_MATCHES)
    else:
        first = max(0, min(matches, FREE_MATCHES - meter.matches))
        meter.matches += matches
    return first * FIRST_MATCH_COST + (matches - first) * MATCH_COST


def with_work(fn: Callable[..., Any]) -> Callable[..., Any] | None:
    """The variant of library function ``fn`` that returns ``(value, matches)`` (its
    ``cel_with_work``): work it cannot know before it runs (the matches a regex goes
    through), charged by the call site right after it (``match_units``), within a bound
    the function keeps per call; None for the others."""
    variant = getattr(fn, "cel_with_work", None)
    return variant if callable(variant) else None


def cost_of(fn: Callable[..., Any]) -> tuple[int, int]:
    """What calling library function ``fn`` costs: fixed units, and units per character
    (or element) of its string and list arguments.

    Its ``cel_cost`` attribute, else ``CALL_COST`` (a function that runs many regexes,
    like ``credentials.found``, declares its weight), and its ``cel_scan_cost``, else 1
    (``parseJSON`` builds many values per character it reads).
    """
    cost = getattr(fn, "cel_cost", CALL_COST)
    scan = getattr(fn, "cel_scan_cost", 1)
    return (cost if type(cost) is int and cost > 0 else CALL_COST,
            scan if type(scan) is int and scan > 0 else 1)


METER = "@meter"
"""The binding that carries a call's ``Meter`` into every expression evaluated for it
(``@`` cannot start a CEL identifier, so no expression can read or shadow it)."""


class Meter:
    """What is left of one call's cost budget, shared by all its expression evaluations.

    Each evaluation starts from what is left and charges what it spent back when it
    returns (or raises), so the bound holds for the call as a whole: many cheap rules over
    a large input cannot add up to more than one budget."""

    __slots__ = ("deep", "free", "left", "matches", "seen")

    def __init__(self, left: int, free: frozenset[str] = frozenset()) -> None:
        self.left = left
        self.deep = False
        """Whether an evaluation of this call ran out of stack (``too_deep``): the call is
        then over a bound, denied whatever the policies' ``failurePolicy``."""
        self.free = free
        """Run-time patterns that cost nothing: its policies' ``params`` strings."""
        self.seen: set[str] | None = None
        """Run-time patterns this call has been charged for (``pattern_charge``)."""
        self.matches = 0
        """Regex matches this call has been charged for (``match_units``)."""


TOO_DEEP = "expression evaluation too deep"


def too_deep(meter: Meter | None) -> CelError:
    """The error of an evaluation that ran out of stack (``RecursionError``), noted in the
    call's ``meter``. The stack is the caller's doing as much as the rule's: arguments
    nested within the depth bound, on a host's low recursion limit or a deep stack, made
    a rule err (red team 27d); under ``Ignore`` the policy was skipped and the call ran.
    Like the cost budget, a call that runs out of it is denied whatever the policies'
    ``failurePolicy`` (the engine reads ``Meter.deep`` where it reads ``Meter.left``)."""
    if meter is not None:
        meter.deep = True
    return CelError(TOO_DEEP)
