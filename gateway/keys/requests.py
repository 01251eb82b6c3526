"""Bodies the admin API accepts."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, SecretStr

from gateway.config import Name
from gateway.keys.policy import KeyPolicy


class KeyCreate(KeyPolicy):
    name: Name

    def policy(self) -> dict[str, Any]:
        return self.model_dump(exclude={"name", "revoked"})


class VirtualKeyCreate(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Name
    provider: str
    api_key: SecretStr


class VirtualKeyRotate(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    api_key: SecretStr
