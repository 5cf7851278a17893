"""Records for guardrails/v1 documents, exactly as written in the files (nothing compiled).

Every record keeps the ``Position`` of its own YAML node so that later stages (the engine's
compiler, the test runner) can name ``file:line:column`` for problems they find. Field
names are the snake_case of the YAML keys. Static data (``params``, call arguments) is
plain JSON-like Python: ``dict``/``list``/``str``/``int``/``float``/``bool``/``None``;
treat it as read-only.
"""

from __future__ import annotations

import datetime
import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from guardrails.model.errors import Problem
from guardrails.model.source import Expression, Position

API_VERSION = "guardrails/v1"

Mode = Literal["enforce", "audit"]
FailurePolicy = Literal["Fail", "Ignore"]
DefaultAction = Literal["allow", "deny"]
RuleAction = Literal["allow", "deny", "halt", "require_approval", "warn"]
Effect = Literal["allow", "deny", "halt", "require_approval"]

MODES: tuple[Mode, ...] = ("enforce", "audit")
FAILURE_POLICIES: tuple[FailurePolicy, ...] = ("Fail", "Ignore")
DEFAULT_ACTIONS: tuple[DefaultAction, ...] = ("allow", "deny")
RULE_ACTIONS: tuple[RuleAction, ...] = ("allow", "deny", "halt", "require_approval", "warn")
EFFECTS: tuple[Effect, ...] = ("allow", "deny", "halt", "require_approval")
Trust = Literal["trusted", "untrusted"]
TRUST: tuple[Trust, ...] = ("trusted", "untrusted")
HISTORY_EFFECTS: tuple[str, ...] = (*EFFECTS, "rejected")
"""Effects a history entry can record: a human's rejection of an approval too."""

DEFAULT_REPLACEMENT = "[REDACTED]"


@dataclass(frozen=True, slots=True)
class Metadata:
    name: str
    description: str
    labels: Mapping[str, str]
    position: Position
    """Of the ``metadata`` mapping; ``name_position`` is the name's own node."""
    name_position: Position


@dataclass(frozen=True, slots=True)
class Match:
    tools: tuple[str, ...] | None
    """Shell-style globs on the tool name, case-sensitive; None (omitted) matches every tool."""
    when: Expression | None
    position: Position
    agents: tuple[str, ...] | None = None
    """Agent names or ids the policy applies to; None (omitted) matches every agent."""
    tool_positions: tuple[Position, ...] = ()
    """Of each glob in ``tools``, for findings about one of them."""
    agent_positions: tuple[Position, ...] = ()
    """Of each name in ``agents``."""

    def matches_tool(self, tool: str) -> bool:
        """Glob match only: ``when`` needs the engine."""
        return self.tools is None or any(fnmatch.fnmatchcase(tool, g) for g in self.tools)


@dataclass(frozen=True, slots=True)
class Variable:
    name: str
    expression: Expression
    position: Position


@dataclass(frozen=True, slots=True)
class Repair:
    name: str
    when: Expression | None
    set: tuple[tuple[str, Expression], ...]
    """``(argument, expression)`` in file order: repairs apply in that order."""
    unset: tuple[str, ...]
    position: Position


@dataclass(frozen=True, slots=True)
class SecretInjection:
    argument: str
    env: str
    """Name of the environment variable holding the value."""
    position: Position


@dataclass(frozen=True, slots=True)
class Secrets:
    arguments: tuple[str, ...]
    inject: tuple[SecretInjection, ...]
    position: Position | None
    """None when the policy has no ``secrets`` section."""

    @property
    def secret_arguments(self) -> frozenset[str]:
        """Declared and injected arguments: an injected value is a secret too."""
        return frozenset(self.arguments) | {i.argument for i in self.inject}


@dataclass(frozen=True, slots=True)
class Rule:
    name: str
    when: Expression
    action: RuleAction
    message: str | None
    message_expression: Expression | None
    position: Position


