"""Shared stores for counters and held approvals: an SQLite file (one machine, any number of
processes) and Redis (a fleet).

Both keep the counter contract of ``guardrails.engine.counters``: a reservation is one
atomic step (check and add, never over the limit) in a transaction (SQLite) or a Lua script
(Redis), each entry expires with its window, and a release never goes below zero. They also
hold approvals for ``guard(approvals=...)``: ``hold`` with a time to live, and ``take``,
which reads and deletes in one step so an approval is used at most once, on any replica.

Every failure to reach the store is raised as ``StoreUnavailable``; the engine turns it into
the counter's failurePolicy (deny by default), and the guard into a refused approval.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from guardrails.engine.counters import (
    SKEW_GRACE,
    CounterRequest,
    CounterResult,
    Reservation,
    StoreUnavailable,
    window_entry,
)

__all__ = ["RedisStore", "SQLiteStore"]


class SQLiteStore:
    """Counters and approvals in an SQLite file, shared by every process on the machine.

    Each ``reserve`` is one ``BEGIN IMMEDIATE`` transaction (SQLite's write lock), so
    processes never interleave a check and its increment. ``durable=True`` syncs every
    commit to disk (surviving power loss, at the cost of an fsync per call).
    """

    blocking = True

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 5.0,
                 durable: bool = False, clock: Callable[[], float] = time.time) -> None:
        self.path = os.fspath(path)
        self._clock = clock
        self._lock = threading.Lock()
        self._calls = 0
        try:
            self._db = sqlite3.connect(self.path, timeout=timeout, isolation_level=None,
                                       check_same_thread=False)
            # Switching to WAL takes an exclusive lock that the busy timeout does not always
            # wait for: replicas opening an existing store only read the mode.
            mode = self._db.execute("PRAGMA journal_mode").fetchone()
            if mode is None or str(mode[0]).lower() != "wal":
                self._db.execute("PRAGMA journal_mode=WAL")
            # Durable across process crashes; an OS crash or power loss may lose the last
            # commits (counts then restart lower). FULL would fsync every call (~4 ms here).
            self._db.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
            self._db.execute("CREATE TABLE IF NOT EXISTS counters (entry TEXT PRIMARY KEY, "
                             "count INTEGER NOT NULL, expires REAL NOT NULL)")
            self._db.execute("CREATE TABLE IF NOT EXISTS approvals (id TEXT PRIMARY KEY, "
                             "value TEXT NOT NULL, expires REAL NOT NULL)")
        except sqlite3.Error as e:
            raise StoreUnavailable(f"cannot open {self.path}: {e}") from e

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _transaction(self, work: Callable[[sqlite3.Connection], Any]) -> Any:
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    out = work(self._db)
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
                return out
            except sqlite3.Error as e:
                raise StoreUnavailable(f"SQLite store {self.path}: {e}") from e

    def reserve(self, requests: Sequence[CounterRequest]) -> list[CounterResult]:
        now = self._clock()
        self._calls += 1
        sweep = self._calls % 1000 == 0

        def work(db: sqlite3.Connection) -> list[CounterResult]:
            if sweep:
                db.execute("DELETE FROM counters WHERE expires <= ?", (now - SKEW_GRACE,))
                db.execute("DELETE FROM approvals WHERE expires <= ?", (now,))
            out = []
            for r in requests:
                entry, ends = window_entry(r.key, r.window, now)
                row = db.execute("SELECT count, expires FROM counters WHERE entry = ?",
                                 (entry,)).fetchone()
                current = row[0] if row is not None and row[1] > now else 0
                total = current + r.cost
                if r.cost == 0 or total > r.limit:
                    out.append(CounterResult(total, total <= r.limit, None))
                    continue
                db.execute("INSERT INTO counters (entry, count, expires) VALUES (?, ?, ?) "
                           "ON CONFLICT(entry) DO UPDATE SET count = excluded.count, "
                           "expires = excluded.expires", (entry, total, ends))
                out.append(CounterResult(total, True, Reservation(entry, r.cost)))
            return out

        result: list[CounterResult] = self._transaction(work)
        return result

    def release(self, reservations: Sequence[Reservation]) -> None:
        def work(db: sqlite3.Connection) -> None:
            for r in reservations:
                db.execute("UPDATE counters SET count = MAX(0, count - ?) WHERE entry = ?",
                           (r.cost, r.entry))

        self._transaction(work)

    def hold(self, key: str, value: str, ttl: int) -> None:
        expires = self._clock() + ttl

        def work(db: sqlite3.Connection) -> None:
            db.execute("INSERT OR REPLACE INTO approvals (id, value, expires) VALUES (?, ?, ?)",
                       (key, value, expires))

        self._transaction(work)

    def take(self, key: str) -> str | None:
        now = self._clock()

        def work(db: sqlite3.Connection) -> str | None:
            row = db.execute("SELECT value, expires FROM approvals WHERE id = ?",
                             (key,)).fetchone()
            db.execute("DELETE FROM approvals WHERE id = ?", (key,))
            return str(row[0]) if row is not None and row[1] > now else None

        value: str | None = self._transaction(work)
        return value


# Server time (TIME) picks the window, so replicas with skewed clocks agree on it.
# KEYS: counter keys; ARGV: prefix, then (window, limit, cost) per key.
_RESERVE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local out = {}
for i, key in ipairs(KEYS) do
  local window = tonumber(ARGV[3 * i - 1])
  local limit = tonumber(ARGV[3 * i])
  local cost = tonumber(ARGV[3 * i + 1])
  local index = math.floor(now / window)
  local entry = ARGV[1] .. key .. ':' .. window .. ':' .. index
  local current = tonumber(redis.call('GET', entry) or '0')
  local total = current + cost
  if cost == 0 or total > limit then
    out[i] = {0, total, ''}
  else
    redis.call('INCRBY', entry, cost)
    local ends = (index + 1) * window
    redis.call('EXPIREAT', entry, math.ceil(ends) + 1)
    out[i] = {1, total, entry}
  end
end
return out
"""

_RELEASE = """
for i, entry in ipairs(KEYS) do
  local current = tonumber(redis.call('GET', entry) or 'nil')
  if current ~= nil then
    local left = current - tonumber(ARGV[i])
    if left < 0 then left = 0 end
    redis.call('SET', entry, left, 'KEEPTTL')
  end
end
return 1
"""


class RedisStore:
    """Counters and approvals in Redis, shared by every replica.

    Uses the synchronous client with short timeouts (the guard calls it from a worker
    thread). ``client`` may be any ``redis.Redis``; otherwise one is made from ``url``.
    """

    blocking = True

    def __init__(self, url: str = "redis://127.0.0.1:6379/0", *, client: Any = None,
                 prefix: str = "guardrails:", timeout: float = 0.5) -> None:
        try:
            import redis
        except ImportError as e:  # pragma: no cover - an install problem, said plainly
            raise ImportError("RedisStore needs the redis package: pip install "
                              "'cel-guardrails[fleet]'") from e
        self._errors: tuple[type[BaseException], ...] = (redis.RedisError, OSError)
        self._client = client if client is not None else redis.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout,
            health_check_interval=30)
        self._prefix = prefix
        self._reserve = self._client.register_script(_RESERVE)
        self._release = self._client.register_script(_RELEASE)

    def close(self) -> None:
        self._client.close()

    def _call(self, what: str, work: Callable[[], Any]) -> Any:
        try:
            return work()
        except self._errors as e:
            raise StoreUnavailable(f"Redis {what}: {type(e).__name__}") from e

    def reserve(self, requests: Sequence[CounterRequest]) -> list[CounterResult]:
        args: list[Any] = [self._prefix + "c:"]
        for r in requests:
            args += [r.window, r.limit, r.cost]
        rows = self._call("reserve", lambda: self._reserve(keys=[r.key for r in requests],
                                                           args=args))
        out = []
        for (granted, total, entry), request in zip(rows, requests, strict=True):
            name = entry.decode() if isinstance(entry, bytes) else str(entry)
            reservation = Reservation(name, request.cost) if int(granted) and name else None
            out.append(CounterResult(int(total), bool(int(granted)), reservation))
        return out

    def release(self, reservations: Sequence[Reservation]) -> None:
        if not reservations:
            return
        self._call("release", lambda: self._release(keys=[r.entry for r in reservations],
                                                    args=[r.cost for r in reservations]))

    def hold(self, key: str, value: str, ttl: int) -> None:
        self._call("hold", lambda: self._client.set(self._prefix + "a:" + key, value, ex=ttl))

    def take(self, key: str) -> str | None:
        value = self._call("take", lambda: self._client.getdel(self._prefix + "a:" + key))
        if value is None:
            return None
        return value.decode() if isinstance(value, bytes) else str(value)
