"""CEL runtime values as Python values.

The mapping is chosen so the common case costs nothing: JSON-decoded arguments are
already CEL values. ``int`` is CEL int (int64), ``UInt`` CEL uint, ``float`` double,
``bool`` bool (always test ``type(x) is bool`` first: bool is an int in Python),
``str`` string, ``bytes`` bytes, ``None`` null, ``list``/``tuple`` list,
``dict`` (or any ``Mapping``) map, ``datetime`` (aware, UTC) timestamp,
``timedelta`` duration, ``CelType`` type values. Extension types (URL, IP, CIDR) are
plain Python classes that declare ``cel_type``.

Evaluation errors are raised as ``CelError``; ``&&``, ``||`` and ``?:`` absorb them as
cel-spec says. Raising keeps the error-free path (almost every call) free of checks.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import Any, ClassVar, Final, Protocol, TypeVar

INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
UINT64_MAX: Final = 2**64 - 1


class CelError(Exception):
    """An evaluation error: a value in CEL's semantics, an exception in Python."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


_Error = TypeVar("_Error", bound=BaseException)


def untraced(error: _Error) -> _Error:
    """A caught error to keep (as a value, or as the first error of ``&&``, ``||`` or a
    macro): without its traceback and the exceptions it was raised while handling, whose
    frames hold the one that keeps it (a reference cycle that would hold the call's inputs
    for the cyclic collector). Only its type and message are ever read."""
    error.__context__ = error.__cause__ = None
    return error.with_traceback(None)


def again(error: CelError) -> CelError:
    """A kept error raised as a new exception of its type and message: raised itself, its
    traceback would hold the frame that keeps it (the cycle ``untraced`` avoids)."""
    return type(error)(error.message)


class CostLimitExceeded(CelError):
    """The per-evaluation cost budget ran out (a run-time bound, see ``Limits``)."""


class MatchBoundExceeded(CelError):
    """A regex function went through more matches than one call may
    (``limits.MAX_MATCHES``): the call site makes the call over its cost bound."""


class UInt(int):
    """CEL ``uint``: an int tagged so arithmetic and ``type()`` can tell it apart."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"{int(self)}u"


class CelType:
    """A CEL type value, as returned by ``type(x)``; compared by name."""

    __slots__ = ("name",)
    registry: ClassVar[dict[str, CelType]] = {}

    def __init__(self, name: str) -> None:
        self.name = name

    @classmethod
    def named(cls, name: str) -> CelType:
        found = cls.registry.get(name)
        if found is None:
            found = cls.registry[name] = cls(name)
        return found

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CelType) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("CelType", self.name))

    def __repr__(self) -> str:
        return self.name


INT: Final = CelType.named("int")
UINT: Final = CelType.named("uint")
DOUBLE: Final = CelType.named("double")
BOOL: Final = CelType.named("bool")
STRING: Final = CelType.named("string")
BYTES: Final = CelType.named("bytes")
LIST: Final = CelType.named("list")
MAP: Final = CelType.named("map")
NULL_TYPE: Final = CelType.named("null_type")
TYPE: Final = CelType.named("type")
TIMESTAMP: Final = CelType.named("google.protobuf.Timestamp")
DURATION: Final = CelType.named("google.protobuf.Duration")


def type_name(value: Any) -> str:
    """The CEL type name of a runtime value, for error messages and ``type()``."""
    return cel_type(value).name


def type_names(values: Iterable[Any]) -> str:
    """``int, string`` for an error message. A value that is not a CEL value (a library
    bug, a host object) shows its Python type, so the message itself never fails."""
    names = []
    for v in values:
        try:
            names.append(type_name(v))
        except CelError:
            names.append(type(v).__name__)
    return ", ".join(names)


def cel_type(value: Any) -> CelType:
    import datetime
    from collections.abc import Mapping

    t = type(value)
    if t is bool:
        return BOOL
    if t is UInt:
        return UINT
    if t is int:
        return INT
    if t is float:
        return DOUBLE
    if t is str:
        return STRING
    if t is bytes:
        return BYTES
    if value is None:
        return NULL_TYPE
    if t is list or t is tuple:
        return LIST
    if t is dict or isinstance(value, Mapping):
        return MAP
    if t is CelType:
        return TYPE
    if isinstance(value, datetime.datetime):
        return TIMESTAMP
    if isinstance(value, datetime.timedelta):
        return DURATION
    declared = getattr(value, "cel_type", None)
    if isinstance(declared, CelType):
        return declared
    raise CelError(f"value of Python type {t.__name__} is not a CEL value")


class Optional:
    """cel-go's optional value: ``optional.of(x)`` or ``optional.none()``.

    Optional reads (``args.?timeout_s.orValue(30)``) are the safe way to read an argument
    a call may leave out. Immutable; ``NONE`` is the one empty optional. CEL equality of
    optionals (both empty, or equal values) is ``stdlib.eq``'s, like every other type's.
    """

    __slots__ = ("_value",)
    cel_type: ClassVar[CelType] = CelType.named("optional_type")
    _ABSENT: ClassVar[object] = object()

    def __init__(self, value: Any = _ABSENT) -> None:
        self._value = value

    @property
    def has_value(self) -> bool:
        return self._value is not Optional._ABSENT

    @property
    def value(self) -> Any:
        if self._value is Optional._ABSENT:
            raise CelError("optional.none() dereference")
        return self._value

    def __repr__(self) -> str:
        return f"optional.of({self._value!r})" if self.has_value else "optional.none()"


NONE: Final = Optional()


class _Evaluates(Protocol):
    def evaluate(self, bindings: Mapping[str, Any]) -> Any: ...


_NOT_DONE: Any = object()
"""``Variables``' marker of a variable not evaluated yet."""
_NO_BINDINGS: Mapping[str, Any] = MappingProxyType({})
"""``Variables.bindings`` until the engine sets them (one shared empty map, not one per call)."""


