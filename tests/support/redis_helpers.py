"""Redis for tests: clients of their own, an address where no Redis listens, and a relay that can
make Redis go away mid-test."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlparse

import redis.asyncio as aioredis


@asynccontextmanager
async def redis_client(url: str, **options: float) -> AsyncIterator[aioredis.Redis]:
    """A client (a connection pool) of its own: what one gateway replica holds."""
    client = aioredis.from_url(url, **options)
    try:
        yield client
    finally:
        await client.aclose()


def closed_port_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"redis://127.0.0.1:{port}/0"  # nothing listens there once the probe is closed


class RedisProxy:
    """A TCP relay in front of the real Redis, so a test can make Redis go away mid-test."""

    def __init__(self, target_url: str) -> None:
        parsed = urlparse(target_url)
        self._target = (parsed.hostname or "127.0.0.1", parsed.port or 6379)
        self._db = parsed.path or "/0"
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []
        self.url = ""

    async def start(self) -> RedisProxy:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        self.url = f"redis://127.0.0.1:{self._server.sockets[0].getsockname()[1]}{self._db}"
        return self

    async def stop(self) -> None:
        """Redis is gone: open connections drop, new ones are refused."""
        if self._server is not None:
            self._server.close()
            for writer in self._writers:
                writer.close()
            await self._server.wait_closed()
            self._server = None

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection(*self._target)
        self._writers += [writer, upstream_writer]

        async def pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError):
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            sink.close()

        await asyncio.gather(pump(reader, upstream_writer), pump(upstream_reader, writer))
