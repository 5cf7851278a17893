"""``guardrails.load`` for every location, and ``guardrails.watch``: policies that reload.

A location is a policy file or directory (or a list of them), a bundle file, or an HTTP(S)
URL serving a bundle. ``watch`` returns a ``PolicySource``: a background thread polls the
location every ``interval`` seconds and swaps ``.current`` for a new ``PolicySet`` only
once that set has loaded completely; a guard reads ``.current`` once per call, so a call
finishes on the set it started with and costs nothing extra while nothing changes.

An update that does not load (a YAML error, an unknown name, a bad hash or signature, a
server that is down) never replaces the set in use. It is reported in ``.status`` (with
``file:line:column``), in a log record (logger ``guardrails.source``) and in the metric
``guardrails.policy.reloads`` (``guardrails.reload.outcome``: ``rejected`` or
``unreachable``), and tried again
when the location changes (a new file stat, a new ETag); an unreachable server is tried
again on every poll.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from opentelemetry import metrics

from guardrails.engine.compile import Backend, compile_documents
from guardrails.engine.compile import load as load_paths
from guardrails.engine.policyset import PolicySet
from guardrails.expr.limits import DEFAULT_LIMITS, Limits
from guardrails.fleet.bundle import (
    MAX_BUNDLE_BYTES,
    BundleError,
    is_bundle,
    load_bundle,
    load_verified,
)
from guardrails.model import load_documents
from guardrails.model.errors import PolicyError, Problem
from guardrails.model.loader import UnreadableFile, read_at_most, read_regular_file
from guardrails.telemetry import POLICY_RELOADS, RELOAD_OUTCOME, SOURCE_LOGGER

__all__ = ["PolicySource", "SourceStatus", "load", "watch"]

_log = logging.getLogger(SOURCE_LOGGER)

PathLike = str | os.PathLike[str]
Location = PathLike | Sequence[PathLike]
Key = PathLike | bytes | None


def _is_url(location: object) -> bool:
    return isinstance(location, str) and location.startswith(("http://", "https://"))


def load(location: Location, *, key: Key = None, limits: Limits | None = None,
         backend: Backend = "compiled", timeout: float = 10.0,
         allow_empty: bool = False) -> PolicySet:
    """Load, validate and compile policies from files, a directory, a bundle or a URL.

    ``key``: an Ed25519 public key (PEM file or bytes); with one, a bundle must be signed
    with its private key. Raises ``PolicyError`` listing every problem, with
    ``file:line:column`` (a refused bundle is a ``BundleError``, also a ``PolicyError``).
    ``allow_empty``: files and directories that hold no ``ToolPolicy`` give an empty set
    (a baseline, a rollout's first step) instead of an error.
    """
    if not isinstance(location, str | os.PathLike) and len(location) == 0:
        return load_paths(location, limits=limits, backend=backend, allow_empty=allow_empty)
    if not isinstance(location, str | os.PathLike) and len(location) == 1:
        location = location[0]  # `guardrails eval BUNDLE ...` passes a list of one
    if _is_url(location):
        assert isinstance(location, str)
        data, _ = _fetch(location, None, timeout)
        assert data is not None
        return load_bundle(data, key=key, origin=location, limits=limits, backend=backend)
    if isinstance(location, str | os.PathLike) and is_bundle(location):
        data = _read_bundle(os.fspath(location))
        return load_bundle(data, key=key, origin=os.fspath(location), limits=limits,
                           backend=backend)
    if key is not None:
        raise PolicyError([Problem(_describe(location), 0, 0, "a verification key is "
                                   "configured, but this is not a bundle: only bundles are "
                                   "signed")])
    return load_paths(location, limits=limits, backend=backend, allow_empty=allow_empty)


def watch(location: Location, *, interval: float = 5.0, key: Key = None,
          limits: Limits | None = None, backend: Backend = "compiled",
          timeout: float = 10.0, meter_provider: Any = None,
          max_age: float | None = None) -> PolicySource:
    """Load ``location`` now (raising ``PolicyError`` if it does not load) and keep it
    current: see ``PolicySource``. Close it (or use it as a context manager) when done.

    ``max_age`` (seconds, bundles only): ``status`` turns not ok, with a warning and the
    metric's ``stale`` outcome, while the bundle in use was built longer ago than this (a
    server stuck on an old copy); the policies stay in use.
    """
    return PolicySource(location, interval=interval, key=key, limits=limits, backend=backend,
                        timeout=timeout, meter_provider=meter_provider, max_age=max_age)


@dataclass(frozen=True)
class SourceStatus:
    """What a ``PolicySource`` knows about its location, replaced whole on every check."""

    location: str
    revision: str
    """Of ``.current``."""
    loaded_at: datetime.datetime
    """When ``.current`` was loaded."""
    checked_at: datetime.datetime
    ok: bool
    """False while the latest update was refused or the location could not be read."""
    error: str | None = None
    """Why, one ``file:line:column: message`` per line; None when ``ok``."""
    problems: tuple[Problem, ...] = ()
    failures: int = 0
    """Failed checks in a row."""
    built: str | None = None
    """Build time of the bundle in use (None for files): a stale mirror shows here."""


_FIRST_TRIES = 10
"""Reads of the first load before files that keep changing under it are an error."""


class PolicySource:
    """A policy set that follows its location. ``.current`` is always a complete set."""

    def __init__(self, location: Location, *, interval: float = 5.0, key: Key = None,
                 limits: Limits | None = None, backend: Backend = "compiled",
                 timeout: float = 10.0, meter_provider: Any = None,
                 start: bool = True, max_age: float | None = None) -> None:
        if interval <= 0:
            raise ValueError("interval must be positive")
        if max_age is not None and max_age <= 0:
            raise ValueError("max_age must be positive")
        self.interval = interval
        self.max_age = max_age
        self._fetcher = _fetcher(location, key, limits or DEFAULT_LIMITS, backend, timeout)
        meter = metrics.get_meter("guardrails", "", meter_provider)
        self._reloads = meter.create_counter(
            POLICY_RELOADS, "{reload}",
            "Policy updates found by a PolicySource, by outcome (loaded, rejected, "
            "unreachable).")
        first = None
        for _ in range(_FIRST_TRIES):  # None: the files changed while they were read
            first = self._fetcher.poll()
            if first is not None:
                break
        if first is None:
            raise PolicyError([Problem(self._fetcher.name, 0, 0, "the policy files changed "
                                       f"while they were read, {_FIRST_TRIES} times")])
        now = _now()
        self.current: PolicySet = first
        """The set in use: read it once per decision. Replaced whole, never changed."""
        self.status = SourceStatus(self._fetcher.name, first.revision, now, now, True,
                                   built=self._fetcher.built)
        # What the content last fetched turned out to be: unchanged content keeps its verdict.
        self._verdict: tuple[str | None, tuple[Problem, ...]] = (None, ())
        self._logged: str | None = None
        """The failure last logged (not logged again while it lasts)."""
        self._lock = threading.Lock()  # one check at a time (the thread, or refresh())
        self._check_age()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if start:
            self._thread = threading.Thread(target=self._run, name="guardrails-watch",
                                            daemon=True)
            self._thread.start()

    def __repr__(self) -> str:
        return f"<PolicySource {self.status.location} revision={self.status.revision[:12]}>"

    def refresh(self) -> bool:
        """Check the location now; True when a new set was swapped in."""
        with self._lock:
            return self._round()

    def close(self) -> None:
        """Stop polling (``.current`` stays usable)."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(self.interval + 30)

    def __enter__(self) -> PolicySource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            with self._lock:
                try:
                    self._round(settle=True)
                except Exception:  # pragma: no cover - _check reports its own failures
                    _log.exception("guardrails: policy source check failed")

    def _check(self, settle: bool) -> bool:
        now = _now()
        try:
            found = self._fetcher.poll(settle)
        except PolicyError as e:
            problems = tuple(e.errors)
            self._verdict = ("\n".join(str(p) for p in problems), problems)
            self._failed(now, "rejected", problems)
            return False
        except Exception as e:  # unreachable: network, permissions, anything else
            reason = f"cannot read {self._fetcher.name}: {type(e).__name__}: {e}"
            self._failed(now, "unreachable", (Problem(self._fetcher.name, 0, 0, reason),))
            return False
        if found is None:  # unchanged since the last fetch: its verdict stands
            error, problems = self._verdict
            self.status = replace(self.status, checked_at=now, ok=error is None, error=error,
                                  problems=problems,
                                  failures=0 if error is None else self.status.failures)
            return False
        self._verdict = (None, ())
        if found.revision == self.current.revision:  # e.g. the same files, rebuilt
            self.status = replace(self.status, checked_at=now, ok=True, error=None,
                                  problems=(), failures=0, built=self._fetcher.built)
            return False
        self.current = found  # the swap: one assignment of a complete set
        self.status = SourceStatus(self._fetcher.name, found.revision, now, now, True,
                                   built=self._fetcher.built)
        self._reloads.add(1, {RELOAD_OUTCOME: "loaded"})
        _log.info("guardrails: loaded policy revision %s from %s", found.revision[:12],
                  self._fetcher.name)
        return True

    def _round(self, *, settle: bool = False) -> bool:
        """One check of the location and of the bundle's age; True when swapped.

        ``settle``: the background poll's, which loads changed files only once a later poll
        finds them unchanged (``refresh()`` is called by a host whose write is done)."""
        swapped = self._check(settle)
        self._check_age()
        if self.status.ok:
            self._logged = None  # a failure after a recovery is logged again
        return swapped

    def _check_age(self) -> None:
        """A bundle in use older than ``max_age`` is reported (it stays in use)."""
        built = self.status.built
        if self.max_age is None or built is None or not self.status.ok:
            return
        try:
            when = datetime.datetime.strptime(built, "%Y-%m-%dT%H:%M:%SZ").replace(
                tzinfo=datetime.UTC)
        except ValueError:
            return
        age = (self.status.checked_at - when).total_seconds()
        if age > self.max_age:
            problem = Problem(self._fetcher.name, 0, 0,
                              f"the bundle in use was built at {built}, more than max_age "
                              f"({self.max_age:g} s) ago: is the server serving a stale "
                              "copy?")
            self._failed(self.status.checked_at, "stale", (problem,))

    def _failed(self, now: datetime.datetime, outcome: str,
                problems: tuple[Problem, ...]) -> None:
        error = "\n".join(str(p) for p in problems)
        previous = self.status
        self.status = replace(previous, checked_at=now, ok=False, error=error,
                              problems=problems, failures=previous.failures + 1)
        self._reloads.add(1, {RELOAD_OUTCOME: outcome})
        if error != self._logged:  # once per distinct failure, not once per poll
            self._logged = error
            _log.warning("guardrails: policy update from %s %s; keeping revision %s:\n%s",
                         self._fetcher.name, outcome, self.current.revision[:12], error)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _describe(location: Location) -> str:
    if isinstance(location, str | os.PathLike):
        return os.fspath(location)
    return ", ".join(os.fspath(p) for p in location)


