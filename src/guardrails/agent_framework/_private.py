"""Every private Agent Framework name this package depends on, in one place.

agent-framework-core 1.23 has no public API for two things the guard needs:

- the *security argument snapshot*: a token stored in the invocation context's metadata
  that makes the framework fail closed (``MiddlewareFailure``) when any middleware running
  after the guard changes the arguments, and that makes validation errors use their
  redacted text;
- the *function-result carrier*: host-only properties (an MCP tool's raw result under
  ``_mcp_tool_result_host_payload``, its ``_meta``) that the framework keeps in the
  invocation context's metadata and attaches to the function result after the guard
  returned; the guard scrubs them where they wait;
- the key under which an MCP tool's ``FunctionTool`` keeps the server's own tool name;
- the argument-validation error type, which the guard re-raises with scrubbed text so
  the framework still reports "Argument parsing failed" rather than "Function failed";
- the tool's own argument validation (``FunctionTool._prepare_arguments``) and the
  *prepared-arguments* record that makes the final ``invoke`` run the tool with exactly the
  values prepared before it, without validating them a second time. The guard validates
  first and evaluates what validation produced, so what the rules see is what runs (values
  that validation provably returns as they are, plain scalars of the types their plain
  fields keep, skip it: ``validated_as_they_are``);
- the *approval response observer*: a function middleware with a method named
  ``APPROVAL_OBSERVER`` is told of approval responses that will not run their call
  (rejections), which history records with effect "rejected";
- the framework's *argument tokens* (``_argument_comparison_token``,
  ``_argument_authority_token``), which the guard builds faster for JSON data and, with
  ``install_fast_tokens``, lets the framework's own checks use (equal tokens, see there);
- the framework's execution of one *batch* of calls (``_try_execute_function_call_groups``:
  a model turn's calls, or the approved calls a run replays) with the run's function
  middleware pipeline (its ``_middleware``), which ``install_batch_check`` lets the guard see
  first: it replaces the arguments the framework's parser cannot read (``_unreadable``).

``tests/test_af_private.py`` pins the behaviour of each name here: a framework upgrade
that changes them fails those tests loudly instead of silently weakening the guard.
"""

from __future__ import annotations

import copy
import inspect
import math
import struct
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agent_framework import FunctionInvocationContext
from agent_framework import _tools as _framework_tools
from agent_framework._mcp import _MCP_FRAMEWORK_DENYLIST
from agent_framework._middleware import _ApprovalResponseObserver
from agent_framework._tools import (
    _FUNCTION_RESULT_CARRIER_CONTEXT_KEY,
    _PREPARED_ARGUMENTS_CONTEXT_KEY,
    _SECURITY_ARGUMENTS_SNAPSHOT_CONTEXT_KEY,
    _argument_authority_token,
    _argument_comparison_token,
    _contains_opaque_argument_token,
    _FunctionArgumentValidationError,
    _PreparedArgumentsState,
)
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from guardrails.agent_framework import _schema

__all__ = [
    "APPROVAL_OBSERVER",
    "PREPARED_KEY",
    "SNAPSHOT_KEY",
    "ApprovalObserver",
    "argument_token",
    "authority_token",
    "function_result_carrier",
    "has_argument_snapshot",
    "install_batch_check",
    "install_fast_tokens",
    "invalid_fields",
    "is_argument_validation_error",
    "mcp_remote_name",
    "prepare_arguments",
    "prepared_arguments",
    "record_argument_snapshot",
    "scrubbed_validation_error",
]

SNAPSHOT_KEY: str = _SECURITY_ARGUMENTS_SNAPSHOT_CONTEXT_KEY
PREPARED_KEY: str = _PREPARED_ARGUMENTS_CONTEXT_KEY

ApprovalObserver: Any = _ApprovalResponseObserver
"""The runtime-checkable protocol the framework tests its function middleware against."""
APPROVAL_OBSERVER = "_on_approval_responses"
"""The method the framework calls with the approval responses it will not execute."""


_PACK = struct.Struct("!d").pack
_NONE_TYPE = type(None)


