"""The JSON Schema for editors stays in step with what the loader accepts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from guardrails.model import shape
from guardrails.model.loader import field_names
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
    # The top level only dispatches on kind (if/then); every document object is closed.
    objects = list(_objects(schema["$defs"]))
    assert len(objects) >= 15
    for obj in objects:
        assert obj["additionalProperties"] is False
        assert obj.get("description")
        for name, prop in obj["properties"].items():
            assert prop.get("description"), name


def test_schema_field_names_are_the_model_field_names() -> None:
    defs = json_schema()["$defs"]
    assert tuple(defs["ToolPolicySpec"]["properties"]) == (
        "mode", "failurePolicy", "defaultAction", "match", "params", "paramsFile",
        "variables", "repairs", "secrets", "rules", "redact", "results", "counters", "uses")
    assert tuple(defs["PolicyTestSpec"]["properties"]) == field_names(shape.PolicyTestSpec)
    assert tuple(defs["PolicyMetadata"]["properties"]) == ("name", "description", "labels")
    assert tuple(defs["ToolPolicy"]["properties"]) == ("apiVersion", "kind", "metadata",
                                                       "spec")
    for model in (shape.RuleShape, shape.RepairShape, shape.TestCallShape):
        assert tuple(defs[model.__name__.removesuffix("Shape")]["properties"]) == \
            field_names(model)
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


def test_schema_dispatches_on_kind_so_errors_are_about_the_claimed_kind() -> None:
    """if/then per kind: a misspelt rule field is reported at its own path, once, not as
    "matches none of oneOf"."""
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(json_schema())
    bad = _documents()[0]
    bad["spec"]["rules"][0]["acton"] = "deny"
    errors = list(validator.iter_errors(bad))
    leaves = [e for err in errors for e in [err, *(err.context or [])]]
    assert not any(e.validator == "oneOf" for e in leaves)
    paths = [list(e.absolute_path) for e in validator.iter_errors(bad)]
    assert ["spec", "rules", 0] in paths
    unknown = validator.iter_errors({"apiVersion": "guardrails/v1", "kind": "ToolPolcy"})
    assert [list(e.absolute_path) for e in unknown] == [["kind"]]
