"""What the writer, the pruner and the admin API need of a store, whichever database it is."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol

from gateway.requestlog.rows import Row

Dialect = Literal["sqlite", "postgres"]


class StoreUnavailable(Exception):
    """The database cannot be reached now (down, restarting, locked, timed out): try again later."""


class SchemaTooNew(Exception):
    """The database's schema is of a later version than this gateway knows: it is left alone."""


class RecordStore(Protocol):
    dialect: Dialect
    where: str  # the database, for log lines: never a password

    async def open(self) -> None:
        """Connect and bring the schema up to date (idempotent); StoreUnavailable when it cannot."""
        ...

    async def write(self, rows: Sequence[Row]) -> None:
        """Insert encoded rows; a row whose (ts, id) is stored already is skipped (a batch sent
        again after a lost answer is never doubled). StoreUnavailable: nothing may have been written."""
        ...

    async def prune(self, before_us: int, limit: int) -> int:
        """Delete at most `limit` rows older than `before_us`; how many went."""
        ...

    async def select(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """Run a read of `gateway.requestlog.queries` (its placeholders are this dialect's)."""
        ...

    async def close(self) -> None: ...
