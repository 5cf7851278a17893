"""Secret values: where injected ones come from, and how every known one is scrubbed.

Everything that leaves a guarded call passes through the engine's ``Scrubber``: the tool's
result (what the model reads), its exception (the framework does not redact tool
exceptions), the framework's log records while the tool runs (their tracebacks included),
and the arguments kept in history.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from agent_framework import (
    Content,
    FunctionTool,
    MiddlewareException,
    MiddlewareFailure,
    MiddlewareTermination,
)
from agent_framework.exceptions import UserInputRequiredException
from pydantic import ValidationError

from guardrails.agent_framework import _private
from guardrails.engine.decision import REDACTED
from guardrails.engine.scrub import Scrubber

__all__ = [
    "CURRENT_SCRUBBER",
    "EnvironmentSecrets",
    "GuardedToolAbort",
    "GuardedToolError",
    "Scrubber",
    "SecretProvider",
    "SecretUnavailable",
    "enter_scrubbing",
    "install_log_filter",
    "is_clean",
    "leave_scrubbing",
    "plain_result",
    "scrub_content",
    "scrub_host_payload",
    "scrub_json",
    "scrub_result",
    "scrub_value",
    "scrubbed_abort",
    "scrubbed_exception",
    "scrubbed_failure",
    "scrubbed_user_input_request",
    "scrubber_now",
    "sensitive_telemetry_enabled",
    "unchanged",
]


class SecretUnavailable(LookupError):
    """A secret reference could not be resolved. Its text names the reference, never a value."""


@runtime_checkable
class SecretProvider(Protocol):
    """Resolves a secret reference (``{env: NAME}`` in a policy gives ``NAME``) to its value.

    A vault client implements this one method; raising anything blocks the call.
    """

    def get(self, ref: str) -> str: ...


class EnvironmentSecrets:
    """The default provider: process environment variables, read at call time."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._environ = environ

    def get(self, ref: str) -> str:
        environ = os.environ if self._environ is None else self._environ
        try:
            return environ[ref]
        except KeyError:
            raise SecretUnavailable(f"secret {ref!r} is not set in the environment") from None


# The scrubber of the guarded call running in this context (set around the tool call),
# so that framework log records emitted while the tool runs are scrubbed too.
CURRENT_SCRUBBER: contextvars.ContextVar[Callable[[str], str] | None] = contextvars.ContextVar(
    "guardrails_current_scrubber", default=None)


class _ScrubLogRecords(logging.Filter):
    """Agent Framework logs tool arguments at DEBUG (``Function arguments: {...}``) and,
    with sensitive data on, exception texts. While a guarded call runs, scrub them.

    A record's traceback is scrubbed too: it is formatted here, scrubbed, kept as
    ``exc_text`` (which formatters print as is), and ``exc_info`` is dropped. Dropping it,
    not only rewriting the message, is the point: handlers that read ``exc_info`` format
    the exception's text themselves, and the traceback's frames hold the tool's locals.
    The exception's type stays in the text's last line.
    """

    _formatter = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        scrub = scrubber_now()
        if scrub is None:
            return True
        try:
            message = record.getMessage()
        except Exception:
            message = str(record.msg)
        record.msg = scrub(message)
        record.args = None
        if record.exc_info:
            if not record.exc_text:
                try:
                    record.exc_text = self._formatter.formatException(record.exc_info)
                except Exception:
                    exc = record.exc_info[1]
                    record.exc_text = f"{type(exc).__name__} (traceback unavailable)"
            record.exc_info = None
        if record.exc_text:
            record.exc_text = scrub(record.exc_text)
        if record.stack_info:
            record.stack_info = scrub(record.stack_info)
        return True


_RUNNING: dict[object, Callable[[str], str]] = {}
"""The scrubber of every guarded call running in the process, by ``enter_scrubbing``'s key."""
_RUNNING_LOCK = threading.Lock()


