"""Input items (and stored output items) of the Responses API as chat messages.

`input` is a string (one user message) or items: messages by role with input_text, input_image and
input_file parts (output_text and refusal in an assistant's), `function_call` and
`function_call_output` (their `call_id` is the chat `tool_call_id`), and `reasoning` items, which a
chat upstream has no place for and so is not sent. Consecutive function calls become one assistant
message with several `tool_calls`, as a chat model writes them. Every problem is a 400 naming the
item's own path (`input[2].content[0].image_url`).
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.api.errors import InvalidRequest

Item = dict[str, Any]
Message = dict[str, Any]
# (chat holder, its key, item holder, its key): a text copied from an item into the chat body, so
# that what the input guardrails did to it (a redaction) is what gets stored (`write_back`).
Link = tuple[dict[str, Any], str, dict[str, Any], str]
ROLES = ("user", "system", "developer", "assistant")
ITEM_TYPES = (
    "message",
    "function_call",
    "function_call_output",
    "reasoning",
    "custom_tool_call",
    "custom_tool_call_output",
)


def input_items(value: str | list[Any]) -> list[Item]:
    """`input` as a list of items (a string is one user message), each checked."""
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    for index, item in enumerate(value):
        check_item(item, f"input[{index}]")
    return list(value)


def to_messages(
    items: list[Item], names: dict[tuple[str, str], str] | None = None, links: list[Link] | None = None
) -> list[Message]:
    """Chat messages for items already checked; `names`: (namespace, name) -> the flattened tool
    name; `links` gets every text copied (when given)."""
    messages: list[Message] = []
    found: list[Link] = [] if links is None else links
    for item in items:
        kind = item.get("type", "message")
        if kind == "message":
            messages.append(_message(item, found))
        elif kind in ("function_call", "custom_tool_call"):
            call = _tool_call(item, names or {})
            _add_call(messages, call)
            if kind == "function_call":
                found.append((call["function"], "arguments", item, "arguments"))
            else:
                found.append((call["custom"], "input", item, "input"))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            message = {"role": "tool", "tool_call_id": item["call_id"], "content": _output_text(item["output"])}
            messages.append(message)
            found.append((message, "content", item, "output"))
        # reasoning: the chat API has no input for it; the model's earlier thoughts are not resent
    return messages


def write_back(links: list[Link]) -> None:
    """Each text the chat body now holds otherwise (a guardrail redacted it) replaces the item's."""
    for chat, chat_key, item, item_key in links:
        value = chat.get(chat_key)
        if isinstance(value, str) and value != item.get(item_key):
            item[item_key] = value


def _bad(path: str, message: str) -> InvalidRequest:
    return InvalidRequest(f"Invalid '{path}': {message}.", param=path, code="invalid_value")


def check_item(item: Any, path: str) -> None:
    """A 400 naming the problem unless `item` (at `path`) is an input item the bridge can carry."""
    if not isinstance(item, dict):
        raise _bad(path, "each input item must be an object")
    kind = item.get("type", "message")
    if kind not in ITEM_TYPES:
        shown = orjson.dumps(kind).decode()[:60]
        raise _bad(f"{path}.type", f"must be one of {', '.join(ITEM_TYPES)} (got {shown})")
    if kind == "message":
        _check_message(item, path)
    elif kind in ("function_call", "custom_tool_call"):
        _require_str(item, "call_id", path)
        _require_str(item, "name", path)
        _require_str(item, "arguments" if kind == "function_call" else "input", path, empty=True)
    elif kind in ("function_call_output", "custom_tool_call_output"):
        _require_str(item, "call_id", path)
        output = item.get("output")
        if not isinstance(output, (str, list)):
            raise _bad(f"{path}.output", "must be a string or an array of content parts")
    elif not isinstance(item.get("summary", []), list):
        raise _bad(f"{path}.summary", "must be an array")


def _require_str(item: Item, field: str, path: str, *, empty: bool = False) -> None:
    value = item.get(field)
    if not isinstance(value, str) or (not empty and not value):
        raise _bad(f"{path}.{field}", "is required (a string)" if value is None else "must be a non-empty string")


