"""`guardrails schema`: the JSON Schema editors use must accept real policies and catch typos."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).parent.parent
DOCUMENT_FILES = sorted(
    [*(ROOT / "policies").rglob("*.yaml"), *(Path(__file__).parent / "data" / "cli" / "good")
     .glob("*.yaml")]
)


def guardrails_script() -> str:
    found = shutil.which("guardrails", path=str(Path(sys.executable).parent))
    found = found or shutil.which("guardrails")
    if found is None:
        pytest.fail("the guardrails console script is not installed")
    return found


@cache
def schema() -> dict[str, Any]:
    proc = subprocess.run([guardrails_script(), "schema"], capture_output=True, text=True,
                          timeout=120, check=True)
    loaded: dict[str, Any] = json.loads(proc.stdout)
    return loaded


def validator() -> Any:
    jsonschema = pytest.importorskip("jsonschema")
    cls = jsonschema.validators.validator_for(schema())
    cls.check_schema(schema())
    return cls(schema())


def documents(path: Path) -> list[Any]:
    """guardrails/v1 documents only: params files sit beside policies too."""
    return [d for d in yaml.safe_load_all(path.read_text("utf-8"))
            if isinstance(d, dict) and "apiVersion" in d]


def test_schema_is_json_and_names_both_kinds() -> None:
    text = json.dumps(schema())
    assert "ToolPolicy" in text and "PolicyTest" in text
    assert schema().get("$schema", "").startswith("https://json-schema.org/")


@pytest.mark.parametrize("path", DOCUMENT_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_schema_accepts_every_shipped_document(path: Path) -> None:
    v = validator()
    for doc in documents(path):
        errors = [e.message for e in v.iter_errors(doc)]
        assert errors == [], f"{path}: {errors}"


def test_schema_rejects_a_misspelled_field() -> None:
    v = validator()
    [doc] = documents(Path(__file__).parent / "data" / "cli" / "good" / "payments.yaml")
    doc["spec"]["rulez"] = doc["spec"].pop("rules")
    assert not v.is_valid(doc)
    doc["spec"]["rules"] = doc["spec"].pop("rulez")
    doc["spec"]["rules"][0]["acton"] = doc["spec"]["rules"][0].pop("action")
    assert not v.is_valid(doc)
    doc["spec"]["rules"][0]["action"] = "explode"
    del doc["spec"]["rules"][0]["acton"]
    assert not v.is_valid(doc)