class Variables(Mapping[str, Any]):
    """A policy's ``variables`` for one call: each evaluated at most once, on first read,
    against ``bindings`` (which hold this map: a variable can read earlier ones).

    Generated code reads an entry as it reads a dict's (``v._done[k]`` once computed,
    else ``v[k]`` when ``k in v._defs``), not through the generic ``select``: the same
    value or error, three or four calls less for every read. A failure is remembered and raised again on every read, as a
    ``CelError`` naming the variable.

    A failure is remembered by its message, never as the exception: a raised exception holds
    its traceback, whose frames hold this map (a reference cycle that would keep the whole
    call's inputs for the cyclic collector).
    """

    __slots__ = ("_defs", "_done", "_errors", "bindings")

    def __init__(self, defs: Mapping[str, _Evaluates]) -> None:
        self._defs = defs
        self._done: dict[str, Any] = {}
        self._errors: dict[str, str] = {}
        self.bindings: Mapping[str, Any] = _NO_BINDINGS

    def __getitem__(self, name: str) -> Any:
        value = self._done.get(name, _NOT_DONE)  # not a KeyError caught: every first read
        if value is not _NOT_DONE:
            return value
        failed = self._errors.get(name)
        if failed is None:
            program = self._defs.get(name)
            if program is None:
                raise KeyError(name)
            try:
                value = program.evaluate(self.bindings)
            except Exception as e:
                failed = f"variable {name}: {error_message(e)}"
                self._errors[name] = failed
            else:
                self._done[name] = value
                return value
        raise CelError(failed)  # outside the handler: no context chained

    def __iter__(self) -> Iterator[str]:
        return iter(self._defs)

    def __len__(self) -> int:
        return len(self._defs)


def error_message(e: BaseException) -> str:
    """The text of an evaluation failure: a ``CelError``'s own; for anything else (an
    engine bug, which must fail closed rather than escape) only its type, since its text
    may quote data."""
    if isinstance(e, CelError):
        return e.message
    if isinstance(e, RecursionError):
        return "evaluation too deep"
    return f"internal evaluation error: {type(e).__name__}"