# --- fetchers: "what is there now", None when unchanged since the last poll -----------------


class _Fetcher:
    name: str
    built: str | None = None
    """Build time of the last bundle loaded (bundles only)."""

    def poll(self, settle: bool = False) -> PolicySet | None:
        """``settle``: load files only once they are seen unchanged on two polls (a bundle
        is published whole and verified, so only files heed it)."""
        raise NotImplementedError


def _fetcher(location: Location, key: Key, limits: Limits, backend: Backend,
             timeout: float) -> _Fetcher:
    if not isinstance(location, str | os.PathLike) and len(location) == 1:
        location = location[0]
    if _is_url(location):
        assert isinstance(location, str)
        return _URLFetcher(location, key, limits, backend, timeout)
    if isinstance(location, str | os.PathLike) and is_bundle(location):
        return _BundleFileFetcher(os.fspath(location), key, limits, backend)
    if key is not None:
        raise PolicyError([Problem(_describe(location), 0, 0, "a verification key is "
                                   "configured, but this is not a bundle: only bundles are "
                                   "signed")])
    return _PathFetcher(location, limits, backend)


Stamp = tuple[tuple[str, int, int, int], ...]


def _stat(name: str) -> tuple[str, int, int, int]:
    try:
        st = os.stat(name)
    except OSError:
        return (name, -1, -1, -1)
    return (name, st.st_mtime_ns, st.st_size, st.st_ino)


