"""Circuit breakers for every deployment, kept in this process or shared through Redis.

With Redis every worker and replica sees one state per deployment. To keep Redis off the hot
path, each process reads it at most once per `sync_interval_s` and batches the successes of a
healthy deployment into that read; failures and half-open probes go to Redis at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from redis.exceptions import RedisError, WatchError

from gateway.config.routing import BreakerConfig
from gateway.routing.breaker_state import BreakerRecord, Circuit, Transition, claim_probe, record_outcomes
from policies.redis_pool import RedisClient

log = logging.getLogger(__name__)

T = TypeVar("T")
Update = Callable[[BreakerRecord], tuple[BreakerRecord, T]]
TransitionHook = Callable[[str, Transition], None]

_ERROR_LOG_INTERVAL_S = 30.0
_MAX_TRANSACTION_TRIES = 50  # conflicts come only from other processes writing the same key


class BreakerStore(Protocol):
    shared: bool  # True: other processes write it too, so reads may be stale

    async def read(self, name: str) -> BreakerRecord: ...

    async def update(self, name: str, change: Update[T]) -> T:
        """Apply `change` to the stored record atomically; returns what `change` returned beside it."""


class LocalBreakerStore:
    shared = False

    def __init__(self) -> None:
        self._records: dict[str, BreakerRecord] = {}

    async def read(self, name: str) -> BreakerRecord:
        return self._records.get(name) or BreakerRecord()

    async def update(self, name: str, change: Update[T]) -> T:
        # No await between read and write: atomic within the event loop.
        self._records[name], result = change(self._records.get(name) or BreakerRecord())
        return result


class RedisBreakerStore:
    shared = True

    def __init__(self, client: RedisClient, prefix: str, ttl_s: int) -> None:  # one key per deployment: any slot
        self._client = client
        self._prefix = prefix
        self._ttl_s = ttl_s

    async def read(self, name: str) -> BreakerRecord:
        return BreakerRecord.from_fields(await self._client.hgetall(self._prefix + name))

    async def update(self, name: str, change: Update[T]) -> T:
        key = self._prefix + name
        async with self._client.pipeline(transaction=True) as pipe:
            for _ in range(_MAX_TRANSACTION_TRIES):
                try:
                    await pipe.watch(key)
                    record, result = change(BreakerRecord.from_fields(await pipe.hgetall(key)))
                    pipe.multi()  # type: ignore[no-untyped-call]
                    fields: dict[Any, Any] = record.to_fields()
                    pipe.hset(key, mapping=fields)
                    pipe.expire(key, self._ttl_s)
                    await pipe.execute()
                    return result
                except WatchError:  # another process wrote it meanwhile: read again
                    continue
        raise RedisError(f"breaker state of {name!r} kept changing under {_MAX_TRANSACTION_TRIES} transactions")


@dataclass(slots=True)
class _View:
    record: BreakerRecord = field(default_factory=BreakerRecord)
    read_at: float = float("-inf")
    pending_successes: int = 0


class CircuitBreakers:
    def __init__(
        self,
        config: BreakerConfig,
        store: BreakerStore,
        *,
        clock: Callable[[], float] = time.time,  # wall clock: replicas compare it through Redis
        on_transition: TransitionHook | None = None,
    ) -> None:
        self.config = config
        self._store = store
        self._clock = clock
        self._on_transition = on_transition
        self._views: dict[str, _View] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._last_error_log = float("-inf")
        self.store_errors = 0  # Redis failures; the breaker then acts on its last view

    async def admit(self, name: str, probe_s: float) -> bool:
        """May a request go to this deployment now? In half-open state, only one probe at a time."""
        if not self.config.enabled:
            return True
        view = await self._fresh_view(name)
        now = self._clock()
        circuit = view.record.circuit(self.config, now)
        if circuit is Circuit.CLOSED:
            return True
        if circuit is Circuit.OPEN or now < view.record.probe_until:
            return False

        def claim(record: BreakerRecord) -> tuple[BreakerRecord, BreakerRecord | None]:
            claimed = claim_probe(record, self.config, now, probe_s)
            return (claimed or record), claimed

        # Redis unreachable: decide on this process's view rather than keep the deployment out.
        async with self._lock_for(name):
            local_claim = claim_probe(view.record, self.config, now, probe_s)
            claimed = await self._guarded(self._store.update(name, claim), fallback=local_claim)
        if claimed is None:
            return False
        view.record = claimed
        self._transitioned(name, Transition(Circuit.OPEN, Circuit.HALF_OPEN))
        return True

    def _lock_for(self, name: str) -> asyncio.Lock:
        lock = self._locks.get(name)
        if lock is None:
            lock = self._locks[name] = asyncio.Lock()
        return lock

    def opened_at(self, name: str) -> float:
        """When the deployment's circuit last opened, as this process last saw it (0: closed)."""
        view = self._views.get(name)
        return view.record.opened_at if view else 0.0

    async def record(self, name: str, ok: bool) -> None:
        if not self.config.enabled:
            return
        view = self._views.get(name) or self._views.setdefault(name, _View())
        healthy = not view.record.opened_at and not view.record.consecutive_failures
        if ok and healthy:
            # Counted with the next update (a failure, or a Redis read), not one update per success.
            view.pending_successes += 1
            return
        successes, view.pending_successes = view.pending_successes + ok, 0
        await self._apply(name, view, successes, failures=int(not ok))

    async def _fresh_view(self, name: str) -> _View:
        view = self._views.get(name) or self._views.setdefault(name, _View())
        if not self._store.shared:
            return view  # only this process writes: the view is the record (successes pending aside)
        now = self._clock()
        if now - view.read_at < self.config.sync_interval_s:
            return view
        if view.pending_successes:
            successes, view.pending_successes = view.pending_successes, 0
            await self._apply(name, view, successes, failures=0, may_close=False)
        else:
            view.record = await self._guarded(self._store.read(name), view.record)
        view.read_at = now
        return view

    async def _apply(self, name: str, view: _View, successes: int, failures: int, *, may_close: bool = True) -> None:
        now = self._clock()

        def change(record: BreakerRecord) -> tuple[BreakerRecord, tuple[BreakerRecord, Transition | None]]:
            updated, transition = record_outcomes(record, self.config, now, successes, failures, may_close=may_close)
            return updated, (updated, transition)

        unchanged: tuple[BreakerRecord, Transition | None] = (view.record, None)
        async with self._lock_for(name):  # this process's updates in turn: no transaction conflicts among them
            record, transition = await self._guarded(self._store.update(name, change), fallback=unchanged)
        view.record, view.read_at = record, now
        if transition is not None:
            self._transitioned(name, transition)

    def _transitioned(self, name: str, transition: Transition) -> None:
        log.warning("circuit of deployment %s: %s -> %s", name, transition.before, transition.after)
        if self._on_transition is not None:
            self._on_transition(name, transition)

    async def _guarded(self, operation: Awaitable[T], fallback: T) -> T:
        """A store call; when Redis fails, `fallback` (this process's last view) instead."""
        try:
            return await operation
        except (RedisError, OSError) as exc:
            self._store_failed(exc)
            return fallback

    def _store_failed(self, exc: Exception) -> None:
        self.store_errors += 1
        now = time.monotonic()
        if now - self._last_error_log >= _ERROR_LOG_INTERVAL_S:
            self._last_error_log = now
            log.error(
                "circuit breaker state in Redis is unreachable (%s); acting on this process's last view "
                "(%d errors so far)",
                type(exc).__name__,
                self.store_errors,
            )
