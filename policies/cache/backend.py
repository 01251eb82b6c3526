"""The one interface every cache tier implements (memory, Redis, the two stacked)."""

from __future__ import annotations

from typing import Protocol

from policies.cache.entry import CacheEntry


class CacheBackend(Protocol):
    async def get(self, key: str) -> CacheEntry | None:
        """The live entry under `key`, or None. Never raises for an unavailable backend."""

    async def put(self, key: str, entry: CacheEntry) -> bool:
        """Store `entry` until it expires; False when it was not stored. Never raises either."""

    async def delete(self, key: str) -> None: ...

    async def aclose(self) -> None: ...
