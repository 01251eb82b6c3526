"""Pydantic models of config.yaml: the operator's whole interface, every section closed to typos."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

Name = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/@-]*$")]

# Fields holding credentials: they may only come from the environment and are never printed.
SECRET_FIELDS = frozenset({"api_key", "key"})


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ServerConfig(Strict):
    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65535)] = 8080
    workers: Annotated[int, Field(ge=1, le=256)] = 1
    max_body_bytes: Annotated[int, Field(ge=1024)] = 4 * 1024 * 1024


class RedisConfig(Strict):
    url: str = ""  # empty: no Redis, in-process state only


class ClientKeyConfig(Strict):
    """A gateway API key: who may call, and which deployments they may use."""

    name: Name
    key: SecretStr | None = None
    sha256: Annotated[str, Field(pattern=r"^[0-9a-fA-F]{64}$")] | None = None
    deployments: list[str] = Field(default_factory=lambda: ["*"])

    @model_validator(mode="after")
    def _one_secret(self) -> ClientKeyConfig:
        if (self.key is None) == (self.sha256 is None):
            raise ValueError("give exactly one of 'key' (an environment reference) or 'sha256'")
        return self


class VirtualKeyConfig(Strict):
    """A named provider credential kept server-side; deployments refer to it by name."""

    name: Name
    provider: str
    api_key: SecretStr


class ProviderSection(BaseModel):
    """The `provider:` block. `type` picks the backend; that backend's own model checks the rest."""

    model_config = ConfigDict(extra="allow", frozen=True)

    type: str

    @model_validator(mode="before")
    @classmethod
    def _hide_secrets(cls, data: Any) -> Any:
        # The type's own model checks these later; until then keep them out of repr() and logs.
        if isinstance(data, dict):
            return {k: SecretStr(v) if k in SECRET_FIELDS and isinstance(v, str) else v for k, v in data.items()}
        return data

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class DeploymentConfig(Strict):
    name: Name
    aliases: list[Name] = Field(default_factory=list)
    provider: ProviderSection
    timeout_s: Annotated[float, Field(gt=0, le=3600)] = 60.0


class GatewayConfig(Strict):
    server: ServerConfig = Field(default_factory=ServerConfig)
    redis: RedisConfig = Field(default_factory=RedisConfig)
    keys: list[ClientKeyConfig] = Field(default_factory=list)
    virtual_keys: list[VirtualKeyConfig] = Field(default_factory=list)
    deployments: list[DeploymentConfig] = Field(default_factory=list)

    @field_validator("deployments")
    @classmethod
    def _unique_model_names(cls, deployments: list[DeploymentConfig]) -> list[DeploymentConfig]:
        owners: dict[str, str] = {}
        for deployment in deployments:
            for name in (deployment.name, *deployment.aliases):
                if name in owners:
                    raise ValueError(
                        f"the name or alias {name!r} is used twice "
                        f"(deployments {owners[name]!r} and {deployment.name!r})"
                    )
                owners[name] = deployment.name
        return deployments

    @field_validator("keys", "virtual_keys")
    @classmethod
    def _unique_names(cls, entries: list[Any]) -> list[Any]:
        names = [entry.name for entry in entries]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"names must be unique; repeated: {', '.join(duplicates)}")
        return entries


ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
