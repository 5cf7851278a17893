"""Arguments the framework's own JSON parser cannot read, caught before it tries.

The function-invocation loop parses each call's argument text with ``json.loads``
(``Content.parse_arguments``) before any function middleware runs, and catches only
``JSONDecodeError`` and ``TypeError``: text nested some 990 levels deep raises
``RecursionError`` and an integer of more than ``sys.get_int_max_str_digits()`` (4,300)
digits raises ``ValueError``, and either ends the whole run. A chat middleware runs inside
that loop, so it sees each model response first: :class:`GuardChatMiddleware` finds such
text with a scan linear in its length (regular expressions and C-level counting, never a
parse) and replaces the arguments with :func:`marker` (a small mapping the framework takes
as it is). The function middleware denies a call carrying the marker (:func:`message`)
without reading anything else: the tool never runs, the run goes on, and nothing of the
raw text reaches the model, the logs or the spans. Arguments a chat client delivered
already parsed are checked the same way: no mapping, nested deeper than the framework's
argument token can recurse, or containing themselves.
"""

from __future__ import annotations

import functools
import operator
import re
import sys
import uuid
from collections.abc import Awaitable, Callable, Mapping
from itertools import accumulate, count
from typing import Any

from agent_framework import ChatContext, ChatMiddleware, ChatResponse

from guardrails.agent_framework._state import RUN, RunState

__all__ = ["MARKER", "PARSE_DEPTH", "GuardChatMiddleware", "UnreadableArguments", "marker",
           "message", "replaced", "unreadable"]

PARSE_DEPTH = 200
"""Nesting the guard lets through to the framework's parser: well under the ~990 levels where
``json.loads`` runs out of stack (less when the host's stack is already deep), far over the
engine's input bound (``Limits.max_input_depth``, 32), so calls this deep are denied anyway."""

MARKER = "guardrails:unreadable-arguments"
"""The one key of the replacement arguments. Not a Python identifier, so no function tool
has such a parameter; a model that writes it itself only gets its own call denied (beside
arguments that validate, the framework drops it as an unknown key before any middleware, and
the call is decided on the rest like any other)."""

_SLACK = 50
"""Frames the loop's parse may run deeper than the scan (measured: it runs some 15-20
shallower, streaming or not)."""

_REASONS = ("depth", "digits", "object")

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
"""A JSON string literal (escapes included): brackets and digits inside it do not count. The
closing quote is optional, so every match ends where its scan ended and the search is linear
(an unterminated string runs to the end of the text: the framework's parser refuses that
with a ``JSONDecodeError``, which it handles)."""
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEPS = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")


@functools.lru_cache(maxsize=4)
def _long_integer(limit: int) -> re.Pattern[str]:
    """An integer literal of more than ``limit`` digits (not a float's fraction, exponent
    or integer part: those go to ``float``, which reads any length).

    The lookahead is the parser's own rule (``_json.c`` ``_match_number``): a run of digits
    is a float's integer part only when a ``.`` *and a digit* or an ``e``/``E``, an optional
    sign *and a digit* follow; ``123...9.`` or ``123...9e]`` is an integer, which ``int``
    refuses. ASCII digits only, as the parser reads them."""
    return re.compile(rf"(?<![0-9.eE+-])-?[0-9]{{{limit + 1},}}(?![0-9]|\.[0-9]|[eE][+-]?[0-9])")


def parse_depth() -> int:
    """The nesting the framework's parser can take on a stack as deep as this one:
    ``PARSE_DEPTH``, or less when the host lowered the recursion limit or runs the loop on a
    stack already deep. On CPython 3.11 the parser's C recursion counts against
    ``sys.getrecursionlimit()`` together with the Python frames below it: a host limit of
    200 let 199 levels through and ended the run with ``RecursionError``."""
    frame: Any = sys._getframe()
    used = 0
    while frame is not None:
        used += 1
        frame = frame.f_back
    return max(0, min(PARSE_DEPTH, sys.getrecursionlimit() - used - _SLACK))


