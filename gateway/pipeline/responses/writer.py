"""The stored responses' writes to Redis, on a connection of their own: each response one `SET`
(with its expiry), its reply read by the event loop's protocol callback, in order.

A stored response is written before its answer ends (a client may read it from any worker as
soon as it has the answer), so one round trip to Redis is on every stored response's path. Through
redis-py that write costs more than the bridge itself (a pool checkout, the retry and
observability layers, a parser, a timeout context per command); here it is one pre-encoded
command and a future. The writes of concurrent requests share the connection: those made in one
turn of the event loop go out in one send, their replies come back in order (pipelining).

Like the pool's commands: a reply is awaited at most the socket timeout (`redis.timeout_s`), plus
`READ_GRACE_S` so that a reply already on the socket is read first; a timed-out connection is
closed (a late reply must not answer the next command); a connection that broke is replaced and
the command sent once more (a `SET` may be repeated), never after a timeout. Failures raise
redis-py's exceptions, so the store treats them as any Redis failure.

For one server (`redis://`, `rediss://`, `unix://`), with its credentials and database. A Redis
Cluster or a master found through Sentinel keeps redis-py, which follows slots and failovers.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from typing import Any, cast

from redis.asyncio.connection import SSLConnection, parse_url
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from policies.redis_pool import READ_GRACE_S, RedisTarget

Pending = tuple[float, "asyncio.Future[bytes]"]  # (deadline, the reply's future)


def command(*parts: bytes) -> bytes:
    """A command in RESP: an array of bulk strings."""
    return b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(part), part) for part in parts)


class _Connection(asyncio.Protocol):
    """One connection: commands written in order, each reply (a simple string or an error: all
    that AUTH, SELECT and SET answer) resolving the oldest pending command."""

    def __init__(self, timeout_s: float) -> None:
        self._loop = asyncio.get_running_loop()
        self._timeout_s = timeout_s
        self._transport: asyncio.Transport | None = None
        self._pending: deque[Pending] = deque()
        self._outgoing: list[bytes] = []  # written at the end of this turn of the loop, in one send
        self._buffer = b""
        self._timer: asyncio.TimerHandle | None = None
        self._graced: asyncio.Future[bytes] | None = None  # the command given READ_GRACE_S past its deadline
        self.broken: Exception | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is not asyncio's class, but is one

    def send(self, packed: bytes) -> asyncio.Future[bytes]:
        """The future of `packed`'s reply (raises at once on a broken connection)."""
        if self.broken is not None:
            raise self.broken
        future: asyncio.Future[bytes] = self._loop.create_future()
        if not self._outgoing:
            self._loop.call_soon(self._flush)
        self._outgoing.append(packed)
        self._pending.append((self._loop.time() + self._timeout_s, future))
        if self._timer is None:
            self._timer = self._loop.call_at(self._pending[0][0], self._check)
        return future

    def _flush(self) -> None:
        outgoing, self._outgoing = self._outgoing, []
        if self.broken is None and self._transport is not None:
            self._transport.write(outgoing[0] if len(outgoing) == 1 else b"".join(outgoing))

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer + data if self._buffer else data
        start = 0
        while (end := buffer.find(b"\r\n", start)) >= 0:
            line, start = buffer[start:end], end + 2
            kind = line[:1]
            if not self._pending or kind not in (b"+", b"-"):
                self._break(RedisConnectionError("Redis sent a reply this connection did not expect"))
                return
            future = self._pending.popleft()[1]
            if future.done():  # its request was cancelled (the client left): the reply is dropped
                continue
            if kind == b"+":
                future.set_result(line[1:])
            else:
                future.set_exception(ResponseError(line[1:].decode(errors="replace")))
        self._buffer = buffer[start:]

    def connection_lost(self, exc: Exception | None) -> None:
        if self.broken is None:
            self._break(RedisConnectionError("Connection closed by Redis"))

    def _check(self) -> None:
        self._timer = None
        if not self._pending:
            return
        deadline, future = self._pending[0]
        if deadline > self._loop.time():
            self._timer = self._loop.call_at(deadline, self._check)
        elif self._graced is not future:  # once more after the loop has read its sockets
            self._graced = future
            self._timer = self._loop.call_later(READ_GRACE_S, self._check)
        else:
            self._break(RedisTimeoutError(f"Timeout reading from Redis after {self._timeout_s}s"))

    def _break(self, error: Exception) -> None:
        """Fail every pending command and close: nothing more is read or written here."""
        self.broken = error
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        pending, self._pending = self._pending, deque()
        for _, future in pending:
            if not future.done():
                future.set_exception(error)
        if self._transport is not None:
            self._transport.abort()

    def close(self) -> None:
        if self.broken is None:
            self._break(RedisConnectionError("Connection closed by the gateway"))


class RedisWriter:
    """`set` on one server, over one pipelined connection opened at the first write and
    replaced when it breaks."""

    def __init__(self, url: str, timeout_s: float) -> None:
        options: dict[str, Any] = dict(parse_url(url))
        secure = options.pop("connection_class", None) is SSLConnection
        self._path: str | None = options.get("path")
        self._host: str = options.get("host", "localhost")
        self._port: int = options.get("port", 6379)
        self._timeout_s = options.get("socket_timeout", timeout_s)
        self._connect_timeout_s = options.get("socket_connect_timeout", timeout_s)
        # TLS exactly as redis-py's own connection would make it from this URL (its defaults included).
        self._ssl: ssl.SSLContext | None = SSLConnection(**options).ssl_context.get() if secure else None
        self._handshake: list[bytes] = []
        username, password, db = options.get("username"), options.get("password"), options.get("db", 0)
        if password:
            self._handshake.append(command(b"AUTH", *([username.encode()] if username else []), password.encode()))
        if db:
            self._handshake.append(command(b"SELECT", str(db).encode()))
        self._connection: _Connection | None = None
        self._opening: asyncio.Lock | None = None

    @classmethod
    def of(cls, target: RedisTarget, timeout_s: float) -> RedisWriter | None:
        """A writer for one server; None for a cluster or Sentinel (redis-py writes there)."""
        return cls(target.url, timeout_s) if target.mode == "single" and target.url else None

    async def set(self, key: bytes, value: bytes, ttl_s: int) -> None:
        packed = command(b"SET", key, value, b"EX", b"%d" % ttl_s)
        connection = self._connection
        if connection is None or connection.broken is not None:
            connection = await self._connected()
        try:
            await connection.send(packed)
        except RedisConnectionError:  # broken under it (Redis restarted, closed it): once more, anew
            await (await self._connected()).send(packed)

    async def _connected(self) -> _Connection:
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:  # one connect for the writes that found the connection broken
            connection = self._connection
            if connection is None or connection.broken is not None:
                connection = self._connection = await self._open()
            return connection

    async def _open(self) -> _Connection:
        loop = asyncio.get_running_loop()
        timeout_s = self._timeout_s
        try:
            async with asyncio.timeout(self._connect_timeout_s):
                if self._path is not None:
                    _, connection = await loop.create_unix_connection(lambda: _Connection(timeout_s), self._path)
                else:
                    _, connection = await loop.create_connection(
                        lambda: _Connection(timeout_s), self._host, self._port, ssl=self._ssl
                    )
        except TimeoutError:
            raise RedisTimeoutError(f"Timeout connecting to Redis after {self._connect_timeout_s}s") from None
        except OSError as error:
            raise RedisConnectionError(f"Error connecting to Redis: {error.strerror or error}") from None
        try:
            for reply in [connection.send(packed) for packed in self._handshake]:
                await reply
        except BaseException:
            connection.close()
            raise
        return connection

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
