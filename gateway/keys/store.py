"""Where key records live: config.yaml (read-only) and Redis (managed by the admin API and CLI).

Redis layout: `{prefix}keys:hash:{sha256}` holds the record as JSON (so an authentication is one
GET), `{prefix}keys:names` maps each name to its hash (for list, show, rotate, revoke). Changes run
in WATCH/MULTI transactions, so two admins never leave a half-rotated key.

Each process caches lookups (known and unknown hashes alike) for `cache_ttl_s`, so most requests
cost no Redis round trip: a key revoked or rotated elsewhere stops working on every replica within
`cache_ttl_s` (at once in the process that changed it). When Redis fails, a hash this process has
seen is answered from its last view; config keys are never affected.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol

import redis.asyncio as aioredis
from redis.exceptions import WatchError

from gateway.keys.errors import KeyStoreUnavailable
from gateway.keys.records import Digest, KeyRecord
from policies.limits.guard import STORE_FAILURES, FailureLog

log = logging.getLogger(__name__)

_MAX_TRANSACTION_TRIES = 20
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
        record = self._by_hash.get(digest)
        return record if record is not None and record.matches(digest) else None

    async def get(self, name: str) -> KeyRecord | None:
        return self._by_name.get(name)

    async def list(self) -> list[KeyRecord]:
        return list(self._by_name.values())


class RedisKeyStore:
    def __init__(
        self,
        client: aioredis.Redis,
        prefix: str,
        *,
        cache_ttl_s: float = 5.0,
        cache_size: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cache_ttl_s = cache_ttl_s
        self._client = client
        self._prefix = prefix
        self._cache_size = cache_size
        self._clock = clock
        self._cache: OrderedDict[Digest, tuple[KeyRecord | None, float]] = OrderedDict()
        self.failures = FailureLog(
            "API key store in Redis", "answering from this process's last view", logger=log, clock=clock
        )

    async def lookup(self, digest: Digest) -> KeyRecord | None:
        cached = self._cache.get(digest)
        now = self._clock()
        if cached is not None and now < cached[1]:
            self._cache.move_to_end(digest)
            return cached[0]
        try:
            raw = await self._client.get(self._hash_key(digest))
        except STORE_FAILURES as exc:
            self.failures.failed(exc)
            if cached is None:
                raise KeyStoreUnavailable() from None
            return cached[0]
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
        return f"{self._prefix}keys:names"

    def _hash_key(self, digest: Digest) -> str:
        return f"{self._prefix}keys:hash:{digest}"

    def _remember(self, digest: Digest, record: KeyRecord | None, now: float) -> None:
        self._cache[digest] = (record, now + self.cache_ttl_s)
        self._cache.move_to_end(digest)
        while len(self._cache) > self._cache_size:  # unknown hashes from a key-guessing client stay bounded
            self._cache.popitem(last=False)

    def _forget(self, digest: Digest) -> None:
        self._cache.pop(digest, None)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
