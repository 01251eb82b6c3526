"""The request log in PostgreSQL (asyncpg): one table that every worker and replica writes its own
rows to, so the admin API reads, and sums, all of them.

A batch is one statement (`INSERT … SELECT FROM unnest(arrays) ON CONFLICT DO NOTHING`): a batch
sent again after an answer that was lost is not doubled. The pool is made on first use and again
after the server went away; a call that cannot reach the server, or takes longer than
`COMMAND_TIMEOUT_S`, is StoreUnavailable (the writer keeps the batch and retries later).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import asyncpg

from gateway.requestlog.rows import COLUMNS, Row
from gateway.requestlog.stores.base import Dialect, StoreUnavailable
from gateway.requestlog.stores.migrations import CREATE_VERSION_TABLE, VERSION_TABLE, pending

CONNECT_TIMEOUT_S = 5.0
COMMAND_TIMEOUT_S = 10.0
POOL_SIZE = 4
MIGRATION_LOCK = 0x7265716C6F67  # pg_advisory_xact_lock's key: "reqlog"
_TYPES = {
    "ts": "bigint",
    "attempts": "int4",
    "status": "int4",
    "stream": "bool",
    "prompt_tokens": "int8",
    "completion_tokens": "int8",
    "cost_nano": "int8",
    "latency_ms": "float8",
    "ttft_ms": "float8",
}
_INSERT = (
    f"INSERT INTO request_log ({', '.join(COLUMNS)}) SELECT * FROM unnest("  # noqa: S608 - constant columns
    + ", ".join(f"${n}::{_TYPES.get(column, 'text')}[]" for n, column in enumerate(COLUMNS, 1))
    + ") ON CONFLICT DO NOTHING"
)
_PRUNE = (
    "DELETE FROM request_log WHERE ctid = ANY(ARRAY("
    "SELECT ctid FROM request_log WHERE ts < $1 LIMIT $2 FOR UPDATE SKIP LOCKED))"
)
# Failures that say the server cannot be reached now, not that it refused what it was sent.
_UNAVAILABLE = (
    OSError,
    TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    asyncpg.exceptions.OperatorInterventionError,  # shutting down, starting up
    asyncpg.exceptions.InsufficientResourcesError,  # too many connections, disk full
)


class PostgresStore:
    dialect: Dialect = "postgres"

    def __init__(self, url: str) -> None:
        self._url = url
        parts = urlsplit(url)
        self.where = f"postgresql://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}{parts.path}"
        self._pool: asyncpg.Pool | None = None
        self._migrated = False

    async def open(self) -> None:
        try:
            if self._pool is None:
                self._pool = await asyncpg.create_pool(
                    self._url,
                    min_size=1,
                    max_size=POOL_SIZE,
                    timeout=CONNECT_TIMEOUT_S,
                    command_timeout=COMMAND_TIMEOUT_S,
                )
            if not self._migrated:
                async with self._pool.acquire() as connection, connection.transaction():
                    await _migrate(connection)
                self._migrated = True
        except _UNAVAILABLE as exc:
            raise StoreUnavailable(f"postgresql: {type(exc).__name__}: {exc}") from None

    async def write(self, rows: Sequence[Row]) -> None:
        columns = list(zip(*rows, strict=True)) if rows else [() for _ in COLUMNS]
        await self._execute(_INSERT, [list(values) for values in columns])

    async def prune(self, before_us: int, limit: int) -> int:
        status = await self._execute(_PRUNE, [before_us, limit])
        return int(status.rsplit(" ", 1)[-1])  # "DELETE n"

    async def select(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        pool = await self._ready()
        try:
            return [tuple(record) for record in await pool.fetch(sql, *params)]
        except _UNAVAILABLE as exc:
            raise StoreUnavailable(f"postgresql: {type(exc).__name__}: {exc}") from None

    async def close(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await _close(pool)

    async def _execute(self, sql: str, params: Sequence[Any]) -> str:
        pool = await self._ready()
        try:
            return str(await pool.execute(sql, *params))
        except _UNAVAILABLE as exc:
            raise StoreUnavailable(f"postgresql: {type(exc).__name__}: {exc}") from None

    async def _ready(self) -> asyncpg.Pool:
        await self.open()
        assert self._pool is not None
        return self._pool


async def _close(pool: asyncpg.Pool) -> None:
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT_S):
            await pool.close()
    except _UNAVAILABLE:  # the server is gone: nothing to close politely
        pool.terminate()


async def _migrate(connection: asyncpg.Connection) -> None:
    """The missing steps, under a transaction-scoped advisory lock: one replica migrates, the
    others wait for it and then find nothing to do."""
    await connection.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
    await connection.execute(CREATE_VERSION_TABLE)
    current = await connection.fetchval(f"SELECT COALESCE(MAX(version), 0) FROM {VERSION_TABLE}")  # noqa: S608
    for step in pending(current):
        for statement in step.statements("postgres"):
            await connection.execute(statement)
        await connection.execute(
            f"INSERT INTO {VERSION_TABLE} (version, applied_at) VALUES ($1, $2)",  # noqa: S608 - a constant name
            step.version,
            datetime.now(UTC).isoformat(),
        )
