"""What a gateway API key may do: the fields a `keys:` entry in config.yaml and a key kept in Redis
share. A leaf module (pydantic and the limit specs only), so `gateway.config.settings` can build on it."""

from __future__ import annotations

import re
import unicodedata
from datetime import UTC, datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

from policies.limits.specs import BudgetSpec, LimitSpec

ALL = "*"
TAG_PREFIX = "tag:"
# A metadata field's name, wherever metadata comes from (a key, `x-gateway-metadata`): also the
# spend view's `metadata.NAME` and the span's `gateway.metadata.NAME`.
METADATA_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
# What an admin may give a key (the API, the CLI, config.yaml): it labels every request of the key.
KEY_METADATA_FIELDS = 16
KEY_METADATA_VALUE_CHARS = 256


def has_control_characters(text: str) -> bool:
    """Whether `text` holds a control character (Unicode category Cc: newlines, escapes, NUL...)."""
    return not text.isprintable() and any(unicodedata.category(char) == "Cc" for char in text)


def check_key_metadata(metadata: dict[str, str]) -> dict[str, str]:
    """A key's own metadata, bounded as a caller's is: a ValueError (a 400 naming `metadata`) beyond."""
    if len(metadata) > KEY_METADATA_FIELDS:
        raise ValueError(f"at most {KEY_METADATA_FIELDS} fields")
    for name, value in metadata.items():
        if not METADATA_NAME.match(name):
            raise ValueError("a field's name must be 1-64 characters of A-Za-z0-9_.-")
        if len(value) > KEY_METADATA_VALUE_CHARS:
            raise ValueError(f"the value of {name!r} is longer than {KEY_METADATA_VALUE_CHARS} characters")
        if has_control_characters(value):
            raise ValueError(f"the value of {name!r} holds control characters")
    return metadata


class KeyPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    deployments: list[str] = Field(default_factory=lambda: [ALL])  # names, `tag:NAME`, or `*`
    virtual_keys: list[str] = Field(default_factory=list)  # names the client may pick by header; `*`: any
    # Rate limits of this key (rpm, tpm, concurrent), across replicas.
    limits: LimitSpec = Field(default_factory=LimitSpec)
    # Spend allowed per period (tokens and/or USD); spent: 429 budget_exceeded.
    budget: BudgetSpec | None = None
    expires_at: datetime | None = None  # ISO 8601; without a zone, UTC
    # true: refused with 401 revoked_api_key.
    revoked: bool = False
    # Free key/value pairs carried into the access log, spend and traces (bounded).
    metadata: dict[str, str] = Field(default_factory=dict)
    # A partition of the key's own cache entries; only keys given the same one in the config file
    # share entries (see `KeyRecord.cache_scope`).
    cache_namespace: Annotated[str, Field(min_length=1, max_length=128)] | None = None

    @field_validator("expires_at")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value

    def expired(self, now: datetime) -> bool:
        return self.expires_at is not None and now >= self.expires_at

    def may_use(self, deployment: str, tags: frozenset[str] | set[str] | list[str] = frozenset()) -> bool:
        allowed = self.deployments
        return ALL in allowed or deployment in allowed or any(TAG_PREFIX + tag in allowed for tag in tags)

    @property
    def may_use_all(self) -> bool:
        return ALL in self.deployments

    def may_use_virtual_key(self, name: str) -> bool:
        return ALL in self.virtual_keys or name in self.virtual_keys


POLICY_FIELDS = frozenset(KeyPolicy.model_fields)
