"""Arguments of a tool declared by a JSON schema, as its server will hold them.

An MCP tool (and any ``FunctionTool`` given a JSON schema) gets no pydantic validation on
the client: the framework checks top-level types only and sends the arguments as they are.
The server then validates them its own way, which for MCP servers is pydantic's lax mode:
it fills the defaults its schema declares (nested ones too) and converts values (``"yes"``
to ``True`` for an optional flag, ``"5"`` to ``5`` in a nested model, a string holding JSON
to the model it spells). Rules judging the arguments as sent would pass values the server
then runs otherwise.

So the guard sends what the rules judge, made explicit: ``with_defaults`` fills every
default the schema declares for a value left out (top level, nested objects, items,
through local ``$ref``), and ``check`` refuses arguments that are not already of the
declared JSON types (strict: no string for a number or a flag, no JSON text for an object),
so that nothing is left for the server to convert. What the server may still do on its
own side (defaults it does not declare, a ``default_factory``, its own validators) is not
the client's to see: docs/security-model.md, promise 2.

``jsonschema`` comes with the ``mcp`` package, which every MCP tool needs; it is imported
when a schema is first checked.

Cost (promise 8; red team 23): the model chooses the arguments, and a schema's keywords
cost per value and per alternative (a recursive union both of whose models accept a value
tried both ways at every level: exponential; a recursive model checked again at every
level: quadratic). So every keyword applied while filling and checking one call's
arguments is counted against ``SCHEMA_STEPS``, and a call that needs more is refused.
Two keywords cost more than one step in ``jsonschema``: ``pattern`` (and the patterns of
``patternProperties``), which Python's backtracking ``re`` can take exponential time over,
is matched by RE2 instead (linear, and the regex syntax of pydantic's Rust engine, which
MCP servers validate with); ``uniqueItems``, quadratic when the items do not sort, is
charged for its comparisons.
"""

from __future__ import annotations

import contextvars
import copy
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import re2

from guardrails.expr.lib_common import RE2_OPTIONS

__all__ = ["SCHEMA_STEPS", "SchemaMismatch", "as_sent", "check", "with_defaults"]

_REF_HOPS = 32
"""``$ref`` links followed from one schema to the schema it names, at most."""

_MAX_ERRORS = 5
"""Mismatches named in one refusal."""

SCHEMA_STEPS = 4_000
"""Schema keywords applied to one call's arguments (filling its defaults and checking its
types together), at most: a few microseconds each in ``jsonschema``; the costliest inputs
of tests/test_redteam23_schema.py spend them in at most 21 ms of CPU, well inside
promise 8's 50 ms for the whole call. A model of a few fields costs about ten, so some four hundred
such values (a list of payments, a tree of conditions) fit."""

_PAIRS_PER_STEP = 32
"""``uniqueItems`` comparisons of items that do not sort charged as one step."""



class SchemaMismatch(ValueError):
    """The arguments are not of the types the schema declares: the server would convert
    them (or refuse them), so the call does not run. Its text names the places and the
    schema keywords only, never a value (a value may be a secret)."""


class _OverBudget(SchemaMismatch):
    """The call's ``SCHEMA_STEPS`` are spent."""


class _Steps:
    """What is left of one call's ``SCHEMA_STEPS``."""

    __slots__ = ("left",)

    def __init__(self) -> None:
        self.left = SCHEMA_STEPS

    def spend(self, steps: int = 1) -> None:
        self.left -= steps
        if self.left < 0:
            raise _OverBudget(
                f"the arguments take more than {SCHEMA_STEPS} steps to check against its "
                "schema (too large, or nested too deeply, for it)")


_STEPS: contextvars.ContextVar[_Steps | None] = contextvars.ContextVar(
    "guardrails_schema_steps", default=None)
"""The budget of the call being filled and checked (``as_sent``); None outside one."""


def _spend(steps: int = 1) -> None:
    budget = _STEPS.get()
    if budget is not None:
        budget.spend(steps)


def as_sent(arguments: Mapping[str, Any], schema: Mapping[str, Any],
            tool: str) -> dict[str, Any]:
    """``arguments`` with their defaults made explicit (``with_defaults``) and checked
    strictly (``check``), within one budget of ``SCHEMA_STEPS``."""
    token = _STEPS.set(_Steps())
    try:
        filled = with_defaults(arguments, schema)
        check(filled, schema, tool)
        return filled
    except _OverBudget as exc:
        raise SchemaMismatch(f"Invalid arguments for '{tool}': {exc}.") from None
    except RecursionError:
        raise SchemaMismatch(f"Invalid arguments for '{tool}': nested too deeply to check "
                             "against its schema") from None
    finally:
        _STEPS.reset(token)


