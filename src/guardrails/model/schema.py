"""JSON Schema (draft 2020-12) of guardrails/v1 documents, generated from the models.

The pydantic models in ``guardrails.model.shape`` are the one description of the
documents; this module only renders them for editors (the YAML language server) and for
``jsonschema``. The loader checks more than a schema can (RE2 syntax, globs, names unique
across files, CEL), so a document the schema accepts can still fail to load, never the
other way round for shape.

The top level dispatches on ``kind`` with ``if``/``then`` rather than ``oneOf``: a
validator then reports the problems of the one kind the document claims to be, not a
dump of why it matches none of the alternatives.
"""

from __future__ import annotations

import json
from typing import Any

from guardrails.model.documents import API_VERSION
from guardrails.model.shape import DOCUMENT_MODELS, KINDS

SCHEMA_ID = "https://cel-guardrails.dev/schemas/guardrails-v1.json"


def _def_name(model_name: str) -> str:
    """``RuleShape`` is ``Rule`` in the schema; the documents keep their kind's name."""
    for suffix in ("Document", "Shape"):
        if model_name.endswith(suffix) and model_name != suffix:
            return model_name[: -len(suffix)]
    return model_name


def _clean(node: Any) -> Any:
    """Drop pydantic's generated ``title`` keys and rename ``$ref`` targets."""
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "title" and isinstance(value, str):
                continue
            if key == "$ref" and isinstance(value, str):
                head, _, name = value.rpartition("/")
                out[key] = f"{head}/{_def_name(name)}"
                continue
            out[key] = _clean(value)
        return out
    if isinstance(node, list):
        return [_clean(v) for v in node]
    return node


def json_schema() -> dict[str, Any]:
    """The schema of one YAML document, told apart by ``kind``."""
    defs: dict[str, Any] = {}
    for model in DOCUMENT_MODELS.values():
        schema = model.model_json_schema(by_alias=True, ref_template="#/$defs/{model}")
        for name, sub in schema.pop("$defs", {}).items():
            defs[_def_name(name)] = _clean(sub)
        defs[_def_name(model.__name__)] = _clean(schema)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "cel-guardrails guardrails/v1 document",
        "description": "One YAML document of a policy set: "
                       + " or ".join(f"a {k}" for k in KINDS) + ", told apart by kind.",
        "type": "object",
        "required": ["apiVersion", "kind"],
        "properties": {
            "apiVersion": {"const": API_VERSION, "description": f"Always {API_VERSION}."},
            "kind": {"enum": list(KINDS), "description": "The document kind."},
        },
        "allOf": [
            {"if": {"properties": {"kind": {"const": kind}}, "required": ["kind"]},
             "then": {"$ref": f"#/$defs/{kind}"}}
            for kind in KINDS
        ],
        "$defs": json.loads(json.dumps(defs, sort_keys=False)),
    }
