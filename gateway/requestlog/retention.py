"""Retention: rows older than `request_log.retention_days` are deleted in small batches, with a
pause between them, so that no statement holds many row locks or the table for long, and writers
and readers go on meanwhile. Each process prunes about every `PRUNE_INTERVAL_S` (from a random
offset, so replicas do not start together; on PostgreSQL their batches skip each other's rows)."""

from __future__ import annotations

import asyncio
import logging
import random
import time

from gateway.requestlog.stores.base import RecordStore, StoreUnavailable

log = logging.getLogger(__name__)
PRUNE_INTERVAL_S = 3600.0
PRUNE_BATCH = 1000
PAUSE_S = 0.05
DAY_US = 86_400 * 1_000_000


async def prune(store: RecordStore, before_us: int, batch: int = PRUNE_BATCH, pause_s: float = PAUSE_S) -> int:
    """Delete every row older than `before_us`, `batch` at a time; how many went."""
    total = 0
    while True:
        deleted = await store.prune(before_us, batch)
        total += deleted
        if deleted < batch:
            return total
        await asyncio.sleep(pause_s)


async def prune_forever(store: RecordStore, retention_days: int, interval_s: float = PRUNE_INTERVAL_S) -> None:
    await asyncio.sleep(random.uniform(10, 60))  # noqa: S311 - spreading replicas, not a secret
    while True:
        cutoff = int(time.time() * 1_000_000) - retention_days * DAY_US
        try:
            await store.open()
            deleted = await prune(store, cutoff)
            if deleted:
                log.info("request log: pruned %d records older than %d days", deleted, retention_days)
        except StoreUnavailable as exc:
            log.info("request log: pruning skipped, the store is unavailable (%s)", exc)
        except Exception as exc:
            log.warning("request log: pruning failed: %s: %s", type(exc).__name__, exc)
        await asyncio.sleep(interval_s * random.uniform(0.9, 1.1))  # noqa: S311
