"""Every Redis client the gateway builds: a bounded pool that waits briefly for a free connection.

redis-py's default async pool raises as soon as its 100 connections are in use, so a burst of
requests read as "Redis is down" (and the limits failed open). Here a full pool makes a command
wait up to `pool_wait_s` for a connection; only if none frees in that time does it raise
`PoolExhausted`, which `guard.is_outage` does not count as an outage: the gateway is
overloaded, Redis is not down, so the limits refuse rather than admit unchecked.

The gateway's Redis is one server, a Redis Cluster or a master named by Sentinel (`RedisTarget`);
`bounded_client` builds the client for each with those same semantics. On a cluster every command
and script must touch keys of one hash slot: `slot_tag` puts the part of a key's name that decides
its slot in braces (a hash tag), on a cluster only, so a single Redis keeps the names it had.

A reply is "in time" when it has reached this process by the socket timeout: the deadline is
measured on the event loop, which under load can run it before reading a reply that already
arrived, so a healthy Redis would read as timed out (and the limits would fail open). When the
deadline passes, the read is given `READ_GRACE_S` more, which lets the loop read its socket first
(as the cache tier does for its own deadline).
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, overload

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import (
    AbstractConnection,
    Connection,
    SSLConnection,
    UnixDomainSocketConnection,
    parse_url,
)
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import (
    Sentinel,
    SentinelConnectionPool,
    SentinelManagedConnection,
    SentinelManagedSSLConnection,
)
from redis.backoff import NoBackoff
from redis.exceptions import ClusterDownError, SlotNotCoveredError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from policies.redis_sentinel import CheckedSentinel

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


class GraceSentinelConnection(_GraceRead, SentinelManagedConnection):  # type: ignore[misc]  # redis-py's signatures differ
    pass


class GraceSentinelSSLConnection(_GraceRead, SentinelManagedSSLConnection):  # type: ignore[misc]
    pass


_GRACEFUL: dict[type[AbstractConnection], type[AbstractConnection]] = {
    Connection: GraceConnection,
    SSLConnection: GraceSSLConnection,
    UnixDomainSocketConnection: GraceUnixDomainSocketConnection,
    SentinelManagedConnection: GraceSentinelConnection,
    SentinelManagedSSLConnection: GraceSentinelSSLConnection,
}

Mode = Literal["single", "cluster", "sentinel"]
RedisClient: TypeAlias = aioredis.Redis | RedisCluster  # what `bounded_client` builds
SENTINEL_PORT = 26379


@dataclass(frozen=True, slots=True)
class RedisTarget:
    """Where the gateway's Redis is (config.yaml's `redis:` section, as the policies see it).

    - `single`: the server at `url` (redis://, rediss:// or unix://).
    - `cluster`: a Redis Cluster; `url` names any of its nodes (the others are discovered).
    - `sentinel`: the master that the Sentinels at `sentinels` (host, port) name `service_name`,
      found again after a failover; `url`, if set, gives only the master's credentials, database
      and TLS (rediss://), e.g. `redis://:PASSWORD@/0`; `sentinel_username` and
      `sentinel_password`, if set, are the Sentinels' own (their `requirepass` or ACL user).
    """

    url: str = ""
    mode: Mode = "single"
    sentinels: tuple[tuple[str, int], ...] = ()
    service_name: str = ""
    sentinel_username: str = ""
    sentinel_password: str = field(default="", repr=False)

    @property
    def configured(self) -> bool:
        return bool(self.sentinels) if self.mode == "sentinel" else bool(self.url)

    def describe(self) -> str:
        """For messages: where it is, never a password."""
        if self.mode == "sentinel":
            nodes = ", ".join(f"{host}:{port}" for host, port in self.sentinels)
            return f"the master {self.service_name!r} of the Sentinels at {nodes}"
        parsed = parse_url(self.url) if self.url else {}
        where = parsed.get("path") or f"{parsed.get('host', '?')}:{parsed.get('port', 6379)}"
        return f"the Redis Cluster at {where}" if self.mode == "cluster" else f"Redis at {where}"


def is_cluster(client: object) -> bool:
    return isinstance(client, RedisCluster)


def slot_tag(client: object, name: str) -> str:
    """The part of a key's name that decides its slot: `{name}` on a cluster (a hash tag: every key
    holding it lands in one slot, so one script or transaction may touch them all), else `name` as
    it always was. `name` holds no braces (config names are letters, digits and . _ : / @ -)."""
    return "{" + name + "}" if is_cluster(client) else name


class BoundedCluster(RedisCluster):
    """A Redis Cluster client with the bounded pool's semantics: at most `max_connections` commands
    in flight per process (each holds one connection of one node), a command waits up to
    `pool_wait_s` for its turn and is then refused with `PoolExhausted`. MOVED, ASK and TRYAGAIN
    (a slot being resharded) are followed by redis-py; after a broken connection, or the cluster
    being down during a failover, the slot map is read again and the command retried as `retry`
    allows, never after a timeout (a timed-out script may have run)."""

    ERRORS_ALLOW_RETRY = (RedisConnectionError, ClusterDownError, SlotNotCoveredError)  # type: ignore[assignment]
    # Redirections (MOVED, ASK) and TRYAGAIN a command follows before it fails: redis-py's 16 are
    # about 0.4 s of TRYAGAIN (0.05 s apart after the first 8), less than a reshard may keep a
    # script's keys split between two masters on a busy machine; 48 are about 2 s.
    RedisClusterRequestTTL = 48

    def __init__(self, *args: Any, pool_wait_s: float = POOL_WAIT_S, **kwargs: Any) -> None:
        max_connections: int = kwargs.get("max_connections", MAX_CONNECTIONS)
        # Each node's own bound is only a backstop, with room for the transactions (WATCH/MULTI)
        # that take a node's connection without passing through `execute_command`.
        kwargs["max_connections"] = max_connections + _TRANSACTION_HEADROOM
        super().__init__(*args, **kwargs)
        self._pool_wait_s = pool_wait_s
        self._turns = asyncio.Semaphore(max_connections)
        connection_class = self.connection_kwargs["connection_class"]
        graceful = _GRACEFUL.get(connection_class, connection_class)
        self.connection_kwargs["connection_class"] = graceful  # the nodes discovered from here on
        for node in self.startup_nodes:
            node.connection_class = graceful

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        try:
            async with asyncio.timeout(self._pool_wait_s):
                await self._turns.acquire()
        except TimeoutError:
            raise PoolExhausted(f"no free Redis connection within {self._pool_wait_s}s") from None
        try:
            return await super().execute_command(*args, **kwargs)
        finally:
            self._turns.release()


_TRANSACTION_HEADROOM = 16


class BoundedSentinelPool(SentinelConnectionPool, BoundedPool):
    """The master's pool as Sentinel names it, bounded and blocking like `BoundedPool`."""


class SentinelClient(aioredis.Redis):
    """The client of the master that Sentinel names; closing it closes the Sentinels' clients too."""

    sentinel_manager: Sentinel | None = None

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        await super().aclose(close_connection_pool)
        if self.sentinel_manager is not None:
            for client in self.sentinel_manager.sentinels:
                await client.aclose()


def _default_retry() -> Retry:
    return Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,))


