"""All gateway API keys: config.yaml's first (they work even with Redis down), then Redis's; and the
one place a presented key becomes a caller or a 401, and a caller meets a deployment (403)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime

from gateway.api.credentials import hash_key, presented_key
from gateway.api.errors import AuthenticationFailed, PermissionDenied
from gateway.keys.errors import Conflict, ReadOnlyStore
from gateway.keys.records import ANONYMOUS, KeyRecord, new_key, utcnow
from gateway.keys.store import ConfigKeyStore, RedisKeyStore
from gateway.keys.throttle import AUTH_CLIENT


class KeyDirectory:
    def __init__(
        self,
        configured: list[KeyRecord],
        redis: RedisKeyStore | None = None,
        *,
        required: bool | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        """`required`: refuse callers without a key. Default: when any key may exist (in config or Redis)."""
        self.config = ConfigKeyStore(configured)
        self.redis = redis
        self.required = (bool(configured) or redis is not None) if required is None else required
        self._clock = clock

    async def authenticate(self, headers: Mapping[str, str]) -> KeyRecord:
        """The caller's record; 401 for a missing, unknown, expired or revoked key, and 429 while the
        client's address is throttled for its failures (see `gateway.keys.throttle.FailureThrottle`)."""
        if not self.required:
            return ANONYMOUS
        client = AUTH_CLIENT.get()  # None outside a request (the CLI, unit tests)
        if client is None:
            return await self._authenticate(headers)
        client.check()
        try:
            return await self._authenticate(headers)
        except AuthenticationFailed as failed:
            client.failed(failed.code)
            raise

    async def _authenticate(self, headers: Mapping[str, str]) -> KeyRecord:
        presented = presented_key(headers)
        if presented is None:
            raise AuthenticationFailed(
                "Missing API key: send it as 'Authorization: Bearer <key>' or in the 'x-gateway-api-key' header.",
                code="missing_api_key",
            )
        digest = hash_key(presented)
        record = await self.config.lookup(digest)
        if record is None and self.redis is not None:
            record = await self.redis.lookup(digest)
        if record is None or not record.matches(digest):
            raise AuthenticationFailed("Invalid API key: the key presented is not known to this gateway.")
        if record.revoked:
            raise AuthenticationFailed(f"The API key {record.name!r} has been revoked.", code="revoked_api_key")
        if record.expires_at is not None and record.expired(self._clock()):
            raise AuthenticationFailed(f"The API key {record.name!r} has expired.", code="expired_api_key")
        return record

    async def get(self, name: str) -> KeyRecord | None:
        record = await self.config.get(name)
        if record is None and self.redis is not None:
            record = await self.redis.get(name)
        return record

    async def list(self) -> list[KeyRecord]:
        stored = await self.redis.list() if self.redis is not None else []
        return [*await self.config.list(), *stored]

    async def create(self, name: str, policy: Mapping[str, object]) -> tuple[str, KeyRecord]:
        """A new key in Redis: its value (to show once) and its record."""
        if name in self.config.names:
            raise Conflict(f"A key named {name!r} is defined in the config file.", param="name")
        store = self._writable(name)
        value, digest = new_key()
        record = KeyRecord.model_validate({**policy, "name": name, "sha256": digest, "created_at": self._clock()})
        if not await store.create(record):
            raise Conflict(f"A key named {name!r} exists already.", param="name")
        return value, record

    async def rotate(self, name: str) -> tuple[str, KeyRecord] | None:
        """A new value for the key (the old one stops working); None: no such key in Redis."""
        value, digest = new_key()
        record = await self._writable(name).update(name, lambda old: old.model_copy(update={"sha256": digest}))
        return (value, record) if record is not None else None

    async def update(self, name: str, changes: Mapping[str, object]) -> KeyRecord | None:
        """The key with `changes` to its policy (validated as a whole); None: no such key in Redis."""
        return await self._writable(name).update(name, lambda old: KeyRecord.model_validate({**dict(old), **changes}))

    async def revoke(self, name: str) -> KeyRecord | None:
        return await self._writable(name).update(name, lambda old: old.model_copy(update={"revoked": True}))

    def _writable(self, name: str) -> RedisKeyStore:
        if name in self.config.names:
            raise ReadOnlyStore(f"The key {name!r} is defined in the config file: change it there.", param="name")
        if self.redis is None:
            raise ReadOnlyStore("Keys are created and changed in Redis: configure redis.url.")
        return self.redis


def authorize(record: KeyRecord, deployment: str, tags: Iterable[str] = ()) -> None:
    """403 unless the key may use this deployment (by name, by one of its tags, or `*`)."""
    if not record.may_use(deployment, list(tags)):
        raise PermissionDenied(f"The API key {record.name!r} may not use the deployment {deployment!r}.")
