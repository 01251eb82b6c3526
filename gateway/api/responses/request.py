"""The top-level fields of a `POST /v1/responses` body, as the official `openai` SDK sends them.

Scalars and ranges are a strict pydantic model (a violation is a 400 naming the field, through
`gateway.api.parsing`); `input` items and `tools` are checked where they are bridged
(`gateway.api.responses.items`, `.tools`), each problem named at its own path (`input[2].call_id`).
Fields the gateway does not act on (`include`, `truncation`, `prompt_cache_key`, …) are accepted and
not sent upstream, as OpenAI ignores what a model does not use.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gateway.api.schemas import TOKENS_MAX, FieldError

EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")


class Reasoning(_Strict):
    effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    summary: Literal["auto", "concise", "detailed"] | None = None


class TextOptions(_Strict):
    format: dict[str, Any] | None = None
    verbosity: Literal["low", "medium", "high"] | None = None

    @field_validator("format")
    @classmethod
    def _format(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is None:
            return value
        kind = value.get("type")
        if kind not in ("text", "json_object", "json_schema"):
            raise ValueError("type must be one of 'text', 'json_object', 'json_schema'")
        if kind == "json_schema":
            if not isinstance(value.get("name"), str) or not value["name"]:
                raise FieldError("name", "is required for a json_schema format")
            if not isinstance(value.get("schema"), dict):
                raise FieldError("schema", "is required for a json_schema format (a JSON Schema object)")
        return value


class ResponsesRequest(_Strict):
    model: Annotated[str, Field(min_length=1)]
    input: Any = None  # a string, or an array of items (checked by `items.to_messages`)
    instructions: str | None = None
    max_output_tokens: Annotated[int, Field(ge=1, le=TOKENS_MAX)] | None = None
    temperature: Annotated[float, Field(ge=0.0, le=2.0)] | None = None
    top_p: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    top_logprobs: Annotated[int, Field(ge=0, le=20)] | None = None
    tools: list[Any] | None = None  # checked by `tools.bridge_tools`
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    text: TextOptions | None = None
    reasoning: Reasoning | None = None
    previous_response_id: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    store: bool | None = None
    metadata: dict[str, Annotated[str, Field(max_length=512)]] | None = None
    include: list[str] | None = None
    truncation: Literal["auto", "disabled"] | None = None
    user: str | None = None
    stream: bool | None = None
    stream_options: dict[str, Any] | None = None
    background: bool | None = None
    max_tool_calls: Annotated[int, Field(ge=1)] | None = None
    service_tier: Literal["auto", "default", "flex", "scale", "priority"] | None = None

    @field_validator("input")
    @classmethod
    def _input_shape(cls, value: Any) -> Any:
        if isinstance(value, str) or (isinstance(value, list) and value):
            return value
        if isinstance(value, list):
            raise ValueError("must hold at least one item")
        raise ValueError("must be a string or an array of input items")

    @field_validator("tool_choice")
    @classmethod
    def _tool_choice(cls, value: str | dict[str, Any] | None) -> str | dict[str, Any] | None:
        if isinstance(value, str) and value not in ("none", "auto", "required"):
            raise ValueError("must be 'none', 'auto', 'required', or an object naming a tool")
        if isinstance(value, dict) and not isinstance(value.get("type"), str):
            raise ValueError("an object tool_choice needs a 'type'")
        return value

    @field_validator("metadata")
    @classmethod
    def _metadata_bounds(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is not None and (len(value) > 16 or any(len(key) > 64 for key in value)):
            raise ValueError("holds at most 16 pairs, keys of at most 64 characters")
        return value

    @model_validator(mode="after")
    def _cross_field_rules(self) -> ResponsesRequest:
        if "input" not in self.model_fields_set:
            raise FieldError("input", "is required (a string or an array of input items)")
        if self.background:
            raise FieldError(
                "background", "background mode is not supported by this gateway: send the request without it"
            )
        if self.stream_options is not None and not self.stream:
            raise FieldError("stream_options", "is only allowed when 'stream' is true")
        extra = self.model_extra or {}
        for unsupported in ("conversation", "prompt"):
            if extra.get(unsupported) is not None:
                raise FieldError(
                    unsupported, f"'{unsupported}' is not supported by this gateway: use previous_response_id"
                )
        return self
