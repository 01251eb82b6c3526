"""Credentials on the wire: which headers carry an API key, how a key is hashed (keys are held
only as SHA-256 hashes), the caller as routing sees it, and how strong the admin key must be."""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Mapping
from typing import Protocol

# Most specific first: Portkey's SDK sends a placeholder Bearer token beside its own header.
# `x-api-key` is what Anthropic's SDKs and Claude Code (ANTHROPIC_API_KEY) send.
API_KEY_HEADERS = ("x-gateway-api-key", "x-portkey-api-key", "apikey", "x-api-key")


class Principal(Protocol):
    """The caller as routing sees it: a key's name and the deployments it may use (by name or tag)."""

    @property
    def name(self) -> str: ...

    def may_use(self, deployment: str, tags: frozenset[str] | set[str] | list[str] = frozenset()) -> bool: ...

    @property
    def may_use_all(self) -> bool:
        """It may use every deployment (what routing can plan once per model and reuse)."""
        ...


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


# --- the admin key's strength --------------------------------------------------------------------

ADMIN_KEY_MIN_LENGTH = 32
ADMIN_KEY_MIN_BITS_PER_CHAR = 2.5  # Shannon entropy of its characters; 32 random hex digits have ~3.6 (never under 2.7)


def admin_key_weakness(value: str) -> str | None:
    """Why `value` is too weak to guard the admin API (never quoting it), or None: fewer than 32
    characters, too few distinct ones for their number, or one piece repeated."""
    if len(value) < ADMIN_KEY_MIN_LENGTH:
        return f"it has {len(value)} characters, fewer than {ADMIN_KEY_MIN_LENGTH}"
    counts = Counter(value)
    bits = abs(-sum(n / len(value) * math.log2(n / len(value)) for n in counts.values()))
    if bits < ADMIN_KEY_MIN_BITS_PER_CHAR:
        floor = f"{ADMIN_KEY_MIN_BITS_PER_CHAR:g}"
        return f"its characters are too repetitive ({bits:.1f} bits of entropy per character, under {floor})"
    if (value + value).find(value, 1) < len(value):  # a shorter piece repeated ("password" * 4)
        return "it is one shorter piece repeated"
    return None
