"""``history``: the executed and blocked calls of the session (or run) that rules read.

Kept in the session's state when the run has one (so it survives across runs), else in
the run's state. Bounded (oldest dropped first), and redacted before it is stored:
declared secret arguments become ``[REDACTED]`` and every other string is scrubbed, since
the session may be saved, logged or shown, and a later decision record quotes history.

Each entry is ``{tool, args, effect, result, trusted, at}``: ``result`` is the text the
model got from the tool (already scrubbed, cut at ``RESULT_LIMIT``), filled in when the
tool returns (the entry itself is appended before the tool runs, so the sibling calls of
a parallel batch see it); ``at`` is RFC 3339 text, so a session stays JSON. A quiet call
of a run without a session is recorded unbuilt (``Unbuilt``): the same entry, built when
the run's history is first read (never, for the run's last call).

Between reading the history and recording itself a call usually lets nothing else run, so
every sibling decides on a history holding every call decided before it. A call that waits
in between (its counter store counts in a worker thread) holds the history's turn
(``HistoryTurn``) until it is recorded, and is decided again if a sibling was recorded
meanwhile. Another thread (a host serving requests in threads, each with its own event
loop, may run two on one session) runs whenever this one lets go of the GIL, a secret
provider's round trip to its vault say: so the reading of a session's history (or the
last look at it of a call decided again) and the call's record are one section of that
history across threads (``HistoryTurn.enter``; red team 20: a payment of 600 in each of
two threads passed a limit of 1,000).
"""

from __future__ import annotations

import asyncio
import datetime
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from agent_framework import Content

from guardrails.agent_framework._locks import FairLock
from guardrails.agent_framework._secrets import Scrubber, unchanged
from guardrails.agent_framework._state import RunState, session_state
from guardrails.engine.decision import REDACTED
from guardrails.engine.evaluate import NODE_COST
from guardrails.expr.lib_provenance import kept_reading

__all__ = ["HISTORY_ENTRY_BYTES", "HISTORY_LIMIT", "RESULT_LIMIT", "HistoryTurn", "Unbuilt",
           "history_mark", "history_of", "plain_entry", "record", "record_unbuilt", "redacted",
           "result_text", "set_result"]

HISTORY_LIMIT = 50
"""Entries of ``history`` kept per session (or run); the engine bounds it again."""

RESULT_LIMIT = 65_536
"""Characters of a tool's result kept in its history entry (the engine's per-entry bound)."""


def history_of(state: dict[str, Any] | None, run: RunState | None) -> list[dict[str, Any]] | None:
    """The history list to read and append to: the session's, else the run's, else None.
    A run's entries recorded unbuilt (``record_unbuilt``) are built first: whoever reads
    the list reads plain entries."""
    if state is not None:
        history = state.get("history")
        if not isinstance(history, list):
            history = state["history"] = []
        return history
    if run is None:
        return None
    if run.unbuilt:
        _build_all(run)
    return run.history


class _Turns:
    """The turn of one history (one session, or one run without a session) on one event
    loop: the lock its waiting calls hold, and how many calls hold it or wait for it."""

    __slots__ = ("lock", "owner", "users")

    def __init__(self, owner: object) -> None:
        self.owner = owner  # (kept: its id is the key while the entry lives)
        self.lock = asyncio.Lock()
        self.users = 0


_TURNS: dict[tuple[int, int], _Turns] = {}
"""The histories a call holds or waits for, by the id of their session (or run) and event
loop; an entry lives while it has users."""


def history_mark(session: Any, run: RunState | None) -> tuple[int, int, object]:
    """What changes whenever a call is recorded in the history ``history_of`` finds for
    ``session`` (an ``AgentSession``) or ``run``: its length and its last entry (at the
    bound an entry in is one out, the length stays). The entry itself is kept in the mark,
    not only its ``id``: an entry pushed out of a full history is freed, and the next one
    can be built at its address (red team 20), an equal ``id`` of another entry."""
    state = session_state(session)
    history: list[Any] | None
    if state is not None:
        found = state.get("history")
        history = found if isinstance(found, list) else None
    else:
        history = run.history if run is not None else None
    if not history:
        return (0, 0, None)
    last = history[-1]
    return (len(history), id(last), last)  # (ids first: entries are never compared by value)


