"""samples/effects.py runs offline and shows every effect."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SAMPLE = Path(__file__).parent.parent / "samples" / "effects.py"


def test_effects_sample_runs_offline() -> None:
    done = subprocess.run([sys.executable, str(SAMPLE)], capture_output=True, text=True,
                          check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "allow:    sent 12.50 to UK12"
    assert lines[1].startswith("deny:     Error: the call to send_money was denied by policy.")
    assert lines[2].startswith("approval: Payments above 1000 need a human approval.")
    assert "1500.0" in lines[2]
    assert lines[3] == "approved: sent 1500.00 to UK12"
    assert lines[4].startswith("halt:     Amount is absurd")
