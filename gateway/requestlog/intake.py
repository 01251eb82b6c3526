"""The request's side of the request log: its row goes into a bounded queue, and that is all.

`submit` runs as each request ends (from `Observability.end`): it makes the row (attribute reads)
and appends it, or, the queue being full because the store is slow or down, drops it and counts
the drop. It never waits and never raises, so the log costs no request its latency or its answer,
and its memory is bounded by `request_log.queue_size` rows (each with at most two bodies of
`max_body_chars`). The writer is woken once per full batch, not per record.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque

from gateway.observability.record import RequestRecord
from gateway.requestlog.drops import Drops
from gateway.requestlog.rows import Row, row_of


class RecordQueue:
    def __init__(
        self, capacity: int, batch_size: int, drops: Drops, *, team_field: str, max_body_chars: int | None
    ) -> None:
        self.capacity = capacity
        self._batch_size = batch_size
        self._drops = drops
        self._team_field = team_field
        self._max_body_chars = max_body_chars
        self._rows: deque[Row] = deque()
        self._ready = asyncio.Event()

    def __len__(self) -> int:
        return len(self._rows)

    def submit(self, record: RequestRecord) -> None:
        """The record's row, queued (put_nowait: a full queue drops it, counted)."""
        rows = self._rows
        if len(rows) >= self.capacity:
            self._drops.add("queue_full")
            return
        rows.append(row_of(record, self._team_field, self._max_body_chars))
        if len(rows) == self._batch_size:
            self._ready.set()

    def take(self, limit: int) -> list[Row]:
        """Up to `limit` rows, oldest first."""
        rows = self._rows
        return [rows.popleft() for _ in range(min(limit, len(rows)))]

    def wake(self) -> None:
        self._ready.set()

    async def wait(self, timeout_s: float) -> None:
        """Until a batch is full, `wake` is called, or `timeout_s` has passed."""
        if len(self._rows) >= self._batch_size:
            return
        self._ready.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self._ready.wait()
