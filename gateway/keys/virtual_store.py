"""Virtual keys (named provider credentials) kept in Redis, their values encrypted (see `vault`).

Layout: `{prefix}vkeys` a hash of name -> JSON (provider, dates, revoked, `secret`: the Fernet
token). Reading it without GATEWAY_ENCRYPTION_KEY yields nothing usable. A revoke drops the secret.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict
from redis.exceptions import WatchError

from gateway.api.errors import InvalidRequest
from gateway.config.loader import unknown_provider_type
from gateway.config.settings import Name
from gateway.keys.errors import EncryptionKeyMissing, KeyStoreUnavailable
from gateway.keys.records import utcnow
from gateway.keys.vault import ENCRYPTION_KEY_VARIABLE, Vault
from policies.redis_batch import BatchedReads
from policies.redis_pool import RedisClient

_MAX_TRANSACTION_TRIES = 20


class VirtualKeyRecord(BaseModel):
    """What anyone may see of a virtual key: never its value."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Name
    provider: str
    created_at: datetime | None = None
    rotated_at: datetime | None = None
    revoked: bool = False
    source: str = "redis"

    def public(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class _Stored(VirtualKeyRecord):
    secret: str | None = None  # the Fernet token

    def record(self) -> VirtualKeyRecord:
        return VirtualKeyRecord.model_validate(self.model_dump(exclude={"secret"}))


class RedisVirtualKeyStore:
    def __init__(self, client: RedisClient, prefix: str, vault: Vault | None) -> None:
        self._client = client
        self._key = f"{prefix}vkeys"
        self._vault = vault
        self._reads = BatchedReads(lambda names: client.hmget(self._key, names))  # concurrent misses share a round trip

    async def get(self, name: str) -> VirtualKeyRecord | None:
        stored = await self._read(name)
        return stored.record() if stored is not None else None

    async def list(self) -> list[VirtualKeyRecord]:
        blobs = (await self._client.hgetall(self._key)).values()
        return sorted((_Stored.model_validate_json(blob).record() for blob in blobs), key=lambda r: r.name)

    async def credential(self, name: str) -> tuple[VirtualKeyRecord, str | None] | None:
        """The record and its decrypted value (None once revoked); None: no such virtual key."""
        stored = await self._read(name)
        if stored is None:
            return None
        value = self._need_vault().decrypt(stored.secret) if stored.secret is not None else None
        return stored.record(), value

    async def create(self, name: str, provider: str, value: str) -> VirtualKeyRecord | None:
        """None when the name is taken; 400 for a provider type that does not exist (a typo)."""
        problem = unknown_provider_type(provider)
        if problem:
            raise InvalidRequest(f"{problem[:1].upper()}{problem[1:]}.", param="provider", code="unknown_provider")
        stored = _Stored(name=name, provider=provider, created_at=utcnow(), secret=self._need_vault().encrypt(value))
        created = await self._client.hsetnx(self._key, name, stored.model_dump_json())
        return stored.record() if created else None

    async def rotate(self, name: str, value: str) -> VirtualKeyRecord | None:
        """A new value for the credential; None: no such (live) virtual key."""
        token = self._need_vault().encrypt(value)
        return await self._update(name, lambda s: None if s.revoked else _replace(s, secret=token, rotated_at=utcnow()))

    async def revoke(self, name: str) -> VirtualKeyRecord | None:
        return await self._update(name, lambda s: _replace(s, secret=None, revoked=True))

    async def reencrypt(self) -> int:
        """Every stored value under the newest encryption key; how many were rewritten."""
        vault, count = self._need_vault(), 0

        def reencrypted(stored: _Stored) -> _Stored | None:
            return _replace(stored, secret=vault.reencrypt(stored.secret)) if stored.secret else None

        for record in await self.list():
            count += await self._update(record.name, reencrypted) is not None
        return count

    async def _read(self, name: str) -> _Stored | None:
        blob = await self._reads.read(name)
        return _Stored.model_validate_json(blob) if blob is not None else None

    async def _update(self, name: str, change: Callable[[_Stored], _Stored | None]) -> VirtualKeyRecord | None:
        async with self._client.pipeline(transaction=True) as pipe:
            for _ in range(_MAX_TRANSACTION_TRIES):
                try:
                    await pipe.watch(self._key)
                    blob = await pipe.hget(self._key, name)
                    new = change(_Stored.model_validate_json(blob)) if blob is not None else None
                    if new is None:
                        return None
                    pipe.multi()  # type: ignore[no-untyped-call]
                    pipe.hset(self._key, name, new.model_dump_json())
                    await pipe.execute()
                    return new.record()
                except WatchError:
                    continue
        raise KeyStoreUnavailable()

    def _need_vault(self) -> Vault:
        if self._vault is None:
            raise EncryptionKeyMissing(
                f"Virtual keys kept in Redis need {ENCRYPTION_KEY_VARIABLE} in the gateway's environment "
                "(a Fernet key: `gateway keys encryption-key` makes one); set it on every replica and restart."
            )
        return self._vault


def _replace(stored: _Stored, **changes: object) -> _Stored:
    return stored.model_copy(update=changes)
