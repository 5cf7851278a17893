"""The result of evaluating one tool call: immutable, JSON-safe, secret-free on export."""

from __future__ import annotations

import enum
import itertools
import os
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

REDACTED = "[REDACTED]"

_ID_PREFIX = secrets.token_hex(8)
_ID_COUNTER = itertools.count(1)
"""Decision ids: unique across processes (random prefix) and cheap (a counter, not uuid4,
which costs more than evaluating a rule). The engine's decisions take their number when
built and spell it on first read of ``id`` (most decisions are never asked)."""


def _new_prefix() -> None:
    """A forked process (a pre-fork server's workers, a ``fork`` pool) inherits the prefix
    and the counter: without a prefix of its own, its decisions took the very ids of its
    parent's and its siblings' (decision logs of replicas, halts told apart by id). The
    counter goes on, so a decision built before the fork and first read after it is
    spelled with the new prefix and a number no later decision takes."""
    global _ID_PREFIX
    _ID_PREFIX = secrets.token_hex(8)


os.register_at_fork(after_in_child=_new_prefix)


class Effect(enum.StrEnum):
    """What happens to the call. Ordered by severity: halt > deny > require_approval > allow."""

    ALLOW = "allow"
    REQUIRE_APPROVAL = "require_approval"
    DENY = "deny"
    HALT = "halt"

    @property
    def severity(self) -> int:
        return _SEVERITY[self]


_SEVERITY = {Effect.ALLOW: 0, Effect.REQUIRE_APPROVAL: 1, Effect.DENY: 2, Effect.HALT: 3}


class Action(enum.StrEnum):
    """What a rule contributes when it fires. ``warn`` is recorded and changes nothing."""

    ALLOW = "allow"
    DENY = "deny"
    HALT = "halt"
    REQUIRE_APPROVAL = "require_approval"
    WARN = "warn"


@dataclass(frozen=True, slots=True)
class FiredRule:
    policy: str
    rule: str
    action: Action
    message: str
    audit: bool = False
    """True when the policy runs in audit mode: a would-be outcome that changed nothing."""

    def to_dict(self) -> dict[str, Any]:
        return {"policy": self.policy, "rule": self.rule, "action": self.action.value,
                "message": self.message, "audit": self.audit}


@dataclass(frozen=True, slots=True)
class AppliedRepair:
    policy: str
    repair: str
    set: tuple[str, ...]
    """Argument names the repair assigned (names only: values may be secret)."""
    unset: tuple[str, ...]
    audit: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"policy": self.policy, "repair": self.repair, "set": list(self.set),
                "unset": list(self.unset), "audit": self.audit}


@dataclass(frozen=True, slots=True)
class EvaluationError:
    """An expression that failed at run time, and what the engine did about it."""

    policy: str
    element: str
    """``input`` (the call's inputs broke a bound), ``match.when``, ``repairs.<name>``,
    ``rules.<name>`` or ``rules.<name>.messageExpression``. A failing variable shows up
    in the rule that read it."""
    message: str
    handled_as: str
    """``fired`` (failurePolicy Fail), ``skipped`` (Ignore), ``not-applied`` (repairs) or
    ``fallback`` (a messageExpression error: the static ``message`` was used)."""

    def to_dict(self) -> dict[str, Any]:
        return {"policy": self.policy, "element": self.element, "message": self.message,
                "handled_as": self.handled_as}


