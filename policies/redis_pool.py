"""Every Redis client the gateway builds: a bounded pool that waits briefly for a free connection.

redis-py's default async pool raises as soon as its 100 connections are in use, so a burst of
requests read as "Redis is down" (and the limits failed open). Here a full pool makes a command
wait up to `pool_wait_s` for a connection; only if none frees in that time does it raise
`PoolExhausted`, which `guard.is_outage` does not count as an outage: the gateway is
overloaded, Redis is not down, so the limits refuse rather than admit unchecked.

A reply is "in time" when it has reached this process by the socket timeout: the deadline is
measured on the event loop, which under load can run it before reading a reply that already
arrived, so a healthy Redis would read as timed out (and the limits would fail open). When the
deadline passes, the read is given `READ_GRACE_S` more, which lets the loop read its socket first
(as the cache tier does for its own deadline).
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.connection import AbstractConnection, Connection, SSLConnection, UnixDomainSocketConnection
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

MAX_CONNECTIONS = 64  # per client and process: three clients (shared, cache, readiness) per worker
POOL_WAIT_S = 1.0  # how long a command may wait for a free connection before it is refused
READ_GRACE_S = 0.001


class PoolExhausted(RedisConnectionError):
    """No connection of the pool freed within its wait: this process is overloaded, Redis may be fine."""


class BoundedPool(aioredis.BlockingConnectionPool):
    """A blocking pool whose "waited too long" is its own exception, not a connection failure."""

    async def get_connection(self, *args: Any, **kwargs: Any) -> AbstractConnection:
        try:
            connection: AbstractConnection = await super().get_connection(*args, **kwargs)  # type: ignore[no-untyped-call]
        except RedisConnectionError as exc:
            # BlockingConnectionPool raises ConnectionError from the wait's TimeoutError; a refused
            # or failed connect raises ConnectionError (or redis's TimeoutError) without that cause.
            if isinstance(exc.__cause__, TimeoutError) and not isinstance(exc, PoolExhausted):
                raise PoolExhausted(f"no free Redis connection within {self.timeout}s") from exc
            raise
        return connection


class _GraceRead(AbstractConnection):
    """Mixed into redis-py's connection classes: the socket timeout of a read, with the grace."""

    async def read_response(
        self,
        disable_decoding: bool = False,
        timeout: float | None = None,  # noqa: ASYNC109 - redis-py's own signature
        *,
        disconnect_on_error: bool = True,
        push_request: bool | None = False,
    ) -> Any:
        deadline_s = self.socket_timeout
        if timeout is not None or deadline_s is None:  # an explicit timeout, or none at all: as redis-py does
            return await super().read_response(
                disable_decoding, timeout, disconnect_on_error=disconnect_on_error, push_request=push_request
            )
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(None) as deadline:
                grace = loop.call_later(deadline_s, lambda: deadline.reschedule(loop.time() + READ_GRACE_S))
                try:  # redis-py's own deadline off (math.inf): this one replaces it
                    return await super().read_response(
                        disable_decoding, math.inf, disconnect_on_error=disconnect_on_error, push_request=push_request
                    )
                finally:
                    grace.cancel()
        except TimeoutError:
            if disconnect_on_error:  # a late reply must not be read by the next command on this connection
                await self.disconnect(nowait=True)
            raise RedisTimeoutError(f"Timeout reading from Redis after {deadline_s}s") from None


class GraceConnection(_GraceRead, Connection):
    pass


class GraceSSLConnection(_GraceRead, SSLConnection):
    pass


class GraceUnixDomainSocketConnection(_GraceRead, UnixDomainSocketConnection):
    pass


_GRACEFUL: dict[type[AbstractConnection], type[AbstractConnection]] = {
    Connection: GraceConnection,
    SSLConnection: GraceSSLConnection,
    UnixDomainSocketConnection: GraceUnixDomainSocketConnection,
}


def bounded_client(
    url: str,
    *,
    socket_timeout: float | None,
    socket_connect_timeout: float | None,
    max_connections: int = MAX_CONNECTIONS,
    pool_wait_s: float = POOL_WAIT_S,
    retry: Retry | None = None,
) -> aioredis.Redis:
    """A client owning a `BoundedPool`. `retry` default: one immediate retry on a broken connection
    (a pooled socket Redis closed) and never after a timeout, since a timed-out script may have run."""
    if retry is None:
        retry = Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,))
    pool = BoundedPool.from_url(
        url,
        max_connections=max_connections,
        timeout=pool_wait_s,
        socket_timeout=socket_timeout,
        socket_connect_timeout=socket_connect_timeout,
        retry=retry,
    )
    pool.connection_class = _GRACEFUL.get(pool.connection_class, pool.connection_class)  # as the URL chose
    return aioredis.Redis.from_pool(pool)