def argument_token(value: Any) -> Any:
    """The framework's ``_argument_comparison_token(value)``, equal to it for every input,
    built faster for JSON data (exact ``dict`` with ``str`` keys, ``list``, ``str``,
    ``int``, ``float``, ``bool``, ``None``); anything else is handed to the framework's
    own function, subtree by subtree.

    The framework compares tokens the guard stores with tokens it computes itself (the
    snapshot before the tool runs, the prepared arguments), so equality with its function
    is the contract: tests/test_af_private.py checks it on generated inputs. An unequal
    token could only make the framework refuse a call (fail closed), never let one through.
    """
    return _fast_token(value)[0]


def _fast_token(value: Any) -> tuple[Any, bool]:
    """The token and whether part of it came from the framework's function (which may
    hold opaque, identity-only parts)."""
    t = type(value)
    if t is str or t is int or t is bool or value is None:
        return (t, value), False
    if t is float:
        return ("float", _PACK(value)), False
    if t is dict:
        foreign = False
        pairs = []
        for k, v in value.items():
            if type(k) is not str:
                # Keys of other types may share a token (several NaN keys): the framework
                # counts duplicates, so let it build the whole dict.
                return _argument_comparison_token(value), True
            kind = type(v)
            if kind is str or kind is int or kind is bool or v is None:  # the scalars above,
                token: Any = (kind, v)  # without a call per argument
            elif kind is float:
                token = ("float", _PACK(v))
            else:
                token, other = _fast_token(v)
                foreign = foreign or other
            pairs.append((((str, k), token), 1))
        return ("dict", frozenset(pairs)), foreign
    if t is list:
        foreign = False
        items = []
        for v in value:
            token, other = _fast_token(v)
            foreign = foreign or other
            items.append(token)
        return ("list", tuple(items)), foreign
    return _argument_comparison_token(value), True


def authority_token(value: Any, *, boundary: str = "security policy") -> Any:
    """The framework's ``_argument_authority_token``: the comparison token, refused (the
    framework's ``MiddlewareFailure``) when it holds an opaque, identity-only part."""
    token, foreign = _fast_token(value)
    if foreign and _contains_opaque_argument_token(token):
        return _argument_authority_token(value, boundary=boundary)  # raises MiddlewareFailure
    return token


FRAMEWORK_COMPARISON_TOKEN: Callable[[Any], Any] = _argument_comparison_token
"""The framework's own functions, as the framework defines them (``install_fast_tokens``
replaces them in its module; tests compare the fast tokens with these)."""
FRAMEWORK_AUTHORITY_TOKEN: Callable[..., Any] = _argument_authority_token


def _framework_authority_token(value: Any, *, boundary: str) -> Any:
    """``authority_token`` with the framework's signature (``boundary`` is required)."""
    return authority_token(value, boundary=boundary)


_INSTALL_LOCK = threading.Lock()


def install_fast_tokens() -> bool:
    """Let the framework's own argument checks use the fast tokens; whether they do.

    The framework computes tokens of a guarded call's arguments three times after the guard
    bound them (the prepared record before the middleware, the snapshot check and the
    prepared-arguments check before the tool), with functions that cost some 5 and 16 µs
    for five JSON arguments where the fast ones cost about 1 µs. The fast functions return
    the framework's token for every input (JSON data built directly, anything else handed
    to the framework's own function, subtree by subtree; ``tests/test_af_private.py``
    checks equality on generated inputs, opaque and hostile ones included), so each check
    decides exactly as before: arguments that differ from what the guard bound still make
    the framework refuse the call. Replaced only while they are the very functions this
    module was written against: if anything else replaced them, they are left alone.
    """
    with _INSTALL_LOCK:
        tools: Any = _framework_tools
        comparison = tools._argument_comparison_token
        authority = tools._argument_authority_token
        if comparison is argument_token and authority is _framework_authority_token:
            return True
        if comparison is not FRAMEWORK_COMPARISON_TOKEN or (
                authority is not FRAMEWORK_AUTHORITY_TOKEN):
            return False
        tools._argument_comparison_token = argument_token
        tools._argument_authority_token = _framework_authority_token
        return True


BatchCheck = Callable[[Sequence[Any], Sequence[Any]], bool | None]
"""``check(calls, middleware)``: sees a batch's calls (``function_call`` contents, and
``function_approval_response`` contents carrying the approved call) and the function
middleware that will run them, before the framework reads any of their arguments; true
when the guard judges the batch (``BatchDone`` then runs once it is over)."""

