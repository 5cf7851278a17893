"""Secret values: where injected ones come from, and how every known one is scrubbed.

Everything that leaves a guarded call passes through the engine's ``Scrubber``: the tool's
result (what the model reads), its exception (the framework does not redact tool
exceptions), the framework's log records while the tool runs (their tracebacks included),
and the arguments kept in history.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from agent_framework import (
    Content,
    FunctionTool,
    MiddlewareException,
    MiddlewareFailure,
    MiddlewareTermination,
)

from guardrails.agent_framework import _private
from guardrails.engine.scrub import Scrubber

__all__ = [
    "CURRENT_SCRUBBER",
    "EnvironmentSecrets",
    "GuardedToolError",
    "Scrubber",
    "SecretProvider",
    "SecretUnavailable",
    "install_log_filter",
    "scrub_json",
    "scrub_result",
    "scrubbed_exception",
    "scrubbed_failure",
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
CURRENT_SCRUBBER: contextvars.ContextVar[Scrubber | None] = contextvars.ContextVar(
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
        scrub = CURRENT_SCRUBBER.get()
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


_FILTER = _ScrubLogRecords()
_FRAMEWORK_LOGGERS = ("agent_framework", "agent_framework._middleware", "agent_framework._tools",
                      "agent_framework.observability")


def install_log_filter() -> None:
    """Idempotent. Filters act only on records created by the logger they sit on."""
    for name in _FRAMEWORK_LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)


# -- what leaves a guarded call ---------------------------------------------------------


def scrub_json(value: Any, scrub: Callable[[str], str]) -> Any:
    """A copy of a JSON-like value with every string scrubbed."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, Mapping):
        return {k: scrub_json(v, scrub) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub_json(v, scrub) for v in value]
    return value


def scrub_result(result: Any, scrub: Callable[[str], str]) -> Any:
    """Tool results reach the model: scrub the text the framework will send."""
    if result is None:
        return None
    if isinstance(result, str):
        return scrub(result)
    if isinstance(result, Content) and result.type == "function_approval_request":
        return _scrub_approval_request(result, scrub)
    items: Sequence[Any]
    if isinstance(result, list) and all(isinstance(i, Content) for i in result):
        items = result
    else:
        try:
            items = FunctionTool.parse_result(result)
        except Exception:
            return scrub(str(result))
    scrubbed: list[Content] = []
    for item in items:
        if item.type == "text" and item.text is not None:
            scrubbed.append(Content.from_text(scrub(item.text),
                                              additional_properties=dict(item.additional_properties)))
        else:
            scrubbed.append(_scrub_content(item, scrub))
    return scrubbed


def _scrub_approval_request(item: Content, scrub: Callable[[str], str]) -> Content:
    """An approval request coming back from inside the guard (a nested guard's, or one a
    tool made up) is shown to the user and kept in the transcript: scrub what it quotes."""
    call = item.function_call
    if call is not None and isinstance(call.arguments, Mapping):
        scrubbed = scrub_json(dict(call.arguments), scrub)
        if scrubbed != call.arguments:
            call.arguments = scrubbed
    elif call is not None and isinstance(call.arguments, str):
        call.arguments = scrub(call.arguments)
    properties = scrub_json(dict(item.additional_properties or {}), scrub)
    if properties != item.additional_properties:
        item.additional_properties = properties
    return item


def _scrub_content(item: Content, scrub: Callable[[str], str]) -> Content:
    """Non-text items: keep binary payloads, scrub any text they carry."""
    if item.type == "function_approval_request":
        return _scrub_approval_request(item, scrub)
    for name in ("text", "message", "error_details"):
        value = getattr(item, name, None)
        if isinstance(value, str):
            with contextlib.suppress(Exception):
                setattr(item, name, scrub(value))
    return item


class GuardedToolError(RuntimeError):
    """A tool (or middleware inside the guard) raised; this carries its scrubbed text."""


def _exception_texts(exc: BaseException) -> Iterator[str]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield str(current)
        yield from (str(n) for n in getattr(current, "__notes__", ()))
        current = current.__cause__ or current.__context__


def scrubbed_failure(exc: MiddlewareException, scrub: Callable[[str], str]) -> MiddlewareException:
    """``exc`` itself when nothing in it or its chain is secret, else a scrubbed copy.

    The copy is chained to nothing: raise it outside the handler that caught ``exc``.
    """
    if all(scrub(t) == t for t in _exception_texts(exc)):
        return exc
    if isinstance(exc, MiddlewareTermination):
        return MiddlewareTermination(scrub(str(exc)), result=exc.result)
    return MiddlewareFailure(scrub(str(exc)))


def scrubbed_exception(exc: Exception, scrub: Callable[[str], str]) -> Exception:
    """What a tool's exception becomes: the framework's validation error keeps its type
    (so it still reports "Argument parsing failed"), anything else a ``GuardedToolError``."""
    if _private.is_argument_validation_error(exc):
        return _private.scrubbed_validation_error(exc, scrub)
    return GuardedToolError(scrub(f"{type(exc).__name__}: {exc}"))
