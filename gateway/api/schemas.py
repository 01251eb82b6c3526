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
# Every number that reaches arithmetic (the limits' estimate) or Redis is bounded here, where it is
# parsed, far above any real model's needs: out of range is a 400 naming the field.
TOKENS_MAX = 2**31 - 1  # max_tokens, and max_tokens x choices x prompts: what a request may generate
TOKEN_ID_MAX = 2**31 - 1  # token ids, in a prompt or as logit_bias keys
DEFAULT_MAX_TOKENS = 16  # the Completions API's own default

Penalty = Annotated[float, Field(ge=-2.0, le=2.0)]
TokenId = Annotated[int, Field(ge=0, le=TOKEN_ID_MAX)]
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
    max_tokens: Annotated[int, Field(ge=0, le=TOKENS_MAX)] | None = DEFAULT_MAX_TOKENS
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
        raise ValueError(
            f"must be {PROMPT_SHAPES}; token ids are integers from 0 to {TOKEN_ID_MAX} and arrays are non-empty"
        )

    @field_validator("logit_bias")
    @classmethod
    def _logit_bias_range(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        return check_logit_bias(value)

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
        choices = max(n, self.best_of or 1)  # best_of candidates are generated (and billed) too
        prompts = len(prompts_of(self.prompt))
        most = (DEFAULT_MAX_TOKENS if self.max_tokens is None else self.max_tokens) * choices * prompts
        if most > TOKENS_MAX:
            raise FieldError(
                "max_tokens",
                f"max_tokens x {choices} choice(s) x {prompts} prompt(s) is {most} tokens, more than {TOKENS_MAX}",
            )
        return self


class FieldError(ValueError):
    """A cross-field rule broken, carrying the field to report as the error's ``param``."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def check_logit_bias(value: dict[str, float] | None) -> dict[str, float] | None:
    """`logit_bias` of either API: token ids (as strings) to a bias from -100 to 100."""
    for token, bias in (value or {}).items():
        if not (token.isascii() and token.isdigit()) or len(token) > 10 or int(token) > TOKEN_ID_MAX:
            raise ValueError(f"keys must be token ids (0 to {TOKEN_ID_MAX}, as strings), got {token!r}")
        if not -100.0 <= bias <= 100.0:
            raise ValueError(f"bias for token {token} must be between -100 and 100, got {bias}")
    return value


def prompts_of(prompt: Any) -> list[Any]:
    """The prompts of a request: a string, a list of token ids, or a batch of either."""
    if isinstance(prompt, list) and prompt and all(isinstance(item, (str, list)) for item in prompt):
        return list(prompt)
    return [prompt]


def _is_token_id(item: Any) -> bool:
    return type(item) is int and 0 <= item <= TOKEN_ID_MAX
