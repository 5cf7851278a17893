"""The guard's shortcut past the tool's validation (``_private.validated_as_they_are``)
returns exactly what the tool's own validation returns, or nothing.

The guard validates repaired arguments with the tool's own validation before the rules
read them (``_private.prepare_arguments``). When every value is of a type its field keeps
as it is (a ``float`` for ``float | str``), that validation returns the values unchanged,
and the guard skips it. Hypothesis generates input models (scalars, optionals, unions in
every order, defaults, constraints, aliases, strict types, validators, configs that change
values, nested and non-JSON types) and argument dicts (missing and extra keys, subclasses,
NaN, big and negative numbers, bools for ints, ints for floats), and the shortcut must
either decline or give the same keys, types and values as ``FunctionTool._prepare_arguments``
(which then must not raise). A tool whose validation is not the framework's own is never
shortcut.
"""

from __future__ import annotations

import enum
import math
import typing
from typing import Annotated, Any, Optional

import pytest
from agent_framework import FunctionTool
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, StrictInt, create_model, field_validator

from guardrails.agent_framework import _private


class _Text(str):
    pass


class _Number(int):
    pass


class _Color(enum.IntEnum):
    RED = 1


_SCALARS: list[Any] = [str, int, float, bool, type(None)]
_ODD: list[Any] = [
    Annotated[int, Field(ge=0)],
    Annotated[str, Field(max_length=3)],
    Annotated[str, Field(pattern="^x")],
    Annotated[float, Field(allow_inf_nan=False)],
    StrictInt,
    list[int],
    dict[str, int],
    tuple[int, ...],
    _Color,
    Any,
]


@st.composite
def _annotation(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["scalar", "scalar", "scalar", "optional", "union", "union",
                                 "described", "odd"]))
    if kind == "scalar":
        return draw(st.sampled_from(_SCALARS[:4]))
    if kind == "optional":
        return Optional[draw(st.sampled_from(_SCALARS[:4]))]  # noqa: UP045 - as users write it
    if kind == "union":
        members = draw(st.lists(st.sampled_from(_SCALARS), min_size=2, max_size=4, unique=True))
        union: Any = members[0]
        for member in members[1:]:
            union = union | member
        return union
    if kind == "described":
        return Annotated[draw(st.sampled_from(_SCALARS[:4])), Field(description="d")]
    return draw(st.sampled_from(_ODD))


VALUES = st.one_of(
    st.sampled_from(["x", " x ", "1", "1.5", "true", "", "xyzw", _Text("x"), 1, 0, -1, 2**70,
                     1.0, 1.5, -0.0, math.nan, math.inf, True, False, None, [1], {"a": 1},
                     (1,), _Number(2), _Color.RED, b"x"]),
    st.text(max_size=5), st.integers(), st.floats(), st.booleans())


PLAIN = st.sampled_from(["x", " x ", "1", "", 1, -1, 0, 2**70, 1.5, -0.0, math.nan, math.inf,
                         True, False, None])
"""Plain JSON scalars: what the shortcut takes when its field keeps their type."""


_OF_TYPE: dict[Any, st.SearchStrategy[Any]] = {
    str: st.one_of(st.sampled_from(["x", " x ", "", "1", "XY"]), st.text(max_size=4)),
    int: st.integers(), float: st.floats(), bool: st.booleans(), type(None): st.none()}


@st.composite
def _tool_and_arguments(draw: st.DrawFn) -> tuple[FunctionTool, dict[str, Any]]:
    names = draw(st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=3,
                          unique=True))
    fields: dict[str, Any] = {}
    for name in names:
        annotation = draw(_annotation())
        if draw(st.booleans()):
            fields[name] = (annotation, ...)
        elif draw(st.integers(0, 15)) == 0:
            fields[name] = (annotation, Field(default=None, alias=f"{name}_alias"))
        else:
            fields[name] = (annotation, draw(VALUES))
    config = draw(st.sampled_from([None, None, None, None, None, ConfigDict(extra="forbid"),
                                   ConfigDict(str_strip_whitespace=True),
                                   ConfigDict(strict=True), ConfigDict(extra="allow")]))
    base: Any = None
    if draw(st.integers(0, 12)) == 0:
        class WithValidator(BaseModel):
            @field_validator("*", mode="before")
            @classmethod
            def upper(cls, value: Any) -> Any:
                return value.upper() if isinstance(value, str) else value
        base = WithValidator
    model: Any = (create_model("Input", __base__=base, **fields) if base is not None
                  else create_model("Input", __config__=config, **fields))
    tool = FunctionTool(name="t", description="d", func=lambda **kw: "", input_model=model)
    arguments: dict[str, Any] = {}
    for name in names:  # mostly values of the field's own kinds, so the shortcut is tried
        if draw(st.integers(0, 5)) == 0:
            continue
        pick = draw(st.integers(0, 3))
        members = [m for m in typing.get_args(fields[name][0]) or (fields[name][0],)
                   if m in _OF_TYPE]
        if pick < 2 and members:  # of one of the field's own types (the shortcut's case)
            arguments[name] = draw(_OF_TYPE[draw(st.sampled_from(members))])
        else:
            arguments[name] = draw(VALUES if pick == 3 else PLAIN)
    if draw(st.integers(0, 9)) == 0:
        arguments["e"] = draw(VALUES)
    return tool, arguments


