"""What every translation of chat messages shares: content as parts, data: URLs, tool-call
arguments as objects, the declared functions, and the 400 for what a foreign API cannot take,
naming the exact field (`messages[2].content[1]`, `tools[0].type`…)."""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from typing import Any

import orjson

from gateway.api.errors import InvalidRequest

_DATA_URL = re.compile(r"^data:(?P<type>[\w.+-]+/[\w.+-]+)(?:;[\w=.+-]+)*;base64,(?P<data>.*)$", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Refusal:
    """Makes the 400 for a part of a chat body the deployment's API cannot take."""

    deployment: str
    api: str

    def __call__(self, param: str, reason: str) -> InvalidRequest:
        return InvalidRequest(
            f"The deployment '{self.deployment}' cannot honour '{param}': {reason}.",
            param=param,
            code="unsupported_parameter",
        )


@dataclass(frozen=True, slots=True)
class Function:
    name: str
    description: str | None
    parameters: dict[str, Any] | None  # a JSON Schema object


def content_parts(content: Any) -> list[dict[str, Any]]:
    """A message's content as a list of parts (a string is one text part; null is none)."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return [part for part in content if isinstance(part, dict)]


def text_of(content: Any, param: str, refuse: Refusal) -> str:
    """The text of content that may hold only text (system messages, tool results, …)."""
    pieces = []
    for j, part in enumerate(content_parts(content)):
        if part.get("type") != "text":
            raise refuse(f"{param}[{j}]", f"{refuse.api} takes only text in this message, not '{part.get('type')}'")
        pieces.append(str(part.get("text", "")))
    return "".join(pieces)


def data_url(url: str) -> tuple[str, str] | None:
    """(media type, base64 data) of a `data:` URL, None for any other URL."""
    match = _DATA_URL.match(url)
    return None if match is None else (match["type"], match["data"])


def arguments(call: dict[str, Any], param: str, refuse: Refusal) -> dict[str, Any]:
    """A tool call's `function.arguments` (a JSON text) as the object foreign APIs take."""
    text = (call.get("function") or {}).get("arguments") or "{}"
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise refuse(f"{param}.function.arguments", f"{refuse.api} takes the arguments as a JSON object")
    return value


def functions(body: dict[str, Any], refuse: Refusal) -> list[Function]:
    """The body's `tools`, which must all be functions."""
    declared = []
    for i, tool in enumerate(body.get("tools") or []):
        if tool.get("type") != "function":
            raise refuse(f"tools[{i}].type", f"{refuse.api} takes only function tools, not '{tool.get('type')}'")
        function = tool.get("function") or {}
        declared.append(Function(str(function.get("name")), function.get("description"), function.get("parameters")))
    return declared


def forced_function(body: dict[str, Any]) -> str | None:
    """The function `tool_choice` names ({"type": "function", "function": {"name"}}), if it names one."""
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        return str((choice.get("function") or {}).get("name"))
    return None


def tool_call_names(messages: list[dict[str, Any]]) -> dict[str, str]:
    """The function name of each earlier tool call, by id: what a tool result answers."""
    return {
        str(call.get("id")): str((call.get("function") or {}).get("name"))
        for message in messages
        if message.get("role") == "assistant"
        for call in message.get("tool_calls") or []
    }


def new_call_id() -> str:
    return "call_" + secrets.token_hex(12)


def json_text(value: Any) -> str:
    return orjson.dumps(value).decode()