class _Section(FairLock):
    """The section of one session's history across threads (see ``HistoryTurn.enter``):
    a lock taken in turn, the thread of the call in it, and how many calls hold it or wait
    for it."""

    __slots__ = ("thread", "users")

    def __init__(self) -> None:
        super().__init__()
        self.thread = 0
        self.users = 0


_SECTIONS: dict[int, _Section] = {}
"""By the id of the session's guard state (``session_state``: one dict, shared by the
sessions of an ``as_tool(propagate_session=True)`` sub-agent and its caller). Kept
without a reference to the state (a session's state is not kept alive for it): a section
left to an id a later state reuses is shared by both, which only makes their calls take
turns. At most ``_SECTIONS_MAX``; past it the sections no call uses are dropped."""
_SECTIONS_LOCK = threading.Lock()
_SECTIONS_MAX = 4096


class HistoryTurn:
    """One call's turn at its history (see the module's docstring).

    The guard decides a call on the history as it stands and records the call in it after
    the decision; with nothing awaited in between, no sibling runs in between either. A
    call its counter store counts in a worker thread lets siblings decide and record
    meanwhile (a structuring rule let five parallel payments of 400 past a limit of 1,000:
    red team 19): such a call ``take``s its history's turn, so that counted calls of one
    history take turns, and keeps it until ``done`` (recorded, or not running); the guard
    decides it again whenever the history changed under it."""

    __slots__ = ("_entry", "_key", "_section")

    def __init__(self) -> None:
        self._entry: _Turns | None = None
        self._key: tuple[int, int] | None = None
        self._section: _Section | None = None

    async def take(self, owner: object) -> None:
        """Hold the turn of ``owner``'s history (its session, or its run), waiting for the
        call holding it; nothing when this call holds it already."""
        if self._entry is not None:
            return
        key = (id(owner), id(asyncio.get_running_loop()))
        entry = _TURNS.get(key)
        if entry is None:
            entry = _TURNS[key] = _Turns(owner)
        entry.users += 1
        try:
            await entry.lock.acquire()
        except BaseException:  # cancelled while waiting: it holds nothing
            self._leave(entry, key, locked=False)
            raise
        self._entry, self._key = entry, key

    async def enter(self, state: dict[str, Any] | None) -> None:
        """Enter the section of the session history kept in ``state`` (the session's guard
        state; nothing for None, a run's own history, which one event loop reads): from
        reading the history a call is decided on, or the last look of a call decided again,
        until its record (``leave``, ``done``). Nothing is awaited in a section, so a call
        of another thread waits at most for one call's decision and record; it waits
        without stalling its own event loop (the loop's other tasks run
        meanwhile), in turn (``_locks.FairLock``: the section is handed to the call that
        has waited longest, so a thread taking it again and again never starves another),
        and past ``_SECTION_WAIT`` it is a guard error. A section a call of this thread is
        in already (one that awaited inside it) is a guard error, never a wait."""
        if state is None or self._section is not None:
            return
        key = id(state)
        with _SECTIONS_LOCK:
            section = _SECTIONS.get(key)
            if section is None:
                if len(_SECTIONS) >= _SECTIONS_MAX:
                    for k in [k for k, v in _SECTIONS.items() if not v.users]:
                        del _SECTIONS[k]
                section = _SECTIONS[key] = _Section()
            section.users += 1
        me = threading.get_ident()
        if not section.lock.acquire(False):  # (the usual case: nobody holds it)
            mine = section.thread == me
            taken = False
            if not mine:
                try:
                    taken = await section.take(_SECTION_WAIT)
                except BaseException:  # cancelled while waiting: it holds nothing
                    with _SECTIONS_LOCK:
                        section.users -= 1
                    raise
            if not taken:
                with _SECTIONS_LOCK:
                    section.users -= 1
                raise RuntimeError("the session's history is held by another call "
                                   f"{'of this thread' if mine else 'too long'}")
        section.thread = me
        self._section = section

    def leave(self) -> None:
        """Leave the section (the call was not recorded: it is decided again)."""
        section = self._section
        if section is not None:
            self._section = None
            section.thread = 0
            section.lock.release()  # (``section.release()`` in line: every call leaves)
            if section.waiters:
                section.pass_on()
            with _SECTIONS_LOCK:
                section.users -= 1

    def done(self) -> None:
        """The call is recorded, or will not be: the next counted call may go on."""
        self.leave()
        entry, key = self._entry, self._key
        if entry is not None and key is not None:
            self._entry = self._key = None
            self._leave(entry, key, locked=True)

    @staticmethod
    def _leave(entry: _Turns, key: tuple[int, int], *, locked: bool) -> None:
        if locked:
            entry.lock.release()
        entry.users -= 1
        if entry.users == 0 and _TURNS.get(key) is entry:
            del _TURNS[key]


