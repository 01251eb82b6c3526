"""OpenAI Completions request model, shared by every module (a leaf: imports nothing local).

Ranges and defaults follow the API reference for `POST /v1/completions`. Fields the reference
does not know are kept (``extra="allow"``) so they reach OpenAI-compatible upstreams untouched.
Strict types: OpenAI rejects ``"16"`` for an integer and ``1`` for a boolean, and so do we.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

Penalty = Annotated[float, Field(ge=-2.0, le=2.0)]
TokenId = Annotated[int, Field(ge=0)]
Prompt = str | list[str] | list[int] | list[list[int]] | None

PROMPT_SHAPES = "a string, an array of strings, an array of token ids, or an array of token-id arrays"


class StreamOptions(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    include_usage: bool | None = None


class CompletionRequest(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")

    model: Annotated[str, Field(min_length=1)]
    prompt: Any = Field(...)  # required key; null means the model's <|endoftext|>
    best_of: Annotated[int, Field(ge=0, le=20)] | None = 1
    echo: bool | None = False
    frequency_penalty: Penalty | None = 0.0
    logit_bias: dict[str, float] | None = None
    logprobs: Annotated[int, Field(ge=0, le=5)] | None = None
    max_tokens: Annotated[int, Field(ge=0)] | None = 16
    n: Annotated[int, Field(ge=1, le=128)] | None = 1
    presence_penalty: Penalty | None = 0.0
    seed: Annotated[int, Field(ge=INT64_MIN, le=INT64_MAX)] | None = None
    stop: str | Annotated[list[str], Field(min_length=1, max_length=4)] | None = None
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    suffix: str | None = None
    temperature: Annotated[float, Field(ge=0.0, le=2.0)] | None = 1.0
    top_p: Annotated[float, Field(ge=0.0, le=1.0)] | None = 1.0
    user: str | None = None

    @field_validator("prompt")
    @classmethod
    def _prompt_shape(cls, value: Any) -> Prompt:
        if value is None or isinstance(value, str):
            return value
        if not isinstance(value, list) or not value:
            raise ValueError(f"must be {PROMPT_SHAPES}, with at least one element")
        if all(isinstance(item, str) for item in value):
            return value
        if all(_is_token_id(item) for item in value):
            return value
        if all(isinstance(item, list) and item and all(map(_is_token_id, item)) for item in value):
            return value
        raise ValueError(f"must be {PROMPT_SHAPES}; token ids are non-negative integers and arrays are non-empty")

    @field_validator("logit_bias")
    @classmethod
    def _logit_bias_range(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        for token, bias in (value or {}).items():
            if not (token.isascii() and token.isdigit()):
                raise ValueError(f"keys must be token ids (non-negative integers as strings), got {token!r}")
            if not -100.0 <= bias <= 100.0:
                raise ValueError(f"bias for token {token} must be between -100 and 100, got {bias}")
        return value

    @model_validator(mode="after")
    def _cross_field_rules(self) -> CompletionRequest:
        if self.stream_options is not None and not self.stream:
            raise FieldError("stream_options", "is only allowed when 'stream' is true")
        # best_of defaults to 1, but only a best_of the client sent can conflict with its n.
        best_of = self.best_of if "best_of" in self.model_fields_set else None
        n = self.n or 1
        if best_of is not None and best_of < n:
            raise FieldError("best_of", f"must be greater than or equal to 'n' ({n}), got {best_of}")
        if self.stream and best_of is not None and best_of > 1:
            raise FieldError("best_of", "results cannot be streamed: use best_of 1 with 'stream'")
        return self


class FieldError(ValueError):
    """A cross-field rule broken, carrying the field to report as the error's ``param``."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def _is_token_id(item: Any) -> bool:
    return type(item) is int and item >= 0
