"""Choosing a provider credential by virtual key: config.yaml's first, then Redis's.

A client names a virtual key in a header; the chosen deployment then calls its upstream with that
credential, provided the client's key lists the virtual key and the providers match. The value
never leaves the server: no error, log line or admin answer carries it. Decrypted values are
cached in the process for `cache_ttl_s` (a rotation or revoke reaches every replica within it).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence

from pydantic import SecretStr

from gateway.api.errors import InvalidRequest, PermissionDenied
from gateway.config.settings import VirtualKeyConfig
from gateway.keys.errors import KeyStoreUnavailable
from gateway.keys.records import KeyRecord
from gateway.keys.virtual_store import RedisVirtualKeyStore, VirtualKeyRecord
from policies.limits.guard import STORE_FAILURES, FailureLog

log = logging.getLogger(__name__)

VIRTUAL_KEY_HEADERS = ("x-gateway-virtual-key", "x-portkey-virtual-key")
_Resolved = tuple[VirtualKeyRecord, SecretStr | None]
_CACHE_SIZE = 10_000


def presented_virtual_key(headers: Mapping[str, str]) -> str | None:
    for name in VIRTUAL_KEY_HEADERS:
        value = headers.get(name, "").strip()
        if value:
            return value
    return None


class VirtualKeys:
    def __init__(
        self,
        configured: Sequence[VirtualKeyConfig],
        redis: RedisVirtualKeyStore | None = None,
        *,
        cache_ttl_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._configured: dict[str, _Resolved] = {
            entry.name: (VirtualKeyRecord(name=entry.name, provider=entry.provider, source="config"), entry.api_key)
            for entry in configured
        }
        self.redis = redis
        self._cache_ttl_s = cache_ttl_s
        self._clock = clock
        self._cache: dict[str, tuple[_Resolved | None, float]] = {}  # names found in Redis
        self._unknown: dict[str, tuple[_Resolved | None, float]] = {}  # names Redis did not know
        self.failures = FailureLog("virtual key store in Redis", "using this process's last view", logger=log)

    @property
    def configured_names(self) -> frozenset[str]:
        return frozenset(self._configured)

    async def resolve(self, caller: KeyRecord, name: str, provider: str) -> SecretStr:
        """The credential for `provider`; 403 when the caller may not use it, 400 when it does not
        exist, is revoked, or belongs to another provider. Messages never carry its value, and name it only
        once it is known to exist (until then it is the client's text, named by its header)."""
        param = VIRTUAL_KEY_HEADERS[0]
        if not caller.may_use_virtual_key(name):
            raise PermissionDenied(
                f"The API key {caller.name!r} may not use the virtual key named by the {param} header.",
                code="virtual_key_not_allowed",
                param=param,
            )
        record, value = await self._find(name) or (None, None)
        if record is None or value is None:
            raise InvalidRequest(
                f"The virtual key named by the {param} header is unknown or revoked.",
                code="unknown_virtual_key",
                param=param,
            )
        if record.provider != provider:
            raise InvalidRequest(
                f"The virtual key {name!r} holds a {record.provider!r} credential; the deployment needs {provider!r}.",
                code="virtual_key_provider_mismatch",
                param=param,
            )
        return value

    def forget(self, name: str) -> None:
        """This process changed the key: do not wait for the cache to expire."""
        self._cache.pop(name, None)
        self._unknown.pop(name, None)

    async def _find(self, name: str) -> _Resolved | None:
        configured = self._configured.get(name)
        if configured is not None or self.redis is None:
            return configured
        cached, now = self._cache.get(name) or self._unknown.get(name), self._clock()
        if cached is not None and now < cached[1]:
            return cached[0]
        try:
            found = await self.redis.credential(name)
        except STORE_FAILURES as exc:
            self.failures.failed(exc)
            if cached is None:
                raise KeyStoreUnavailable() from None
            return cached[0]
        resolved = (found[0], SecretStr(found[1]) if found[1] is not None else None) if found else None
        # Names Redis does not know are cached apart (bounded, cleared when full), so names a client
        # made up never push a real virtual key's last view out.
        cache = self._cache if resolved is not None else self._unknown
        if len(cache) >= _CACHE_SIZE:
            cache.clear()
        (self._unknown if resolved is not None else self._cache).pop(name, None)
        cache[name] = (resolved, now + self._cache_ttl_s)
        return resolved
