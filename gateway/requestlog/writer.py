"""The batching writer: one task per process that drains the queue into the store.

It waits for a full batch or `flush_interval_s`, encodes the batch (in a thread when bodies are
redacted: the PII check is not free) and writes it in one transaction. A store that cannot be
reached keeps the batch in hand and is tried again after a backoff (0.5 s doubling to 10 s) while
new rows wait in the bounded queue (and, once it is full, are dropped and counted); when the store
answers again the queue drains. A batch the store refuses for what it holds is dropped and counted
(`store_error`), so one bad row cannot stop the log. At shutdown the queue gets `close`'s deadline
to drain, a store that cannot be reached (another worker holding the SQLite file's lock as they both
write their last rows) being tried again every `CLOSING_RETRY_S` until then; what is left is
counted as `shutdown`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from gateway.requestlog.drops import Drops
from gateway.requestlog.intake import RecordQueue
from gateway.requestlog.rows import Row, encoded
from gateway.requestlog.stores.base import RecordStore, StoreUnavailable

log = logging.getLogger(__name__)
BACKOFF_S = (0.5, 10.0)  # first retry, longest wait
CLOSING_RETRY_S = 0.1  # at shutdown: the deadline bounds the retries, not the backoff


class BatchWriter:
    def __init__(
        self,
        store: RecordStore,
        queue: RecordQueue,
        drops: Drops,
        *,
        batch_size: int,
        flush_interval_s: float,
        redact: Callable[[str], str] | None = None,
        count_written: Callable[[int], None] | None = None,
    ) -> None:
        self.store = store
        self._queue = queue
        self._drops = drops
        self._batch_size = batch_size
        self._flush_interval_s = flush_interval_s
        self._redact = redact
        self._count_written = count_written
        self._closing = asyncio.Event()  # set by `close`: also cuts a backoff short
        self._task: asyncio.Task[None] | None = None
        self._in_hand = 0  # rows taken from the queue and not yet written
        self.written = 0

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="request-log-writer")

    async def close(self, deadline_s: float) -> None:
        """Write what is queued within `deadline_s`; count the rest as dropped (`shutdown`)."""
        self._closing.set()
        self._queue.wake()
        task = self._task
        if task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(task), deadline_s)
            except TimeoutError:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        left = len(self._queue.take(len(self._queue))) + self._in_hand
        if left:
            self._drops.add("shutdown", left)
        self._in_hand = 0
        self._drops.flush_log()

    async def _run(self) -> None:
        while True:
            await self._queue.wait(self._flush_interval_s)
            while len(self._queue):
                batch = self._queue.take(self._batch_size)
                self._in_hand = len(batch)
                await self._write(batch)
                self._in_hand = 0
            if self._closing.is_set():
                return

    async def _write(self, batch: list[Row]) -> None:
        delay = BACKOFF_S[0]
        while True:
            try:
                await self.store.open()
                rows = await self._encode(batch)
                await self.store.write(rows)
            except StoreUnavailable as exc:
                # Kept and tried again, at shutdown too: `close` ends the tries at its deadline and
                # counts the batch in hand (a first failure dropped a whole worker's last rows).
                self._drops.store_failed(str(exc), retried=True)
                await self._pause(delay)
                delay = min(delay * 2, BACKOFF_S[1])
                continue
            except Exception as exc:  # the store refused this batch: it is lost, the log goes on
                self._drops.store_failed(f"{type(exc).__name__}: {exc}", retried=False)
                self._drops.add("store_error", len(batch))
                return
            self._drops.store_recovered()
            self.written += len(batch)
            if self._count_written is not None:
                self._count_written(len(batch))
            return

    async def _pause(self, backoff_s: float) -> None:
        """The backoff before the next try, cut short by `close`; from then on, CLOSING_RETRY_S."""
        if self._closing.is_set():
            await asyncio.sleep(CLOSING_RETRY_S)
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(backoff_s):
                await self._closing.wait()

    async def _encode(self, batch: list[Row]) -> list[Row]:
        if self._redact is None:
            return encoded(batch, None)
        return await asyncio.get_running_loop().run_in_executor(None, encoded, batch, self._redact)
