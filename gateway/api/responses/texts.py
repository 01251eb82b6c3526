"""The texts of a Responses body that its model reads, each where it sits, so that an input
redaction made on the chat view can be written into the body a native deployment is sent as it
came (`gateway.pipeline.native.redaction`).

Read: `instructions`, `input` (a string, or each item's: a message's string content and its parts'
text, refusal, http(s) image URL and file name; a function call's arguments, a custom tool call's
input, a tool output's string or its parts' text), each function and custom tool's description
and every string of its parameter schema or format (keys `fixed`; a namespace's tools likewise),
`text.format`'s description and schema, and `user`: what the chat view (`bridge`) carries, piece
by piece. An input item the bridge cannot carry (a built-in tool's call, an item reference, an
image by file id), which only a native deployment is sent, is read whole, each of its strings and
keys but its type, id, call id and status: not `viewed`, so checked on its own whatever the chat
view's checks did. Not read: identifiers, reasoning items (the model's own earlier output, going
back to where it came from), media bytes, built-in tools' settings, `metadata`.
"""

from __future__ import annotations

from typing import Any

from gateway.api.body_texts import BodyText, free_texts, string_at
from gateway.api.errors import InvalidRequest
from gateway.api.responses.items import check_item

_NOT_READ = frozenset({"type", "id", "call_id", "status"})  # an item's identifiers
_OUTPUTS = ("function_call_output", "custom_tool_call_output")


def bridgeable(item: Any, path: str) -> InvalidRequest | None:
    """Why the bridge cannot carry input item `item` (the 400 it gives); None when it can."""
    try:
        check_item(item, path)
    except InvalidRequest as problem:
        return problem
    return None


def body_texts(body: dict[str, Any]) -> list[BodyText]:
    """Every text of `body` (see the module), in the body's order."""
    found: list[BodyText] = []
    if isinstance(body.get("instructions"), str):
        found.append(BodyText(body, "instructions", "instructions", system=True))
    source = body.get("input")
    if isinstance(source, str):
        found.append(BodyText(body, "input", "input"))
    leading = True  # still among the leading system/developer messages: the application's instructions
    for position, item in enumerate(source if isinstance(source, list) else ()):
        at = f"input[{position}]"
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        leading = leading and kind == "message" and item.get("role") in ("system", "developer")
        if bridgeable(item, at) is not None:
            _whole(item, at, found)
        elif kind == "message":
            _message(item, at, found, leading)
        elif kind == "function_call":
            string_at(item, "arguments", at, found)
        elif kind == "custom_tool_call":
            string_at(item, "input", at, found)
        elif kind in _OUTPUTS:
            _content(item, "output", at, found)
    for position, tool in enumerate(body.get("tools") or ()):
        _tool(tool, f"tools[{position}]", found)
    text = body.get("text")
    answer_format = text.get("format") if isinstance(text, dict) else None
    if isinstance(answer_format, dict) and answer_format.get("type") == "json_schema":
        string_at(answer_format, "description", "text.format", found)
        free_texts(answer_format.get("schema"), "text.format.schema", found)
    if isinstance(body.get("user"), str):
        found.append(BodyText(body, "user", "user"))
    return found


def _message(item: dict[str, Any], at: str, found: list[BodyText], system: bool) -> None:
    if isinstance(item.get("content"), str):
        found.append(BodyText(item, "content", f"{at}.content", system=system))
        return
    for position, part in enumerate(item.get("content") or ()):
        where = f"{at}.content[{position}]"
        for name in ("text", "refusal", "filename"):
            string_at(part, name, where, found, system=system)
        url = part.get("image_url") if isinstance(part, dict) else None
        if isinstance(url, str) and not url.startswith("data:"):  # an image's bytes are no text
            string_at(part, "image_url", where, found, system=system)


def _content(item: dict[str, Any], name: str, at: str, found: list[BodyText]) -> None:
    """A tool output: a string, or parts whose text is read."""
    value = item.get(name)
    if isinstance(value, str):
        found.append(BodyText(item, name, f"{at}.{name}"))
    for position, part in enumerate(value if isinstance(value, list) else ()):
        string_at(part, "text", f"{at}.{name}[{position}]", found)


def _whole(item: dict[str, Any], at: str, found: list[BodyText]) -> None:
    """An item only the body carries: every string and key in it, but its identifiers."""
    for name, value in item.items():
        if name in _NOT_READ:
            continue
        found.append(BodyText(item, name, at, fixed=True, viewed=False))
        if isinstance(value, str):
            found.append(BodyText(item, name, f"{at}.{name}", viewed=False))
        else:
            free_texts(value, f"{at}.{name}", found, viewed=False)


def _tool(tool: Any, at: str, found: list[BodyText]) -> None:
    if not isinstance(tool, dict):
        return
    kind = tool.get("type")
    if kind == "namespace":
        for position, member in enumerate(tool.get("tools") or ()):
            _tool(member, f"{at}.tools[{position}]", found)
    elif kind in ("function", "custom"):  # built-in tools' settings are not the model's to read
        string_at(tool, "description", at, found)
        schema = "parameters" if kind == "function" else "format"
        free_texts(tool.get(schema), f"{at}.{schema}", found)
