"""Evaluation of one tool call against compiled policies: a pure function.

Order, per call: match every candidate policy (globs were checked by the index;
``match.when`` here), apply the repairs of matched policies in policy then repair
order to the raw arguments, then evaluate each matched policy's rules against the
repaired arguments, with that policy's ``params`` and lazily computed ``variables``.
Every evaluation error is data: it is recorded and handled by the policy's
``failurePolicy``, so ``evaluate`` itself never raises for any input. A call over one of
its bounds (size, cost, scan budget) is denied whatever the ``failurePolicy``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import itertools
import json
import math
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, Literal, NamedTuple

from guardrails.engine.counters import (
    CounterRequest,
    CounterResult,
    CounterStore,
    Reservation,
    window_key,
)
from guardrails.engine.decision import (
    REDACTED,
    Action,
    AppliedRepair,
    Decision,
    Effect,
    EvaluationError,
    FiredRule,
    _decision,
    _recorded,
)
from guardrails.engine.policy import (
    CompiledCounter,
    CompiledPolicy,
    CompiledRule,
)
from guardrails.engine.scrub import Scrubber, may_escape, redact_escaped
from guardrails.expr import CelError, FusedRun, Hit, generate_pending
from guardrails.expr.lib_provenance import ORIGINS, Origins, Request
from guardrails.expr.limits import DEFAULT_LIMITS, METER, Limits, Meter
from guardrails.expr.values import Variables, error_message

MAX_MESSAGE_LENGTH = 1024
"""Rule messages are cut here: they are shown to the model and written to logs."""


class InputError(Exception):
    """The call's inputs are outside the run-time bounds or are not JSON-like data."""


class Call(NamedTuple):
    """One tool call as the engine sees it, already normalised to CEL values.

    A named tuple, not a dataclass: it is built once per call, on the hot path."""

    tool: str
    args: Mapping[str, Any]
    principal: Mapping[str, Any]
    history: Sequence[Mapping[str, Any]]
    request: str
    description: str
    now: datetime.datetime
    agent: tuple[str, ...] | None = None
    """The calling agent's name and id; None when unknown (every agent selector matches)."""


# --- explanation -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Step:
    """One expression the engine evaluated, and what it produced (for ``--explain``)."""

    element: str
    value: Any = None
    error: str | None = None
    fired: bool | None = None


@dataclass
class PolicyTrace:
    policy: str
    matched: bool
    audit: bool
    steps: list[Step] = field(default_factory=list)

    def to_dict(self, secret: frozenset[str]) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "matched": self.matched,
            "audit": self.audit,
            "steps": [_step_dict(s, secret) for s in self.steps],
        }