def with_defaults(arguments: Mapping[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    """``arguments`` with every default ``schema`` declares filled in where a value is
    missing, at the top level and inside nested objects and arrays (a copy; defaults are
    copied too). A union (``anyOf``, ``oneOf``) fills from the one alternative the value
    is valid for; a value more than one alternative accepts, whose defaults would differ,
    raises ``SchemaMismatch`` (the server's choice cannot be known)."""
    filled = _filled(dict(arguments), schema, schema)
    if not isinstance(filled, dict):  # pragma: no cover - a dict stays a dict
        raise SchemaMismatch("the arguments are not an object")
    return filled


def check(arguments: Mapping[str, Any], schema: Mapping[str, Any], tool: str) -> None:
    """Raise ``SchemaMismatch`` unless ``arguments`` are valid for ``schema`` as JSON,
    strictly typed: what the server receives is then already what it holds."""
    validator = _validator(schema)
    errors = []
    for error in validator.iter_errors(dict(arguments)):
        where = "/".join(str(p) for p in error.absolute_path) or "(arguments)"
        errors.append(f"{where}: fails {error.validator!r}")
        if len(errors) >= _MAX_ERRORS:
            break
    if errors:
        raise SchemaMismatch(
            f"Invalid arguments for '{tool}': not of the types its schema declares "
            f"({'; '.join(errors)}).")


_SCHEMAS: dict[int, tuple[Mapping[str, Any], Any]] = {}
"""Per schema object (by identity, kept alive with it): its validator. A tool's schema is
one object for the tool's life; bounded all the same."""


def _validator(schema: Mapping[str, Any]) -> Any:
    held = _SCHEMAS.get(id(schema))
    if held is not None and held[0] is schema:
        return held[1]
    import jsonschema  # type: ignore[import-untyped]  # comes with mcp, which its tools need

    plain = dict(schema)
    base = jsonschema.validators.validator_for(plain, default=jsonschema.Draft202012Validator)
    base.check_schema(plain)
    keywords = {name: _counted(check) for name, check in base.VALIDATORS.items()}
    if "pattern" in keywords:
        keywords["pattern"] = _counted(_pattern)
    if "patternProperties" in keywords:
        keywords["patternProperties"] = _counted(_pattern_properties)
    if "uniqueItems" in keywords:
        keywords["uniqueItems"] = _charged_unique(keywords["uniqueItems"])
    cls = jsonschema.validators.extend(base, keywords)
    validator = cls(plain)  # no format checker: formats are the server's reading of text
    if len(_SCHEMAS) >= 256:
        _SCHEMAS.clear()
    _SCHEMAS[id(schema)] = (schema, validator)
    return validator


def _counted(keyword: Callable[..., Any]) -> Callable[..., Any]:
    """``jsonschema``'s check of one keyword, each application counted as a step."""
    def counted(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        _spend()
        return keyword(validator, value, instance, schema)
    return counted


def _charged_unique(keyword: Callable[..., Any]) -> Callable[..., Any]:
    """``uniqueItems`` charged for its work: items that do not sort (mixed types, objects)
    are compared pairwise, ``n * n / 2`` comparisons."""
    def charged(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        if value and isinstance(instance, list):
            count = len(instance)
            _spend(1 + count // _PAIRS_PER_STEP)
            if count > 1 and not _sortable(instance):
                _spend(count * (count - 1) // 2 // _PAIRS_PER_STEP)
        return keyword(validator, value, instance, schema)
    return charged


def _sortable(items: list[Any]) -> bool:
    """Whether ``jsonschema``'s uniqueness check can sort ``items`` (all numbers, all
    strings: not objects, lists, booleans or ``null`` mixed in)."""
    kinds = {str if type(item) is str else float if type(item) in (int, float) else object
             for item in items}
    return len(kinds) == 1 and object not in kinds


def _compiled(pattern: str) -> Any:
    found = _PATTERNS.get(pattern)
    if found is None:
        try:
            found = re2.compile(pattern, options=RE2_OPTIONS)
        except re2.error:
            raise SchemaMismatch("the schema has a pattern that cannot be checked in linear "
                                 "time") from None
        if len(_PATTERNS) >= 256:
            _PATTERNS.clear()
        _PATTERNS[pattern] = found
    return found


_PATTERNS: dict[str, Any] = {}
"""Compiled RE2 patterns, by their text."""


def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[Any]:
    """``pattern`` matched by RE2, charged for the text's length."""
    if isinstance(instance, str) and isinstance(pattern, str):
        _spend(len(instance) // 256)
        if _compiled(pattern).search(instance) is None:
            yield _error("does not match its pattern")


def _pattern_properties(validator: Any, patterns: Any, instance: Any,
                        schema: Any) -> Iterator[Any]:
    """``patternProperties`` with its patterns matched by RE2."""
    if not (isinstance(instance, dict) and isinstance(patterns, Mapping)):
        return
    for pattern, sub in patterns.items():
        compiled = _compiled(pattern)
        for name, value in instance.items():
            _spend(1 + len(name) // 256)
            if compiled.search(name) is not None:
                yield from validator.descend(value, sub, path=name, schema_path=pattern)


def _error(message: str) -> Any:
    import jsonschema

    return jsonschema.ValidationError(message)


def _resolve(schema: Any, root: Mapping[str, Any]) -> Any:
    """``schema`` with its local ``$ref`` chain followed (``#/$defs/Name``)."""
    for _ in range(_REF_HOPS):
        if not isinstance(schema, Mapping) or "$ref" not in schema:
            return schema
        ref = schema["$ref"]
        if not (isinstance(ref, str) and (ref == "#" or ref.startswith("#/"))):
            raise SchemaMismatch(f"the schema refers outside itself ({ref!r})")
        target: Any = root
        for part in ref[2:].split("/") if ref != "#" else ():
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, Mapping) or part not in target:
                raise SchemaMismatch(f"the schema's reference {ref!r} names nothing")
            target = target[part]
        schema = target
    raise SchemaMismatch("the schema's references do not end")


def _filled(value: Any, schema: Any, root: Mapping[str, Any]) -> Any:
    _spend()
    schema = _resolve(schema, root)
    if not isinstance(schema, Mapping):
        return value
    if isinstance(value, dict):
        value = _filled_object(value, schema, root)
    elif isinstance(value, list):
        value = _filled_array(value, schema, root)
    for branch in schema.get("allOf") or ():
        value = _filled(value, branch, root)
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and branches:
            value = _filled_union(value, branches, root)
    return value


def _filled_object(value: dict[str, Any], schema: Mapping[str, Any],
                   root: Mapping[str, Any]) -> dict[str, Any]:
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        properties = {}
    out = dict(value)
    for name, sub in properties.items():
        if name in out:
            out[name] = _filled(out[name], sub, root)
            continue
        resolved = _resolve(sub, root)
        if isinstance(resolved, Mapping) and "default" in resolved:
            out[name] = copy.deepcopy(resolved["default"])
    extra = schema.get("additionalProperties")
    if isinstance(extra, Mapping):
        for name in out.keys() - properties.keys():
            out[name] = _filled(out[name], extra, root)
    return out


def _filled_array(value: list[Any], schema: Mapping[str, Any],
                  root: Mapping[str, Any]) -> list[Any]:
    prefix = schema.get("prefixItems")
    prefix = prefix if isinstance(prefix, list) else []
    items = schema.get("items")
    out = list(value)
    for i, item in enumerate(out):
        if i < len(prefix):
            out[i] = _filled(item, prefix[i], root)
        elif isinstance(items, Mapping):
            out[i] = _filled(item, items, root)
    return out


def _filled_union(value: Any, branches: list[Any], root: Mapping[str, Any]) -> Any:
    """The value filled by the one alternative it is valid for; unchanged when none
    (the check refuses it) or when every alternative it is valid for fills it the same."""
    if not isinstance(value, dict | list):
        return value  # a scalar has nothing to fill
    validator = _validator(root)
    results = []
    for branch in branches:
        if validator.evolve(schema=_resolve(branch, root)).is_valid(value):
            results.append(_filled(value, branch, root))
    if not results:
        return value
    first = results[0]
    if any(not _same(first, other) for other in results[1:]):
        raise SchemaMismatch("the arguments fit more than one alternative of the schema, "
                             "with different defaults")
    return first


def _same(left: Any, right: Any) -> bool:
    """JSON equality that tells ``true`` from ``1``."""
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return left.keys() == right.keys() and all(_same(v, right[k]) for k, v in left.items())
    if isinstance(left, list):
        return len(left) == len(right) and all(_same(a, b) for a, b in zip(left, right, strict=True))
    return bool(left == right)
