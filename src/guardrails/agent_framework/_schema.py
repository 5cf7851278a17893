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
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

__all__ = ["SchemaMismatch", "check", "with_defaults"]

_REF_HOPS = 32
"""``$ref`` links followed from one schema to the schema it names, at most."""

_MAX_ERRORS = 5
"""Mismatches named in one refusal."""


class SchemaMismatch(ValueError):
    """The arguments are not of the types the schema declares: the server would convert
    them (or refuse them), so the call does not run. Its text names the places and the
    schema keywords only, never a value (a value may be a secret)."""


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
    cls = jsonschema.validators.validator_for(plain, default=jsonschema.Draft202012Validator)
    cls.check_schema(plain)
    validator = cls(plain)  # no format checker: formats are the server's reading of text
    if len(_SCHEMAS) >= 256:
        _SCHEMAS.clear()
    _SCHEMAS[id(schema)] = (schema, validator)
    return validator


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