_SECTION_WAIT = 10.0
"""Seconds a call waits for another thread's call to leave its history's section (a
decision and a record; a secret provider's round trip among them) before it is a guard
error (blocked): a provider that hangs never hangs every thread of the session."""


HISTORY_ENTRY_BYTES = 4096
"""Size bound of one entry's arguments, counted as the engine counts inputs (each value,
key and element ``NODE_COST`` bytes besides its text). Every string kept is scrubbed with
every redact pattern, so the bound is what keeps bookkeeping cheap whatever the call held
(150,000 empty strings once cost seconds here), and 50 entries stay a small share of the
engine's input bound, which history counts against. Values past it are not kept."""


class _Left:
    __slots__ = ("bytes",)

    def __init__(self, n: int) -> None:
        self.bytes = n


def redacted(arguments: Mapping[str, Any], secret_names: frozenset[str],
             scrub: Scrubber | Callable[[str], str], limit: int = HISTORY_ENTRY_BYTES,
             names: dict[str, str] | None = None) -> tuple[dict[str, Any], bool]:
    """The arguments as history keeps them, and whether some were left out for size.

    Secret ones ``[REDACTED]``, every string and every name scrubbed: one walk giving
    what ``scrub_json(redact_arguments(arguments, secret_names), scrub)`` gives (the
    engine's JSON-safe form, then scrubbed), without building the middle copy, with map
    keys scrubbed as well, and stopping at ``limit`` (what is past it is dropped, never
    kept unscrubbed).

    ``names``: scrubbed argument names already worked out with this very ``scrub`` (a
    guard keeps them for its long-lived scrubber: a tool's argument names repeat on every
    call); filled in as names are scrubbed.
    """
    # Names are scrubbed too: the model chooses them, and may choose a secret.
    left = _Left(limit)
    out: dict[str, Any] = {}
    for k, v in arguments.items():
        left.bytes -= NODE_COST + len(str(k))
        if left.bytes < 0:
            break
        if k in secret_names:
            kept: Any = scrub(REDACTED)
        elif type(v) is str:  # ``_kept`` of the common case, without the call
            left.bytes -= NODE_COST
            if left.bytes < 0:
                kept = None
            else:
                left.bytes -= len(v)
                kept = scrub(v) if left.bytes >= 0 else None
        else:
            kept = _kept(v, scrub, left)
        name = names.get(k) if names is not None and type(k) is str else None
        if name is None:
            name = scrub(str(k))
            if names is not None and type(k) is str:
                names[k] = name
        out[name] = kept
    return out, left.bytes < 0


def plain_entry(arguments: Mapping[str, Any],
                limit: int = HISTORY_ENTRY_BYTES) -> tuple[dict[str, Any], bool] | None:
    """``redacted(arguments, frozenset(), unchanged, limit)`` for the common call of a
    call with nothing secret (``_secrets.unchanged``): an exact ``dict`` of ``str`` names
    and scalar values (``str``, ``int``, ``bool``, ``None``, a float that is not NaN), the
    same entry and the same size accounting in one loop without a call per value. None for
    anything else: the caller takes ``redacted``. (tests/test_af_quiet.py compares them.)"""
    if type(arguments) is not dict:
        return None
    left = limit
    out: dict[str, Any] = {}
    for k, v in arguments.items():
        if type(k) is not str:
            return None
        left -= NODE_COST + len(k)
        if left < 0:
            break
        kind = type(v)
        if kind is str:
            left -= NODE_COST
            if left >= 0:
                left -= len(v)
            out[k] = v if left >= 0 else None
        elif kind is int or kind is bool or v is None or (kind is float and v == v):
            left -= NODE_COST
            out[k] = v if left >= 0 else None
        else:
            return None
    return out, left < 0


