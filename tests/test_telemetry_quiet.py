"""Default telemetry with no SDK records nothing, and asks for nothing on every call: the
guard looks for an installed global tracer provider in the OpenTelemetry API's own global
(``telemetry._installed_tracer_provider``) rather than calling ``get_tracer_provider()``,
whose environment lookup costs more than the rest of a quiet call's telemetry. Pinned
here: that global is what the API reports, and an SDK installed after ``guard()`` (in code
or named in the environment) is recorded from the next call on, spans and metrics."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from opentelemetry import trace

from guardrails.telemetry import _UNREAD, GuardTelemetry, _installed_tracer_provider

ROOT = Path(__file__).resolve().parent.parent


def test_the_installed_provider_is_the_one_the_api_reports() -> None:
    installed = _installed_tracer_provider()
    assert installed is not _UNREAD  # this OpenTelemetry keeps it where the guard reads it
    if installed is None:
        assert type(trace.get_tracer_provider()) is trace.ProxyTracerProvider
    else:  # (another test of this process installed one)
        assert trace.get_tracer_provider() is installed


def _late_sdk(**env: str) -> dict[str, object]:
    """tests/telemetry_late_sdk.py's report, run with ``env`` (and no other provider named)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_PYTHON_")}
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "telemetry_late_sdk.py"),
                           str(ROOT)], capture_output=True, text=True, timeout=120,
                          check=True, env={**environ, **env})
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_an_sdk_installed_after_the_guard_is_recorded_from_the_next_call() -> None:
    out = _late_sdk()
    assert out["installed_before"] is False and out["can_record_before"] is False
    assert out["spans_before"] == 0
    assert out["installed_after"] is True
    assert out["guard_spans"] == ["guardrails.guard send_money"]
    assert out["decisions_counted"] == 1  # the meter's proxy instruments became the SDK's


def test_a_provider_named_in_the_environment_is_loaded_and_recorded() -> None:
    out = _late_sdk(OTEL_PYTHON_TRACER_PROVIDER="sdk_tracer_provider")
    assert out["from_env"] is True and out["installed_before"] is False
    assert out["can_record_before"] is True  # asking loads it
    assert out["installed_after"] is True
    assert out["guard_spans"] == ["guardrails.guard send_money"]


def test_a_quiet_telemetry_records_no_span_and_asks_nothing_per_call() -> None:
    telemetry = GuardTelemetry(tracer_provider=trace.NoOpTracerProvider())
    assert not telemetry._can_record()
    with telemetry.call_span(tool="t", call_id="c") as span:
        assert span.span is trace.INVALID_SPAN
