"""Chat messages and tools as Gemini's generateContent takes them, and its parts back.

system / developer messages → `systemInstruction`; user → role `user`, assistant → role `model`;
content parts → text and `inlineData` parts (images, audio and files given inline, as `data:` URLs
or `input_audio`); an assistant's `tool_calls` → `functionCall` parts, tool messages →
`functionResponse` parts named after the call they answer; tools → `functionDeclarations`,
tool_choice → `toolConfig`; response_format → `responseMimeType` (and `responseJsonSchema`).
Images by URL, file ids and non-function tools cannot be sent: a 400 naming the field.
"""

from __future__ import annotations

from typing import Any

import orjson

from providers.chat.messages import (
    Refusal,
    arguments,
    content_parts,
    data_url,
    forced_function,
    functions,
    json_text,
    new_call_id,
    text_of,
    tool_call_names,
)
from providers.completion_shape import ToolCall

_AUDIO_TYPES = {"wav": "audio/wav", "mp3": "audio/mp3"}
_MODES = {"none": "NONE", "auto": "AUTO", "required": "ANY"}


def conversation(body: dict[str, Any], refuse: Refusal) -> tuple[list[str], list[dict[str, Any]]]:
    """(the system texts, the `contents`) of the body's `messages`."""
    messages = body.get("messages") or []
    names = tool_call_names(messages)
    system: list[str] = []
    contents: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        role, param = message.get("role"), f"messages[{i}]"
        if role in ("system", "developer"):
            system.append(text_of(message.get("content"), f"{param}.content", refuse))
            continue
        if role == "user":
            parts = _user_parts(message.get("content"), f"{param}.content", refuse)
        elif role == "assistant":
            role, parts = "model", _model_parts(message, param, refuse)
        elif role == "tool":
            role, parts = "user", [_function_response(message, names, param, refuse)]
        else:
            raise refuse(f"{param}.role", f"{refuse.api} has no '{role}' messages")
        if not parts:
            continue
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"] += parts
        else:
            contents.append({"role": role, "parts": parts})
    return system, contents


def tool_fields(body: dict[str, Any], refuse: Refusal) -> dict[str, Any]:
    """`tools` and `toolConfig` (nothing when the body declares no tools)."""
    declared = functions(body, refuse)
    if not declared:
        return {}
    declarations = []
    for function in declared:
        declaration: dict[str, Any] = {"name": function.name}
        if function.description:
            declaration["description"] = function.description
        if function.parameters:
            declaration["parametersJsonSchema"] = function.parameters
        declarations.append(declaration)
    fields: dict[str, Any] = {"tools": [{"functionDeclarations": declarations}]}
    named = forced_function(body)
    choice = body.get("tool_choice")
    if named is not None:
        fields["toolConfig"] = {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [named]}}
    elif choice is not None:
        fields["toolConfig"] = {"functionCallingConfig": {"mode": _MODES.get(str(choice), "AUTO")}}
    return fields


def output_format(body: dict[str, Any]) -> dict[str, Any]:
    """generationConfig fields for `response_format` json_object / json_schema."""
    given = body.get("response_format") or {}
    kind = given.get("type")
    if kind == "json_object":
        return {"responseMimeType": "application/json"}
    if kind == "json_schema":
        schema = (given.get("json_schema") or {}).get("schema")
        return {"responseMimeType": "application/json", **({"responseJsonSchema": schema} if schema else {})}
    return {}


def answer_calls(parts: list[Any], first: int = 0) -> list[ToolCall]:
    """The functionCall parts as tool calls, indexed from `first` (Gemini may give no ids: made here)."""
    calls: list[ToolCall] = []
    for part in parts:
        call = part.get("functionCall") if isinstance(part, dict) else None
        if isinstance(call, dict):
            arguments_text = json_text(call.get("args") or {})
            calls.append(ToolCall(first + len(calls), str(call.get("id") or new_call_id()), str(call["name"]),
                                  arguments_text))  # fmt: skip
    return calls


def _user_parts(content: Any, param: str, refuse: Refusal) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for j, part in enumerate(content_parts(content)):
        kind = part.get("type")
        inline = None
        if kind == "text":
            if part.get("text"):
                parts.append({"text": str(part["text"])})
            continue
        if kind == "image_url":
            inline = data_url(str((part.get("image_url") or {}).get("url", "")))
        elif kind == "file":
            inline = data_url(str((part.get("file") or {}).get("file_data", "")))
        elif kind == "input_audio":
            audio = part.get("input_audio") or {}
            media_type = _AUDIO_TYPES.get(str(audio.get("format")), f"audio/{audio.get('format')}")
            inline = (media_type, str(audio.get("data", "")))
        if inline is None:
            what = {"image_url": "images by URL", "file": "file ids"}.get(str(kind), f"'{kind}' parts")
            raise refuse(f"{param}[{j}]", f"{refuse.api} takes text and inline data (data: URLs), not {what}")
        parts.append({"inlineData": {"mimeType": inline[0], "data": inline[1]}})
    return parts


def _model_parts(message: dict[str, Any], param: str, refuse: Refusal) -> list[dict[str, Any]]:
    text = text_of(message.get("content"), f"{param}.content", refuse)
    parts: list[dict[str, Any]] = [{"text": text}] if text else []
    for k, call in enumerate(message.get("tool_calls") or []):
        name = str((call.get("function") or {}).get("name"))
        parts.append({"functionCall": {"name": name, "args": arguments(call, f"{param}.tool_calls[{k}]", refuse)}})
    return parts


def _function_response(message: dict[str, Any], names: dict[str, str], param: str, refuse: Refusal) -> dict[str, Any]:
    """A tool result answers a call by name: the name of the earlier call with its id. A result
    that is a JSON object is sent as it is; any other text as {"content": text}."""
    name = names.get(str(message.get("tool_call_id")))
    if name is None:
        raise refuse(f"{param}.tool_call_id", "no earlier assistant message has a tool call with this id")
    text = text_of(message.get("content"), f"{param}.content", refuse)
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        value = None
    response = value if isinstance(value, dict) else {"content": text}
    return {"functionResponse": {"name": name, "response": response}}
