"""Policy documents as written: records with file positions, and the strict loader."""

from __future__ import annotations

from guardrails.model.documents import (
    API_VERSION,
    Counter,
    DefaultAction,
    Documents,
    Effect,
    FailurePolicy,
    HistoryEntry,
    Match,
    Metadata,
    Mode,
    PolicyBinding,
    PolicyTest,
    Redaction,
    Repair,
    Rule,
    RuleAction,
    SecretInjection,
    Secrets,
    TestCall,
    TestCase,
    TestExpect,
    ToolPolicy,
    Variable,
)
from guardrails.model.errors import PolicyError, Problem
from guardrails.model.loader import load_documents
from guardrails.model.schema import json_schema
from guardrails.model.source import Expression, Position

__all__ = [
    "API_VERSION",
    "Counter",
    "DefaultAction",
    "Documents",
    "Effect",
    "Expression",
    "FailurePolicy",
    "HistoryEntry",
    "Match",
    "Metadata",
    "Mode",
    "PolicyBinding",
    "PolicyError",
    "PolicyTest",
    "Position",
    "Problem",
    "Redaction",
    "Repair",
    "Rule",
    "RuleAction",
    "SecretInjection",
    "Secrets",
    "TestCall",
    "TestCase",
    "TestExpect",
    "ToolPolicy",
    "Variable",
    "json_schema",
    "load_documents",
]
