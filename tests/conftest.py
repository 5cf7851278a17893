"""Test-suite settings shared by every test file."""

from __future__ import annotations

import os

from hypothesis import settings

# CI runs the same examples every time, so a red build is reproducible; locally,
# hypothesis explores new examples on each run.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
