"""A small type lattice for static checking of CEL expressions.

``DYN`` is the top: nothing is known, nothing is reported. Everything the checker can
know comes from literals, params, the names the engine binds, tool schemas (JSON Schema)
and the signatures declared next to the library functions. ``NUM`` is JSON's "number":
the model may send ``5`` (a CEL int) or ``5.5`` (a double) for it, so it mixes with both.

A map may carry ``fields``: the keys known to be there (``required``) or possibly there
(a JSON Schema property that is not required). A map may hold other keys too unless it
is ``closed``: the engine's own records (``tool``, ``request``, a counter) and a policy's
params hold exactly their fields, so reading another key is a mistake the checker reports
(``"error"``, or ``"warning"`` where a host may add keys, as in ``history`` entries).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from guardrails.expr.values import UInt


@dataclass(frozen=True, slots=True)
class Field:
    type: Type
    required: bool


@dataclass(frozen=True, slots=True)
class Type:
    name: str
    """dyn, int, uint, double, num, string, bytes, bool, null, list, map, timestamp,
    duration, type, net.IP, net.CIDR, kubernetes.URL."""
    params: tuple[Type, ...] = ()
    """``list(elem)``, ``map(key, value)``."""
    fields: tuple[tuple[str, Field], ...] | None = None
    """Known keys of a map (a JSON Schema object, a params mapping)."""
    values: tuple[Any, ...] | None = None
    """The allowed values (JSON Schema ``enum``)."""
    closed: Literal["", "error", "warning"] = ""
    """A map holding no key but its ``fields``: how sure that is (see the module doc)."""

    def __str__(self) -> str:
        if self.name == "list":
            return f"list({self.params[0]})"
        if self.name == "map":
            return f"map({self.params[0]}, {self.params[1]})"
        return "number" if self.name == "num" else self.name

    def field(self, name: str) -> Field | None:
        for key, f in self.fields or ():
            if key == name:
                return f
        return None

    @property
    def elem(self) -> Type:
        return self.params[0] if self.name == "list" and self.params else DYN

    @property
    def key(self) -> Type:
        return self.params[0] if self.name == "map" and self.params else DYN

    @property
    def value(self) -> Type:
        return self.params[1] if self.name == "map" and len(self.params) > 1 else DYN


DYN = Type("dyn")
INT, UINT, DOUBLE, NUM = Type("int"), Type("uint"), Type("double"), Type("num")
STRING, BYTES, BOOL, NULL = Type("string"), Type("bytes"), Type("bool"), Type("null")
TIMESTAMP, DURATION, TYPE = Type("timestamp"), Type("duration"), Type("type")
IP, CIDR, URL = Type("net.IP"), Type("net.CIDR"), Type("kubernetes.URL")
NUMERIC = frozenset({"int", "uint", "double", "num"})


def list_of(elem: Type) -> Type:
    return Type("list", (elem,))


def map_of(key: Type, value: Type, fields: Mapping[str, Field] | None = None,
           closed: Literal["", "error", "warning"] = "") -> Type:
    return Type("map", (key, value), tuple(fields.items()) if fields is not None else None,
                closed=closed)


ANY_LIST, ANY_MAP = list_of(DYN), map_of(DYN, DYN)

TYPE_NAMES: Mapping[str, Type] = {
    "int": INT, "uint": UINT, "double": DOUBLE, "string": STRING, "bytes": BYTES,
    "bool": BOOL, "null_type": NULL, "list": ANY_LIST, "map": ANY_MAP, "type": TYPE,
    "google.protobuf.Timestamp": TIMESTAMP, "google.protobuf.Duration": DURATION,
    "net.IP": IP, "net.CIDR": CIDR, "kubernetes.URL": URL,
}
"""Type identifiers as written in expressions (``type(x) == string``)."""


def join(a: Type, b: Type) -> Type:
    """The least type holding both (``dyn`` when they differ)."""
    if a is b or a == b:
        return a
    if a.name == b.name == "list":
        return list_of(join(a.elem, b.elem)) if DYN not in (a.elem, b.elem) else \
            list_of(b.elem if a.elem == DYN else a.elem)
    if a.name == b.name == "map":
        return map_of(join(a.key, b.key), join(a.value, b.value))
    if a.name == b.name:
        return Type(a.name, a.params)
    if "num" in (a.name, b.name) and a.name in NUMERIC and b.name in NUMERIC:
        return NUM  # JSON's number already holds ints and doubles
    return DYN  # [1, 2.0] is a list(dyn), as cel-go types it


def record_union(types: Sequence[Type]) -> Type:
    """One map type for values that are any of ``types`` (the arguments of any of several
    tools): a field is required only if every type has it required; its type is the join
    of theirs. Any type without fields (or none at all) gives ``map(string, dyn)``."""
    if not types or any(t.fields is None for t in types):
        return map_of(STRING, DYN)
    names: dict[str, None] = {}
    for t in types:
        names.update(dict.fromkeys(k for k, _ in t.fields or ()))
    fields: dict[str, Field] = {}
    for name in names:
        present = [f for f in (t.field(name) for t in types) if f is not None]
        ft = present[0].type
        for f in present[1:]:
            ft = join(ft, f.type)
        fields[name] = Field(ft, len(present) == len(types) and all(f.required
                                                                    for f in present))
    return map_of(STRING, DYN, fields)


def of_value(value: Any, depth: int = 0, *, closed: bool = False,
             example: bool = False) -> Type:
    """The type of plain data (params): exact, since the data is there to look at.

    ``closed``: its maps hold exactly these keys (a policy's params once every binding
    and library is merged in), so reading another is an error.

    ``example``: the data is an example of data whose real values vary (a host's
    principal): a number is then any JSON number (``1000`` in the example may be
    ``1234.5`` in a call) and a null says nothing of the type (``"manager": null`` holds
    a map for other users)."""
    if example and (value is None or depth > 32):
        return DYN
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, UInt):
        return UINT
    if isinstance(value, int):
        return NUM if example else INT
    if isinstance(value, float):
        return NUM if example else DOUBLE
    if isinstance(value, str):
        return STRING
    if isinstance(value, bytes):
        return BYTES
    if value is None:
        return NULL
    if depth > 32:
        return DYN
    if isinstance(value, Mapping):
        fields = {str(k): Field(of_value(v, depth + 1, closed=closed, example=example), True)
                  for k, v in value.items()}
        vt = DYN
        for i, f in enumerate(fields.values()):
            vt = f.type if i == 0 else join(vt, f.type)
        return map_of(STRING, vt if fields else DYN, fields, "error" if closed else "")
    if isinstance(value, Sequence):
        et = DYN
        for i, item in enumerate(value):
            t = of_value(item, depth + 1, closed=closed, example=example)
            et = t if i == 0 else join(et, t)
        return list_of(et)
    return DYN


def of_json_schema(schema: Any) -> Type:
    """The type a JSON Schema describes; ``dyn`` for anything not simply one type.

    Follows local ``$ref`` (``#/$defs/...``, ``#/definitions/...``), reads ``enum``,
    ``properties``/``required`` and ``items``. ``number`` is ``num``: JSON does not tell
    5 from 5.0, so the model's 5 arrives as an int.
    """
    return _SchemaReader(schema).read(schema, 0)


class _SchemaReader:
    """Bounded whatever the schema (a tool's schema may come from a remote MCP server):
    each ``$ref`` is worked out once (a recursive one is ``dyn`` inside itself), nesting
    past 16 levels is ``dyn``, and at most 10,000 schema nodes are read."""

    def __init__(self, root: Any) -> None:
        self.root = root
        self.refs: dict[str, Type] = {}
        self.budget = 10_000

    def read(self, schema: Any, depth: int) -> Type:
        if not isinstance(schema, Mapping) or depth > 16 or self.budget <= 0:
            return DYN
        self.budget -= 1
        ref = schema.get("$ref")
        if isinstance(ref, str):
            if ref not in self.refs:
                self.refs[ref] = DYN  # while it is worked out: a recursive use is dyn
                self.refs[ref] = self.read(_resolve(self.root, ref), depth + 1)
            return self.refs[ref]
        for combinator in ("anyOf", "oneOf"):
            options = schema.get(combinator)
            if isinstance(options, list) and options:
                types = [self.read(o, depth + 1) for o in options]
                types = [t for t in types if t != NULL] or types
                out = types[0]
                for t in types[1:]:
                    out = join(out, t)
                return out
        typ = schema.get("type")
        if isinstance(typ, list):
            rest = [t for t in typ if t != "null"]
            if len(rest) != 1:
                return DYN
            typ = rest[0]
        enum = schema.get("enum")
        values = tuple(enum) if isinstance(enum, list) and enum else None
        if typ is None and values is not None:
            kinds = {of_value(v).name for v in values}
            names = {"string": "string", "int": "integer", "bool": "boolean"}
            typ = names.get(kinds.pop()) if len(kinds) == 1 else None
        if typ == "string":
            return Type("string", values=values)
        if typ == "integer":
            return Type("int", values=values)
        if typ == "number":
            return Type("num", values=values)
        if typ == "boolean":
            return BOOL
        if typ == "null":
            return NULL
        if typ == "array":
            return list_of(self.read(schema.get("items"), depth + 1))
        if typ == "object" or "properties" in schema:
            props = schema.get("properties")
            if not isinstance(props, Mapping):
                extra = schema.get("additionalProperties")
                return map_of(STRING, self.read(extra, depth + 1)
                              if isinstance(extra, Mapping) else DYN)
            required = schema.get("required")
            req = set(required) if isinstance(required, list) else set()
            fields = {str(k): Field(self.read(v, depth + 1), k in req)
                      for k, v in props.items()}
            return map_of(STRING, DYN, fields)
        return DYN


def _resolve(root: Any, ref: str) -> Any:
    if not ref.startswith("#/"):
        return None
    node = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def parse_signature(text: str) -> tuple[str | None, str, tuple[Type, ...], Type]:
    """``"string.contains(string) -> bool"`` as (receiver, name, params, result).

    The receiver is the type before the first dot when the text is ``type.name(...)``
    and ``type`` is a type name; otherwise the function is global (``sets.contains``).
    A trailing ``...`` after the last parameter repeats it.
    """
    head, _, result = text.partition("->")
    call, _, rest = head.strip().partition("(")
    params_text = rest.rstrip().removesuffix(")")
    receiver: str | None = None
    name = call
    for type_name in sorted(_PARSE_NAMES, key=len, reverse=True):
        if call.startswith(type_name + "."):
            receiver, name = type_name, call[len(type_name) + 1:]
            break
    params = tuple(parse_type(p) for p in _split(params_text)) if params_text.strip() else ()
    return receiver, name, params, parse_type(result.strip())


_PARSE_NAMES: Mapping[str, Type] = {
    **TYPE_NAMES, "dyn": DYN, "timestamp": TIMESTAMP, "duration": DURATION, "null": NULL,
    "number": NUM,
}


def parse_type(text: str) -> Type:
    text = text.strip()
    if text.startswith("list(") and text.endswith(")"):
        return list_of(parse_type(text[5:-1]))
    if text.startswith("map(") and text.endswith(")"):
        k, v = _split(text[4:-1])
        return map_of(parse_type(k), parse_type(v))
    found = _PARSE_NAMES.get(text)
    if found is None:
        raise ValueError(f"unknown type in signature: {text!r}")
    return found


def _split(text: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    if cur.strip():
        out.append(cur)
    return out