def _step_dict(step: Step, secret: frozenset[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"element": step.element}
    if step.error is not None:
        out["error"] = step.error
    else:
        from guardrails.engine.decision import _json_safe

        # A repair that sets a secret argument, or a variable read from one, may hold
        # the secret itself: the element names it, so redact by argument name.
        name = step.element.rsplit(".", 1)[-1]
        out["value"] = REDACTED if name in secret else _json_safe(step.value)
    if step.fired is not None:
        out["fired"] = step.fired
    return out


# --- input normalisation -------------------------------------------------------------


class Budget:
    """What is left of the input size bound, shared by all inputs of one call."""

    __slots__ = ("left",)

    def __init__(self, left: int) -> None:
        self.left = left


NODE_COST = 100
"""Input-size units (bytes) every value costs besides its text: each list element, map
entry, key and string. What the guard spends per call grows with the number of values far
more than with their text (normalising, validation, the framework's argument snapshot at
1.5-4 µs a value, history, scrubbing), so a value weighs 100 bytes: at the default 1 MB
bound a call holds at most 10,000 values, and 300,000 empty strings or 95,000 short keys
are an input error found in one cheap walk instead of seconds of work."""

_INT64 = (-(2**63), 2**63 - 1)
_DOUBLE_INTS = (-int(sys.float_info.max), int(sys.float_info.max))
_EXACT_SCALARS = frozenset({str, bool, float, type(None)})


def normalize(value: Any, limits: Limits, budget: Budget | None = None) -> Any:
    """A CEL-ready form of JSON-like data, within the input bounds, or ``InputError``.

    Every value, key, element and character is charged to ``budget`` before it is looked
    at, so the walk is bounded by the size bound whatever the input (a self-containing
    list, a map of a million short keys). Data that is already plain JSON (exact ``dict``,
    ``list``, ``str``, numbers) is returned as is, not copied: CEL never mutates a value
    and repairs replace top-level arguments in the engine's own dict, so evaluation stays
    pure at no cost. Only what needs converting (tuples, subclasses, other mappings, big
    integers) is copied. Any failure while reading a hostile object (a ``Mapping`` whose
    ``items`` raises, an ``__eq__`` that raises) is an ``InputError``: it fails closed.
    """
    if budget is None:
        budget = Budget(limits.max_input_bytes)
    budget.left -= NODE_COST
    try:
        if type(value) is dict and limits.max_input_depth > 0:  # the common case, one call less
            value = _map(value, value, 0, budget, limits.max_input_depth)
        else:
            value = _normalize(value, 0, budget, limits.max_input_depth)
    except InputError:
        raise
    except RecursionError:
        raise InputError("input nested too deeply") from None
    except Exception as e:  # a hostile object: its text may quote data, keep the type only
        raise InputError(f"input could not be read ({type(e).__name__})") from None
    if budget.left < 0:
        raise InputError("inputs exceed the size bound")
    return value


def _over() -> InputError:
    return InputError("inputs exceed the size bound")


def _normalize(value: Any, depth: int, budget: Budget, max_depth: int) -> Any:
    """``value`` normalised; its own ``NODE_COST`` was charged by the caller."""
    t = type(value)
    if t is str:
        budget.left -= len(value)
        return value
    if t in _EXACT_SCALARS:
        return value
    if t is int:
        if not _INT64[0] <= value <= _INT64[1]:
            # Beyond int64, a JSON number is a double; beyond the double range it is
            # not a number a rule can compare (float() would raise OverflowError).
            if not _DOUBLE_INTS[0] <= value <= _DOUBLE_INTS[1]:
                raise InputError("input number is beyond the double range")
            return float(value)
        return value
    if depth >= max_depth:
        raise InputError(f"input nested deeper than {max_depth} levels")
    if t is dict:
        return _map(value, value, depth, budget, max_depth)
    if t is list or t is tuple:
        budget.left -= NODE_COST * len(value)
        if budget.left < 0:
            raise _over()
        out: list[Any] | None = None if t is list else []
        for i, v in enumerate(value):
            tv = type(v)
            if tv is str:  # the common leaves, inline
                budget.left -= len(v)
                n = v
            elif tv is float or tv is bool or v is None:
                n = v
            else:
                n = _normalize(v, depth + 1, budget, max_depth)
            if out is None and n is not v:
                out = list(value[:i])
            if out is not None:
                out.append(n)
        if budget.left < 0:
            raise _over()
        return value if out is None else out
    if isinstance(value, bool | int | float | str):
        # subclasses (IntEnum, str Enum...) become their plain CEL value
        base = bool if isinstance(value, bool) else int if isinstance(value, int) else (
            float if isinstance(value, float) else str)
        return _normalize(base(value), depth, budget, max_depth)
    if isinstance(value, Mapping):
        n_items = _size_of(value)
        budget.left -= 2 * NODE_COST * n_items
        if budget.left < 0:
            raise _over()
        items = _items_of(value, n_items)
        copy = _map(dict(items), None, depth, budget, max_depth)
        if len(items) != len(copy):
            raise InputError("input map keys must be distinct strings")
        return copy
    raise InputError(f"input value of type {t.__name__} is not JSON data")


def _size_of(value: Mapping[Any, Any]) -> int:
    n_items = len(value)
    if type(n_items) is not int:
        raise InputError("input map has no size")
    return n_items


def _items_of(value: Mapping[Any, Any], n_items: int) -> list[tuple[Any, Any]]:
    """The entries of a mapping that is not a ``dict``, its size charged already.

    Read at most one entry more than was charged: a mapping that lies about its size
    cannot make the walk longer, and is refused."""
    items = list(itertools.islice(value.items(), n_items + 1))
    if len(items) != n_items:
        raise InputError("input map does not hold the entries it says it has")
    return items


def _map(value: dict[Any, Any], original: dict[Any, Any] | None, depth: int, budget: Budget,
         max_depth: int) -> dict[str, Any]:
    """A ``dict`` normalised; ``original`` is returned when nothing needed converting.

    What is left of the budget is a local while the entries are plain leaves, and goes
    back into ``budget`` before a nested value is walked (and at the end)."""
    left = budget.left
    if original is not None:
        left -= 2 * NODE_COST * len(value)
        if left < 0:
            raise _over()
    out: dict[str, Any] | None = None if original is not None else {}
    for k, v in value.items():
        if type(k) is not str:
            raise InputError("map keys in inputs must be strings")
        tv = type(v)
        if tv is str:  # the common leaves, inline: kept as they are
            left -= len(k) + len(v)
            if out is not None:
                out[k] = v
            continue
        if tv is float or tv is bool or v is None or (
                tv is int and _INT64[0] <= v <= _INT64[1]):
            left -= len(k)
            if out is not None:
                out[k] = v
            continue
        if tv is dict and depth + 1 < max_depth:  # ``_normalize``'s dict case, one call less
            if not v:  # an empty map: the call's charges (its key) and check, in line
                left -= len(k)
                if left < 0:
                    budget.left = left
                    raise _over()
                if out is not None:
                    out[k] = v
                continue
            budget.left = left - len(k)
            n: Any = _map(v, v, depth + 1, budget, max_depth)
            left = budget.left
        else:
            n = _LEAVES
            if tv is list and depth + 1 < max_depth:
                # ``_normalize``'s list case when every element is a plain leaf (the list
                # is kept as is): the same charges in the same order, without a call. Its
                # size is charged before an element is read, as there.
                before = left
                left -= len(k) + NODE_COST * len(v)
                if left < 0:
                    budget.left = left
                    raise _over()
                for e in v:
                    te = type(e)
                    if te is str:
                        left -= len(e)
                    elif te is not float and te is not bool and e is not None and not (
                            te is int and _INT64[0] <= e <= _INT64[1]):
                        left = before  # not plain: the general walk, from the start
                        n = None
                        break
                if n is _LEAVES:
                    if left < 0:
                        budget.left = left
                        raise _over()
                    n = v
            if n is not v:
                budget.left = left - len(k)
                n = _normalize(v, depth + 1, budget, max_depth)
                left = budget.left
        if out is None and n is not v:
            out = {}
            for k2, v2 in value.items():
                if k2 is k:
                    break
                out[k2] = v2
        if out is not None:
            out[k] = n
    budget.left = left
    if left < 0:
        raise _over()
    return value if out is None else out


_LEAVES = object()
"""``_map``'s marker of a list it checked whole (its elements are plain leaves)."""


def normalize_history(history: Any, limits: Limits, budget: Budget) -> list[dict[str, Any]]:
    """``history`` as expressions see it: the newest ``max_history`` entries, each a map
    with ``result`` (text, ``""`` when absent), ``trusted`` (bool, false when absent) and
    ``at`` (a timestamp, when given as one or as RFC 3339 text).

    Results are bounded on their own (``max_result_chars`` each, ``max_history_result_chars``
    in all, oldest cut first), not by ``max_input_bytes``: the guard records every result,
    and a few long ones must not turn every later call into an input error. An entry that
    is a mapping of its own (not a ``dict``) is read like any input mapping: no further
    than its stated size, and only while that size is within the bound.
    """
    if type(history) is list:
        entries = history[-limits.max_history:] if len(history) > limits.max_history else history
    elif isinstance(history, str | bytes | Mapping) or not isinstance(history, Iterable):
        raise InputError("history must be a list of maps")
    else:
        entries = list(history)[-limits.max_history:]
    out: list[dict[str, Any]] = []
    results_left = limits.max_history_result_chars
    max_depth = limits.max_input_depth
    for entry in reversed(entries):
        # An entry far over the bound is refused by its size, before it is copied (a dict
        # of a million keys took a copy of it first): its keys other than the three read
        # here are charged below, so this refuses only what that charge would refuse.
        if type(entry) is not dict:
            if not isinstance(entry, Mapping):
                raise InputError("history entries must be maps")
            n_items = _size_of(entry)
            if 2 * NODE_COST * (n_items - _HISTORY_OWN) > budget.left:
                raise _over()
            entry = dict(_items_of(entry, n_items))
        elif 2 * NODE_COST * (len(entry) - _HISTORY_OWN) > budget.left:
            raise _over()
        rest = dict(entry)  # without the keys read here, bounded as input
        result = rest.pop("result", None)
        trusted = rest.pop("trusted", False)
        at = rest.pop("at", None)
        reading = rest.pop("reading", None)
        normalised = _map(rest, rest, 1, budget, max_depth) if max_depth > 1 else (
            _normalize(rest, 1, budget, max_depth))
        if result is None:
            result = ""
        elif type(result) is not str:
            raise InputError("history result must be text")
        elif result:  # cut to what is left (an empty text has nothing to cut)
            whole = len(result)
            result = result[:max(0, min(limits.max_result_chars, results_left))]
            results_left -= len(result)
            if reading is not None and len(result) == whole:
                reading = kept_form(reading, result)
                if reading is not None:
                    normalised["reading"] = reading
        if type(trusted) is not bool:
            raise InputError("history trusted must be true or false")
        normalised["result"] = result
        normalised["trusted"] = trusted
        if at is not None:
            normalised["at"] = timestamp(at, "history at")
        out.append(normalised)
    out.reverse()
    if budget.left < 0:
        raise InputError("inputs exceed the size bound")
    return out


_HISTORY_OWN = 3
"""How many keys of a history entry the engine reads itself: ``result``, ``trusted``, ``at``
(and ``reading``, when there is one: not counted, so the early refusal stays within what
the charge below refuses)."""


def kept_form(reading: Any, result: str) -> dict[str, Any] | None:
    """A history entry's ``reading`` (``lib_provenance.kept_reading``: the result as the
    provenance functions read it, kept when the guard recorded it) as expressions see it:
    a fresh map of its three keys when each is of its kind and no longer than a reading
    of ``result`` can be, else None (dropped: the result is read as one without). Not
    charged as input (it is bounded by its result, as results are); whether it is the
    result's reading is checked where it is read (``_checked_reading``). None for the
    reading of a result cut here: it is the reading of the whole result."""
    if type(reading) is not dict:
        return None
    low, check, version = reading.get("low"), reading.get("sum"), reading.get("v")
    if type(version) is not int or type(low) is not str or type(check) is not str \
            or len(check) != 64 or len(low) > 4 * len(result):
        return None
    return {"v": version, "low": low, "sum": check}


def timestamp(value: Any, what: str) -> datetime.datetime:
    """A UTC-aware datetime from a datetime (naive is UTC) or RFC 3339 text."""
    if isinstance(value, str):
        try:
            value = datetime.datetime.fromisoformat(value.strip())
        except ValueError:
            raise InputError(f"{what} is not an RFC 3339 timestamp") from None
    if not isinstance(value, datetime.datetime):
        raise InputError(f"{what} must be a timestamp")
    return value if value.tzinfo is not None else value.replace(tzinfo=datetime.UTC)


# --- evaluation ------------------------------------------------------------------------


_NO_VARIABLES = Variables({})
_ALLOW = Effect.ALLOW


def _cel_error(e: Exception) -> CelError:
    """Every failure is an evaluation error: a guard must never crash a call.

    ``Program.evaluate`` raises only ``CelError``; anything else is an engine bug, which
    must fail closed rather than escape (its text is not kept: it may quote data).
    """
    return e if isinstance(e, CelError) else CelError(error_message(e))


def secret_values(args: Mapping[str, Any], names: frozenset[str]) -> list[Any]:
    """The values of the secret arguments present in ``args``."""
    return [args[name] for name in names if name in args]


class Redactor:
    """The policies' redact patterns as one function (a class, so decisions that hold it
    can be copied and pickled).

    Most texts match none of the patterns, and one RE2 ``sub`` costs about 1.4 µs even
    then: the library's dozen patterns cost a scrubbed text some 17 µs. So one search of
    all of them together (each in its own group, so its inline flags stay its own) comes
    first, and a text it finds nothing in is returned as it is. That is exact: a pattern
    that matches somewhere makes the alternation match there, and if none matches the
    original text, no ``sub`` changes it, so none matches the next one either. Patterns RE2
    cannot join (duplicate group names) are applied one by one, as before.

    A text holding a backslash is then searched with its JSON and ``repr`` escapes undone
    (``scrub.redact_escaped``): a dict result reaches the model as JSON, where a key after
    ``\\n`` fails the pattern's ``\\b`` (red team 17)."""

    __slots__ = ("_any", "_patterns")

    def __init__(self, patterns: Sequence[Any]) -> None:
        self._patterns = tuple(patterns)
        self._any = _joined(self._patterns)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (Redactor, (self._patterns,))

    def __call__(self, text: str) -> str:
        found = self._any
        if found is None or found(text):
            for r in self._patterns:
                text = r.pattern.sub(r.replacement, text)
        if may_escape(text):  # what the patterns match once escapes are undone
            text = redact_escaped(text, [r.pattern for r in self._patterns], found)
        return text


def _joined(patterns: Sequence[Any]) -> Callable[[str], bool] | None:
    """A test whether any of ``patterns`` matches a text; None when they cannot be joined."""
    from guardrails.expr import stdlib

    if len(patterns) < 2:
        return None
    try:
        sources = [r.pattern.pattern for r in patterns]
        if not all(type(s) is str for s in sources):
            return None
        return stdlib.regex_tester(stdlib.regex("|".join(f"(?:{s})" for s in sources)),
                                   translate=False)
    except Exception:  # RE2 refuses the union (say, one group name twice): one by one
        return None


def _redactor(policies: Sequence[CompiledPolicy]) -> Callable[[str], str] | None:
    """The policies' redact patterns as one function; None when they have none."""
    patterns = [r for p in policies for r in p.redact]
    return Redactor(patterns) if patterns else None


Run = Callable[[Mapping[str, Any]], Any]
"""A compiled expression's evaluate function: bindings in, CEL value out."""

@dataclass(frozen=True, slots=True)
class PlanEntry:
    """One candidate policy as the common-case path (``decide``) runs it, looked up once
    per tool instead of once per call. A slotted record, not a named tuple: ``decide``
    reads five of its fields for every policy of every call, and a named tuple's field
    read costs several times a slot's (3.11)."""

    policy: CompiledPolicy
    when: Run | None
    """Its ``match.when`` function."""
    rules: tuple[tuple[Run, CompiledRule], ...]
    """Its rules' functions, each with its rule."""
    statics: dict[int, FiredRule]
    """The records of its rules with a static message that fired when there was nothing to
    scrub, by the rule's index (a record is immutable: every later such call shares it)."""
    fused: FusedRun | None
    """All its rules as one function (``CompiledPolicy.fused``), when it has one."""
    params: Mapping[str, Any]
    programs: Mapping[str, Any] | None
    """Its variables' programs; None without variables."""
    enforce: bool
    """Not in audit mode."""
    default: Effect
    """Its default action."""

    def _replace(self, **changes: Any) -> PlanEntry:
        """A copy with ``changes`` (as a named tuple's ``_replace``)."""
        return dataclasses.replace(self, **changes)


Plan = tuple[PlanEntry, ...]
"""The candidates as the common-case path runs them."""


@dataclass(frozen=True)
class Candidates:
    """The policies whose tool globs name one tool, and what follows from them alone.

    Worked out once per tool name (``PolicySet`` caches it), not once per call.
    """

    policies: tuple[CompiledPolicy, ...]
    names: frozenset[str] = field(init=False)
    """Identifiers their expressions read: inputs none of them reads are not copied."""
    secret_names: frozenset[str] = field(init=False)
    """Declared and injected secret arguments: secrecy describes the data, so every
    candidate contributes, whether or not its ``match.when`` holds for a call."""
    redact: Callable[[str], str] | None = field(init=False)
    counts: bool = field(init=False)
    """Whether any of them has counters."""
    policy_names: tuple[str, ...] = field(init=False)
    """Their names: a decision's ``policies`` when every candidate matched (the common
    case), without building the tuple per call."""
    plan: Plan | None = field(init=False)
    """For ``decide``, the common-case path; None when a candidate needs what only
    ``evaluate_call`` does (counters, a binding's selector, provenance) or there is none."""
    conditional: bool = field(init=False)
    """Whether some of them may not match a call (``match.when``, agent selectors)."""
    repairs: bool = field(init=False)
    """Whether any of them has repairs."""
    clean: bool = field(init=False)
    """Whether their decisions have nothing to scrub of their own (no secret arguments,
    no redact patterns)."""
    free_patterns: frozenset[str] = field(init=False)
    """Every text in their ``params``: used as a regular expression, it costs a call
    nothing (``limits.pattern_charge``: it is the policy's own, not the call's)."""
    _shared_scrubber: tuple[Scrubber | None, Scrubber | None] | None = field(
        init=False, default=None, repr=False, compare=False)
    short: ClassVar[ShortPath | None] = None
    """The tool's short path as one generated function (``short_path``), when its plan
    has one; set on the instance, not a field (two builds of one tool's candidates are
    equal, their functions are two objects)."""

    def __post_init__(self) -> None:
        ps = self.policies
        object.__setattr__(self, "counts", any(p.counters for p in ps))
        object.__setattr__(self, "policy_names", tuple([p.name for p in ps]))
        object.__setattr__(self, "names", frozenset().union(*(p.names for p in ps)))
        object.__setattr__(self, "secret_names",
                           frozenset().union(*(p.secret_arguments for p in ps)))
        object.__setattr__(self, "redact", _redactor(ps))
        object.__setattr__(self, "conditional",
                           any(p.when is not None or p.selector is not None or p.agents
                               for p in ps))
        object.__setattr__(self, "repairs", any(p.repairs for p in ps))
        object.__setattr__(self, "clean", not self.secret_names and self.redact is None)
        object.__setattr__(self, "free_patterns",
                           frozenset(t for p in ps for t in _texts_in(p.params)))
        plan: Plan | None = None
        if ps and not self.counts and "@provenance" not in self.names and all(
                p.selector is None for p in ps):
            generate_pending()  # the functions looked up below are the generated ones
            plan = tuple(PlanEntry(
                p, None if p.when is None else p.when.program.evaluate,
                tuple((r.when.program.evaluate, r) for r in p.rules), {},
                None if p.fused is None else p.fused.run, p.params,
                p.variable_programs if p.variables else None, not p.audit, p.default_action)
                for p in ps)
        object.__setattr__(self, "plan", plan)
        if not self.secret_names:
            # ``scrubber``'s shared one for calls without known secrets, built now (at load,
            # for the tools ``PolicySet`` prepares): there is nothing of theirs to copy.
            object.__setattr__(self, "_shared_scrubber", (None, Scrubber((), self.redact)))
        if plan is not None:
            object.__setattr__(self, "short", short_path(self))

    def scrubber(self, known_secrets: Scrubber | None, raw_args: Mapping[str, Any],
                 args: Mapping[str, Any]) -> Scrubber:
        """The scrubber of one call: its secret arguments' values (as sent and as
        repaired, read on first use), ``known_secrets`` below them, the redact patterns.

        Without secret arguments it holds nothing of the call: one scrubber, built whole
        (not lazily, so threads can share it), serves every call with the same
        ``known_secrets``. It is built when the same ``known_secrets`` comes a second time
        in a row: building it whole copies their texts, which a call with a lazy scrubber
        pays only if it scrubs something (callers alternating between two guards' memories
        keep getting lazy ones)."""
        names = self.secret_names
        if names:
            return Scrubber(functools.partial(_secrets_now, raw_args, args, names),
                            self.redact, base=known_secrets)
        shared = self._shared_scrubber
        if shared is not None and shared[0] is known_secrets:
            if shared[1] is not None:
                return shared[1]
            scrub = Scrubber((), self.redact, base=known_secrets)
            object.__setattr__(self, "_shared_scrubber", (known_secrets, scrub))
            return scrub
        object.__setattr__(self, "_shared_scrubber", (known_secrets, None))
        return Scrubber(_no_values, self.redact, base=known_secrets)


def _texts_in(value: Any) -> Iterator[str]:
    """Every string in ``value`` (a policy's params: JSON-like data from its YAML)."""
    if type(value) is str:
        yield value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from _texts_in(k)
            yield from _texts_in(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _texts_in(v)


def _no_values() -> tuple[()]:
    return ()


def _secrets_now(raw_args: Mapping[str, Any], args: Mapping[str, Any],
                 names: frozenset[str]) -> list[Any]:
    # ``args`` is updated in place by repairs; a scrubber first used after them sees both.
    return secret_values(raw_args, names) + secret_values(args, names)


def _base(call: Call, names: frozenset[str], meter: Meter) -> dict[str, Any]:
    """What every expression of the call can read besides ``params`` and ``variables``
    (the ``tool`` and ``request`` records only when some candidate reads them)."""
    return {
        "tool": {"name": call.tool, "description": call.description} if "tool" in names
        else None,
        "args": call.args,
        "principal": call.principal,
        "history": call.history,
        "request": Request(call.request, meter) if "request" in names else None,
        "now": call.now,
        METER: meter,
    }


def evaluate_call(
    call: Call,
    candidates_of_tool: Candidates,
    *,
    revision: str,
    input_error: str | None = None,
    trace: list[PolicyTrace] | None = None,
    known_secrets: Scrubber | None = None,
    unmatched: Effect = Effect.ALLOW,
    max_cost: int = DEFAULT_LIMITS.max_cost,
    counters: CounterStore | None = None,
) -> Decision:
    """The decision for one call, given the policies whose tool globs match it.

    ``unmatched``: the effect when no policy's globs name the tool at all.

    ``known_secrets``: values the caller knows are secret (a guard's injected values),
    scrubbed from the decision's texts and its exported record like its secret arguments.

    Every expression evaluated for the call draws on one ``Meter`` of ``max_cost`` units.
    A call that runs it out is an input error of the whole call (handled like inputs over
    the size bound, and like a call that runs out the provenance functions' scan budget):
    the expression that ran out errors as usual, and every matched policy also records an
    ``input`` error, so the call is denied whatever rules had not run or were skipped, and
    whatever the policies' ``failurePolicy`` (``_over_bound``).

    ``counters`` is where the policies' counters live; with None, each counter reads as if
    nothing had been counted before (a dry run: ``guardrails eval``, ``guardrails test``).

    The provenance functions read the call's request and history (and the params of the
    policy being evaluated) from ``ORIGINS``, set here for the duration of the call.

    ``decide`` is the same evaluation for the common case (no trace, no input error, no
    counters...), with fewer steps; both produce the same decision.
    """
    if "@provenance" not in candidates_of_tool.names:  # compile.PROVENANCE_MARKER
        return _evaluate_call(call, candidates_of_tool, None, revision, input_error, trace,
                              known_secrets, unmatched, max_cost, counters)
    origins = Origins(call.request, call.history)
    token = ORIGINS.set(origins)
    try:
        return _evaluate_call(call, candidates_of_tool, origins, revision, input_error, trace,
                              known_secrets, unmatched, max_cost, counters)
    finally:
        ORIGINS.reset(token)


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
"""``now`` of a call no candidate reads the clock for (it is not read)."""


def read_call(
    limits: Limits,
    tool: str,
    args: Mapping[str, Any] | None,
    principal: Mapping[str, Any] | None,
    history: Sequence[Mapping[str, Any]] | None,
    request: str | None,
    description: str,
    now: datetime.datetime | None,
    names: frozenset[str],
    agent: tuple[str, ...] | None = None,
) -> tuple[Call, str | None]:
    """Normalise and bound what the candidates read; an input error fails closed.

    Every input is checked for its type before it is read, and every read of a caller's
    object is inside the ``try``: a hostile object costs an input error, never an
    exception out of ``evaluate``. ``decide`` reads plain inputs (exact dicts, lists and
    texts) with the same steps in its own frame and leaves the rest to this.
    """
    budget = Budget(limits.max_input_bytes)
    try:
        if "now" not in names:
            now = _EPOCH  # no candidate reads the clock: skip reading it
        elif now is None:
            now = datetime.datetime.now(datetime.UTC)
        elif not isinstance(now, datetime.datetime):
            raise InputError(f"now must be a datetime, got {type(now).__name__}")
        elif now.tzinfo is None:
            now = now.replace(tzinfo=datetime.UTC)
        # ``type(x) is dict`` first: the ABC check costs more than a one-rule decision's
        # rule, and nearly every caller passes a plain dict.
        if args is not None and type(args) is not dict and not isinstance(args, Mapping):
            raise InputError(f"arguments must be a JSON object, got {type(args).__name__}")
        n_args = normalize(args if args is not None else {}, limits, budget)
        # Only what some candidate policy reads is bounded and converted.
        n_principal: Any = {}
        if "principal" in names and principal is not None:
            if type(principal) is not dict and not isinstance(principal, Mapping):
                raise InputError("principal must be a map")
            n_principal = normalize(principal, limits, budget)
        n_history: Any = []
        if "history" in names and history is not None:
            if type(history) is not list and (
                    not isinstance(history, list | tuple | Sequence) or isinstance(
                        history, str | bytes | bytearray | Mapping)):
                raise InputError(f"history must be a list, got {type(history).__name__}")
            if type(history) is list or type(history) is tuple:
                recent = history[-limits.max_history:]
            else:  # a Sequence of its own: read by index, never more than kept
                n = len(history)
                recent = [history[i] for i in range(max(0, n - limits.max_history), n)]
            n_history = normalize_history(recent, limits, budget)
        text = request if request is not None else ""
        if type(text) is not str:
            if not isinstance(text, str):
                raise InputError("request must be text")
            text = str.__str__(text)
        budget.left -= len(text)
        if type(description) is not str:
            description = description if isinstance(description, str) else ""
            description = str.__str__(description)
        if budget.left < 0:
            raise InputError("inputs exceed the size bound")
    except Exception as e:
        return empty_call(tool, args, agent), read_error(e)
    # ``tuple.__new__``: the named tuple's own ``__new__`` is a Python call.
    return _tuple_new(Call, (tool, n_args, n_principal, n_history, text, description, now,
                             agent)), None


_tuple_new = tuple.__new__


def read_error(e: Exception) -> str:
    """The input error of a call whose inputs raised ``e`` while they were read."""
    if isinstance(e, InputError):
        return str(e)
    if isinstance(e, RecursionError):
        return "input nested too deeply"
    # a hostile object: keep its type only (its text may quote data)
    return f"inputs could not be read ({type(e).__name__})"


def empty_call(tool: str, args: Any = None, agent: tuple[str, ...] | None = None) -> Call:
    """The call an input error is decided on: no input is read again."""
    return Call(tool, _readable_arguments(args), {}, [], "", "", _EPOCH, agent)


def _readable_arguments(args: Any) -> dict[str, Any]:
    """What a decision can safely hold of arguments that failed the input bounds.

    Only top-level JSON scalars: the rest may be what broke the bounds (a structure
    nested thousands deep would make every later reader of the decision recurse).
    """
    if type(args) is not dict:  # anything else may raise when read
        return {}
    out: dict[str, Any] = {}
    left = _READABLE_BYTES
    for k, v in args.items():
        if type(k) is not str:
            continue
        left -= NODE_COST + len(k) + (len(v) if type(v) is str else NODE_COST)
        if left < 0:  # the rest may be what broke the size bound
            break
        if v is None or type(v) in (str, bool) or (
                type(v) is int and _INT64[0] <= v <= _INT64[1]) or (
                type(v) is float and math.isfinite(v)):
            out[k] = v
    return out


_READABLE_BYTES = 64 * 1024
"""What a decision on over-bound arguments keeps of them (its readers must stay cheap)."""


def decide(candidates: Candidates, revision: str, known_secrets: Scrubber | None,
           limits: Limits, tool: str, arguments: Mapping[str, Any] | None,
           principal: Mapping[str, Any] | None, history: Sequence[Mapping[str, Any]] | None,
           request: str | None, description: str, now: datetime.datetime | None,
           agent: tuple[str, ...] | None) -> Decision:
    """``evaluate_call`` for the common case: the inputs read here, no trace, and a
    ``Candidates.plan`` (no counters, no binding selectors, no provenance).

    Plain inputs (exact dicts, lists and texts) are read and bounded in this frame with
    ``read_call``'s steps and charges; any other input is read by ``read_call`` itself,
    and a call whose inputs fail is decided by ``evaluate_call`` on what was read, as
    ``PolicySet._decide`` does (the inputs are never read a second time). Then the same
    steps as ``evaluate_call`` in the same order with the same helpers, minus the
    branches the case cannot take, and each rule's function looked up once per tool: the
    decision is the one ``evaluate_call`` returns (tests/test_engine_fast_path.py and
    tests/test_engine_decide.py compare them). Its common result, no rule fired, error or
    repair, allocates nothing but the meter, the bindings, the arguments' copy and the
    record: a policy none of whose rules fired takes its default action without a list of
    what fired.
    """
    names = candidates.names
    if arguments is None:
        arguments = {}
    if type(arguments) is dict and type(description) is str and (
            request is None or type(request) is str) and (
            principal is None or type(principal) is dict) and (
            history is None or type(history) is list) and (
            now is None or type(now) is datetime.datetime) and limits.max_input_depth > 0:
        # ``read_call``'s steps on plain data. Nothing here runs a caller's code (exact
        # types only), so handing the arguments to ``normalize`` after the top-level look
        # reads nothing twice that could answer differently.
        try:
            if "now" not in names:
                now = _EPOCH
            elif now is None:
                now = datetime.datetime.now(datetime.UTC)
            elif now.tzinfo is None:
                now = now.replace(tzinfo=datetime.UTC)
            # ``normalize``'s charges for a map of plain leaves: the map, its entries (before
            # any is read), each key and text. Anything else, or over the bound, is left to
            # ``normalize`` from the start (it raises the bound's error).
            raw_args: Mapping[str, Any] = arguments
            left = limits.max_input_bytes - NODE_COST - 2 * NODE_COST * len(arguments)
            if left >= 0:
                for k, v in arguments.items():
                    tv = type(v)
                    if type(k) is not str:
                        left = -1
                        break
                    if tv is str:
                        left -= len(k) + len(v)
                    elif tv is float or tv is bool or v is None or (
                            tv is int and _INT64[0] <= v <= _INT64[1]):
                        left -= len(k)
                    else:
                        left = -1
                        break
            if left < 0:
                budget = Budget(limits.max_input_bytes)
                raw_args = normalize(arguments, limits, budget)
                left = budget.left
            if principal is None or "principal" not in names:
                principal = {}
            else:
                budget = Budget(left)
                principal = normalize(principal, limits, budget)
                left = budget.left
            if history is None or "history" not in names:
                history = []
            else:
                budget = Budget(left)
                history = normalize_history(history, limits, budget)
                left = budget.left
            if request is None:
                request = ""
            else:
                left -= len(request)
            if left < 0:
                raise InputError("inputs exceed the size bound")
        except Exception as e:
            return _unread(candidates, revision, known_secrets, limits, tool, arguments,
                           agent, e)
    else:
        call, error = read_call(limits, tool, arguments, principal, history, request,
                                description, now, names, agent)
        if error is not None:
            # Decided on what was read (the inputs are never read a second time).
            return evaluate_call(call, candidates, revision=revision, input_error=error,
                                 known_secrets=known_secrets, max_cost=limits.max_cost)
        tool, raw_args, principal, history, request, description, now, agent = call
    plan = candidates.plan
    assert plan is not None
    meter = Meter(limits.max_cost, candidates.free_patterns)
    args = dict(raw_args)
    # The call's own copy of the arguments from the start: matching reads what the raw
    # arguments hold (repairs, which write the copy, come after it).
    base = {
        "tool": {"name": tool, "description": description} if "tool" in names else None,
        "args": args,
        "principal": principal,
        "history": history,
        "request": Request(request, meter) if "request" in names else None,
        "now": now,
        METER: meter,
    }
    # What the decision records, made when something is recorded (the common decision
    # records nothing: no list is built).
    fired: list[FiredRule] | None = None
    repairs: list[AppliedRepair] | None = None
    errors: list[EvaluationError] | None = None
    shared = candidates._shared_scrubber  # ``Candidates.scrubber``'s common case, inline
    scrub = shared[1] if shared is not None and shared[0] is known_secrets and (
        not candidates.secret_names) else None
    if scrub is None:
        scrub = candidates.scrubber(known_secrets, raw_args, args)

    # 1. match (every candidate, when none has a condition or an agent selector)
    matched: Plan | list[PlanEntry] = plan
    policies: Sequence[CompiledPolicy] = candidates.policies
    if candidates.conditional:
        matched = []
        errors = []
        for entry in plan:
            policy, when = entry.policy, entry.when
            if agent is not None and policy.agents and not policy.matches_agent(agent):
                continue
            if when is None or _matches(policy, when, base, None, scrub, errors, None):
                matched.append(entry)
        policies = [entry.policy for entry in matched]

    # 2. repairs
    if candidates.repairs:
        # ``base`` itself is the repairs' bindings: matching is done.
        base["variables"] = {}
        if errors is None:
            errors = []
        repairs = []
        _repair(policies, base, args, None, _NO_TRACES, scrub, errors, repairs)
        if repairs and candidates.secret_names and any(
                name in candidates.secret_names for r in repairs if not r.audit
                for name in r.set):
            scrub = candidates.scrubber(known_secrets, raw_args, args)

    # 3. rules. Matching and repairs are done: ``base`` itself becomes each policy's
    # bindings in turn (nothing reads a policy's bindings after its rules, and the general
    # path's per-policy copies hold the same entries).
    bindings = base
    effect = _ALLOW
    for entry in matched:
        bindings["params"] = entry.params
        programs = entry.programs
        if programs is not None:
            variables = Variables(programs)
            variables.bindings = bindings
            bindings["variables"] = variables
        else:
            bindings["variables"] = _NO_VARIABLES
        fused = entry.fused
        hits = fused(bindings, meter, 0) if fused is not None else _NOT_FUSED
        if hits is None:
            result = entry.default  # nothing fired or failed: the common case
        else:
            if fired is None:
                fired = []
            if errors is None:
                errors = []
            acted: list[Action] = []
            clean = known_secrets is None and candidates.clean
            if hits is _NOT_FUSED:
                _each_rule(entry.policy, entry.rules, entry.statics, clean, bindings, scrub,
                           errors, fired, acted)
            else:
                _fused_hits(entry, hits, clean, bindings, meter, scrub, errors, fired, acted)
            result = _policy_effect(acted, entry.default)
        if entry.enforce and result is not effect and _SEVERITY[result] > _SEVERITY[effect]:
            effect = result
    # A policy's ``Variables`` holds ``bindings``, which holds it: a cycle refcounting
    # cannot free (it would wait for the cyclic collector with the call's inputs). Nothing
    # reads the variables after the rules.
    bindings["variables"] = _NO_VARIABLES

    if meter.left < 0 or meter.deep:
        if errors is None:
            errors = []
        effect = _over_cost(policies, errors, effect, meter)
    # ``args`` is this call's own dict, never written after the decision: a read-only view
    # of it needs no second copy.
    decision = _decision(tool, effect, MappingProxyType(args),
                         candidates.policy_names if len(policies) == len(plan)
                         else tuple([p.name for p in policies]), revision,
                         candidates.secret_names, scrub)
    if errors is None and fired is None and repairs is None:
        return decision
    return _recorded(decision, fired, repairs, errors, ())


def _unread(candidates: Candidates, revision: str, known_secrets: Scrubber | None,
            limits: Limits, tool: str, arguments: Any, agent: tuple[str, ...] | None,
            e: Exception) -> Decision:
    """``decide`` for a call whose plain inputs raised ``e`` while they were read: decided
    on what was read, as ``PolicySet._decide`` does (the inputs are never read again)."""
    return evaluate_call(empty_call(tool, arguments, agent), candidates, revision=revision,
                         input_error=read_error(e), known_secrets=known_secrets,
                         max_cost=limits.max_cost)


ShortPath = Callable[..., Decision]
"""A tool's generated short path: ``decide``'s arguments but the candidates."""

SHORT_MAX_POLICIES = 8
"""Candidates a generated short path runs at most (its code grows with them)."""
_SHORT_FACTORIES: dict[str, Callable[..., ShortPath]] = {}
"""Compiled short-path templates by source: tools of one shape share one compile."""
_SHORT_FACTORIES_MAX = 64
"""Shapes compiled at most, per process (a compile costs about 0.5 ms): a plan of yet
another shape runs ``decide``, so no load, however many shapes it holds, compiles more."""


def short_path(candidates: Candidates) -> ShortPath | None:
    """``decide`` for one tool's plan as one generated function, or None.

    ``decide`` asks of every call what the plan already answers: which inputs its policies
    read, whether they have variables, enforce, have secrets; it loops over the plan and
    looks each entry's fields up. For a plan without ``match`` conditions or agent
    selectors, whose every policy has a fused function (at most ``SHORT_MAX_POLICIES``),
    this generates the steps ``decide`` takes for it, unrolled, with the answers and the
    entries' fields as the function's defaults (locals of one frame); repairs are
    ``_repair``'s steps unrolled (their functions, records and messages defaults too), or
    ``_repair`` itself for a policy with an ``unset``. It reads arguments that are an exact dict of plain
    leaves (strings, finite-width numbers, booleans, null) within the size bound, a plain
    text request, and an exact dict principal and list history (with ``decide``'s
    walkers: an error there is decided as ``decide`` decides it), with ``decide``'s
    charges in ``decide``'s order, and nothing that runs a caller's code at the top level;
    any other call (a clock given to a plan that reads it, nested or over-bound arguments,
    another type) goes to ``decide`` whole, which reads and decides it. The decision is the one
    ``decide`` returns (tests/test_engine_decide.py compares them, and every differential
    test of ``PolicySet.evaluate`` runs it)."""
    plan = candidates.plan
    if plan is None or candidates.conditional or not (
            0 < len(plan) <= SHORT_MAX_POLICIES) or any(e.fused is None for e in plan):
        return None
    names = candidates.names
    source = _short_source(tuple(e.programs is not None for e in plan), "tool" in names,
                           "request" in names, "now" in names, "principal" in names,
                           "history" in names, bool(candidates.secret_names),
                           tuple(_repair_shape(e.policy) for e in plan))
    factory = _SHORT_FACTORIES.get(source)
    if factory is None:
        if len(_SHORT_FACTORIES) >= _SHORT_FACTORIES_MAX:
            return None
        namespace: dict[str, Any] = dict(_SHORT_GLOBALS)
        exec(compile(source, "<short path>", "exec"), namespace)
        factory = namespace["_make"]
        _SHORT_FACTORIES[source] = factory
    constants: list[Any] = [candidates, candidates.clean]
    for e in plan:
        alone = {a: _policy_effect([a], e.default) for a in Action}  # one rule fired
        constants += [e, e.fused, e.params, e.default, e.enforce, alone]
        if e.programs is not None:
            constants.append(e.programs)
        constants += _repair_constants(e.policy)
    return factory(*constants)


RepairShape = tuple[tuple[bool, int, bool], ...] | Literal[True] | None
"""How a short path runs one policy's repairs: None without repairs; for each repair
whether it has a ``when``, how many arguments it sets and whether its policy is in audit
mode (unrolled in the generated code); True for repairs run by ``_repair`` itself (an
``unset``, or a name set twice)."""


def _repair_shape(policy: CompiledPolicy) -> RepairShape:
    if not policy.repairs:
        return None
    if any(record is None for _, record in policy.repair_records):
        return True
    return tuple((r.when is not None, len(r.set), policy.audit) for r in policy.repairs)


def _repair_constants(policy: CompiledPolicy) -> list[Any]:
    """The defaults a short path's unrolled repairs of ``policy`` read, in the order
    ``_short_source`` names them: the policy (as ``_repair``'s list of one) or its name,
    then per repair its ``when`` function, record and error element, and per argument
    set its function, name and non-finite message."""
    shape = _repair_shape(policy)
    if shape is None:
        return []
    if shape is True:
        return [(policy,)]
    constants: list[Any] = [policy.name]
    for repair, record in policy.repair_records:
        if repair.when is not None:
            constants.append(repair.when.program.evaluate)
        constants += [record, f"repairs.{repair.name}"]
        for name, expr in repair.set:
            constants += [expr.program.evaluate, name,
                          f"set {name} produced a non-finite number"]
    return constants


def _short_source(variables: tuple[bool, ...], tool: bool, request: bool, now: bool,
                  principal: bool, history: bool, secret: bool,
                  repair_shapes: tuple[RepairShape, ...]) -> str:
    """The source of a short path (``short_path``): ``decide``'s steps for a plan of
    ``len(variables)`` policies, which of them have variables, which inputs the policies
    read, whether they have secret arguments, and their repairs' shapes
    (``_repair_shape``). Everything else is a default: the candidates ``_C`` and whether
    they are clean, and per policy its entry, fused function, params, default action,
    whether it enforces, its effect when one rule fired with each action, its variables
    and its repairs' constants (``_repair_constants``)."""
    consts = ["_C", "_CLEAN"]
    repair_lines: list[str] = []
    for i, (has_variables, shape) in enumerate(zip(variables, repair_shapes, strict=True)):
        consts += [f"_E{i}", f"_F{i}", f"_P{i}", f"_D{i}", f"_N{i}", f"_A{i}"]
        if has_variables:
            consts.append(f"_V{i}")
        if shape is True:  # ``decide``'s own helper, for this policy
            consts.append(f"_L{i}")
            repair_lines.append(f"        _repair(_L{i}, b, args, None, _NO_TRACES, scrub, "
                                "errors, repairs)")
        elif shape is not None:
            consts.append(f"_PN{i}")
            repair_lines.append(f"        b['params'] = _P{i}")
            for j, (has_when, n_sets, audit) in enumerate(shape):
                repair_lines += _repair_source(i, j, has_when, n_sets, audit, consts)
    repairs = bool(repair_lines)
    whole = ("_decide(_C, revision, known_secrets, limits, tool, arguments, principal, "
             "history, request, description, now, agent)")
    refused = ["type(arguments) is not dict", "type(description) is not str",
               "limits.max_input_depth <= 0"]
    refused += ["request is not None and type(request) is not str"]
    refused += ["principal is not None and type(principal) is not dict"] if principal else []
    refused += ["history is not None and type(history) is not list"] if history else []
    refused += ["now is not None"] if now else []
    unread = ("_unread(_C, revision, known_secrets, limits, tool, arguments, agent, "
              "{})")
    lines = [
        f"def _make({', '.join(consts)}):",
        "    def _short(revision, known_secrets, limits, tool, arguments, principal, history,",
        "               request, description, now, agent, "
        + ", ".join(f"{c}={c}" for c in consts) + "):",
        "        if arguments is None:",
        "            arguments = {}",
        f"        if {' or '.join(refused)}:",
        f"            return {whole}",
        "        left = limits.max_input_bytes - _NODE_COST - 2 * _NODE_COST * len(arguments)",
        "        if left >= 0:",
        "            for k, v in arguments.items():",
        "                tv = type(v)",
        "                if type(k) is not str:",
        "                    left = -1",
        "                    break",
        "                if tv is str:",
        "                    left -= len(k) + len(v)",
        "                elif tv is float or tv is bool or v is None or (",
        "                        tv is int and _INT64[0] <= v <= _INT64[1]):",
        "                    left -= len(k)",
        "                else:",
        "                    left = -1",
        "                    break",
        "        if left < 0:",
        f"            return {whole}",
    ]
    for name, walk, empty, read in (("principal", "_normalize", "{}", principal),
                                    ("history", "_normalize_history", "[]", history)):
        if read:  # ``decide``'s walk, on what the arguments left of the bound
            lines += [f"        if {name} is None:",
                      f"            {name} = {empty}",
                      "        else:",
                      "            try:",
                      "                budget = _Budget(left)",
                      f"                {name} = {walk}({name}, limits, budget)",
                      "                left = budget.left",
                      "            except Exception as e:",
                      f"                return {unread.format('e')}"]
    lines += [
        "        if request is None:",
        "            request = ''",
        "        else:",
        "            left -= len(request)",
        "        if left < 0:",
        f"            return {unread.format('_over()')}",
        "        meter = _Meter(limits.max_cost, _C.free_patterns)",
        "        args = dict(arguments)",
        "        b = {",
        "            'tool': " + ("{'name': tool, 'description': description}," if tool
                              else "None,"),
        "            'args': args,",
        "            'principal': " + ("principal," if principal else "{},"),
        "            'history': " + ("history," if history else "[],"),
        "            'request': " + ("_Request(request, meter)," if request else "None,"),
        "            'now': " + ("_now(_UTC)," if now else "_EPOCH,"),
        "            _METER: meter,",
        "        }",
        "        fired = errors = None",
    ]
    if secret:
        lines.append("        scrub = _C.scrubber(known_secrets, arguments, args)")
    else:
        lines += ["        shared = _C._shared_scrubber",
                  "        scrub = shared[1] if shared is not None and shared[0] is "
                  "known_secrets else None",
                  "        if scrub is None:",
                  "            scrub = _C.scrubber(known_secrets, arguments, args)"]
    if repairs:  # ``decide``'s step 2, with its helper
        lines += ["        b['variables'] = {}",
                  "        errors = []",
                  "        repairs = []",
                  *repair_lines]
        if secret:
            lines += ["        if repairs and any(name in _C.secret_names for r in repairs",
                      "                           if not r.audit for name in r.set):",
                      "            scrub = _C.scrubber(known_secrets, arguments, args)"]
    lines.append("        effect = _ALLOW")
    for i, has_variables in enumerate(variables):
        lines.append(f"        b['params'] = _P{i}")
        if has_variables:
            lines += [f"        variables = _Variables(_V{i})", "        variables.bindings = b",
                      "        b['variables'] = variables"]
        else:
            lines.append("        b['variables'] = _NO_VARIABLES")
        lines += [f"        hits = _F{i}(b, meter, 0)",
                  "        if hits is None:",
                  f"            result = _D{i}",
                  "        else:",
                  "            if fired is None:",
                  "                fired = []",
                  "            if errors is None:",
                  "                errors = []",
                  # One rule fired whose shared record was made (``_shared_fired``):
                  # what ``_fused_hits`` and ``_policy_effect`` make of it, by lookups.
                  "            _h = hits[0]",
                  f"            _one = _E{i}.statics.get(_h[0]) if len(hits) == 1 and "
                  "_h[1] is True and _h[2] is None and known_secrets is None and _CLEAN "
                  "else None",
                  "            if _one is not None:",
                  "                fired.append(_one)",
                  f"                result = _A{i}[_one.action]",
                  "            else:",
                  "                acted = []",
                  f"                _fused_hits(_E{i}, hits, known_secrets is None and _CLEAN, "
                  "b, meter, scrub, errors, fired, acted)",
                  f"                result = _policy_effect(acted, _D{i})",
                  f"        if _N{i} and result is not effect and "
                  "_SEVERITY[result] > _SEVERITY[effect]:",
                  "            effect = result"]
    if any(variables):
        lines.append("        b['variables'] = _NO_VARIABLES  # the cycle (see decide)")
    lines += [
        "        if meter.left < 0 or meter.deep:",
        "            if errors is None:",
        "                errors = []",
        "            effect = _over_cost(_C.policies, errors, effect, meter)",
        "        decision = _decision(tool, effect, _MappingProxyType(args), _C.policy_names,",
        "                             revision, _C.secret_names, scrub)",
    ]
    if not repairs:  # with repairs, ``decide`` records them (and ``errors``) always
        lines += ["        if errors is None and fired is None:",
                  "            return decision"]
    lines += [
        "        return _recorded(decision, fired, " + ("repairs" if repairs else "None")
        + ", errors, ())",
        "    return _short",
        "",
    ]
    return "\n".join(lines)


def _repair_source(i: int, j: int, has_when: bool, n_sets: int, audit: bool,
                   consts: list[str]) -> list[str]:
    """``_repair``'s steps for repair ``j`` of policy ``i`` (which has a record: nothing
    unset, no name set twice), its constants appended to ``consts``: its ``when``
    (``_W``), record (``_R``), error element (``_X``), and per argument set its function
    (``_S``), name (``_K``) and non-finite message (``_M``)."""
    tag = f"{i}_{j}"
    if has_when:
        consts.append(f"_W{tag}")
    consts += [f"_R{tag}", f"_X{tag}"]
    sets = [f"{tag}_{k}" for k in range(n_sets)]
    for k in sets:
        consts += [f"_S{k}", f"_K{k}", f"_M{k}"]
    body: list[str] = []
    for k in sets:
        body += [f"_s{k} = _S{k}(b)",
                 f"if not (_isfinite(_s{k}) if type(_s{k}) is float else _finite(_s{k})):",
                 f"    raise _CelError(_M{k})"]
    body = body or ["pass"]
    lines = ["        try:"]
    if has_when:
        lines += [f"            _w = _W{tag}(b)",
                  "            if type(_w) is not bool:",
                  "                raise _CelError(f'when returned {_cel_type_name(_w)}, not bool')",
                  "            if _w:"]
        lines += ["                " + line for line in body]
    else:
        lines += ["            " + line for line in body]
    lines += ["        except Exception as _x:",
              f"            errors.append(_EvaluationError(_PN{i}, _X{tag}, "
              "scrub(_cel_error(_x).message), 'not-applied'))",
              "        else:"]
    pad = "            "
    if has_when:
        lines.append("            if _w:")
        pad = "                "
    lines.append(pad + f"repairs.append(_R{tag})")
    if not audit:  # an audit repair is only recorded
        lines += [pad + f"args[_K{k}] = _s{k}" for k in sets]
    return lines


_NOT_FUSED: list[Hit] = []
"""``decide``'s marker of a policy without a fused function (its rules run one by one)."""
_NO_TRACES: Mapping[str, PolicyTrace] = MappingProxyType({})


def _fused_hits(entry: PlanEntry, hits: list[Hit], clean: bool, bindings: Mapping[str, Any],
                meter: Meter, scrub: Scrubber, errors: list[EvaluationError],
                fired: list[FiredRule], acted: list[Action]) -> None:
    """What a policy's fused function (``CompiledPolicy.fused``) found not false, taken
    as ``_each_rule`` takes each rule's result; after a fired rule with a
    ``messageExpression`` (evaluated just now, on the meter, before the next rule runs)
    the function is run again from the next rule on."""
    policy, fused = entry.policy, entry.fused
    assert fused is not None
    rules = policy.rules
    while True:
        _take_hits(policy, hits, entry.statics, clean, bindings, scrub, errors, fired, acted)
        i, value, exc = hits[-1]
        if not (value is True and exc is None and i + 1 < len(rules)
                and rules[i].message_expression is not None):
            return
        found = fused(bindings, meter, i + 1)
        if found is None:
            return
        hits = found


def _take_hits(policy: CompiledPolicy, hits: list[Hit], statics: dict[int, FiredRule],
               clean: bool, bindings: Mapping[str, Any], scrub: Scrubber,
               errors: list[EvaluationError], fired: list[FiredRule],
               acted: list[Action]) -> None:
    """The rules a fused function found not false, in order, as ``_each_rule`` takes
    each rule's result: fired (a message evaluated), failed, or not a bool (failed)."""
    rules = policy.rules
    for i, value, exc in hits:
        rule = rules[i]
        if exc is None and value is True:
            hit = _shared_fired(policy, rule, i, statics, clean, bindings, scrub, errors)
        else:
            if exc is None:
                exc = _not_bool(value)
            failed = _failed_rule(policy, rule, exc, scrub, errors, None)
            if failed is None:
                continue
            hit = failed
        fired.append(hit)
        acted.append(hit.action)


def _not_bool(value: Any) -> Exception:
    """The error of a rule whose ``when`` produced ``value``, not a bool."""
    try:
        raise CelError(f"when returned {_cel_type_name(value)}, not bool")
    except Exception as exc:  # as the rule-by-rule loop catches it
        return exc


def _each_rule(policy: CompiledPolicy, rules: tuple[tuple[Run, CompiledRule], ...],
               statics: dict[int, FiredRule], clean: bool, bindings: Mapping[str, Any],
               scrub: Scrubber, errors: list[EvaluationError], fired: list[FiredRule],
               acted: list[Action]) -> None:
    """A policy's rules one by one, for a policy without a fused function."""
    for i, (run, rule) in enumerate(rules):
        try:
            value = run(bindings)
            if value is False:
                continue
            if value is not True:
                raise CelError(f"when returned {_cel_type_name(value)}, not bool")
        except Exception as exc:
            hit = _failed_rule(policy, rule, exc, scrub, errors, None)
            if hit is None:
                continue
        else:
            hit = _shared_fired(policy, rule, i, statics, clean, bindings, scrub, errors)
        fired.append(hit)
        acted.append(hit.action)


def _shared_fired(policy: CompiledPolicy, rule: CompiledRule, index: int,
                  statics: dict[int, FiredRule], clean: bool, bindings: Mapping[str, Any],
                  scrub: Scrubber, errors: list[EvaluationError]) -> FiredRule:
    """The record of a rule (``policy.rules[index]``) that fired: with nothing to scrub
    (``clean``), a static-message rule's one shared record (see ``PlanEntry.statics``)."""
    hit = statics.get(index) if clean else None
    if hit is None:
        hit = _fired_rule(policy, rule, bindings, scrub, errors)
        if clean and rule.message_expression is None:
            statics[index] = hit
    return hit


def _over_a_bound(base: Mapping[str, Any], origins: Origins | None) -> bool:
    """Whether the call ran out of its cost budget, its stack (``Meter.deep``) or its
    provenance scan budget so far. A ``match.when`` (or binding selector) that erred so
    selects its policy whatever the failurePolicy: under ``Ignore`` the policy was not
    matched, and the end of the call, which denies every matched policy over a bound
    (``_over_bound``), had none to deny: arguments within the depth bound, on a low
    recursion limit, ran a call past its only policy (red team 27d)."""
    meter: Meter = base[METER]
    return meter.left < 0 or meter.deep or (origins is not None and origins.scan.left < 0)


def _matches(policy: CompiledPolicy, when: Run, base: Mapping[str, Any],
             origins: Origins | None, scrub: Scrubber, errors: list[EvaluationError],
             pt: PolicyTrace | None) -> bool:
    """Whether ``match.when`` holds; an error is recorded, and under ``Fail`` matches."""
    bindings = dict(base, params=policy.params, variables={})
    if origins is not None:
        origins.params = policy.params
    try:
        value = when(bindings)
        if type(value) is not bool:
            raise CelError(f"match.when returned {_cel_type_name(value)}, not bool")
    except Exception as exc:
        e = _cel_error(exc)
        handled = "fired" if policy.failure_policy == "Fail" else "skipped"
        message = scrub(e.message)
        errors.append(EvaluationError(policy.name, "match.when", message, handled))
        if pt is not None:
            pt.steps.append(Step("match.when", error=message))
        # Fail closed: an unreadable match condition counts as a match, so the policy's
        # rules (its restrictions) still apply to the call. So does one that ran the call
        # over a bound, whatever the failurePolicy: the policy is one the call is denied by.
        matched = policy.failure_policy == "Fail" or _over_a_bound(base, origins)
        if pt is not None:
            pt.matched = matched
        return matched
    if pt is not None:
        pt.steps.append(Step("match.when", value=value, fired=value))
        pt.matched = value
    return value


def _repair(
    matched: Sequence[CompiledPolicy],
    bindings: dict[str, Any],
    args: dict[str, Any],
    origins: Origins | None,
    traces: Mapping[str, PolicyTrace],
    scrub: Scrubber,
    errors: list[EvaluationError],
    repairs: list[AppliedRepair],
) -> None:
    """The matched policies' repairs on the raw arguments, in order, each seeing the
    previous ones' output: ``args`` is updated in place (audit repairs are only recorded).

    ``bindings`` hold ``args`` (this very dict) and an empty ``variables``; each policy's
    ``params`` are written into them here. One dict serves every repair: an expression
    never writes its bindings, and ``args`` is read through them as it is updated."""
    for policy in matched:
        if not policy.repairs:
            continue
        pt = traces.get(policy.name) if traces else None
        if origins is not None:
            origins.params = policy.params
        bindings["params"] = policy.params
        audit = policy.audit
        for repair, record in policy.repair_records:
            try:
                if repair.when is not None:
                    cond = repair.when.program.evaluate(bindings)
                    if type(cond) is not bool:
                        raise CelError(f"when returned {_cel_type_name(cond)}, not bool")
                    if pt is not None:
                        pt.steps.append(Step(f"repairs.{repair.name}.when", value=cond,
                                             fired=cond))
                    if not cond:
                        continue
                new_values = {}
                for name, expr in repair.set:
                    value = new_values[name] = expr.program.evaluate(bindings)
                    if not (math.isfinite(value) if type(value) is float else _finite(value)):
                        # Same bound as on inputs: ``double("nan")`` must not turn a
                        # string every rule rejects into a number every rule accepts.
                        raise CelError(f"set {name} produced a non-finite number")
                    if pt is not None:
                        pt.steps.append(Step(f"repairs.{repair.name}.set.{name}", value=value))
            except Exception as exc:
                message = scrub(_cel_error(exc).message)
                errors.append(EvaluationError(policy.name, f"repairs.{repair.name}", message,
                                              "not-applied"))
                if pt is not None:
                    pt.steps.append(Step(f"repairs.{repair.name}", error=message))
                continue
            repairs.append(record if record is not None else AppliedRepair(
                policy.name, repair.name, tuple(new_values),
                tuple([n for n in repair.unset if n in args]), audit))
            if audit:
                continue
            args.update(new_values)
            for name in repair.unset:
                args.pop(name, None)


def _failed_rule(policy: CompiledPolicy, rule: CompiledRule, exc: Exception, scrub: Scrubber,
                 errors: list[EvaluationError], pt: PolicyTrace | None) -> FiredRule | None:
    """A rule whose ``when`` failed: recorded, and under ``Fail`` fired (None: skipped)."""
    message = scrub(_cel_error(exc).message)
    if pt is not None:
        pt.steps.append(Step(f"rules.{rule.name}", error=message))
    if policy.failure_policy == "Ignore":
        errors.append(EvaluationError(policy.name, f"rules.{rule.name}", message, "skipped"))
        return None
    errors.append(EvaluationError(policy.name, f"rules.{rule.name}", message, "fired"))
    # Fail closed: an errored allow or warn rule must not let the call through.
    # It fires as deny, and its own message (written for allow) would mislead.
    failed = f"rule {policy.name}/{rule.name} could not be evaluated"
    if rule.action in (Action.ALLOW, Action.WARN):
        action, text = Action.DENY, _message(failed, scrub)
    else:
        action, text = rule.action, _message(rule.message or failed, scrub)
    return FiredRule(policy.name, rule.name, action, text, policy.audit)


def _fired_rule(policy: CompiledPolicy, rule: CompiledRule, bindings: Mapping[str, Any],
                scrub: Scrubber, errors: list[EvaluationError]) -> FiredRule:
    """A rule whose ``when`` held, with its message (``messageExpression`` first)."""
    text = rule.message
    if rule.message_expression is not None:
        try:
            produced = rule.message_expression.program.evaluate(bindings)
            if type(produced) is not str:
                raise CelError(f"returned {_cel_type_name(produced)}, not string")
            text = produced
        except Exception as exc:
            errors.append(EvaluationError(policy.name, f"rules.{rule.name}.messageExpression",
                                          scrub(_cel_error(exc).message), "fallback"))
    text = _message(text or f"{policy.name}/{rule.name}", scrub)
    return FiredRule(policy.name, rule.name, rule.action, text, policy.audit)


def _over_bound(matched: Sequence[CompiledPolicy], errors: list[EvaluationError],
                effect: Effect, message: str) -> Effect:
    """The call is over one of its bounds (inputs over the size bound or not JSON, the
    evaluation's cost budget, the provenance scan budget): an ``input`` error of every
    matched policy, and the call is denied whatever their ``failurePolicy``. ``Ignore``
    skips a policy whose own rule errs; a call over a bound is the caller's doing (an
    attacker pads the input to get there), and skipping the policy would let padding turn
    it off. (Audit policies still only record.)"""
    for policy in matched:
        errors.append(EvaluationError(policy.name, "input", message, "fired"))
        if not policy.audit and _SEVERITY[Effect.DENY] > _SEVERITY[effect]:
            effect = Effect.DENY
    return effect


def _over_cost(matched: Sequence[CompiledPolicy], errors: list[EvaluationError],
               effect: Effect, meter: Meter) -> Effect:
    """The call ran out of its cost budget, or an evaluation of it ran out of stack
    (``Meter.deep``; ``limits.too_deep``): ``_over_bound``."""
    return _over_bound(matched, errors, effect, DEPTH_ERROR if meter.deep else COST_ERROR)


def _evaluate_call(
    call: Call,
    candidates_of_tool: Candidates,
    origins: Origins | None,
    revision: str,
    input_error: str | None,
    trace: list[PolicyTrace] | None,
    known_secrets: Scrubber | None,
    unmatched: Effect,
    max_cost: int,
    counters: CounterStore | None,
) -> Decision:
    meter = Meter(max_cost, candidates_of_tool.free_patterns)
    args: dict[str, Any] = dict(call.args)
    raw_args = call.args
    base = _base(call, candidates_of_tool.names, meter)
    fired: list[FiredRule] = []
    repairs: list[AppliedRepair] = []
    errors: list[EvaluationError] = []
    matched: list[CompiledPolicy] = []
    effect = Effect.ALLOW

    candidates = candidates_of_tool.policies
    if not candidates:
        effect = unmatched
    secret_names = candidates_of_tool.secret_names
    # Computed on first use (most calls produce no text to scrub). ``args`` is updated in
    # place by repairs; if a repair sets a secret argument the scrubber is rebuilt after
    # the repairs, so a value it produced is scrubbed whenever the first use came.
    scrub = candidates_of_tool.scrubber(known_secrets, raw_args, args)

    # 1. match
    for policy in candidates:
        pt = PolicyTrace(policy.name, False, policy.audit) if trace is not None else None
        if pt is not None:
            trace.append(pt)  # type: ignore[union-attr]
        if not policy.matches_agent(call.agent):
            continue
        if input_error is not None:
            matched.append(policy)
            if pt is not None:
                pt.matched = True
            continue
        if policy.selector is not None:
            # The binding's selector, then the policy's own match: both must hold.
            bindings = dict(base, params=policy.params, variables={})
            try:
                value = policy.selector.program.evaluate(bindings)
                if type(value) is not bool:
                    raise CelError(f"returned {_cel_type_name(value)}, not bool")
                if pt is not None:
                    pt.steps.append(Step("binding.match.when", value=value, fired=value))
            except Exception as exc:
                message = scrub(_cel_error(exc).message)
                handled = "fired" if policy.failure_policy == "Fail" else "skipped"
                errors.append(EvaluationError(policy.name, "binding.match.when", message,
                                              handled))
                # Fail closed as for match.when: an unreadable selector selects.
                value = policy.failure_policy == "Fail" or _over_a_bound(base, origins)
                if pt is not None:
                    pt.steps.append(Step("binding.match.when", error=message))
            if not value:
                continue
        if policy.when is None:
            matched.append(policy)
            if pt is not None:
                pt.matched = True
            continue
        if _matches(policy, policy.when.program.evaluate, base, origins, scrub, errors, pt):
            matched.append(policy)

    if input_error is not None:
        effect = _over_bound(matched, errors, effect, input_error)
        if trace is not None:
            _scrub_traces(trace, scrub)
        return _record(call, effect, args, fired, repairs, errors, matched, revision,
                       secret_names, scrub, (), candidates_of_tool)

    traces = {t.policy: t for t in trace} if trace is not None else {}

    # 2. repairs, on the raw arguments, in order; each sees the previous ones' output
    if candidates_of_tool.repairs:
        _repair(matched, dict(base, args=args, variables={}), args, origins, traces, scrub,
                errors, repairs)
    if repairs and any(name in secret_names for r in repairs if not r.audit for name in r.set):
        scrub = candidates_of_tool.scrubber(known_secrets, raw_args, args)

    # 3. counters: one batch of reservations for every matched policy's counters
    views: dict[str, dict[str, Any]] = {}
    failed_closed: set[str] = set()
    reservations: list[Reservation] = []
    if candidates_of_tool.counts and any(p.counters for p in matched):
        views, failed_closed = _count(matched, base, args, counters, errors, reservations,
                                      scrub, traces)

    # 4. rules
    for policy in matched:
        pt = traces.get(policy.name)
        if origins is not None:
            origins.params = policy.params
        counter_view = views.get(policy.name)
        extra = {} if counter_view is None else {"counters": counter_view}
        if policy.variables:
            variables = Variables(policy.variable_programs)
            bindings = dict(base, args=args, params=policy.params, variables=variables, **extra)
            variables.bindings = bindings
        else:
            variables = _NO_VARIABLES
            bindings = dict(base, args=args, params=policy.params, variables=variables, **extra)
        acted: list[Action] = []
        for rule in policy.rules:
            try:
                value = rule.when.program.evaluate(bindings)
                if type(value) is not bool:
                    raise CelError(f"when returned {_cel_type_name(value)}, not bool")
            except Exception as exc:
                hit = _failed_rule(policy, rule, exc, scrub, errors, pt)
                if hit is not None:
                    fired.append(hit)
                    acted.append(hit.action)
                continue
            if pt is not None:
                pt.steps.append(Step(f"rules.{rule.name}", value=value, fired=value))
            if not value:
                continue
            hit = _fired_rule(policy, rule, bindings, scrub, errors)
            fired.append(hit)
            acted.append(hit.action)
        if pt is not None:
            for name, value in variables._done.items():
                pt.steps.append(Step(f"variables.{name}", value=value))
            for name, failed in variables._errors.items():
                pt.steps.append(Step(f"variables.{name}", error=scrub(failed)))
        bindings["variables"] = _NO_VARIABLES  # the cycle, as in ``decide`` (traced too)
        if not policy.audit:
            result = _policy_effect(acted, policy.default_action)
            if policy.name in failed_closed and _SEVERITY[result] < _SEVERITY[Effect.DENY]:
                result = Effect.DENY  # a counter that could not be counted (fail closed)
            if _SEVERITY[result] > _SEVERITY[effect]:
                effect = result

    if meter.left < 0 or meter.deep:
        effect = _over_cost(matched, errors, effect, meter)
    elif origins is not None and origins.scan.left < 0:
        # Spent by a provenance function: the rule that ran it out erred (its text says
        # so), and an error ``||`` absorbed or ``Ignore`` skipped must not let the call
        # through unread (the match bound's rule, ``MatchBoundExceeded``).
        effect = _over_bound(matched, errors, effect, SCAN_ERROR)
    if reservations and effect not in (Effect.ALLOW, Effect.REQUIRE_APPROVAL):
        _release(counters, reservations)  # only a call that runs is counted
        reservations = []
    if trace is not None:
        _scrub_traces(trace, scrub)
    return _record(call, effect, args, fired, repairs, errors, matched, revision, secret_names,
                   scrub, tuple(reservations), candidates_of_tool)


_MAX_COST = 2**53


def _count(
    matched: Sequence[CompiledPolicy],
    base: Mapping[str, Any],
    args: Mapping[str, Any],
    store: CounterStore | None,
    errors: list[EvaluationError],
    reservations: list[Reservation],
    scrub: Scrubber,
    traces: Mapping[str, PolicyTrace],
) -> tuple[dict[str, dict[str, Any]], set[str]]:
    """Each matched policy's ``counters`` view, and the policies that must fail closed.

    Key, ``when`` and cost are evaluated on the repaired arguments; then one call to the
    store reserves them all. A store that cannot be reached is handled by the counter's
    failurePolicy: Fail denies the call, Ignore reads the counter as zero. An error of its
    key, ``when`` or cost denies the call whatever the failurePolicy: those read the
    arguments the model chose, and under Ignore a cost of 2^53, a negative one or an amount
    ``int()`` cannot read was admitted uncounted (red team 26), past any daily total.
    """
    views: dict[str, dict[str, Any]] = {}
    failed: set[str] = set()
    pending: list[tuple[CompiledPolicy, CompiledCounter, CounterRequest]] = []

    def fail(policy: CompiledPolicy, counter: CompiledCounter, message: str,
             closed: bool = False) -> None:
        closed = closed or counter.failure_policy == "Fail"
        handled = "fired" if closed else "skipped"
        errors.append(EvaluationError(policy.name, f"counters.{counter.name}", message, handled))
        if closed:
            failed.add(policy.name)
        views[policy.name][counter.name] = _view(0, counter.limit)
        pt = traces.get(policy.name)
        if pt is not None:
            pt.steps.append(Step(f"counters.{counter.name}", error=message))

    for policy in matched:
        if not policy.counters:
            continue
        views[policy.name] = {}
        bindings = dict(base, args=args, params=policy.params, variables={})
        for counter in policy.counters:
            try:
                request = _request(counter, bindings)
            except Exception as exc:
                fail(policy, counter, scrub(f"counter {counter.name}: "
                                            f"{_cel_error(exc).message}"), closed=True)
                continue
            pending.append((policy, counter, request))
    if not pending:
        return views, failed
    # Two bindings of one policy matching the same call share its counter: the call is
    # one call, so an identical request is made (and counted) once.
    index: dict[CounterRequest, int] = {}
    for _, _, r in pending:
        index.setdefault(r, len(index))
    requests = list(index)
    results: list[CounterResult] | None
    if store is None:
        results = [CounterResult(r.cost, r.cost <= r.limit, None) for r in requests]
    else:
        try:
            results = list(store.reserve(requests))
            if len(results) != len(requests) or not all(
                    isinstance(r, CounterResult) and type(r.count) is int for r in results):
                raise ValueError("the counter store answered something else than one "
                                 "CounterResult per request")
        except Exception as exc:
            results = None
            reason = f"counter store unavailable ({type(exc).__name__})"
    if results is not None:
        reservations.extend(r.reservation for r in results if r.reservation is not None)
    for policy, counter, request in pending:
        if results is None:
            fail(policy, counter, reason)
            continue
        result = results[index[request]]
        view = _view(result.count, request.limit)
        views[policy.name][counter.name] = view
        pt = traces.get(policy.name)
        if pt is not None:
            pt.steps.append(Step(f"counters.{counter.name}", value=view))
    return views, failed


def _request(counter: CompiledCounter, bindings: Mapping[str, Any]) -> CounterRequest:
    key = counter.key.program.evaluate(bindings)
    if type(key) not in (str, int):
        raise CelError(f"key returned {_cel_type_name(key)}, not string or int")
    counts = True
    if counter.when is not None:
        counts = counter.when.program.evaluate(bindings)
        if type(counts) is not bool:
            raise CelError(f"when returned {_cel_type_name(counts)}, not bool")
    cost = 1
    if counter.cost is not None and counts:
        cost = counter.cost.program.evaluate(bindings)
        if type(cost) is not int or not 0 <= cost < _MAX_COST:
            raise CelError("cost must be an int between 0 and 2^53")
    # JSON text keeps the string "1" and the int 1 apart.
    return CounterRequest(window_key(counter.scope, json.dumps(key)), counter.window,
                          counter.limit, cost if counts else 0, counter.scope)


def _view(count: int, limit: int) -> dict[str, Any]:
    """``counters.<name>``: the count with this call, and what follows from it."""
    return {"count": count, "limit": limit, "exceeded": count > limit,
            "remaining": max(0, limit - count)}


def _release(store: CounterStore | None, reservations: Sequence[Reservation]) -> None:
    if store is None or not reservations:
        return
    # On failure the count stays high: it errs towards refusing, never towards admitting.
    with contextlib.suppress(Exception):
        store.release(reservations)


COST_ERROR = "the call exceeds the evaluation cost bound"
DEPTH_ERROR = "the call's evaluation ran out of stack (nested too deeply for the recursion limit)"
SCAN_ERROR = "the call exceeds the provenance scanning budget"


def _scrub_traces(traces: list[PolicyTrace], scrub: Scrubber) -> None:
    """``explain`` shows every value an expression produced: a variable or repair read
    from a secret argument holds the secret (or text built around it), whatever its name."""
    for t in traces:
        t.steps = [Step(s.element, _scrub_value(s.value, scrub),
                        None if s.error is None else scrub(s.error), s.fired)
                   for s in t.steps]


def _scrub_value(value: Any, scrub: Scrubber) -> Any:
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, Mapping):
        return {_scrub_value(k, scrub): _scrub_value(v, scrub) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub_value(v, scrub) for v in value]
    if value is None or isinstance(value, bool):
        return value
    return REDACTED if scrub.hides(str(value)) else value


_ACTION_EFFECT = {Action.HALT: Effect.HALT, Action.DENY: Effect.DENY,
                  Action.REQUIRE_APPROVAL: Effect.REQUIRE_APPROVAL}
_SEVERITY = {e: e.severity for e in Effect}


def _policy_effect(acted: list[Action], default: Effect) -> Effect:
    """Most severe fired action; else the default, which a fired allow rule satisfies."""
    if not acted:
        return default
    worst = Effect.ALLOW
    allowed = False
    for a in acted:
        e = _ACTION_EFFECT.get(a)
        if e is None:
            allowed = allowed or a is Action.ALLOW  # warn changes nothing
        elif _SEVERITY[e] > _SEVERITY[worst]:
            worst = e
    if worst is not Effect.ALLOW or allowed:
        return worst
    return default


def _finite(value: Any) -> bool:
    if type(value) is float:
        return math.isfinite(value)
    if isinstance(value, Mapping):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list | tuple):
        return all(_finite(v) for v in value)
    return True


