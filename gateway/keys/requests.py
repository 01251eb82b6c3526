"""Bodies the admin API accepts."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, SecretStr, field_validator

from gateway.config.key_policy import KeyPolicy, check_key_metadata
from gateway.config.settings import Name


class _GivenPolicy(KeyPolicy):
    # Stored keys are read back as they are (KeyPolicy); what an admin gives a key is bounded.
    @field_validator("metadata")
    @classmethod
    def _bounded_metadata(cls, value: dict[str, str]) -> dict[str, str]:
        return check_key_metadata(value)

    @field_validator("expires_at")
    @classmethod
    def _in_the_future(cls, value: datetime | None) -> datetime | None:
        """A key that could never authenticate is a mistake: refused (400 naming `expires_at`)."""
        aware = value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value
        if aware is not None and aware <= datetime.now(UTC):
            raise ValueError("must be in the future (a key already expired could never be used)")
        return value


class KeyCreate(_GivenPolicy):
    name: Name

    def policy(self) -> dict[str, Any]:
        return self.model_dump(exclude={"name", "revoked"})


class KeyUpdate(_GivenPolicy):
    """`PATCH /admin/keys/NAME`: only the fields given change (`null` clears a budget or an expiry)."""

    def changes(self) -> dict[str, Any]:
        return {field: getattr(self, field) for field in self.model_fields_set}


class VirtualKeyCreate(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Name
    provider: str
    api_key: SecretStr


class VirtualKeyRotate(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    api_key: SecretStr
