"""One app's request log: the store its config names, the queue requests hand their rows to, the
writer and the pruner that run beside the app (each worker its own), and the admin API's routes.

The settings are read at start-up: a config reload does not move the log (restart for that).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path

from aiohttp import web

from gateway.config.request_log import RequestLogConfig
from gateway.observability.bodies import redactor
from gateway.observability.metrics import GatewayMetrics
from gateway.requestlog.drops import Drops
from gateway.requestlog.intake import RecordQueue
from gateway.requestlog.retention import prune_forever
from gateway.requestlog.stores.base import RecordStore
from gateway.requestlog.stores.opening import store_for
from gateway.requestlog.writer import BatchWriter

log = logging.getLogger(__name__)
SHUTDOWN_DEADLINE_S = 5.0  # at exit, what is queued gets this long to be written


class RequestLog:
    def __init__(self, config: RequestLogConfig, store: RecordStore, metrics: GatewayMetrics | None = None) -> None:
        self.config = config
        self.store = store
        self._metrics = metrics
        self.drops = Drops(metrics.request_log_drop if metrics is not None else None)
        bodies = config.max_body_chars if config.include_bodies else None
        self.queue = RecordQueue(
            config.queue_size, config.batch_size, self.drops, team_field=config.team_field, max_body_chars=bodies
        )
        self.writer: BatchWriter | None = None

    @classmethod
    def configured(
        cls, config: RequestLogConfig, config_path: str | Path | None, metrics: GatewayMetrics | None = None
    ) -> RequestLog | None:
        """The log the config asks for; None when it is off, or has nowhere to write."""
        if not config.enabled:
            return None
        store = store_for(config.url.get_secret_value(), config_path)
        return cls(config, store, metrics) if store is not None else None

    async def running(self, app: web.Application) -> AsyncIterator[None]:
        """An aiohttp cleanup context: the writer and the pruner while the app runs; at exit, what is
        queued is written (for at most SHUTDOWN_DEADLINE_S) and the store closed."""
        config = self.config
        written = self._metrics.request_log_written.inc if self._metrics is not None else None
        self.writer = BatchWriter(
            self.store,
            self.queue,
            self.drops,
            batch_size=config.batch_size,
            flush_interval_s=config.flush_interval_s,
            redact=redactor() if config.include_bodies else None,
            count_written=written,
        )
        self.writer.start()
        pruner = asyncio.get_running_loop().create_task(prune_forever(self.store, config.retention_days))
        log.info("request log: %s, records kept %d days", self.store.where, config.retention_days)
        try:
            yield
        finally:
            pruner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pruner
            await self.writer.close(SHUTDOWN_DEADLINE_S)
            await self.store.close()
