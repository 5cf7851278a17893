"""Run ``PolicyTest`` documents against the production engine and report the results.

The shape follows OPA's tester: a ``Runner`` turns test documents into ``CaseResult``
records, and reporters (``render_text``, ``render_json``) turn those into output. Cases
are decided by ``PolicySet.evaluate`` itself, never by a re-implementation, so a passing
suite says something about what runs in production.

Which policies a test runs against:

- ``spec.policies`` (paths relative to the test file) when it is given;
- otherwise the ``ToolPolicy`` documents in the test's own file, when there are any;
- otherwise every policy found under the paths given to the runner (tests that sit in a
  directory beside the policies they test).

Expectations (all optional except ``effect``): ``effect`` equal; ``arguments`` a subset
of the repaired arguments (numbers compare by value, booleans only with booleans);
``rules`` exactly the fired rules as ``policy/rule`` (order ignored, warn and audit rules
included); ``message`` a substring of the decision message; ``errors`` the number of
evaluation errors recorded (``check`` also accepts a list of ``policy/element``, for
callers building expectations in Python).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from guardrails.engine.counters import PresetCounts
from guardrails.engine.decision import Decision
from guardrails.engine.policyset import PolicySet
from guardrails.expr import ast
from guardrails.expr.limits import Limits
from guardrails.expr.spelling import closest
from guardrails.model.documents import Documents

__all__ = [
    "CaseResult",
    "Mismatch",
    "PolicyCoverage",
    "Runner",
    "TestCase",
    "TestInputError",
    "TestReport",
    "render_json",
    "render_junit",
    "render_text",
    "run_tests",
]

PathArg = str | os.PathLike[str]

_MISSING: Any = object()


@dataclass(frozen=True, slots=True)
class TestCase:
    """One case, independent of how the loader spells its records."""

    __test__ = False  # not a pytest class

    suite: str
    name: str
    file: str
    line: int
    column: int
    policies: tuple[str, ...] | None
    """Resolved policy paths, or None for the default (see the module docstring)."""
    tool: str
    args: Mapping[str, Any]
    principal: Mapping[str, Any] | None
    history: Sequence[Mapping[str, Any]] | None
    request: str | None
    description: str
    expect: Mapping[str, Any]
    """Keys present in the document only: effect, arguments, rules, message, errors."""
    now: datetime.datetime | None = None
    """The evaluation time; None: the real time."""
    agent: str | None = None
    """The calling agent's name or id, for ``match.agents`` and bindings."""
    counters: Mapping[str, int] | None = None
    """Counts already made before the call, by counter name (``call.counters``)."""


@dataclass(frozen=True, slots=True)
class Mismatch:
    """One expectation a decision did not meet; ``field`` is e.g. ``arguments.amount``."""

    field: str
    expected: Any
    actual: Any
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        out = {"field": self.field, "expected": self.expected, "actual": self.actual}
        if self.note:
            out["note"] = self.note
        return out


@dataclass(frozen=True, slots=True)
class CaseResult:
    suite: str
    case: str
    file: str
    line: int
    column: int
    mismatches: tuple[Mismatch, ...]
    decision: Mapping[str, Any]
    """``Decision.to_dict()``: secret argument values are already ``[REDACTED]``."""

    @property
    def passed(self) -> bool:
        return not self.mismatches

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "suite": self.suite, "case": self.case, "file": self.file, "line": self.line,
            "column": self.column, "passed": self.passed,
            "mismatches": [m.to_dict() for m in self.mismatches],
            "decision": dict(self.decision),
        }


@dataclass(frozen=True, slots=True)
class PolicyCoverage:
    """What the cases exercised of one policy."""

    policy: str
    file: str
    line: int
    column: int
    rules: tuple[str, ...]
    repairs: tuple[str, ...]
    fired_rules: frozenset[str]
    applied_repairs: frozenset[str]

    @property
    def unfired_rules(self) -> tuple[str, ...]:
        return tuple(r for r in self.rules if r not in self.fired_rules)

    @property
    def unapplied_repairs(self) -> tuple[str, ...]:
        return tuple(r for r in self.repairs if r not in self.applied_repairs)

    @property
    def complete(self) -> bool:
        return not self.unfired_rules and not self.unapplied_repairs

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy, "file": self.file, "line": self.line,
            "column": self.column, "rules": list(self.rules), "repairs": list(self.repairs),
            "unfired_rules": list(self.unfired_rules),
            "unapplied_repairs": list(self.unapplied_repairs),
        }


