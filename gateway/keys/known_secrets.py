"""Every credential the gateway knows, for the scrubber (`providers.upstream.scrubbing`): gathered once per
config load, plus those learnt at run time, plus the caller's own key per request.

- The config's: every `SecretStr` in it (deployments' `api_key`, `virtual_keys`, `keys`,
  `admin.key`, the metrics key, …), the credential each deployment resolved to, the values of
  headers whose name says they carry a credential, and passwords in URLs (`redis.url`).
- Learnt: virtual keys read from the Redis store, added once when their provider is made
  (`gateway.routing.virtual_providers`).
- The caller's key, as presented: kept only in the request's context (never stored) and matched
  only if an upstream call of that request fails.

The key directory of each config generation (`ScrubbingKeyDirectory`, made by
`gateway.pipeline.assembly`) puts that request context in place when it authenticates the caller, so
every upstream call of the request scrubs its failure with all three. Nothing else happens per
request: the matcher of the config's secrets is built at load, the caller's only on a failure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, SecretStr

from gateway.api.credentials import presented_key
from gateway.config.loader import LoadedConfig
from gateway.keys.directory import KeyDirectory
from gateway.keys.records import KeyRecord
from gateway.keys.store import RedisKeyStore
from providers.upstream.scrubbing import REQUEST_SECRETS, LearntSecrets, SecretSet, credential_headers


def config_secrets(loaded: LoadedConfig) -> SecretSet:
    """The matcher of every credential in a loaded config (built once per load)."""
    found: list[str] = []
    _collect(loaded.config, found)
    for resolved in loaded.deployments.values():
        found.append(resolved.credential or "")
        _collect(resolved.options, found)
    return SecretSet.of(found)


def _collect(value: Any, found: list[str], name: str = "") -> None:
    if isinstance(value, SecretStr):
        found.append(value.get_secret_value())
    elif isinstance(value, BaseModel):
        for field, item in value:  # declared fields and extras (a `provider:` block's)
            _collect(item, found, field)
    elif isinstance(value, Mapping):
        found += credential_headers({str(k): v for k, v in value.items() if isinstance(v, str)})
        for key, item in value.items():
            if not isinstance(item, str):
                _collect(item, found, str(key))
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            _collect(item, found, name)
    elif isinstance(value, str) and name.endswith("url"):
        found.append(_password(value))


def _password(url: str) -> str:
    try:
        return urlsplit(url).password or ""
    except ValueError:
        return ""


class KnownSecrets:
    """One config generation's credentials, and those learnt since (shared by every generation);
    the merged matcher is rebuilt only when something new was learnt."""

    def __init__(self, loaded: LoadedConfig, learnt: LearntSecrets) -> None:
        self._base = config_secrets(loaded)
        self._learnt = learnt
        self._current = self._base
        self._version = 0

    def current(self) -> SecretSet:
        if self._version != self._learnt.version:
            self._current, self._version = self._base | self._learnt.set, self._learnt.version
        return self._current


class _RequestSecrets:
    """What one request's failures are scrubbed of: the generation's credentials and the caller's key
    (read from its headers, and matched, only when something failed)."""

    __slots__ = ("_caller", "_headers", "_known")

    def __init__(self, known: KnownSecrets, headers: Mapping[str, str]) -> None:
        self._known = known
        self._headers = headers
        self._caller: SecretSet | None = None

    def sets(self) -> tuple[SecretSet, SecretSet]:
        if self._caller is None:
            self._caller = SecretSet.of((presented_key(self._headers),))
        return self._known.current(), self._caller


class ScrubbingKeyDirectory(KeyDirectory):
    """The key directory of a config generation; authenticating a caller also tells the scrubber,
    for the rest of the request, what that request must never let out."""

    def __init__(
        self, configured: list[KeyRecord], redis: RedisKeyStore | None, *, required: bool, secrets: KnownSecrets
    ) -> None:
        super().__init__(configured, redis, required=required)
        self.secrets = secrets

    async def authenticate(self, headers: Mapping[str, str]) -> KeyRecord:
        REQUEST_SECRETS.set(_RequestSecrets(self.secrets, headers))
        return await super().authenticate(headers)
