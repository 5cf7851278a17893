"""Argument values and secrets never reach a span, event, metric attribute or decision record,
not even when a rule message, an error message or an exception quotes them."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from guardrails.engine.decision import (
    REDACTED,
    Action,
    AppliedRepair,
    Decision,
    Effect,
    EvaluationError,
    FiredRule,
)
from guardrails.telemetry import DECISION_LOGGER, GuardTelemetry, decision_record

SECRET = "sk-live-7f3a9c2b1d0e"
IBAN = "GB29NWBK60161331926819"
AMOUNT = 98765.43
WHOLE = 77777777.0  # CEL prints it "77777777"
NOTE = "private-note-qq17"
TAG = "tag-alpha-zz42"
RAW = b"raw-bytes-yy99"
KEY_IN_MAP = "map-key-pp31"
VALUES = [SECRET, IBAN, str(AMOUNT), "77777777", NOTE, TAG, RAW.decode(), KEY_IN_MAP]

ARGS: dict[str, Any] = {
    "api_key": SECRET,
    "recipient": IBAN,
    "amount": AMOUNT,
    "fee": WHOLE,
    "memo": {"note": NOTE, KEY_IN_MAP: 1},
    "tags": [TAG],
    "blob": RAW,
}
QUOTING = " ".join([SECRET, IBAN, str(AMOUNT), "77777777", NOTE, TAG, RAW.decode(), KEY_IN_MAP])


def leaky_decision(effect: Effect) -> Decision:
    """As if the engine had failed to scrub anything: every message quotes every value."""
    action = Action.DENY if effect is Effect.ALLOW else Action(effect.value)
    return Decision(
        id=str(uuid.uuid4()), tool="send_money", effect=effect, arguments=ARGS,
        rules=(FiredRule("payments", "quote-all", action, f"bad call: {QUOTING}", audit=True),
               FiredRule("payments", "warn-all", Action.WARN, f"warn {QUOTING}")),
        repairs=(AppliedRepair("payments", "fix", ("amount",), ("memo",)),),
        errors=(EvaluationError("payments", "rules.quote-all", f"cannot convert {QUOTING}",
                                "fired"),),
        policies=("payments",), revision="rev", secret_arguments=frozenset({"api_key"}),
    )


def exported_text(exporter: InMemorySpanExporter, reader: InMemoryMetricReader,
                  records: list[Mapping[str, Any]], log_text: str) -> str:
    spans = [s.to_json() for s in exporter.get_finished_spans()]
    data = reader.get_metrics_data()
    metrics_json = data.to_json() if data is not None else ""
    return "\n".join([*spans, metrics_json, *(json.dumps(r) for r in records), log_text])


@pytest.mark.parametrize("effect", list(Effect))
def test_no_value_leaks_anywhere(effect: Effect, caplog: pytest.LogCaptureFixture) -> None:
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    mp = MeterProvider(metric_readers=[reader])
    records: list[Mapping[str, Any]] = []

    class Sink:
        def write(self, record: Mapping[str, Any]) -> None:
            records.append(record)

    t = GuardTelemetry(tracer_provider=tp, meter_provider=mp, decision_log=Sink())
    d = leaky_decision(effect)
    with caplog.at_level(logging.DEBUG), tp.get_tracer("test").start_as_current_span("run"):
        with t.call_span(tool="send_money", call_id="call-1") as call:
            call.record(d, 0.001)
        t.record_halt(d)
        with pytest.raises(ValueError), t.call_span(tool="send_money", call_id="call-2") as c2:
            exc = ValueError(f"guard broke on {QUOTING}")
            c2.fail(exc)
            raise exc
        with pytest.raises(ValueError), t.call_span(tool="send_money", call_id="call-3"):
            raise ValueError(f"tool broke on {QUOTING}")
    # the same through the default logging sink
    default_sink = GuardTelemetry(tracer_provider=tp, meter_provider=mp)
    with (caplog.at_level(logging.INFO, logger=DECISION_LOGGER),
          default_sink.call_span(tool="send_money", call_id="call-4") as c4):
        c4.record(d, 0.001)
    assert any(r.name == DECISION_LOGGER for r in caplog.records)

    text = exported_text(exporter, reader, records, caplog.text)
    for value in VALUES:
        assert value not in text, value
    # and the records still say what happened, with the values blanked
    rec = records[0]
    assert rec["rules"][0]["message"].startswith("bad call: [REDACTED]")
    assert rec["errors"][0]["message"].startswith("cannot convert [REDACTED]")
    assert rec["argument_names"] == sorted(ARGS)
    tp.shutdown()
    mp.shutdown()


def test_short_values_are_kept_so_messages_stay_readable() -> None:
    d = Decision(id="x", tool="t", effect=Effect.DENY, arguments={"n": 5, "flag": True, "c": "GB"},
                 rules=(FiredRule("p", "r", Action.DENY, "5 items to GB, True"),))
    assert decision_record(d)["rules"][0]["message"] == "5 items to GB, True"


_text = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="[]"), min_size=4,
                max_size=20)


@settings(max_examples=200, deadline=None)
@given(values=st.lists(_text, min_size=1, max_size=4), prefix=st.text(max_size=5),
       suffix=st.text(max_size=5))
def test_any_quoted_value_is_blanked(values: list[str], prefix: str, suffix: str) -> None:
    args = {f"a{i}": v for i, v in enumerate(values)}
    message = prefix + " ".join(values) + suffix
    d = Decision(id="x", tool="t", effect=Effect.DENY, arguments=args,
                 rules=(FiredRule("p", "r", Action.DENY, message),))
    scrubbed = decision_record(d)["rules"][0]["message"]
    for v in values:
        if v not in REDACTED:
            assert v not in scrubbed