@dataclass(frozen=True, slots=True)
class Counter:
    """A count shared across runs and replicas: ``counters.<name>`` in rules.

    Each matched call for which ``when`` holds reserves ``cost`` on the counter of its
    ``key`` in the current fixed window, only while the count stays within ``limit``.
    """

    name: str
    key: Expression
    """CEL: what is counted separately (a user, a tenant); a string or an int."""
    window: int
    """Window length in seconds; windows are fixed, aligned to the Unix epoch."""
    limit: int
    when: Expression | None
    cost: Expression | None
    """CEL int added per call; None means 1."""
    failure_policy: FailurePolicy | None
    """When the store cannot be reached: None means the policy's ``failurePolicy``."""
    position: Position


@dataclass(frozen=True, slots=True)
class Redaction:
    name: str
    regex: str
    """RE2 syntax; the loader has checked it compiles and cannot match the empty string."""
    replacement: str
    position: Position
    regex_position: Position


class _Document:
    """What every top-level document has: its name (from metadata) and its file."""

    __slots__ = ()
    metadata: Metadata
    position: Position

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def file(self) -> str:
        return self.position.file


def _no_positions() -> Mapping[str, Position]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ToolPolicy(_Document):
    """One ``kind: ToolPolicy`` document; ``spec`` fields are flattened onto the record."""

    metadata: Metadata
    mode: Mode
    failure_policy: FailurePolicy
    default_action: DefaultAction
    match: Match
    params: Mapping[str, Any]
    """``paramsFile`` content with inline ``params`` merged over it (top-level keys)."""
    params_file: str | None
    """The params file as resolved against the policy file's directory, if any."""
    variables: tuple[Variable, ...]
    repairs: tuple[Repair, ...]
    secrets: Secrets
    rules: tuple[Rule, ...]
    redact: tuple[Redaction, ...]
    position: Position
    """Of the document (its first node)."""
    uses: tuple[tuple[str, Position], ...] = ()
    """``spec.uses``: libraries whose params are merged under ``params``, with positions."""
    results: Trust | None = None
    """``spec.results``: whether the matched tools' results are trusted content."""
    counters: tuple[Counter, ...] = ()
    params_positions: Mapping[str, Position] = field(default_factory=_no_positions)
    """Where each inline ``params`` key is written (keys of a params file are not here)."""

    def expressions(self) -> tuple[Expression, ...]:
        """Every CEL expression of the policy, as written."""
        out = [self.match.when] if self.match.when is not None else []
        for c in self.counters:
            out.extend(e for e in (c.key, c.when, c.cost) if e is not None)
        out.extend(v.expression for v in self.variables)
        for r in self.repairs:
            out.extend([*([r.when] if r.when is not None else []), *(e for _, e in r.set)])
        for rule in self.rules:
            out.append(rule.when)
            if rule.message_expression is not None:
                out.append(rule.message_expression)
        return tuple(out)


@dataclass(frozen=True, slots=True)
class PolicyBinding(_Document):
    """One ``kind: PolicyBinding`` document: a policy applied to the agents or principals
    its selector names, with its own params and mode (a per-tenant rollout switch).

    A policy with at least one binding applies only through its bindings.
    """

    metadata: Metadata
    policy: str
    policy_position: Position
    agents: tuple[str, ...] | None
    """Agent names or ids; None matches every agent."""
    when: Expression | None
    """CEL bool over the call (``principal.tenant == "acme"``); None matches every call."""
    params: Mapping[str, Any]
    """Merged over the policy's params, per top-level key."""
    mode: Mode | None
    """None keeps the policy's own mode."""
    position: Position
    params_positions: Mapping[str, Position] = field(default_factory=_no_positions)
    """Where each ``params`` key is written."""
    agent_positions: tuple[Position, ...] = ()
    """Of each name in ``agents``."""


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    tool: str
    args: Mapping[str, Any]
    effect: str
    position: Position
    result: str = ""
    trusted: bool = False
    at: datetime.datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        """The shape ``PolicySet.evaluate(history=...)`` takes (the guard records the same)."""
        out: dict[str, Any] = {"tool": self.tool, "args": self.args, "effect": self.effect,
                               "result": self.result, "trusted": self.trusted}
        if self.at is not None:
            out["at"] = self.at
        return out