@dataclass(frozen=True, slots=True)
class TestReport:
    __test__ = False  # not a pytest class

    results: tuple[CaseResult, ...]
    coverage: tuple[PolicyCoverage, ...] = field(default=())

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    @property
    def failures(self) -> tuple[CaseResult, ...]:
        return tuple(r for r in self.results if not r.passed)

    @property
    def uncovered(self) -> tuple[PolicyCoverage, ...]:
        return tuple(c for c in self.coverage if not c.complete)

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": sum(r.passed for r in self.results),
            "failed": len(self.failures),
            "results": [r.to_dict() for r in self.results],
            "coverage": [c.to_dict() for c in self.coverage],
        }


class TestInputError(Exception):
    """Tests that cannot run: no ``PolicyTest`` found, or a suite with no policy to test."""

    __test__ = False  # not a pytest class


class Runner:
    """Runs test documents; policy sets are loaded once per distinct set of paths."""

    def __init__(self, *, limits: Limits | None = None) -> None:
        self._limits = limits
        self._sets: dict[tuple[str, ...], PolicySet] = {}

    def run(self, paths: PathArg | Sequence[PathArg], *, pattern: str | None = None,
            fail_fast: bool = False) -> TestReport:
        """Load ``paths``, run every case; raises ``PolicyError`` or ``TestInputError``.

        ``pattern`` (a regular expression, searched in ``suite/case``) runs only the cases
        it finds, as ``opa test --run`` and ``pytest -k`` do; a pattern that selects nothing
        is an error, so a typo in CI cannot turn into a green run of zero cases.
        ``fail_fast`` stops after the first failing case.
        """
        from guardrails.model import load_documents

        roots = _as_list(paths)
        documents = load_documents(roots)
        cases = cases_from_documents(documents)
        if not cases:
            raise TestInputError("no PolicyTest documents found in " + ", ".join(roots))
        if pattern is not None:
            cases = select(cases, pattern)
        policy_files = frozenset(p.position.file for p in documents.policies)
        results: list[CaseResult] = []
        used: dict[tuple[str, ...], list[Decision]] = {}
        for case in cases:
            key = self._policy_paths(case, policy_files, roots)
            policy_set = self._load(key)
            if not policy_set.policies:
                raise TestInputError(
                    f"{case.file}:{case.line}:{case.column}: suite {case.suite} has no "
                    "policies to test (set spec.policies)")
            decision = policy_set.evaluate(
                case.tool, case.args, principal=case.principal, history=case.history,
                request=case.request, description=case.description, now=case.now,
                agent=case.agent,
                counters=PresetCounts(case.counters) if case.counters is not None else None,
            )
            used.setdefault(key, []).append(decision)
            mismatches = [*_text_number_hints(_with_key_hints(check(case.expect, decision),
                                                              case), case),
                          *unknown_rules(case.expect, policy_set),
                          *unmatched_tool(case.tool, decision, policy_set),
                          *unmatched_agent(case.tool, case.agent, policy_set),
                          *unknown_counters(case.counters, policy_set),
                          *history_mistakes(case.history, policy_set),
                          *time_dependent(case, decision, policy_set)]
            results.append(CaseResult(
                case.suite, case.name, case.file, case.line, case.column,
                tuple(mismatches), decision.to_dict(),
            ))
            if fail_fast and not results[-1].passed:
                break
        return TestReport(tuple(results), self._coverage(used))

    def _policy_paths(self, case: TestCase, policy_files: frozenset[str],
                      roots: Sequence[str]) -> tuple[str, ...]:
        if case.policies is not None:
            return case.policies
        if case.file in policy_files:
            return (case.file,)
        return tuple(roots)

    def _load(self, key: tuple[str, ...]) -> PolicySet:
        found = self._sets.get(key)
        if found is None:
            import guardrails

            # An empty set is reported by run() with the suite that needs policies.
            if self._limits is None:
                found = guardrails.load(list(key), allow_empty=True)
            else:
                found = guardrails.load(list(key), limits=self._limits, allow_empty=True)
            self._sets[key] = found
        return found

    def _coverage(self, used: Mapping[tuple[str, ...], list[Decision]]
                  ) -> tuple[PolicyCoverage, ...]:
        merged: dict[tuple[str, str, int], PolicyCoverage] = {}
        for key, decisions in used.items():
            for policy in self._sets[key].policies:
                # A rule that fired only because its expression failed was not exercised:
                # its condition never decided anything.
                fired = {r.rule for d in decisions for r in d.rules if r.policy == policy.name
                         and not _errored(d, policy.name, r.rule)}
                applied = {r.repair for d in decisions for r in d.repairs
                           if r.policy == policy.name}
                pos = policy.position
                k = (policy.name, pos.file, pos.line)
                prior = merged.get(k)
                if prior is not None:
                    fired |= prior.fired_rules
                    applied |= prior.applied_repairs
                merged[k] = PolicyCoverage(
                    policy.name, pos.file, pos.line, pos.column,
                    tuple(r.name for r in policy.rules), tuple(r.name for r in policy.repairs),
                    frozenset(fired), frozenset(applied),
                )
        return tuple(sorted(merged.values(), key=lambda c: (c.file, c.line, c.policy)))