class _PathFetcher(_Fetcher):
    """Files and directories: reloaded when a policy file (or a params file one of them
    read) appears, disappears or changes its stat."""

    def __init__(self, location: Location, limits: Limits, backend: Backend) -> None:
        self.location = location
        self.name = _describe(location)
        self.limits = limits
        self.backend = backend
        self.read: tuple[str, ...] = ()
        self.stamp: Stamp | None = None
        self.pending: Stamp | None = None
        """A change a settling poll saw once: loaded when the next one sees it again."""
        self.filled: frozenset[str] = frozenset()
        """The files that held documents in the set last loaded."""

    def _stamp(self) -> Stamp:
        items = [self.location] if isinstance(self.location, str | os.PathLike) else list(
            self.location)
        names: set[str] = set(self.read)
        for item in items:
            name = os.fspath(item)
            if os.path.isdir(name):
                for root, dirs, files in os.walk(name):
                    dirs.sort()
                    names.update(os.path.join(root, f) for f in files
                                 if f.endswith((".yaml", ".yml")))
            else:
                names.add(name)
        return tuple(_stat(n) for n in sorted(names))

    def poll(self, settle: bool = False) -> PolicySet | None:
        stamp = self._stamp()
        if stamp == self.stamp:
            return None
        if settle and stamp != self.pending:
            # A file rewritten in place is a prefix of itself until its writer is done, and
            # a prefix can parse (a rule fewer, a number cut short: red team 26). Seen once,
            # a change waits for the next poll; one still being written has moved on by then.
            self.pending = stamp
            return None
        self.stamp = stamp  # a failed load is retried when the files change again
        documents = load_documents(self.location)
        emptied = sorted(self.filled.intersection(documents.empty))
        if emptied:
            # Rewritten in place, a file is empty between its truncation and its write:
            # read then, the set would load without its policies (red team 26). Removing
            # a file's policies is deleting it.
            raise PolicyError([Problem(name, 0, 0, "held policies and now holds no YAML "
                                       "document: is it being written? (delete the file "
                                       "to remove them)") for name in emptied])
        policies = compile_documents(documents, limits=self.limits, backend=self.backend)
        if self._stamp() != stamp:
            # Written while it was read: what was read may be half of it. Not swapped in;
            # the stamp taken before reading makes the next poll read it again.
            return None
        # The stamp stays the one taken before reading: a file written meanwhile shows as a
        # change at the next poll (params files found now join the stamp then, too).
        self.read = tuple(documents.sources)
        self.filled = frozenset(documents.files).difference(documents.empty)
        return policies


