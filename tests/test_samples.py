"""Every sample runs offline as a subprocess; its output shows what it claims to show."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def run_sample(name: str, **env: str) -> str:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    environment.update(env)
    proc = subprocess.run([sys.executable, str(SAMPLES / name)], capture_output=True,
                          text=True, timeout=120, env=environment, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout


def sections(out: str) -> list[str]:
    """The numbered parts of a sample's output ("1. ...", "2. ..."), in order."""
    return re.split(r"^\d\. ", out, flags=re.M)[1:]


def test_quickstart() -> None:
    out = run_sample("quickstart.py")
    assert "loaded 7 policies" in out
    assert "effect=allow arguments={'recipient': 'GB82WEST12345698765432', 'amount': 120.0}" in out
    assert "repairs=['amount-from-text', 'recipient-normalised']" in out
    assert "effect=deny rules=['payments/unknown-payee']" in out
    assert "tool ran: send_money('GB82WEST12345698765432', 120.0)" in out
    assert out.count("tool ran:") == 1  # the unknown payee was never paid
    assert "model was told: Error: the call to send_money was denied by policy." in out


def test_approval_flow() -> None:
    out = run_sample("approval_flow.py")
    approved, rejected, no_session = sections(out)
    assert "approval requested: send_money{'recipient': 'GB82WEST12345698765432', 'amount': 2500.0}" in approved
    assert "reason: Payments of 1000 or more need approval." in approved
    assert "payments made: [2500.0]" in approved
    assert approved.index("approver approves") < approved.index("tool ran:")
    assert "payments made: []" in rejected and "tool ran:" not in rejected
    assert "approval requests: 0" in no_session
    assert "approval is unavailable" in no_session and "tool ran:" not in no_session


def test_shadow_rollout() -> None:
    out = run_sample("shadow_rollout.py")
    audit, enforced = sections(out)
    assert ("decision log: tool=send_money effect=allow audit=True "
            "rules=['payments/unknown-payee=deny']") in audit
    assert "tool ran: send_money('FR7630006000011234567890189', 300.0)" in audit
    assert "effect=deny audit=False" in enforced
    assert "tool ran:" not in enforced


def test_telemetry_console() -> None:
    out = run_sample("telemetry_console.py")
    lines = out.splitlines()
    guard_spans = [i for i, line in enumerate(lines) if line.startswith("span 'guardrails.guard")]
    assert len(guard_spans) == 2
    allow_span = lines[guard_spans[0]]
    guard_id = allow_span.split(" id=")[1].split()[0]
    tool_span = next(line for line in lines if line.startswith("span 'execute_tool send_money'"))
    assert tool_span.endswith(f"parent={guard_id}")  # execute_tool nests in the guard span
    assert "guardrails.decision.effect='allow'" in lines[guard_spans[0] + 1]
    assert "guardrails.decision.effect='deny'" in lines[guard_spans[1] + 1]
    assert "guardrails.rules=('payments/unknown-payee',)" in lines[guard_spans[1] + 1]
    assert "FR7630006000011234567890189" not in out  # no argument values in telemetry
    assert "metric guardrails.decisions" in out and "'deny'" in out


def test_real_model_skips_without_a_key() -> None:
    out = run_sample("real_model.py")
    assert out.startswith("skipping: OPENAI_API_KEY is not set")


@pytest.mark.skipif(
    __import__("importlib.util").util.find_spec("agent_framework_openai") is not None,
    reason="agent-framework-openai is installed: the sample would call the API")
def test_real_model_skips_without_the_client_package() -> None:
    out = run_sample("real_model.py", OPENAI_API_KEY="not-a-real-key")
    assert out.startswith("skipping: agent-framework-openai is not installed")


def test_fleet_rollout() -> None:
    out = run_sample("fleet_rollout.py")
    audit, tampered, enforce, limit = sections(out)
    assert "rules=['payouts@acme/over-cap (audit)']" in audit and "tool ran" in audit
    assert "status ok=False" in tampered and "bundle rejected" in tampered
    assert "tool ran" in tampered  # the good (audit) set stayed in use
    assert "effect=deny" in enforce and "tool ran" not in enforce
    assert limit.count("tool ran") == 1 and limit.count("payouts@acme/daily-limit") == 3
