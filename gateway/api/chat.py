"""OpenAI Chat Completions request model (`POST /v1/chat/completions`), a leaf like `schemas`.

The body as the official `openai` SDK sends it: `messages` by role (system, developer, user,
assistant with `tool_calls`, tool with `tool_call_id`, the deprecated function), content as a
string or a list of parts (text, image_url, input_audio, file; refusal in assistant messages),
tools, tool_choice, response_format and the sampling fields. Fields the reference does not know
are kept (``extra="allow"``, in messages and parts too) so they reach OpenAI-compatible upstreams
untouched. Strict types, as for Completions: OpenAI rejects ``"16"`` for an integer.

Unions are tagged (`Tag` names start with ``~``, see `UNION_TAGS`): a violation is reported at its
own path (``messages[2].content[0].image_url.url``), never once per union member; a message whose
role, or a part whose type, is unknown is reported at ``messages[i].role`` / ``….type``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator, model_validator

from gateway.api.schemas import INT64_MAX, INT64_MIN, TOKENS_MAX, FieldError, Penalty, check_logit_bias

FUNCTION_NAME = r"^[a-zA-Z0-9_-]{1,64}$"
ROLES = ("system", "developer", "user", "assistant", "tool", "function")
TOOL_CHOICE_MODES = ("none", "auto", "required")
# Custom error types of the tagged unions -> the field of the element that chose the member.
TAG_FIELDS = {"chat_role": "role", "chat_type": "type"}
CONTENT_SHAPE = "chat_content"  # content that is neither a string nor an array


class _Open(BaseModel):
    """Strict, and keeps what it does not know (forwarded as sent)."""

    model_config = ConfigDict(strict=True, extra="allow")


# --- content parts --------------------------------------------------------------------------------


class TextPart(_Open):
    type: Literal["text"]
    text: str


class ImageUrl(_Open):
    url: Annotated[str, Field(min_length=1)]
    detail: Literal["auto", "low", "high"] | None = None


class ImagePart(_Open):
    type: Literal["image_url"]
    image_url: ImageUrl


class InputAudio(_Open):
    data: str
    format: Literal["wav", "mp3"]


class AudioPart(_Open):
    type: Literal["input_audio"]
    input_audio: InputAudio


class FileRef(_Open):
    file_data: str | None = None
    file_id: str | None = None
    filename: str | None = None


class FilePart(_Open):
    type: Literal["file"]
    file: FileRef


class RefusalPart(_Open):
    type: Literal["refusal"]
    refusal: str


def _by(field: str, allowed: tuple[str, ...]) -> Any:
    """The discriminator of a union tagged by `field` (its value prefixed with `~`); None for none known."""

    def tag(value: Any) -> str | None:
        found = value.get(field) if isinstance(value, dict) else getattr(value, field, None)
        return f"~{found}" if isinstance(found, str) and found in allowed else None

    error = "chat_role" if field == "role" else "chat_type"
    message = f"must be one of {', '.join(repr(item) for item in allowed)}"
    return Discriminator(tag, custom_error_type=error, custom_error_message=message)


def _shape(value: Any) -> str | None:
    if isinstance(value, str):
        return "~text"
    return "~parts" if isinstance(value, list) else None


def _content(what: str) -> Discriminator:
    """A content field's discriminator: a string, or an array of parts (each a union tagged by `type`)."""
    message = f"must be a string or an array of {what}"
    return Discriminator(_shape, custom_error_type=CONTENT_SHAPE, custom_error_message=message)


_TEXT = Annotated[Annotated[TextPart, Tag("~text")], _by("type", ("text",))]
UserPart = Annotated[
    Annotated[TextPart, Tag("~text")]
    | Annotated[ImagePart, Tag("~image_url")]
    | Annotated[AudioPart, Tag("~input_audio")]
    | Annotated[FilePart, Tag("~file")],
    _by("type", ("text", "image_url", "input_audio", "file")),
]
AssistantPart = Annotated[
    Annotated[TextPart, Tag("~text")] | Annotated[RefusalPart, Tag("~refusal")],
    _by("type", ("text", "refusal")),
]
TextContent = Annotated[Annotated[str, Tag("~text")] | Annotated[list[_TEXT], Tag("~parts")], _content("text parts")]
UserContent = Annotated[
    Annotated[str, Tag("~text")] | Annotated[list[UserPart], Tag("~parts")],
    _content("content parts (text, image_url, input_audio, file)"),
]
AssistantContent = Annotated[
    Annotated[str, Tag("~text")] | Annotated[list[AssistantPart], Tag("~parts")],
    _content("content parts (text, refusal)"),
]