BatchDone = Callable[[], None]
"""``done()``: runs when a batch its check said the guard judges is over, before the
framework sends the batch's results to the model; it may raise to end the loop there."""

FRAMEWORK_BATCH: Any = _framework_tools._try_execute_function_call_groups
"""The framework's own batch execution, as the framework defines it."""

_BATCH_CHECK: list[BatchCheck] = []
"""The one check ``install_batch_check`` installed (empty until then)."""
_BATCH_DONE: list[BatchDone] = []
"""The ``done`` installed with it, if any."""


async def _checked_batch(
    custom_args: Any,
    function_calls: Any,
    tools: Any,
    config: Any,
    invocation_session: Any = None,
    approval_session_is_authoritative: bool = True,
    middleware_pipeline: Any = None,
    host_payload_budget: Any = None,
) -> Any:
    """The framework's batch execution, the installed check first when a function
    middleware pipeline will run the calls (without one, nothing of the guard's runs them).
    The framework's signature exactly (tests/test_af_private.py compares them)."""
    guarded = (middleware_pipeline is not None
               and _BATCH_CHECK[0](function_calls, middleware_pipeline._middleware))
    outcome = await FRAMEWORK_BATCH(
        custom_args=custom_args, function_calls=function_calls, tools=tools, config=config,
        invocation_session=invocation_session,
        approval_session_is_authoritative=approval_session_is_authoritative,
        middleware_pipeline=middleware_pipeline, host_payload_budget=host_payload_budget)
    if guarded and _BATCH_DONE:
        _BATCH_DONE[0]()
    return outcome


def install_batch_check(check: BatchCheck, done: BatchDone | None = None) -> bool:
    """Let ``check`` see every batch of calls the framework executes, before it reads their
    arguments (and ``done`` run after a batch the check said the guard judges); whether it
    does.

    The framework parses a call's argument text (``Content.parse_arguments``) inside the
    batch, before any function middleware, and text it cannot parse ends the run; a chat
    middleware could replace such text in each model response, but the framework's dispatch
    of one costs more than the rest of a call's guard. The check runs once per batch (the
    whole batch at once, before any of its calls: a call id noted for one call holds for
    its siblings), sees the pipeline's middleware (so it acts only where the guard's
    function middleware will see the calls), and costs a lookup when it has nothing to do.
    The first check installed stays. Installed only while the module holds the very
    function this module was written against: if anything else replaced it, it is left
    alone (and the check never runs).
    """
    with _INSTALL_LOCK:
        tools: Any = _framework_tools
        current = tools._try_execute_function_call_groups
        if current is _checked_batch:
            return True
        if current is not FRAMEWORK_BATCH:
            return False
        if not _BATCH_CHECK:
            _BATCH_CHECK.append(check)
            if done is not None:
                _BATCH_DONE.append(done)
        tools._try_execute_function_call_groups = _checked_batch
        return True


def record_argument_snapshot(context: FunctionInvocationContext,
                             arguments: Mapping[str, Any], *, prepared: bool = False) -> None:
    """Bind the call to ``arguments``: any later change makes the framework fail closed.

    With ``prepared``, also run the tool with exactly these values: the framework's final
    ``invoke`` reuses prepared arguments whose comparison token matches the context's and
    validates again only if they were changed (which the snapshot refuses anyway). The
    snapshot's authority token is that comparison token, so it is computed once.

    Raises the framework's ``MiddlewareFailure`` for arguments that cannot be bound
    (opaque mutable objects); the guard treats that as a guard error.
    """
    values = dict(arguments)
    token = authority_token(values)
    context.metadata[SNAPSHOT_KEY] = token
    if prepared:
        context.metadata[PREPARED_KEY] = _PreparedArgumentsState(arguments=values, token=token)


def has_argument_snapshot(context: FunctionInvocationContext) -> bool:
    return SNAPSHOT_KEY in context.metadata


def is_argument_validation_error(exc: BaseException) -> bool:
    return isinstance(exc, _FunctionArgumentValidationError)