def _message(text: str, scrub: Scrubber) -> str:
    text = " ".join(scrub(text).split())
    if len(text) > MAX_MESSAGE_LENGTH:
        text = text[: MAX_MESSAGE_LENGTH - 1] + "…"
    return text


def _cel_type_name(value: Any) -> str:
    from guardrails.expr.values import type_name

    try:
        return type_name(value)
    except CelError:
        return type(value).__name__


def _record(
    call: Call,
    effect: Effect,
    args: dict[str, Any],
    fired: list[FiredRule],
    repairs: list[AppliedRepair],
    errors: list[EvaluationError],
    matched: list[CompiledPolicy],
    revision: str,
    secret_names: frozenset[str],
    scrub: Scrubber,
    reservations: tuple[Reservation, ...],
    candidates: Candidates,
) -> Decision:
    names = (candidates.policy_names if len(matched) == len(candidates.policies)
             else tuple([p.name for p in matched]))
    # ``args`` is this call's own dict, never written after the decision: a read-only view
    # of it needs no second copy.
    return _recorded(_decision(call.tool, effect, MappingProxyType(args), names, revision,
                               secret_names, scrub), fired, repairs, errors, reservations)


_SHORT_GLOBALS: dict[str, Any] = {
    "_decide": decide, "_NODE_COST": NODE_COST, "_INT64": _INT64, "_Meter": Meter,
    "_Request": Request, "_now": datetime.datetime.now, "_UTC": datetime.UTC,
    "_EPOCH": _EPOCH, "_METER": METER, "_ALLOW": _ALLOW, "_Variables": Variables,
    "_NO_VARIABLES": _NO_VARIABLES, "_fused_hits": _fused_hits,
    "_policy_effect": _policy_effect, "_SEVERITY": _SEVERITY, "_over_cost": _over_cost,
    "_decision": _decision, "_recorded": _recorded, "_MappingProxyType": MappingProxyType,
    "_unread": _unread, "_over": _over, "_Budget": Budget, "_normalize": normalize,
    "_normalize_history": normalize_history, "_repair": _repair, "_NO_TRACES": _NO_TRACES,
    "_CelError": CelError, "_cel_type_name": _cel_type_name, "_cel_error": _cel_error,
    "_EvaluationError": EvaluationError, "_isfinite": math.isfinite, "_finite": _finite,
}
"""The names a generated short path reads besides its defaults: ``decide``'s helpers."""
