"""Errors of the key stores and the admin API, in the one OpenAI envelope (`gateway.api.errors`)."""

from __future__ import annotations

from gateway.api.errors import GatewayError, InvalidRequest


class KeyStoreUnavailable(GatewayError):
    """Redis failed and the presented key is not one this process already knows."""

    status = 503
    type = "service_unavailable"
    code = "key_store_unavailable"

    def __init__(self) -> None:
        super().__init__("API keys cannot be checked right now. Retry shortly.", headers={"retry-after": "1"})


class Conflict(GatewayError):
    status = 409
    type = "invalid_request_error"
    code = "already_exists"


class ReadOnlyStore(InvalidRequest):
    code = "key_store_read_only"


class EncryptionUnavailable(GatewayError):
    """A virtual key in Redis, but no (or a wrong) GATEWAY_ENCRYPTION_KEY in this process: the
    operator's setting to fix, not a gateway bug, so a 503 that names it (never a 500)."""

    status = 503
    type = "service_unavailable"
    code = "encryption_key_invalid"  # it cannot decrypt what is stored


class EncryptionKeyMissing(EncryptionUnavailable):
    """No GATEWAY_ENCRYPTION_KEY at all: nothing can be stored encrypted, nor read back."""

    code = "encryption_key_missing"
