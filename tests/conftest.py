"""Test-suite settings shared by every test file."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

# CI runs the same examples every time, so a red build is reproducible; locally,
# hypothesis explores new examples on each run.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture(autouse=True, scope="module")
def _short_path_shapes_per_module() -> Iterator[None]:
    """Each test file's own short-path shapes (``evaluate._SHORT_FACTORIES``, at most
    ``_SHORT_FACTORIES_MAX`` a process): dropped after the file, so the shapes one file's
    generated policies compiled do not leave a later file's plans without theirs."""
    from guardrails.engine import evaluate

    shapes = dict(evaluate._SHORT_FACTORIES)
    yield
    evaluate._SHORT_FACTORIES.clear()
    evaluate._SHORT_FACTORIES.update(shapes)