def run_tests(paths: PathArg | Sequence[PathArg], *, limits: Limits | None = None,
              pattern: str | None = None, fail_fast: bool = False) -> TestReport:
    """Run every ``PolicyTest`` under ``paths`` (file, directory or list)."""
    return Runner(limits=limits).run(paths, pattern=pattern, fail_fast=fail_fast)


def select(cases: Sequence[TestCase], pattern: str) -> list[TestCase]:
    """The cases whose ``suite/case`` name ``pattern`` (a Python regex) is found in."""
    try:
        found = re.compile(pattern)
    except re.error as e:
        raise TestInputError(f"invalid pattern {pattern!r}: {e}") from None
    chosen = [c for c in cases if found.search(f"{c.suite}/{c.name}")]
    if not chosen:
        raise TestInputError(f"no test case matches {pattern!r} (matched against "
                             f"'suite/case', e.g. '{cases[0].suite}/{cases[0].name}')")
    return chosen


# --- expectations --------------------------------------------------------------------


def check(expect: Mapping[str, Any], decision: Decision) -> list[Mismatch]:
    """Every expectation ``decision`` misses; empty when the case passes."""
    out: list[Mismatch] = []
    shown = decision.to_dict()
    effect = expect.get("effect")
    if effect is not None and str(effect) != decision.effect.value:
        out.append(Mismatch("effect", str(effect), decision.effect.value,
                            _audit_note(str(effect), decision)))
    arguments = expect.get("arguments")
    if isinstance(arguments, Mapping):
        for name, want in arguments.items():
            have = decision.arguments.get(name, _MISSING)
            if have is _MISSING:
                out.append(Mismatch(f"arguments.{name}", want, None, "argument absent"))
            elif not same_value(want, have):
                out.append(Mismatch(f"arguments.{name}", want, shown["arguments"][name]))
    rules = expect.get("rules")
    if rules is not None:
        fired = sorted(f"{r.policy}/{r.rule}" for r in decision.rules)
        if sorted(str(r) for r in rules) != fired:
            out.append(Mismatch("rules", sorted(str(r) for r in rules), fired))
    message = expect.get("message")
    if message is not None and str(message) not in decision.message:
        found = str(message).lower() in decision.message.lower()
        out.append(Mismatch("message", str(message), decision.message,
                            "substring not found" + (" (it is there in other letter case: "
                                                     "the comparison is case-sensitive)"
                                                     if found else "")))
    errors = expect.get("errors")
    if errors is None and decision.errors:
        # An evaluation error nobody expected fails the case: a rule that denies because
        # it cannot be evaluated must not pass for one that works.
        out.append(Mismatch("errors", 0, len(decision.errors), "unexpected evaluation "
                            "error: " + "; ".join(f"{e.policy}/{e.element}: {e.message}"
                                                   for e in decision.errors)
                            + " (add expect.errors if the case is about this error)"))
    if errors is not None:
        failed = sorted(f"{e.policy}/{e.element}" for e in decision.errors)
        if isinstance(errors, int) and not isinstance(errors, bool):
            if errors != len(failed):
                out.append(Mismatch("errors", errors, len(failed), "; ".join(
                    f"{e.policy}/{e.element}: {e.message}" for e in decision.errors)))
        elif sorted(str(e) for e in errors) != failed:
            out.append(Mismatch("errors", sorted(str(e) for e in errors), failed))
    return out


_SEVERITY: Final = ("allow", "warn", "require_approval", "deny", "halt")


