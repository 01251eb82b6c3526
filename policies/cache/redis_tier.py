"""The shared tier: entries in Redis under a key prefix, expiring by Redis TTL (SET PX).

The cache must never make the gateway slower or less available than no cache: every call is
bounded by a short timeout, and Redis down, slow or erroring is a miss (or a skipped store). Each
failure is counted in `errors` (for metrics) and logged at most once per `log_interval_s`. For
`backoff_s` after Redis refused or dropped the connection, or after `timeouts_before_backoff`
timeouts in a row, the tier is skipped (`skipped`), so a dead or hung Redis does not cost every
request its timeout; a single slow reply (a scheduling hiccup) costs only its own request. A blob
that does not decode is counted in `corrupt`, ignored and deleted (only if it is still the same
blob, so a fresh entry written meanwhile by another replica survives).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from policies.cache.entry import CacheEntry, CorruptEntry, decode_entry, encode_entry
from policies.redis_pool import RedisClient, RedisTarget, bounded_client

log = logging.getLogger(__name__)

T = TypeVar("T")
FAILURES = (RedisError, OSError, TimeoutError)
# A reply that arrived while the event loop was busy elsewhere is in time: when the deadline
# passes, the call is given this long more, which lets the loop read what its socket holds first.
READ_GRACE_S = 0.001
DELETE_IF_SAME = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class RedisCache:
    def __init__(
        self,
        client: RedisClient,
        *,
        prefix: str,
        timeout_s: float = 0.01,
        backoff_s: float = 1.0,
        log_interval_s: float = 60.0,
        timeouts_before_backoff: int = 3,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,  # the backoff's and the log interval's clock
        owns_client: bool = False,
    ) -> None:
        self.prefix = prefix
        self.timeout_s = timeout_s
        self.backoff_s = backoff_s
        self.log_interval_s = log_interval_s
        self.timeouts_before_backoff = timeouts_before_backoff
        self.errors = 0  # calls that failed or timed out
        self.skipped = 0  # calls not made while backing off after a failure
        self.corrupt = 0  # undecodable entries found (and deleted)
        self._client = client
        self._clock = clock
        self._monotonic = monotonic
        self._owns_client = owns_client
        self._delete_if_same = client.register_script(DELETE_IF_SAME)
        self._retry_at = 0.0  # monotonic time before which Redis is not tried
        self._timeouts_in_a_row = 0
        self._last_log = -math.inf
        self._errors_logged = 0

    @classmethod
    def from_url(
        cls,
        url: str | RedisTarget,
        *,
        prefix: str,
        timeout_s: float = 0.01,
        backoff_s: float = 1.0,
        log_interval_s: float = 60.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> RedisCache:
        """A tier with its own client and no retries (a retry would outlive the timeout anyway). A
        (re)connection may take `timeout_s` or 0.1 s, whichever is longer: a connect and AUTH on a
        network take a few round trips, and only the requests arriving meanwhile wait for it."""
        client = bounded_client(  # a bounded, blocking pool (`_bounded` also bounds the wait for a connection)
            url,
            socket_connect_timeout=max(timeout_s, 0.1),
            socket_timeout=None,  # `_bounded` is the one deadline: redis-py's own would not allow the read grace
            retry=Retry(NoBackoff(), 0),
        )
        return cls(
            client,
            prefix=prefix,
            timeout_s=timeout_s,
            backoff_s=backoff_s,
            log_interval_s=log_interval_s,
            monotonic=monotonic,
            owns_client=True,
        )

    async def get(self, key: str) -> CacheEntry | None:
        if self._backing_off():
            return None
        try:
            found = await self._bounded(self._client.get(self.prefix + key))
        except FAILURES as exc:
            self._failed("GET", exc)
            return None
        self._timeouts_in_a_row = 0
        if found is None:
            return None
        blob = found.encode() if isinstance(found, str) else found  # str only from a client that decodes replies
        try:
            entry = decode_entry(blob)
        except CorruptEntry as exc:
            self.corrupt += 1
            log.debug("corrupt cache entry %s… deleted: %s", key[:12], exc)
            await self._delete_corrupt(key, blob)
            return None
        return None if entry.expired(self._clock()) else entry

    async def put(self, key: str, entry: CacheEntry) -> bool:
        ttl_ms = math.ceil((entry.expires_at - self._clock()) * 1000)
        if ttl_ms <= 0 or self._backing_off():
            return False
        try:
            await self._bounded(self._client.set(self.prefix + key, encode_entry(entry), px=ttl_ms))
        except FAILURES as exc:
            self._failed("SET", exc)
            return False
        self._timeouts_in_a_row = 0
        return True

    async def delete(self, key: str) -> None:
        if self._backing_off():
            return
        try:
            await self._bounded(self._client.delete(self.prefix + key))
        except FAILURES as exc:
            self._failed("DEL", exc)

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()

    async def _bounded(self, command: Awaitable[T]) -> T:
        """`command`, cancelled `timeout_s` (plus the read grace) after it started. redis-py drops a
        connection whose command was cancelled, so a late reply cannot be read by the next caller."""
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(None) as deadline:
            grace = loop.call_later(self.timeout_s, lambda: deadline.reschedule(loop.time() + READ_GRACE_S))
            try:
                return await command
            finally:
                grace.cancel()

    async def _delete_corrupt(self, key: str, blob: bytes) -> None:
        try:
            await self._bounded(self._delete_if_same(keys=[self.prefix + key], args=[blob]))
        except FAILURES as exc:
            self._failed("EVALSHA", exc)

    def _backing_off(self) -> bool:
        if self._retry_at and self._monotonic() < self._retry_at:
            self.skipped += 1
            return True
        return False

    def _failed(self, command: str, exc: BaseException) -> None:
        self.errors += 1
        now = self._monotonic()
        if isinstance(exc, TimeoutError | RedisTimeoutError):
            self._timeouts_in_a_row += 1
            if self._timeouts_in_a_row >= self.timeouts_before_backoff:
                self._timeouts_in_a_row = 0
                self._back_off(now)
        elif isinstance(exc, RedisConnectionError | OSError):  # refused or reset: not worth trying again at once
            self._back_off(now)
        # Anything else (an error reply) came back quickly: the next command may well succeed.
        if now - self._last_log >= self.log_interval_s:
            reason = str(exc) or type(exc).__name__
            log.warning(
                "Redis cache unavailable (%s: %s); serving without it. %d Redis failures since the last report.",
                command,
                reason,
                self.errors - self._errors_logged,
            )
            self._last_log = now
            self._errors_logged = self.errors

    def _back_off(self, now: float) -> None:
        if self.backoff_s:
            self._retry_at = now + self.backoff_s