@dataclass(frozen=True, slots=True)
class TestCall:
    __test__ = False  # not a pytest class

    tool: str
    args: Mapping[str, Any]
    principal: Mapping[str, Any]
    history: tuple[HistoryEntry, ...]
    request: str | None
    description: str | None
    position: Position
    now: datetime.datetime | None = None
    """The time the case is evaluated at (``now`` in expressions); None: the real time."""
    agent: str | None = None
    """The calling agent's name or id (``match.agents``, bindings); None: unknown."""
    counters: Mapping[str, int] | None = None
    """Counts already made in the current window, by counter name (or ``policy/counter``)."""


@dataclass(frozen=True, slots=True)
class TestExpect:
    """What a case asserts: ``effect`` always; None elsewhere means "not asserted"."""

    __test__ = False  # not a pytest class

    effect: Effect
    arguments: Mapping[str, Any] | None
    """These keys must be present in the decision's arguments with equal values."""
    rules: tuple[str, ...] | None
    """Exactly these ``policy/rule`` fired (compared as sets; ``[]`` means none fired)."""
    message: str | None
    """A substring of the decision's message."""
    errors: int | None
    """The exact number of evaluation errors recorded in the decision."""
    position: Position


@dataclass(frozen=True, slots=True)
class TestCase:
    __test__ = False  # not a pytest class

    name: str
    call: TestCall
    expect: TestExpect
    position: Position


@dataclass(frozen=True, slots=True)
class PolicyTest(_Document):
    """One ``kind: PolicyTest`` document."""

    metadata: Metadata
    policies: tuple[str, ...]
    """Policy paths resolved against the test file's directory; empty means "the policies
    loaded together with this test"."""
    cases: tuple[TestCase, ...]
    position: Position

    __test__ = False  # not a pytest class


@dataclass(frozen=True, slots=True)
class FunctionParam:
    name: str
    type: str
    """A CEL type name, or ``any``."""


@dataclass(frozen=True, slots=True)
class LibraryFunction:
    """One function of a ``Library``: inlined where it is called (``lib.fn(...)``)."""

    library: str
    name: str
    description: str
    params: tuple[FunctionParam, ...]
    expression: Expression
    position: Position

    @property
    def qualified(self) -> str:
        return f"{self.library}.{self.name}"


@dataclass(frozen=True, slots=True)
class Library(_Document):
    """One ``kind: Library`` document."""

    metadata: Metadata
    params: Mapping[str, Any]
    functions: tuple[LibraryFunction, ...]
    position: Position


@dataclass(frozen=True, slots=True)
class Documents:
    """Everything one ``load_documents`` call read: all or nothing."""

    policies: tuple[ToolPolicy, ...]
    tests: tuple[PolicyTest, ...]
    files: tuple[str, ...]
    """Document files in load order (params files are not listed here)."""
    sources: Mapping[str, bytes]
    """Raw bytes of every file read, document and params files, keyed by path as named in
    problems: hash these for a revision."""
    warnings: tuple[Problem, ...] = ()
    """Likely mistakes that still load (YAML pitfalls), for ``guardrails check``."""
    libraries: tuple[Library, ...] = ()
    """``kind: Library`` documents: functions inlined at compile time, shared params
    (already merged into the policies' ``params``)."""
    bindings: tuple[PolicyBinding, ...] = ()
    empty: tuple[str, ...] = ()
    """Document files that hold no document (empty, comments only): skipped, and told
    apart so that a reload can refuse a file emptied while it is rewritten."""