def _audit_note(effect: str, decision: Decision) -> str:
    """Why the expected effect did not happen when an audit-mode rule would have given it
    (``mode: audit`` left on after a shadow rollout): audit rules are recorded, not
    enforced, so the case fails with the enforced effect and nothing else says why."""
    if effect not in _SEVERITY or effect == "allow":
        return ""
    would = sorted({r.policy for r in decision.rules if r.audit and r.action.value in
                    _SEVERITY and _SEVERITY.index(r.action.value) >= _SEVERITY.index(effect)
                    and r.action.value != "warn"})
    if not would:
        return ""
    names = ", ".join(would)
    return (f"(policy {names} is in mode: audit: its rules fired and were recorded, not "
            f"enforced; remove mode: audit to enforce them, or expect the enforced effect)")


def _text_number_hints(mismatches: list[Mismatch], case: TestCase) -> list[Mismatch]:
    """An unexpected "no matching overload ... (string, int)" while the case's args hold a
    number in quotes (``amount: "5000"``): the case sends text, as a model may, and the
    rule compares it with a number. Say which argument, so the fix (the case's quotes, or
    a repair in the policy) is plain."""
    out: list[Mismatch] = []
    texts = [f"args.{k} is the text {v!r}" for k, v in (case.args or {}).items()
             if isinstance(v, str) and re.fullmatch(r"\s*-?[0-9][0-9_,]*(\.[0-9]+)?\s*", v)]
    for m in mismatches:
        if (texts and m.field == "errors" and "no matching overload" in m.note
                and "string" in m.note):
            m = dataclasses.replace(m, note=m.note + " (the case's " + ", ".join(texts)
                                    + ": a number in quotes is a string; write it without "
                                    "quotes, or repair it in the policy if models send it "
                                    "so)")
        out.append(m)
    return out


def unknown_rules(expect: Mapping[str, Any], policy_set: PolicySet) -> list[Mismatch]:
    """``expect.rules`` entries naming no rule of the policies the case runs against: such
    an expectation can only ever pass by accident (``rules: []`` style), so it fails."""
    rules = expect.get("rules")
    if not rules:
        return []
    known = {f"{p.name}/{r.name}" for p in policy_set.policies for r in p.rules}
    out: list[Mismatch] = []
    for name in rules:
        if str(name) not in known:
            close = closest(str(name), sorted(known))
            hint = f"; did you mean {close}?" if close else ""
            out.append(Mismatch("rules", str(name), None,
                                f"no such rule in the policies under test{hint}"))
    return out


def unmatched_tool(tool: str, decision: Decision, policy_set: PolicySet) -> list[Mismatch]:
    """A case whose tool no policy under test names, while one names a tool close to it
    (``send_mail`` for ``send_email``): it passes only because nothing applied, and
    tests nothing. A case for a tool far from every name (``other tools are not
    matched``) is a deliberate one and passes."""
    if any(p.tools is not None and p.matches_tool(tool) for p in policy_set.policies):
        return []
    names = sorted({g for p in policy_set.policies for g in p.tools or ()
                    if not any(c in g for c in "*?[")})
    close = closest(tool, names, cutoff=0.8)
    if close is None:
        return []
    return [Mismatch("tool", close, tool,
                     f"no policy under test matches tool {tool!r}, so the case tests "
                     f"nothing; a policy names {close!r}: a typo in the case's tool or in "
                     f"match.tools? (tool names are case-sensitive)")]


def unmatched_agent(tool: str, agent: str | None,
                    policy_set: PolicySet) -> list[Mismatch]:
    """A case whose ``call.agent`` is close to an agent a policy for its tool names, but
    not that agent (``ops-agnet`` for ``ops-agent``): the policy does not apply, and the
    case passes only because of that. A name far from every selector (another agent's
    calls) is a deliberate case."""
    if agent is None:
        return []
    names = sorted({name for p in policy_set.policies if p.matches_tool(tool)
                    for selector in p.agents for name in selector})
    if agent in names:
        return []
    close = closest(agent, names, cutoff=0.8)
    if close is None:
        return []
    return [Mismatch("agent", close, agent,
                     f"no policy for tool {tool!r} names agent {agent!r}, so those policies "
                     f"do not apply; one names {close!r}: a typo in the case's agent or in "
                     f"match.agents? (agent names are exact strings)")]


