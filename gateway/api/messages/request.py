"""A Messages request, validated and translated into the chat request the pipeline serves.

Each rule broken is a `FieldError` naming the field as the body spells it (`messages[2].content[0].
source.media_type`), which the handler answers with Anthropic's 400. The translation:

- `system` (a string or text blocks) -> one system message first; `cache_control` is a hint chat
  upstreams have no place for (they cache prefixes on their own).
- a user turn's `tool_result` blocks -> `tool` messages (in order, before the turn's other blocks);
  `is_error` -> the result's text prefixed with `Error: `; text and image blocks -> content parts
  (base64 -> a data URL); a `document` -> a text part (text source) or a file part (base64 PDF).
- an assistant turn's text -> its content, `tool_use` -> `tool_calls` (the input as JSON arguments);
  `thinking` / `redacted_thinking` of earlier turns are not sent (Anthropic drops them as well).
- `stop_sequences` -> `stop`, `metadata.user_id` -> `user`, `tools` -> function tools,
  `tool_choice` auto/any/tool/none -> auto/required/{function}/none, `disable_parallel_tool_use` ->
  `parallel_tool_calls: false`, `top_k` kept (vLLM-style upstreams read it), `stream` with usage.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.api.schemas import FieldError

ROLES = ("user", "assistant", "system")  # a system turn among the messages: what Claude Code 2 sends
IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
TOOL_CHOICES = ("auto", "any", "tool", "none")
_CHAT_ONLY = "deployments served through the chat API"


# Top-level fields the translation carries to chat (or validates and answers for itself).
TRANSLATED = frozenset(
    {"model", "max_tokens", "system", "messages", "stop_sequences", "temperature", "top_p", "top_k", "tools"}
    | {"tool_choice", "metadata", "stream", "thinking"}
)


def untranslated(body: dict[str, Any]) -> list[str]:
    """The fields of a (valid) Messages body that a chat upstream is not sent: those only Anthropic
    acts on (`context_management`, `output_config`, `container`, `service_tier`, …) and `thinking`
    unless it is disabled (a chat upstream reasons as it does). Named to the client, never dropped
    in silence."""
    names = [name for name in body if name not in TRANSLATED]
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") != "disabled":
        names.append("thinking")
    return sorted(names)


def to_chat(body: dict[str, Any]) -> dict[str, Any]:
    """The chat request for a Messages body, or `FieldError` naming the first field that is wrong."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise FieldError("model", "model: Field required (a non-empty string).")
    max_tokens = body.get("max_tokens")
    if type(max_tokens) is not int or max_tokens < 1:
        raise FieldError("max_tokens", "max_tokens: Field required (an integer of at least 1).")
    chat: dict[str, Any] = {"model": model, "max_tokens": max_tokens}
    messages: list[dict[str, Any]] = []
    system = body.get("system")
    if system is not None:
        text = _system_text(system)
        if text:
            messages.append({"role": "system", "content": text})
    turns = body.get("messages")
    if not isinstance(turns, list) or not turns:
        raise FieldError("messages", "messages: Field required (a non-empty list of user and assistant turns).")
    for position, turn in enumerate(turns):
        messages.extend(_turn(turn, f"messages[{position}]"))
    chat["messages"] = messages
    _sampling(body, chat)
    _tools(body, chat)
    metadata = body.get("metadata")
    if metadata is not None:
        if not isinstance(metadata, dict):
            raise FieldError("metadata", "metadata: must be an object.")
        user = metadata.get("user_id")
        if user is not None:
            if not isinstance(user, str):
                raise FieldError("metadata.user_id", "metadata.user_id: must be a string.")
            chat["user"] = user
    thinking = body.get("thinking")
    if thinking is not None:
        _check_thinking(thinking)
    stream = body.get("stream")
    if stream is not None:
        if not isinstance(stream, bool):
            raise FieldError("stream", "stream: must be a boolean.")
        if stream:
            chat["stream"] = True
            chat["stream_options"] = {"include_usage": True}
    return chat


def _system_text(system: Any, field: str = "system") -> str:
    if isinstance(system, str):
        return system
    if not isinstance(system, list):
        raise FieldError(field, f"{field}: must be a string or a list of text blocks.")
    texts = []
    for position, block in enumerate(system):
        where = f"{field}[{position}]"
        if not isinstance(block, dict) or block.get("type") != "text":
            raise FieldError(f"{where}.type", f"{where}.type: must be 'text'.")
        texts.append(_string(block, "text", where))
    return "\n\n".join(texts)


