"""Options every HTTP provider type shares. The config loader reads `api_key` / `virtual_key` by
name to resolve the credential handed to the provider's factory."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from providers.completion_params import NEVER_DROPPED
from providers.upstream.sse import DEFAULT_MAX_EVENT_BYTES

HttpUrl = Annotated[str, Field(pattern=r"^https?://[^\s/]+")]

DEFAULT_MAX_RESPONSE_BYTES = 32 * 1024 * 1024  # 32 MiB, counted after decompression
# What an upstream may send back: a whole answer, and one line or event of a stream (bytes).
ByteLimit = Annotated[int, Field(ge=1024)]


class DroppableParams(BaseModel):
    """Every provider type: the parameters a deployment agrees to have dropped when its backend
    cannot honour them (otherwise they are a 400)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Request fields this deployment may drop when its backend cannot honour them (otherwise a 400 naming the field).
    drop_params: list[str] = Field(default_factory=list)

    @field_validator("drop_params")
    @classmethod
    def _droppable(cls, names: list[str]) -> list[str]:
        fixed = sorted(set(names) & NEVER_DROPPED)
        if fixed:
            raise ValueError(f"{', '.join(fixed)} cannot be dropped")
        return names


class CredentialOptions(DroppableParams):
    # The upstream's credential, as an environment reference.
    api_key: SecretStr | None = None
    # Instead of api_key: the name of a virtual key holding the credential.
    virtual_key: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)  # extra headers sent upstream
    max_connections: Annotated[int, Field(ge=0)] = 0  # 0: no limit on the pool
    max_response_bytes: ByteLimit = DEFAULT_MAX_RESPONSE_BYTES  # a whole (non-streamed) answer, decompressed
    max_event_bytes: ByteLimit = DEFAULT_MAX_EVENT_BYTES  # one line or event of a stream, decompressed

    @model_validator(mode="after")
    def _one_credential(self) -> CredentialOptions:
        if self.api_key is not None and self.virtual_key is not None:
            raise ValueError("give either 'api_key' or 'virtual_key', not both")
        return self


class TranslatedOptions(CredentialOptions):
    """A deployment on an API that is not OpenAI Completions: requests and answers are translated."""

    # The upstream API's root URL.
    base_url: HttpUrl
    model: str | None = None  # the upstream's model name; unset: the client's `model` as sent
    # max_tokens sent when the client gives none; None: leave it to the upstream (where optional).
    default_max_tokens: Annotated[int, Field(ge=1)] | None = 16
    system_prompt: str | None = None  # sent as the system message/instruction of every call
    # Upstream calls one request may fan out to (prompts, or prompts x n where n is not native).
    max_fanout: Annotated[int, Field(ge=1, le=1024)] = 32