def unknown_counters(counters: Mapping[str, int] | None,
                     policy_set: PolicySet) -> list[Mismatch]:
    """``call.counters`` entries naming no counter of the policies under test: the count
    is set for nothing, and the case tests the limit it means to test only by accident."""
    if not counters:
        return []
    known = sorted({n for p in policy_set.policies for c in p.counters
                    for n in (c.name, c.scope)})
    out: list[Mismatch] = []
    for name in counters:
        if name not in known:
            close = closest(name, known)
            hint = f"; did you mean {close!r}?" if close else (
                f" (counters: {', '.join(known)})" if known else " (they have no counters)")
            out.append(Mismatch("counters", name, None,
                                f"no counter of the policies under test is named {name!r}, "
                                f"so the count is set for nothing{hint}"))
    return out


def history_mistakes(history: Sequence[Mapping[str, Any]] | None,
                     policy_set: PolicySet) -> list[Mismatch]:
    """History entries the guard could never record, so the case decides a call that
    cannot happen: ``trusted: true`` for a tool a policy under test labels ``results:
    untrusted`` (the guard records each result with the tool's label, and untrusted always
    wins; a tool without a label may be trusted by the host's ``trusted_tools``), and a
    ``tool`` one typo from, but not, a tool name the policies match or test (``h.tool ==
    "fetch_url"``, ``p.tool == ...``): a rule looking for it does not see the entry."""
    if not history:
        return []
    names = sorted(_tool_names(policy_set))
    out: list[Mismatch] = []
    for i, entry in enumerate(history):
        tool = entry.get("tool")
        if not isinstance(tool, str):
            continue
        if entry.get("trusted") is True and policy_set.results_trusted(tool) is False:
            out.append(Mismatch(f"history[{i}].trusted", False, True,
                                f"the guard never records {tool!r} as trusted: a policy "
                                f"under test labels its results untrusted (results: "
                                f"untrusted), and untrusted always wins over trusted "
                                f"labels and guard(trusted_tools=...); set trusted: false, "
                                f"or change the label"))
        if tool not in names and not any(p.matches_tool(tool) for p in policy_set.policies
                                         if p.tools is not None):
            # Only a real typo: tools of one agent often differ by a word (read_x and
            # send_x), and a plural is often another tool (get_file, get_files).
            close = closest(tool, names, cutoff=0.9)
            if close is not None and close.rstrip("s") != tool.rstrip("s"):
                out.append(Mismatch(f"history[{i}].tool", close, tool,
                                    f"no policy under test matches or tests tool {tool!r}; "
                                    f"they name {close!r}: a typo in the case's history "
                                    f"or in the policy? (tool names are case-sensitive)"))
    return out


def _tool_names(policy_set: PolicySet) -> set[str]:
    """Tool names the policies match (globs without wildcards) or compare a record's
    ``tool`` field with (``h.tool == "x"``, ``p.tool in ["x", "y"]``)."""
    out = {g for p in policy_set.policies for g in p.tools or ()
           if not any(c in g for c in "*?[")}
    for p in policy_set.policies:
        for _element, _expression, program in p.expressions():
            for n in ast.walk(program.ast):
                if not (isinstance(n, ast.Call) and n.target is None and len(n.args) == 2
                        and n.function in ("_==_", "_!=_", "@in")):
                    continue
                a, b = n.args
                for rec, value in ((a, b), (b, a)):
                    if not (isinstance(rec, ast.Select) and rec.field == "tool"):
                        continue
                    items = value.elements if isinstance(value, ast.ListLit) else (value,)
                    out.update(v.value for v in items
                               if isinstance(v, ast.Literal) and isinstance(v.value, str))
    return out


_PROBES = (*(datetime.timedelta(hours=h) for h in range(3, 24, 3)),
           *(datetime.timedelta(days=d) for d in (1, 2, 3, 4, 5, 6, 31, 92, 183, 366, 1461)),
           datetime.timedelta(days=-366))
"""When a case leaves ``call.now`` out, it is also decided at these offsets from the real
time: every three hours of a day, every weekday, other months and years."""