def _kept(value: Any, scrub: Scrubber | Callable[[str], str], left: _Left) -> Any:
    # The engine's _json_safe (decision.redact_arguments), each resulting string scrubbed.
    left.bytes -= NODE_COST
    if left.bytes < 0:
        return None
    if isinstance(value, str):
        left.bytes -= len(value)
        return scrub(value) if left.bytes >= 0 else None
    if value is None or isinstance(value, bool | int | float):
        return value if not (isinstance(value, float) and value != value) else scrub("NaN")
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            left.bytes -= len(str(k))
            if left.bytes < 0:
                break
            out[scrub(str(k))] = _kept(v, scrub, left)
        return out
    if isinstance(value, list | tuple):
        items: list[Any] = []
        for v in value:
            if left.bytes < 0:
                break
            items.append(_kept(v, scrub, left))
        return items
    if isinstance(value, bytes):
        left.bytes -= len(value)
        return scrub(value.decode("utf-8", "replace")) if left.bytes >= 0 else None
    return scrub(str(value)) if left.bytes >= 0 else None


def record(history: list[dict[str, Any]] | None, tool: str, args: dict[str, Any],
           effect: str, limit: int, *, truncated: bool = False,
           trusted: bool = False) -> dict[str, Any] | None:
    """Append one call (``args`` already ``redacted``), dropping the oldest beyond ``limit``.

    ``truncated``: some arguments were left out (over ``HISTORY_ENTRY_BYTES``, or the whole
    call was over the engine's input bounds); the entry says so, so a rule can tell.
    Returns the entry, whose ``result`` ``set_result`` fills in once the tool returned.
    """
    if history is None:
        return None
    at = utc_text(time.time_ns() // 1000)
    entry: dict[str, Any] = {"tool": tool, "args": args, "effect": effect, "result": "",
                             "trusted": trusted, "at": at}
    if truncated:
        entry["truncated"] = True
    history.append(entry)
    del history[:-limit]
    return entry


class Unbuilt:
    """A history entry of a run without a session, kept as what builds it until someone
    reads the run's history (``history_of``): the run's later calls, a blocked call's
    record. A run's last call is never read by another, so its entry (the argument copy,
    the timestamp's text, the dict) is never built (``record_unbuilt``).

    Only for a quiet call (nothing secret: the entry is ``plain_entry`` of the arguments,
    or ``redacted`` with ``unchanged``, whatever the scrubber) whose arguments are the
    guard's own JSON copy (``json_view`` of the validated values, which nothing else
    holds or changes): building it later gives the very entry ``record`` gives now. The
    trust label and the instant are taken when the call is recorded, the result when the
    tool returned (``set_result``); tests/test_af_history_unbuilt.py compares the two."""

    __slots__ = ("arguments", "effect", "entry", "micros", "reading", "result", "tool",
                 "trusted")

    def __init__(self, tool: str, arguments: Mapping[str, Any], effect: str, trusted: bool,
                 micros: int) -> None:
        self.tool = tool
        self.arguments = arguments
        self.effect = effect
        self.trusted = trusted
        self.micros = micros
        self.result = ""
        self.reading: dict[str, Any] | None = None
        self.entry: dict[str, Any] | None = None
        """The built entry, once built: ``set_result`` fills in its result too."""

    def build(self) -> dict[str, Any]:
        entry = self.entry
        if entry is not None:
            return entry
        arguments = self.arguments
        kept = plain_entry(arguments)
        if kept is None:
            kept = redacted(arguments, frozenset(), unchanged)
        args, truncated = kept
        entry = {"tool": self.tool, "args": args, "effect": self.effect, "result": self.result,
                 "trusted": self.trusted, "at": utc_text(self.micros)}
        if truncated:
            entry["truncated"] = True
        if self.reading is not None:
            entry["reading"] = self.reading
        self.entry = entry
        self.arguments = _BUILT  # (the arguments are no longer needed)
        return entry


_BUILT: Mapping[str, Any] = {}


def record_unbuilt(run: RunState, tool: str, arguments: Mapping[str, Any], effect: str,
                   limit: int, *, trusted: bool = False) -> Unbuilt:
    """``record(run.history, tool, <arguments as a quiet call keeps them>, effect, limit,
    trusted=trusted)``, the entry built only if the history is read (see ``Unbuilt``)."""
    entry = Unbuilt(tool, arguments, effect, trusted, time.time_ns() // 1000)
    history: list[Any] = run.history
    history.append(entry)
    del history[:-limit]
    run.unbuilt = True
    return entry


def _build_all(run: RunState) -> None:
    history: list[Any] = run.history
    for i, entry in enumerate(history):
        if type(entry) is Unbuilt:
            history[i] = entry.build()
    run.unbuilt = False


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_YEAR_10000 = 253_402_300_800
"""Seconds from the epoch to year 10000: ``utc_text`` spells the years 1970 to 9999 itself."""
_SECOND: tuple[int, str] = (-1, "")
"""The last whole second ``utc_text`` spelled, and its text (one tuple: read and replaced
whole, so threads never see one second's number with another's text)."""


def utc_text(micros: int) -> str:
    """``micros`` (microseconds since the epoch, UTC) as RFC 3339 text, exactly what
    ``datetime.fromtimestamp(..., UTC).isoformat(timespec="microseconds")`` gives
    (``2026-12-01T11:41:00.123456+00:00``), at a third of its cost: the date and time of
    day are spelled once per second. Every guarded call stamps its history entry.
    (tests/test_af_history_stamp.py compares the two on generated instants.)"""
    global _SECOND
    second, fraction = divmod(micros, 1_000_000)
    if not 0 <= second < _YEAR_10000:  # a clock far off: the general spelling
        return (_EPOCH + datetime.timedelta(microseconds=micros)).isoformat(
            timespec="microseconds")
    cached = _SECOND
    if cached[0] != second:
        cached = _SECOND = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
    return f"{cached[1]}.{fraction:06d}+00:00"


def result_text(result: Any) -> str:
    """The text of a (scrubbed) tool result, as the model reads it, cut at ``RESULT_LIMIT``."""
    if result is None:
        return ""
    if isinstance(result, str):
        return result[:RESULT_LIMIT]
    items = result if isinstance(result, list) else [result]
    parts: list[str] = []
    size = 0
    for item in items:
        if not isinstance(item, Content):
            continue
        text = getattr(item, "text", None)
        if item.type == "text" and isinstance(text, str):
            parts.append(text)
            size += len(text)
        elif isinstance(item.uri, str):
            parts.append(item.uri[:RESULT_LIMIT])
            size += len(parts[-1])
        if size >= RESULT_LIMIT:
            break
    return "\n".join(parts)[:RESULT_LIMIT]


def set_result(entry: dict[str, Any] | Unbuilt | None, result: Any) -> None:
    """Fill in the result of a recorded call, and its ``reading`` (never fails: history is
    bookkeeping).

    The reading (``lib_provenance.kept_reading``) is the result as the provenance
    functions read it, made here once (bounded: ``RECORD_BUDGET``) and kept in the entry,
    so it travels with the session's state: every later call, in this process or another
    replica, reads it at a fraction of the cost of reading the result again, after
    checking it is the result's (an entry without one, or with one that does not check,
    is read as the result alone). The result is already scrubbed here."""
    if entry is None:
        return
    try:
        text = result_text(result)
    except Exception:  # a result with no readable text is recorded as none
        text = ""
    try:
        reading = kept_reading(text) if text else None
    except Exception:  # (never: bookkeeping does not fail the call; read as one without)
        reading = None
    if isinstance(entry, Unbuilt):
        entry.result = text
        entry.reading = reading
        built = entry.entry
        if built is not None:
            built["result"] = text
            _set_reading(built, reading)
        return
    entry["result"] = text
    _set_reading(entry, reading)


def _set_reading(entry: dict[str, Any], reading: dict[str, Any] | None) -> None:
    if reading is not None:
        entry["reading"] = reading
    else:
        entry.pop("reading", None)