def scrubbed_validation_error(exc: BaseException, scrub: Callable[[str], str]) -> Exception:
    """The same framework validation error, its detailed and redacted texts scrubbed."""
    redacted = getattr(exc, "redacted_message", None)
    return _FunctionArgumentValidationError(
        scrub(str(exc)),
        redacted_message=scrub(redacted) if isinstance(redacted, str) else None,
    )


def validated_by_framework(context: FunctionInvocationContext) -> bool:
    """Whether the call's arguments are, as they stand, the values the framework's own
    validation produced before the middleware ran (the very object it recorded): values
    of the tool's types, not the model's JSON. One identity check."""
    prepared = context.metadata.get(PREPARED_KEY)
    return isinstance(prepared, _PreparedArgumentsState) and (
        prepared.arguments is context.arguments)


def prepared_arguments(context: FunctionInvocationContext,
                       arguments: Mapping[str, Any]) -> dict[str, Any] | None:
    """The values the framework already prepared (validated) for exactly these arguments
    before the middleware ran, with the tool's defaults filled in; None when it did not
    (its validation failed, so the middleware got the raw arguments) or they changed.

    Reusing them is what the framework's own final step does: validating prepared values
    again is not always a no-op (a field with an alias no longer validates by its name).
    """
    prepared = context.metadata.get(PREPARED_KEY)
    if not (isinstance(prepared, _PreparedArgumentsState)
            and argument_token(arguments if type(arguments) is dict else dict(arguments))
            == prepared.token):
        return None
    try:
        return _as_received(context, dict(prepared.arguments))
    except _FunctionArgumentValidationError:
        return None  # (an MCP tool's strict check) validated again, and refused, by the guard


def prepare_arguments(context: FunctionInvocationContext,
                      arguments: Mapping[str, Any]) -> dict[str, Any] | None:
    """The values the tool's own validation turns ``arguments`` into, with the tool's
    defaults filled in, or None for a tool with no validation the guard can run (not a
    ``FunctionTool``). Raises the framework's argument-validation error when they do not
    validate. The framework's final step, ``FunctionTool._prepare_arguments``.
    """
    function = context.function
    prepare = getattr(function, "_prepare_arguments", None)
    if not callable(prepare):
        return None
    unchanged = validated_as_they_are(function, prepare, arguments)
    if unchanged is not None:
        return _as_received(context, unchanged)
    result = prepare(dict(arguments))
    if not isinstance(result, dict):
        raise TypeError(f"{type(function).__name__} validation returned {type(result).__name__}")
    return _as_received(context, result)  # a dict of its own


def _as_received(context: FunctionInvocationContext, arguments: dict[str, Any]) -> dict[str, Any]:
    """Validated ``arguments`` (the caller's own copy) as the tool will hold them.

    A tool with an input model: its defaults filled in (``_with_defaults``). A tool declared
    by a JSON schema gets no such validation, and the framework checks top-level types only:
    an MCP tool receives what its server makes of the arguments the client sends
    (``_mcp_sent``), a local function its signature's defaults for what was left out
    (``_signature_defaults``).

    Whatever the tool, the argument named as its ``FunctionInvocationContext`` parameter
    (``ctx`` for an MCP tool's generated function) is not among them: the framework binds
    that name to the context, whatever the model sent under it (red team 27)."""
    function = context.function
    context_name = getattr(function, "_context_parameter_name", None)
    if type(context_name) is str:
        arguments.pop(context_name, None)
    if getattr(function, "_schema_supplied", False) is not True:
        return _with_defaults(function, arguments, copied=True)
    remote = mcp_remote_name(function)
    if remote is not None:
        return _mcp_sent(context, remote, arguments)
    return _signature_defaults(function, arguments)