def enter_scrubbing(scrub: Callable[[str], str]) -> object:
    """Note a guarded call's scrubber as running (``leave_scrubbing`` with the key returned
    ends it), and put
    the guard's log record factory back in front if it was replaced since (a host's or a
    library's factory that does not chain the one it replaced left records unscrubbed).

    A record made while the call runs in a thread that did not copy its context
    (``loop.run_in_executor``, a ``threading.Thread``, a library's worker pool) has no
    ``CURRENT_SCRUBBER``: it is scrubbed with every running call's scrubber (red team 17b:
    the key went out whole). Scrubbing another thread's record too is the safe side."""
    key = object()
    with _RUNNING_LOCK:
        _RUNNING[key] = scrub
    factory = logging.getLogRecordFactory()
    if not isinstance(factory, _ScrubbingRecordFactory):
        logging.setLogRecordFactory(_ScrubbingRecordFactory(factory))
    return key


def leave_scrubbing(key: object) -> None:
    """The guarded call ``enter_scrubbing`` gave ``key`` has ended."""
    with _RUNNING_LOCK:
        _RUNNING.pop(key, None)


def scrubber_now() -> Callable[[str], str] | None:
    """The scrubber of a log record made now: this context's guarded call's, else, while
    any guarded call runs, all of theirs (see ``enter_scrubbing``); None outside them."""
    scrub = CURRENT_SCRUBBER.get()
    if scrub is not None or not _RUNNING:
        return scrub
    with _RUNNING_LOCK:
        running = tuple(_RUNNING.values())
    if not running:
        return None

    def every(text: str) -> str:
        for one in running:
            text = one(text)
        return text

    return every


_FILTER = _ScrubLogRecords()
_FRAMEWORK_LOGGERS = ("agent_framework", "agent_framework._middleware", "agent_framework._tools",
                      "agent_framework.observability", "agent_framework._mcp",
                      "agent_framework.security", "mcp", "mcp.client.session",
                      "mcp.client.stdio")
_FRAMEWORK_PREFIXES = ("agent_framework.", "mcp.")


def install_log_filter() -> None:
    """Idempotent. Filters act only on records created by the logger they sit on, so the
    filter goes on each framework logger (and the MCP SDK's): the known ones, and every one
    that exists when a guard is built.

    And every record created while a guarded tool runs, by any logger, is scrubbed as it is
    made (the process's log record factory, wrapped): the tool's own libraries log what it
    sends (httpx logs every request's URL at INFO, a key in its query with it; an app logs a
    failure with the exception), and no filter on a logger of theirs is ours to add."""
    existing = [name for name in list(logging.root.manager.loggerDict)
                if isinstance(name, str) and name.startswith(_FRAMEWORK_PREFIXES)]
    for name in (*_FRAMEWORK_LOGGERS, *existing):
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
    factory = logging.getLogRecordFactory()
    if not isinstance(factory, _ScrubbingRecordFactory):
        logging.setLogRecordFactory(_ScrubbingRecordFactory(factory))


class _ScrubbingRecordFactory:
    """The process's log record factory, scrubbing each record made while a guarded tool
    runs in this context (``CURRENT_SCRUBBER``); any other record is made as before."""

    def __init__(self, inner: Callable[..., logging.LogRecord]) -> None:
        self._inner = inner

    def __call__(self, *args: Any, **kwargs: Any) -> logging.LogRecord:
        record = self._inner(*args, **kwargs)
        if CURRENT_SCRUBBER.get() is not None or _RUNNING:
            try:
                _FILTER.filter(record)
            except Exception:  # fail closed: the record says nothing rather than the secret
                record.msg, record.args, record.exc_info = REDACTED, None, None
                record.exc_text = record.stack_info = None
        return record


def sensitive_telemetry_enabled() -> bool:
    """Whether Agent Framework's sensitive-data telemetry is on: its execute_tool span then
    records the tool's arguments, result and exception text. Read at call time."""
    from agent_framework.observability import OBSERVABILITY_SETTINGS

    return bool(OBSERVABILITY_SETTINGS.SENSITIVE_DATA_ENABLED)


# -- what leaves a guarded call ---------------------------------------------------------


