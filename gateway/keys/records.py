"""A gateway API key as the gateway holds it: its policy, its SHA-256 and where it comes from.
The key's value exists only in the caller's hands: it is generated, shown once, then only hashed."""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Literal

import orjson
from pydantic import Field

from gateway.api.credentials import hash_key
from gateway.config.key_policy import ALL, POLICY_FIELDS, KeyPolicy
from gateway.config.settings import ClientKeyConfig, Name

KEY_PREFIX = "gw-"  # recognisable in a leaked file or a secret scanner's rules
Digest = str  # lower-case hex SHA-256 of a key


class KeyRecord(KeyPolicy):
    name: Name
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", repr=False)
    created_at: datetime | None = None
    source: Literal["config", "redis", "open"] = "redis"

    def public(self, now: datetime | None = None) -> dict[str, Any]:
        """What the admin API shows: everything but the hash, and the key's `status`."""
        return {**self.model_dump(mode="json", exclude={"sha256"}), "status": self.status(now or utcnow())}

    def status(self, now: datetime) -> Literal["active", "expired", "revoked"]:
        """Whether the key authenticates now: `revoked` wins over `expired`."""
        if self.revoked:
            return "revoked"
        return "expired" if self.expired(now) else "active"

    def matches(self, digest: Digest) -> bool:
        return hmac.compare_digest(self.sha256, digest)

    @property
    def cache_scope(self) -> str:
        """Whose cache entries this key reads and writes: its own, always, whatever its namespace
        is called (a `cache_namespace` only subdivides them), unless an admin gave it the same
        `cache_namespace` as other keys *in the config file*: those keys share one scope. A key
        created through the admin API or the CLI never shares by picking a name. The parts are
        JSON-encoded, so no name or namespace can spell another key's scope."""
        if self.source == "config" and self.cache_namespace is not None:
            return orjson.dumps(["namespace", self.cache_namespace]).decode()
        return orjson.dumps(["key", self.source, self.name, self.cache_namespace]).decode()


# The caller of a gateway with no keys configured: every deployment and virtual key, no limits.
ANONYMOUS = KeyRecord(name="anonymous", sha256="0" * 64, deployments=[ALL], virtual_keys=[ALL], source="open")


def record_from_config(entry: ClientKeyConfig) -> KeyRecord:
    """A `keys:` entry of config.yaml; policy fields it does not have (yet) take their defaults."""
    digest = entry.sha256.lower() if entry.sha256 else hash_key(entry.key.get_secret_value() if entry.key else "")
    policy = {field: value for field, value in entry.model_dump().items() if field in POLICY_FIELDS}
    return KeyRecord(name=entry.name, sha256=digest, source="config", **policy)


def records_from_config(entries: Iterable[ClientKeyConfig]) -> list[KeyRecord]:
    return [record_from_config(entry) for entry in entries if entry.key is not None or entry.sha256]


def new_key() -> tuple[str, Digest]:
    """A fresh key (shown once) and the hash the gateway keeps."""
    value = KEY_PREFIX + secrets.token_urlsafe(32)
    return value, hash_key(value)


def utcnow() -> datetime:
    return datetime.now(UTC)
