"""Encryption at rest of provider credentials kept in Redis: Fernet (AES-128-CBC with HMAC-SHA256)
from `cryptography`, keyed from the environment.

GATEWAY_ENCRYPTION_KEY holds one or more Fernet keys, comma-separated, newest first: new values are
encrypted with the first, and any of them decrypts (MultiFernet), so keys rotate without downtime:
prepend a new key, run `gateway keys reencrypt`, then drop the old one.
"""

from __future__ import annotations

from collections.abc import Mapping

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from gateway.config.settings import ENCRYPTION_KEY_VARIABLE
from gateway.keys.errors import EncryptionUnavailable

__all__ = ["ENCRYPTION_KEY_VARIABLE", "EncryptionKeyInvalid", "Vault", "generate_encryption_key"]


class EncryptionKeyInvalid(ValueError):
    """GATEWAY_ENCRYPTION_KEY is set to something that is not Fernet keys (never shown: it is a secret)."""


class Vault:
    def __init__(self, keys: list[str]) -> None:
        if not keys:
            raise EncryptionKeyInvalid(f"{ENCRYPTION_KEY_VARIABLE} holds no key")
        try:
            self._fernet = MultiFernet([Fernet(key.strip().encode()) for key in keys])
        except ValueError:
            # Not the key in the message: it is a secret too.
            raise EncryptionKeyInvalid(
                f"{ENCRYPTION_KEY_VARIABLE} must hold Fernet keys (32 url-safe base64 bytes)"
            ) from None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Vault | None:
        """None when the variable is unset: virtual keys can then only come from config.yaml."""
        value = env.get(ENCRYPTION_KEY_VARIABLE, "").strip()
        return cls([key for key in value.split(",") if key.strip()]) if value else None

    def encrypt(self, plaintext: str) -> str:
        return self._fernet.encrypt(plaintext.encode()).decode()

    def decrypt(self, token: str) -> str:
        try:
            return self._fernet.decrypt(token.encode()).decode()
        except InvalidToken:
            raise EncryptionUnavailable(
                f"A stored provider credential cannot be decrypted with {ENCRYPTION_KEY_VARIABLE}."
            ) from None

    def reencrypt(self, token: str) -> str:
        """The same value under the newest key."""
        try:
            return self._fernet.rotate(token.encode()).decode()
        except InvalidToken:
            raise EncryptionUnavailable(
                f"A stored provider credential cannot be decrypted with {ENCRYPTION_KEY_VARIABLE}."
            ) from None


def generate_encryption_key() -> str:
    return Fernet.generate_key().decode()
