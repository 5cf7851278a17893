"""Params that override a default and change nothing, or change its kind.

A policy's ``params`` win over the params of the libraries it uses, and a binding's win
over its policy's. An override whose key no expression reads, while a key close to it is
read and keeps its default (``know`` for a library's ``known``, a binding's ``capp`` for
the policy's ``cap``), is a typo that loads and runs with the default: a warning. So is
an override of another kind than its default (a text where the library's functions read
a list: ``known: GB29...`` for ``known: [...]``): it loads, and the functions then test
something else (``"GB29...".mentions(v)`` is a substring test, not a list's).

Which keys are read is worked out from the expressions' text (``params.x``,
``params["x"]``, ``params.?x``); a policy that uses ``params`` otherwise (``params[k]``)
could read any key and is not checked for unread ones.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from guardrails.expr.spelling import closest
from guardrails.model.documents import Library, PolicyBinding, ToolPolicy
from guardrails.model.errors import Problem
from guardrails.model.source import Position

__all__ = ["library_reads", "override_warnings"]

_NAMED = re.compile(r"\bparams\s*(?:\.\s*\??\s*([A-Za-z_]\w*)|\[\s*\??\s*(?:\"([^\"\\]*)\""
                    r"|'([^'\\]*)')\s*\])")
_ANY = re.compile(r"\bparams\b")


def library_reads(libraries: Iterable[Library]) -> frozenset[str] | None:
    """The params keys the functions of these libraries read (of their caller's params:
    any loaded library's function may be called); worked out once for a load."""
    return _read_keys(f.expression.source for lib in libraries for f in lib.functions)


def override_warnings(policy: ToolPolicy, defaults: Sequence[Library],
                      functions_read: frozenset[str] | None,
                      bindings: Sequence[PolicyBinding]) -> list[Problem]:
    """``policy`` as written (its own params only), the libraries whose params it
    overrides in merge order, what every loaded library function reads
    (``library_reads``) and the bindings of the policy."""
    if not policy.params_positions and not any(b.params_positions for b in bindings):
        return []
    owner: dict[str, tuple[Any, str]] = {}  # key -> (default, "library <name>")
    for lib in defaults:
        for key, value in lib.params.items():
            owner[key] = (value, f"library {lib.name}")
    own = _read_keys(e.source for e in policy.expressions())
    read = None if own is None or functions_read is None else own | functions_read
    out: list[Problem] = []
    for key, at in policy.params_positions.items():
        if key not in policy.params:
            continue
        if key in owner:
            default, where = owner[key]
            out.extend(_kind_change(at, key, policy.params[key], default, where))
        else:
            out.extend(_unread(at, key, read, owner, policy.params, f"policy {policy.name}"))
    merged = {**{k: v for k, (v, _) in owner.items()}, **policy.params}
    inherited = {**owner, **{k: (v, f"policy {policy.name}") for k, v in policy.params.items()}}
    for b in bindings:
        for key, at in b.params_positions.items():
            if key not in b.params:
                continue
            if key in merged:
                default, where = inherited[key]
                out.extend(_kind_change(at, key, b.params[key], default, where))
            else:
                out.extend(_unread(at, key, read, inherited, b.params,
                                   f"policy {policy.name}"))
    return out


def _read_keys(texts: Iterable[str]) -> frozenset[str] | None:
    """The params keys these expressions name; None when one uses ``params`` otherwise."""
    keys: set[str] = set()
    for text in texts:
        named = _NAMED.findall(text)
        if len(named) < len(_ANY.findall(text)):
            return None
        keys.update(a or b or c for a, b, c in named)
    return frozenset(keys)


def _unread(at: Position, key: str, read: frozenset[str] | None,
            defaults: Mapping[str, tuple[Any, str]], given: Mapping[str, Any],
            reader: str) -> list[Problem]:
    """A key nothing reads, close to a read key that keeps its default elsewhere (one the
    same document sets too is not what this key misspells)."""
    if read is None or key in read:
        return []
    close = closest(key, sorted(k for k in read if k in defaults and k not in given),
                    cutoff=0.8)
    if close is None:
        return []
    _, where = defaults[close]
    return [Problem(at.file, at.line, at.column,
                    f"spec.params.{key}: no expression of {reader} reads params.{key}; did "
                    f"you mean '{close}'? (params.{close} is read, and keeps the value "
                    f"{where} gives it)")]


def _kind(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "a bool"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a text"
    if isinstance(value, Mapping):
        return "a map"
    if isinstance(value, list | tuple):
        return "a list"
    return None


def _kind_change(at: Position, key: str, value: Any, default: Any,
                 where: str) -> list[Problem]:
    """An override of another kind than its default. Text for a number is the numeric-text
    check's (it knows where the value is compared)."""
    mine, theirs = _kind(value), _kind(default)
    if mine is None or theirs is None or mine == theirs \
            or {mine, theirs} == {"a text", "a number"}:
        return []
    hint = " (a list of one: [...])" if theirs == "a list" and mine != "a map" else ""
    return [Problem(at.file, at.line, at.column,
                    f"spec.params.{key}: {mine}, but {where} gives {theirs} there: the "
                    f"expressions written for {theirs} would test something else, or fail; "
                    f"write {theirs}{hint}")]
