"""Reads that many requests make at once, sharing round trips to Redis.

Each request that misses a process cache (an API key not seen lately, a virtual key) reads one
value. A burst of such requests (a client trying hundreds of made-up keys, every key after a
restart) would otherwise take one pooled connection each, and past the pool's size the rest wait
and are refused as "store unavailable" while Redis is fine. Here the reads asked for while one
batch is in flight wait for the next batch, which fetches them all in one command (MGET, HMGET):
the burst holds one connection at a time, and a value asked for twice is read once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

FetchMany = Callable[[list[str]], Awaitable[Sequence[bytes | str | None]]]

MAX_BATCH = 1_000  # names per command: a bound on one reply's size, far above any burst's cache misses


class BatchedReads:
    """`read(name)` answers what `fetch_many` returns for it: reads asked for while a fetch is in
    flight go out together in the next. A failed fetch fails every read in its batch with the same
    exception. A reader that is cancelled leaves the fetch running for the others."""

    def __init__(self, fetch_many: FetchMany, *, max_batch: int = MAX_BATCH) -> None:
        self._fetch_many = fetch_many
        self._max_batch = max_batch
        self._waiting: dict[str, asyncio.Future[bytes | str | None]] = {}
        self._drain: asyncio.Task[None] | None = None

    async def read(self, name: str) -> bytes | str | None:
        future = self._waiting.get(name)
        if future is None:
            future = asyncio.get_running_loop().create_future()
            self._waiting[name] = future
            if self._drain is None:
                self._drain = asyncio.create_task(self._fetch_while_waiting())
        return await asyncio.shield(future)

    async def _fetch_while_waiting(self) -> None:
        try:
            while self._waiting:
                names = list(self._waiting)[: self._max_batch]
                batch = {name: self._waiting.pop(name) for name in names}
                try:
                    values = await self._fetch_many(names)
                    if len(values) != len(names):
                        raise ValueError(f"{len(values)} values for {len(names)} names")
                except Exception as exc:  # each reader handles it as it would its own command's
                    for future in batch.values():
                        _settle(future, exc)
                    continue
                except BaseException as exc:  # cancelled (the loop closing): no reader may hang
                    for future in [*batch.values(), *self._waiting.values()]:
                        _settle(future, exc)
                    self._waiting.clear()
                    raise
                for future, value in zip(batch.values(), values, strict=True):
                    if not future.done():
                        future.set_result(value)
        finally:
            self._drain = None


def _settle(future: asyncio.Future[bytes | str | None], exc: BaseException) -> None:
    if future.done():
        return
    if isinstance(exc, asyncio.CancelledError):
        future.cancel()
        return
    future.set_exception(exc)
    future.add_done_callback(_retrieved)


def _retrieved(future: asyncio.Future[bytes | str | None]) -> None:
    """Every reader may have gone: the exception is theirs to see, not the loop's to log."""
    if not future.cancelled():
        future.exception()