@overload
def bounded_client(
    target: str,
    *,
    socket_timeout: float | None,
    socket_connect_timeout: float | None,
    max_connections: int = MAX_CONNECTIONS,
    pool_wait_s: float = POOL_WAIT_S,
    retry: Retry | None = None,
) -> aioredis.Redis: ...


@overload
def bounded_client(
    target: RedisTarget,
    *,
    socket_timeout: float | None,
    socket_connect_timeout: float | None,
    max_connections: int = MAX_CONNECTIONS,
    pool_wait_s: float = POOL_WAIT_S,
    retry: Retry | None = None,
) -> RedisClient: ...


def bounded_client(
    target: str | RedisTarget,
    *,
    socket_timeout: float | None,
    socket_connect_timeout: float | None,
    max_connections: int = MAX_CONNECTIONS,
    pool_wait_s: float = POOL_WAIT_S,
    retry: Retry | None = None,
) -> RedisClient:
    """A client owning a bounded pool, for a URL (one server) or any `RedisTarget`. `retry`
    default: one immediate retry on a broken connection (a pooled socket Redis closed) and never
    after a timeout, since a timed-out script may have run."""
    if isinstance(target, str):
        target = RedisTarget(url=target)
    retry = retry or _default_retry()
    timeouts: dict[str, Any] = {"socket_timeout": socket_timeout, "socket_connect_timeout": socket_connect_timeout}
    if target.mode == "cluster":
        return BoundedCluster.from_url(
            target.url,
            max_connections=max_connections,
            pool_wait_s=pool_wait_s,
            retry=retry,
            reinitialize_steps=0,  # a MOVED patches the slot map: never drop the connections other commands use
            **timeouts,
        )
    if target.mode == "sentinel":
        return _sentinel_client(
            target, max_connections=max_connections, pool_wait_s=pool_wait_s, retry=retry, **timeouts
        )
    pool = BoundedPool.from_url(
        target.url, max_connections=max_connections, timeout=pool_wait_s, retry=retry, **timeouts
    )
    pool.connection_class = _GRACEFUL.get(pool.connection_class, pool.connection_class)  # as the URL chose
    return aioredis.Redis.from_pool(pool)


def _sentinel_client(
    target: RedisTarget, *, max_connections: int, pool_wait_s: float, **options: Any
) -> SentinelClient:
    master: dict[str, Any] = (
        {key: value for key, value in parse_url(target.url).items() if key not in ("host", "port")}
        if target.url
        else {}
    )
    secure = master.pop("connection_class", None) is SSLConnection
    sentinel = CheckedSentinel(target.sentinels, sentinel_kwargs=_sentinel_options(target, options))
    client: SentinelClient = sentinel.master_for(
        target.service_name,
        redis_class=SentinelClient,
        connection_pool_class=BoundedSentinelPool,
        connection_class=GraceSentinelSSLConnection if secure else GraceSentinelConnection,
        max_connections=max_connections,
        timeout=pool_wait_s,
        **master,
        **options,
    )
    client.sentinel_manager = sentinel
    return client


def _sentinel_options(target: RedisTarget, options: dict[str, Any]) -> dict[str, Any]:
    """How to talk to the Sentinels themselves: the master's timeouts and retry (redis-py's default
    backs off for seconds before it asks the next Sentinel), and their own credentials (never the
    master's: `url`'s password is often not theirs)."""
    sentinel_options: dict[str, Any] = {
        "socket_timeout": options["socket_timeout"],
        "socket_connect_timeout": options["socket_connect_timeout"],
        "retry": options["retry"],
    }
    if target.sentinel_password:
        sentinel_options["username"] = target.sentinel_username or None
        sentinel_options["password"] = target.sentinel_password
    return sentinel_options
