"""Secret values: where injected ones come from, and how every known one is scrubbed."""

from __future__ import annotations

import contextvars
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

from guardrails.engine.decision import REDACTED

__all__ = ["EnvironmentSecrets", "Scrubber", "SecretProvider", "SecretUnavailable"]


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


_MIN_NON_TEXT_LENGTH = 4
"""Non-string secret values shorter than this are not scrubbed as text (a secret ``0``
would otherwise erase every zero in a result)."""


class Scrubber:
    """Removes known secret values, then the policies' redact patterns, from a text."""

    def __init__(self, values: Iterable[Any], patterns: Callable[[str], str]) -> None:
        texts: set[str] = set()
        for value in values:
            texts.update(_value_texts(value))
        # Longest first, so a secret that contains another is removed whole.
        self._values = sorted(texts, key=len, reverse=True)
        self._patterns = patterns

    @property
    def values(self) -> tuple[str, ...]:
        return tuple(self._values)

    def __call__(self, text: str) -> str:
        for value in self._values:
            if value in text:
                text = text.replace(value, REDACTED)
        try:
            return self._patterns(text)
        except Exception:  # a broken pattern must not let the text out unscrubbed
            return REDACTED


def _value_texts(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        if value:
            yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _value_texts(item)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            yield from _value_texts(item)
    elif value is not None and not isinstance(value, bool):
        text = str(value)
        if len(text) >= _MIN_NON_TEXT_LENGTH:
            yield text


# The scrubber of the guarded call running in this context (set around the tool call),
# so that framework log records emitted while the tool runs are scrubbed too.
CURRENT_SCRUBBER: contextvars.ContextVar[Scrubber | None] = contextvars.ContextVar(
    "guardrails_current_scrubber", default=None)


class _ScrubLogRecords(logging.Filter):
    """Agent Framework logs tool arguments at DEBUG (``Function arguments: {...}``) and,
    with sensitive data on, exception texts. While a guarded call runs, scrub them."""

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