def _mcp_sent(context: FunctionInvocationContext, remote: str,
              arguments: dict[str, Any]) -> dict[str, Any]:
    """Exactly the arguments the framework's MCP client sends the server, every default the
    server's schema declares made explicit, and strictly of the schema's JSON types.

    The client (``MCPTool._prepare_call_kwargs``) sends only the names the server declares
    (or the host opted in with ``additional_tool_argument_names``), never ``_meta`` or a
    name of the framework's deny list; a declared name the model left out goes with the
    host's runtime value (``function_invocation_kwargs``) when it has one. The server then
    fills its defaults and converts values (pydantic's lax mode): sending the defaults
    and refusing values not already of their types leaves it nothing to change
    (``_schema``). A function whose MCP tool cannot be found is a guard error."""
    function = context.function
    caller = getattr(function, "func", None)
    server = (inspect.getclosurevars(caller).nonlocals.get("mcp_tool")
              if inspect.isfunction(caller) else None)
    declared = getattr(server, "_tool_param_names_by_name", None)
    extras_of = getattr(server, "_resolved_extra_args", None)
    if not isinstance(declared, Mapping) or not callable(extras_of):
        raise TypeError(f"the MCP tool behind '{getattr(function, 'name', '?')}' is unknown: "
                        "what it sends cannot be judged")
    names = declared.get(remote) or frozenset()
    extras = extras_of(remote)

    def sent(name: str) -> bool:
        return name != "_meta" and (name in extras or (
            name in names and name not in _MCP_FRAMEWORK_DENYLIST))

    out = {k: v for k, v in arguments.items() if sent(k)}
    for name, value in dict(context.kwargs).items():
        if name not in out and sent(name):
            out[name] = value  # the framework merges the run's kwargs under the model's
    schema = function.parameters()
    name = getattr(function, "name", remote)
    try:
        out = _schema.as_sent(out, schema, name)
    except _schema.SchemaMismatch as exc:
        # Its text names places and schema keywords, never a value: the brief text too.
        raise _FunctionArgumentValidationError(str(exc), redacted_message=str(exc)) from exc
    return out


def _signature_defaults(function: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    """``arguments`` with the local function's own defaults filled in for the parameters
    left out: the framework calls it with the arguments as they are, whatever defaults its
    JSON schema claims. A default that is not JSON data (a sentinel object) is the
    function's way of telling "not given": it is left to the function (the rules see the
    argument missing)."""
    func = function.func
    if isinstance(func, _framework_tools.FunctionTool):
        func = func.func
    if func is None:
        return arguments
    try:
        parameters = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return arguments
    context_name = getattr(function, "_context_parameter_name", None)
    for parameter in parameters:
        name = parameter.name
        if (name in arguments or name in {"self", "cls"} or name == context_name
                or parameter.default is inspect.Parameter.empty
                or parameter.kind not in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                          inspect.Parameter.KEYWORD_ONLY)
                or not _json_data(parameter.default)):
            continue
        arguments[name] = copy.deepcopy(parameter.default)
    return arguments


