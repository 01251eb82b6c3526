"""Gateway API keys: which header carries the key, and who it belongs to.

Keys are held only as SHA-256 hashes; a presented key is hashed and looked up by its hash.
With no keys configured the gateway is open (a start-up warning says so).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from gateway.config import ClientKeyConfig
from gateway.errors import AuthenticationFailed

# Most specific first: Portkey's SDK sends a placeholder Bearer token beside its own header.
API_KEY_HEADERS = ("x-gateway-api-key", "x-portkey-api-key", "apikey")
ALL_DEPLOYMENTS = "*"


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller: its key's name (None when the gateway is open) and the deployments it may use."""

    name: str | None
    deployments: frozenset[str]

    def may_use(self, deployment: str) -> bool:
        return ALL_DEPLOYMENTS in self.deployments or deployment in self.deployments


ANONYMOUS = Principal(name=None, deployments=frozenset({ALL_DEPLOYMENTS}))


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class KeyAuthenticator:
    def __init__(self, keys: list[ClientKeyConfig], *, required: bool) -> None:
        """`required`: keys were configured, so refuse callers even if none of them is usable."""
        self._open = not required
        self._by_hash: dict[str, Principal] = {}
        for key in keys:
            digest = key.sha256.lower() if key.sha256 else hash_key(key.key.get_secret_value() if key.key else "")
            self._by_hash[digest] = Principal(name=key.name, deployments=frozenset(key.deployments))

    def authenticate(self, headers: Mapping[str, str]) -> Principal:
        if self._open:
            return ANONYMOUS
        presented = presented_key(headers)
        if presented is None:
            raise AuthenticationFailed(
                "Missing API key: send it as 'Authorization: Bearer <key>' or in the 'x-gateway-api-key' header.",
                code="missing_api_key",
            )
        # Looking up the SHA-256 of the presented key leaks nothing usable through timing: an
        # attacker learns at most how a hash they cannot invert compares with stored hashes.
        principal = self._by_hash.get(hash_key(presented))
        if principal is None:
            raise AuthenticationFailed("Invalid API key: the key presented is not known to this gateway.")
        return principal


def presented_key(headers: Mapping[str, str]) -> str | None:
    for name in API_KEY_HEADERS:
        value = headers.get(name)
        if value:
            return value.strip()
    authorization = headers.get("authorization", "")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return None