def time_dependent(case: TestCase, decision: Decision,
                   policy_set: PolicySet) -> list[Mismatch]:
    """A case without ``call.now`` whose decision changes with the time it is run at: it
    passes at some hours (or days, or months) and fails at others, so a CI gate built on
    it is flaky. Only cases that a policy reading ``now`` could decide are probed; the
    probes are the real time shifted by ``_PROBES``."""
    if case.now is not None or not any("now" in p.names for p in policy_set.policies
                                       if p.matches_tool(case.tool)):
        return []
    real = datetime.datetime.now(datetime.UTC)
    seen = _outcome(decision)
    for offset in _PROBES:
        at = real + offset
        other = policy_set.evaluate(
            case.tool, case.args, principal=case.principal, history=case.history,
            request=case.request, description=case.description, now=at, agent=case.agent,
            counters=PresetCounts(case.counters) if case.counters is not None else None)
        if _outcome(other) != seen:
            stamp = at.strftime("%Y-%m-%dT%H:%M:%SZ")
            rules = ", ".join(sorted(f"{r.policy}/{r.rule}" for r in other.rules)) or "none"
            return [Mismatch("now", None, stamp,
                             f"the case does not set call.now, and its decision depends on "
                             f"the time it runs: now it is {decision.effect.value}, at "
                             f"{stamp} {other.effect.value} (rules fired: {rules}); set "
                             f"call.now (e.g. now: {real.strftime('%Y-%m-%dT')}10:00:00Z) "
                             f"so the case decides the same on every run")]
    return []


def _outcome(decision: Decision) -> tuple[object, ...]:
    return (decision.effect, decision.message, sorted(
        (r.policy, r.rule) for r in decision.rules), len(decision.errors))


def _with_key_hints(mismatches: list[Mismatch], case: TestCase) -> list[Mismatch]:
    """An error "no such key: role" while the case's principal has ``roles``: say so (a
    misspelt key in the policy, or in the case)."""
    out: list[Mismatch] = []
    for m in mismatches:
        if m.field == "errors" and "no such key: " in m.note:
            hints = []
            for key in dict.fromkeys(re.findall(r"no such key: ([^\s;,)]+)", m.note)):
                for what, data in (("args", case.args), ("principal", case.principal)):
                    keys = [str(k) for k in data or {}]
                    close = closest(key, keys, cutoff=0.8)
                    if close is not None and close != key:
                        hints.append(f"'{key}' is missing, and the case's {what} has "
                                     f"'{close}': a misspelt key?")
            if hints:
                m = dataclasses.replace(m, note=m.note + " (" + "; ".join(hints) + ")")
        out.append(m)
    return out


def _errored(decision: Decision, policy: str, rule: str) -> bool:
    element = f"rules.{rule}"
    return any(e.policy == policy and e.element == element for e in decision.errors)


def same_value(want: Any, have: Any) -> bool:
    """Equality as CEL sees it: numbers by value, booleans never equal to numbers."""
    if isinstance(want, bool) or isinstance(have, bool):
        return isinstance(want, bool) and isinstance(have, bool) and want == have
    if isinstance(want, int | float) and isinstance(have, int | float):
        return want == have
    if isinstance(want, Mapping) and isinstance(have, Mapping):
        return want.keys() == have.keys() and all(same_value(want[k], have[k]) for k in want)
    if isinstance(want, list | tuple) and isinstance(have, list | tuple):
        return len(want) == len(have) and all(map(same_value, want, have))
    return type(want) is type(have) and bool(want == have)


# --- reading the loader's records ----------------------------------------------------


def cases_from_documents(documents: Documents) -> list[TestCase]:
    """Flatten the loader's ``PolicyTest`` records into ``TestCase`` values."""
    out: list[TestCase] = []
    for test in documents.tests:
        policies = tuple(test.policies) or None
        for case in test.cases:
            call, expect = case.call, case.expect
            wanted: dict[str, Any] = {}
            for key in ("effect", "arguments", "rules", "message", "errors"):
                value = getattr(expect, key)
                if value is not None:
                    wanted[key] = value
            out.append(TestCase(
                suite=test.name, name=case.name, file=case.position.file,
                line=case.position.line, column=case.position.column, policies=policies,
                tool=call.tool, args=call.args, principal=call.principal,
                history=[h.to_dict() for h in call.history], request=call.request,
                description=call.description or "", expect=wanted, now=call.now,
                agent=call.agent, counters=call.counters,
            ))
    return out


def _as_list(paths: PathArg | Sequence[PathArg]) -> list[str]:
    if isinstance(paths, str | os.PathLike):
        return [os.fspath(paths)]
    return [os.fspath(p) for p in paths]


# --- reporters -----------------------------------------------------------------------


