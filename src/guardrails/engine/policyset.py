"""``PolicySet``: a loaded, compiled, immutable set of policies and its public methods."""

from __future__ import annotations

import dataclasses
import datetime
import itertools
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from guardrails.engine.counters import CounterStore
from guardrails.engine.decision import Decision, Effect
from guardrails.engine.evaluate import (
    Candidates,
    InputError,
    PolicyTrace,
    _redactor,
    decide,
    empty_call,
    evaluate_call,
    normalize,
    read_call,
)
from guardrails.engine.policy import CompiledPolicy, Mode, SecretRef
from guardrails.engine.scrub import Scrubber
from guardrails.expr.limits import DEFAULT_LIMITS, Limits

_TOOL_CACHE_SIZE = 4096


@dataclass(frozen=True)
class Explanation:
    """A decision plus every expression the engine evaluated for it (``eval --explain``)."""

    decision: Decision
    policies: tuple[PolicyTrace, ...]

    def to_dict(self) -> dict[str, Any]:
        secret = self.decision.secret_arguments
        return {
            "decision": self.decision.to_dict(),
            "policies": [t.to_dict(secret) for t in self.policies],
        }


class PolicyProvider(Protocol):
    """Where a guard gets its policies for each call: a ``PolicySet`` (fixed) or a
    ``guardrails.PolicySource`` (hot reload). Read once per call, so a call finishes on the
    set it started with."""

    @property
    def current(self) -> PolicySet: ...