def _turn(turn: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(turn, dict):
        raise FieldError(where, f"{where}: must be an object with role and content.")
    role = turn.get("role")
    if role not in ROLES:
        raise FieldError(f"{where}.role", f"{where}.role: must be 'user', 'assistant' or 'system'.")
    content = turn.get("content")
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    if not isinstance(content, list):
        raise FieldError(f"{where}.content", f"{where}.content: must be a string or a list of content blocks.")
    if role == "system":
        return [{"role": "system", "content": _system_text(content, f"{where}.content")}]
    if role == "assistant":
        return [_assistant(content, where)]
    return _user(content, where)


def _user(blocks: list[Any], where: str) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for position, block in enumerate(blocks):
        at = f"{where}.content[{position}]"
        kind = _kind(block, at)
        if kind == "tool_result":
            results.append(_tool_result(block, at))
        elif kind == "text":
            parts.append({"type": "text", "text": _string(block, "text", at)})
        elif kind == "image":
            parts.append(_image(block, at))
        elif kind == "document":
            parts.append(_document(block, at))
        elif kind in ("thinking", "redacted_thinking", "tool_use"):
            raise FieldError(f"{at}.type", f"{at}.type: a {kind} block belongs to an assistant turn.")
        else:
            raise FieldError(f"{at}.type", f"{at}.type: unknown content block type '{kind}'.")
    if parts and all(part["type"] == "text" for part in parts) and len(parts) == 1:
        return [*results, {"role": "user", "content": parts[0]["text"]}]
    return [*results, {"role": "user", "content": parts}] if parts else results


def _assistant(blocks: list[Any], where: str) -> dict[str, Any]:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for position, block in enumerate(blocks):
        at = f"{where}.content[{position}]"
        kind = _kind(block, at)
        if kind == "text":
            texts.append(_string(block, "text", at))
        elif kind == "tool_use":
            tool_input = block.get("input")
            if not isinstance(tool_input, dict):
                raise FieldError(f"{at}.input", f"{at}.input: must be an object.")
            calls.append(
                {
                    "id": _string(block, "id", at),
                    "type": "function",
                    "function": {"name": _string(block, "name", at), "arguments": orjson.dumps(tool_input).decode()},
                }
            )
        elif kind == "thinking":
            _string(block, "thinking", at)
        elif kind == "redacted_thinking":
            _string(block, "data", at)
        else:
            raise FieldError(f"{at}.type", f"{at}.type: a {kind} block cannot be in an assistant turn.")
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts or not calls else None}
    if calls:
        message["tool_calls"] = calls
    return message


def _tool_result(block: dict[str, Any], at: str) -> dict[str, Any]:
    call_id = _string(block, "tool_use_id", at)
    content = block.get("content", "")
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        pieces = []
        for position, inner in enumerate(content):
            inner_at = f"{at}.content[{position}]"
            kind = _kind(inner, inner_at)
            if kind == "text":
                pieces.append(_string(inner, "text", inner_at))
            elif kind in ("image", "document"):
                raise FieldError(
                    f"{inner_at}.type",
                    f"{inner_at}.type: a tool result's {kind} cannot go to {_CHAT_ONLY} (tool messages hold text).",
                )
            else:
                raise FieldError(f"{inner_at}.type", f"{inner_at}.type: must be 'text', 'image' or 'document'.")
        text = "\n".join(pieces)
    else:
        raise FieldError(f"{at}.content", f"{at}.content: must be a string or a list of content blocks.")
    is_error = block.get("is_error")
    if is_error is not None and not isinstance(is_error, bool):
        raise FieldError(f"{at}.is_error", f"{at}.is_error: must be a boolean.")
    return {"role": "tool", "tool_call_id": call_id, "content": f"Error: {text}" if is_error else text}


def _image(block: dict[str, Any], at: str) -> dict[str, Any]:
    source = _source(block, at)
    kind = source.get("type")
    if kind == "base64":
        media = source.get("media_type")
        if media not in IMAGE_TYPES:
            raise FieldError(
                f"{at}.source.media_type", f"{at}.source.media_type: must be one of {', '.join(IMAGE_TYPES)}."
            )
        data = _string(source, "data", f"{at}.source")
        return {"type": "image_url", "image_url": {"url": f"data:{media};base64,{data}"}}
    if kind == "url":
        return {"type": "image_url", "image_url": {"url": _string(source, "url", f"{at}.source")}}
    raise FieldError(f"{at}.source.type", f"{at}.source.type: an image's source must be 'base64' or 'url'.")


