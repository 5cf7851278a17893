"""Helpers for engine tests: write real policy files and load them."""

from __future__ import annotations

import textwrap
from pathlib import Path

import guardrails


def write(tmp_path: Path, text: str, name: str = "policy.yaml") -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def policy(name: str = "p", *, spec: str) -> str:
    """A ToolPolicy document with ``spec`` (YAML text, indented by the caller or not)."""
    body = textwrap.indent(textwrap.dedent(spec).strip(), "  ")
    return (
        "apiVersion: guardrails/v1\nkind: ToolPolicy\n"
        f"metadata:\n  name: {name}\nspec:\n{body}\n"
    )


def load_text(tmp_path: Path, *docs: str) -> guardrails.PolicySet:
    path = tmp_path / "set.yaml"
    path.write_text("---\n".join(docs))
    return guardrails.load(path)