# --- messages -------------------------------------------------------------------------------------


class FunctionCall(_Open):
    name: str
    arguments: str  # JSON text, as the model wrote it


class FunctionToolCall(_Open):
    id: str
    type: Literal["function"]
    function: FunctionCall


class CustomCall(_Open):
    name: str
    input: str


class CustomToolCall(_Open):
    id: str
    type: Literal["custom"]
    custom: CustomCall


ToolCall = Annotated[
    Annotated[FunctionToolCall, Tag("~function")] | Annotated[CustomToolCall, Tag("~custom")],
    _by("type", ("function", "custom")),
]


class SystemMessage(_Open):
    role: Literal["system"]
    content: TextContent
    name: str | None = None


class DeveloperMessage(_Open):
    role: Literal["developer"]
    content: TextContent
    name: str | None = None


class UserMessage(_Open):
    role: Literal["user"]
    content: UserContent
    name: str | None = None


class AssistantMessage(_Open):
    role: Literal["assistant"]
    content: AssistantContent | None = None
    refusal: str | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    function_call: FunctionCall | None = None  # deprecated, still sent by older clients

    @model_validator(mode="after")
    def _says_something(self) -> AssistantMessage:
        if self.content is None and not self.tool_calls and self.function_call is None:
            raise FieldError("content", "is required unless 'tool_calls' (or 'function_call') is given")
        return self


class ToolMessage(_Open):
    role: Literal["tool"]
    content: TextContent
    tool_call_id: str


class FunctionMessage(_Open):
    role: Literal["function"]
    name: str
    content: str | None


Message = Annotated[
    Annotated[SystemMessage, Tag("~system")]
    | Annotated[DeveloperMessage, Tag("~developer")]
    | Annotated[UserMessage, Tag("~user")]
    | Annotated[AssistantMessage, Tag("~assistant")]
    | Annotated[ToolMessage, Tag("~tool")]
    | Annotated[FunctionMessage, Tag("~function")],
    _by("role", ROLES),
]


# --- tools, tool_choice, response_format ----------------------------------------------------------


class FunctionDefinition(_Open):
    name: Annotated[str, Field(pattern=FUNCTION_NAME)]
    description: str | None = None
    parameters: dict[str, Any] | None = None  # a JSON Schema object
    strict: bool | None = None


class FunctionTool(_Open):
    type: Literal["function"]
    function: FunctionDefinition


class CustomDefinition(_Open):
    name: Annotated[str, Field(pattern=FUNCTION_NAME)]
    description: str | None = None
    format: dict[str, Any] | None = None


class CustomTool(_Open):
    type: Literal["custom"]
    custom: CustomDefinition


Tool = Annotated[
    Annotated[FunctionTool, Tag("~function")] | Annotated[CustomTool, Tag("~custom")],
    _by("type", ("function", "custom")),
]


class NamedFunction(_Open):
    name: Annotated[str, Field(min_length=1)]


class NamedFunctionChoice(_Open):
    type: Literal["function"]
    function: NamedFunction


class NamedCustomChoice(_Open):
    type: Literal["custom"]
    custom: NamedFunction


class AllowedTools(_Open):
    mode: Literal["auto", "required"]
    tools: list[dict[str, Any]]


class AllowedToolsChoice(_Open):
    type: Literal["allowed_tools"]
    allowed_tools: AllowedTools


def _tool_choice_tag(value: Any) -> str | None:
    if isinstance(value, str):
        return "~mode"
    kind = value.get("type") if isinstance(value, dict) else None
    return f"~{kind}" if kind in ("function", "custom", "allowed_tools") else None


