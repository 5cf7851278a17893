"""Compiled policies: what the loader's records become once every expression is compiled.

These records are built once at load time by ``engine.compile`` and are read-only
afterwards, so one ``PolicySet`` can serve concurrent calls without locks.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from guardrails.engine.decision import Action, AppliedRepair, Effect
from guardrails.expr import FusedRules, Program
from guardrails.model.source import Expression, Position

Mode = Literal["enforce", "audit"]
FailurePolicy = Literal["Fail", "Ignore"]


@dataclass(frozen=True, slots=True)
class CompiledExpression:
    """A compiled CEL program together with where its text sits in the policy file."""

    expression: Expression
    program: Program
    names: frozenset[str] = frozenset()
    """Identifiers the expression uses (found once, at compile time)."""

    def evaluate(self, bindings: Mapping[str, Any]) -> Any:
        return self.program.evaluate(bindings)


@dataclass(frozen=True, slots=True)
class CompiledVariable:
    name: str
    value: CompiledExpression


@dataclass(frozen=True, slots=True)
class CompiledRepair:
    name: str
    when: CompiledExpression | None
    set: tuple[tuple[str, CompiledExpression], ...]
    unset: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CompiledRule:
    name: str
    when: CompiledExpression
    action: Action
    message: str
    message_expression: CompiledExpression | None
    position: Position


@dataclass(frozen=True, slots=True)
class CompiledCounter:
    name: str
    scope: str
    """``policy/counter`` of the policy as written: a policy's bindings share its counts."""
    key: CompiledExpression
    window: int
    limit: int
    when: CompiledExpression | None
    cost: CompiledExpression | None
    failure_policy: FailurePolicy


@dataclass(frozen=True, slots=True)
class SecretRef:
    """Where an injected secret comes from; only the provider ever sees the value."""

    env: str


@dataclass(frozen=True, slots=True)
class RedactPattern:
    name: str
    pattern: Any
    """A compiled RE2 pattern (google-re2 has no type stubs)."""
    replacement: str


@dataclass(frozen=True)
class CompiledPolicy:
    name: str
    position: Position
    mode: Mode
    failure_policy: FailurePolicy
    default_action: Effect
    tools: tuple[str, ...] | None
    """Shell-style globs on the tool name; None matches every tool."""
    when: CompiledExpression | None
    params: Mapping[str, Any]
    variables: tuple[CompiledVariable, ...]
    repairs: tuple[CompiledRepair, ...]
    rules: tuple[CompiledRule, ...]
    secret_arguments: frozenset[str]
    inject: Mapping[str, SecretRef]
    redact: tuple[RedactPattern, ...]
    results: str | None = None
    """``spec.results``: "trusted", "untrusted" or None (no label)."""
    agents: tuple[frozenset[str], ...] = ()
    """Agent selectors (``match.agents``, then the binding's): the agent must be named in
    each (by its name or id). Empty: every agent."""
    selector: CompiledExpression | None = None
    """The binding's ``match.when``, which must hold as well as the policy's own."""
    binding: str | None = None
    """The ``PolicyBinding`` this instance comes from; None for a policy applied as written."""
    counters: tuple[CompiledCounter, ...] = ()
    tool_positions: tuple[Position, ...] = ()
    """Of each glob in ``tools`` (for lint findings)."""
    fused: FusedRules | None = field(default=None, repr=False, compare=False)
    """All its rule conditions as one generated function (``codegen.fused_rules``), for
    the engine's short path; None when they are not generated code."""
    _tool_regex: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    variable_programs: Mapping[str, Program] = field(init=False, repr=False, compare=False)
    """Each variable's program by name: what a call's ``Variables`` evaluates."""
    repair_records: tuple[tuple[CompiledRepair, AppliedRepair | None], ...] = field(
        init=False, repr=False, compare=False)
    """Each repair with, when it has no ``unset``, the record of it applied (the same for
    every call: its ``set`` names, nothing unset); None for the others. Pairs made once:
    ``zip(..., strict=True)`` costs a call some 0.2 µs per policy with repairs."""
    names: frozenset[str] = field(init=False, repr=False, compare=False)
    """Identifiers its expressions use: inputs no candidate reads are not even copied."""

    def __post_init__(self) -> None:
        regex = None
        if self.tools is not None:
            regex = re.compile("|".join(fnmatch.translate(g) for g in self.tools) or "(?!)")
        object.__setattr__(self, "_tool_regex", regex)
        object.__setattr__(self, "variable_programs",
                           {v.name: v.value.program for v in self.variables})
        records = []
        for r in self.repairs:
            names = tuple(name for name, _ in r.set)
            records.append((r, None if r.unset or len(set(names)) != len(names) else
                               AppliedRepair(self.name, r.name, names, (), self.audit)))
        object.__setattr__(self, "repair_records", tuple(records))
        compiled = [self.when, self.selector, *(v.value for v in self.variables),
                    *(c.key for c in self.counters), *(c.when for c in self.counters),
                    *(c.cost for c in self.counters),
                    *(r.when for r in self.repairs), *(e for r in self.repairs for _, e in r.set),
                    *(r.when for r in self.rules), *(r.message_expression for r in self.rules)]
        object.__setattr__(self, "names", frozenset().union(
            *(c.names for c in compiled if c is not None)))

    @property
    def audit(self) -> bool:
        return self.mode == "audit"

    def matches_agent(self, agent: tuple[str, ...] | None) -> bool:
        """Whether the policy applies to an agent known by these names (its name and id).

        An unknown agent (None: the guard found no agent run) matches every selector: the
        restrictions of every agent's policies apply, failing closed.
        """
        return agent is None or all(not names.isdisjoint(agent) for names in self.agents)

    def matches_tool(self, tool: str) -> bool:
        """Glob match only (``match.when`` is evaluated per call)."""
        return self._tool_regex is None or self._tool_regex.fullmatch(tool) is not None

    def expressions(self) -> Iterator[tuple[str, Expression, Program]]:
        """Every compiled expression with the element it belongs to (for linting)."""
        if self.when is not None:
            yield "match.when", self.when.expression, self.when.program
        if self.selector is not None:
            yield "binding.match.when", self.selector.expression, self.selector.program
        for c in self.counters:
            yield f"counters.{c.name}.key", c.key.expression, c.key.program
            if c.when is not None:
                yield f"counters.{c.name}.when", c.when.expression, c.when.program
            if c.cost is not None:
                yield f"counters.{c.name}.cost", c.cost.expression, c.cost.program
        for v in self.variables:
            yield f"variables.{v.name}", v.value.expression, v.value.program
        for r in self.repairs:
            if r.when is not None:
                yield f"repairs.{r.name}.when", r.when.expression, r.when.program
            for arg, e in r.set:
                yield f"repairs.{r.name}.set.{arg}", e.expression, e.program
        for rule in self.rules:
            yield f"rules.{rule.name}.when", rule.when.expression, rule.when.program
            if rule.message_expression is not None:
                me = rule.message_expression
                yield f"rules.{rule.name}.messageExpression", me.expression, me.program
