"""Stored responses: the `response`, its input items and the id it continued, kept for
`responses.retention_s` under the owner (API key and virtual key) that made them. In Redis when one
is configured (every replica and worker reads what another stored), else in this process's memory,
at most `responses.max_memory_entries` and `responses.memory_max_bytes` (the oldest go first).
Another owner's id reads as absent. A Redis that fails is a 503 naming the storage, never a 500."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Protocol

import orjson
from redis.exceptions import RedisError

from gateway.api.errors import GatewayError
from gateway.pipeline.responses.writer import RedisWriter
from policies.redis_pool import RedisClient

Stored = dict[str, Any]  # {"owner", "response", "input_items", "previous"} (native ones: "native", "upstream")


def stored_record(owner: str, response: bytes, input_items: list[dict[str, Any]], previous: str | None) -> bytes:
    """A `Stored` record, encoded, around the response as the client received it (encoded once,
    for the answer and for the store)."""
    return b'{"owner":%s,"response":%s,"input_items":%s,"previous":%s}' % (
        orjson.dumps(owner),
        response,
        orjson.dumps(input_items),
        orjson.dumps(previous),
    )


class StorageUnavailable(GatewayError):
    status = 503
    type = "server_error"
    code = "storage_unavailable"


class ResponseStore(Protocol):
    remote: bool  # a put waits on the network (worth overlapping with the call's other waits)

    async def put(self, response_id: str, record: bytes) -> None:
        """Keep `record` (a `Stored`, encoded: `stored_record`)."""

    async def get(self, response_id: str, owner: str) -> Stored | None: ...
    async def delete(self, response_id: str, owner: str) -> bool: ...
    def close(self) -> None: ...


class MemoryResponses:
    remote = False

    def __init__(
        self, retention_s: int, max_entries: int, max_bytes: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._retention_s = retention_s
        self._max = max_entries
        self._max_bytes = max_bytes
        self._bytes = 0
        self._clock = clock
        self._entries: OrderedDict[str, tuple[float, bytes]] = OrderedDict()

    async def put(self, response_id: str, record: bytes) -> None:
        self._drop(response_id)
        self._entries[response_id] = (self._clock() + self._retention_s, record)
        self._bytes += len(record)
        while len(self._entries) > self._max or self._bytes > self._max_bytes:
            self._drop(next(iter(self._entries)))  # the oldest (possibly this one, when it alone is too large)

    def _drop(self, response_id: str) -> None:
        found = self._entries.pop(response_id, None)
        if found is not None:
            self._bytes -= len(found[1])

    async def get(self, response_id: str, owner: str) -> Stored | None:
        found = self._entries.get(response_id)
        if found is None:
            return None
        if found[0] <= self._clock():
            self._drop(response_id)
            return None
        record: Stored = orjson.loads(found[1])  # a copy: a caller's change never reaches the store
        return record if record.get("owner") == owner else None

    async def delete(self, response_id: str, owner: str) -> bool:
        if await self.get(response_id, owner) is None:
            return False
        self._drop(response_id)
        return True

    def close(self) -> None:
        """Nothing to close: the entries go with the process."""


class RedisResponses:
    """Written through `writer` when given (one server: `RedisWriter`), else through `client`;
    read and deleted through `client`."""

    remote = True

    def __init__(self, client: RedisClient, prefix: str, retention_s: int, writer: RedisWriter | None = None) -> None:
        self._client = client
        self._prefix = f"{prefix}response:"
        self._retention_s = retention_s
        self._writer = writer

    async def put(self, response_id: str, record: bytes) -> None:
        try:
            if self._writer is not None:
                await self._writer.set((self._prefix + response_id).encode(), record, self._retention_s)
            else:
                await self._client.set(self._prefix + response_id, record, ex=self._retention_s)
        except (RedisError, OSError) as error:
            raise _unavailable(error) from None

    async def get(self, response_id: str, owner: str) -> Stored | None:
        try:
            raw = await self._client.get(self._prefix + response_id)
        except (RedisError, OSError) as error:
            raise _unavailable(error) from None
        if raw is None:
            return None
        record: Stored = orjson.loads(raw)
        return record if record.get("owner") == owner else None

    async def delete(self, response_id: str, owner: str) -> bool:
        if await self.get(response_id, owner) is None:
            return False
        try:
            return bool(await self._client.delete(self._prefix + response_id))
        except (RedisError, OSError) as error:
            raise _unavailable(error) from None

    def close(self) -> None:
        """Close the writer's connection (the client is its owner's to close)."""
        if self._writer is not None:
            self._writer.close()


def _unavailable(error: Exception) -> StorageUnavailable:
    return StorageUnavailable(
        f"The stored responses are unavailable (Redis: {type(error).__name__}); try again, or send store: false."
    )