def unchanged(text: str) -> str:
    """What a ``Scrubber`` that knows no value and no pattern makes of a text: the text, as
    a plain ``str`` (a subclass may print other than its data). For the walks of a call
    with nothing secret (see ``GuardFunctionMiddleware``), without a scrubber call per text;
    ``tests/test_af_quiet.py`` compares the two."""
    return text if type(text) is str else str.__str__(text)


MAX_CONTENT_DEPTH = 16
"""Nesting of contents (and of the data inside them) the result scrubber walks; anything
deeper becomes ``[REDACTED]`` (fail closed), so a self-referencing content cannot loop."""


def scrub_json(value: Any, scrub: Callable[[str], str]) -> Any:
    """A copy of a JSON-like value with every string scrubbed."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, Mapping):
        return {k: scrub_json(v, scrub) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub_json(v, scrub) for v in value]
    return value


def scrub_value(value: Any, scrub: Scrubber | Callable[[str], str], depth: int = 0) -> Any:
    """A scrubbed copy of anything a tool may hand back: strings scrubbed, map keys too,
    contents walked field by field, numbers whose text holds a secret redacted. An object of
    any other type is replaced by its scrubbed text (it cannot be walked safely). What holds
    nothing secret comes back as the same object (no copy), if it is of a plain type: a
    subclass (of ``str``, ``dict``, ``list``, ``Content``) may print or serialize other than
    its data, so it is always rebuilt as the plain type."""
    kind = type(value)
    if kind is str:
        out = scrub(value)
        return value if out == value else out
    if isinstance(value, str):
        return scrub(str.__str__(value))
    if value is None or kind is bool:
        return value
    if isinstance(value, int | float):
        # Its text, scrubbed like any text: a number is a secret, holds one among its
        # digits, or is one spelled as another type (``73915284.0`` for "73915284").
        text = str(value)
        return REDACTED if scrub(text) != text else value
    if depth >= MAX_CONTENT_DEPTH:
        return REDACTED
    if isinstance(value, Content):
        return scrub_content(value, scrub, depth + 1)
    if kind is dict and not value:  # the common empty ``additional_properties``
        return value
    if kind is dict or isinstance(value, Mapping):
        pairs = [(scrub_value(k, scrub, depth + 1), scrub_value(v, scrub, depth + 1), k, v)
                 for k, v in value.items()]
        if kind is dict and all(k2 is k and v2 is v for k2, v2, k, v in pairs):
            return value
        return {k2: v2 for k2, v2, _, _ in pairs}
    if isinstance(value, list | tuple):
        items = [scrub_value(v, scrub, depth + 1) for v in value]
        if type(value) in (list, tuple) and all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, bytes):
        text = value.decode("utf-8", "replace")
        return value if scrub(text) == text else REDACTED
    return scrub(_safe_text(value))


def scrub_content(item: Content, scrub: Scrubber | Callable[[str], str], depth: int = 0) -> Content:
    """A plain ``Content`` copy of ``item`` with every field scrubbed, whatever its type.

    Generic on purpose: the fields are walked as they are (``uri`` and data: URIs, signed
    links, ``error_code``, ``file_id``, ``additional_properties``, a function result's
    ``result``, code-interpreter ``outputs``, a function call's ``arguments``, nested
    contents...), so a field a framework release adds is scrubbed too. ``raw_representation``
    (the producer's own object, which cannot be walked) is dropped.
    """
    if depth >= MAX_CONTENT_DEPTH:
        return Content.from_text(REDACTED)
    changes: dict[str, Any] = {}
    for name, value in vars(item).items():
        if value is None or name == "type" or isinstance(value, bool):
            continue
        if name == "raw_representation":
            changes[name] = None
            continue
        scrubbed = scrub_value(value, scrub, depth)
        if scrubbed is not value:
            changes[name] = scrubbed
    if not changes and type(item) is Content:
        return item  # nothing secret in it: no copy
    # Always a plain ``Content``: a subclass may serialize or print (``to_dict``,
    # ``__str__``, properties) other than the fields scrubbed here.
    out = Content.__new__(Content)
    vars(out).update(vars(item))
    for name, scrubbed in changes.items():
        try:
            setattr(out, name, scrubbed)
        except Exception:  # a field that refuses the scrubbed value: blank it
            setattr(out, name, None)
    return out


def scrub_result(result: Any, scrub: Scrubber | Callable[[str], str]) -> Any:
    """Tool results reach the model, the response and the session: scrub all of it."""
    if result is None:
        return None
    if isinstance(result, str):
        return scrub(result)
    if isinstance(result, Content):
        return scrub_content(result, scrub)
    items: Sequence[Any]
    if isinstance(result, list) and all(isinstance(i, Content) for i in result):
        items = result
    else:
        try:
            items = FunctionTool.parse_result(result)
        except Exception:
            return scrub(_safe_text(result))
    return [scrub_content(item, scrub) for item in items]


_PLAIN_FIELDS = (str, bool, int)
"""Exact types of a ``Content`` field that ``unchanged`` leaves as they are."""


def plain_result(result: Any) -> Any:
    """``scrub_result(result, unchanged)`` for a tool's usual result, found in one loop
    without a call per field: a ``str``, or a list of exact ``Content`` objects whose
    fields are all None, exact ``str``/``bool``/``int`` values or an empty ``dict``, with no
    ``raw_representation`` (what the framework makes of a text a tool returns). None for
    anything else: the caller takes ``scrub_result``. (tests/test_af_quiet.py compares
    them.)"""
    if type(result) is str:
        return result
    if type(result) is not list:
        return None
    for item in result:
        if type(item) is not Content or item.raw_representation is not None:
            return None  # (scrubbing drops a raw representation, whatever it is)
        for value in vars(item).values():
            if value is None or type(value) in _PLAIN_FIELDS:
                continue
            if type(value) is dict and not value:
                continue
            return None
    return list(result)


def scrub_host_payload(context: Any, scrub: Scrubber | Callable[[str], str]) -> None:
    """The host-only properties the framework attaches to the function result after the
    guard returned (an MCP tool's raw result, its ``_meta``): scrubbed where they wait."""
    carrier = _private.function_result_carrier(context)
    if carrier is None:
        return
    for name in ("additional_properties", "item_additional_properties"):
        value = getattr(carrier, name, None)
        if isinstance(value, Mapping):
            try:
                setattr(carrier, name, scrub_value(dict(value), scrub))
            except Exception:  # fail closed: the host loses its copy, never gets it raw
                setattr(carrier, name, {})


class GuardedToolError(RuntimeError):
    """A tool (or middleware inside the guard) raised; this carries its scrubbed text."""


class GuardedToolAbort(BaseException):
    """A tool raised a ``BaseException`` that is not an ``Exception`` (so it aborts the run
    rather than becoming a tool error); this carries its scrubbed text and aborts the same way."""


def _safe_text(value: object) -> str:
    """``str(value)``, or only its type's name when that raises (fail closed)."""
    try:
        return str(value)
    except Exception:
        return f"<{type(value).__name__}>"


def _exception_text(exc: BaseException) -> str:
    try:
        text = without_inputs(exc, str(exc))
    except Exception:
        return f"{type(exc).__name__} (its text could not be read)"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def without_inputs(exc: BaseException, text: str) -> str:
    """``text`` (the text of ``exc``) with pydantic's rendering of a validation error (``exc``
    itself, or its cause: the framework's argument error quotes it) replaced by one that
    quotes no input. pydantic cuts a long input (``input_value={'key': 'sk-live-ab...``),
    and no spelling of a whole value matches a piece of it inside a larger ``repr``."""
    for error in (exc, exc.__cause__):
        if isinstance(error, ValidationError):
            rendered = str(error)
            if rendered and rendered in text:
                text = text.replace(rendered, _validation_text(error))
    return text


def _validation_text(error: ValidationError) -> str:
    """pydantic's text of a validation error, without the inputs (and links) it quotes."""
    count = error.error_count()
    lines = [f"{count} validation error{'' if count == 1 else 's'} for {error.title}"]
    for item in error.errors(include_input=False, include_url=False, include_context=False):
        lines.append(".".join(str(part) for part in item["loc"]) or "(input)")
        lines.append(f"  {item['msg']} [type={item['type']}]")
    return "\n".join(lines)


def _exception_texts(exc: BaseException) -> Iterator[str]:
    """Every text an exception and what hangs off it carry: its text, notes, arguments,
    its cause and context, and the members of an exception group (bounded)."""
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending and len(seen) < 256:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield _exception_text(current)
        yield from (_safe_text(n) for n in getattr(current, "__notes__", ()) or ())
        yield from (_safe_text(a) for a in current.args)
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
        members = getattr(current, "exceptions", None)
        if isinstance(members, tuple):
            pending.extend(m for m in members if isinstance(m, BaseException))


def is_clean(exc: BaseException, scrub: Callable[[str], str]) -> bool:
    """Whether nothing in ``exc`` (or hanging off it) is secret, now and whenever it is
    read again: an exception that goes out as is must have texts that cannot change."""
    try:
        return _fixed_texts(exc) and all(scrub(t) == t for t in _exception_texts(exc))
    except Exception:
        return False


_PLAIN_ARGS = (str, int, float, bool, bytes, type(None))


def _fixed_texts(exc: BaseException) -> bool:
    """Whether the texts of ``exc`` and all that hangs off it are fixed: the built-in
    ``__str__`` and ``__repr__``, arguments and notes of plain types. An exception (or an
    argument) with its own ``__str__`` may read clean when checked and give the secret
    to the host's log afterwards; such an exception is replaced, never passed on."""
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        if len(seen) >= 256:
            return False
        seen.add(id(current))
        kind = type(current)
        if kind.__str__ is not BaseException.__str__ or kind.__repr__ is not BaseException.__repr__:
            return False
        if not all(type(a) in _PLAIN_ARGS for a in current.args):
            return False
        if not all(type(n) is str for n in getattr(current, "__notes__", ()) or ()):
            return False
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
        members = getattr(current, "exceptions", None)
        if isinstance(members, tuple):
            pending.extend(m for m in members if isinstance(m, BaseException))
    return True


def scrubbed_failure(exc: MiddlewareException, scrub: Callable[[str], str]) -> MiddlewareException:
    """``exc`` itself when nothing in it or its chain is secret, else a scrubbed copy.

    The copy is chained to nothing: raise it outside the handler that caught ``exc``.
    """
    if is_clean(exc, scrub):
        return exc
    if isinstance(exc, MiddlewareTermination):
        return MiddlewareTermination(scrub(_exception_text(exc)), result=exc.result)
    return MiddlewareFailure(scrub(_exception_text(exc)))


def scrubbed_exception(exc: Exception, scrub: Callable[[str], str]) -> Exception:
    """What a tool's exception becomes: the framework's validation error keeps its type
    (so it still reports "Argument parsing failed"), anything else a ``GuardedToolError``."""
    if _private.is_argument_validation_error(exc):
        return _private.scrubbed_validation_error(exc, lambda text: scrub(without_inputs(exc, text)))
    return GuardedToolError(scrub(_exception_text(exc)))


def scrubbed_user_input_request(exc: UserInputRequiredException,
                                scrub: Scrubber | Callable[[str], str]) -> UserInputRequiredException:
    """A tool asking for user input: its contents reach the model, the user and the session."""
    contents = [scrub_value(c, scrub) for c in list(getattr(exc, "contents", None) or [])]
    try:
        message = str(exc)
    except Exception:
        message = "Tool requires user input to proceed."
    return UserInputRequiredException(contents, scrub(message))


def scrubbed_abort(exc: BaseException, scrub: Callable[[str], str]) -> BaseException:
    """A ``BaseException`` that is not an ``Exception``: itself when clean; a cancellation,
    interrupt or exit keeps its type with scrubbed text; anything else a ``GuardedToolAbort``."""
    if is_clean(exc, scrub):
        return exc
    text = scrub(_exception_text(exc))
    if isinstance(exc, asyncio.CancelledError):
        return asyncio.CancelledError(text)
    if isinstance(exc, KeyboardInterrupt):
        return KeyboardInterrupt(text)
    if isinstance(exc, SystemExit):
        return SystemExit(text)
    return GuardedToolAbort(text)
