"""OpenAI Embeddings request model (`POST /v1/embeddings`), a leaf like `schemas`.

`input` takes the four shapes OpenAI's reference gives: a string, an array of strings, an array of
token ids, or an array of token-id arrays (LangChain's `OpenAIEmbeddings` sends the last by
default). The API's own limits are refused here with a 400 naming the field: an empty input, an
empty string or token array (`input[3]`), more than `MAX_INPUTS` inputs. Whether `dimensions`
applies is the deployment's to say (only models that support shortening take it); its range is
checked here. Unknown fields are kept (``extra="allow"``) and reach OpenAI-compatible upstreams.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gateway.api.schemas import TOKEN_ID_MAX, FieldError

MAX_INPUTS = 2048  # OpenAI's limit on the inputs of one request
MAX_DIMENSIONS = 65_536  # far above any model's width: a bound for arithmetic, not a model's limit
INPUT_SHAPES = "a string, an array of strings, an array of token ids, or an array of token-id arrays"

EmbeddingInput = str | list[int]  # one input: a text, or its token ids


class EmbeddingsRequest(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")

    model: Annotated[str, Field(min_length=1)]
    input: Any = Field(...)
    encoding_format: Literal["float", "base64"] | None = None
    dimensions: Annotated[int, Field(ge=1, le=MAX_DIMENSIONS)] | None = None
    user: str | None = None

    @model_validator(mode="after")
    def _input_shape(self) -> EmbeddingsRequest:
        check_input(self.input)  # on the model, so that its `FieldError` names `input[3]` from the body's root
        return self

    def inputs(self) -> list[EmbeddingInput]:
        """Each input on its own, in order: a string or a token-id list."""
        return inputs_of(self.input)


def inputs_of(value: Any) -> list[EmbeddingInput]:
    """The inputs of a validated `input`: a string or a token-id list, one per answer's embedding."""
    if isinstance(value, str):
        return [value]
    if value and type(value[0]) is int:
        return [value]
    return list(value)


def check_input(value: Any) -> None:
    """Raise `FieldError` naming the field (`input`, `input[3]`) unless `value` is a valid `input`."""
    if isinstance(value, str):
        if not value:
            raise FieldError("input", "must not be an empty string")
        return
    if not isinstance(value, list):
        raise FieldError("input", f"must be {INPUT_SHAPES}")
    if not value:
        raise FieldError("input", "must not be an empty array")
    if len(value) > MAX_INPUTS:
        raise FieldError("input", f"may hold at most {MAX_INPUTS} inputs, got {len(value)}")
    if type(value[0]) is int:  # one input as token ids
        for position, token in enumerate(value):
            if not _is_token_id(token):
                raise FieldError(f"input[{position}]", f"must be a token id (an integer from 0 to {TOKEN_ID_MAX})")
        return
    texts = isinstance(value[0], str)
    for position, item in enumerate(value):
        if not isinstance(item, str if texts else list):
            raise FieldError(f"input[{position}]", f"must be {INPUT_SHAPES}: every element of one kind")
        if not item:
            raise FieldError(f"input[{position}]", "must not be empty")
        if not texts:
            for token_position, token in enumerate(item):
                if not _is_token_id(token):
                    raise FieldError(
                        f"input[{position}][{token_position}]",
                        f"must be a token id (an integer from 0 to {TOKEN_ID_MAX})",
                    )


def _is_token_id(item: Any) -> bool:
    return type(item) is int and 0 <= item <= TOKEN_ID_MAX