class _BundleFetcher(_Fetcher):
    """Loads verified bundles, never one built before the last it loaded (rollback)."""

    key: Key
    limits: Limits
    backend: Backend

    def load(self, data: bytes) -> PolicySet:
        policies, manifest = load_verified(data, key=self.key, origin=self.name,
                                           limits=self.limits, backend=self.backend,
                                           not_before=self.built)
        self.built = manifest.built
        return policies


class _BundleFileFetcher(_BundleFetcher):
    def __init__(self, path: str, key: Key, limits: Limits, backend: Backend) -> None:
        self.name = path
        self.key = key
        self.limits = limits
        self.backend = backend
        self.stamp: tuple[str, int, int, int] | None = None

    def poll(self, settle: bool = False) -> PolicySet | None:
        stamp = _stat(self.name)
        if stamp == self.stamp:
            return None
        self.stamp = stamp
        return self.load(_read_bundle(self.name))


def _read_bundle(path: str) -> bytes:
    """A bundle file's bytes: a regular file only (a FIFO swapped in would hang the poll,
    ``/dev/zero`` would fill memory), at most one byte past the size bound."""
    try:
        return read_regular_file(path, MAX_BUNDLE_BYTES + 1)
    except UnreadableFile as e:
        raise BundleError(path, str(e)) from None