def _beyond_parse_depth(brackets: int) -> bool:
    """``brackets > parse_depth()`` for a caller at the same level, without walking the
    stack frame by frame: the stack is shallow enough exactly when it has no frame at
    the index where ``brackets`` more levels would reach the limit (``sys._getframe``
    finds that in C)."""
    if brackets <= 0:
        return False
    if brackets > PARSE_DEPTH:
        return True
    index = sys.getrecursionlimit() - _SLACK - brackets
    if index < 1:  # parse_depth counts this frame: at least one
        return True
    try:
        sys._getframe(index)
    except ValueError:
        return False  # at most ``index`` frames: brackets <= limit - frames - slack
    return True


def unreadable(text: str, depth: int | None = None) -> str | None:
    """Why ``json.loads(text)`` would raise something other than a ``JSONDecodeError`` (a
    reason in ``_REASONS``), else None. Linear in the text's length; short text (fewer
    brackets than the nesting ``depth`` allowed, :func:`parse_depth` unless given, fewer
    characters than the digit limit) is not scanned."""
    text = str.__str__(text)
    brackets = text.count("[") + text.count("{")
    if depth is None:
        deep = _beyond_parse_depth(brackets)
        depth = parse_depth() if deep else PARSE_DEPTH
    else:
        deep = brackets > depth
    limit = sys.get_int_max_str_digits()
    long = 0 < limit < len(text)
    if not (deep or long):
        return None
    bare = _STRING.sub('""', text)
    if deep:
        steps = _NOT_BRACKET.sub("", bare).encode("ascii").translate(_STEPS)
        # Each opener adds 2 and every bracket takes 1: the running sum minus the count
        # is the nesting depth after each bracket.
        if max(map(operator.sub, accumulate(steps), count(1)), default=0) > depth:
            return "depth"
    if long and _long_integer(limit).search(bare) is not None:
        return "digits"
    return None


class UnreadableArguments(Exception):
    """What the call's span records (its type only) for a call denied this way."""


def marker(reason: str) -> dict[str, str]:
    """The arguments that replace unreadable ones: JSON data the framework passes on."""
    return {MARKER: reason}


def message(arguments: Any) -> str | None:
    """The model's explanation for a call whose arguments are the marker, else None.

    Fixed texts only: a forged marker's own value is never quoted back."""
    if type(arguments) is dict:  # the usual call: no ABC check
        if MARKER not in arguments:
            return None
    elif not isinstance(arguments, Mapping) or MARKER not in arguments:
        return None
    reason = arguments.get(MARKER)
    if reason == "depth":
        why = f"nested deeper than {PARSE_DEPTH} levels"
    elif reason == "digits":
        why = f"a number with more than {sys.get_int_max_str_digits():,} digits"
    elif reason == "object":
        why = "not a JSON object"
    else:
        why = "not JSON the framework can parse"
    return f"The arguments could not be read: {why}."


def _no_mapping(arguments: Any) -> bool:
    """Arguments a chat client delivered already parsed that the loop's
    ``dict(content.parse_arguments() or {})`` cannot turn into a mapping (a list of numbers, a
    number, bytes): ``TypeError`` or ``ValueError`` there ended the run. Empty ones read as
    ``{}`` and a list of pairs as the mapping it spells; both are left to the framework."""
    if arguments is None or type(arguments) is dict or isinstance(arguments, (str, Mapping)) \
            or not arguments:
        return False
    if isinstance(arguments, (list, tuple)):
        try:
            dict(arguments)
        except (TypeError, ValueError):
            return True
        return False
    return True


_LEAVES = frozenset({str, int, float, bool, type(None)})


