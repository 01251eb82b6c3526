"""Stored responses: the `response`, its input items and the id it continued, kept for
`responses.retention_s` under the owner (API key and virtual key) that made them. In Redis when one
is configured (every replica and worker reads what another stored), else in this process's memory,
at most `responses.max_memory_entries` (the oldest go first). Another owner's id reads as absent."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Protocol

import orjson

from policies.redis_pool import RedisClient

Stored = dict[str, Any]  # {"owner", "response", "input_items", "previous"}


class ResponseStore(Protocol):
    async def put(self, response_id: str, record: Stored) -> None: ...
    async def get(self, response_id: str, owner: str) -> Stored | None: ...
    async def delete(self, response_id: str, owner: str) -> bool: ...


class MemoryResponses:
    def __init__(self, retention_s: int, max_entries: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._retention_s = retention_s
        self._max = max_entries
        self._clock = clock
        self._entries: OrderedDict[str, tuple[float, bytes]] = OrderedDict()

    async def put(self, response_id: str, record: Stored) -> None:
        self._entries[response_id] = (self._clock() + self._retention_s, orjson.dumps(record))
        self._entries.move_to_end(response_id)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)

    async def get(self, response_id: str, owner: str) -> Stored | None:
        found = self._entries.get(response_id)
        if found is None:
            return None
        if found[0] <= self._clock():
            del self._entries[response_id]
            return None
        record: Stored = orjson.loads(found[1])  # a copy: a caller's change never reaches the store
        return record if record.get("owner") == owner else None

    async def delete(self, response_id: str, owner: str) -> bool:
        if await self.get(response_id, owner) is None:
            return False
        del self._entries[response_id]
        return True


class RedisResponses:
    def __init__(self, client: RedisClient, prefix: str, retention_s: int) -> None:
        self._client = client
        self._prefix = f"{prefix}response:"
        self._retention_s = retention_s

    async def put(self, response_id: str, record: Stored) -> None:
        await self._client.set(self._prefix + response_id, orjson.dumps(record), ex=self._retention_s)

    async def get(self, response_id: str, owner: str) -> Stored | None:
        raw = await self._client.get(self._prefix + response_id)
        if raw is None:
            return None
        record: Stored = orjson.loads(raw)
        return record if record.get("owner") == owner else None

    async def delete(self, response_id: str, owner: str) -> bool:
        if await self.get(response_id, owner) is None:
            return False
        return bool(await self._client.delete(self._prefix + response_id))
