"""``guardrails demo``: the printed decisions of the prompt-injection scenario."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from guardrails import demo

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def transcript() -> str:
    import asyncio

    out = io.StringIO()
    assert asyncio.run(demo.run_demo(out)) == 0
    return out.getvalue()


def _step(transcript: str, n: int) -> str:
    """The block of lines printed for the model's n-th tool call."""
    match = re.search(rf"^\[{n}\] .*?(?=^\[{n + 1}\] |^=====)", transcript, re.M | re.S)
    assert match is not None, transcript
    return match.group(0)


def test_decisions_in_order(transcript: str) -> None:
    decisions = re.findall(r"guard decision(?: on the approved replay)?: (\w+)", transcript)
    assert decisions == ["ALLOW", "REQUIRE_APPROVAL", "REQUIRE_APPROVAL", "ALLOW",
                         "REQUIRE_APPROVAL", "DENY", "HALT"]


def test_injected_inbox_is_read_and_allowed(transcript: str) -> None:
    step = _step(transcript, 1)
    assert "model calls read_inbox()" in step
    assert "guard decision: ALLOW" in step
    assert "records@exfil-archive.example" in step  # the injected instruction reached the model


def test_amount_text_is_repaired_and_needs_approval(transcript: str) -> None:
    step = _step(transcript, 2)
    assert 'amount="1,500.00"' in step
    assert "guard repairs: payments/amount-from-text (amount)" in step
    assert "payments/large-amount -> require_approval" in step
    assert "approval requested: send_money(recipient='GB82WEST12345698765432', amount=1500.0)" in step
    assert "Dana approves." in step
    assert "guard decision on the approved replay" in step
    # The tool ran only after the approval, with the repaired arguments.
    assert step.index("Dana approves.") < step.index("tool runs: send_money")
    assert "tool runs: send_money(recipient='GB82WEST12345698765432', amount=1500.0)" in step


def test_confirmation_to_the_user_is_allowed(transcript: str) -> None:
    step = _step(transcript, 3)
    assert "guard decision: ALLOW" in step
    assert "tool runs: send_email(to='dana@example.com'" in step


def test_injected_payment_is_flagged_and_rejected(transcript: str) -> None:
    """The payee came from the e-mail (an untrusted tool), not from Dana: provenance sends
    it to her with the reason, and she rejects it."""
    step = _step(transcript, 4)
    assert "guard decision: REQUIRE_APPROVAL" in step
    assert "payments/payee-from-untrusted-content -> require_approval" in step
    assert "appears in content the agent read (read_inbox): possible prompt injection" in step
    assert "Dana rejects it." in step
    assert "tool runs" not in step


def test_mail_to_outside_address_is_denied(transcript: str) -> None:
    step = _step(transcript, 5)
    assert "guard decision: DENY" in step
    assert "email/external-not-from-user -> deny" in step
    assert "tool runs" not in step


def test_token_leak_halts_the_run(transcript: str) -> None:
    step = _step(transcript, 6)
    assert "guard decision: HALT" in step
    assert "exfiltration/credential-in-arguments -> halt" in step
    assert "tool runs" not in step
    assert "outcome: run HALTED at fetch_url by exfiltration/credential-in-arguments" in transcript
    assert ("blocked:  send_money (rejected by Dana); send_email (deny); fetch_url (halt)"
            in transcript)


def test_only_the_honest_calls_ran(transcript: str) -> None:
    executed = re.findall(r"^    tool runs: (\w+)", transcript, re.M)
    assert executed == ["read_inbox", "send_money", "send_email"]
    assert "FR76300060000112" not in " ".join(re.findall(r"tool runs: .*", transcript))


def test_the_token_is_never_printed(transcript: str) -> None:
    assert demo.DEPLOY_TOKEN not in transcript
    assert "[REDACTED:github-token]" in transcript


def test_demo_policies_are_the_library_policies() -> None:
    """The packaged copies must not drift from policies/ (the demo shows the real library)."""
    packaged = Path(demo.__file__).parent / "demo_policies"
    files = sorted(p.name for p in packaged.glob("*.yaml"))
    assert files == ["common.yaml", "email.yaml", "exfiltration.yaml", "payments.yaml",
                     "web.yaml"]
    for name in files:
        assert (packaged / name).read_bytes() == (ROOT / "policies" / name).read_bytes(), name


def test_cli_runs_the_demo() -> None:
    exe = shutil.which("guardrails", path=str(Path(sys.executable).parent))
    assert exe is not None
    proc = subprocess.run([exe, "demo"], capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert "outcome: run HALTED at fetch_url" in proc.stdout
    assert proc.stderr == ""