ToolChoice = Annotated[
    Annotated[Literal["none", "auto", "required"], Tag("~mode")]
    | Annotated[NamedFunctionChoice, Tag("~function")]
    | Annotated[NamedCustomChoice, Tag("~custom")]
    | Annotated[AllowedToolsChoice, Tag("~allowed_tools")],
    Discriminator(
        _tool_choice_tag,
        custom_error_type="chat_tool_choice",
        custom_error_message="must be 'none', 'auto', 'required', or an object whose type is 'function', "
        "'custom' or 'allowed_tools'",
    ),
]


class JsonSchema(_Open):
    name: Annotated[str, Field(pattern=FUNCTION_NAME)]
    description: str | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class TextFormat(_Open):
    type: Literal["text"]


class JsonObjectFormat(_Open):
    type: Literal["json_object"]


class JsonSchemaFormat(_Open):
    type: Literal["json_schema"]
    json_schema: JsonSchema


ResponseFormat = Annotated[
    Annotated[TextFormat, Tag("~text")]
    | Annotated[JsonObjectFormat, Tag("~json_object")]
    | Annotated[JsonSchemaFormat, Tag("~json_schema")],
    _by("type", ("text", "json_object", "json_schema")),
]

UNION_TAGS = frozenset(
    f"~{tag}"
    for tag in (
        *ROLES,
        "text",
        "parts",
        "image_url",
        "input_audio",
        "file",
        "refusal",
        "function",
        "custom",
        "mode",
        "allowed_tools",
        "json_object",
        "json_schema",
    )
)


class ChatStreamOptions(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    include_usage: bool | None = None
    include_obfuscation: bool | None = None


class ChatRequest(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")

    model: Annotated[str, Field(min_length=1)]
    messages: Annotated[list[Message], Field(min_length=1)]
    frequency_penalty: Penalty | None = None
    logit_bias: dict[str, float] | None = None
    logprobs: bool | None = None
    top_logprobs: Annotated[int, Field(ge=0, le=20)] | None = None
    max_completion_tokens: Annotated[int, Field(ge=0, le=TOKENS_MAX)] | None = None
    max_tokens: Annotated[int, Field(ge=0, le=TOKENS_MAX)] | None = None  # deprecated by max_completion_tokens
    n: Annotated[int, Field(ge=1, le=128)] | None = None
    presence_penalty: Penalty | None = None
    response_format: ResponseFormat | None = None
    seed: Annotated[int, Field(ge=INT64_MIN, le=INT64_MAX)] | None = None
    stop: str | Annotated[list[str], Field(min_length=1, max_length=4)] | None = None
    stream: bool | None = None
    stream_options: ChatStreamOptions | None = None
    temperature: Annotated[float, Field(ge=0.0, le=2.0)] | None = None
    top_p: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    user: str | None = None
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    metadata: dict[str, Annotated[str, Field(max_length=512)]] | None = None
    store: bool | None = None
    service_tier: Literal["auto", "default", "flex", "scale", "priority", "fast"] | None = None

    @field_validator("logit_bias")
    @classmethod
    def _logit_bias_range(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        return check_logit_bias(value)

    @field_validator("metadata")
    @classmethod
    def _metadata_bounds(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is not None:
            if len(value) > 16:
                raise ValueError(f"holds at most 16 pairs, got {len(value)}")
            for key in value:
                if len(key) > 64:
                    raise ValueError("keys are at most 64 characters")
        return value

    @model_validator(mode="after")
    def _cross_field_rules(self) -> ChatRequest:
        if self.stream_options is not None and not self.stream:
            raise FieldError("stream_options", "is only allowed when 'stream' is true")
        if self.top_logprobs is not None and not self.logprobs:
            raise FieldError("top_logprobs", "is only allowed when 'logprobs' is true")
        if self.tool_choice is not None and self.tool_choice != "none" and not self.tools:
            raise FieldError("tool_choice", "is only allowed when 'tools' are specified")
        most = (self.completion_limit() or 0) * (self.n or 1)
        if most > TOKENS_MAX:
            raise FieldError(
                self.limit_field(), f"{self.limit_field()} x {self.n} choices is {most} tokens, more than {TOKENS_MAX}"
            )
        return self

    def completion_limit(self) -> int | None:
        """The most each choice may generate: `max_completion_tokens`, else the older `max_tokens`."""
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens

    def limit_field(self) -> str:
        return "max_completion_tokens" if self.max_completion_tokens is not None else "max_tokens"
