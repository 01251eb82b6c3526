"""Gateway API keys on the wire: which header carries the key, and how it is hashed.

Keys are held only as SHA-256 hashes; a presented key is hashed and looked up by its hash
(`gateway.keys.directory`). With no keys configured the gateway is open (a start-up warning says so).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Protocol

# Most specific first: Portkey's SDK sends a placeholder Bearer token beside its own header.
API_KEY_HEADERS = ("x-gateway-api-key", "x-portkey-api-key", "apikey")


class Principal(Protocol):
    """The caller as routing sees it: a key's name and the deployments it may use (by name or tag)."""

    @property
    def name(self) -> str: ...

    def may_use(self, deployment: str, tags: frozenset[str] | set[str] | list[str] = frozenset()) -> bool: ...


def hash_key(key: str) -> str:
    # surrogateescape: a header byte that is not UTF-8 (aiohttp keeps it as a lone surrogate) is
    # hashed as that byte, so such a key is simply unknown, never an error quoting it.
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()


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
