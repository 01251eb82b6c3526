"""Copies what other parts count in plain numbers (routing events, Redis failures, circuit state)
into the Prometheus series, as deltas: once a second per worker, and at once before a scrape.

The routing, breaker and cache code stays free of Prometheus and costs nothing extra per event;
the series lag by at most `INTERVAL_S` in the workers a scrape does not reach.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Hashable, Mapping
from typing import TypeVar

from prometheus_client import Counter

from gateway.observability.metrics import CIRCUIT_VALUES, GatewayMetrics
from gateway.pipeline.assembly import SharedState
from gateway.routing.breaker_state import BreakerRecord

INTERVAL_S = 1.0
K = TypeVar("K", bound=Hashable)


class MetricsSync:
    def __init__(self, metrics: GatewayMetrics, shared: SharedState, deployments: Callable[[], list[str]]) -> None:
        self._metrics = metrics
        self._shared = shared
        self._deployments = deployments  # the current config's deployment names
        self._seen: dict[str, dict[object, int]] = {}
        self._task: asyncio.Task[None] | None = None

    def run(self) -> None:
        metrics, events = self._metrics, self._shared.events
        self._copy("retries", events.retries, lambda name: metrics.retries.labels(name))
        self._copy("fallbacks", events.fallbacks, lambda pair: metrics.fallbacks.labels(*pair))
        self._copy("upstream_errors", events.upstream_errors, lambda pair: metrics.upstream_errors.labels(*pair))
        redis_cache = self._shared.cache.tiers.redis
        failures = {"breaker": self._shared.breakers.store_errors}
        if redis_cache is not None:
            failures["cache"] = redis_cache.errors
            tier = {"redis_skipped": redis_cache.skipped, "corrupt": redis_cache.corrupt}
            seen = self._seen.setdefault("cache_tier", {})
            for result, value in tier.items():
                if value > seen.get(result, 0):
                    metrics.cache_event(result, value - seen.get(result, 0))
                    seen[result] = value
        self._copy("redis", failures, lambda component: metrics.redis_errors.labels(component))
        self._circuits()
        metrics.flush()

    def _copy(self, name: str, source: Mapping[K, int], child: Callable[[K], Counter]) -> None:
        seen = self._seen.setdefault(name, {})
        for key, value in list(source.items()):
            delta = value - seen.get(key, 0)
            if delta > 0:
                child(key).inc(delta)
                seen[key] = value

    def _circuits(self) -> None:
        breakers = self._shared.breakers
        now = self._shared.timing.wall()
        for name in self._deployments():
            circuit = BreakerRecord(opened_at=breakers.opened_at(name)).circuit(breakers.config, now)
            self._metrics.circuit_state.labels(name).set(CIRCUIT_VALUES[circuit.value])

    def start(self) -> None:
        """Sync every `INTERVAL_S` while the app runs (call from within its event loop)."""
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        """Stop syncing, after a last sync so that nothing counted is lost."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.run()

    async def _loop(self) -> None:
        while True:
            self.run()
            await asyncio.sleep(INTERVAL_S)
