"""The request log in a SQLite file: the embedded default, with nothing else to run.

The standard library's `sqlite3`, off the event loop: one thread of its own writes (and prunes),
another reads for the admin API, each with its own connection (a connection belongs to the thread
that opened it). WAL journaling lets the reader and other processes' writers (`server.workers`
share the file) go on while one writes; a writer waits up to `BUSY_TIMEOUT_S` for another's
transaction (or for another process switching a new file to WAL), then the batch is retried later.
Each batch is one short transaction, which takes the write lock as it begins.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from gateway.requestlog.rows import COLUMNS, Row
from gateway.requestlog.stores.base import Dialect, StoreUnavailable
from gateway.requestlog.stores.migrations import CREATE_VERSION_TABLE, VERSION_TABLE, pending

BUSY_TIMEOUT_S = 5.0
_BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
T = TypeVar("T")
_INSERT = (
    f"INSERT INTO request_log ({', '.join(COLUMNS)}) VALUES ({', '.join('?' for _ in COLUMNS)}) "  # noqa: S608 - constant columns
    "ON CONFLICT DO NOTHING"
)
_PRUNE = "DELETE FROM request_log WHERE rowid IN (SELECT rowid FROM request_log WHERE ts < ? ORDER BY ts LIMIT ?)"


class _Connection:
    """One thread and the connection it opened."""

    def __init__(self, path: Path, name: str, *, read_only: bool) -> None:
        self._path = path
        self._read_only = read_only
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._local = threading.local()

    async def run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._call, work)

    def _call(self, work: Callable[[sqlite3.Connection], T]) -> T:
        try:
            connection = self._local.__dict__.get("connection") or self._open()
            return work(connection)
        except sqlite3.OperationalError as exc:  # locked, unreadable, disk full, unwritable: may pass
            raise StoreUnavailable(f"sqlite: {exc}") from None

    def _open(self) -> sqlite3.Connection:
        connection = sqlite3.connect(self._path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        try:
            _use_wal(connection)
            connection.execute("PRAGMA synchronous=NORMAL")  # WAL: durable at checkpoints, never corrupt
            if self._read_only:
                connection.execute("PRAGMA query_only=1")
        except BaseException:
            connection.close()
            raise
        self._local.connection = connection
        return connection

    async def close(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._executor, self._close)
        self._executor.shutdown(wait=True)

    def _close(self) -> None:
        connection = self._local.__dict__.pop("connection", None)
        if connection is not None:
            connection.close()


class SqliteStore:
    dialect: Dialect = "sqlite"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.where = f"sqlite:///{path}"
        self._writer = _Connection(path, "request-log-sqlite-writer", read_only=False)
        self._reader = _Connection(path, "request-log-sqlite-reader", read_only=True)
        self._ready = False

    async def open(self) -> None:
        if not self._ready:
            await self._writer.run(_migrate)
            self._ready = True

    async def write(self, rows: Sequence[Row]) -> None:
        await self._writer.run(lambda connection: _in_transaction(connection, _INSERT, rows))

    async def prune(self, before_us: int, limit: int) -> int:
        return await self._writer.run(lambda connection: connection.execute(_PRUNE, (before_us, limit)).rowcount)

    async def select(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        return await self._reader.run(lambda connection: connection.execute(sql, tuple(params)).fetchall())

    async def close(self) -> None:
        await self._writer.close()
        await self._reader.close()


def _use_wal(connection: sqlite3.Connection) -> None:
    """Switch the file to WAL (kept in the file: a no-op once done), waiting for other processes as
    for any lock. On a new file the switch upgrades a read lock to a write lock, and SQLite does not
    call the busy handler for that: when two workers opened a new file at once (their first batches,
    or their last ones at shutdown), one failed at once with `database is locked`."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF not in _BUSY_CODES or time.monotonic() >= deadline:
                raise
        time.sleep(0.01)  # the other process's switch is one short write


def _in_transaction(connection: sqlite3.Connection, sql: str, rows: Sequence[Row]) -> None:
    # IMMEDIATE: the write lock is taken (waiting up to BUSY_TIMEOUT_S) as the transaction begins, so
    # a transaction can never start as a reader and then fail at once to upgrade (SQLITE_BUSY_SNAPSHOT).
    connection.execute("BEGIN IMMEDIATE")
    try:
        connection.executemany(sql, rows)
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


def _migrate(connection: sqlite3.Connection) -> None:
    """The missing steps, under the database's write lock (BEGIN IMMEDIATE): one process migrates,
    the others wait for it and then find nothing to do."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        connection.execute(CREATE_VERSION_TABLE)
        current = connection.execute(f"SELECT COALESCE(MAX(version), 0) FROM {VERSION_TABLE}").fetchone()[0]  # noqa: S608
        for step in pending(current):
            for statement in step.statements("sqlite"):
                connection.execute(statement)
            connection.execute(
                f"INSERT INTO {VERSION_TABLE} (version, applied_at) VALUES (?, ?)",  # noqa: S608 - a constant name
                (step.version, datetime.now(UTC).isoformat()),
            )
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")
