"""OpenTelemetry spans, metrics and the decision log for guard decisions.

STUB written by the lead to fix the interface; the telemetry engineer replaces the bodies.
The integration calls exactly these names.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from guardrails.engine.decision import Decision


class CallSpan:
    """The span of one guarded tool call."""

    def record(self, decision: Decision, duration_s: float) -> None:
        """Attributes, events, metrics and the decision-log record for a decision."""

    def fail(self, error: BaseException) -> None:
        """The guard itself failed (the call is blocked, fail closed)."""


class GuardTelemetry:
    def __init__(
        self,
        *,
        tracer_provider: Any = None,
        meter_provider: Any = None,
        decision_log: Any = None,
    ) -> None:
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider
        self.decision_log = decision_log

    @contextmanager
    def call_span(self, *, tool: str, call_id: str | None) -> Iterator[CallSpan]:
        """Open the guard span as the current span; the tool's execute_tool span nests inside."""
        yield CallSpan()

    def record_halt(self, decision: Decision) -> None:
        """Called by the run boundary when a run is halted: marks the current (agent) span."""
