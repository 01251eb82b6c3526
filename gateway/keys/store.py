"""Where key records live: config.yaml (read-only) and Redis (managed by the admin API and CLI).

Redis layout: `{prefix}keys:hash:{sha256}` holds the record as JSON (so an authentication is one
read: the misses of concurrent requests share one MGET), `{prefix}keys:names` maps each name to its
hash (for list, show, rotate, revoke). Changes run in WATCH/MULTI transactions, so two admins never
leave a half-rotated key. On a Redis Cluster the keys are `{prefix}{keys}:hash:…` and
`{prefix}{keys}:names`: one hash tag, so a transaction's keys share a slot (all key records on one
node: few and small, and each process caches what it read).

Each process caches the keys it found for `cache_ttl_s`, so most requests cost no Redis round
trip: a key revoked or rotated elsewhere stops working on every replica within `cache_ttl_s` (at
once in the process that changed it). When Redis fails, a key this process has found is answered
from its last view; config keys are never affected.

Hashes Redis does not know live in a cache of their own (a negative cache: its own size bound, a
short TTL), so a client sending made-up keys can fill only that one: it never pushes a real key out
of the known keys' cache, whose last view must outlive a Redis outage.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol

from redis.exceptions import WatchError

from gateway.keys.errors import KeyStoreUnavailable
from gateway.keys.records import Digest, KeyRecord
from policies.limits.guard import STORE_FAILURES, FailureLog
from policies.redis_batch import BatchedReads
from policies.redis_pool import RedisClient, slot_tag

log = logging.getLogger(__name__)

_MAX_TRANSACTION_TRIES = 20
KNOWN_CACHE_SIZE = 10_000  # keys found in Redis (an LRU: only other real keys can push one out)
UNKNOWN_CACHE_SIZE = 4_096  # hashes Redis did not know (oldest dropped first)
UNKNOWN_TTL_S = 1.0  # at most this long (and at most cache_ttl_s) an unknown hash is not asked again
Change = Callable[[KeyRecord], KeyRecord]


class KeyStore(Protocol):
    async def lookup(self, digest: Digest) -> KeyRecord | None: ...

    async def get(self, name: str) -> KeyRecord | None: ...

    async def list(self) -> list[KeyRecord]: ...


class ConfigKeyStore:
    def __init__(self, records: list[KeyRecord]) -> None:
        self._by_hash = {record.sha256: record for record in records}
        self._by_name = {record.name: record for record in records}
        self.names = frozenset(self._by_name)

    async def lookup(self, digest: Digest) -> KeyRecord | None:
        return self._by_hash.get(digest)  # the directory compares the digest in constant time

    async def get(self, name: str) -> KeyRecord | None:
        return self._by_name.get(name)

    async def list(self) -> list[KeyRecord]:
        return list(self._by_name.values())


class RedisKeyStore:
    def __init__(
        self,
        client: RedisClient,
        prefix: str,
        *,
        cache_ttl_s: float = 5.0,
        cache_size: int = KNOWN_CACHE_SIZE,
        unknown_cache_size: int = UNKNOWN_CACHE_SIZE,
        unknown_ttl_s: float = UNKNOWN_TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cache_ttl_s = cache_ttl_s
        self._client = client
        self._prefix = prefix + slot_tag(client, "keys")
        self._cache_size = cache_size
        self._unknown_size = unknown_cache_size
        self._unknown_ttl_s = min(unknown_ttl_s, cache_ttl_s)
        self._clock = clock
        self._cache: OrderedDict[Digest, tuple[KeyRecord, float]] = OrderedDict()  # found: record, fresh until
        self._unknown: OrderedDict[Digest, float] = OrderedDict()  # not found: fresh until
        self._reads = BatchedReads(client.mget)  # a burst of cache misses shares round trips
        self.failures = FailureLog(
            "API key store in Redis", "answering from this process's last view", logger=log, clock=clock
        )

    async def lookup(self, digest: Digest) -> KeyRecord | None:
        now = self._clock()
        cached = self._cache.get(digest)
        if cached is not None and now < cached[1]:
            self._cache.move_to_end(digest)
            return cached[0]
        unknown_until = self._unknown.get(digest)
        if cached is None and unknown_until is not None and now < unknown_until:
            return None
        try:
            raw = await self._reads.read(self._hash_key(digest))
        except STORE_FAILURES as exc:
            self.failures.failed(exc)
            if cached is not None:
                return cached[0]  # its last view
            if unknown_until is not None:
                return None  # Redis did not know it a moment ago
            raise KeyStoreUnavailable() from None
        record = KeyRecord.model_validate_json(raw) if raw is not None else None
        self._remember(digest, record, now)
        return record

    async def get(self, name: str) -> KeyRecord | None:
        digest = await self._client.hget(self._names, name)
        if digest is None:
            return None
        raw = await self._client.get(self._hash_key(_text(digest)))
        return KeyRecord.model_validate_json(raw) if raw is not None else None

    async def list(self) -> list[KeyRecord]:
        digests = [_text(value) for value in (await self._client.hgetall(self._names)).values()]
        if not digests:
            return []
        blobs = await self._client.mget([self._hash_key(digest) for digest in digests])
        records = [KeyRecord.model_validate_json(blob) for blob in blobs if blob is not None]
        return sorted(records, key=lambda record: record.name)

    async def create(self, record: KeyRecord) -> bool:
        """False when the name is taken."""
        async with self._client.pipeline(transaction=True) as pipe:
            for _ in range(_MAX_TRANSACTION_TRIES):
                try:
                    await pipe.watch(self._names)
                    if await pipe.hexists(self._names, record.name):
                        return False
                    pipe.multi()  # type: ignore[no-untyped-call]
                    pipe.set(self._hash_key(record.sha256), record.model_dump_json())
                    pipe.hset(self._names, record.name, record.sha256)
                    await pipe.execute()
                    self._forget(record.sha256)
                    return True
                except WatchError:
                    continue
        raise KeyStoreUnavailable()

    async def update(self, name: str, change: Change) -> KeyRecord | None:
        """Apply `change` to the named record atomically (a new hash moves it); None: no such key."""
        async with self._client.pipeline(transaction=True) as pipe:
            for _ in range(_MAX_TRANSACTION_TRIES):
                try:
                    await pipe.watch(self._names)
                    old_digest = await pipe.hget(self._names, name)
                    if old_digest is None:
                        return None
                    await pipe.watch(self._hash_key(_text(old_digest)))  # a revoke changes only the record
                    raw = await pipe.get(self._hash_key(_text(old_digest)))
                    if raw is None:
                        return None
                    old = KeyRecord.model_validate_json(raw)
                    new = change(old)
                    pipe.multi()  # type: ignore[no-untyped-call]
                    if new.sha256 != old.sha256:
                        pipe.delete(self._hash_key(old.sha256))
                        pipe.hset(self._names, name, new.sha256)
                    pipe.set(self._hash_key(new.sha256), new.model_dump_json())
                    await pipe.execute()
                    self._forget(old.sha256)
                    self._forget(new.sha256)
                    return new
                except WatchError:
                    continue
        raise KeyStoreUnavailable()

    @property
    def _names(self) -> str:
        return f"{self._prefix}:names"

    def _hash_key(self, digest: Digest) -> str:
        return f"{self._prefix}:hash:{digest}"

    def _remember(self, digest: Digest, record: KeyRecord | None, now: float) -> None:
        if record is None:  # never in the known keys' cache: made-up keys cannot push real ones out
            self._cache.pop(digest, None)
            if self._unknown_ttl_s <= 0:
                return
            self._unknown[digest] = now + self._unknown_ttl_s
            self._unknown.move_to_end(digest)
            while len(self._unknown) > self._unknown_size:
                self._unknown.popitem(last=False)
            return
        self._unknown.pop(digest, None)
        self._cache[digest] = (record, now + self.cache_ttl_s)
        self._cache.move_to_end(digest)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    def _forget(self, digest: Digest) -> None:
        self._cache.pop(digest, None)
        self._unknown.pop(digest, None)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
