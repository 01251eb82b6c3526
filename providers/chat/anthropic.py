"""Chat messages and tools as Anthropic's Messages API takes them, and its content blocks back.

system / developer messages → the top-level `system` (joined, in order); user content parts →
text, image (a `data:` URL as a base64 source, any other URL as a url source) and document (a PDF
`file_data`) blocks; an assistant's `tool_calls` → `tool_use` blocks; tool messages →
`tool_result` blocks of a user turn. Consecutive turns of one role are merged into one, as the API
would. Audio, file ids and non-function tools cannot be sent: a 400 naming the field.
"""

from __future__ import annotations

from typing import Any

from providers.chat.messages import (
    Refusal,
    arguments,
    content_parts,
    data_url,
    forced_function,
    functions,
    json_text,
    text_of,
)
from providers.completion_shape import ToolCall


def conversation(body: dict[str, Any], refuse: Refusal) -> tuple[list[str], list[dict[str, Any]]]:
    """(the system texts, the user/assistant turns) of the body's `messages`."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for i, message in enumerate(body.get("messages") or []):
        role, param = message.get("role"), f"messages[{i}]"
        if role in ("system", "developer"):
            system.append(text_of(message.get("content"), f"{param}.content", refuse))
            continue
        if role == "user":
            blocks = _user_blocks(message.get("content"), f"{param}.content", refuse)
        elif role == "assistant":
            blocks = _assistant_blocks(message, param, refuse)
        elif role == "tool":
            result = text_of(message.get("content"), f"{param}.content", refuse)
            tool_result: dict[str, Any] = {"type": "tool_result", "tool_use_id": str(message.get("tool_call_id"))}
            blocks = [{**tool_result, "content": result} if result else tool_result]
            role = "user"
        else:
            raise refuse(f"{param}.role", f"{refuse.api} has no '{role}' messages")
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"] += blocks
        else:
            turns.append({"role": role, "content": blocks})
    for turn in turns:  # a turn of one text is sent as a string, as the API's examples do
        if len(turn["content"]) == 1 and turn["content"][0]["type"] == "text":
            turn["content"] = turn["content"][0]["text"]
    return system, turns


def tool_fields(body: dict[str, Any], refuse: Refusal) -> dict[str, Any]:
    """`tools` and `tool_choice` in Anthropic's words (nothing when the body declares no tools)."""
    declared = functions(body, refuse)
    if not declared:
        return {}
    tools = []
    for function in declared:
        tool: dict[str, Any] = {"name": function.name}
        if function.description:
            tool["description"] = function.description
        tool["input_schema"] = function.parameters or {"type": "object", "properties": {}}
        tools.append(tool)
    choice = body.get("tool_choice")
    named = forced_function(body)
    if named is not None:
        tool_choice: dict[str, Any] = {"type": "tool", "name": named}
    else:
        tool_choice = {"type": {"none": "none", "required": "any"}.get(str(choice), "auto")}
    if body.get("parallel_tool_calls") is False and tool_choice["type"] != "none":
        tool_choice["disable_parallel_tool_use"] = True
    fields: dict[str, Any] = {"tools": tools}
    if choice is not None or len(tool_choice) > 1:
        fields["tool_choice"] = tool_choice
    return fields


def answer_content(content: list[Any]) -> tuple[str, list[ToolCall]]:
    """The text (thinking left out) and the tool calls of a message's content blocks."""
    text: list[str] = []
    calls: list[ToolCall] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            text.append(str(block.get("text", "")))
        elif block.get("type") == "tool_use":
            calls.append(ToolCall(len(calls), str(block["id"]), str(block["name"]), json_text(block.get("input", {}))))
    return "".join(text), calls


def _user_blocks(content: Any, param: str, refuse: Refusal) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for j, part in enumerate(content_parts(content)):
        kind = part.get("type")
        if kind == "text":
            if part.get("text"):  # the API refuses empty text blocks
                blocks.append({"type": "text", "text": str(part["text"])})
        elif kind == "image_url":
            url = str((part.get("image_url") or {}).get("url", ""))
            inline = data_url(url)
            source: dict[str, str] = (
                {"type": "base64", "media_type": inline[0], "data": inline[1]}
                if inline
                else {"type": "url", "url": url}
            )
            blocks.append({"type": "image", "source": source})
        elif kind == "file" and data_url(str((part.get("file") or {}).get("file_data", ""))) is not None:
            media_type, data = data_url(str(part["file"]["file_data"])) or ("", "")
            blocks.append({"type": "document", "source": {"type": "base64", "media_type": media_type, "data": data}})
        else:
            what = "file ids" if kind == "file" else f"'{kind}' parts"
            raise refuse(f"{param}[{j}]", f"{refuse.api} takes text, images and inline documents, not {what}")
    return blocks


def _assistant_blocks(message: dict[str, Any], param: str, refuse: Refusal) -> list[dict[str, Any]]:
    text = text_of(message.get("content"), f"{param}.content", refuse)
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    for k, call in enumerate(message.get("tool_calls") or []):
        name = str((call.get("function") or {}).get("name"))
        blocks.append(
            {
                "type": "tool_use",
                "id": str(call.get("id")),
                "name": name,
                "input": arguments(call, f"{param}.tool_calls[{k}]", refuse),
            }
        )
    return blocks
