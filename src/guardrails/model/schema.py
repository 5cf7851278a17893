"""JSON Schema (draft 2020-12) of guardrails/v1 documents, for editors.

The loader is the authority (it also checks what a schema cannot: RE2 syntax, globs,
unique names across files); this schema mirrors its field names, types and enums so that
the YAML language server can complete and flag mistakes while typing. Tests keep the two
in sync.
"""

from __future__ import annotations

from typing import Any

from guardrails.model.documents import (
    API_VERSION,
    DEFAULT_ACTIONS,
    DEFAULT_REPLACEMENT,
    EFFECTS,
    FAILURE_POLICIES,
    MODES,
    RULE_ACTIONS,
)

SCHEMA_ID = "https://cel-guardrails.dev/schemas/guardrails-v1.json"

_DNS_LABEL = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
_ELEMENT_NAME = "^[a-z0-9]([-_a-z0-9]{0,61}[a-z0-9])?$"
_IDENTIFIER = "^[A-Za-z_][A-Za-z0-9_]*$"


def _obj(description: str, properties: dict[str, Any], required: tuple[str, ...] = (),
         **extra: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "description": description,
                              "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    schema.update(extra)
    return schema


def _str(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **extra}


def _list(description: str, items: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "array", "description": description, "items": items, **extra}


def _ref(name: str, description: str) -> dict[str, Any]:
    return {"$ref": f"#/$defs/{name}", "description": description}


def _expr(description: str) -> dict[str, Any]:
    return _ref("Expression", description)


def _document(kind: str, description: str, spec: str) -> dict[str, Any]:
    return _obj(description, {
        "apiVersion": {"const": API_VERSION, "description": "Always guardrails/v1."},
        "kind": {"const": kind, "description": "The document kind."},
        "metadata": _ref("Metadata", "Name and description of the document."),
        "spec": _ref(spec, "The document's content."),
    }, ("apiVersion", "kind", "metadata", "spec"))


def json_schema() -> dict[str, Any]:
    """The schema of one YAML document: a ToolPolicy or a PolicyTest, told apart by kind."""
    defs: dict[str, Any] = {
        "Expression": {
            "type": ["string", "boolean", "number"],
            "minLength": 1,
            "description": "A CEL expression (cel-spec) with the guardrails library. Names: "
                           "tool, args, principal, history, request, params, variables, now.",
        },
        "Metadata": _obj("Identifies the document.", {
            "name": _str("Lowercase DNS label, unique among documents of this kind in a "
                         "policy set.", pattern=_DNS_LABEL, maxLength=63),
            "description": _str("Free text for people."),
            "labels": {"type": "object", "description": "String labels (owner, team, ...).",
                       "additionalProperties": {"type": "string"}},
        }, ("name",)),
        "Match": _obj("Which tool calls the policy applies to.", {
            "tools": _list("Shell-style globs on the tool name (case-sensitive); omit to "
                           "match every tool.", _str("A glob such as send_* or "
                                                     "update_[ab]*.", minLength=1), minItems=1),
            "when": _expr("Optional CEL bool: the policy applies only when true."),
        }),
        "Variable": _obj("A named value, computed lazily in order.", {
            "name": _str("Identifier, used as variables.<name>.", pattern=_IDENTIFIER),
            "expression": _expr("CEL expression computing the value."),
        }, ("name", "expression")),
        "Repair": _obj("Fixes the raw arguments before rules run.", {
            "name": _str("Unique within the policy.", pattern=_ELEMENT_NAME),
            "when": _expr("Optional CEL bool: apply only when true."),
            "set": {"type": "object", "description": "Argument name to CEL expression "
                                                     "computing its new value.",
                    "additionalProperties": {"$ref": "#/$defs/Expression"}},
            "unset": _list("Argument names to remove.", {"type": "string"}),
        }, ("name",)),
        "Secrets": _obj("Arguments holding secrets, and secrets injected after the rules.", {
            "arguments": _list("Argument names whose values are secret: never shown to the "
                               "model, logs, spans or decision records.", {"type": "string"}),
            "inject": {"type": "object", "description": "Argument name to where its value "
                                                        "comes from; set after the rules pass.",
                       "additionalProperties": _obj("The source of an injected value.", {
                           "env": _str("Environment variable holding the value.",
                                       pattern=_IDENTIFIER),
                       }, ("env",))},
        }),
        "Rule": _obj("A condition and what happens when it holds.", {
            "name": _str("Unique within the policy; reported as policy/rule.",
                         pattern=_ELEMENT_NAME),
            "when": _expr("CEL bool: the rule fires when true."),
            "action": {"enum": list(RULE_ACTIONS), "description":
                       "allow | deny | halt (abort the run) | require_approval | warn "
                       "(record only)."},
            "message": _str("Text returned to the model when the rule blocks the call."),
            "messageExpression": _expr("CEL string; replaces message when it evaluates."),
        }, ("name", "when", "action")),
        "Redaction": _obj("A pattern scrubbed from tool results, error text and records.", {
            "name": _str("Unique within the policy.", pattern=_ELEMENT_NAME),
            "regex": _str("RE2 regular expression; must not match the empty string.",
                          minLength=1),
            "replacement": _str(f"Replacement text (default {DEFAULT_REPLACEMENT})."),
        }, ("name", "regex")),
        "ToolPolicySpec": _obj("What the policy checks and does.", {
            "mode": {"enum": list(MODES), "default": "enforce",
                     "description": "enforce, or audit: evaluate and record, change nothing."},
            "failurePolicy": {"enum": list(FAILURE_POLICIES), "default": "Fail",
                              "description": "On an evaluation error: Fail (the rule fires) "
                                             "or Ignore (it is skipped)."},
            "defaultAction": {"enum": list(DEFAULT_ACTIONS), "default": "allow",
                              "description": "Result when no rule fires."},
            "match": _ref("Match", "Which calls the policy applies to."),
            "params": {"type": "object", "description": "Static data visible as params; "
                                                        "overrides paramsFile per key."},
            "paramsFile": _str("YAML or JSON file holding a mapping of params, relative "
                               "to this file.", minLength=1),
            "variables": _list("Named values.", {"$ref": "#/$defs/Variable"}),
            "repairs": _list("Argument fixes, applied in order.", {"$ref": "#/$defs/Repair"}),
            "secrets": _ref("Secrets", "Secret arguments and injected secrets."),
            "rules": _list("Rules; every one that fires is reported.",
                           {"$ref": "#/$defs/Rule"}),
            "redact": _list("Redaction patterns.", {"$ref": "#/$defs/Redaction"}),
            "results": {"enum": ["trusted", "untrusted"],
                        "description": "Whether the matched tools' results are trusted "
                                       "content (unlabelled tools: untrusted)."},
        }),
        "HistoryEntry": _obj("An earlier call in the session.", {
            "tool": _str("Tool name."),
            "args": {"type": "object", "description": "Its arguments."},
            "effect": {"enum": [*EFFECTS, "rejected"], "default": "allow",
                       "description": "Its effect (rejected: a human rejected the approval)."},
            "result": _str("The tool's result as the model got it (scrubbed)."),
            "trusted": {"type": "boolean", "default": False,
                        "description": "Whether the tool's results are trusted content."},
            "at": _str("When the call was made, RFC 3339.", format="date-time"),
        }, ("tool",)),
        "TestCall": _obj("The tool call to evaluate.", {
            "tool": _str("Tool name.", minLength=1),
            "args": {"type": "object", "description": "Raw arguments."},
            "principal": {"type": "object", "description": "The principal map."},
            "history": _list("Earlier calls, oldest first.", {"$ref": "#/$defs/HistoryEntry"}),
            "request": _str("Text of the user messages that started the run."),
            "description": _str("Tool description."),
            "now": _str("The evaluation time, RFC 3339.", format="date-time"),
        }, ("tool",)),
        "TestExpect": _obj("What the decision must show: its effect, and optionally more.", {
            "effect": {"enum": list(EFFECTS), "description": "The decision's effect."},
            "arguments": {"type": "object", "description": "These keys must equal the "
                                                           "decision's (repaired) arguments."},
            "rules": _list("Exactly these policy/rule fired (any order).",
                           {"type": "string", "pattern": "^[^/\\s]+/[^/\\s]+$"}),
            "message": _str("A substring of the decision's message."),
            "errors": {"type": "integer", "minimum": 0,
                       "description": "The number of evaluation errors recorded."},
        }, ("effect",)),
        "TestCase": _obj("One case.", {
            "name": _str("Unique within the test.", minLength=1),
            "call": _ref("TestCall", "The call."),
            "expect": _ref("TestExpect", "The expected decision."),
        }, ("name", "call", "expect")),
        "PolicyTestSpec": _obj("Cases run against policies.", {
            "policies": _list("Policy files or directories, relative to this file; omit to "
                              "use the policies loaded with this test.", {"type": "string"}),
            "cases": _list("Test cases.", {"$ref": "#/$defs/TestCase"}, minItems=1),
        }, ("cases",)),
    }
    defs["ToolPolicy"] = _document("ToolPolicy", "Guardrail rules for tool calls.",
                                   "ToolPolicySpec")
    defs["PolicyTest"] = _document("PolicyTest", "Tests run by `guardrails test`.",
                                   "PolicyTestSpec")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "cel-guardrails guardrails/v1 document",
        "description": "One YAML document of a policy set: a ToolPolicy or a PolicyTest.",
        "oneOf": [{"$ref": "#/$defs/ToolPolicy"}, {"$ref": "#/$defs/PolicyTest"}],
        "$defs": defs,
    }
