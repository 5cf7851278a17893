"""OpenTelemetry spans, metrics and the decision log for guard decisions.

Only the OpenTelemetry *API* is used: with no SDK installed every call is a cheap no-op, and the
host chooses exporters. Nothing here may carry an argument value: spans, events and metric
attributes hold names (tools, policies, rules, argument names) and never messages, because rule
messages are written by policy authors and routinely quote the arguments. The decision log keeps
the (engine-scrubbed) messages, after a second pass that blanks every argument value they quote.
See docs/telemetry.md for the full list of names.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from contextvars import Token
from datetime import UTC, datetime
from typing import Any, Protocol, cast, runtime_checkable

from opentelemetry import _logs, metrics, trace
from opentelemetry import context as otel_context
from opentelemetry._logs import SeverityNumber
from opentelemetry.environment_variables import OTEL_PYTHON_TRACER_PROVIDER
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from guardrails.engine.decision import REDACTED, Decision, Effect
from guardrails.engine.scrub import Scrubber

__all__ = [
    "DECISION_LOGGER",
    "RECORD_VERSION",
    "CallSpan",
    "DecisionSink",
    "GuardTelemetry",
    "JsonLinesSink",
    "LoggingSink",
    "OpenTelemetrySink",
    "Sinks",
    "decision_record",
]

INSTRUMENTATION_NAME = "guardrails"
DECISION_LOGGER = "guardrails.decisions"
SOURCE_LOGGER = "guardrails.source"
"""Logger of ``PolicySource`` (hot reload): loads (info) and refused updates (warning)."""
POLICY_RELOADS = "guardrails.policy.reloads"
"""Counter of policy updates a ``PolicySource`` found, by ``RELOAD_OUTCOME``."""
RELOAD_OUTCOME = "guardrails.reload.outcome"
"""``loaded``, ``rejected`` (did not load, or a bundle failed its checks), ``unreachable`` or
``stale`` (the bundle in use is older than ``max_age``)."""
RECORD_VERSION = 1

# Attribute keys. gen_ai.* follow the OpenTelemetry GenAI semantic conventions (as the framework's
# execute_tool span does); guardrails.* are ours.
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
ERROR_TYPE = "error.type"
EFFECT = "guardrails.decision.effect"
DECISION_ID = "guardrails.decision.id"
REVISION = "guardrails.policy.revision"
POLICIES = "guardrails.policies"
RULES = "guardrails.rules"
REPAIRS = "guardrails.repairs"
ERRORS = "guardrails.errors"
AUDIT = "guardrails.audit"
APPROVED = "guardrails.approval.granted"
POLICY = "guardrails.policy"
RULE = "guardrails.rule"
RULE_ACTION = "guardrails.rule.action"
REPAIR = "guardrails.repair"
REPAIR_SET = "guardrails.repair.set"
REPAIR_UNSET = "guardrails.repair.unset"
ERROR_ELEMENT = "guardrails.error.element"
ERROR_HANDLED_AS = "guardrails.error.handled_as"
SIGNAL = "guardrails.signal"

EVENT_RULE = "guardrails.rule"
EVENT_REPAIR = "guardrails.repair"
EVENT_ERROR = "guardrails.evaluation_error"
EVENT_HALT = "guardrails.halt"

# Guard evaluation is sub-millisecond to a few milliseconds; the SDK's default buckets start at 5 s.
_DURATION_BUCKETS = (
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
)
_log = logging.getLogger("guardrails.telemetry")


# --------------------------------------------------------------------------- decision log sinks


@runtime_checkable
class DecisionSink(Protocol):
    """Where decision records go. ``write`` is called once per decision, from the event loop's
    thread or any other; it should not block for long. A sink may also define
    ``enabled() -> bool``: while it returns false no record is built (see LoggingSink)."""

    def write(self, record: Mapping[str, Any]) -> None: ...


def _dumps(record: Mapping[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str)


class JsonLinesSink:
    """Append-only JSON Lines file: one line per record, written with a single ``write(2)`` on an
    ``O_APPEND`` descriptor and fsync'd before ``write`` returns, so a crash loses at most the
    record being written and concurrent writers in one process never interleave (a lock)."""

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = True) -> None:
        self.path = os.fspath(path)
        self._fsync = fsync
        self._lock = threading.Lock()
        # 0o600: the log names tools, rules and argument names, and carries rule messages.
        self._fd: int | None = os.open(
            self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600
        )

    def write(self, record: Mapping[str, Any]) -> None:
        data = (_dumps(record) + "\n").encode("utf-8")
        with self._lock:
            if self._fd is None:
                raise ValueError(f"decision log {self.path} is closed")
            view = memoryview(data)
            while view:  # write(2) may be partial for large records; the lock keeps them whole
                written = os.write(self._fd, view)
                view = view[written:]
            if self._fsync:
                os.fsync(self._fd)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> JsonLinesSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LoggingSink:
    """Python logging: one record per decision on logger ``guardrails.decisions``, the JSON
    record as the message and the mapping itself in ``extra["guardrails_decision"]`` for
    structured handlers. The default sink: silent until the host configures logging."""

    def __init__(self, logger: logging.Logger | str = DECISION_LOGGER, *,
                 level: int = logging.INFO) -> None:
        self.logger = logging.getLogger(logger) if isinstance(logger, str) else logger
        self.level = level

    def enabled(self) -> bool:
        """Optional sink method: when false the record is not even built."""
        return self.logger.isEnabledFor(self.level)

    def write(self, record: Mapping[str, Any]) -> None:
        if self.logger.isEnabledFor(self.level):
            self.logger.log(self.level, "%s", _dumps(record),
                            extra={"guardrails_decision": dict(record)})


class Sinks:
    """Several sinks at once (``decision_log=[OpenTelemetrySink(), JsonLinesSink(path)]``):
    every record goes to each; one failing does not keep it from the others."""

    def __init__(self, sinks: Sequence[DecisionSink]) -> None:
        self.sinks = tuple(sinks)

    def enabled(self) -> bool:
        for sink in self.sinks:
            enabled = getattr(sink, "enabled", None)
            if enabled is None or enabled():
                return True
        return False

    def write(self, record: Mapping[str, Any]) -> None:
        failure: Exception | None = None
        for sink in self.sinks:
            try:
                sink.write(record)
            except Exception as exc:
                failure = failure or exc
        if failure is not None:
            raise failure


DECISION_EVENT = "guardrails.decision"


class OpenTelemetrySink:
    """OpenTelemetry log records (the Logs API): one per decision, event name
    ``guardrails.decision``, the whole record as the body and its identifying fields as
    attributes, so any OTel pipeline or collector ships decision logs beside the spans.

    Written from inside the guard's span, so the SDK links each record to its trace and
    span. ``logger_provider`` defaults to the global one (a no-op until the host sets one).
    """

    def __init__(self, logger_provider: Any = None) -> None:
        self.logger = _logs.get_logger(INSTRUMENTATION_NAME, _version() or "",
                                       logger_provider=logger_provider)

    def write(self, record: Mapping[str, Any]) -> None:
        effect = str(record.get("effect"))
        attributes: dict[str, Any] = {DECISION_ID: str(record.get("decision_id")),
                      TOOL_NAME: str(record.get("tool")), EFFECT: effect,
                      REVISION: str(record.get("revision")),
                      AUDIT: bool(record.get("audit")),
                      RULES: [f"{r['policy']}/{r['rule']}" for r in record.get("rules", ())]}
        severity = SeverityNumber.INFO if effect == "allow" else SeverityNumber.WARN
        self.logger.emit(event_name=DECISION_EVENT, body=_any_value(record),
                         attributes=attributes, severity_number=severity,
                         severity_text=severity.name)


def _any_value(value: Any) -> Any:
    """The record as an OTel ``AnyValue`` (no None inside maps and lists)."""
    if isinstance(value, Mapping):
        return {str(k): _any_value(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_any_value(v) for v in value if v is not None]
    return value


# --------------------------------------------------------------------------- decision records


def decision_record(
    decision: Decision,
    *,
    call_id: str | None = None,
    duration_s: float | None = None,
    span: Span | None = None,
    timestamp: datetime | None = None,
    approved: bool = False,
) -> dict[str, Any]:
    """The decision-log record: JSON-safe, argument names but never argument values.

    Rule, decision and error messages come from the engine already scrubbed of secret values
    and redact patterns; here every other argument value they quote is blanked too, so the log
    is safe to ship wherever spans go.
    """
    ctx = span.get_span_context() if span is not None else trace.INVALID_SPAN_CONTEXT
    # Every argument value, not only the secret ones; computed only if there is a message.
    # On top of the decision's own scrubbing (secret values by value, known secrets,
    # redact patterns), which also covers the model-chosen argument names.
    blank = Scrubber(lambda: decision.arguments.values())

    def scrub(text: str) -> str:
        return blank(decision.scrub(text))

    return {
        "version": RECORD_VERSION,
        "decision_id": decision.id,
        "timestamp": (timestamp or datetime.now(UTC)).isoformat(timespec="microseconds"),
        "trace_id": trace.format_trace_id(ctx.trace_id) if ctx.is_valid else None,
        "span_id": trace.format_span_id(ctx.span_id) if ctx.is_valid else None,
        "revision": decision.revision,
        "tool": decision.tool,
        "call_id": call_id,
        "effect": decision.effect.value,
        "approved": approved,
        "message": scrub(decision.message),
        "audit": _has_audit(decision),
        "policies": list(decision.policies),
        "rules": [{**r.to_dict(), "message": scrub(r.message)} for r in decision.rules],
        "repairs": [r.to_dict() for r in decision.repairs],
        "errors": [{**e.to_dict(), "message": scrub(e.message)} for e in decision.errors],
        "argument_names": sorted({decision.scrub(k) for k in decision.arguments}),
        "secret_arguments": sorted(decision.secret_arguments),
        "duration_s": duration_s,
    }


def _has_audit(decision: Decision) -> bool:
    # (Most decisions fire no rule and apply no repair: no generator for an empty tuple.)
    rules, repairs = decision.rules, decision.repairs
    return bool((rules and any(r.audit for r in rules))
                or (repairs and any(r.audit for r in repairs)))


def _rule_names(decision: Decision) -> list[str]:
    return [f"{r.policy}/{r.rule}" for r in decision.rules]


def _reason(decision: Decision) -> str:
    """Why the call was halted, from names only (rule messages may quote arguments)."""
    names = [f"{r.policy}/{r.rule}" for r in decision.deciding_rules]
    if names:
        return f"{decision.effect.value} by rule {', '.join(names)}"
    if decision.errors:
        failed = ", ".join(f"{e.policy}/{e.element}" for e in decision.errors)
        return f"{decision.effect.value} after evaluation error in {failed}"
    return f"{decision.effect.value} by default action ({', '.join(decision.by_default)})"


# --------------------------------------------------------------------------- spans and metrics


class CallSpan:
    """The span of one guarded tool call (evaluation plus the tool's own execute_tool span)."""

    def __init__(self, telemetry: GuardTelemetry, span: Span, parent: Span | None, *,
                 tool: str, call_id: str | None) -> None:
        self.span = span
        self._telemetry = telemetry
        self._parent = parent
        """The span around the call; None: whatever span is current (no span of ours is)."""
        self._tool = tool
        self._call_id = call_id
        self._clean_for: Decision | None = None
        self.decision: Decision | None = None
        self.failed = False
        self.approved = False

    def mark_approved(self) -> None:
        """Before ``record``: the call is the replay of a call a human approved, so a
        ``require_approval`` decision lets it run."""
        self.approved = True

    def mark_call_id_clean(self, decision: Decision) -> None:
        """Before ``record``: the guard found that ``decision`` leaves the call id as it is
        (it blocks the call otherwise), so ``call_id`` need not scrub it a second time."""
        self._clean_for = decision

    def call_id(self, decision: Decision) -> str | None:
        """The model's call id as spans and records may carry it: ``[REDACTED]`` when it
        holds a secret the decision knows (a secret argument's value, an injected value,
        a redact-pattern match)."""
        raw = self._call_id
        if raw is None or getattr(self, "_clean_for", None) is decision:
            return raw
        return raw if decision.scrub(raw) == raw else REDACTED

    def record(self, decision: Decision, duration_s: float) -> None:
        """Attributes, events, metrics and the decision-log record for a decision."""
        self.decision = decision
        approved = self.approved
        span, t = self.span, self._telemetry
        call_id = self.call_id(decision)
        # Each signal on its own: a failing exporter, meter or sink loses only its signal.
        effect = decision.effect.value
        audit = _has_audit(decision)
        if span is not trace.INVALID_SPAN:  # a quiet call (``call_span``) has no span to set
            with t._contain("span"):
                if call_id is not None:
                    span.set_attribute(TOOL_CALL_ID, call_id)
                self._record_span(decision, approved, effect, audit)
        if decision.effect is Effect.HALT:
            with t._contain("span"):
                parent = self._parent
                t._mark_halt(parent if parent is not None else trace.get_current_span(),
                             decision)
        with t._contain("metrics"):
            self._record_metrics(decision, effect, audit, duration_s)
        with t._contain("decision log"):
            if t._log_enabled():
                t._write(decision_record(decision, call_id=call_id,
                                         duration_s=duration_s, span=span, approved=approved))

    def _record_span(self, decision: Decision, approved: bool, effect: str, audit: bool) -> None:
        span = self.span
        if span.is_recording():  # with no SDK, skip building what nobody keeps
            if approved:
                span.set_attribute(APPROVED, True)
            span.set_attributes({
                EFFECT: effect,
                DECISION_ID: decision.id,
                REVISION: decision.revision,
                POLICIES: list(decision.policies),
                RULES: _rule_names(decision),
                REPAIRS: len(decision.repairs),
                ERRORS: len(decision.errors),
                AUDIT: audit,
            })
            for r in decision.rules:
                span.add_event(EVENT_RULE, {POLICY: r.policy, RULE: r.rule,
                                            RULE_ACTION: r.action.value, AUDIT: r.audit})
            for rp in decision.repairs:
                span.add_event(EVENT_REPAIR, {POLICY: rp.policy, REPAIR: rp.repair,
                                              REPAIR_SET: list(rp.set),
                                              REPAIR_UNSET: list(rp.unset), AUDIT: rp.audit})
            for e in decision.errors:
                span.add_event(EVENT_ERROR, {POLICY: e.policy, ERROR_ELEMENT: e.element,
                                             ERROR_HANDLED_AS: e.handled_as})
            if decision.effect is Effect.HALT:
                span.set_status(Status(StatusCode.ERROR, _reason(decision)))
            elif decision.errors:
                failed = ", ".join(f"{e.policy}/{e.element}" for e in decision.errors)
                span.set_status(Status(StatusCode.ERROR, f"evaluation error in {failed}"))

    def _record_metrics(self, decision: Decision, effect: str, audit: bool,
                        duration_s: float) -> None:
        t = self._telemetry
        base = {EFFECT: effect, TOOL_NAME: self._tool}
        t._decision_counter.add(1, {**base, AUDIT: audit})
        for r in decision.rules:
            t._rule_counter.add(1, {**base, POLICY: r.policy, RULE: r.rule,
                                  RULE_ACTION: r.action.value, AUDIT: r.audit})
        t._duration.record(duration_s, base)
        for e in decision.errors:
            t._error_counter.add(1, {TOOL_NAME: self._tool, POLICY: e.policy,
                             ERROR_HANDLED_AS: e.handled_as})

    def fail(self, error: BaseException) -> None:
        """The guard itself failed (the call is blocked, fail closed).

        Only the exception's type is recorded: its message may quote the arguments.
        """
        self.failed = True
        kind = type(error).__name__
        with self._telemetry._contain("span"):
            self.span.set_attribute(ERROR_TYPE, kind)
            self.span.set_status(Status(StatusCode.ERROR, f"guard failed: {kind}"))
        with self._telemetry._contain("metrics"):
            self._telemetry._error_counter.add(1, {TOOL_NAME: self._tool, ERROR_TYPE: kind})

    def _exit_with(self, error: BaseException) -> None:
        """An exception left the span: the tool's own, the guard's halt, or a cancellation."""
        if self.decision is None and not self.failed:
            kind = type(error).__name__
            with self._telemetry._contain("span"):
                self.span.set_attribute(ERROR_TYPE, kind)
                self.span.set_status(Status(StatusCode.ERROR, f"guard did not decide: {kind}"))


_NO_TRACER_PROVIDER = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
"""Global tracer providers under which no span records (no SDK installed)."""

_UNREAD = object()


def _installed_tracer_provider() -> object:
    """The global tracer provider installed (``trace.set_tracer_provider``), None while
    there is none, or ``_UNREAD`` when this OpenTelemetry keeps it elsewhere.

    What ``trace.get_tracer_provider()`` finds, without its cost on every guarded call
    while nothing records: with none installed it looks up ``OTEL_PYTHON_TRACER_PROVIDER``
    in ``os.environ``, and the miss raises and catches a ``KeyError`` there (about 1.5 µs,
    half of what telemetry cost a call with no SDK). The API module's own global is read
    instead (``opentelemetry.trace._TRACER_PROVIDER``, pinned by tests/test_telemetry_quiet.py);
    a release without it takes the public call (``_UNREAD``)."""
    return getattr(trace, "_TRACER_PROVIDER", _UNREAD)



class _SilentSpan(CallSpan):
    """The ``CallSpan`` of a call of which nothing would be kept (``GuardTelemetry._silent``:
    no span can record, every instrument records nowhere, the decision log builds no
    record): one per telemetry, shared by every such call, holding nothing of any of them.
    It still marks a halt on the span around the call (the host's own may record)."""

    def __init__(self, telemetry: GuardTelemetry) -> None:
        super().__init__(telemetry, trace.INVALID_SPAN, None, tool="", call_id=None)

    def mark_approved(self) -> None:
        pass

    def mark_call_id_clean(self, decision: Decision) -> None:
        pass

    def record(self, decision: Decision, duration_s: float) -> None:
        if decision.effect is Effect.HALT:
            t = self._telemetry
            with t._contain("span"):
                t._mark_halt(trace.get_current_span(), decision)

    def fail(self, error: BaseException) -> None:
        pass

    def _exit_with(self, error: BaseException) -> None:
        pass


_IDLE_INSTRUMENTS = (metrics.NoOpCounter, metrics.NoOpHistogram)


def _records_nowhere(instrument: Any) -> bool:
    """Whether ``instrument`` keeps nothing it is given: a no-op one, or the global meter's
    proxy while no meter provider is installed (its ``_real_instrument`` is None until
    ``metrics.set_meter_provider``: pinned by tests/test_telemetry_quiet.py). Anything
    else, or a proxy this OpenTelemetry keeps otherwise, records."""
    if type(instrument) in _IDLE_INSTRUMENTS:
        return True
    return getattr(instrument, "_real_instrument", _UNREAD) is None


class _QuietCall:
    """``with`` a ``CallSpan`` that has no span of its own (see ``GuardTelemetry.call_span``)."""

    __slots__ = ("_call",)

    def __init__(self, call: CallSpan) -> None:
        self._call = call

    def __enter__(self) -> CallSpan:
        return self._call

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: object) -> None:
        if exc is not None:
            self._call._exit_with(exc)