class PolicySet:
    """Compiled policies, ready to evaluate calls. Immutable and safe to share across tasks."""

    def __init__(
        self,
        policies: Sequence[CompiledPolicy],
        *,
        revision: str,
        limits: Limits = DEFAULT_LIMITS,
    ) -> None:
        self._policies = tuple(policies)
        self._revision = revision
        self._limits = limits
        self._by_tool: dict[Any, Candidates] = _prepared(self._policies)
        self._lock = threading.Lock()
        self._redact = _redactor(self._policies)

    def __repr__(self) -> str:
        return f"<PolicySet {len(self._policies)} policies revision={self._revision[:12]}>"

    @property
    def revision(self) -> str:
        """Content hash of the policy files (and params files) this set was loaded from."""
        return self._revision

    @property
    def current(self) -> PolicySet:
        """The set itself: a ``PolicySet`` is a source that never changes, so ``guard()``
        reads ``.current`` of a fixed set and of a hot-reloading ``PolicySource`` alike."""
        return self

    @property
    def policies(self) -> tuple[CompiledPolicy, ...]:
        return self._policies

    @property
    def limits(self) -> Limits:
        return self._limits

    @property
    def metered(self) -> bool:
        """Whether every expression of the set draws on a call's cost budget: false only
        for a set loaded with ``backend="interpreter"`` (cel-python keeps no budget, so a
        call's cost has no bound there and ``guard()`` refuses the set). Worked out on first
        read, not at load."""
        metered = self.__dict__.get("_metered")
        if metered is None:
            metered = all(program.metered for policy in self._policies
                          for _, _, program in policy.expressions())
            self.__dict__["_metered"] = metered
        return bool(metered)

    def for_tool(self, tool: str, aliases: Sequence[str] = ()) -> tuple[CompiledPolicy, ...]:
        """Policies whose globs match ``tool`` (or one of its ``aliases``, the other names
        it answers to, such as ``mcp:<server>/<tool>``): others cost nothing for its calls."""
        return self._candidates(tool, tuple(aliases)).policies

    def _candidates(self, tool: str, aliases: tuple[str, ...] = ()) -> Candidates:
        key: Any = (tool, *aliases) if aliases else tool
        found = self._by_tool.get(key)
        if found is None:
            names = (tool, *aliases)
            found = Candidates(tuple(p for p in self._policies
                                     if any(p.matches_tool(n) for n in names)))
            with self._lock:
                if len(self._by_tool) >= _TOOL_CACHE_SIZE:
                    self._by_tool.clear()
                self._by_tool[key] = found
        return found

    def evaluate(
        self,
        tool: str,
        args: Mapping[str, Any] | None = None,
        principal: Mapping[str, Any] | None = None,
        history: Sequence[Mapping[str, Any]] | None = None,
        request: str | None = None,
        description: str = "",
        now: datetime.datetime | None = None,
        known_secrets: Scrubber | None = None,
        aliases: Sequence[str] = (),
        unmatched: Effect | str = Effect.ALLOW,
        agent: str | Sequence[str] | None = None,
        counters: CounterStore | None = None,
    ) -> Decision:
        """Decide one call. Synchronous; never raises for bad inputs (fails closed).

        ``known_secrets``: a scrubber of values the caller knows are secret (the guard
        passes the values it injected before): the decision's messages and its exported
        record (``Decision.to_dict``, the decision log) never carry them either.
        ``aliases``: other names the tool answers to (see ``for_tool``). ``unmatched``: the
        effect of a call to a tool no policy names (``allow`` by default; ``deny`` makes the
        policy set an allowlist of tools).
        ``agent``: the calling agent's name, or its names (name and id), for
        ``match.agents`` and bindings; None (unknown) matches every agent selector.
        ``counters``: the store the policies' counters live in. A deny or halt gives its
        reservations back; allow and require_approval keep them in
        ``Decision.reservations`` (the call is counted): release them if it does not run.
        With None the counters read as if nothing was counted before (a pure evaluation).
        """
        if type(aliases) is not tuple:
            # Read once: the short path's lookup below unpacked an iterator, and the
            # candidates were then made for the tool alone (a policy naming it by its
            # ``mcp:`` alias did not apply: allowed).
            aliases = tuple(aliases)
        if type(unmatched) is not Effect:
            # Checked on every path: a misspelt ``unmatched`` must not pass unnoticed on
            # the short path and raise only once a tool no policy names is called.
            unmatched = Effect(unmatched)
        if type(tool) is str:
            # The common case in as few steps as possible: ``_decide`` does the same.
            candidates = self._by_tool.get((tool, *aliases) if aliases else tool)
            if candidates is None:
                candidates = self._candidates(tool, aliases)
            if candidates.plan is not None:
                short = candidates.short
                if short is not None:  # the plan as one generated function
                    return short(self._revision, known_secrets, self._limits, tool, args,
                                 principal, history, request, description, now,
                                 None if agent is None else _agent_names(agent))
                return decide(candidates, self._revision, known_secrets, self._limits, tool,
                              args, principal, history, request, description, now,
                              None if agent is None else _agent_names(agent))
        return self._decide(tool, args, principal, history, request, description, now, None,
                            known_secrets, aliases, unmatched, agent=agent,
                            counters=counters)

    def explain(
        self,
        tool: str,
        args: Mapping[str, Any] | None = None,
        *,
        principal: Mapping[str, Any] | None = None,
        history: Sequence[Mapping[str, Any]] | None = None,
        request: str | None = None,
        description: str = "",
        now: datetime.datetime | None = None,
        agent: str | Sequence[str] | None = None,
    ) -> Explanation:
        """Like ``evaluate`` (without a counter store), also returning the value every
        expression produced."""
        traces: list[PolicyTrace] = []
        decision = self._decide(tool, args, principal, history, request, description, now,
                                traces, agent=agent)
        return Explanation(decision, tuple(traces))

    def _decide(
        self,
        tool: str,
        args: Mapping[str, Any] | None,
        principal: Mapping[str, Any] | None,
        history: Sequence[Mapping[str, Any]] | None,
        request: str | None,
        description: str,
        now: datetime.datetime | None,
        trace: list[PolicyTrace] | None,
        known_secrets: Scrubber | None = None,
        aliases: tuple[str, ...] = (),
        unmatched: Effect = Effect.ALLOW,
        *,
        agent: str | Sequence[str] | None = None,
        counters: CounterStore | None = None,
    ) -> Decision:
        try:
            # a str subclass by its data: its own __str__ could name another tool
            name = tool if type(tool) is str else (
                str.__str__(tool) if isinstance(tool, str) else str(tool))
        except Exception:
            name = "<unreadable tool name>"
        candidates = self._candidates(name, aliases)
        names = _agent_names(agent)
        try:
            call, error = read_call(self._limits, name, args, principal, history, request,
                                    description, now, candidates.names, names)
        except Exception as e:  # fail closed: no input may make ``evaluate`` raise
            call, error = empty_call(name)._replace(agent=names), (
                f"inputs could not be read ({type(e).__name__})")
        return evaluate_call(call, candidates, revision=self._revision, input_error=error,
                             trace=trace, known_secrets=known_secrets, unmatched=unmatched,
                             max_cost=self._limits.max_cost, counters=counters)

    def counts(self, tool: str, aliases: Sequence[str] = ()) -> bool:
        """Whether a policy naming ``tool`` has counters (its calls talk to the store)."""
        return self._candidates(tool, tuple(aliases)).counts

    def input_error(self, args: Any) -> str | None:
        """Why ``args`` alone are over the input bounds or not JSON data, else None.

        One walk that stops at the size bound, whatever ``args`` hold: a caller can tell
        arguments it must not walk itself (the integration's JSON view, validation and
        snapshot would each walk them in full) before doing anything else with them."""
        if not isinstance(args, Mapping):
            return f"arguments must be a JSON object, got {type(args).__name__}"
        try:
            normalize(args, self._limits)
        except InputError as e:
            return str(e)
        return None

    def with_mode(self, mode: Mode) -> PolicySet:
        """A copy where every policy runs in ``mode`` ("audit" for a shadow rollout)."""
        if mode not in ("enforce", "audit"):
            raise ValueError(f"mode must be 'enforce' or 'audit', not {mode!r}")
        policies = [dataclasses.replace(p, mode=mode) for p in self._policies]
        return PolicySet(policies, revision=self._revision, limits=self._limits)

    def secret_arguments(self, tool: str, aliases: Sequence[str] = ()) -> frozenset[str]:
        """Argument names whose values are secret in calls to ``tool``: declared secret or
        injected by any policy whose globs name it. The same set as every decision's
        ``Decision.secret_arguments`` for that tool (``CompiledPolicy.secret_arguments``
        holds the injected names too)."""
        return self._candidates(tool, tuple(aliases)).secret_names

    def results_trusted(self, tool: str, aliases: Sequence[str] = ()) -> bool | None:
        """The ``spec.results`` label of the policies whose globs name ``tool`` (or one of
        its ``aliases``): False when any says untrusted, True when some say trusted and none
        untrusted, else None."""
        labels = {p.results for p in self.for_tool(tool, aliases)}
        if "untrusted" in labels:
            return False
        return True if "trusted" in labels else None

    def injections(self, decision: Decision) -> Mapping[str, SecretRef]:
        """Secrets to inject into the call: from the policies that matched and enforce."""
        out: dict[str, SecretRef] = {}
        matched = set(decision.policies)
        for p in self._policies:
            if p.name in matched and not p.audit:
                out.update(p.inject)
        return out

    def redact(self, text: str) -> str:
        """Apply every policy's redact patterns to a text (tool results, error text)."""
        return text if self._redact is None else self._redact(text)


