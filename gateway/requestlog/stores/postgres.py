"""The request log in PostgreSQL (asyncpg): one table that every worker and replica writes its own
rows to, so the admin API reads, and sums, all of them.

A batch is one transaction: COPY into the connection's temporary staging table, then `INSERT …
SELECT … ON CONFLICT DO NOTHING` from it, so a batch sent again after an answer that was lost is not
doubled. (Connections must be sessions of their own: a transaction-pooling proxy, PgBouncer in
transaction mode, would lose the staging table between transactions.) The schema is migrated on
first use, the pool made then, and a call that cannot reach the server, or takes longer than
`COMMAND_TIMEOUT_S`, is StoreUnavailable (the writer keeps the batch and retries later; the pool
connects again by itself).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import asyncpg

from gateway.config.request_log import shown
from gateway.requestlog.rows import COLUMNS, Row
from gateway.requestlog.stores.base import Dialect, StoreUnavailable
from gateway.requestlog.stores.migrations import CREATE_VERSION_TABLE, VERSION_TABLE, pending

CONNECT_TIMEOUT_S = 5.0
COMMAND_TIMEOUT_S = 10.0
POOL_SIZE = 4
MIGRATION_LOCK = 0x7265716C6F67  # pg_advisory_xact_lock's key: "reqlog"
STAGING = "request_log_staging"  # each connection's own: a batch is copied into it, then inserted
_INSERT = f"INSERT INTO request_log SELECT * FROM {STAGING} ON CONFLICT DO NOTHING"  # noqa: S608 - a constant name
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
        self.where = shown(url)
        self._pool: asyncpg.Pool | None = None
        self._migrated = False

    async def open(self) -> None:
        try:
            if not self._migrated:
                connection = await asyncpg.connect(self._url, timeout=CONNECT_TIMEOUT_S)
                try:
                    async with connection.transaction():
                        await _migrate(connection)
                finally:
                    await connection.close()
                self._migrated = True
            if self._pool is None:
                self._pool = await asyncpg.create_pool(
                    self._url,
                    min_size=0,  # no floor to restore: asyncpg would log each failed try while the server is down
                    max_size=POOL_SIZE,
                    timeout=CONNECT_TIMEOUT_S,
                    command_timeout=COMMAND_TIMEOUT_S,
                    init=_with_staging,
                )
        except _UNAVAILABLE as exc:
            raise StoreUnavailable(f"postgresql: {type(exc).__name__}: {exc}") from None

    async def write(self, rows: Sequence[Row]) -> None:
        """COPY into the connection's staging table (binary, a fifth of the client's CPU of an
        INSERT of arrays), then one INSERT of it that skips what is stored already."""
        pool = await self._ready()
        try:
            async with pool.acquire() as connection, connection.transaction():
                await connection.copy_records_to_table(STAGING, records=rows, columns=COLUMNS)
                await connection.execute(_INSERT)
        except _UNAVAILABLE as exc:
            raise StoreUnavailable(f"postgresql: {type(exc).__name__}: {exc}") from None

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


async def _with_staging(connection: asyncpg.Connection) -> None:
    """A new pool connection's staging table (temporary: its own, emptied at each commit)."""
    await connection.execute(f"CREATE TEMP TABLE {STAGING} (LIKE request_log) ON COMMIT DELETE ROWS")


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
