"""A redact replacement is a template: a bad one is a load error, never an evaluate error."""

from __future__ import annotations

from pathlib import Path

import pytest

import guardrails
from tests.engine_support import policy

_SPEC = """
    rules:
      - {{name: r, when: 'true', action: deny, message: 'token tok123'}}
    redact:
      - name: tok
        regex: '{regex}'
        replacement: '{replacement}'
"""


@pytest.mark.parametrize("replacement", [r"[\2]", "x\\", r"\g<nope>"])
def test_bad_replacement_template_is_a_load_error(tmp_path: Path, replacement: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(policy(spec=_SPEC.format(regex=r"tok(\d+)", replacement=replacement)))
    with pytest.raises(guardrails.PolicyError) as info:
        guardrails.load(path)
    (problem,) = info.value.errors
    assert "replacement" in problem.message


@pytest.mark.parametrize(("replacement", "expected"), [
    ("[REDACTED:tok]", "token [REDACTED:tok]"),
    (r"tok-\1", "token tok-123"),
    (r"<\g<0>>", "token <tok123>"),
])
def test_good_replacement_still_applies(tmp_path: Path, replacement: str, expected: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(policy(spec=_SPEC.format(regex=r"tok(\d+)", replacement=replacement)))
    decision = guardrails.load(path).evaluate("t", {})
    assert decision.message == expected