def render_text(report: TestReport, *, coverage: bool = False, verbose: bool = False) -> str:
    """For people: each failure with its file:line and an expected (-) / actual (+) diff."""
    lines: list[str] = []
    for r in report.results:
        if r.passed:
            if verbose:
                lines.append(f"PASS {r.location}: {r.suite}: {r.case}")
            continue
        lines.append(f"FAIL {r.location}: {r.suite}: {r.case}")
        for m in r.mismatches:
            lines.extend(_diff(m))
    n_fail = len(report.failures)
    n_pass = len(report.results) - n_fail
    suites = len({(r.file, r.suite) for r in report.results})
    if n_fail:
        lines.append("(- expected, + actual)")
    lines.append(f"{n_pass} passed, {n_fail} failed "
                 f"({len(report.results)} cases in {suites} suite{'s' if suites != 1 else ''})")
    if coverage:
        lines.extend(_coverage_lines(report))
    return "\n".join(lines) + "\n"


def _diff(m: Mismatch) -> list[str]:
    head = f"  {m.field}:" + (f" {m.note}" if m.note else "")
    if m.field in ("rules", "errors") and isinstance(m.expected, list):
        have = list(m.actual)
        want = list(m.expected)
        body = [f"    - {x}" for x in want if x not in have]
        body += [f"    + {x}" for x in have if x not in want]
        body += [f"      {x}" for x in want if x in have]
        if not body:  # same names, different multiplicity
            body = [f"    - {want}", f"    + {have}"]
        return [head, *body]
    if m.field == "now":
        return [head]
    if m.field in ("message", "effect"):
        return [head, f"    - {m.expected}", f"    + {m.actual}"]
    return [head, f"    - {_show(m.expected)}", f"    + {_show(m.actual)}"]


def _show(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _coverage_lines(report: TestReport) -> list[str]:
    n_rules = sum(len(c.rules) for c in report.coverage)
    n_repairs = sum(len(c.repairs) for c in report.coverage)
    unfired = sum(len(c.unfired_rules) for c in report.coverage)
    unapplied = sum(len(c.unapplied_repairs) for c in report.coverage)
    if not unfired and not unapplied:
        return [f"coverage: every rule ({n_rules}) and repair ({n_repairs}) of "
                f"{len(report.coverage)} policies was exercised"]
    out = [f"coverage: {unfired} of {n_rules} rules never fired, "
           f"{unapplied} of {n_repairs} repairs never applied"]
    for c in report.uncovered:
        out.append(f"  {c.file}:{c.line}:{c.column}: policy {c.policy}")
        out.extend(f"    rule {name}" for name in c.unfired_rules)
        out.extend(f"    repair {name}" for name in c.unapplied_repairs)
    return out


def render_json(report: TestReport) -> str:
    """For machines: every case with its decision, and per-policy coverage."""
    return json.dumps(report.to_dict(), indent=2, sort_keys=False, default=str) + "\n"


def render_junit(report: TestReport) -> str:
    """JUnit XML, the format CI systems (GitHub, GitLab, Jenkins, Azure) display natively.

    One ``testsuite`` per PolicyTest suite, one ``testcase`` per case with its file and
    line; a failing case carries the same expected/actual diff as the text output.
    """
    from xml.etree import ElementTree as ET

    root = ET.Element("testsuites", name="guardrails", tests=str(len(report.results)),
                      failures=str(len(report.failures)), errors="0")
    suites: dict[tuple[str, str], ET.Element] = {}
    for r in report.results:
        suite = suites.get((r.file, r.suite))
        if suite is None:
            suite = ET.SubElement(root, "testsuite", name=r.suite, file=r.file,
                                  tests="0", failures="0", errors="0", skipped="0")
            suites[(r.file, r.suite)] = suite
        suite.set("tests", str(int(suite.get("tests", "0")) + 1))
        case = ET.SubElement(suite, "testcase", name=r.case, classname=r.suite,
                             file=r.file, line=str(r.line))
        if not r.passed:
            suite.set("failures", str(int(suite.get("failures", "0")) + 1))
            fields = ", ".join(m.field for m in r.mismatches)
            failure = ET.SubElement(case, "failure", type="mismatch",
                                    message=f"{r.location}: expects the wrong {fields}")
            body = [line for m in r.mismatches for line in _diff(m)]
            failure.text = "\n".join([*body, "(- expected, + actual)"])
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, "unicode") + "\n"
