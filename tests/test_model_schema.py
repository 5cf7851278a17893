"""The JSON Schema for editors stays in step with what the loader accepts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from guardrails.model import loader
from guardrails.model.schema import json_schema

DATA = Path(__file__).parent / "data" / "model" / "valid"
DOCUMENT_FILES = [DATA / "payments.yaml", DATA / "nested" / "shell.yml",
                  DATA / "tests" / "payments-test.yaml"]


def _objects(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        if "properties" in node:
            yield node
        for value in node.values():
            yield from _objects(value)
    elif isinstance(node, list):
        for value in node:
            yield from _objects(value)


def _documents() -> list[dict[str, Any]]:
    return [doc for f in DOCUMENT_FILES for doc in yaml.safe_load_all(f.read_text()) if doc]


def test_schema_is_json_draft_2020_12_and_every_object_is_closed_and_described() -> None:
    schema = json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    json.dumps(schema)  # serialisable as is
    objects = list(_objects(schema))
    assert len(objects) >= 15
    for obj in objects:
        assert obj["additionalProperties"] is False
        assert obj.get("description")
        for name, prop in obj["properties"].items():
            assert prop.get("description"), name


def test_schema_field_names_are_the_loader_field_names() -> None:
    defs = json_schema()["$defs"]
    assert tuple(defs["ToolPolicySpec"]["properties"]) == loader._POLICY_FIELDS
    assert tuple(defs["PolicyTestSpec"]["properties"]) == loader._TEST_FIELDS
    assert tuple(defs["Metadata"]["properties"]) == loader._METADATA_FIELDS
    assert tuple(defs["ToolPolicy"]["properties"]) == loader._DOCUMENT_FIELDS
    assert defs["Rule"]["properties"]["action"]["enum"] == [
        "allow", "deny", "halt", "require_approval", "warn"]
    assert defs["ToolPolicySpec"]["properties"]["mode"]["enum"] == ["enforce", "audit"]


def test_schema_validates_fixtures_and_rejects_a_misspelt_field() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(json_schema())
    jsonschema.Draft202012Validator.check_schema(json_schema())
    docs = _documents()
    assert len(docs) == 4
    for doc in docs:
        assert list(validator.iter_errors(doc)) == [], doc["metadata"]
    bad = _documents()[0]
    bad["spec"]["rulez"] = bad["spec"].pop("rules")
    assert list(validator.iter_errors(bad))
    bad = _documents()[0]
    bad["spec"]["mode"] = "strict"
    assert list(validator.iter_errors(bad))
    bad = _documents()[3]
    bad["spec"]["cases"][0]["expect"] = {}
    assert list(validator.iter_errors(bad))