def _too_deep(arguments: Any, depth: int) -> str | None:
    """Why arguments a chat client delivered already parsed would end the run: containers
    nested deeper than ``depth`` ("depth": the framework's argument token, and the guard's,
    recurse once a level; a dict 1,000 levels deep raised ``RecursionError`` out of the
    loop), or a container met twice ("object": a cycle is endlessly deep, and JSON never
    shares one). Level by level, each container read once: linear, no recursion."""
    seen: set[int] = set()
    level = [arguments]
    for _ in range(depth + 1):
        below: list[Any] = []
        for value in level:
            kind = type(value)
            if kind in _LEAVES:  # exact types first: the ABC check is the slow part
                continue
            if kind is dict or (kind is not list and isinstance(value, Mapping)):
                children: Any = value.values()
            elif kind is list or isinstance(value, tuple):
                children = value
            else:
                continue
            if id(value) in seen:
                return "object"
            seen.add(id(value))
            below.extend(children)
        if not below:
            return None
        level = below
    return "depth"


def _parsed_unreadable(arguments: Any, depth: int) -> str | None:
    """Why parsed arguments (not text) would end the run, else None."""
    if _no_mapping(arguments):
        return "object"
    try:
        return _too_deep(arguments, depth)
    except Exception:  # a mapping whose values cannot be read is no JSON object
        return "object"


def _flat(arguments: Any) -> bool:
    """Whether parsed arguments are an exact ``dict`` of scalars (JSON leaves): the usual
    call. Such a mapping nests one level and cannot contain itself, so on any stack with
    room for one level the framework reads it (``_parsed_unreadable`` finds nothing)."""
    if type(arguments) is not dict:
        return False
    for value in arguments.values():  # noqa: SIM110 - a loop, not all(): no generator
        if type(value) not in _LEAVES:
            return False
    return True


def _note(call_id: Any, reason: str) -> None:
    """Tell the run's function middleware that this call's arguments were replaced: the
    marker itself may not reach it (see ``RunState.unreadable``). Outside a guarded run
    (no run boundary) only the marker tells."""
    run = RUN.get()
    if run is None or not isinstance(call_id, str):
        return
    if run.unreadable is None:
        run.unreadable = {}
    run.unreadable.setdefault(call_id, reason)


def _call_id_of(content: Any) -> str:
    """The id the function middleware sees a replaced call by, given to it now when the
    model left it empty. The framework gives a call without an id its occurrence id
    (``Content.id``, generated when missing), but only after the chat middleware: the note
    was made under ``""``, the call then ran under another id, and a tool whose every
    parameter has a default ran on the marker (red team 17b). Set here first, the framework
    keeps it, and the note and the call agree."""
    call_id = content.call_id
    if isinstance(call_id, str) and call_id:
        return call_id
    if not (isinstance(content.id, str) and content.id):
        content.id = f"guardrails-{uuid.uuid4().hex}"
    content.call_id = content.id
    found: str = content.id
    return found


def replaced(run: RunState | None, call_id: str | None) -> str | None:
    """The marker's reason when the chat middleware replaced this call's arguments in
    this run, else None."""
    if run is None or run.unreadable is None or call_id is None:
        return None
    return run.unreadable.get(call_id)


def _repair(response: ChatResponse) -> ChatResponse:
    depth: int | None = None
    for item in response.messages:
        for content in item.contents:
            if content.type != "function_call" or content.arguments is None:
                continue
            if isinstance(content.arguments, str):
                reason = unreadable(content.arguments)  # (its own check of the stack)
            elif _flat(content.arguments) and not _beyond_parse_depth(1):
                # One level on a stack with room for it: what ``_parsed_unreadable`` says
                # at any depth of at least 1, without walking the stack (``parse_depth``).
                reason = None
            else:
                if depth is None:
                    depth = parse_depth()
                reason = _parsed_unreadable(content.arguments, depth)
            if reason is not None:
                content.arguments = marker(reason)
                _note(_call_id_of(content), reason)
    return response


class GuardChatMiddleware(ChatMiddleware):
    """Replaces, in every model response, the arguments the framework cannot parse.

    Streaming: on the finished response the loop executes (the updates may split the
    arguments anywhere, so only the whole text can be judged); the updates the caller sees
    stream on as the model wrote them."""

    async def process(self, context: ChatContext,
                      call_next: Callable[[], Awaitable[None]]) -> None:
        if context.stream:
            context.stream_result_hooks.append(_repair)
        await call_next()
        if not context.stream and isinstance(context.result, ChatResponse):
            _repair(context.result)