_PREPARED_MAX = 1024
"""Tool names whose candidates a load works out ahead at most (``_prepared``)."""
_PREPARE_TESTS = 65_536
"""Glob tests (``CompiledPolicy.matches_tool``) a load spends on them at most."""
_WILD = frozenset("*?[")
"""What makes a glob more than the exact name it spells (``fnmatch.translate``)."""


def _prepared(policies: tuple[CompiledPolicy, ...]) -> dict[Any, Candidates]:
    """The candidates of each tool a policy names exactly, worked out at load.

    A tool's candidates (its policies and its ``Candidates.plan``) depend on the policies
    alone; built on the tool's first call, they were the larger half of the first decision
    after a load (the policies' records are cold then). The names a policy spells without a
    wildcard are known at load, so their candidates are built here, the same records the
    first call would build (``tests/test_engine_prepared.py``); any other name (a tool only
    a glob matches, aliases) is still worked out on its first call. A policy whose globs
    are all exact names matches a tool exactly when the name is one of them; any other is
    tested by its own ``matches_tool``, within a bound of tests so a load stays cheap.
    """
    by_name: dict[str, list[int]] = {}
    wild: list[int] = []
    for i, policy in enumerate(policies):
        tools = policy.tools
        exact = tools is not None and all(_WILD.isdisjoint(glob) for glob in tools)
        if not exact:
            wild.append(i)
        for glob in tools or ():
            if _WILD.isdisjoint(glob):
                named = by_name.setdefault(glob, [])
                if exact:
                    named.append(i)
    prepared: dict[Any, Candidates] = {}
    tests = 0
    for name, named in itertools.islice(by_name.items(), _PREPARED_MAX):
        tests += len(wild)
        if tests > _PREPARE_TESTS:
            break
        found = set(named)
        found.update(i for i in wild if policies[i].matches_tool(name))
        prepared[name] = Candidates(tuple(policies[i] for i in sorted(found)))
    return prepared


def _agent_names(agent: str | Sequence[str] | None) -> tuple[str, ...] | None:
    """The calling agent's non-empty names, or None when it has none: an agent without a
    name is unidentified and matches every agent selector (fail closed), never none of
    them (which would let it escape every agent-scoped policy).

    A tuple of plain non-empty strings (what the guard passes on every call: the agent's
    name and id) is that already; anything else takes ``_agent_names_read``
    (tests/test_engine_agent_names.py compares the two)."""
    if type(agent) is tuple and 0 < len(agent) <= _MAX_AGENT_NAMES:
        for name in agent:
            if type(name) is not str or not name:
                break
        else:
            return agent
    return _agent_names_read(agent)


def _agent_names_read(agent: str | Sequence[str] | None) -> tuple[str, ...] | None:
    """``_agent_names`` of anything: a name, or names read from any iterable, bounded."""
    if agent is None:
        return None
    try:
        raw = (agent,) if isinstance(agent, str) else tuple(
            itertools.islice(agent, _MAX_AGENT_NAMES + 1))
        if len(raw) > _MAX_AGENT_NAMES:
            return None  # not a name and an id: unidentified (an endless iterable stops)
        # Plain strings of their data: a ``str`` subclass's own ``__hash__`` or ``__eq__``
        # ran in the agent match, outside any guard (``evaluate`` raised), or lied there.
        plain = [str.__str__(a) for a in raw if isinstance(a, str)]
        names = tuple(a for a in plain if a)
    except Exception:  # unreadable: unidentified, as above (fail closed)
        return None
    return names or None


_MAX_AGENT_NAMES = 64