_CONTROL_FLOW = (KeyboardInterrupt, SystemExit, GeneratorExit, asyncio.CancelledError)
"""What telemetry may raise through the guard: the process or task is being stopped."""


class _Contain:
    """``with telemetry._contain(part):`` — whatever is raised inside, except the process or
    task being stopped (``_CONTROL_FLOW``), is counted and swallowed: a ``BaseException``
    subclass from a span processor must not replace a halt either. A class rather than a
    generator: it is entered several times per guarded call."""

    __slots__ = ("_part", "_telemetry")

    def __init__(self, telemetry: GuardTelemetry, part: str) -> None:
        self._telemetry = telemetry
        self._part = part

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: object) -> bool:
        if exc is None or isinstance(exc, _CONTROL_FLOW):
            return False
        self._telemetry._contained(self._part, exc)
        return True


class GuardTelemetry:
    """Spans, metrics and decision log for one ``guard()``; providers default to the global ones
    (looked up on each call, so a provider installed after ``guard()`` is still honoured)."""

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        decision_log: DecisionSink | Sequence[DecisionSink] | None = None,
    ) -> None:
        self._containers: dict[str, _Contain] = {}
        self._recording_seen = False
        self._provider_from_env = OTEL_PYTHON_TRACER_PROVIDER in os.environ
        """A global tracer provider to load is named in the environment: it is asked for
        (``trace.get_tracer_provider()`` loads it) rather than looked for installed."""
        sink: DecisionSink
        if isinstance(decision_log, list | tuple):
            sink = Sinks(decision_log)
        elif decision_log is None:
            sink = LoggingSink()
        else:
            sink = cast(DecisionSink, decision_log)
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider
        self.decision_log: DecisionSink = sink
        self.contained_failures = 0
        """Telemetry operations that raised (an exporter, span processor, meter or sink):
        each was contained, counted here and logged once per kind; no decision changed."""
        self._failures_logged: set[tuple[str, str]] = set()
        self._failures_lock = threading.Lock()
        version = _version()
        self.tracer: trace.Tracer = trace.NoOpTracer()
        with self._contain("tracer"):
            self.tracer = trace.get_tracer(INSTRUMENTATION_NAME, version, tracer_provider)
        meter: metrics.Meter = metrics.NoOpMeter(INSTRUMENTATION_NAME)
        with self._contain("meter"):
            meter = metrics.get_meter(INSTRUMENTATION_NAME, version or "", meter_provider)
        try:
            self._create_instruments(meter)
        except Exception as exc:
            self._contained("meter", exc)
            self._create_instruments(metrics.NoOpMeter(INSTRUMENTATION_NAME))
        self._silent_call = _QuietCall(_SilentSpan(self))
        self._halts_marked: OrderedDict[tuple[int, int, str], None] = OrderedDict()
        self._halts_lock = threading.Lock()

    def _create_instruments(self, meter: metrics.Meter) -> None:
        self._decision_counter = meter.create_counter(
            "guardrails.decisions", "{decision}", "Guard decisions, by effect and tool.")
        self._rule_counter = meter.create_counter(
            "guardrails.rules.fired", "{rule}",
            "Rules fired, by policy, rule, action and the decision's effect.")
        self._duration = meter.create_histogram(
            "guardrails.evaluation.duration", "s", "Time to evaluate one tool call.",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS)
        self._error_counter = meter.create_counter(
            "guardrails.evaluation.errors", "{error}",
            "Expressions that failed at run time, and guard failures (fail closed).")
        self._log_error_counter = meter.create_counter(
            "guardrails.decision_log.errors", "{error}", "Decision records the sink refused.")
        self._telemetry_error_counter = meter.create_counter(
            "guardrails.signal.errors", "{error}",
            "Telemetry operations that raised and were contained (decisions unaffected).")
        # The instruments a quiet call's record and failure use that may start recording
        # (``_records_nowhere`` of the rest holds for good: a no-op one stays a no-op).
        self._may_record = tuple(
            instrument for instrument in (self._decision_counter, self._rule_counter,
                                          self._duration, self._error_counter)
            if type(instrument) not in _IDLE_INSTRUMENTS)

    # The one place telemetry failures are contained. A decision, a block or a halt must
    # never depend on an exporter, a span processor, a meter or a sink: whatever they
    # raise is counted, logged once per kind, and the guard goes on.
    def _contain(self, part: str) -> _Contain:
        found = self._containers.get(part)
        if found is None:  # a handful of parts: one (stateless) container each, reused
            found = self._containers[part] = _Contain(self, part)
        return found

    def _contained(self, part: str, exc: BaseException) -> None:
        kind = type(exc).__name__
        with self._failures_lock:
            self.contained_failures += 1
            first = (part, kind) not in self._failures_logged
            if first and len(self._failures_logged) < 64:
                self._failures_logged.add((part, kind))
        with contextlib.suppress(Exception):
            self._telemetry_error_counter.add(1, {SIGNAL: part, ERROR_TYPE: kind})
        if first:
            # The type only: the exception's text is the failing component's, not ours.
            with contextlib.suppress(Exception):
                _log.warning("guardrails telemetry: %s failed (%s); contained, decisions are "
                             "unaffected (further failures of this kind are only counted)",
                             part, kind)

    def call_span(self, *, tool: str, call_id: str | None) -> AbstractContextManager[CallSpan]:
        """Open the guard span as the current span; the tool's execute_tool span nests inside.

        Starting, entering and ending it are contained: a span processor that raises in
        ``on_start`` or ``on_end`` never replaces what the guarded call raised (a halt).
        When no span of ours can record, none is started, attached or ended (what nobody
        keeps): metrics and the decision log are recorded all the same, and the span around
        the call is looked up only if a halt marks it.
        """
        # The call id is the model's choice: it is set when the decision is recorded,
        # scrubbed by it (``CallSpan.call_id``), never raw.
        if not self._can_record():
            if self._silent():
                return self._silent_call
            return _QuietCall(CallSpan(self, trace.INVALID_SPAN, None, tool=tool,
                                       call_id=call_id))
        return self._recorded_call(tool, call_id)

    def _silent(self) -> bool:
        """Whether nothing of a call without a span would be kept: the instruments its
        record and failure use record nowhere, and the decision log builds no record (the
        default telemetry with no SDK and the logging sink off). Asked on every call: a
        meter provider installed, or logging turned on, counts from the next call on."""
        for instrument in self._may_record:  # ``_records_nowhere`` of each, in line
            if getattr(instrument, "_real_instrument", _UNREAD) is not None:
                return False
        return not self._log_enabled()

    @contextmanager
    def _recorded_call(self, tool: str, call_id: str | None) -> Iterator[CallSpan]:
        attributes: dict[str, str] = {TOOL_NAME: tool}
        parent: Span = trace.INVALID_SPAN
        span: Span = trace.INVALID_SPAN
        with self._contain("span"):
            parent = trace.get_current_span()
            # No record_exception: exception messages (tool errors, validation errors) may
            # quote argument values. The framework's execute_tool span reports the tool's own.
            span = self.tracer.start_span(f"guardrails.guard {tool}", kind=SpanKind.INTERNAL,
                                          attributes=attributes)
        token: Token[otel_context.Context] | None = None
        with self._contain("span"):
            token = otel_context.attach(trace.set_span_in_context(span))
        call = CallSpan(self, span, parent, tool=tool, call_id=call_id)
        try:
            yield call
        except BaseException as exc:
            call._exit_with(exc)
            raise
        finally:
            if token is not None:
                with self._contain("span"):
                    otel_context.detach(token)
            with self._contain("span"):
                span.end()

    def _can_record(self) -> bool:
        """Whether a span this telemetry starts may record: not while the tracer is a no-op,
        or the global provider's proxy with no provider installed (a provider installed
        later is seen on the next call)."""
        tracer = self.tracer
        if type(tracer) is trace.ProxyTracer and not self._recording_seen:
            if not self._provider_from_env and getattr(  # _installed_tracer_provider()
                    trace, "_TRACER_PROVIDER", _UNREAD) is None:
                return False
            try:
                provider = trace.get_tracer_provider()
            except Exception:  # loading a configured provider failed: the contained path
                return True
            if isinstance(provider, _NO_TRACER_PROVIDER):
                return False
            self._recording_seen = True  # a global provider is installed once, for good
            return True
        return type(tracer) is not trace.NoOpTracer

    def run_span(self) -> Span | None:
        """A span of the guard's own around a run, or None when none is needed.

        With the global provider the framework's ``invoke_agent`` span holds a run's guard
        spans in one trace. A provider given to ``guard()`` is not the framework's: without
        a global provider there is no span around the run, and each decision would start a
        trace of its own. Then the run boundary opens this span (``guardrails.run``) so the
        run's decisions nest in one trace, as they do under a global provider.
        """
        if self.tracer_provider is None or trace.get_current_span().get_span_context().is_valid:
            return None
        if not isinstance(trace.get_tracer_provider(), _NO_TRACER_PROVIDER):
            return None  # the framework's invoke_agent span will hold the run
        with self._contain("span"):
            return self.tracer.start_span("guardrails.run", kind=SpanKind.INTERNAL)
        return None

    def attach_run_span(self, span: Span) -> Token[otel_context.Context] | None:
        """``span`` (from ``run_span``) as the current span until ``detach_run_span`` of what
        this returns; attaching it is contained (None when it failed). The run boundary
        calls it only when there is a span (nearly never): no context manager to enter."""
        with self._contain("span"):
            return otel_context.attach(trace.set_span_in_context(span))
        return None

    def detach_run_span(self, token: Token[otel_context.Context] | None) -> None:
        if token is not None:
            with self._contain("span"):
                otel_context.detach(token)

    def end_run_span(self, span: Span | None) -> None:
        if span is not None:
            with self._contain("span"):
                span.end()

    def record_halt(self, decision: Decision) -> None:
        """Called by the run boundary when a run is halted: marks the current (agent) span."""
        with self._contain("span"):
            self._mark_halt(trace.get_current_span(), decision)

    def _mark_halt(self, span: Span, decision: Decision) -> None:
        # The guard marks the span around the tool call (the framework's invoke_agent span) and
        # the run boundary marks the one around the run; when they are one span, mark it once.
        if not span.is_recording():
            return
        ctx = span.get_span_context()
        key = (ctx.trace_id, ctx.span_id, decision.id)
        with self._halts_lock:
            if key in self._halts_marked:
                return
            self._halts_marked[key] = None
            if len(self._halts_marked) > 1024:
                self._halts_marked.popitem(last=False)
        span.add_event(EVENT_HALT, {DECISION_ID: decision.id, TOOL_NAME: decision.tool,
                                    RULES: _rule_names(decision), REVISION: decision.revision})
        span.set_status(Status(StatusCode.ERROR, f"run halted: {_reason(decision)}"))

    def _log_enabled(self) -> bool:
        enabled = getattr(self.decision_log, "enabled", None)
        if enabled is None:
            return True
        try:
            return bool(enabled())
        except Exception:
            return True  # let write() fail and be counted

    def _write(self, record: Mapping[str, Any]) -> None:
        # A broken sink must not turn an allowed call into a failure nor hide the decision from
        # the other signals: count it and say so, without the record (it is the sink's job).
        try:
            self.decision_log.write(record)
        except Exception as exc:
            with self._failures_lock:
                self.contained_failures += 1
            with contextlib.suppress(Exception):
                self._log_error_counter.add(1, {ERROR_TYPE: type(exc).__name__})
            _log.warning("decision log sink %s failed: %s", type(self.decision_log).__name__,
                         type(exc).__name__)


def _version() -> str | None:
    try:
        from importlib.metadata import version

        return version("cel-guardrails")
    except Exception:
        return None