class _URLFetcher(_BundleFetcher):
    """A bundle over HTTP(S), polled with ``If-None-Match``: unchanged costs one 304."""

    def __init__(self, url: str, key: Key, limits: Limits, backend: Backend,
                 timeout: float) -> None:
        self.name = url
        self.key = key
        self.limits = limits
        self.backend = backend
        self.timeout = timeout
        self.etag: str | None = None

    def poll(self, settle: bool = False) -> PolicySet | None:
        data, etag = _fetch(self.name, self.etag, self.timeout)
        if data is None:
            return None
        # Remembered before loading: a refused bundle is not fetched again until it changes.
        self.etag = etag
        return self.load(data)


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port or {"http": 80, "https": 443}.get(scheme)
    except ValueError:
        port = -1
    return scheme, (parts.hostname or "").lower(), port


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only to the same scheme, host and port as the bundle URL.

    urllib alone follows redirects to any host, and to ``ftp://``: a bundle server (or
    whoever can make it answer 302) would choose where policies come from. Without a
    verification key that is the policies themselves, so a redirect elsewhere is refused
    (point the URL at the final location instead).
    """

    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str,
                         headers: Any, newurl: str) -> urllib.request.Request | None:
        if _origin(newurl) != _origin(req.full_url):
            raise urllib.error.HTTPError(
                req.full_url, code, f"redirect to {newurl!r} refused: a bundle is fetched "
                "only from the origin of its URL", headers, fp)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


class _Watchdog:
    """Ends a fetch at its deadline: shuts down every socket it opened.

    A socket timeout bounds each wait, not the whole: a server sending one header byte
    every few seconds would hold a poll (and the source's lock) for hours. Shutting the
    sockets down makes the blocked read return, and the fetch is then a timeout.
    """

    def __init__(self, seconds: float) -> None:
        self.fired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def add(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if self.fired:
                _shutdown(sock)

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            for sock in self._sockets:
                _shutdown(sock)

    def cancel(self) -> None:
        self._timer.cancel()


def _shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


class _Watched:
    """An HTTP(S) handler whose connections report their sockets to a watchdog."""

    watchdog: _Watchdog

    def do_open(self, http_class: Any, req: Any, **kwargs: Any) -> Any:
        watchdog = self.watchdog

        class Connection(http_class):  # type: ignore[misc]
            def connect(self) -> None:
                super().connect()
                watchdog.add(self.sock)

        return super().do_open(Connection, req, **kwargs)  # type: ignore[misc]


class _WatchedHTTP(_Watched, urllib.request.HTTPHandler):
    pass


class _WatchedHTTPS(_Watched, urllib.request.HTTPSHandler):
    pass


def _fetch(url: str, etag: str | None, timeout: float) -> tuple[bytes | None, str | None]:
    """The body and ETag, or ``(None, etag)`` for 304 Not Modified.

    ``timeout`` bounds each socket wait, and twice ``timeout`` the whole fetch (connect,
    headers, body, redirects): a server that trickles never holds a poll longer.
    """
    request = urllib.request.Request(url, headers={"Accept": "application/gzip"})
    if etag is not None:
        request.add_header("If-None-Match", etag)
    watchdog = _Watchdog(2 * timeout)
    handlers: list[Any] = [_SameOriginRedirects, _WatchedHTTP(), _WatchedHTTPS()]
    for handler in handlers[1:]:
        handler.watchdog = watchdog
    opener = urllib.request.build_opener(*handlers)
    late = TimeoutError(f"the bundle was not received within {2 * timeout:g} s (twice the "
                        "timeout)")
    try:
        with opener.open(request, timeout=timeout) as response:
            body = read_at_most(response.read1, MAX_BUNDLE_BYTES, 1 << 16)
            if watchdog.fired:  # the body ended because its socket was shut down
                raise late
            return body, response.headers.get("ETag")
    except urllib.error.HTTPError as e:
        if e.code == 304:
            return None, etag
        raise
    except TimeoutError:
        raise
    except Exception:
        if watchdog.fired:
            raise late from None
        raise
    finally:
        watchdog.cancel()
