"""Where a secret could end up after a guarded run, and a check that it is in none of them.

``Observer`` wires a guard to the real OpenTelemetry SDK (the framework's spans go to the
global provider, which this module installs or joins) with in-memory exporters, a list
decision log and a capture of every decision; ``leaks`` lists every place a form of the
secret (raw, JSON-escaped with and without ``ensure_ascii``, ``repr``/``ascii``-escaped)
shows up in the strings of what it is given. Strings are searched one by one, never a
serialization of the whole (escaping twice would hide a raw secret from the search).
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import guardrails
from guardrails.engine.decision import Decision
from guardrails.telemetry import CallSpan, GuardTelemetry


def forms(secret: str) -> set[str]:
    """The spellings of ``secret`` to look for (worked out independently of the scrubber)."""
    out = {secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1],
           repr(secret)[1:-1], ascii(secret)[1:-1]}
    # Inside a longer text, repr() may escape a single quote it left alone here.
    out |= {f.replace("'", "\\'") for f in list(out)}
    return {f for f in out if f}


def strings_in(value: Any, depth: int = 0) -> Iterator[str]:
    """Every string in a JSON-like value (map keys included)."""
    if depth > 64:
        return
    if isinstance(value, str):
        yield value
    elif isinstance(value, bytes):
        yield value.decode("utf-8", "replace")
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from strings_in(k, depth + 1)
            yield from strings_in(v, depth + 1)
    elif isinstance(value, list | tuple | set | frozenset):
        for v in value:
            yield from strings_in(v, depth + 1)
    elif value is not None and not isinstance(value, bool | int | float):
        yield str(value)


def leaks(secret: str, **places: Any) -> list[str]:
    """``place: text`` for every string of every place that holds a form of ``secret``."""
    spellings = forms(secret)
    found: list[str] = []
    for place, value in places.items():
        for s in strings_in(value):
            if any(f in s for f in spellings):
                found.append(f"{place}: {s[:300]!r}")
    return found


def _global_sdk_provider() -> TracerProvider:
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        trace.set_tracer_provider(TracerProvider())
    provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider), "a non-SDK global tracer provider is installed"
    return provider


_EXPORTER: InMemorySpanExporter | None = None


def span_exporter() -> InMemorySpanExporter:
    """One in-memory exporter on the global SDK provider, shared by the tests of a process."""
    global _EXPORTER
    if _EXPORTER is None:
        _EXPORTER = InMemorySpanExporter()
        _global_sdk_provider().add_span_processor(SimpleSpanProcessor(_EXPORTER))
    return _EXPORTER


@dataclass
class ListSink:
    records: list[dict[str, Any]] = field(default_factory=list)

    def write(self, record: Mapping[str, Any]) -> None:
        self.records.append(json.loads(json.dumps(record)))


class _CapturingSpan(CallSpan):
    def record(self, decision: Decision, duration_s: float) -> None:
        self._telemetry.decisions.append(decision)  # type: ignore[attr-defined]
        super().record(decision, duration_s)


class CapturingTelemetry(GuardTelemetry):
    """The real telemetry, also keeping every decision it records."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.decisions: list[Decision] = []

    @contextmanager
    def call_span(self, *, tool: str, call_id: str | None) -> Iterator[CallSpan]:
        with super().call_span(tool=tool, call_id=call_id) as span:
            span.__class__ = _CapturingSpan
            yield span


class Observer:
    """A guard with real telemetry, and everything it (and the framework) emitted."""

    def __init__(self) -> None:
        self.exporter = span_exporter()
        self.exporter.clear()
        self.reader = InMemoryMetricReader()
        self.sink = ListSink()
        self.telemetry = CapturingTelemetry(meter_provider=MeterProvider(
            metric_readers=[self.reader]), decision_log=self.sink)

    def guard(self, policies: guardrails.PolicySet, **kwargs: Any) -> list[Any]:
        from guardrails.agent_framework import GuardFunctionMiddleware, GuardRunMiddleware
        from guardrails.agent_framework._secrets import install_log_filter

        install_log_filter()
        return [GuardRunMiddleware(policies, telemetry=self.telemetry),
                GuardFunctionMiddleware(policies, telemetry=self.telemetry, **kwargs)]

    def spans(self) -> list[Any]:
        out: list[Any] = []
        for s in self.exporter.get_finished_spans():
            out.append({"name": s.name, "attributes": dict(s.attributes or {}),
                        "status": s.status.description,
                        "events": [{"name": e.name, "attributes": dict(e.attributes or {})}
                                   for e in s.events]})
        return out

    def metrics(self) -> Any:
        data = self.reader.get_metrics_data()
        return json.loads(data.to_json()) if data is not None else {}

    def places(self, caplog: Any) -> dict[str, Any]:
        """Every place the guard's and the framework's telemetry, logs and records went."""
        return {
            "spans": self.spans(),
            "metrics": self.metrics(),
            "decision_log": self.sink.records,
            "decisions": [d.to_dict() for d in self.telemetry.decisions],
            "logs": [_log_texts(r) for r in caplog.records],
        }


def _log_texts(record: logging.LogRecord) -> list[str]:
    texts = [record.getMessage()]
    if record.exc_text:
        texts.append(record.exc_text)
    if record.exc_info:
        texts.append(logging.Formatter().formatException(record.exc_info))
    if record.stack_info:
        texts.append(record.stack_info)
    return texts


def response_places(response: Any, session: Any = None, *,
                    model_calls: bool = False) -> dict[str, Any]:
    """The run's response messages (and the session), as dicts.

    The model's own function calls are left out unless ``model_calls``: it wrote them.
    """
    keep = (lambda v: v) if model_calls else _without_model_calls
    out: dict[str, Any] = {}
    if response is not None:
        out["response"] = keep([m.to_dict() for m in response.messages])
        out["user_input_requests"] = [c.to_dict() for c in response.user_input_requests]
    if session is not None:
        out["session"] = keep(session.to_dict())
    return out


def _without_model_calls(value: Any, key: str = "") -> Any:
    """``value`` without the function calls of assistant messages (what the model wrote);
    a function call inside a tool's result is kept."""
    if isinstance(value, Mapping):
        role = value.get("role")
        out = {}
        for k, v in value.items():
            if k == "contents" and role == "assistant" and isinstance(v, list):
                v = [c for c in v if not (isinstance(c, Mapping) and c.get("type") == "function_call")]
            out[k] = _without_model_calls(v, k)
        return out
    if isinstance(value, list):
        return [_without_model_calls(v, key) for v in value]
    return value


@contextmanager
def root_log_output() -> Iterator[io.StringIO]:
    """What a plain handler on the root logger writes (as a host configures it), with
    DEBUG on the root; the process's log record factory is put back afterwards, so a
    host's factory a test installs does not outlive it."""
    root = logging.getLogger()
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    root.addHandler(handler)
    previous = logging.getLogRecordFactory()
    try:
        yield out
    finally:
        root.removeHandler(handler)
        logging.setLogRecordFactory(previous)