def _exact(values: dict[str, Any]) -> list[tuple[str, type, str]]:
    return sorted((k, type(v), repr(v)) for k, v in values.items())


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_tool_and_arguments())
def test_the_shortcut_is_the_tools_validation_or_declines(
        case: tuple[FunctionTool, dict[str, Any]]) -> None:
    tool, arguments = case
    fast = _private.validated_as_they_are(tool, tool._prepare_arguments, arguments)
    event("shortcut" if fast is not None else "declined")
    if fast is None:
        return
    slow = tool._prepare_arguments(dict(arguments))  # must validate: the shortcut ran
    assert _exact(fast) == _exact(slow), (tool.input_model.model_fields, arguments)
    assert fast is not arguments


def test_the_shortcut_covers_the_common_case() -> None:
    model = create_model("Pay", recipient=(str, ...), amount=(float | str, ...),
                         memo=(Optional[str], None))  # noqa: UP045
    tool = FunctionTool(name="pay", description="d", func=lambda **kw: "", input_model=model)
    arguments = {"recipient": "GB1", "amount": 1000.0}
    assert _private.validated_as_they_are(tool, tool._prepare_arguments, arguments) == arguments
    # An int for a float field is converted by validation: not shortcut.
    assert _private.validated_as_they_are(
        tool, tool._prepare_arguments, {"recipient": "GB1", "amount": 1000}) is None
    # A missing required field fails validation: not shortcut.
    assert _private.validated_as_they_are(tool, tool._prepare_arguments,
                                          {"amount": 1.0}) is None


def test_a_tool_with_validation_of_its_own_is_never_shortcut() -> None:
    model = create_model("Pay", recipient=(str, ...))

    class Strict(FunctionTool):
        def _prepare_arguments(self, arguments: Any) -> dict[str, Any]:
            raise ValueError("refused")

    arguments = {"recipient": "GB1"}
    sub = Strict(name="pay", description="d", func=lambda **kw: "", input_model=model)
    assert _private.validated_as_they_are(sub, sub._prepare_arguments, arguments) is None

    patched = FunctionTool(name="pay", description="d", func=lambda **kw: "",
                           input_model=model)
    patched._prepare_arguments = lambda arguments: {}  # type: ignore[method-assign]
    assert _private.validated_as_they_are(patched, patched._prepare_arguments,
                                          arguments) is None

    schema_tool = FunctionTool(name="pay", description="d", func=lambda **kw: "",
                               input_model={"type": "object",
                                            "properties": {"recipient": {"type": "string"}}})
    assert _private.validated_as_they_are(schema_tool, schema_tool._prepare_arguments,
                                          arguments) is None


@pytest.mark.parametrize("arguments", [{"recipient": "GB1", "amount": 5.0},
                                       {"recipient": "GB1", "amount": "5"}])
def test_prepare_arguments_gives_what_the_framework_gives(arguments: dict[str, Any]) -> None:
    """Through the guard's own entry point, defaults filled in, shortcut or not."""
    from agent_framework import FunctionInvocationContext

    model = create_model("Pay", recipient=(str, ...), amount=(float | str, ...),
                         note=(str, "none"))
    tool = FunctionTool(name="pay", description="d", func=lambda **kw: "", input_model=model)
    context = FunctionInvocationContext(function=tool, arguments=dict(arguments))
    got = _private.prepare_arguments(context, arguments)
    assert got is not None
    assert _exact(got) == _exact({**tool._prepare_arguments(dict(arguments)), "note": "none"})