def _document(block: dict[str, Any], at: str) -> dict[str, Any]:
    source = _source(block, at)
    kind = source.get("type")
    if kind == "text":
        return {"type": "text", "text": _string(source, "data", f"{at}.source")}
    if kind == "base64" and source.get("media_type") == "application/pdf":
        data = _string(source, "data", f"{at}.source")
        title = block.get("title")
        name = title if isinstance(title, str) and title else "document.pdf"
        return {"type": "file", "file": {"filename": name, "file_data": f"data:application/pdf;base64,{data}"}}
    raise FieldError(
        f"{at}.source",
        f"{at}.source: {_CHAT_ONLY} take a document as text or a base64 PDF, not a '{kind}' source.",
    )


def _source(block: dict[str, Any], at: str) -> dict[str, Any]:
    source = block.get("source")
    if not isinstance(source, dict):
        raise FieldError(f"{at}.source", f"{at}.source: Field required (an object).")
    return source


def _sampling(body: dict[str, Any], chat: dict[str, Any]) -> None:
    for name, low, high in (("temperature", 0.0, 1.0), ("top_p", 0.0, 1.0)):
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
            raise FieldError(name, f"{name}: must be a number from {low:g} to {high:g}.")
        chat[name] = value
    top_k = body.get("top_k")
    if top_k is not None:
        if type(top_k) is not int or top_k < 0:
            raise FieldError("top_k", "top_k: must be a non-negative integer.")
        chat["top_k"] = top_k
    stops = body.get("stop_sequences")
    if stops is not None:
        if not isinstance(stops, list) or not all(isinstance(stop, str) and stop for stop in stops):
            raise FieldError("stop_sequences", "stop_sequences: must be a list of non-empty strings.")
        if stops:
            chat["stop"] = stops


def _tools(body: dict[str, Any], chat: dict[str, Any]) -> None:
    tools = body.get("tools")
    names: list[str] = []
    if tools is not None:
        if not isinstance(tools, list):
            raise FieldError("tools", "tools: must be a list.")
        functions = []
        for position, tool in enumerate(tools):
            at = f"tools[{position}]"
            if not isinstance(tool, dict):
                raise FieldError(at, f"{at}: must be an object.")
            kind = tool.get("type")
            if kind not in (None, "custom"):
                raise FieldError(
                    f"{at}.type", f"{at}.type: the server tool '{kind}' runs only on Anthropic, not on {_CHAT_ONLY}."
                )
            name = _string(tool, "name", at)
            schema = tool.get("input_schema")
            if not isinstance(schema, dict):
                raise FieldError(f"{at}.input_schema", f"{at}.input_schema: Field required (a JSON schema object).")
            function: dict[str, Any] = {"name": name, "parameters": schema}
            description = tool.get("description")
            if description is not None:
                if not isinstance(description, str):
                    raise FieldError(f"{at}.description", f"{at}.description: must be a string.")
                function["description"] = description
            functions.append({"type": "function", "function": function})
            names.append(name)
        if functions:
            chat["tools"] = functions
    choice = body.get("tool_choice")
    if choice is None:
        return
    if not isinstance(choice, dict) or choice.get("type") not in TOOL_CHOICES:
        raise FieldError("tool_choice.type", "tool_choice.type: must be 'auto', 'any', 'tool' or 'none'.")
    kind = choice["type"]
    if kind == "tool":
        name = _string(choice, "name", "tool_choice")
        if name not in names:
            raise FieldError("tool_choice.name", f"tool_choice.name: no tool named '{name}' in tools.")
        chat["tool_choice"] = {"type": "function", "function": {"name": name}}
    else:
        chat["tool_choice"] = {"auto": "auto", "any": "required", "none": "none"}[kind]
    parallel = choice.get("disable_parallel_tool_use")
    if parallel is not None:
        if not isinstance(parallel, bool):
            raise FieldError(
                "tool_choice.disable_parallel_tool_use", "tool_choice.disable_parallel_tool_use: must be a boolean."
            )
        if parallel and names:
            chat["parallel_tool_calls"] = False


def _check_thinking(thinking: Any) -> None:
    if not isinstance(thinking, dict) or thinking.get("type") not in ("enabled", "disabled", "adaptive"):
        raise FieldError("thinking.type", "thinking.type: must be 'enabled', 'disabled' or 'adaptive'.")
    if thinking["type"] == "enabled":
        budget = thinking.get("budget_tokens")
        if type(budget) is not int or budget < 1024:
            raise FieldError("thinking.budget_tokens", "thinking.budget_tokens: must be an integer of at least 1024.")


def _kind(block: Any, at: str) -> str:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise FieldError(f"{at}.type", f"{at}.type: Field required (a content block's type).")
    kind: str = block["type"]
    return kind


def _string(holder: dict[str, Any], name: str, at: str) -> str:
    value = holder.get(name)
    if not isinstance(value, str):
        raise FieldError(f"{at}.{name}", f"{at}.{name}: Field required (a string).")
    return value