def _check_message(item: Item, path: str) -> None:
    role = item.get("role")
    if role not in ROLES:
        raise _bad(f"{path}.role", f"must be one of {', '.join(ROLES)}")
    content = item.get("content")
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise _bad(f"{path}.content", "must be a string or an array of content parts")
    allowed = ("output_text", "refusal") if role == "assistant" else ("input_text", "input_image", "input_file")
    for index, part in enumerate(content):
        where = f"{path}.content[{index}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if not isinstance(kind, str) or kind not in allowed:
            raise _bad(f"{where}.type", f"must be one of {', '.join(allowed)}")
        _check_part(part, kind, where)


def _check_part(part: Item, kind: str, where: str) -> None:
    if kind in ("input_text", "output_text"):
        _require_str(part, "text", where, empty=True)
    elif kind == "refusal":
        _require_str(part, "refusal", where, empty=True)
    elif kind == "input_image" and not isinstance(part.get("image_url"), str):
        # A file_id names a file stored at OpenAI: nothing a chat upstream could fetch.
        raise _bad(f"{where}.image_url", "is required (a URL or a data: URL); file_id images cannot be bridged")
    elif kind == "input_file":
        if part.get("file_url") is not None:
            raise _bad(f"{where}.file_url", "cannot be bridged to a chat deployment: send file_data instead")
        if not isinstance(part.get("file_data"), str) and not isinstance(part.get("file_id"), str):
            raise _bad(where, "an input_file needs file_data (or file_id)")


def _message(item: Item, links: list[Link]) -> Message:
    role = "system" if item["role"] == "developer" else item["role"]
    content = item["content"]
    message: Message
    if isinstance(content, str):
        message = {"role": role, "content": content}
        links.append((message, "content", item, "content"))
        return message
    if role == "assistant":
        texts = [part["text"] for part in content if part["type"] == "output_text"]
        refusals = [part["refusal"] for part in content if part["type"] == "refusal"]
        message = {"role": "assistant", "content": "".join(texts)}
        if refusals and not texts:
            return {"role": "assistant", "content": None, "refusal": "".join(refusals)}
        links.append((message, "content", item, "content"))  # joined: a redaction stores the whole as one
        return message
    if role == "system":
        message = {"role": role, "content": "".join(p["text"] for p in content if p["type"] == "input_text")}
        links.append((message, "content", item, "content"))
        return message
    return {"role": role, "content": [_part(part, links) for part in content]}


def _part(part: Item, links: list[Link]) -> dict[str, Any]:
    if part["type"] == "input_text":
        text = {"type": "text", "text": part["text"]}
        links.append((text, "text", part, "text"))
        return text
    if part["type"] == "input_image":
        image: dict[str, Any] = {"url": part["image_url"]}
        if part.get("detail") in ("auto", "low", "high"):
            image["detail"] = part["detail"]
        return {"type": "image_url", "image_url": image}
    file = {field: part[field] for field in ("file_data", "file_id", "filename") if isinstance(part.get(field), str)}
    return {"type": "file", "file": file}


def _tool_call(item: Item, names: dict[tuple[str, str], str]) -> dict[str, Any]:
    name = item["name"]
    namespace = item.get("namespace")
    if isinstance(namespace, str):
        name = names.get((namespace, name), name)
    if item.get("type") == "custom_tool_call":
        return {"id": item["call_id"], "type": "custom", "custom": {"name": name, "input": item["input"]}}
    return {"id": item["call_id"], "type": "function", "function": {"name": name, "arguments": item["arguments"]}}


def _add_call(messages: list[Message], call: dict[str, Any]) -> None:
    last = messages[-1] if messages else None
    if last is not None and last["role"] == "assistant" and "refusal" not in last:
        last.setdefault("tool_calls", []).append(call)
        if last.get("content") == "":
            last["content"] = None
        return
    messages.append({"role": "assistant", "content": None, "tool_calls": [call]})


def _output_text(output: str | list[Any]) -> str:
    if isinstance(output, str):
        return output
    return "".join(str(part.get("text", "")) for part in output if isinstance(part, dict))


def stored_form(item: Item, item_id: str) -> Item:
    """An input item as `input_items` lists it: with an id and a status, a message's text as parts."""
    kind = item.get("type", "message")
    found: Item = {"id": item.get("id") or item_id, **item, "type": kind}
    if kind == "message":
        found["status"] = "completed"
        if isinstance(found["content"], str):
            part = "output_text" if found["role"] == "assistant" else "input_text"
            found["content"] = [{"type": part, "text": found["content"]}]
    elif kind in ("function_call", "function_call_output"):
        found.setdefault("status", "completed")
    return found