def _json_data(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is plain JSON data (finite numbers), a few levels deep at most."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if kind is float:
        return math.isfinite(value)
    if depth >= 16:
        return False
    if kind is list:
        return all(_json_data(v, depth + 1) for v in value)
    if kind is dict:
        return all(type(k) is str and _json_data(v, depth + 1) for k, v in value.items())
    return False


_FRAMEWORK_PREPARE: Any = _framework_tools.FunctionTool._prepare_arguments
"""The framework's own validation step; the shortcut below knows exactly what it does."""

_SCALARS: dict[str, type] = {"str": str, "int": int, "float": float, "bool": bool,
                             "none": type(None)}
"""Core-schema types whose lax validation returns a value of exactly that type as it is
(``1.5`` stays ``1.5``, ``"x"`` stays ``"x"``), when the schema has no other key (no
constraint, no strictness, no custom serializer)."""

_KEPT: dict[type[BaseModel], tuple[dict[str, frozenset[type]], tuple[str, ...]] | None] = {}
"""Per input model: per field, the exact value types its validation keeps as they are, and
its required fields; None for a model the shortcut does not cover (models never change)."""


def validated_as_they_are(function: Any, prepare: Any,
                          arguments: Mapping[str, Any]) -> dict[str, Any] | None:
    """``arguments`` when the tool's validation would return them unchanged (a copy), else
    None: the framework's own ``_prepare_arguments`` (``prepare``, not an override), an
    input model whose every field is a plain scalar, an optional scalar or a union of
    scalars, with no constraint, alias, validator, serializer or config that changes a
    value, every required field present, no other key, and every value of a type its field
    keeps exactly. That is what validation then returns (``model_dump(exclude_unset=True)``
    of the values as given); anything else (an ``int`` for a ``float``, a ``str`` subclass,
    a nested value, a constrained field) is validated by the tool's own code.
    ``tests/test_af_validation_shortcut.py`` compares this with the framework's validation
    on generated models and values."""
    if getattr(prepare, "__func__", None) is not _FRAMEWORK_PREPARE or getattr(
            function, "_schema_supplied", True) is not False:
        return None
    model = getattr(function, "input_model", None)
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return None
    try:
        plain = _KEPT[model]
    except KeyError:
        kept = _kept_types(model)
        plain = None if kept is None else (kept, tuple(
            name for name, info in model.model_fields.items() if info.is_required()))
        if len(_KEPT) >= 1024:  # models are few; bounded all the same
            _KEPT.clear()
        _KEPT[model] = plain
    if plain is None or type(arguments) is not dict:
        return None
    kept, required = plain
    for name, value in arguments.items():
        types = kept.get(name) if type(name) is str else None
        if types is None or type(value) not in types:
            return None
    for name in required:
        if name not in arguments:
            return None
    return dict(arguments)


_MODEL_VALIDATE: Any = BaseModel.model_validate.__func__  # type: ignore[attr-defined]
"""Pydantic's own ``model_validate`` (a classmethod: compared by its function)."""
_MODEL_KEYS = frozenset({"type", "cls", "config", "custom_init", "metadata", "ref",
                         "root_model", "schema"})
_FIELDS_KEYS = frozenset({"type", "fields", "model_name", "computed_fields"})
_CONFIG_KEYS = frozenset({"title"})
_SCHEMA_ONLY = frozenset({"pydantic_js_updates", "pydantic_js_extra"})
"""Field metadata that only the JSON schema reads (a description, an example)."""


def _kept_types(model: type[BaseModel]) -> dict[str, frozenset[type]] | None:
    """Per field of ``model``, the exact value types its validation keeps as they are;
    None unless the whole model is plain (see ``validated_as_they_are``).

    The framework validates with the model's own ``model_validate`` and ``model_dump``:
    a model overriding either (to normalize a value) is not plain, whatever its schema."""
    if (getattr(model.model_validate, "__func__", None) is not _MODEL_VALIDATE
            or model.model_dump is not BaseModel.model_dump):
        return None
    decorators = model.__pydantic_decorators__
    if any((decorators.validators, decorators.field_validators, decorators.root_validators,
            decorators.field_serializers, decorators.model_serializers,
            decorators.model_validators, decorators.computed_fields)):
        return None
    schema: Any = model.__pydantic_core_schema__
    if not (isinstance(schema, dict) and schema.get("type") == "model"
            and schema.keys() <= _MODEL_KEYS and schema.get("cls") is model
            and not schema.get("custom_init") and not schema.get("root_model")
            and isinstance(schema.get("config", {}), dict)
            and schema.get("config", {}).keys() <= _CONFIG_KEYS):
        return None
    fields_schema = schema.get("schema")
    if not (isinstance(fields_schema, dict) and fields_schema.get("type") == "model-fields"
            and fields_schema.keys() <= _FIELDS_KEYS
            and not fields_schema.get("computed_fields")
            and isinstance(fields_schema.get("fields"), dict)):
        return None
    kept: dict[str, frozenset[type]] = {}
    for name, field in fields_schema["fields"].items():
        if not (type(name) is str and isinstance(field, dict)
                and field.get("type") == "model-field"
                and field.keys() <= {"type", "schema", "metadata"}
                and isinstance(field.get("metadata", {}), dict)
                and field.get("metadata", {}).keys() <= _SCHEMA_ONLY):
            return None
        types = _kept_by(field.get("schema"), default_allowed=True)
        if types is None:
            return None
        kept[name] = types
    if set(kept) != set(model.model_fields):
        return None
    return kept


def _kept_by(schema: Any, *, default_allowed: bool = False) -> frozenset[type] | None:
    """The exact types of values a field schema returns as they are (lax mode); None for a
    schema this does not know to be that plain."""
    if not isinstance(schema, dict):
        return None
    kind = schema.get("type")
    keys = schema.keys()
    if kind == "default" and default_allowed:
        # A default is used only when the field is missing (``validate_default`` and
        # factories are other keys): a given value is validated by the inner schema.
        if not keys <= {"type", "schema", "default"}:
            return None
        return _kept_by(schema.get("schema"))
    if kind in _SCALARS:
        return frozenset({_SCALARS[kind]}) if keys <= {"type"} else None
    if kind == "nullable":
        inner = _kept_by(schema.get("schema")) if keys <= {"type", "schema"} else None
        return None if inner is None else inner | {type(None)}
    if kind == "union":
        choices = schema.get("choices")
        if not (keys <= {"type", "choices"} and isinstance(choices, list) and choices):
            return None
        members = []
        for choice in choices:
            member = _kept_by(choice)  # (a ``(schema, label)`` pair is not a dict: None)
            if member is None:
                return None
            members.append(member)
        every = frozenset().union(*members)
        # Kept when exactly one member keeps the type and no member could take it by
        # conversion instead (an int by a float member, a bool by an int or float one).
        return frozenset(
            kind_ for kind_ in every
            if sum(kind_ in member for member in members) == 1
            and not (kind_ is int and float in every)
            and not (kind_ is bool and (int in every or float in every)))
    return None


def _with_defaults(function: Any, arguments: dict[str, Any], *,
                   copied: bool = False) -> dict[str, Any]:
    """``arguments`` with the input model's top-level defaults filled in.

    The framework drops unset fields so that the function's own defaults apply; a rule
    reading the argument would see it missing while the tool runs with the default. The
    guard passes the default explicitly instead (the input model of a function tool is
    made from its signature, so the value is the one the function would have used).
    Nested models need nothing: the tool receives them as the dicts validation produced.
    ``copied``: ``arguments`` is the caller's own copy, filled in place.
    """
    model = getattr(function, "input_model", None)
    if (getattr(function, "_schema_supplied", False) or not isinstance(model, type)
            or not issubclass(model, BaseModel)):
        return arguments
    optional = _OPTIONAL_FIELDS.get(model)
    if optional is None:
        optional = tuple((n, f) for n, f in model.model_fields.items() if not f.is_required())
        if len(_OPTIONAL_FIELDS) >= 1024:  # models are few; bounded all the same
            _OPTIONAL_FIELDS.clear()
        _OPTIONAL_FIELDS[model] = optional
    if not optional:
        return arguments
    filled = arguments if copied else dict(arguments)
    context_name = getattr(function, "_context_parameter_name", None)
    for name, info in optional:
        if name not in filled and name != context_name:
            # (A factory runs each time: every call gets its own value.)
            filled[name] = info.get_default(call_default_factory=True, validated_data=filled)
    return filled


_OPTIONAL_FIELDS: dict[type[BaseModel], tuple[tuple[str, FieldInfo], ...]] = {}
"""Per input model, its fields with a default (model fields never change)."""


def invalid_fields(exc: BaseException) -> frozenset[str] | None:
    """The top-level argument names a framework validation error is about, when it says
    (the framework raises it ``from`` pydantic's ``ValidationError``); None when unknown."""
    cause = exc.__cause__
    if not isinstance(cause, ValidationError):
        return None
    names: set[str] = set()
    for error in cause.errors():
        loc = error.get("loc") or ()
        if not loc or not isinstance(loc[0], str):
            return None
        names.add(loc[0])
    return frozenset(names)


def function_result_carrier(context: FunctionInvocationContext) -> Any | None:
    """The host-only properties waiting to be attached to this call's function result."""
    return context.metadata.get(_FUNCTION_RESULT_CARRIER_CONTEXT_KEY)


_MCP_REMOTE_NAME_KEY = "_mcp_remote_name"
"""Where an MCP tool's ``FunctionTool`` keeps the server's own name for the tool
(``agent_framework._mcp._MCP_REMOTE_NAME_KEY``; pinned by tests/test_af_mcp.py)."""


def mcp_remote_name(function: Any) -> str | None:
    """The MCP server's name for a generated MCP ``FunctionTool`` (before any
    ``tool_name_prefix``), or None for a tool that is not an MCP tool."""
    properties = getattr(function, "additional_properties", None) or {}
    remote = (properties.get(_MCP_REMOTE_NAME_KEY)
              if type(properties) is dict or isinstance(properties, Mapping) else None)
    return remote if isinstance(remote, str) else None
