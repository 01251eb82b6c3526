"""The in-process tier: a least-recently-used map bounded by the bytes of the entries it holds.

Entries expire at their own `expires_at`; an expired entry is dropped when it is next read, or
by a write when it reached the least recently used end, and evicted first by age of use like any
other when room is needed. Single event loop, no locks.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from policies.cache.entry import CacheEntry


class MemoryCache:
    def __init__(self, max_bytes: int, *, clock: Callable[[], float] = time.time) -> None:
        self.max_bytes = max_bytes
        self.nbytes = 0  # sum of the held entries' sizes, never above max_bytes
        self.evictions = 0
        self._clock = clock
        self._entries: OrderedDict[str, CacheEntry] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def get_now(self, key: str) -> CacheEntry | None:
        """`get` without a coroutine, for callers on the hot path."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.expired(self._clock()):
            self._remove(key)
            return None
        self._entries.move_to_end(key)
        return entry

    def put_now(self, key: str, entry: CacheEntry) -> bool:
        self._remove(key)
        now = self._clock()
        if entry.nbytes > self.max_bytes or entry.expired(now):
            return False
        # Expired entries that nobody reads again would stay until evicted for room: each write
        # drops those at the least recently used end.
        while self._entries and next(iter(self._entries.values())).expired(now):
            self._remove(next(iter(self._entries)))
        while self.nbytes + entry.nbytes > self.max_bytes:
            oldest = next(iter(self._entries))
            self._remove(oldest)
            self.evictions += 1
        self._entries[key] = entry
        self.nbytes += entry.nbytes
        return True

    async def get(self, key: str) -> CacheEntry | None:
        return self.get_now(key)

    async def put(self, key: str, entry: CacheEntry) -> bool:
        return self.put_now(key, entry)

    async def delete(self, key: str) -> None:
        self._remove(key)

    async def aclose(self) -> None:
        self._entries.clear()
        self.nbytes = 0

    def _remove(self, key: str) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self.nbytes -= entry.nbytes