@dataclass(frozen=True, init=False, repr=False)
class Decision:
    """The engine's verdict on one call. Build it only through the engine."""

    id: str
    tool: str
    effect: Effect
    arguments: Mapping[str, Any]
    """The repaired arguments the call runs with (before secret injection)."""
    rules: tuple[FiredRule, ...] = ()
    """Every rule that fired, in policy then rule order, warn rules included."""
    repairs: tuple[AppliedRepair, ...] = ()
    errors: tuple[EvaluationError, ...] = ()
    policies: tuple[str, ...] = ()
    """Names of the policies that matched the call."""
    revision: str = ""
    secret_arguments: frozenset[str] = field(default_factory=frozenset)
    """Argument names whose values are secret: declared secret or injected by any policy
    whose globs name the tool, matched or not (their values never leave). An injected name
    counts although ``arguments`` holds no injected value: a model-sent argument of that
    name is hidden too. Equal to ``PolicySet.secret_arguments(tool)``."""
    reservations: tuple[Any, ...] = ()
    """Counter reservations (``engine.counters.Reservation``) an ``allow`` or
    ``require_approval`` decision holds: whoever acts on it gives them back
    (``store.release``) if the call then does not run, as the guard does for a call that
    waits for approval. Empty for deny and halt (the engine has given theirs back). Not
    part of ``to_dict``."""
    _scrubber: Callable[[str], str] | None = field(default=None, repr=False, compare=False)
    """What ``scrub`` removes (the call's secret values, known secrets, redact patterns).
    A field so that ``dataclasses.replace`` keeps it: a replaced decision that lost it
    exported, unscrubbed, a secret a repair had copied into another argument."""

    def __init__(
        self,
        id: str,
        tool: str,
        effect: Effect,
        arguments: Mapping[str, Any],
        rules: tuple[FiredRule, ...] = (),
        repairs: tuple[AppliedRepair, ...] = (),
        errors: tuple[EvaluationError, ...] = (),
        policies: tuple[str, ...] = (),
        revision: str = "",
        secret_arguments: frozenset[str] = frozenset(),
        scrubber: Callable[[str], str] | None = None,
        reservations: tuple[Any, ...] = (),
        _scrubber: Callable[[str], str] | None = None,
    ) -> None:
        if scrubber is None:  # (``dataclasses.replace`` passes the field by its name)
            scrubber = _scrubber
        # One write instead of the frozen dataclass's ten guarded ones: a decision is
        # built on every call. Frozen still holds: attribute assignment raises.
        self.__dict__.update(
            id=id, tool=tool, effect=effect,
            arguments=arguments if isinstance(arguments, MappingProxyType)
            else MappingProxyType(dict(arguments)),
            rules=rules, repairs=repairs, errors=errors, policies=policies,
            revision=revision, secret_arguments=secret_arguments, _scrubber=scrubber,
            reservations=reservations)

    def __getattr__(self, name: str) -> Any:
        # Only reached for attributes not in ``__dict__``: the id of an engine-built
        # decision, spelled once from the number it took when built (``_decision``).
        if name == "id":
            number = self.__dict__.get("_number")
            if number is not None:
                text = f"{_ID_PREFIX}{number:016x}"
                self.__dict__["id"] = text
                return text
        raise AttributeError(f"'Decision' object has no attribute {name!r}")

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # ``arguments`` is a read-only view, which copy and pickle cannot handle: rebuild
        # from a plain dict (a copy is a new object, so it is never taken for the original).
        return (Decision, (self.id, self.tool, self.effect, dict(self.arguments), self.rules,
                           self.repairs, self.errors, self.policies, self.revision,
                           self.secret_arguments, _copied_scrubber(self.__dict__.get("_scrubber")),
                           self.reservations))

    def scrub(self, text: str) -> str:
        """``text`` without any secret this decision knows: its secret arguments' values
        (as sent and as repaired), the caller's known secrets (a guard's injected values)
        and the policies' redact patterns. For texts a record adds (argument names, say)."""
        scrubber = self.__dict__.get("_scrubber")
        if scrubber is None:
            return text
        try:
            return str(scrubber(text))
        except Exception:
            return REDACTED

    @property
    def warnings(self) -> tuple[FiredRule, ...]:
        return tuple(r for r in self.rules if r.action is Action.WARN and not r.audit)

    @property
    def deciding_rules(self) -> tuple[FiredRule, ...]:
        """The rules that decided the effect: fired with the effect's action, not in audit.

        Empty when no rule did (a default action, or a failed expression): say so from
        ``policies`` or ``errors``. For ``allow``, the allow rules that fired.
        """
        value = self.effect.value
        return tuple(r for r in self.rules if r.action.value == value and not r.audit)

    @property
    def by_default(self) -> tuple[str, ...]:
        """The matched policies whose result was their ``defaultAction``: those none of
        whose rules fired (a fired ``warn`` or audit rule decides nothing). An allowlist
        whose allow rule fired is not one: naming it for a denial sends the reader to the
        wrong policy. All matched policies when every one had a rule fire."""
        ruled = {r.policy for r in self.rules if not r.audit and r.action is not Action.WARN}
        return tuple(p for p in self.policies if p not in ruled) or tuple(self.policies)

    @property
    def message(self) -> str:
        """The messages of the rules that decided the effect, joined; "" for allow."""
        if self.effect is Effect.ALLOW:
            return ""
        msgs = [r.message for r in self.deciding_rules]
        if not msgs and self.errors:
            msgs = [f"policy {e.policy}: {e.element} failed" for e in self.errors]
        if not msgs:
            msgs = [f"{self.effect.value} by default action of policy {p}"
                    for p in self.by_default]
        if not msgs:
            msgs = [f"no policy names the tool {self.tool}"]
        seen: dict[str, None] = dict.fromkeys(m for m in msgs if m)
        return " ".join(seen)

    def __repr__(self) -> str:
        # The dataclass repr would print the arguments raw, secret ones included, wherever
        # a host logs ``%r`` of a decision or an error reporter shows one: the record's form.
        try:
            record = self.to_dict()
        except Exception:  # fail closed: only what holds no argument value
            return f"Decision(id={self.id!r}, tool={self.tool!r}, effect={self.effect.value!r})"
        rules = [f"{r['policy']}/{r['rule']}" for r in record["rules"]]
        return (f"Decision(id={record['id']!r}, tool={record['tool']!r}, "
                f"effect={record['effect']!r}, arguments={record['arguments']!r}, "
                f"rules={rules!r}, policies={record['policies']!r}, "
                f"revision={record['revision']!r})")

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe and secret-free: secret arguments are ``[REDACTED]`` by name, and every
        other name and value is scrubbed by value (``scrub``): a secret repeated or copied by
        a repair into another argument, an injected value, a redact-pattern match."""
        scrub = self.scrub if self.__dict__.get("_scrubber") is not None else None
        return {
            "id": self.id,
            "tool": self.tool,
            "effect": self.effect.value,
            "message": self.message,
            "arguments": redact_arguments(self.arguments, self.secret_arguments, scrub),
            "rules": [r.to_dict() for r in self.rules],
            "repairs": [r.to_dict() for r in self.repairs],
            "errors": [e.to_dict() for e in self.errors],
            "policies": list(self.policies),
            "revision": self.revision,
        }


_new = object.__new__


def _decision(
    tool: str,
    effect: Effect,
    arguments: MappingProxyType[str, Any],
    policies: tuple[str, ...],
    revision: str,
    secret_arguments: frozenset[str],
    scrubber: Callable[[str], str] | None,
) -> Decision:
    """The engine's own constructor: a decision is built on every call, and ``__init__``
    (keywords, the frozen class's guarded writes, the id's spelling) cost more than a
    rule. The same record: ``arguments`` already a read-only view, ``rules``, ``repairs``,
    ``errors`` and ``reservations`` read from the class (its default, ``()``) unless
    ``_recorded`` writes them; the id is a number until it is read (see
    ``Decision.__getattr__``). Seven arguments and no branch: the common decision (nothing
    fired, failed or repaired) pays for nothing else."""
    d = _new(Decision)
    f = d.__dict__
    f["_number"] = next(_ID_COUNTER)
    f["tool"] = tool
    f["effect"] = effect
    f["arguments"] = arguments
    f["policies"] = policies
    f["revision"] = revision
    f["secret_arguments"] = secret_arguments
    f["_scrubber"] = scrubber
    return d


def _recorded(
    d: Decision,
    rules: Sequence[FiredRule] | None,
    repairs: Sequence[AppliedRepair] | None,
    errors: Sequence[EvaluationError] | None,
    reservations: tuple[Any, ...],
) -> Decision:
    """``d`` (just built by ``_decision``, not yet handed out) with what the engine
    recorded: each of them that is not empty, lists become tuples here, once."""
    f = d.__dict__
    if rules:
        f["rules"] = tuple(rules)
    if repairs:
        f["repairs"] = tuple(repairs)
    if errors:
        f["errors"] = tuple(errors)
    if reservations:
        f["reservations"] = reservations
    return d


def _copied_scrubber(scrubber: Any) -> Any:
    """What a copy of a decision keeps of its scrubber: the call's own values and the
    patterns, not the caller's known secrets below them (a guard's injected values, which
    would otherwise travel in every pickled decision)."""
    top_layer = getattr(scrubber, "top_layer", None)
    return top_layer() if callable(top_layer) else scrubber


def redact_arguments(arguments: Mapping[str, Any], secret: frozenset[str],
                     scrub: Callable[[str], str] | None = None) -> dict[str, Any]:
    """JSON-safe arguments, secret ones ``[REDACTED]``; with ``scrub``, every other name
    and string scrubbed too (a number that is exactly a secret becomes ``[REDACTED]``)."""
    if scrub is None:
        return {k: (REDACTED if k in secret else _json_safe(v)) for k, v in arguments.items()}
    return {scrub(k): (REDACTED if k in secret else _scrubbed(_json_safe(v), scrub))
            for k, v in arguments.items()}


def _scrubbed(value: Any, scrub: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {scrub(k): _scrubbed(v, scrub) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrubbed(v, scrub) for v in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return REDACTED if scrub(str(value)) != str(value) else value
    return value


def _json_safe(value: Any) -> Any:
    if value is None or isinstance(value, str | bool | int | float):
        return value if not (isinstance(value, float) and value != value) else "NaN"
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)
