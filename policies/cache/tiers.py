"""Memory in front of Redis: reads try memory, then Redis (a Redis hit fills memory for the rest
of the entry's life); writes go to both. Either tier may be absent. `shared=False` keeps a call to
this process (a deployment whose policy says ``redis: false``)."""

from __future__ import annotations

from policies.cache.entry import CacheEntry
from policies.cache.memory import MemoryCache
from policies.cache.redis_tier import RedisCache


class TieredCache:
    def __init__(self, memory: MemoryCache | None = None, redis: RedisCache | None = None) -> None:
        self.memory = memory
        self.redis = redis

    async def get(self, key: str, *, shared: bool = True) -> CacheEntry | None:
        if self.memory is not None:
            entry = self.memory.get_now(key)
            if entry is not None:
                return entry
        if self.redis is None or not shared:
            return None
        entry = await self.redis.get(key)
        if entry is not None and self.memory is not None:
            self.memory.put_now(key, entry)
        return entry

    async def put(self, key: str, entry: CacheEntry, *, shared: bool = True) -> bool:
        stored = False
        if self.memory is not None:
            stored = self.memory.put_now(key, entry)
        if self.redis is not None and shared:
            stored = await self.redis.put(key, entry) or stored
        return stored

    async def delete(self, key: str) -> None:
        if self.memory is not None:
            await self.memory.delete(key)
        if self.redis is not None:
            await self.redis.delete(key)

    async def aclose(self) -> None:
        if self.memory is not None:
            await self.memory.aclose()
        if self.redis is not None:
            await self.redis.aclose()
