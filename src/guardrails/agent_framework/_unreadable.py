"""Arguments the framework's own JSON parser cannot read, caught before it tries.

The function-invocation loop parses each call's argument text with ``json.loads``
(``Content.parse_arguments``) before any function middleware runs, and catches only
``JSONDecodeError`` and ``TypeError``: text nested some 990 levels deep raises
``RecursionError`` and an integer of more than ``sys.get_int_max_str_digits()`` (4,300)
digits raises ``ValueError``, and either ends the whole run. The guard sees each batch of
calls before the framework executes it (``_private.install_batch_check``: a model turn's
calls, or the approved calls a run replays), finds such text with a scan linear in its
length (regular expressions and C-level counting, never a parse) and replaces the arguments
with :func:`marker` (a small mapping the framework takes as it is), noting the call's id in
the run. The function middleware denies a call carrying the marker or noted (:func:`message`,
:func:`replaced`) without reading anything else: the tool never runs, the run goes on, and
nothing of the raw text reaches the model, the logs or the spans. Arguments a chat client
delivered already parsed are checked the same way: no mapping, nested deeper than the
framework's argument token can recurse, or containing themselves. Only in a guarded run
whose function middleware pipeline holds the guard (:func:`check_batch`); everywhere else
the framework behaves as it does without a guard.
"""

from __future__ import annotations

import functools
import operator
import re
import sys
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from itertools import accumulate, count
from typing import Any

from agent_framework import ChatContext, ChatMiddleware

from guardrails.agent_framework import _private
from guardrails.agent_framework._boundary import _GuardHalt
from guardrails.agent_framework._state import RUN, RunState

__all__ = ["MARKER", "PARSE_DEPTH", "GuardChatMiddleware", "UnreadableArguments",
           "check_batch", "install", "marker", "message", "repair", "replaced", "unreadable"]

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
"""Frames the loop's parse may run deeper than the scan (measured: it runs in each call's
own task, some 11 frames shallower than the batch check, streaming or not; 15-20 shallower
than the chat middleware that checked before)."""

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


def _note(run: RunState, call_id: Any, reason: str) -> None:
    """Tell the run's function middleware that this call's arguments were replaced: the
    marker itself may not reach it (see ``RunState.unreadable``)."""
    if not isinstance(call_id, str):
        return
    if run.unreadable is None:
        run.unreadable = {}
    run.unreadable.setdefault(call_id, reason)


def _call_id_of(content: Any) -> str:
    """The id the function middleware sees a replaced call by, given to it now when it has
    none. The framework gives a model's call without an id its occurrence id (``Content.id``,
    generated when missing) before the batch runs, but an approved call a host replays may
    still have none: the note is made under the id the call then runs under, and a tool
    whose every parameter has a default never runs on the marker (red team 17b)."""
    call_id = content.call_id
    if isinstance(call_id, str) and call_id:
        return call_id
    if not (isinstance(content.id, str) and content.id):
        content.id = f"guardrails-{uuid.uuid4().hex}"
    content.call_id = content.id
    found: str = content.id
    return found


def replaced(run: RunState | None, call_id: str | None) -> str | None:
    """The marker's reason when the guard replaced this call's arguments in this run,
    else None."""
    if run is None or run.unreadable is None or call_id is None:
        return None
    return run.unreadable.get(call_id)


def repair(calls: Iterable[Any], run: RunState) -> None:
    """Replace, in each call (a ``function_call`` content, or the call an approval response
    carries), arguments the framework cannot read with :func:`marker`, noting the call's id
    in ``run``. Linear in the arguments; the framework's parser never sees them."""
    depth: int | None = None
    for item in calls:
        content = item.function_call if item.type == "function_approval_response" else item
        if content is None or content.type != "function_call":
            continue
        arguments = content.arguments
        if arguments is None:
            continue
        try:
            if isinstance(arguments, str):
                reason = unreadable(arguments)  # (its own check of the stack)
            elif _flat(arguments) and not _beyond_parse_depth(1):
                # One level on a stack with room for it: what ``_parsed_unreadable`` says at
                # any depth of at least 1, without walking the stack (``parse_depth``). A
                # marker already there (a replaced call approved in an earlier run, replayed
                # now) is noted again: this run's function middleware denies it by its id.
                # One the client wrote itself is denied the same way, its value not kept.
                reason = None
                if MARKER in arguments:
                    found = arguments[MARKER]
                    reason = found if found in _REASONS else "forged"
            else:
                if depth is None:
                    depth = parse_depth()
                reason = _parsed_unreadable(arguments, depth)
        except Exception:  # fail closed: arguments that cannot be checked are not read
            reason = "object"
        if reason is not None:
            content.arguments = marker(reason)
            _note(run, _call_id_of(content), reason)


_READER: list[type] = []
"""The function middleware class that denies the marker (``GuardFunctionMiddleware``)."""


def check_batch(calls: Sequence[Any], middleware: Sequence[Any]) -> bool:
    """``_private.install_batch_check``'s check: :func:`repair` a batch the framework is
    about to execute, only inside a guarded run (``RUN`` set by the run boundary) whose
    pipeline holds the guard's function middleware, which denies the marker. Anywhere else
    (an agent without ``guard()``, one nested in a guarded run's tool, a run boundary
    without the function middleware) the framework's own behaviour stays as it is: the
    marker never reaches a tool no guard will judge."""
    run = RUN.get()
    if run is None or not calls:
        return False
    reader = _READER[0]
    for item in middleware:
        if isinstance(item, reader):
            repair(calls, run)
            return True
    return False


def batch_done() -> None:
    """A batch the guard judged is over: a run halted meanwhile ends here, before the
    framework sends the batch's results to the model. A halt normally ends the batch by
    itself; a middleware before the guard that turned it into a result or a tool error
    let the framework ask the model once more, with the halted batch's results (red
    team 27), where a streamed run already ended at the batch."""
    run = RUN.get()
    if run is None or not (run.halted or run.parent is not None):
        return
    stopped = run.stopped_by()
    if stopped is not None:
        raise _GuardHalt(stopped)


def install(reader: type) -> bool:
    """Check every batch of calls, once per process, for arguments the framework's parser
    cannot read; ``reader``: the function middleware that denies the marker. Whether the
    check is installed (see ``_private.install_batch_check``)."""
    if not _READER:
        _READER.append(reader)
    return _private.install_batch_check(check_batch, batch_done)


class GuardChatMiddleware(ChatMiddleware):
    """Does nothing: kept so that middleware lists built with it still work.

    It used to replace, in every model response, the arguments the framework cannot parse;
    the guard now does that where the framework executes a batch of calls
    (:func:`check_batch`), without the framework's dispatch of a chat middleware on every
    model request. ``guard()`` no longer returns it; a list that still adds it only pays
    that dispatch."""

    async def process(self, context: ChatContext,
                      call_next: Callable[[], Awaitable[None]]) -> None:
        await call_next()
