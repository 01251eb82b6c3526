"""The texts of a (valid) Messages body that its model reads, each where it sits, so that an input
redaction made on the chat view can be written into the body an Anthropic deployment is sent as
it came (`gateway.pipeline.native.redaction`), leaving `cache_control` and thinking as they were.

Read: `system` (a string, or its blocks' texts), each turn's string content and its blocks' texts
(a text block; a document's text source and title; an image's URL; a tool result's content, a
string or its text blocks; every string of a `tool_use` input, its keys `fixed`), each tool's
description and every string of its input schema (keys `fixed`), `metadata.user_id` and
`stop_sequences`: what the chat view (`gateway.api.messages.request`) carries, piece by piece.
Not read: identifiers (ids, tool names, types), `cache_control`, media bytes, and thinking and
redacted_thinking blocks: the model's own earlier output, signed by Anthropic (a rewritten one is
refused when sent back), going back to where it came from.
"""

from __future__ import annotations

from typing import Any


class BodyText:
    """One text: `holder[key]`, named by `path` as validation errors name fields."""

    __slots__ = ("fixed", "holder", "key", "path", "system")

    def __init__(self, holder: Any, key: Any, path: str, *, fixed: bool = False, system: bool = False) -> None:
        self.holder = holder
        self.key = key
        self.path = path
        self.fixed = fixed  # an object key: never rewritten (a redaction of one refuses the request)
        self.system = system  # in `system`: the application's own instructions

    @property
    def value(self) -> str:
        if self.fixed:
            return str(self.key)
        value: str = self.holder[self.key]
        return value

    def set(self, text: str) -> None:
        self.holder[self.key] = text


def body_texts(body: dict[str, Any]) -> list[BodyText]:
    """Every text of `body` (see the module), in the body's order."""
    found: list[BodyText] = []
    system = body.get("system")
    if isinstance(system, str):
        found.append(BodyText(body, "system", "system", system=True))
    elif isinstance(system, list):
        for position, block in enumerate(system):
            _string(block, "text", f"system[{position}]", found, system=True)
    for position, turn in enumerate(body.get("messages") or ()):
        if isinstance(turn, dict):
            _turn(turn, f"messages[{position}]", found)
    for position, tool in enumerate(body.get("tools") or ()):
        if isinstance(tool, dict):
            _string(tool, "description", f"tools[{position}]", found)
            _free(tool.get("input_schema"), f"tools[{position}].input_schema", found)
    metadata = body.get("metadata")
    if isinstance(metadata, dict):
        _string(metadata, "user_id", "metadata", found)
    stops = body.get("stop_sequences")
    if isinstance(stops, list):
        _free(stops, "stop_sequences", found)
    return found


def _turn(turn: dict[str, Any], at: str, found: list[BodyText]) -> None:
    content = turn.get("content")
    if isinstance(content, str):
        found.append(BodyText(turn, "content", f"{at}.content"))
        return
    for position, block in enumerate(content if isinstance(content, list) else ()):
        if isinstance(block, dict):
            _block(block, f"{at}.content[{position}]", found)


def _block(block: dict[str, Any], at: str, found: list[BodyText]) -> None:
    kind = block.get("type")
    if kind == "text":
        _string(block, "text", at, found)
    elif kind == "tool_use":
        _free(block.get("input"), f"{at}.input", found)
    elif kind == "tool_result":
        content = block.get("content")
        if isinstance(content, str):
            found.append(BodyText(block, "content", f"{at}.content"))
        for position, inner in enumerate(content if isinstance(content, list) else ()):
            if isinstance(inner, dict) and inner.get("type") == "text":
                _string(inner, "text", f"{at}.content[{position}]", found)
    elif kind in ("document", "image"):
        source = block.get("source")
        if isinstance(source, dict) and source.get("type") in ("text", "url"):
            _string(source, "data" if source["type"] == "text" else "url", f"{at}.source", found)
        if kind == "document":
            _string(block, "title", at, found)


def _string(holder: Any, name: str, at: str, found: list[BodyText], *, system: bool = False) -> None:
    if isinstance(holder, dict) and isinstance(holder.get(name), str):
        found.append(BodyText(holder, name, f"{at}.{name}", system=system))


def _free(value: Any, at: str, found: list[BodyText]) -> None:
    """Free-form JSON: every string, and every key (fixed) before the value it names."""
    if isinstance(value, dict):
        for name, item in value.items():
            found.append(BodyText(value, name, at, fixed=True))
            if isinstance(item, str):
                found.append(BodyText(value, name, f"{at}.{name}"))
            else:
                _free(item, f"{at}.{name}", found)
    elif isinstance(value, list):
        for position, item in enumerate(value):
            if isinstance(item, str):
                found.append(BodyText(value, position, f"{at}[{position}]"))
            else:
                _free(item, f"{at}[{position}]", found)
